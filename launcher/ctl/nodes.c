/* ctl/nodes.c — what a job remembers of its nodes between runs:
 * failures with reason and time in the job's node record (herd/noderec.h,
 * one file per job name), and the quarantine that follows
 * health.quarantine_after of them within health.quarantine_for.
 *
 * What counts against a node: a member that fails while the job runs or
 * connects (crash, partition, heartbeats silent, agent error:
 * ctl_node_out in ctl/recover.c), and what other parts note (the health gate: "unhealthy";
 * straggler eviction: "straggler").  What does not: a node herd itself
 * stops at the end, a readmit probe or a warm spare that fails while not
 * a member (nothing ran there), a rank that exits non-zero (the program's
 * failure, not the node's), and a transport that could not even start
 * (herd's own failure).  A local job (nodes: localhost, transport local)
 * records nothing: its one node is this machine.
 *
 * Nor what is herd's set-up rather than the node's health: a refused connection (a wrong ssh.port), a name that does not
 * resolve, a failed authentication or a host key not pinned (the
 * transport's "setup", "auth" and "host key" stages: node->setup_error),
 * a node whose agent was sent SIGTERM, SIGINT or SIGHUP by someone else
 * (scancel or the end of the allocation, a person: the agent's ERROR of
 * stage "signal", node->stopped_outside),
 * and the same failure on every node at once (a batch of at least two
 * notes, as many as the job's nodes, of kind "failed" with one reason
 * once each host's name and a detail in parentheses at its end are taken
 * out of it).  Notes are held for
 * max(1 s, health.heartbeat) from the first of a batch so that nodes
 * failing together are judged together.  A stop (herd stop, Ctrl-C,
 * SIGTERM as scancel sends it to herd and its agents at once) drops the
 * failures not yet written and notes nothing after it: a node that goes
 * while the job is being stopped has not failed.
 *
 * The record is the job's identity's (noderec_key(): the job's name and
 * its job file's real path): two projects whose jobs have the same name
 * keep records of their own.
 *
 * The record is read once, at the start of a run; a record that cannot
 * be read or written (corrupt, wrong owner or mode) is a warning and the
 * job goes on without it: the job never fails because of its record.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "launcher/ctl/ctl_int.h"
#include "herd/noderec.h"
#include "herd/spec.h"

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One failure waiting for its write. */
struct ctl_nodenote {
	char *host, *kind, *reason;
	int64_t t_ms;
};

static void nodenotes_free(struct ctl *c)
{
	for (size_t i = 0; i < c->n_nodenotes; i++) {
		free(c->nodenotes[i].host);
		free(c->nodenotes[i].kind);
		free(c->nodenotes[i].reason);
	}
	free(c->nodenotes);
	c->nodenotes = NULL;
	c->n_nodenotes = 0;
}

/* The record's key of this job (noderec_key()), made once. */
static const char *record_key(struct ctl *c)
{
	if (!c->noderec_key)
		c->noderec_key = noderec_key(c->spec->name,
					     c->opt->job_file ? c->opt->job_file
							      : c->spec->path);
	return c->noderec_key;
}

/* reason with every occurrence of host taken out, into buf. */
static void reason_less_host(const char *reason, const char *host, char *buf,
			     size_t size)
{
	size_t hl = strlen(host), o = 0;

	for (const char *p = reason; *p && o + 1 < size;) {
		if (hl && !strncmp(p, host, hl)) {
			buf[o++] = '*';
			p += hl;
		} else {
			buf[o++] = *p++;
		}
	}
	buf[o] = '\0';
	/* "connection to the agent lost (end of stream)" and "(write:
	 * Broken pipe)" are one failure seen at two moments: the detail in
	 * parentheses at the end is left out. */
	if (o && buf[o - 1] == ')') {
		char *paren = strrchr(buf, '(');

		if (paren && paren > buf && paren[-1] == ' ')
			paren[-1] = '\0';
	}
}

/* Whether the notes held are the same failure on every node at once
 * (see above); *why gets the first one's reason. */
static bool same_everywhere(struct ctl *c, const char **why)
{
	char first[512], each[512];
	size_t hosts = 0;

	*why = NULL;
	if (c->n_nodenotes < 2 || c->n_nodenotes < (size_t)c->want_nodes)
		return false;
	for (size_t i = 0; i < c->n_nodenotes; i++) {
		struct ctl_nodenote *e = &c->nodenotes[i];
		bool seen = false;

		if (strcmp(e->kind, "failed"))
			return false;
		reason_less_host(e->reason, e->host, i ? each : first,
				 sizeof(first));
		if (i && strcmp(each, first))
			return false;
		for (size_t k = 0; k < i && !seen; k++)
			seen = !strcmp(c->nodenotes[k].host, e->host);
		hosts += !seen;
	}
	if (hosts < 2 || hosts < (size_t)c->want_nodes)
		return false;
	*why = c->nodenotes[0].reason;
	return true;
}

static void warn_once(struct ctl *c, const char *what)
{
	/* Said once a run: a record that cannot be written stays so. */
	if (!c->noderec_warned)
		fprintf(stderr, "herd: warning: node record not written (%s)\n",
			what);
	c->noderec_warned = true;
}

void ctl_nodes_flush(struct ctl *c)
{
	struct noderec_note *v;
	struct herd_err err;
	const char *same;

	if (c->nodenote_timer && c->loop)
		loop_timer_del(c->loop, c->nodenote_timer);
	c->nodenote_timer = 0;
	if (!c->n_nodenotes)
		return;
	if (same_everywhere(c, &same)) {
		fprintf(stderr,
			"herd: every node failed the same way (%s): taken as "
			"herd's set-up or this machine's network, not the "
			"nodes' health; not held against them in the node "
			"record\n",
			same);
		nodenotes_free(c);
		return;
	}
	if (!(v = calloc(c->n_nodenotes, sizeof(*v)))) {
		warn_once(c, "out of memory");
		nodenotes_free(c);
		return;
	}
	for (size_t i = 0; i < c->n_nodenotes; i++)
		v[i] = (struct noderec_note){
		    c->nodenotes[i].host, c->nodenotes[i].t_ms,
		    c->nodenotes[i].kind, c->nodenotes[i].reason,
		    logtree_run_id(c->lt)};
	herd_err_clear(&err);
	if (!record_key(c))
		herd_errprintf(&err, "out of memory");
	else if (noderec_note_job(c->noderec_key, c->spec->name,
				  c->opt->job_file, v, c->n_nodenotes,
				  c->spec->health.quarantine_after,
				  c->spec->health.quarantine_for_ms, &err) < 0)
		warn_once(c, err.text);
	free(v);
	nodenotes_free(c);
}

static void on_nodenote(struct loop *loop, void *arg)
{
	struct ctl *c = arg;

	(void)loop;
	c->nodenote_timer = 0;
	ctl_nodes_flush(c);
}

void ctl_node_note(struct ctl *c, struct node *n, const char *kind,
		   const char *reason)
{
	struct ctl_nodenote *v, *e;
	size_t hl;

	/* herd plan leaves no trace; this machine (a local job) is never
	 * left out of its own jobs. */
	if (!c || !n || !c->lt || c->opt->plan_only || c->local ||
	    c->nodes_stopped)
		return;
	/* "h1n3: connection lost" is recorded under h1n3 as "connection
	 * lost". */
	hl = strlen(n->host);
	if (reason && !strncmp(reason, n->host, hl) && reason[hl] == ':' &&
	    reason[hl + 1] == ' ' && reason[hl + 2])
		reason += hl + 2;
	/* Bounded: a loop turn notes at most every node once or twice. */
	if (c->n_nodenotes >= NODEREC_HOSTS_MAX) {
		warn_once(c, "too many failures at once");
		return;
	}
	v = realloc(c->nodenotes, (c->n_nodenotes + 1) * sizeof(*v));
	if (!v) {
		warn_once(c, "out of memory");
		return;
	}
	c->nodenotes = v;
	e = &v[c->n_nodenotes];
	e->host = strdup(n->host);
	e->kind = strdup(kind ? kind : "failed");
	e->reason = strdup(reason ? reason : "-");
	e->t_ms = wall_ms();
	if (!e->host || !e->kind || !e->reason) {
		free(e->host);
		free(e->kind);
		free(e->reason);
		warn_once(c, "out of memory");
		return;
	}
	c->n_nodenotes++;
	if (!c->nodenote_timer && c->loop)
		c->nodenote_timer =
		    loop_timer_add(c->loop,
				   c->spec->health.heartbeat_ms > 1000
				       ? c->spec->health.heartbeat_ms
				       : 1000,
				   on_nodenote, c);
	if (c->nodenote_timer <= 0) { /* no loop (yet), no timer: now */
		c->nodenote_timer = 0;
		ctl_nodes_flush(c);
	}
}

void ctl_nodes_stopped(struct ctl *c)
{
	if (c->nodenote_timer && c->loop)
		loop_timer_del(c->loop, c->nodenote_timer);
	c->nodenote_timer = 0;
	nodenotes_free(c);
	c->nodes_stopped = true;
}

/* Says that host is left out, on the terminal and as an event. */
static void say_quarantined(struct ctl *c, const char *host, bool spare,
			    const struct noderec_host *h, int64_t now,
			    int64_t until)
{
	const struct spec *spec = c->spec;
	const struct noderec_failure *last = NULL;
	size_t count =
	    noderec_recent(h, now, spec->health.quarantine_for_ms, &last);
	char window[32];

	if (spec_duration_format(spec->health.quarantine_for_ms, window,
				 sizeof(window)) < 0)
		snprintf(window, sizeof(window), "%ld ms",
			 spec->health.quarantine_for_ms);
	/* The events follow job_start (ctl_start emits them). */
	if (!c->quarantined)
		c->quarantined = json_array();
	if (c->quarantined)
		json_array_append_new(
		    c->quarantined,
		    json_pack("{s:s, s:b, s:I, s:s, s:s, s:I}", "host", host,
			      "spare", spare, "failures", (json_int_t)count,
			      "last_kind", last ? last->kind : "-",
			      "last_reason", last ? last->reason : "-", "until",
			      (json_int_t)until));
	fprintf(stderr,
		"herd: %s%s is quarantined (%zu failure%s in %s, last: %s); "
		"%s (herd nodes %s --clear %s to use it again)\n",
		spare ? "spare " : "", host, count, count == 1 ? "" : "s",
		window, last ? last->reason : "-",
		spare ? "not used" : "skipped", spec->name, host);
}

int ctl_nodes_quarantine(struct ctl *c, const struct resolved *res, bool *skip)
{
	const struct spec *spec = c->spec;
	size_t total = res->nodes->count + res->spares->count;
	struct noderec *r = NULL;
	struct herd_err err;
	int64_t now = wall_ms();
	int left_out = 0;

	memset(skip, 0, total * sizeof(*skip));
	if (spec->health.quarantine_after <= 0 || c->opt->plan_only)
		return 0;
	herd_err_clear(&err);
	if (!record_key(c)) {
		fprintf(stderr, "herd: warning: node record not read, no node "
				"is quarantined: out of memory\n");
		return 0;
	}
	if (noderec_load(c->noderec_key, &r, &err) < 0) {
		fprintf(stderr,
			"herd: warning: node record not read, no node is "
			"quarantined: %s\n",
			err.text);
		c->noderec_warned = true;
		return 0;
	}
	for (size_t i = 0; i < total; i++) {
		bool spare = i >= res->nodes->count;
		const char *host =
		    spare ? res->spares->entries[i - res->nodes->count].host
			  : res->nodes->entries[i].host;
		const struct noderec_host *h = noderec_find(r, host);
		int64_t until =
		    noderec_until(h, now, spec->health.quarantine_after,
				  spec->health.quarantine_for_ms);

		if (!until)
			continue;
		skip[i] = true;
		left_out++;
		say_quarantined(c, host, spare, h, now, until);
	}
	noderec_free(r);
	return left_out;
}
