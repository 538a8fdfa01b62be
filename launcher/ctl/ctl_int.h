/* ctl/ctl_int.h — the controller's state and internals, shared by the
 * files of launcher/ctl/ (the lifecycle: engine.c, table.c and the
 * actions; launch.c: plan, environment, output; the frames' modules).
 * Not a public header: only the launcher's ctl files include it.
 */
#ifndef HERD_LAUNCHER_CTL_INT_H
#define HERD_LAUNCHER_CTL_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "launcher/ctl/ctl.h"
#include "herd/bind.h"
#include "herd/conn.h"
#include "herd/events.h"
#include "herd/logtree.h"
#include "herd/loop.h"
#include "herd/outbuf.h"
#include "launcher/hosts/resolve.h"
#include "launcher/transport/transport.h"

/* The job's lifecycle: one (state, event) -> (next
 * state, action) table in ctl/table.c, ctl_table[]. */
enum ctl_state {
	CTL_CONNECT,	/* agents starting, HELLOs arriving */
	CTL_RUN,	/* an attempt's ranks run */
	CTL_STACKS,	/* a rank hung: the stacks of every rank are being
			 * collected before the attempt fails (ctl/hang.c) */
	CTL_RECOVER,	/* an attempt failed: ranks stopping, nodes evicted,
			 * spares joining */
	CTL_BACKOFF,	/* waiting restart.backoff before the next attempt */
	CTL_STOPPING,	/* the end: ranks stopping, agents told to exit */
	CTL_END,	/* every agent gone; exit status known */
	CTL_PREFLIGHT,	/* the health gate: members checked
			 * before an attempt (health.preflight, herd check) */
	CTL_NOTIFY,	/* ranks failed; the survivors were told
			 * (PMIx event) and have health.notify_grace before
			 * the attempt is stopped */
	CTL_STATE_COUNT_
};

/* What happens to the job.  Whoever notices one posts it (ctl_post); the
 * loop drains the queue through ctl_table[], never inside the call that
 * noticed it. */
enum ctl_event {
	CTL_EV_START,	       /* every first node was started */
	CTL_EV_NODE_UP,	       /* node said HELLO (node) */
	CTL_EV_NODE_FAILED,    /* channel lost, silent, error (node, why) */
	CTL_EV_RANK_FAILED,    /* a rank exited non-zero (node, status, why;
				* flag: it never ran, why is the agent's) */
	CTL_EV_RANKS_DONE,     /* every rank of the attempt exited 0 */
	CTL_EV_HUNG,	       /* node reports hung ranks (node, body) */
	CTL_EV_ABORT,	       /* MPI_Abort (node, status, why) */
	CTL_EV_ATTEMPT_FAILED, /* the attempt is over (status, why) */
	CTL_EV_RECOVER,	       /* restarts left: stop ranks, recover */
	CTL_EV_STOPPED,	       /* node confirmed its ranks gone (node) */
	CTL_EV_RECOVERED,      /* survivors stopped, spares in: back off */
	CTL_EV_BACKOFF_OVER,   /* restart.backoff has passed */
	CTL_EV_LAUNCH,	       /* enough nodes up: start an attempt */
	CTL_EV_STOP_TIMER,     /* health.grace + 5 s of stopping passed */
	CTL_EV_FINISH,	       /* end the job (grace_ms, signal in status) */
	CTL_EV_INTERRUPT,      /* Ctrl-C, SIGTERM, SIGHUP (grace_ms, sig) */
	CTL_EV_ALL_GONE,       /* every agent's connection is closed */
	CTL_EV_READMIT,	       /* node's nodes.readmit_after passed (node) */
	CTL_EV_STACKS,	       /* node's answer to STACKS (node, body) */
	CTL_EV_STACKS_DONE,    /* every asked node answered or failed, or
				* the wait for them is over */
	CTL_EV_PREFLIGHT,      /* nodes up: run the health gate */
	CTL_EV_CHECKED,	       /* node answered CHECK (node), or the gate
				* timed out (NULL) */
	CTL_EV_PROBED,	       /* network probe progress (node or NULL) */
	CTL_EV_STRAGGLER,      /* evict straggler node now: a checkpoint
				* boundary (node, why) */
	CTL_EV_NOTIFY,	       /* survivors told of a failure: give them
				* health.notify_grace (status, why: the
				* failure) */
	CTL_EV_NOTIFY_OVER,    /* notify_grace passed, or every surviving
				* rank exited */
	CTL_EV_RANK_EXITED,    /* a rank exited 0, not the last */
	CTL_EV_COUNT_,
	CTL_EV_ANY_ = CTL_EV_COUNT_,	/* table rows only: every event */
};

/* One queued event.  why is copied; body (HUNG, STACKS) is a reference the queue
 * holds until the event was handled. */
struct ctl_ev {
	enum ctl_event type;
	struct node *node;	/* the node it concerns, or NULL */
	int status;		/* exit status; FINISH, INTERRUPT: signal */
	long grace_ms;		/* FINISH, INTERRUPT */
	bool flag;		/* RANK_FAILED: the rank never ran */
	json_t *body;		/* HUNG: the heartbeat's body; STACKS: the
				 * answer's */
	char why[512];
};

struct ctl;
typedef void (*ctl_action_fn)(struct ctl *c, struct ctl_ev *ev);

/* A row of the lifecycle table: in state, on event, go to next (before
 * the action runs, so the action sees the state it leads into) and run
 * action (NULL: nothing).  An action that must choose where the job goes
 * posts another event; those come before anything else queued. */
struct ctl_row {
	enum ctl_state state;
	enum ctl_event event;	/* CTL_EV_ANY_: every event */
	enum ctl_state next;
	ctl_action_fn action;
};

extern const struct ctl_row ctl_table[];
extern const size_t ctl_table_len;
const char *ctl_state_name(enum ctl_state s);
const char *ctl_event_name(enum ctl_event e);

enum node_state {
	NODE_SPARE,	 /* a spare nobody connected to yet */
	NODE_CONNECTING, /* agent starting */
	NODE_UP,	 /* agent said HELLO */
	NODE_EVICTED,	 /* failed; out of the job (may be readmitted) */
	NODE_GONE,	 /* its agent exited at the end of the job */
};

struct node {
	struct ctl *ctl;	/* back pointer: conn and timer callbacks */
	char *host;
	enum node_state state;
	bool member;		/* in the job; false: a spare (idle or warm) */
	/* A spare connected at the start so that its warm interpreters are
	 * ready before it is needed (ctl/warm.c); its HELLO is a node_up,
	 * not a readmission. */
	bool hot;
	bool stopped;		/* confirmed its ranks gone (recover) */
	bool setup_error;	/* failed on ssh auth or host key: herd's
				 * setup, not counted against the node */
	bool stopped_outside;	/* its agent was sent SIGTERM, SIGINT or
				 * SIGHUP by someone else (scancel, a
				 * person): not counted against the node */
	struct conn *conn;
	int64_t last_rx_ms;	/* monotonic time of its last frame */
	long readmit_timer;
	bool straggler_evict;	/* health.straggler evict: out at the next
				 * checkpoint boundary or restart */

	/* From HELLO. */
	char *hostname;
	json_t *addrs;		/* [{ifname, addr, netmask}] */
	json_t *topo;		/* topo_summary(), or NULL */

	/* The plan of the current attempt. */
	int slots;		/* spec or hostfile; 0: from the topology */
	int index;		/* node rank */
	int first_rank;
	int n_ranks;
	const char *ifname;	/* carries MASTER_ADDR's network */
	struct bind_rank *bind;	/* n_ranks entries, or NULL (unbound) */
};

/* 64 KiB: the longest partial line herd holds per rank and stream.  The
 * agent cuts a line this long (RANK_LINE_MAX in agent/rank.c); herd cuts at
 * the same length, so `\r` progress bars without a newline cost at most
 * this much per stream instead of growing herd without bound. */
#define CTL_PARTIAL_MAX PROTO_OUTPUT_CHUNK

/* 4 MiB per stream: what herd holds for a stdout or stderr reader that is
 * slower than the ranks.  That is 64 full output chunks, a few seconds of a
 * busy job: enough for a terminal that stalls briefly (a pager's screen, a
 * scroll, a slow SSH link) to lose nothing, and small next to herd's own
 * memory (both streams: 8 MiB).  Past it the reader cannot keep up anyway:
 * lines are dropped from the terminal only (the rank logs have them all)
 * and herd says how many bytes the terminal missed. */
#define CTL_TERM_BUFFER_MAX (4u * 1024 * 1024)

struct rank_slot {
	int node;		/* index into ctl.nodes */
	int spawn;		/* 0: a rank of the job; N: a process of
				 * PMIx_Spawn N (ctl/pmix/spawn.c) */
	int srank;		/* spawned: its rank in spawn N */
	bool done;
	int status;		/* done: its exit status (128+signal) */
	bool no_workdir;	/* done: never ran, launch.workdir is missing */
	struct logfile *log;	/* RUN-ID/attempt-N/rank-R.log */
	/* A partial line waiting for its end (prefixing needs lines); at
	 * most CTL_PARTIAL_MAX bytes, then it is printed cut. */
	char *partial[3];
	size_t partial_len[3];
};

/* A PMIx fence being gathered: one contribution from every node hosting
 * its procs ("*": every member node with ranks), concatenated in node
 * order and sent back to them.  Named by (procs, count), which every
 * involved agent computes alike (FENCE in proto.h). */
struct fence {
	char *procs;		/* "*" or rank ranges "0-3,6" */
	int count;
	int seq;		/* the first contributor's, for messages */
	int64_t due_ms;		/* when the fence times out (monotonic) */
	int n_got;
	int want;		/* nodes in it */
	bool *in;		/* [node index in ctl.nodes] hosts its procs */
	bool *got;		/* [node index] contributed */
	int *ids;		/* [node index] that agent's seq for it */
	char **parts;		/* [node index] contribution */
	size_t *part_len;
	long timer;
};

/* Why each attempt ended, for the summary. */
struct attempt_note {
	int status;
	char why[256];
};

/* The most data a FENCE_DONE carries: the frame limit less its header and
 * JSON body ({attempt, seq, status}: under 100 bytes; 4 KiB is room to
 * spare).  A fence that gathers more fails on every node at once. */
#define CTL_FENCE_DATA_MAX ((size_t)PROTO_FRAME_MAX - 4096)

struct ctl {
	struct spec *spec;
	const struct ctl_options *opt;
	struct loop *loop;
	struct transport *transport;
	struct events *ev;
	struct logtree *lt;	/* log.dir/RUN-ID; NULL for herd plan */
	struct bind_platform *platform;	/* bind.topology_file, or NULL */

	struct node *nodes;	/* the nodes, then the spares */
	int n_nodes;
	int want_nodes;		/* members the job asks for */
	int min_nodes;		/* nodes.min, or want_nodes */

	enum ctl_state state;
	int attempt;		/* 0 before the first launch */
	struct attempt_note *notes;	/* [attempt-1] */
	int world_size;
	/* ranks[0..world_size) the job's ranks, then the processes
	 * PMIx_Spawn started in this attempt (ctl/pmix/spawn.c), n_slots in
	 * all; every one must end for the attempt to be done. */
	int n_slots;
	struct rank_slot *ranks;
	int ranks_done;
	char *master_addr;
	char *checkpoint;	/* the attempt resumes from this, or NULL */
	int progress_attempt;	/* the last attempt that resumed from a newer
				 * checkpoint than the one before it */

	struct fence *fences;	/* pmix: fences in flight */
	int n_fences;
	size_t fence_data_max;	/* CTL_FENCE_DATA_MAX (tests lower it) */
	struct ctl_dyn *dyn;	/* ctl/pmix/spawn.c: spawns, connects */
	struct ctl_pubsub *pubsub;	/* ctl/pmix/pubsub.c: published data */
	/* CTL_NOTIFY: the failure that ends the attempt once
	 * health.notify_grace is over. */
	long notify_timer;
	int notify_status;
	char notify_why[512];

	int status;		/* the exit status so far */
	bool failed;		/* this attempt's first failure is recorded */
	bool final_failure;	/* no restart: the job ends */
	bool no_restart;	/* the program asked to end (MPI_Abort) */
	/* A restart cannot heal every failure: a missing workdir, or every
	 * rank exiting 127 or 126 (the shell found no command, or could
	 * not run it).  exec_suspect: the attempt failed with 127 or 126,
	 * restarts are left, and the verdict waits until every rank has
	 * ended (check_recovered). */
	bool exec_suspect;
	bool exec_wait;		/* RECOVER: the ranks are not stopped yet */
	bool workdir_said;	/* the missing workdir is on stderr */
	char said_why[256];	/* the attempt's failure as act_rank_failed
				 * printed it */
	char *log_dir;		/* log.dir, {{name}} filled, absolute */
	uint64_t log_lost;	/* bytes of closed rank logs not written */
	int log_failed_files;	/* rank logs with a failed write */
	bool events_reported;	/* events.jsonl's failure is on stderr */
	struct outbuf *term[3];	/* [1] stdout, [2] stderr: rank output */
	struct ctl_metrics *metrics;	/* ctl/metrics.c */
	struct ctl_straggler *straggler;	/* ctl/straggler.c */
	struct ctl_sock *sock;		/* ctl/sock.c: the control socket */
	struct ctl_hang *hang;		/* ctl/hang.c: stacks being collected */
	int64_t stacks_wait_ms;		/* how long for them (tests shorten it) */
	struct ctl_check *check;	/* ctl/check.c: the health gate */
	struct ctl_rejoin *rejoin;	/* ctl/rejoin.c: survivors kept */
	struct ctl_ckpt *ckpt;		/* ctl/ckpt.c: the memory tiers */
	uint64_t term_missed;	/* bytes of rank output the terminal missed */
	bool local;
	bool tty;
	int interrupts;
	long stop_timer, backoff_timer, hb_timer, graveyard_timer;
	int64_t hb_sent_ms;	/* when herd last sent its heartbeats */
	/* Stall detection: when the heartbeat tick is
	 * due, and CLOCK_BOOTTIME - CLOCK_MONOTONIC at the last tick (it
	 * grows while the machine is suspended). */
	int64_t hb_due_ms;
	int64_t boot_gap_ms;
	/* SIGTSTP: the agents were told to stop their ranks; herd stops
	 * itself once they answered (pause_timer polls) and tells them to
	 * go on when it is continued. */
	bool paused;
	long pause_timer;
	int64_t pause_sent_ms;
	int64_t failed_at_ms;	/* when the last attempt failed */
	/* restart.backoff (ctl_backoff_ms): when the attempt started, and
	 * how its failure's lost members were replaced while recovering:
	 * by spares already up (warm), by spares started then (cold), or
	 * not all of them (short: fewer nodes). */
	int64_t attempt_started_ms;
	int spares_warm_taken, spares_cold_taken;
	bool recover_short;
	bool noderec_warned;	/* the node record's failure is said */
	/* Failures noted and not yet written (ctl/nodes.c): one write per
	 * loop turn, whatever the number of nodes that failed in it. */
	struct ctl_nodenote *nodenotes;
	size_t n_nodenotes;
	long nodenote_timer;
	bool nodes_stopped;	/* stopped by the user: nothing more noted */
	char *noderec_key;	/* the record's key (noderec_key()), or NULL */
	json_t *quarantined;	/* node_quarantined bodies, or NULL */
	struct conn **graveyard;	/* dropped conns, freed soon */
	size_t n_graveyard;

	/* The event queue (ctl_post), drained by a zero-delay timer.  While
	 * an action runs, what it posts goes to `next` and is put in front
	 * of the queue when it returns: a decision and its consequences are
	 * handled before anything noticed meanwhile. */
	struct ctl_qev *queue, *queue_tail, *next, *next_tail;
	long drain_timer;
	bool in_action;
	/* Tests: called for every event handled, with its row (NULL when
	 * the state has none). */
	void (*trace)(struct ctl *c, enum ctl_state from,
		      const struct ctl_ev *ev, const struct ctl_row *row,
		      void *arg);
	void *trace_arg;
};

/* ctl/engine.c: the event queue. */
/* Queues event for the loop.  why (may be NULL) is copied.  Returns 0;
 * out of memory herd exits with a message (an event is never lost: the
 * agents stop the ranks when herd's connection goes). */
int ctl_post(struct ctl *c, enum ctl_event event, struct node *n, int status,
	     const char *why);
/* The same for a whole event (its body is referenced until handled). */
int ctl_post_ev(struct ctl *c, const struct ctl_ev *ev);
/* FINISH or INTERRUPT: every agent stops its ranks (sig, SIGKILL after
 * grace_ms) and exits; why (may be NULL) is the reason. */
int ctl_post_stop(struct ctl *c, enum ctl_event event, long grace_ms, int sig,
		  const char *why);
/* Drops every queued event (teardown). */
void ctl_queue_clear(struct ctl *c);

/* ctl/table.c: the row for (state, event), or NULL. */
const struct ctl_row *ctl_row_find(enum ctl_state state, enum ctl_event event);
/* Whether event e may report on a phase already over (then it is
 * dropped without a word in a state that has no row for it). */
bool ctl_event_late(enum ctl_event e);
/* What a state lets the agents' frames do (ctl_states[] in ctl/table.c):
 * CTL_SERVE_ATTEMPT: an attempt runs and is not failing: PMIx requests
 * (fences, modex, spawn, signal) are served, checkpoints are persisted
 * and restored, stragglers are judged; CTL_SERVE_RANKS: the
 * attempt's ranks are alive (running, told of a failure, or being
 * looked at for a hang): PMIx events and published data still flow
 * between them; CTL_SERVE_ENDING: the job is ending: no readmission,
 * no pause. */
enum ctl_serve {
	CTL_SERVE_ATTEMPT = 1 << 0,
	CTL_SERVE_RANKS = 1 << 1,
	CTL_SERVE_ENDING = 1 << 2,
};
/* Whether the job's current state has every flag of what. */
bool ctl_serves(const struct ctl *c, unsigned what);
/* The flags of state s. */
unsigned ctl_state_serves(enum ctl_state s);

/* ctl/ctl.c: setup, nodes, teardown. */
/* The controller around a caller-owned loop: ctl_new(), ctl_start() with
 * the resolved nodes and a transport (NULL: the one the spec picks; the
 * controller owns it from then on), loop_run() until the job ends,
 * ctl_end() for the exit status and the summary, ctl_free() (before the
 * loop is freed).  ctl_new returns NULL when out of memory; ctl_start
 * returns 0, or the exit status when the job cannot start (said on
 * stderr). */
struct ctl *ctl_new(struct spec *spec, const struct ctl_options *opt);
int ctl_start(struct ctl *c, struct loop *loop, struct resolved *res,
	      struct transport *t);
int ctl_end(struct ctl *c);
void ctl_free(struct ctl *c);
/* Node n goes to state: the one place a node's state is written. */
void ctl_node_set(struct ctl *c, struct node *n, enum node_state state);
/* Nodes in state; member 1: members only, 0: non-members, -1: both. */
int ctl_count_nodes(const struct ctl *c, enum node_state state, int member);
/* "N/M nodes up" on a terminal; final ends the line. */
void ctl_progress(struct ctl *c, bool final);
/* Node n's connection is dropped (paused now, freed from the loop). */
void ctl_drop_conn(struct ctl *c, struct node *n);
/* Starts node n's agent; member: it joins the job, else a readmit probe
 * or a hot spare.  The node is CONNECTING, or EVICTED when it could not
 * be started. */
void ctl_start_node(struct ctl *c, struct node *n, bool member);
/* Sends a frame to node n.  Returns 0, or -1 when it could not be sent:
 * the node is then lost (its connection was closed: the close handler
 * fails it; or the frame could not be queued: it is failed now, with the
 * reason), never silently.  n->conn must be set. */
int ctl_send(struct ctl *c, struct node *n, enum proto_type type,
	     const json_t *body, const void *data, size_t data_len);
/* The same for a frame of type already encoded (proto_encode). */
int ctl_send_encoded(struct ctl *c, struct node *n, enum proto_type type,
		     const char *frame, size_t len);

/* ctl/frames.c: the node's conn callbacks (its arg is the node). */
void ctl_on_frame(struct conn *conn, struct proto_frame *f, void *arg);
void ctl_on_close(struct conn *conn, const char *reason, int clean, void *arg);
/* A frame says node n failed (why): nothing more is read from it; the
 * failure is handled from the loop. */
void ctl_frame_failed(struct ctl *c, struct node *n, const char *why);

/* ctl/heartbeat.c */
/* Ctrl-C, SIGTERM, SIGHUP and SIGTSTP on the loop.  Returns 0 or -1
 * (errno set). */
int ctl_signals_init(struct ctl *c);
/* The first heartbeat tick. */
void ctl_heartbeat_start(struct ctl *c);
/* As Ctrl-C (sig SIGINT), SIGTERM or SIGHUP to herd, and herd stop
 * (SIGTERM): the ranks get sig, then SIGKILL after health.grace; a second
 * one kills at once. */
void ctl_interrupt(struct ctl *c, int sig);

/* ctl/stop.c: the end. */
/* Every agent's connection closed: posts ALL_GONE. */
void ctl_maybe_end(struct ctl *c);
/* The stop timer's callback (arg: the ctl): posts STOP_TIMER. */
void ctl_on_stop_timeout(struct loop *loop, void *arg);
/* STOP to node n (nothing when its conn is gone): its ranks get sig,
 * SIGKILL after grace_ms; exit_after: the agent exits then; leave: the
 * attempt's process group is over (a restart), and ranks that speak
 * herd.elastic are told to leave it before the signal. */
void ctl_send_stop(struct ctl *c, struct node *n, long grace_ms, int sig,
		   bool exit_after, bool leave);
/* Every agent stops its ranks and exits; the stop timer runs. */
void ctl_stop_all(struct ctl *c, long grace_ms, int sig);
/* The attempts and evicted nodes on stderr (more than one attempt, or a
 * node evicted). */
void ctl_summary(struct ctl *c);
/* What the logs lost, once at the end. */
void ctl_report_lost(struct ctl *c);

/* ctl/recover.c: failure and recovery. */
/* Records the attempt's first failure: its status and why. */
void ctl_record_failure(struct ctl *c, int status, const char *why);
/* Takes node n out of the job for good (or until readmitted). */
void ctl_evict(struct ctl *c, struct node *n, const char *reason);
/* Every rank of the attempt has ended. */
bool ctl_all_ranks_ended(const struct ctl *c);
/* Every surviving member stops its ranks (stragglers marked go now). */
void ctl_recover_stop(struct ctl *c);
/* Node n failed: evicted.  Returns true when it was a member (said, an
 * event); a probe or a warm spare goes quietly. */
bool ctl_node_out(struct ctl *c, struct node *n, const char *reason,
		  bool connecting);
/* launch.mode pmix: node n's ranks told to the survivors as failed. */
void ctl_notify_node_lost(struct ctl *c, struct node *n);
/* The attempt failed: NOTIFY first with health.notify_grace in a PMIx
 * job, else ATTEMPT_FAILED. */
void ctl_fail_or_notify(struct ctl *c, int status, const char *why);
/* Replaces evicted members with spares, warm ones first.  Returns how
 * many members are still connecting. */
int ctl_take_spares(struct ctl *c);
/* RECOVER: every survivor stopped and every spare up: RECOVERED posted
 * (or the end, under nodes.min). */
void ctl_check_recovered(struct ctl *c);
/* restart.backoff: how long after the failure at now_ms the next attempt
 * starts (ctl/recover.c says the rule). */
int64_t ctl_backoff_ms(const struct ctl *c, int64_t now_ms);

/* ctl/attempt.c: CONNECT: every member up or failed: PREFLIGHT or
 * LAUNCH posted, or the end. */
void ctl_check_connected(struct ctl *c);
/* Enough nodes are up: the next attempt, through the health gate with
 * health.preflight. */
void ctl_post_next_attempt(struct ctl *c);
/* The job ends in failure (said already): no restart; every agent stops
 * its ranks and exits (ctl/stop.c). */
void ctl_give_up(struct ctl *c);
/* ctl/notify.c: the NOTIFY timer, if any, is stopped. */
void ctl_notify_stop(struct ctl *c);


/* ctl/rejoin.c (survivors keep training): generations, the ranks'
 * control channel (RANK_CTL), the rendezvous store herd hosts. */
/* A new attempt (after ctl_plan): every rank in generation 0, none has
 * said hello, the store is empty. */
void ctl_rejoin_attempt(struct ctl *c);
/* The membership's generation now (HERD_GENERATION of a rank launched
 * now). */
int ctl_rejoin_generation(const struct ctl *c);
/* RUN, node failed has just been taken out: returns true when the
 * survivors keep training (every rank said hello, restart.survivors is
 * keep, a spare was taken: the rejoin is under way), false for the
 * classic restart. */
bool ctl_rejoin_start(struct ctl *c, struct node *failed);
/* Member n said HELLO: the spare of a rejoin gets its ranks. */
void ctl_rejoin_node_up(struct ctl *c, struct node *n);
/* The attempt failed (why): a rejoin under way is over (the event says
 * it fell back). */
void ctl_rejoin_attempt_over(struct ctl *c, const char *why);
/* RANK_CTL from node n: hello, stepping, store requests. */
void ctl_rejoin_frame(struct ctl *c, struct node *n, struct proto_frame *f);
void ctl_rejoin_free(struct ctl *c);
/* ctl/recover.c: one spare into the job now (warm first, an idle one is
 * started), said and an event; NULL when none is left. */
struct node *ctl_take_spare_now(struct ctl *c);
/* ctl/launch.c: node n takes the n_ranks ranks from first_rank of a
 * failed node (same node rank is not needed: only global ranks count),
 * bound from its own topology.  Returns 0, or -1 with err (its slots
 * differ). */
int ctl_plan_replacement(struct ctl *c, struct node *n, int first_rank,
			 int n_ranks, struct herd_err *err);

/* ctl/sock.c: the job's control socket. */
/* Listens on SOCKDIR/RUN-ID.sock once the run dir exists.  A socket that
 * cannot be made is a warning (the job goes on), under --detach an
 * error.  Returns 0, or -1 said on stderr. */
int ctl_sock_listen(struct ctl *c);
/* The socket's path, or NULL when there is none. */
const char *ctl_sock_path(const struct ctl *c);
/* One tagged output line for the terminal's fd (1 or 2), as put_line
 * gives it: sent to every attached client (bounded per client). */
struct iovec;
void ctl_sock_output(struct ctl *c, int fd, const struct iovec *iov,
		     int iovcnt);
/* After job_end: {kind:"end", status} to attached and stopping clients,
 * waiting a bounded time for them to take it. */
void ctl_sock_end(struct ctl *c, int status);
/* Closes the clients and removes the socket. */
void ctl_sock_free(struct ctl *c);
/* --detach, once the run dir exists: stdout and stderr to
 * RUN-ID/herd.log, and the launching herd is told where that is
 * ("log\tRUNDIR\n": it shows what herd.log gets until the job is up).
 * With --no-wait the job counts as up at once (ctl_detach_ready).
 * Returns 0, or -1 said on stderr. */
int ctl_detach_log(struct ctl *c);
/* --detach: tells the launching herd the job is up (the first attempt
 * started): "ok\tID\tRUNDIR\tBYTES\n", BYTES of herd.log written so
 * far, and closes the pipe.  Does nothing the second time. */
void ctl_detach_ready(struct ctl *c);

/* ctl/metrics.c: the metrics table, endpoint and status line. */
/* Binds metrics.listen, first of all: an address that cannot be bound
 * refuses the job before it has a run directory.  Returns 0, or -1 said
 * on stderr. */
int ctl_metrics_listen(struct ctl *c);
/* Starts the metrics table, RUN-ID/metrics.jsonl, the status area (stdout
 * a terminal, no --no-status) and the endpoint on the bound socket; none
 * for herd plan.  Returns 0, or -1 said on stderr. */
int ctl_metrics_start(struct ctl *c);
/* METRICS from node n: feeds the table; no lifecycle change. */
void ctl_metrics_frame(struct ctl *c, struct node *n, struct proto_frame *f);
/* The last metrics.jsonl line (with every node). */
void ctl_metrics_end(struct ctl *c);
void ctl_metrics_free(struct ctl *c);
/* Gives the terminal back (scroll region off, status erased), waiting
 * for a slow terminal; the status stays off. */
void ctl_status_close(struct ctl *c);
/* The status line's text (no escape codes) at most width columns, into
 * buf.  Returns 0, or -1 when there is none yet (no attempt, herd plan). */
int ctl_status_text(struct ctl *c, char *buf, size_t size, int width);
/* Before herd stops itself (paused) and after it is continued. */
void ctl_status_pause(struct ctl *c, bool paused);

/* ctl/straggler.c: straggler detection. */
/* METRICS from node n (its body): feeds the detector; a verdict is an
 * event, a terminal line, a node note and, with health.straggler: evict,
 * the node marked for eviction (node.straggler_evict).  No lifecycle
 * change. */
void ctl_straggler_frame(struct ctl *c, struct node *n, const json_t *body);
/* The metrics tick: a new complete checkpoint while a node is marked
 * posts CTL_EV_STRAGGLER for it. */
void ctl_straggler_tick(struct ctl *c);
/* Whether a straggler can be taken out now: a spare is left or nodes.min
 * allows one node fewer, and (unless restarting: the attempt already
 * failed) a restart is left.  why gets "spare", "fewer nodes" or the
 * reason it cannot. */
bool ctl_straggler_can_evict(struct ctl *c, bool restarting, char *why,
			     size_t size);
void ctl_straggler_free(struct ctl *c);

/* ctl/nodes.c: what the job remembers of its nodes. */
/* Node n failed in a way that counts against it: kind is "failed"
 * (crash, partition, silent), "unhealthy" (the health gate) or
 * "straggler"; reason says why in words.  Recorded in the job's node
 * record (health.quarantine_after).  Never fails the job. */
void ctl_node_note(struct ctl *c, struct node *n, const char *kind,
		   const char *reason);
/* Writes the failures noted so far (the end of the job, ctl_free). */
void ctl_nodes_flush(struct ctl *c);
/* The user stops the job (herd stop, a signal): failures not yet written
 * are dropped and none is noted after this. */
void ctl_nodes_stopped(struct ctl *c);
/* At the start of a run: which of res's hosts (the nodes, then the
 * spares) the job's node record quarantines, into skip[] (one per host);
 * each is said on stderr and kept in c->quarantined for the
 * node_quarantined events that follow job_start.  A record that
 * cannot be read is a warning (nothing skipped).  Returns how many. */
int ctl_nodes_quarantine(struct ctl *c, const struct resolved *res,
			 bool *skip);

/* ctl/pmix/pmix.c: the controller's part of PMIx (fences, aborts...). */
void ctl_pmix_fence(struct ctl *c, struct node *n, struct proto_frame *f);
void ctl_pmix_abort(struct ctl *c, struct node *n, struct proto_frame *f);
void ctl_pmix_dmodex(struct ctl *c, struct node *n, struct proto_frame *f);
void ctl_pmix_dmodex_data(struct ctl *c, struct node *n,
			  struct proto_frame *f);
/* ctl/pmix/api.c: PMIx_Log to the event log (PMIX_LOG). */
void ctl_pmix_log(struct ctl *c, struct node *n, struct proto_frame *f);
void ctl_pmix_signal(struct ctl *c, struct node *n, struct proto_frame *f);
/* Drops every PMIx operation in flight (the attempt is over). */
void ctl_pmix_clear(struct ctl *c);

/* ctl/pmix/spawn.c: PMIx_Spawn; ctl/pmix/connect.c:
 * PMIx_Connect/Disconnect. */
void ctl_spawn_frame(struct ctl *c, struct node *n, struct proto_frame *f);
void ctl_spawn_up(struct ctl *c, struct node *n, struct proto_frame *f);
void ctl_connect_frame(struct ctl *c, struct node *n, struct proto_frame *f);
/* Drops spawns and connects in flight (the attempt is over). */
void ctl_spawn_clear(struct ctl *c);
/* The spawned process of slot ended: its room (alive at once, per node
 * and per attempt) is free again. */
void ctl_spawn_proc_gone(struct ctl *c, int slot);
/* The node index hosting rank of namespace ns (0: the job's, N: spawn
 * N), or -1: for direct modex and fences over spawned processes. */
int ctl_spawn_node_of(struct ctl *c, int ns, int rank);
/* "[s1:0] " for spawned process slot (a rank of spawn 1), into buf. */
void ctl_spawn_tag(struct ctl *c, int slot, char *buf, size_t size);
/* ctl/pmix/pubsub.c: PMIx publish / lookup / unpublish, held for
 * the job.  The frames answer with PUBSUB_DONE (now, or when a waited-for
 * key comes). */
void ctl_pubsub_publish(struct ctl *c, struct node *n, struct proto_frame *f);
void ctl_pubsub_lookup(struct ctl *c, struct node *n, struct proto_frame *f);
void ctl_pubsub_unpublish(struct ctl *c, struct node *n,
			  struct proto_frame *f);
/* Rank of the current attempt exited: its "proc" entries go. */
void ctl_pubsub_rank_gone(struct ctl *c, int rank);
/* The attempt is over (a new one starts): waiting lookups dropped (the
 * agents fail them), "proc" and "app" entries go. */
void ctl_pubsub_attempt_over(struct ctl *c);
void ctl_pubsub_free(struct ctl *c);

/* ctl/pmix/event.c: PMIx events across nodes. */
/* EVENT from node n: forwarded to the other nodes in its range. */
void ctl_event_frame(struct ctl *c, struct node *n, struct proto_frame *f);
/* ctl/warm.c: STARTED (a rank started, warm or not): rank_start.
 * ctl_warm_spares: with warm interpreters on, whether the spares are to
 * be connected at the start (they then wait, up, with theirs ready). */
void ctl_rank_started(struct ctl *c, struct node *n, struct proto_frame *f);
bool ctl_warm_spares(const struct ctl *c);
/* launch.mode pmix: tells every surviving node that ranks failed
 * (kind "exit", "signal" or "node"; status the exit status; host where
 * they ran), and a ranks_notified event.  Nothing for other modes. */
void ctl_event_proc_failed(struct ctl *c, const char *kind, int status,
			   const char *host, const int *ranks, int n_ranks);

/* ctl/hang.c: evidence of a hang. */
/* 10 s: what herd waits for the agents' stacks; an agent answers within
 * its own 8 s (agent/stacks.c STACKS_AGENT_MS). */
#define CTL_STACKS_WAIT_MS 10000
/* RUN, HUNG: asks every member node with ranks for their stacks and
 * waits (c->stacks_wait_ms at most); posts STACKS_DONE when nobody is
 * left to ask. */
void ctl_hang_begin(struct ctl *c, struct node *n, json_t *body);
/* A further HUNG while collecting: its ranks are added. */
void ctl_hang_merge(struct ctl *c, struct node *n, json_t *body);
/* Node n's STACKS answer; posts STACKS_DONE after the last one due. */
void ctl_hang_answer(struct ctl *c, struct node *n, json_t *body);
/* Node n failed while collecting: it is not waited for. */
void ctl_hang_node_gone(struct ctl *c, struct node *n);
/* The collection is over: one rank_hung event per hung rank (frame,
 * method, culprit), the culprit's line on stderr, and in why the
 * attempt's failure reason.  Frees the collection. */
void ctl_hang_end(struct ctl *c, char *why, size_t why_size);
/* Drops a collection (no events). */
void ctl_hang_free(struct ctl *c);

/* ctl/check.c (ctl/netprobe.c): the health gate. */
/* A new gate: every node's answer forgotten, the gate's timer started. */
void ctl_check_begin(struct ctl *c);
/* Sends node n its CHECK; has it been sent in this gate? */
void ctl_check_send(struct ctl *c, struct node *n);
bool ctl_check_sent(struct ctl *c, struct node *n);
/* Nodes whose answer is awaited. */
int ctl_check_pending(struct ctl *c);
/* CHECK and NETPROBE from node n: kept, CHECKED or PROBED posted. */
void ctl_check_frame(struct ctl *c, struct node *n, struct proto_frame *f);
void ctl_netprobe_frame(struct ctl *c, struct node *n, struct proto_frame *f);
/* Node n failed (why): its "agent" check fails, no answer is awaited. */
void ctl_check_node_failed(struct ctl *c, struct node *n, const char *why);
/* Judges the answers that came (clock, RDMA rates across nodes). Returns
 * how many nodes are unhealthy. */
int ctl_check_judge(struct ctl *c);
/* Why node n is unhealthy (its first failing check in *check), or NULL. */
const char *ctl_check_failure(struct ctl *c, struct node *n,
			      const char **check);
/* herd check's network probe: sends what is due.  Returns 1 while a
 * round is in flight, 0 when it is over (or skipped). */
int ctl_netprobe_step(struct ctl *c);
/* herd check's table (or --json) on stdout; c->status 0 or 1. */
void ctl_check_print(struct ctl *c);
/* The gate is over (its timer stopped); ctl_check_free at the end. */
void ctl_check_end(struct ctl *c);
void ctl_check_free(struct ctl *c);

/* ctl/ckpt.c: checkpoints in memory (the nodes' tiers, peer copies,
 * persisting to disk, restoring across the tiers). */
/* Node n said HELLO: its tier's CKPT_CONF. */
void ctl_ckpt_node_up(struct ctl *c, struct node *n);
/* CKPT_INV (checkpoint_saved, replicas), CKPT_DATA (relayed), CKPT_ACK. */
void ctl_ckpt_frame(struct ctl *c, struct node *n, struct proto_frame *f);
/* Node n's connection is gone: its inventory, and copies from or to it
 * fail. */
void ctl_ckpt_node_gone(struct ctl *c, struct node *n);
/* The attempt's ranks are planned: each rank's checkpoint is chosen
 * across the tiers.  Returns 1 when peer copies are being fetched first:
 * ctl_launch_send(c, command) follows when they are in (or failed: then
 * every rank resumes from disk); 0: send LAUNCH now. */
int ctl_ckpt_plan(struct ctl *c, const char *command);
/* HERD_RESUME_FROM for rank of this attempt, or NULL: the job's
 * (c->checkpoint). */
const char *ctl_ckpt_rank_path(struct ctl *c, int rank);
/* LAUNCH went out: checkpoint_restored per rank; the persist timer. */
void ctl_ckpt_launched(struct ctl *c);
void ctl_ckpt_free(struct ctl *c);
/* For a replacement rank on node (survivors kept): the newest step every
 * rank holds, where: tier "memory" | "peer" | "disk" (NULL: nothing),
 * holder the node index holding it (-1: disk), peer: as a peer copy
 * there; local: on node itself, path (malloc'd, the caller frees) its
 * HERD_RESUME_FROM then (or disk's).  Returns 0, or -1 when there is
 * nothing to resume from. */
struct ctl_ckpt_where {
	long step;
	const char *tier;
	int holder;
	bool peer, local;
	char *path;
};
int ctl_ckpt_resume_for(struct ctl *c, int rank, int node,
			struct ctl_ckpt_where *w);
/* Copies rank's step from node `from` (peer: its peer copy) into node
 * to's tier; done(ok, path on `to`, ms) follows from the loop.  Returns
 * the transfer's id, or -1. */
long ctl_ckpt_fetch(struct ctl *c, int rank, long step, int from, bool peer,
		    int to,
		    void (*done)(struct ctl *c, void *arg, bool ok,
				 const char *path, int64_t ms),
		    void *arg);

/* ctl/attempt.c: sends LAUNCH to every member node (rank_start events). */
void ctl_launch_send(struct ctl *c, const char *command);

/* ctl/launch.c */
/* Node n's entry of HELLO's addrs ({ifname, addr, netmask}) whose network
 * holds addr (IPv4), or NULL. */
json_t *ctl_node_addr_on(const struct node *n, const char *addr);
/* Places ranks on the member nodes that are up, binds them, picks
 * MASTER_ADDR.  Returns 0 or -1 with err. */
int ctl_plan(struct ctl *c, struct herd_err *err);
/* The command with {{name}}, {{checkpoint}}, {{resume_args}} filled in. */
char *ctl_render_command(struct ctl *c, struct herd_err *err);
/* The LAUNCH frame body for node n. */
json_t *ctl_launch_body(struct ctl *c, struct node *n, const char *command);
/* Opens RUN-ID/attempt-N/rank-R.log for every rank (none for herd
 * plan). */
int ctl_open_rank_logs(struct ctl *c, struct herd_err *err);
/* Appends rank output to its log; the log's first failed write is
 * reported once (stderr and a log_write_failed event), the job goes on. */
void ctl_log_write(struct ctl *c, int rank, const void *data, size_t len);
/* Closes rank's log, counting what it lost. */
void ctl_close_rank_log(struct ctl *c, int rank);
/* Says on stderr, once, that events.jsonl could not be written (called
 * from the heartbeat tick, after a log failure and at the end, so that the
 * event calls stay plain events_emit()). */
void ctl_check_events(struct ctl *c);
/* Frees the attempt's rank table (logs, partial lines). */
void ctl_free_ranks(struct ctl *c);
/* Prints rank output with its [rank] or [host:rank] prefix, whole lines
 * only; flush prints a last partial line. */
void ctl_print(struct ctl *c, int rank, int fd, const char *data, size_t len,
	       bool flush);
/* Opens the non-blocking buffers for rank output on stdout and stderr.
 * Returns 0 or -1 (errno set). */
int ctl_term_open(struct ctl *c);
/* Writes out what the buffers hold (waiting for a slow reader), closes them
 * and says how much rank output the terminal missed, if any. */
void ctl_term_close(struct ctl *c);
/* herd run --dry-run. */
int ctl_dry_run(struct ctl *c, struct resolved *res);
/* Releases node n's plan (binding). */
void ctl_node_unplan(struct node *n);

#endif
