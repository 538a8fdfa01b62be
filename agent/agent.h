/* agent.h — herd-agent's state, shared by its files.  One agent runs per
 * node; it owns every rank it starts and kills them all before it exits
 * (STYLE.md rule 5). */
#ifndef HERD_AGENT_H
#define HERD_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "herd/conn.h"
#include "herd/loop.h"
#include "herd/spawn.h"

/* Partial output is buffered up to this per stream, then sent as it is:
 * a program printing a 10 MB line must not grow the agent without bound. */
#define RANK_LINE_MAX PROTO_OUTPUT_CHUNK

struct rank_stream {
	int fd;		/* pipe from the rank; -1 once at EOF */
	char buf[RANK_LINE_MAX];
	size_t len;
};

struct rank {
	int rank;		/* global rank */
	int local_rank;
	pid_t pid;		/* the keeper: leader of the rank's group */
	bool running;		/* not reaped yet */
	int status;		/* waitpid status once reaped */
	struct rank_stream out, err;
	bool exit_sent;
	bool pmix_connected;	/* pmix mode: it reached our PMIx server */
	int64_t last_output_ms;	/* wall clock of its last output */
	char progress_file[512];	/* HERD_PROGRESS_FILE it may touch */
	bool hung_reported;
	/* The read end of the keeper's report pipe (spawn_report_read):
	 * why the rank could not be started, if it could not; -1 once
	 * read to the end. */
	int start_fd;
	bool start_failed;
	struct spawn_report start;	/* when start_failed */
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

struct pmix_state;

struct agent {
	struct loop *loop;
	struct conn *conn;	/* to herd */
	struct rank *ranks;
	int n_ranks;
	int attempt;
	int64_t grace_ms;
	int stop_signal;	/* what rank_stop_all sends first (SIGTERM) */
	long kill_timer;	/* SIGKILL after grace, 0 when none */
	bool stopping;		/* STOP received or herd gone */
	bool exit_when_idle;	/* exit once every rank is reaped */

	/* health.c: heartbeats both ways (DESIGN.md "failure"). */
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
	bool herd_stalled_said;	/* "herd is silent but reachable" logged */
	/* The fd herd's frames come on (a TCP socket with --connect), to
	 * ask the kernel whether herd's host still acknowledges us. */
	int herd_fd;
	bool paused;		/* herd paused the job (SIGTSTP): ranks
				 * stopped with SIGSTOP until SIGCONT */
	uint64_t hb_seq;
	int64_t progress_timeout_ms;	/* 0: hung ranks are not looked for */
	char run_dir[256];	/* private per-agent directory ("" none) */
	char self_path[4096];	/* this program, for ranks as $HERD_AGENT */

	struct pmix_state *pmix;	/* pmix.c; NULL until a pmix launch */
	bool pmix_mode;		/* the current attempt runs under PMIx */
};

/* rank.c */
int rank_launch(struct agent *a, json_t *launch, struct herd_err *err);
void rank_reap(struct agent *a);
void rank_signal_all(struct agent *a, int sig);
/* Starts the stop sequence: stop_signal (SIGTERM unless STOP named
 * another) now, SIGKILL after grace. */
void rank_stop_all(struct agent *a);
int rank_alive_count(const struct agent *a);
void rank_free_all(struct agent *a);

/* health.c */
/* 30 s, ten times the default health.timeout: the agent cannot know the
 * job's health.timeout before herd's first frame, and herd sends that
 * frame (HEARTBEAT) as soon as it reads our HELLO, so only a herd that
 * died or hung while connecting (issue 11 item 4) stays silent this long,
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
void health_fini(struct agent *a);

/* pmix.c: the agent is the PMIx server of its ranks (launch.mode pmix).
 * Sets up the server (once) and the attempt's namespace from LAUNCH's
 * "pmix" object.  Returns 0 or -1 with err. */
int pmix_prepare(struct agent *a, json_t *launch, struct herd_err *err);
/* Registers rank r with the server and adds what its client needs to
 * env (PMIx_server_setup_fork, OMPI_MCA_schizo).  Returns 0 or -1. */
int pmix_setup_rank(struct agent *a, struct rank *r, struct envv *env,
		    struct herd_err *err);
/* herd's FENCE_DONE: completes the matching fence. */
void pmix_on_fence_done(struct agent *a, struct proto_frame *f);
/* At exit: fails pending fences, finalizes the server. */
void pmix_fini(struct agent *a);

/* main.c */
void agent_send(struct agent *a, enum proto_type type, json_t *body,
		const void *data, size_t len);
/* Called when the last rank is gone. */
void agent_ranks_gone(struct agent *a);

#endif
