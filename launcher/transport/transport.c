/* transport.c — picks a transport by name; see transport.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "herd/proto.h"
#include "launcher/transport/transport.h"

struct transport *transport_new(const char *kind, const struct spec *spec,
				const char *agent_path, struct herd_err *err)
{
	const struct transport_ops *ops = NULL;
	struct transport *t;

	if (!strcmp(kind, "local"))
		ops = &transport_local_ops;
	else if (!strcmp(kind, "ssh"))
		ops = &transport_ssh_ops;
	else if (!strcmp(kind, "slurm"))
		ops = &transport_slurm_ops;
	if (!ops) {
		herd_errprintf(err, "unknown transport '%s'", kind);
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t || !(t->agent_path = strdup(agent_path))) {
		free(t);
		herd_errprintf(err, "out of memory");
		return NULL;
	}
	t->ops = ops;
	t->spec = spec;
	return t;
}

const char *transport_pick(const struct spec *spec, int lone_localhost)
{
	const char *job = getenv("SLURM_JOB_ID");

	if (spec->nodes.transport == SPEC_TRANSPORT_LOCAL)
		return "local";
	/* The same rule as resolve.c's: no source inside an allocation
	 * means the allocation's nodes. */
	if (spec->nodes.source == SPEC_SOURCE_SLURM ||
	    (spec->nodes.source == SPEC_SOURCE_NONE && job && *job))
		return "slurm";
	return lone_localhost ? "local" : "ssh";
}

int transport_start(struct transport *t, const char *host,
		    struct herd_err *err)
{
	return t->ops->start(t, host, err);
}

void transport_commit(struct transport *t)
{
	if (t->ops->commit)
		t->ops->commit(t);
}

static bool threads_left;

void transport_set_threads_left(void)
{
	threads_left = true;
}

bool transport_threads_left(void)
{
	return threads_left;
}

void transport_free(struct transport *t)
{
	if (!t)
		return;
	if (t->ops->free)
		t->ops->free(t);
	free(t->agent_path);
	free(t);
}

void transport_report(int fd, const char *stage, const char *fmt, ...)
{
	char msg[HERD_ERR_MAX];
	va_list ap;
	json_t *body;
	size_t len = 0, off = 0;
	char *frame;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	body = json_pack("{s:s, s:s}", "stage", stage, "message", msg);
	frame = proto_encode(PROTO_ERROR, body, NULL, 0, &len, NULL);
	json_decref(body);
	while (frame && off < len) {
		ssize_t n = write(fd, frame + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	free(frame);
}
