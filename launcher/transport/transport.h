/* transport.h — how herd starts one herd-agent per node, behind a small
 * table of functions (NULL: the back-end cannot do that).
 *
 * transport_start() returns at once with a socket that will carry the
 * agent's frames (proto.h); connecting, authenticating and starting the
 * agent happen in the background.  A transport that fails for a node
 * writes one PROTO_ERROR frame {"stage", "message"} on that socket and
 * closes it, so the controller sees every failure the same way, once,
 * with the node named and the likely fix in the message.  The stages
 * "setup", "auth" and "host key" are how herd is set up (a refused
 * connection, a name that does not resolve, a key, a host key), not the
 * node's health: the node record does not hold them against the node.
 *
 * Closing the socket tells the transport to hang up: the agent then sees
 * its input end and stops its ranks.
 */
#ifndef HERD_LAUNCHER_TRANSPORT_H
#define HERD_LAUNCHER_TRANSPORT_H

#include <stdbool.h>

#include "herd/err.h"
#include "herd/loop.h"
#include "herd/spec.h"

struct transport;

struct transport_ops {
	const char *name;
	/* Returns a connected socket owned by the caller, or -1 with err. */
	int (*start)(struct transport *t, const char *host,
		     struct herd_err *err);
	/* Called after a batch of start()s: a transport that starts all
	 * its agents at once (one srun step) does it here.  NULL: nothing
	 * to do. */
	void (*commit)(struct transport *t);
	/* Releases the transport (after every socket was closed). */
	void (*free)(struct transport *t);
};

struct transport {
	const struct transport_ops *ops;
	const struct spec *spec;	/* borrowed; outlives the transport */
	char *agent_path;		/* this herd's own herd-agent */
	bool verbose;			/* herd run -v; the caller sets it */
	/* The controller's event loop (the caller sets it before the first
	 * start()): a transport's sockets and timers are callbacks on it. */
	struct loop *loop;
	void *priv;
};

/* kind: "local", "ssh" or "slurm".  agent_path: the herd-agent that
 * belongs to this herd (next to bin/herd).  Returns NULL with err. */
struct transport *transport_new(const char *kind, const struct spec *spec,
				const char *agent_path, struct herd_err *err);
int transport_start(struct transport *t, const char *host,
		    struct herd_err *err);
/* Ends a batch of transport_start() calls (see commit above). */
void transport_commit(struct transport *t);
void transport_free(struct transport *t);

/* A transport whose threads could not be ended when it was freed (one
 * still inside a TCP connect) says so here; then herd must leave with
 * _exit(): exit() would run library clean-up (OpenSSL's) under a thread
 * that is still using it.  Process-wide, as exit() is. */
void transport_set_threads_left(void);
bool transport_threads_left(void);

/* The transport a job uses: "local" for nodes.transport: local; "slurm"
 * for nodes.slurm, or with no host source inside an allocation
 * (SLURM_JOB_ID set); else "local" for a lone localhost node, else
 * "ssh". */
const char *transport_pick(const struct spec *spec, int lone_localhost);

/* Implementations. */
extern const struct transport_ops transport_local_ops;
extern const struct transport_ops transport_ssh_ops;
extern const struct transport_ops transport_slurm_ops;

/* Writes a PROTO_ERROR frame {stage, message} to fd (blocking); used by
 * transports to report a node's failure. */
void transport_report(int fd, const char *stage, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* transport/warm.c: the agent's arguments for warm interpreters
 * (agent/warm.c): --warm MODULES [--warm-python PATH] [--warm-slots N]
 * [--warm-once] (restart.max 0: no second LAUNCH, no refill),
 * from launch.warm, launch.preload (empty: torch, torch.distributed in
 * torch mode, none otherwise), the command's interpreter when it names
 * one by its path, and nodes.slots.  argc 0: none (launch.warm off, a
 * command that does not start with python, or nothing to preload).  Every string is a module name, a path or a
 * number: one literal word each. */
struct transport_warm {
	char preload[2048];
	char python[1024];
	char slots[24];
	const char *argv[7];
	int argc;
};
void transport_warm_args(const struct spec *s, struct transport_warm *w);

#endif
