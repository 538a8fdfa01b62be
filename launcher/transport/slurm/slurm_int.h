/* slurm_int.h — what the parts of the Slurm transport share
 * (transport/slurm/slurm.c: the transport; slurm_conn.c: the listener,
 * the handshake and the relays; slurm_step.c: the srun steps).  Private
 * to launcher/transport/slurm/.  Everything runs on the controller's
 * thread: on its loop, or in free() once the loop has stopped. */
#ifndef HERD_LAUNCHER_SLURM_INT_H
#define HERD_LAUNCHER_SLURM_INT_H

#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "herd/auth.h"
#include "herd/loop.h"
#include "herd/preauth.h"
#include "herd/proc.h"
#include "herd/ratelog.h"
#include "launcher/transport/transport.h"

/* 32 KiB each way per agent: one read of a relayed stream.  Half of a
 * proto frame's output chunk; a frame simply takes two turns. */
#define SLURM_RELAY_BUF (32 * 1024)
/* srun's output lines are passed through cut at this many bytes. */
#define SLURM_LINE_MAX 1024
/* The kernel's queue of connections not accepted yet.  herd drains it on
 * every turn of the loop, so it only has to absorb a burst (a step of
 * many nodes starting at once). */
#define SLURM_LISTEN_BACKLOG 1024
/* Connections accepted per turn of the loop: a flood of strangers is
 * taken in slices, with the answers of connections already accepted
 * (herd's agents among them) read in between. */
#define SLURM_ACCEPT_BATCH 64
/* Pre-auth deadline: from accept to the agent's node name.  An agent
 * answers the challenge (sent at accept) within one round trip and names
 * its node after one more: milliseconds on a cluster network, so 3 s
 * leaves room for a loaded node and still frees a stranger's slot fast
 * (sshd's LoginGraceTime is 120 s because a person may be typing; here
 * nobody types).  An agent whose connection is dropped connects again
 * (agent/main.c), within its own AUTH_TIMEOUT_MS. */
#define SLURM_PREAUTH_MS 3000
/* Unauthenticated connections held at once: in all, and from one source
 * address (preauth.h says which one goes when a bound is hit).  A few
 * KiB each; 512 is far below the fd limit herd needs anyway, above the
 * agents of a 500-node step connecting in the same instant, and the
 * per-source bound keeps one flooding host (a hostile user on herd's own
 * node, say) to an eighth of it.  Legitimate agents from one address are
 * one per step, so 64 is never reached by them. */
#define SLURM_PREAUTH_MAX	 512
#define SLURM_PREAUTH_PER_SOURCE 64
/* "rejected a connection" lines: the first 5 as they come, then at most
 * one per 10 s saying how many were left out (3,000 strangers: a few
 * lines, not 3,000). */
#define SLURM_REFUSED_LOG_BURST 5
#define SLURM_REFUSED_LOG_MS	10000
/* Out of fds with nothing to drop: accepting pauses this long. */
#define SLURM_ACCEPT_PAUSE_MS 100
/* At free, what the controller queued for an agent (its STOP) gets this
 * long to reach the agent before the connection is closed. */
#define SLURM_RELAY_FLUSH_MS 500
/* At free, steps get this long to end by themselves (the agents exit
 * after STOP), then SIGTERM, then as long again before SIGKILL. */
#define SLURM_STEP_END_MS 3000
/* While the loop no longer runs (at free), srun's exit is looked for this
 * often. */
#define SLURM_REAP_POLL_MS 20

enum snode_state {
	SNODE_REGISTERED, /* start() done, waiting for commit() */
	SNODE_STARTED,	  /* its step is running, no agent yet */
	SNODE_CONNECTED,  /* an agent proved the secret; fd handed to a relay */
	SNODE_FAILED,	  /* its step ended first; error reported */
};

struct step;

/* One stream of srun's output: the line read so far. */
struct line_buf {
	char buf[SLURM_LINE_MAX];
	size_t len;
};

/* A node's lifecycle; snode_set_state() is the only writer. */
struct snode {
	char *host;
	int fd; /* our end of the socketpair; -1 once handed on or closed */
	enum snode_state state;
	struct step *step;
};

struct step {
	struct tslurm_priv *priv;
	int index;	    /* 0 for the first srun of the job */
	pid_t srun;	    /* leads the step's group */
	int out_fd, err_fd; /* srun's stdout, stderr; -1 once at EOF */
	/* The end of its output and its exit status, in either order; both
	 * in, the nodes are settled and ended is set. */
	bool output_done, exited;
	struct proc_exit exit;
	bool ended;		   /* srun is gone and its nodes are settled */
	char last[SLURM_LINE_MAX]; /* srun's last stderr line */
	struct line_buf lines[2];  /* stdout, stderr: the line so far */
	struct step *next;
};

struct sconn;

/* Everything runs on the controller's thread: on its loop, or in free()
 * once the loop has stopped. */
struct tslurm_priv {
	struct snode **nodes;
	size_t n_nodes, cap_nodes;
	struct step *steps;
	int n_steps;
	struct loop *loop; /* the controller's; borrowed */
	int listen_fd;
	bool accepting;
	long resume_timer; /* accepting paused for want of fds */
	char addr[NI_MAXHOST + NI_MAXSERV + 2]; /* ADDR:PORT for the agents */
	struct auth_secret secret;
	char *secret_env;     /* HERD_JOB_SECRET=HEX, for srun's envp only */
	struct preauth *pool; /* connections that have not proven the secret */
	struct sconn *conns;  /* every open connection: handshaking, relaying */
	struct ratelog refused;
	long refused_timer; /* the summary of suppressed "refused" lines */
	char refused_last[NI_MAXHOST + NI_MAXSERV + 160];
};

/* One direction of a relay: a chunk read and not yet all written. */
struct relay_buf {
	size_t off, len;
	char data[SLURM_RELAY_BUF];
};

/* One TCP connection: a handshake, then (an agent) a relay. */
struct sconn {
	struct tslurm_priv *priv;
	struct sconn *prev, *next;
	int fd;
	char peer[NI_MAXHOST + NI_MAXSERV + 4];
	struct preauth_src src;
	bool pooled;   /* counted in priv->pool */
	long deadline; /* timer id; 0 once the handshake is over */
	struct auth_ctl hs;
	/* The relay, once an agent proved the secret and named its node. */
	int pair;		/* the node's socketpair end; -1 until then */
	struct relay_buf *up;	/* agent -> controller */
	struct relay_buf *down; /* controller -> agent */
};

static inline int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* slurm.c: moves n to state to when its lifecycle allows it (the table
 * there).  Returns 0, or -1 and leaves n as it was. */
int snode_set_state(struct snode *n, enum snode_state to);

/* slurm_conn.c: opens the agents' listener (priv->addr, ADDR:PORT) on
 * priv->loop.  Returns 0, or -1 with err. */
int sconn_listen(struct tslurm_priv *priv, struct herd_err *err);
/* slurm_conn.c: closes one connection and frees it. */
void sconn_close(struct sconn *sc);
/* slurm_conn.c: at free, what the controller queued for the agent of sc
 * (its STOP) is sent until deadline (now_ms()), then the connection is
 * closed: the agent sees EOF and stops. */
void sconn_flush(struct sconn *sc, int64_t deadline);

/* slurm_step.c: reads one chunk of srun's stream i of st (one read a
 * turn) and passes its whole lines on; at EOF the last piece goes too and
 * the stream is closed. */
void sstep_read(struct step *st, int i);
/* slurm_step.c: fails every node of a batch that could not get a step. */
void sstep_fail_batch(struct tslurm_priv *priv, struct snode **batch, size_t n,
		      const char *why);
/* slurm_step.c: starts one srun step for the n registered nodes of
 * batch (they become STARTED).  Returns 0, or -1 with err. */
int sstep_start(struct transport *t, struct snode **batch, size_t n,
		struct herd_err *err);

#endif
