/* ctl/check_int.h — the health gate's state, shared by ctl/check.c (the
 * checks, their verdicts, herd check's table) and ctl/netprobe.c (herd
 * check's network probe).  Only those two include it.
 */
#ifndef HERD_LAUNCHER_CTL_CHECK_INT_H
#define HERD_LAUNCHER_CTL_CHECK_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "launcher/ctl/ctl_int.h"

/* The clock check's bound: 1 s, far beyond what NTP keeps a cluster to
 * (milliseconds) and below what breaks a job (TLS, Kerberos, files whose
 * times lie, logs that cannot be lined up). */
#define CHECK_CLOCK_MAX_MS 1000
/* health.check_command is killed after this long. */
#define CHECK_SCRIPT_TIMEOUT_MS 60000
/* An agent that has not answered CHECK this long after the script's
 * timeout is failed ("agent"). */
#define CHECK_ANSWER_SLACK_MS 15000
/* The network probe: 32 MiB one way per transfer, at most 2 s (5 s a
 * round with its set-up): tens of ms per transfer on a healthy link, a
 * few seconds for the whole ring.  4 MiB (a few ms) proved too short to
 * time on a busy machine: one preemption of the sender halved a rate. */
#define CHECK_PROBE_BYTES      (32LL << 20)
#define CHECK_PROBE_TIMEOUT_MS 2000
#define CHECK_PROBE_ROUND_MS   5000
/* A link is slow below a fifth of the typical rate (the median of the
 * nodes' best links).  Not health.straggler_ratio (1.3): transfers of a
 * few MiB vary by up to 3x between healthy links on a busy machine
 * (measured on the test cluster: 190 to 810 MB/s); a port that
 * negotiated a lower speed, a bad cable or a rate limit is off by far
 * more. */
#define CHECK_PROBE_SLOW_RATIO 5.0

/* The columns of the table, in order. */
static const char *const check_cols[] = {"agent", "workdir", "checkpoint",
					 "clock", "gpus",    "rdma",
					 "net",	  "script",  "network"};
#define N_COLS	    (sizeof(check_cols) / sizeof(check_cols[0]))
#define COL_NETWORK (N_COLS - 1)

struct verdict {
	const char *status; /* "ok", "fail", "skipped", NULL: not run */
	char reason[512];
	char value[512];
};

struct check_node {
	bool sent;    /* CHECK went out in this gate */
	bool pending; /* no answer yet */
	bool answered;
	bool failed; /* the agent failed (fail_why) */
	char fail_why[512];
	json_t *checks; /* the answer's checks */
	int64_t sent_wall, recv_wall, agent_t, held_ms;
	int64_t offset_ms;
	struct verdict v[N_COLS];
	bool judged;
	/* the network probe */
	char addr[64];	 /* its address on the job's network */
	int probe_index; /* in the ring, -1: not probed */
};

/* One transfer: b sends to a.  Transfers 2L and 2L + 1 are link L's two
 * directions. */
struct probe_edge {
	int a, b;  /* node indexes (a listens and receives, b
		    * connects and sends) */
	int round; /* 1.. */
	int port;  /* a's, once it listens */
	bool connect_sent;
	bool got_a, got_b;
	long long rx_a, us_a, rx_b, us_b; /* a received from b, ... */
	double prev; /* MB/s of the first try, when this is a retry */
	char err[256];
};

struct ctl_check {
	struct check_node *nodes; /* [c->n_nodes] */
	long timer;
	bool timed_out;
	/* RDMA: the highest rate seen per port name ("mlx5_0/1") */
	json_t *rdma_max;
	/* the network probe */
	bool probe_started, probe_done;
	char probe_skip[256];	  /* why it did not run ("" it ran) */
	struct probe_edge *edges; /* transfers */
	int n_edges, n_rounds, round;
	int n_links; /* n_edges / 2 */
	long round_timer;
	bool round_timed_out;
	bool retried;	/* the slow links were probed again */
	double typical; /* MB/s */
};

/* The gate's state, made on first use; NULL when out of memory. */
struct ctl_check *check_state(struct ctl *c);
/* Node n is a member that is up: checked. */
bool check_checked_up(struct node *n);
/* The job's network as MASTER_ADDR would be on it: the first node's
 * address that every other checked node shares; fills each node's addr.
 * NULL when there is none. */
const char *check_job_network(struct ctl *c);
/* Sets verdict v (reason and value may be NULL). */
void check_set_v(struct verdict *v, const char *status, const char *reason,
		 const char *value);
/* Adds a failure to a column (several RDMA ports may fail). */
void check_add_fail(struct verdict *v, const char *reason);
/* One transfer's rate in MB/s; 0 on an error; the better of two tries. */
double check_xfer_rate(const struct probe_edge *pe);
/* Link l's rate: its slower direction; *err: the first error, or NULL. */
double check_link_rate(const struct ctl_check *s, int l, const char **err);

#endif
