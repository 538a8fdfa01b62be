/* ctl/pmix/api.c — the controller's side of the PMIx calls served in
 * agent/pmix/api.c:
 *   PMIX_LOG  a rank's PMIx_Log: one "pmix_log" event per entry
 *             {attempt, rank, host, key, message} in the run's event log.
 *             An entry for the stderr or stdout channel (PMIX_LOG_STDERR,
 *             PMIX_LOG_STDOUT) is also one line of the rank's tagged
 *             output there and in its log, as under mpirun: bounded (PROTO_PMIX_LOG_VALUE_MAX), every control
 *             character (a newline, an escape...) a blank.
 * The agent bounds the entries (PROTO_PMIX_LOG_*; lib/wire/proto.c checks
 * them); a frame for another attempt, or for a rank that is not the
 * sending node's, is dropped.
 *   SIGNAL    a rank's PMIx_Job_control signal (signal, kill, terminate)
 *             for ranks of other nodes: passed on, as SIGNAL with the
 *             ranks, to each up node hosting some of them.  Only the
 *             job's own ranks are named (the asker's agent checked them
 *             against the job; herd checks them against the attempt). */
#include <stdlib.h>
#include <string.h>

#include "herd/text.h"
#include "launcher/ctl/ctl_int.h"

/* A log entry of the stderr or stdout channel: the rank's line. */
static void log_to_output(struct ctl *c, int rank, const char *key,
			  const char *msg)
{
	char line[PROTO_PMIX_LOG_VALUE_MAX + 2];
	size_t n = 0;
	int fd = !strcmp(key, "pmix.log.stderr")   ? 2
		 : !strcmp(key, "pmix.log.stdout") ? 1
						   : 0;

	if (!fd || !msg)
		return;
	for (; msg[n] && n < PROTO_PMIX_LOG_VALUE_MAX; n++) {
		unsigned char ch = (unsigned char)msg[n];

		line[n] = ch < 0x20 || ch == 0x7f ? ' ' : (char)ch;
	}
	while (n && line[n - 1] == ' ')
		n--;
	/* The C1 controls and bytes that are not UTF-8 too ('?'). */
	line[n] = '\0';
	herd_text_clean(line);
	line[n++] = '\n';
	ctl_log_write(c, rank, line, n);
	ctl_print(c, rank, fd, line, n, false);
}

void ctl_pmix_log(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *body = f->body, *entries = json_object_get(body, "entries");
	int rank = (int)json_integer_value(json_object_get(body, "rank"));
	size_t i;
	json_t *e;

	if (json_integer_value(json_object_get(body, "attempt")) != c->attempt)
		return;
	if (!c->ranks || rank < 0 || rank >= c->world_size ||
	    &c->nodes[c->ranks[rank].node] != n)
		return;
	json_array_foreach(entries, i, e)
	{
		events_emit(c->ev, "pmix_log",
			    json_pack("{s:i, s:i, s:s, s:O, s:O}", "attempt",
				      c->attempt, "rank", rank, "host", n->host,
				      "key", json_object_get(e, "key"),
				      "message", json_object_get(e, "value")));
		log_to_output(c, rank,
			      json_string_value(json_object_get(e, "key")),
			      json_string_value(json_object_get(e, "value")));
	}
	ctl_check_events(c);
}

void ctl_pmix_signal(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *body = f->body, *ranks = json_object_get(body, "ranks");
	int sig = (int)json_integer_value(json_object_get(body, "signal"));
	json_t **per_node;
	size_t i;
	json_t *v;

	(void)n;
	if (json_integer_value(json_object_get(body, "attempt")) !=
		c->attempt ||
	    !c->ranks || !ctl_serves(c, CTL_SERVE_ATTEMPT))
		return;
	if (!(per_node = calloc((size_t)c->n_nodes, sizeof(*per_node))))
		return;
	json_array_foreach(ranks, i, v)
	{
		json_int_t r = json_integer_value(v);
		int k;

		if (r < 0 || r >= c->world_size)
			continue;
		k = c->ranks[r].node;
		if (k < 0 || k >= c->n_nodes || c->nodes[k].state != NODE_UP)
			continue;
		if (!per_node[k] && !(per_node[k] = json_array()))
			continue;
		json_array_append_new(per_node[k], json_integer(r));
	}
	for (int k = 0; k < c->n_nodes; k++) {
		json_t *out;

		if (!per_node[k])
			continue;
		out = json_pack("{s:i, s:o}", "signal", sig, "ranks",
				per_node[k]);
		if (out && c->nodes[k].conn)
			ctl_send(c, &c->nodes[k], PROTO_SIGNAL, out, NULL, 0);
		json_decref(out);
	}
	free(per_node);
}
