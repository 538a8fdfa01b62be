/* keeper.h — the private contract between the agent's side of the rank
 * keeper (agent/keeper.c, agent/warm.c) and the keeper itself
 * (keeper/main.c, run.c, warm.c), which includes nothing of the agent's
 * but this. */
#ifndef HERD_KEEPER_H
#define HERD_KEEPER_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "herd/err.h"
#include "herd/proc.h"
#include "herd/proto.h"

/* The keeper's mode of the agent's image (herd-agent --keeper). */
#define KEEPER_ARG "--keeper"
/* NUMA nodes a rank may be told to prefer: below this only. */
#define KEEPER_MEM_NODES 1024

/* main() of `herd-agent --keeper --rank R` (agent/keeper.c says what it
 * is given); a program that links the agent's objects hands argv over
 * when argv[1] is KEEPER_ARG.  Never returns when started by an agent;
 * 2 when run by hand. */
int keeper_main(int argc, char **argv);

/* The spec's first string; /2: the cpu list is keeper.c's own "A-B,C"
 * form, parsed without hwloc. */
#define KEEPER_MAGIC "herd-keeper/2"
/* The spec holds at most a LAUNCH frame's command and environment plus
 * the agent's own environment: twice a frame is far above it, and far
 * below what would hurt a node. */
#define KEEPER_SPEC_MAX (2 * (size_t)PROTO_FRAME_MAX)

/* A warm slot's keeper: argv is
 *   SELF --keeper --warm AGENT_PID PYTHON BOOTSTRAP PRELOAD
 * (nothing secret: paths and module names), fd 0 is a SOCK_SEQPACKET
 * socket to the agent (warm.c), fds 1-3 and the signals as for any
 * keeper.  Keeper -> agent records: "R" the interpreter has imported
 * PRELOAD; "F" + why: it cannot (it exits); "D": the interpreter ended
 * (the agent then closes the socket, or has sent "L": cold); after a
 * handoff "K" the
 * interpreter is the rank, "C" the rank runs cold.  Agent -> keeper:
 * "L" with two fds (SCM_RIGHTS): the rank's spec (as for a cold
 * keeper) and the warm argv (KEEPER_WARM_MAGIC, the interpreter's path,
 * the command's word for it, the flags "u"/"B", the script, argc, the
 * args; each NUL-terminated).  EOF from the agent before "L": the slot is not
 * wanted; the keeper ends its group. */
#define KEEPER_WARM_ARG "--warm"
#define KEEPER_WARM_MAGIC "herd-warm/1"

/* The spec, split. */
struct keeper_spec {
	char *buf;
	pid_t agent;
	struct proc_opts rank; /* path, workdir, cpus, envp */
	cpu_set_t cpus;
	const char *cpus_text;	/* as the agent wrote it ("" none) */
	const char *mem_text;	/* the NUMA node ("" none) */
	bool has_mem;
	unsigned long mem_mask[KEEPER_MEM_NODES / (8 * sizeof(long)) + 1];
	char **argv;
	char **envp;
};

/* agent/keeper.c: the spec of k (agent/agent.h) in a new close-on-exec
 * memfd at offset 0, or -1 with err. */
struct keeper_rank;
int keeper_spec_fd(const struct keeper_rank *k, struct herd_err *err);

/* keeper/run.c */
/* Reads and checks the spec on fd 0.  Returns 0, or -1 with errno. */
int keeper_spec_read(struct keeper_spec *k);
void keeper_on_parent_death(int sig);
void keeper_fail(enum proc_step step, int e) __attribute__((noreturn));
/* Blocks the stop signals (they are the rank's). */
void keeper_block_stops(void);
/* Sends pid the stop signals pending here. */
void keeper_hand_on(pid_t pid);
/* Waits for the rank pid and exits as it did.  Never returns. */
void keeper_wait(pid_t pid) __attribute__((noreturn));
/* Forks the rank of k, execs it, waits for it.  Never returns. */
void keeper_cold(struct keeper_spec *k) __attribute__((noreturn));
/* keeper/warm.c: main() of a warm slot's keeper. */
int keeper_warm_main(int argc, char **argv);

#endif
