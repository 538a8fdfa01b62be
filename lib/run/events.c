/* events.c — append-only JSON lines; see events.h. */
#include <stdlib.h>
#include <string.h>

#include "herd/events.h"
#include "herd/loop.h"

struct events {
	struct logfile *file;
	events_tap_fn tap;	/* events_set_tap(), or NULL */
	void *tap_arg;
};

void events_set_tap(struct events *ev, events_tap_fn fn, void *arg)
{
	if (!ev)
		return;
	ev->tap = fn;
	ev->tap_arg = arg;
}

struct events *events_open(struct logtree *lt, struct herd_err *err)
{
	struct events *ev = calloc(1, sizeof(*ev));
	char *path = NULL;
	int fd;

	if (!ev || asprintf(&path, "%s/events.jsonl",
			    logtree_run_dir(lt)) < 0) {
		free(ev);
		herd_errprintf(err, "out of memory");
		return NULL;
	}
	fd = logtree_create(lt, "events.jsonl", err);
	if (fd < 0 || !(ev->file = logfile_new(fd, path, 1))) {
		if (fd >= 0)
			herd_errprintf(err, "out of memory");
		free(path);
		free(ev);
		return NULL;
	}
	free(path);
	return ev;
}

void events_close(struct events *ev)
{
	if (!ev)
		return;
	logfile_free(ev->file);
	free(ev);
}

int events_emit(struct events *ev, const char *name, json_t *fields)
{
	json_t *obj;
	char *line;
	size_t len;
	int rc = -1;

	if (!ev) {
		json_decref(fields);
		return 0;
	}
	obj = json_pack("{s:I, s:s}", "t", (json_int_t)loop_wall_ms(),
			"event", name);
	if (!obj) {
		json_decref(fields);
		return -1;
	}
	if (fields)
		json_object_update(obj, fields);
	json_decref(fields);
	if (ev->tap)
		ev->tap(ev->tap_arg, name, obj,
			(int64_t)json_integer_value(json_object_get(obj, "t")));
	line = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(obj);
	if (!line)
		return -1;
	len = strlen(line);
	line[len] = '\n';	/* json_dumps leaves room: replace the NUL */
	if (logfile_write(ev->file, line, len + 1) == LOGFILE_OK)
		rc = 0;
	free(line);
	return rc;
}

int events_error(const struct events *ev)
{
	return ev ? logfile_error(ev->file) : 0;
}

uint64_t events_lost(const struct events *ev)
{
	return ev ? logfile_lost(ev->file) : 0;
}

const char *events_path(const struct events *ev)
{
	return ev ? logfile_path(ev->file) : "";
}
