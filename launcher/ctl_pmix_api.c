/* ctl_pmix_api.c — the controller's side of the PMIx calls served in
 * agent/pmix_api.c (issue 16):
 *   PMIX_LOG  a rank's PMIx_Log: one "pmix_log" event per entry
 *             {attempt, rank, host, key, message} in the run's event log.
 *             An entry for the stderr or stdout channel (PMIX_LOG_STDERR,
 *             PMIX_LOG_STDOUT) is also one line of the rank's tagged
 *             output there and in its log, as under mpirun: bounded (PROTO_PMIX_LOG_VALUE_MAX), every control
 *             character (a newline, an escape...) a blank.
 * The agent bounds the entries (PROTO_PMIX_LOG_*; lib/proto.c checks
 * them); a frame for another attempt, or for a rank that is not the
 * sending node's, is dropped. */
#include <string.h>

#include "ctl_int.h"

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
