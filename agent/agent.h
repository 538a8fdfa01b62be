/* agent.h — herd-agent's state, shared by its files.  One agent runs per
 * node; it owns every rank it starts and kills them all before it exits,
 * on its fatal path too. */
#ifndef HERD_AGENT_H
#define HERD_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "herd/conn.h"
#include "herd/loop.h"
#include "herd/proc.h"
#include "keeper/keeper.h"

/* Partial output is buffered up to this per stream, then sent as it is:
 * a program printing a 10 MB line must not grow the agent without bound. */
#define RANK_LINE_MAX PROTO_OUTPUT_CHUNK

struct rank_stream {
	int fd;		/* pipe from the rank; -1 once at EOF */
	char buf[RANK_LINE_MAX];
	size_t len;
};

struct rank {
	int rank;		/* global rank; a spawned process: its id on
				 * the wire (herd's, past the job's ranks) */
	int spawn;		/* 0: a rank of the job; N: a process of
				 * PMIx_Spawn N (pmix/spawn.c) */
	int srank;		/* spawned: its rank in spawn N's namespace */
	int local_rank;
	pid_t pid;		/* the keeper: leader of the rank's group */
	bool running;		/* not reaped yet */
	int status;		/* waitpid status once reaped */
	struct rank_stream out, err;
	bool exit_sent;
	bool pmix_connected;	/* pmix mode: it reached our PMIx server */
	int64_t last_output_ms;	/* wall clock of its last output */
	char progress_file[512];	/* HERD_PROGRESS_FILE it may touch */
	char metrics_file[512];	/* HERD_METRICS it may append to ("" none) */
	bool hung_reported;
	/* touch.c: touches of progress_file since the rank started, each
	 * one counted (inotify); touch_wd is its directory's watch (-1:
	 * none, touches are not counted). */
	int64_t touches;
	int touch_wd;
	bool touch_attr;	/* an IN_ATTRIB since its last IN_OPEN */
	/* How the keeper ended (proc.h): start.step says why the rank
	 * could not be started, if it could not. */
	struct proc_exit start;
	/* STARTED (warm or cold) is sent; a warm handoff sends it when
	 * the slot's keeper says which it was (warm.c). */
	bool started_sent;
	bool warm;		/* started from a warm interpreter */
	bool faulthandler;	/* its environment has PYTHONFAULTHANDLER */
};

/* Environment of a rank being built: the agent's, then the job's, then
 * the rank's; a later entry replaces an earlier one of the same name.
 * v is NULL-terminated. */
struct envv {
	char **v;
	size_t n, cap;
};

/* Sets key=value in e.  Returns 0 or -1 (out of memory). */
int envv_set(struct envv *e, const char *key, const char *value);

struct psrv_state;
struct warm_state;
struct measure_state;
struct stacks_state;

/* The agent's lifecycle (lifecycle.c): one table of (state, event) ->
 * (next state, action); events are posted (agent_post) and handled from
 * the loop.
 *
 *   IDLE      no ranks; waiting for LAUNCH
 *   RUNNING   the ranks of an attempt run
 *   STOPPING  STOP (a restart): ranks are being stopped; STOPPED is sent
 *             when the last one is gone, and LAUNCH is welcome again
 *   EXITING   STOP with exit, or herd is gone: ranks are being stopped,
 *             then the agent exits (its loop stops once the last frame
 *             is out)
 */
enum agent_state {
	AGENT_IDLE,
	AGENT_RUNNING,
	AGENT_STOPPING,
	AGENT_EXITING,
	AGENT_NSTATES,
};

enum agent_event {
	AGENT_EV_LAUNCH,      /* herd's LAUNCH (data: its body) */
	AGENT_EV_STOP,	      /* herd's STOP for a restart */
	AGENT_EV_STOP_EXIT,   /* herd's STOP with exit: true */
	AGENT_EV_HERD_GONE,   /* the connection closed, or a stop signal */
	AGENT_EV_HERD_SILENT, /* no word from herd in time: exit at once */
	AGENT_EV_RANKS_GONE,  /* the last rank's EXIT is sent */
	AGENT_EV_STACKS,      /* herd's STACKS (data: its body) */
	AGENT_EV_SPAWN,	      /* SPAWN_LAUNCH brings processes of the
			       * running attempt (pmix/spawn.c) */
	AGENT_NEVENTS,
};

struct agent_qev;

struct agent {
	enum agent_state state;	/* only lifecycle.c's drain writes it */
	/* Posted events (agent_post), drained by a zero-delay timer; what
	 * an action posts goes to next and then before the rest. */
	struct agent_qev *queue, *queue_tail, *next, *next_tail;
	bool in_action;
	long drain_timer;	/* 0 when none */
	struct loop *loop;
	struct conn *conn;	/* to herd */
	struct rank *ranks;
	int n_ranks;
	int ranks_cap;		/* room in ranks: the LAUNCH's, then
				 * AGENT_SPAWN_LOCAL_MAX for spawned ones */
	json_t *launch;		/* the attempt's LAUNCH body (env, workdir
				 * for spawned processes), or NULL */
	int attempt;
	/* LAUNCH's "survivors": herd keeps the ranks that speak its
	 * elastic protocol when a node fails (warm.c holds the refill).
	 * Never set with "pmix": herd sends it only without. */
	bool survivors_kept;
	int64_t grace_ms;
	int stop_signal;	/* what rank_stop_all sends first (SIGTERM) */
	long kill_timer;	/* SIGKILL after grace, 0 when none */

	/* health.c: heartbeats both ways (a silent herd stops the ranks,
	 * a silent agent fails its node). */
	int64_t last_rx_ms;	/* monotonic time of herd's last frame */
	/* Start-up deadline: herd answers HELLO at once (HEARTBEAT), so an
	 * agent that hears nothing within hello_timeout_ms of starting has
	 * lost its herd before the heartbeat watchdog was armed.  Set by
	 * --hello-timeout; AGENT_HELLO_TIMEOUT_MS when not given. */
	int64_t hello_timeout_ms;
	long hello_timer;	/* 0 once herd spoke */
	int64_t hb_interval_ms;	/* 0 until herd's first HEARTBEAT */
	int64_t hb_timeout_ms;
	long hb_timer;
	int64_t hb_due_ms;	/* when hb_timer is due (stall detection) */
	int64_t hb_next_ms;	/* when our next HEARTBEAT goes out */
	int64_t hb_sent_ms;	/* when our last HEARTBEAT (timed, or an
				 * answer to herd's) went out */
	bool herd_stalled_said;	/* "herd is silent but reachable" logged */
	/* The fd herd's frames come on (a TCP socket with --connect), to
	 * ask the kernel whether herd's host still acknowledges us. */
	int herd_fd;
	/* --local-herd: herd runs on this machine (the local transport);
	 * its silence never means it is cut off (health.c). */
	bool herd_local;
	bool paused;		/* herd paused the job (SIGTSTP): ranks
				 * stopped with SIGSTOP until SIGCONT */
	uint64_t hb_seq;
	int64_t progress_timeout_ms;	/* 0: hung ranks are not looked for */
	char run_dir[256];	/* private per-agent directory ("" none) */
	/* $TMPDIR/herd-agent-UID, checked (rundir.c); user_fd is open
	 * while user_ok. */
	char user_dir[200];
	int user_fd;
	bool user_ok;
	char self_path[4096];	/* this program, for ranks as $HERD_AGENT */
	/* The herd Python package's directory, first on every rank's
	 * PYTHONPATH (pypkg.c); "" none. */
	char py_dir[300];
	/* The keeper program in a sealed memfd (keeper_image_open), made
	 * at the first launch; -1: none, keepers are /proc/self/exe. */
	int keeper_fd;
	bool keeper_tried;
	struct warm_state *warm;	/* warm.c; NULL: no warm slots */
	int n_gpus;		/* GPUs the node's topology shows */

	struct psrv_state *pmix;	/* pmix/server.c; NULL until a pmix launch */
	int touch_fd;	/* touch.c: the inotify fd (touch_on: open) */
	bool touch_on;
	struct measure_state *metrics; /* measure.c; NULL: no sampling */
	bool pmix_mode;		/* the current attempt runs under PMIx */
	struct stacks_state *stacks;	/* stacks.c: herd asked, answer due */
	struct check_state *check;	/* check.c: the health gate */
	struct netprobe_state *netprobe;	/* netprobe.c */
	struct control_state *control;	/* control.c: HERD_CONTROL */
	struct ckpt_mem *ckpt;	/* ckpt/mem.c: the memory tier, or NULL */
};

/* keeper.c: the rank keeper, its own program (keeper/keeper.h, the
 * contract: KEEPER_ARG, keeper_main; embedded, or herd-agent --keeper). */

/* What a keeper starts: one rank. */
struct keeper_rank {
	int rank;
	const char *self;	/* the agent's path, the keeper's argv[0] for ps */
	const char *path;	/* what to exec (/bin/sh) */
	char *const *argv;
	char *const *envp;	/* the rank's whole environment */
	const char *workdir;	/* NULL: the agent's */
	const cpu_set_t *cpus;	/* NULL: unbound */
	int mem_node;		/* NUMA node to prefer, -1: none */
	int image_fd;		/* keeper_image_open()'s, -1: /proc/self/exe */
};

/* The embedded keeper program in a new sealed, close-on-exec memfd, or
 * -1 where none can be made (the caller then runs /proc/self/exe in
 * keeper mode). */
int keeper_image_open(void);

/* Starts the keeper of rank k: an exec of k->image_fd (or of the agent's
 * own image in keeper mode), through proc_spawn (its own group, PDEATHSIG, the report pipe).
 * on_exit gets its status, which is the rank's, and the step that failed
 * (the keeper's exec: PROC_STEP_KEEPER; the rank's workdir, cpus or exec).
 * out gets the read ends of the rank's stdout and stderr (the caller's,
 * close-on-exec).  Returns the keeper's pid, or -1 with err. */
pid_t keeper_spawn(struct loop *loop, const struct keeper_rank *k,
		   proc_exit_fn on_exit, void *arg, int out[2],
		   struct herd_err *err);

/* rank.c */
/* Processes PMIx_Spawn may run on one node at once (the room kept in
 * a->ranks, whose entries never move while the attempt runs; the entry of
 * one that is over is taken again). */
#define AGENT_SPAWN_LOCAL_MAX 64

/* A spawned process (pmix/spawn.c) to start like a rank: its keeper,
 * group, output and EXIT as any rank's, under id on the wire. */
struct rank_proc {
	int id;			/* on the wire (OUTPUT, EXIT) */
	int spawn;		/* spawn N */
	int srank;		/* rank in its namespace */
	const char *nspace;	/* its PMIx namespace */
	const char *cmd;	/* what to exec (PATH searched) */
	char *const *argv;	/* its arguments after argv[0], NULL-ended */
	char *const *env;	/* "NAME=VALUE" on top of the job's, NULL-ended */
	const char *cwd;	/* NULL: the job's workdir */
	const char *cpus;	/* cpu list, NULL: unbound */
};
/* Starts p; returns 0 or -1 with err (no room, setup, fork). */
int rank_spawn_proc(struct agent *a, const struct rank_proc *p,
		    struct herd_err *err);
int rank_launch(struct agent *a, json_t *launch, struct herd_err *err);
void rank_signal_all(struct agent *a, int sig);
/* Starts the stop sequence: stop_signal (SIGTERM unless STOP named
 * another) now, SIGKILL after grace. */
void rank_stop_all(struct agent *a);
int rank_alive_count(const struct agent *a);
void rank_free_all(struct agent *a);

/* touch.c: every touch of each rank's HERD_PROGRESS_FILE counted, for
 * METRICS (the straggler detector's last source).  touch_launch forgets
 * the watches of the attempt before; touch_watch watches r's progress
 * file's directory (before r starts: none of its touches is missed).
 * touch_event counts one event of r's file: a touch is an IN_ATTRIB
 * (utime, touch(1)) or an IN_CLOSE_WRITE with no IN_ATTRIB since its
 * IN_OPEN (a create or a write), so touch(1)'s open, futimens and close
 * count once. */
void touch_launch(struct agent *a);
void touch_watch(struct agent *a, struct rank *r);
void touch_event(struct rank *r, uint32_t mask);
void touch_fini(struct agent *a);

/* rank.c, for warm.c: a rank's keeper exited (its proc.h on_exit), and
 * STARTED for a rank of attempt: warm or cold. */
void rank_keeper_exited(struct loop *loop, const struct proc_exit *e,
			void *agent);
void rank_started(struct agent *a, int rank, int attempt, bool warm);

/* warm.c: warm Python interpreters per slot (warm.c says how).
 * warm_init: preload is --warm's module list (NULL: no warm slots),
 * python the interpreter (NULL: /usr/bin/python3), slots how many (0:
 * the node's GPUs, else 1, then as many as a LAUNCH placed here), once
 * when no LAUNCH follows the first (--warm-once: what it takes is not
 * refilled); starts them.  warm_launch: when command runs a Python
 * script with the warm interpreter and a slot is idle, hands rank k to
 * it and returns its keeper's pid (the rank's keeper from now on; out
 * gets the rank's output pipes), else 0: start it cold.
 * warm_after_launch: refills the pool in the background.  warm_fini:
 * ends the idle slots. */
void warm_init(struct agent *a, const char *preload, const char *python,
	       int slots, bool once);
pid_t warm_launch(struct agent *a, const struct keeper_rank *k,
		  const char *command, int attempt, int out[2]);
void warm_after_launch(struct agent *a, int n_ranks);
/* A rank of this node said hello on HERD_CONTROL (control.c). */
void warm_rank_hello(struct agent *a);
/* A rank of this node ended: a held refill is due now. */
void warm_rank_ended(struct agent *a);
bool warm_enabled(const struct agent *a);
/* The bootstrap warm interpreters run (its path as their tracebacks
 * name it), or NULL when there is none. */
const char *warm_boot_path(const struct agent *a);
void warm_fini(struct agent *a);
/* A command the warm path takes: PYTHON [-u] [-B] SCRIPT ARGS..., plain
 * words only (letters, digits and _./,:=+@%- between blanks: nothing a
 * shell would expand, quote, redirect or chain), PYTHON named python,
 * python3 or python3.N (a path or looked up in the rank's PATH).
 * Returns 0 with c filled (warm_command_free it), or -1: run it cold. */
struct warm_cmd {
	char *buf;
	char **words;
	size_t n_words;
	const char *python;	/* words[0] */
	size_t script_at;	/* words[script_at] is the script */
	char flags[4];		/* "u", "B", "uB"... */
};
int warm_command_parse(const char *command, struct warm_cmd *c);
void warm_command_free(struct warm_cmd *c);

/* health.c */
/* 30 s, ten times the default health.timeout: the agent cannot know the
 * job's health.timeout before herd's first frame, and herd sends that
 * frame (HEARTBEAT) as soon as it reads our HELLO, so only a herd that
 * died or hung while connecting stays silent this long,
 * while a herd busy bringing up many nodes over slow links still makes
 * it. */
#define AGENT_HELLO_TIMEOUT_MS 30000
/* Notes that herd spoke (any frame). */
void health_heard(struct agent *a);
/* herd's HEARTBEAT: adopts its interval and timeout, starts ours. */
void health_on_heartbeat(struct agent *a, json_t *body);
/* herd's SIGNAL {SIGSTOP} (pause: every rank's group stopped, herd's
 * silence tolerated while its host acknowledges us) or {SIGCONT}. */
void health_pause(struct agent *a, bool pause);
/* The private directory for progress files ("" when it cannot be made),
 * and the start-up deadline: with no frame from herd within
 * a->hello_timeout_ms, the agent stops its ranks and exits. */
void health_init(struct agent *a);
/* Wall-clock ms of rank r's last sign of life: output or a touch of its
 * progress file. */
int64_t health_last_sign(const struct rank *r);
void health_fini(struct agent *a);

/* rundir.c: a->run_dir, the agent's private directory
 * $TMPDIR/herd-agent-UID/PID-XXXXXX ("" when it cannot be made); making
 * it first removes those of agents that were killed (their PID is gone).
 * rundir_topo_get/put: the node's topology summary kept from one start
 * to the next in the same directory (NULL: none that matches this
 * node's hardware and this agent's allowed cpus and memory now);
 * rundir_topo_xml_get/put: its hwloc XML, the same way, in dfd (the
 * user's directory, a->user_fd or a dup of it; any thread; get returns
 * a malloc()ed string). */
void rundir_make(struct agent *a);
void rundir_remove(struct agent *a);
void rundir_close(struct agent *a);
json_t *rundir_topo_get(struct agent *a);
void rundir_topo_put(struct agent *a, const json_t *summary);
char *rundir_topo_xml_get(int dfd);
void rundir_topo_xml_put(int dfd, const char *xml);

/* pypkg.c: the herd Python package (python/herd, carried in the image)
 * written into a checked private directory on this node: a->py_dir ("",
 * with one line on stderr, when it cannot be).  Runs after rundir_make. */
void pypkg_install(struct agent *a);
/* Puts a->py_dir first on env's PYTHONPATH (an existing value follows
 * it).  Returns 0 or -1 (out of memory). */
int pypkg_env(const struct agent *a, struct envv *env);

/* pmix/server.c: the agent is the PMIx server of its ranks (launch.mode
 * pmix).  Sets up the server (once) and the attempt's namespace from LAUNCH's
 * "pmix" object.  Returns 0 or -1 with err. */
int psrv_prepare(struct agent *a, json_t *launch, struct herd_err *err);
/* Opens libpmix and starts the server before any LAUNCH (--pmix: herd
 * says the job is launch.mode pmix), while herd waits for the other
 * nodes' HELLOs; a failure is left for psrv_prepare to report. */
void psrv_warm(struct agent *a);
/* Registers rank r with the server and adds what its client needs to
 * env (PMIx_server_setup_fork, OMPI_MCA_schizo).  Returns 0 or -1. */
int psrv_setup_rank(struct agent *a, struct rank *r, struct envv *env,
		    struct herd_err *err);
/* Registers a client nspace:rank and adds what it needs to env (as
 * psrv_setup_rank, for any namespace of this agent). */
int psrv_setup_proc(struct agent *a, const char *nspace, uint32_t rank,
		    struct envv *env, struct herd_err *err);
/* pmix/spawn.c: herd's SPAWN_LAUNCH, SPAWN_DONE and CONNECT_DONE.  A
 * SPAWN_LAUNCH with processes for this node is posted (AGENT_EV_SPAWN);
 * the lifecycle's action runs psrv_spawn_launch, which starts them when
 * may_run (the agent is not stopping) and answers SPAWN_UP. */
void psrv_on_spawn_launch(struct agent *a, struct proto_frame *f);
void psrv_spawn_launch(struct agent *a, json_t *body, bool may_run);
void psrv_on_spawn_done(struct agent *a, struct proto_frame *f);
void psrv_on_connect_done(struct agent *a, struct proto_frame *f);
/* Runs what the PMIx progress thread queued, now: a rank's EXIT must not
 * overtake its client_connected (the loop may have been busy, e.g.
 * registering a spawn's namespace, while the rank connected and ended). */
void psrv_drain(struct agent *a);
/* herd's FENCE_DONE: completes the matching fence. */
void psrv_on_fence_done(struct agent *a, struct proto_frame *f);
/* pmix/api.c: a PMIx_Job_control signal asked on another node (SIGNAL
 * with ranks) to this node's job ranks among ranks. */
void psrv_jctrl_signal_ranks(struct agent *a, const json_t *ranks, int sig);
/* pmix/modex.c: herd's DMODEX (serve one of our ranks' data) and
 * DMODEX_DATA (the answer to one of our requests). */
void psrv_modex_on_request(struct agent *a, struct proto_frame *f);
void psrv_modex_on_data(struct agent *a, struct proto_frame *f);
/* herd's PUBSUB_DONE: answers the matching publish, lookup or
 * unpublish (pmix/pubsub.c). */
void psrv_on_pubsub_done(struct agent *a, struct proto_frame *f);
/* herd's EVENT (another node's rank notified an event) and PROC_FAILED
 * (ranks of the attempt failed): delivered to the node's ranks
 * (pmix/event.c). */
void psrv_on_event(struct agent *a, struct proto_frame *f);
void psrv_on_proc_failed(struct agent *a, struct proto_frame *f);
/* At exit: fails pending fences, finalizes the server. */
void psrv_fini(struct agent *a);

/* measure.c: METRICS every metrics_interval_ms once a LAUNCH came. */
/* At start: loads NVML (dlopen) for the life of the agent. */
void metrics_init(struct agent *a);
/* After LAUNCH started the ranks: the attempt's interval, patterns
 * (compiled once here) and a fresh training record per rank; starts the
 * sampling timer. */
void metrics_launch(struct agent *a, json_t *launch);
/* Does the current attempt have metrics.patterns?  (rank.c looks at its
 * output only then.) */
bool metrics_has_patterns(const struct agent *a);
/* len bytes of rank r's output (whole lines but a last partial one):
 * metrics.patterns are applied to each line. */
void metrics_output(struct agent *a, struct rank *r, const char *buf,
		    size_t len);
/* health.c's heartbeat went at now: a sample that is due goes with it
 * (herd reads both in one burst); the timer only covers beats that do
 * not come. */
void metrics_beat(struct agent *a, int64_t now);
/* The METRICS body of this moment (exposed for the unit tests). */
json_t *metrics_body(struct agent *a);
void metrics_fini(struct agent *a);

/* stacks.c: the stacks of the ranks when herd asks (STACKS). */
/* herd's STACKS while ranks run: every running rank's stack (Python:
 * SIGABRT and faulthandler's traceback; else gdb), answered when all are
 * in or after the agent's bound. */
void stacks_start(struct agent *a, json_t *body);
/* STACKS with no ranks running: an answer with none. */
void stacks_answer_empty(struct agent *a, json_t *body);
/* rank.c: len bytes of whole lines rank r wrote to stderr. */
void stacks_rank_output(struct agent *a, struct rank *r, const char *buf,
			size_t len);
/* rank.c: rank r's stderr reached its end. */
void stacks_rank_closed(struct agent *a, struct rank *r);
/* Drops a look in progress (gdb killed by pid), no answer. */
void stacks_fini(struct agent *a);

/* stack_parse.c: the parsers (stacks.c feeds them; the unit tests
 * too). */
enum stack_method {
	STACK_PYTHON = 1,	/* faulthandler's traceback */
	STACK_GDB,		/* gdb's `thread apply all bt` */
};
struct stack_frame {
	char func[128];
	char file[256];
	int line;		/* 0: none */
};
struct stack_parse {
	enum stack_method method;
	bool started;		/* python: "Fatal Python error:" seen */
	bool in_block;		/* inside a thread's frames */
	int n_frames;		/* of the block */
	struct stack_frame inner, outer;	/* of the block */
	struct stack_frame fallback;
	bool have_fallback;
	bool found;		/* frame holds the answer */
	bool done;		/* nothing more to read */
	/* python: herd's warm bootstrap (warm.c), or NULL; a main thread
	 * whose innermost frame is there is outside the rank's script (it
	 * had raised or returned): frame stays empty, outside_line says
	 * where. */
	const char *boot;
	int outside_line;	/* > 0: outside the script */
	char frame[400];	/* "FUNC (file:line)" */
	bool in_collective;
	char line[1024];	/* a line being assembled */
	size_t line_len;
};
void stack_parse_init(struct stack_parse *p, enum stack_method method);
/* One line, without its newline. */
void stack_parse_line(struct stack_parse *p, const char *line);
/* The output is over: the answer is what was found. */
void stack_parse_end(struct stack_parse *p);
/* The table of collectives (stack_parse.c): is a frame with this
 * function (and file, may be NULL) communication waiting for the other
 * ranks? */
bool stacks_in_collective(const char *func, const char *file);
/* len bytes of src into dst (size > 0), cut to fit, NUL-terminated. */
void stack_copy_cut(char *dst, size_t size, const char *src, size_t len);
/* What follows path's last '/' (path itself without one). */
const char *stack_base_name(const char *path);

/* ckpt/mem.c: the node's memory tier (checkpoints in memory, peer
 * copies, persisting to checkpoint.dir). */
/* herd's CKPT_CONF: where the tier is; the first inventory goes out and
 * the tier is scanned from then on. */
void ckpt_mem_on_conf(struct agent *a, struct proto_frame *f);
/* HERD_CKPT_MEM (rank's directory, made and checked) and
 * HERD_CKPT_MEM_MAX into env, nothing when the tier cannot be used.
 * Returns 0, or -1 when out of memory. */
int ckpt_mem_rank_env(struct agent *a, int rank, struct envv *env);
/* herd's CKPT_PUSH, CKPT_DATA and CKPT_PERSIST. */
void ckpt_mem_on_push(struct agent *a, struct proto_frame *f);
void ckpt_mem_on_data(struct agent *a, struct proto_frame *f);
void ckpt_mem_on_persist(struct agent *a, struct proto_frame *f);
/* At exit: copies in flight dropped; the job's directory removed unless
 * keep_memory. */
void ckpt_mem_fini(struct agent *a);

/* main.c */
void agent_send(struct agent *a, enum proto_type type, json_t *body,
		const void *data, size_t len);

/* control.c (survivors keep training): each rank's HERD_CONTROL socket
 * in the private directory, its connections checked with SO_PEERCRED,
 * newline-delimited JSON forwarded to herd as RANK_CTL and back. */
/* Makes rank's socket and sets HERD_CONTROL in env; a socket that
 * cannot be made leaves it unset (the rank then gets the classic
 * restart).  Returns 0, or -1 when out of memory. */
int control_rank_env(struct agent *a, int rank, struct envv *env);
/* herd's RANK_CTL: its msg to the connection(s) it names. */
void control_on_frame(struct agent *a, struct proto_frame *f);
/* STOP for a restart: every rank that said hello is told
 * {"op":"leave"} (its process group is over) before its signal. */
void control_leave(struct agent *a);
/* Closes every socket and connection (the attempt's ranks are over). */
void control_fini(struct agent *a);
/* Whether every running rank of this node has said hello. */
bool control_all_hello(struct agent *a);

/* lifecycle.c */
/* Posts ev: it is queued and handled from the loop (a zero-delay timer,
 * or before the next frame), never inside this call.  Handling looks
 * up (a->state, ev) in the table, moves to the row's next state and
 * runs its action; an event with no row means nothing in that state
 * and is dropped.  What an action posts is handled right after it.
 * body (LAUNCH, STACKS, SPAWN: the frame's body, or NULL) is held
 * until then.  Out of memory: the ranks are killed and the agent
 * exits (a lost transition cannot be reasoned about). */
void agent_post(struct agent *a, enum agent_event ev, json_t *body);
/* Handles every queued event now (not from inside an action, where it
 * does nothing).  Returns how many were dropped (no row). */
int agent_drain(struct agent *a);
/* Frees what is still queued (after the loop). */
void agent_queue_clear(struct agent *a);
const char *agent_state_name(enum agent_state s);
/* Handles one frame from herd through the table of frame types; a type
 * an agent does not take is a protocol error (PROTO_ERROR back).  What
 * earlier frames posted is handled first. */
void agent_dispatch(struct agent *a, struct proto_frame *f);
/* The conn callbacks of the connection to herd (arg: the agent).  A
 * frame outside the protocol, or the connection's end, posts
 * AGENT_EV_HERD_GONE. */
void agent_on_frame(struct conn *c, struct proto_frame *f, void *arg);
void agent_on_close(struct conn *c, const char *reason, int clean, void *arg);
/* Stops the loop when the agent is exiting, no rank is left and what it
 * queued for herd is out (or the connection is dead). */
void agent_maybe_exit(struct agent *a);
/* Called when the last rank is gone (its EXIT sent). */
void agent_ranks_gone(struct agent *a);
/* Called after every child the agent reaped (rank.c). */
void agent_child_exited(struct agent *a);

/* Re-reads this program's path into a->self_path for $HERD_AGENT (rank.c):
 * "/proc/PID/exe" when the file was replaced or removed since start. */
void agent_self_refresh(struct agent *a);

#endif
