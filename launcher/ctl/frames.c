/* ctl/frames.c — what herd takes from an agent, by frame type
 * (frame_handlers[]); anything else is a protocol error that fails the
 * node.  A handler reads its frame and posts what it means for the job;
 * it never changes the job's state itself.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd/proc.h"
#include "herd/text.h"
#include "herd/version.h"
#include "launcher/ctl/ctl_int.h"

/* A frame says the node failed: nothing more is read from it (as when it
 * was evicted at once); the failure itself is handled from the loop. */
void ctl_frame_failed(struct ctl *c, struct node *n, const char *why)
{
	conn_pause_reading(n->conn);
	ctl_post(c, CTL_EV_NODE_FAILED, n, 0, why);
}

static void on_hello(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *body = f->body;
	const char *version, *hostname;
	json_t *hb;

	if (n->state != NODE_CONNECTING)
		return; /* a second HELLO changes nothing */
	/* Its version, hostname, topo_error, interface and device names
	 * reach herd's terminal, the events and the node record. */
	herd_json_clean(body);
	version = json_string_value(json_object_get(body, "version"));
	hostname = json_string_value(json_object_get(body, "hostname"));
	if (!version || strcmp(version, HERD_VERSION)) {
		char why[256];

		snprintf(why, sizeof(why),
			 "%s: herd-agent version %s does not match herd %s",
			 n->host, version ? version : "?", HERD_VERSION);
		ctl_frame_failed(c, n, why);
		return;
	}
	free(n->hostname);
	n->hostname = strdup(hostname ? hostname : n->host);
	json_decref(n->addrs);
	n->addrs = json_incref(json_object_get(body, "addrs"));
	if (!json_is_array(n->addrs)) {
		json_decref(n->addrs);
		n->addrs = json_array();
	}
	json_decref(n->topo);
	n->topo = json_incref(json_object_get(body, "topo"));
	if (!n->topo && n->member) {
		const char *why =
		    json_string_value(json_object_get(body, "topo_error"));

		fprintf(stderr,
			"herd: %s: no topology (%s); its ranks run "
			"unbound\n",
			n->host, why ? why : "not reported");
	}
	ctl_node_set(c, n, NODE_UP);
	/* Heartbeats start now, both ways. */
	hb = json_pack("{s:I, s:I}", "interval_ms",
		       (json_int_t)c->spec->health.heartbeat_ms, "timeout_ms",
		       (json_int_t)c->spec->health.timeout_ms);
	ctl_send(c, n, PROTO_HEARTBEAT, hb, NULL, 0);
	json_decref(hb);
	ctl_ckpt_node_up(c, n);
	if (!n->member && n->hot) {
		events_emit(c->ev, "node_up",
			    json_pack("{s:s, s:s, s:b}", "host", n->host,
				      "hostname", n->hostname, "spare", 1));
		ctl_post(c, CTL_EV_NODE_UP, n, 0, NULL);
		return;
	}
	if (!n->member) {
		events_emit(c->ev, "node_readmitted",
			    json_pack("{s:s}", "host", n->host));
		fprintf(stderr,
			"herd: %s answers again; readmitted as a "
			"spare\n",
			n->host);
		ctl_post(c, CTL_EV_NODE_UP, n, 0, NULL);
		return;
	}
	events_emit(
	    c->ev, "node_up",
	    json_pack("{s:s, s:s}", "host", n->host, "hostname", n->hostname));
	ctl_progress(c, false);
	ctl_rejoin_node_up(c, n);
	ctl_post(c, CTL_EV_NODE_UP, n, 0, NULL);
}

/* A process PMIx_Spawn started ended (ctl/pmix/spawn.c placed it): its
 * status counts as a rank's, a failure fails the attempt as a rank's
 * would; it is never taken for a singleton (a spawned program need not
 * use PMIx). */
static void spawned_exit(struct ctl *c, struct node *n, int slot, json_t *body)
{
	struct rank_slot *r = &c->ranks[slot];
	json_t *code = json_object_get(body, "code");
	json_t *sig = json_object_get(body, "signal");
	const char *error = json_string_value(json_object_get(body, "error"));
	int status;

	if (r->done)
		return;
	r->done = true;
	c->ranks_done++;
	ctl_spawn_proc_gone(c, slot);
	ctl_print(c, slot, 1, "", 0, true);
	ctl_print(c, slot, 2, "", 0, true);
	ctl_close_rank_log(c, slot);
	status = json_is_integer(sig) ? 128 + (int)json_integer_value(sig)
				      : (int)json_integer_value(code);
	events_emit(c->ev, "spawn_exit",
		    json_pack("{s:i, s:i, s:i, s:s, s:i, s:O, s:O, s:s?}",
			      "attempt", c->attempt, "spawn", r->spawn, "rank",
			      r->srank, "host", n->host, "status", status,
			      "code", code ? code : json_null(), "signal",
			      sig ? sig : json_null(), "reason", error));
	if (status != 0) {
		struct ctl_ev fail = {.type = CTL_EV_RANK_FAILED,
				      .node = n,
				      .status = status,
				      .flag = error != NULL};

		if (error)
			snprintf(fail.why, sizeof(fail.why),
				 "spawned process s%d:%d on %s: %s", r->spawn,
				 r->srank, n->host, error);
		else if (json_is_integer(sig))
			snprintf(fail.why, sizeof(fail.why),
				 "spawned process s%d:%d on %s was killed by "
				 "signal %d (%s)",
				 r->spawn, r->srank, n->host,
				 (int)json_integer_value(sig),
				 strsignal((int)json_integer_value(sig)));
		else
			snprintf(fail.why, sizeof(fail.why),
				 "spawned process s%d:%d on %s exited with "
				 "status %d",
				 r->spawn, r->srank, n->host, status);
		ctl_post_ev(c, &fail);
		return;
	}
	if (c->ranks_done == c->n_slots)
		ctl_post(c, CTL_EV_RANKS_DONE, NULL, 0, NULL);
	else
		ctl_post(c, CTL_EV_RANK_EXITED, n, 0, NULL);
}

static void on_rank_exit(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *body = f->body;
	int rank = (int)json_integer_value(json_object_get(body, "rank"));
	json_t *code = json_object_get(body, "code");
	json_t *sig = json_object_get(body, "signal");
	json_t *att = json_object_get(body, "attempt");
	/* Set by the agent when the rank never ran: a failed exec (its
	 * errno), workdir or binding. */
	const char *error;
	json_t *ev;
	int status;
	bool singleton, unconnected;
	struct rank_slot *r;

	if (json_is_integer(att) && json_integer_value(att) != c->attempt)
		return; /* a rank of an attempt already over */
	if (!c->ranks || rank < 0 || rank >= c->n_slots ||
	    &c->nodes[c->ranks[rank].node] != n)
		return;
	/* The agent's words: on herd's terminal and in the events. */
	herd_json_clean(json_object_get(body, "error"));
	error = json_string_value(json_object_get(body, "error"));
	r = &c->ranks[rank];
	if (r->spawn) {
		spawned_exit(c, n, rank, body);
		return;
	}
	if (r->done)
		return;
	r->done = true;
	c->ranks_done++;
	ctl_pubsub_rank_gone(c, rank);
	ctl_print(c, rank, 1, "", 0, true);
	ctl_print(c, rank, 2, "", 0, true);
	ctl_close_rank_log(c, rank);
	status = json_is_integer(sig) ? 128 + (int)json_integer_value(sig)
				      : (int)json_integer_value(code);
	/* pmix mode: the rank ended before it ever connected to its
	 * agent's PMIx server. */
	unconnected = json_is_false(json_object_get(body, "pmix_connected"));
	singleton = status == 0 && unconnected;
	if (singleton)
		status = 1;
	r->status = status;
	/* The agent's words for a failed chdir (lib/core/proc.c): the same
	 * library on both sides of the channel. */
	r->no_workdir =
	    error && c->spec->launch.workdir &&
	    !strncmp(error, proc_step_what(PROC_STEP_WORKDIR),
		     strlen(proc_step_what(PROC_STEP_WORKDIR))) &&
	    (json_integer_value(json_object_get(body, "errno")) == ENOENT ||
	     json_integer_value(json_object_get(body, "errno")) == ENOTDIR);
	ev = json_pack("{s:i, s:i, s:s, s:i, s:O, s:O}", "attempt", c->attempt,
		       "rank", rank, "host", n->host, "status", status, "code",
		       code ? code : json_null(), "signal",
		       sig ? sig : json_null());
	if (ev && error) {
		json_object_set_new(ev, "reason", json_string(error));
		json_object_set(ev, "errno", json_object_get(body, "errno"));
	}
	events_emit(c->ev, "rank_exit", ev);
	if (status != 0) {
		struct ctl_ev fail = {
		    .type = CTL_EV_RANK_FAILED,
		    .node = n,
		    .status = status,
		    .flag = error != NULL,
		    .body = json_pack("{s:i, s:b, s:b}", "rank", rank, "signal",
				      json_is_integer(sig), "no_workdir",
				      r->no_workdir)};

		if (r->no_workdir)
			snprintf(fail.why, sizeof(fail.why),
				 "rank %d on %s: launch.workdir %s does not "
				 "exist there",
				 rank, n->host, c->spec->launch.workdir);
		else if (error)
			snprintf(fail.why, sizeof(fail.why),
				 "rank %d on %s: %s", rank, n->host, error);
		else if (singleton)
			snprintf(fail.why, sizeof(fail.why),
				 "rank %d on %s exited 0 without ever "
				 "connecting to herd's PMIx server (ran as a "
				 "singleton? Open MPI needs "
				 "OMPI_MCA_schizo=^orte)",
				 rank, n->host);
		else if (json_is_integer(sig))
			snprintf(fail.why, sizeof(fail.why),
				 "rank %d on %s was killed by signal %d (%s)",
				 rank, n->host, (int)json_integer_value(sig),
				 strsignal((int)json_integer_value(sig)));
		else if (unconnected)
			/* Open MPI's singleton fallback fails so when it
			 * cannot start its own daemon. */
			snprintf(fail.why, sizeof(fail.why),
				 "rank %d on %s exited with status %d without "
				 "ever connecting to herd's PMIx server (not an "
				 "MPI program, failed before MPI_Init, or a "
				 "singleton: Open MPI needs "
				 "OMPI_MCA_schizo=^orte)",
				 rank, n->host, status);
		else
			snprintf(fail.why, sizeof(fail.why),
				 "rank %d on %s exited with status %d", rank,
				 n->host, status);
		ctl_post_ev(c, &fail);
		json_decref(fail.body);
		return;
	}
	if (c->ranks_done == c->n_slots)
		ctl_post(c, CTL_EV_RANKS_DONE, NULL, 0, NULL);
	else
		ctl_post(c, CTL_EV_RANK_EXITED, n, 0, NULL);
}

static void on_heartbeat(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *hung = json_object_get(f->body, "hung");
	json_t *att = json_object_get(f->body, "attempt");
	struct ctl_ev ev = {.type = CTL_EV_HUNG, .node = n, .body = f->body};

	if (!json_is_array(hung) || json_array_size(hung) == 0 || !n->member ||
	    (json_is_integer(att) && json_integer_value(att) != c->attempt))
		return;
	ctl_post_ev(c, &ev);
}

static void on_stacks(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *att = json_object_get(f->body, "attempt");
	struct ctl_ev ev = {.type = CTL_EV_STACKS, .node = n, .body = f->body};

	if (!n->member || json_integer_value(att) != c->attempt)
		return;
	ctl_post_ev(c, &ev);
}

static void on_output(struct ctl *c, struct node *n, struct proto_frame *f)
{
	int rank = (int)json_integer_value(json_object_get(f->body, "rank"));
	int fd = (int)json_integer_value(json_object_get(f->body, "fd"));
	json_t *att = json_object_get(f->body, "attempt");

	(void)n;
	if (!c->ranks || rank < 0 || rank >= c->n_slots ||
	    (fd != 1 && fd != 2) ||
	    (json_is_integer(att) && json_integer_value(att) != c->attempt))
		return;
	/* Written at once: the log is how a person (or a test) follows a
	 * rank while it runs. */
	ctl_log_write(c, rank, f->data, f->data_len);
	ctl_print(c, rank, fd, (const char *)f->data, f->data_len, false);
}

static void on_stopped(struct ctl *c, struct node *n, struct proto_frame *f)
{
	(void)f;
	n->stopped = true;
	ctl_post(c, CTL_EV_STOPPED, n, 0, NULL);
}

static void on_error(struct ctl *c, struct node *n, struct proto_frame *f)
{
	const char *said =
	    json_string_value(json_object_get(f->body, "message"));
	const char *stage =
	    json_string_value(json_object_get(f->body, "stage"));
	char text[HERD_ERR_MAX], *msg = NULL;

	/* The agent's words reach herd's terminal, its events and the node
	 * record: no escape sequence of a node's may rewrite the terminal. */
	if (said) {
		snprintf(text, sizeof(text), "%s", said);
		msg = herd_text_clean(text);
	}

	/* A key herd could not use, a host key that does not match, a
	 * refused connection or a name that does not resolve ("setup") is
	 * how herd was set up, not the node's health: not recorded against
	 * it (a wrong key or ssh.port would otherwise quarantine every
	 * node). */
	if (stage && (!strcmp(stage, "auth") || !strcmp(stage, "host key") ||
		      !strcmp(stage, "setup")))
		n->setup_error = true;
	/* Its agent was told to stop by someone other than herd: scancel
	 * or the end of a Slurm allocation (slurmstepd's SIGTERM), a
	 * person, the node's shutdown.  The node leaves the attempt at
	 * once, said so, and is not recorded as failed: it was stopped,
	 * it did not break (a connection lost a moment later was). */
	if (stage && !strcmp(stage, "signal")) {
		char why[256];

		n->stopped_outside = true;
		snprintf(why, sizeof(why), "%s: %s, sent from outside herd",
			 n->host, msg ? msg : "herd-agent: stopped");
		ctl_frame_failed(c, n, why);
		return;
	}
	ctl_frame_failed(c, n, msg ? msg : "agent reported an error");
}

/* What herd takes from an agent, by frame type; anything else is a
 * protocol error that fails the node (OpenSSH dispatch.c). */
typedef void (*frame_fn)(struct ctl *c, struct node *n, struct proto_frame *f);
static const frame_fn frame_handlers[PROTO_TYPE_MAX_ + 1] = {
    [PROTO_HELLO] = on_hello,
    [PROTO_OUTPUT] = on_output,
    [PROTO_EXIT] = on_rank_exit,
    [PROTO_HEARTBEAT] = on_heartbeat,
    [PROTO_ERROR] = on_error,
    [PROTO_STOPPED] = on_stopped,
    [PROTO_FENCE] = ctl_pmix_fence,
    [PROTO_ABORT] = ctl_pmix_abort,
    [PROTO_PMIX_LOG] = ctl_pmix_log,
    [PROTO_SIGNAL] = ctl_pmix_signal,
    [PROTO_METRICS] = ctl_metrics_frame,
    [PROTO_STACKS] = on_stacks,
    [PROTO_CHECK] = ctl_check_frame,
    [PROTO_NETPROBE] = ctl_netprobe_frame,
    [PROTO_SPAWN] = ctl_spawn_frame,
    [PROTO_SPAWN_UP] = ctl_spawn_up,
    [PROTO_CONNECT] = ctl_connect_frame,
    [PROTO_DMODEX] = ctl_pmix_dmodex,
    [PROTO_DMODEX_DATA] = ctl_pmix_dmodex_data,
    [PROTO_PUBLISH] = ctl_pubsub_publish,
    [PROTO_LOOKUP] = ctl_pubsub_lookup,
    [PROTO_UNPUBLISH] = ctl_pubsub_unpublish,
    [PROTO_EVENT] = ctl_event_frame,
    [PROTO_RANK_CTL] = ctl_rejoin_frame,
    [PROTO_CKPT_INV] = ctl_ckpt_frame,
    [PROTO_CKPT_DATA] = ctl_ckpt_frame,
    [PROTO_CKPT_ACK] = ctl_ckpt_frame,
    [PROTO_STARTED] = ctl_rank_started,
};

/* A conn's arg is its node: found in O(1).  A conn the node has dropped
 * (waiting in the graveyard) is no longer its own. */
void ctl_on_frame(struct conn *conn, struct proto_frame *f, void *arg)
{
	struct node *n = arg;
	struct ctl *c = n->ctl;
	frame_fn fn = NULL;
	struct herd_err err;

	if (n->conn != conn)
		goto out;
	n->last_rx_ms = loop_now_ms();
	if (proto_frame_check(f, PROTO_TO_HERD, &err) < 0) {
		char why[HERD_ERR_MAX + 64];

		/* err may quote the frame (a value it refused). */
		snprintf(why, sizeof(why), "%s: %s", n->host, err.text);
		ctl_frame_failed(c, n, herd_text_clean(why));
		goto out;
	}
	if (f->type >= 1 && f->type <= PROTO_TYPE_MAX_)
		fn = frame_handlers[f->type];
	if (fn) {
		fn(c, n, f);
	} else {
		char why[256];

		snprintf(why, sizeof(why),
			 "protocol error: unexpected frame %s from %s",
			 proto_type_name((int)f->type), n->host);
		ctl_frame_failed(c, n, why);
	}
out:
	proto_frame_free(f);
}

void ctl_on_close(struct conn *conn, const char *reason, int clean, void *arg)
{
	struct node *n = arg;
	char why[512];

	if (n->conn != conn)
		return;
	/* A decode error may quote the bytes the agent sent (jansson's
	 * "near '...'"). */
	snprintf(why, sizeof(why), "%s: connection to the agent lost (%s)",
		 n->host, clean ? "end of stream" : reason);
	ctl_post(n->ctl, CTL_EV_NODE_FAILED, n, 0, herd_text_clean(why));
}
