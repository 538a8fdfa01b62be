/* events.c — append-only JSON lines; see events.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "herd/events.h"
#include "herd/loop.h"

struct events {
	int fd;
};

int events_mkdirs(const char *path, unsigned int mode)
{
	char *p = strdup(path);
	int rc = 0;

	if (!p)
		return -1;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			rc = -1;
		*s = '/';
	}
	if (rc == 0 && mkdir(p, mode) < 0 && errno != EEXIST)
		rc = -1;
	free(p);
	return rc;
}

struct events *events_open(const char *path, struct herd_err *err)
{
	struct events *ev = calloc(1, sizeof(*ev));
	char *dir = strdup(path), *slash;

	if (!ev || !dir) {
		free(ev);
		free(dir);
		herd_errprintf(err, "out of memory");
		return NULL;
	}
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if (events_mkdirs(dir, 0755) < 0) {
			herd_errprintf(err, "cannot create %s: %s", dir,
				       strerror(errno));
			free(dir);
			free(ev);
			return NULL;
		}
	}
	free(dir);
	ev->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (ev->fd < 0) {
		herd_errprintf(err, "cannot open %s: %s", path, strerror(errno));
		free(ev);
		return NULL;
	}
	return ev;
}

void events_close(struct events *ev)
{
	if (!ev)
		return;
	close(ev->fd);
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
	line = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(obj);
	if (!line)
		return -1;
	len = strlen(line);
	line[len] = '\n';	/* json_dumps leaves room: replace the NUL */
	if (write(ev->fd, line, len + 1) == (ssize_t)(len + 1))
		rc = 0;
	free(line);
	return rc;
}
