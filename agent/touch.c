/* touch.c — counts every touch of the ranks' progress files (the
 * straggler detector's last source of step times): one inotify fd on
 * the agent's loop watches the directory of each rank's
 * HERD_PROGRESS_FILE (the file may not exist before the rank's first
 * touch, and a rename onto it is a touch too), and each event naming a
 * rank's file counts (touch_event).  The counts go in METRICS' ranks
 * entries (measure.c).  Mtimes sampled now and then would see one touch
 * where there were many; this sees them all, with two limits of the
 * kernel's: identical events not read yet are merged (two utimes of the
 * file within one turn of the agent's loop count once; touch(1) and
 * writes alternate open, attrib and close, which are not merged), and the
 * event queue (fs.inotify.max_queued_events, 16,384 by default) must not
 * overflow between two reads.  A rank touching once a step, steps apart,
 * is counted exactly. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "agent/agent.h"

#define TOUCH_MASK                                                             \
	(IN_ATTRIB | IN_OPEN | IN_CLOSE_WRITE | IN_MOVED_TO | IN_ONLYDIR)

void touch_event(struct rank *r, uint32_t mask)
{
	if (mask & IN_OPEN)
		r->touch_attr = false;
	if (mask & IN_ATTRIB) {
		r->touches++;
		r->touch_attr = true;
	}
	if (mask & IN_MOVED_TO)
		r->touches++;
	if (mask & IN_CLOSE_WRITE) {
		if (!r->touch_attr)
			r->touches++;
		r->touch_attr = false;
	}
}

static const char *base_of(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static void on_events(struct loop *loop, int fd, short revents, void *arg)
{
	struct agent *a = arg;
	char buf[16384]
	    __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t len;

	(void)loop;
	(void)revents;
	while ((len = read(fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const void *)p;

			p += sizeof(*ev) + ev->len;
			if (!ev->len)
				continue;
			for (int i = 0; i < a->n_ranks; i++) {
				struct rank *r = &a->ranks[i];

				if (r->touch_wd == ev->wd &&
				    !strcmp(base_of(r->progress_file),
					    ev->name))
					touch_event(r, ev->mask);
			}
		}
	}
}

static void touch_close(struct agent *a)
{
	if (!a->touch_on)
		return;
	loop_fd_del(a->loop, a->touch_fd);
	close(a->touch_fd);
	a->touch_on = false;
}

void touch_launch(struct agent *a)
{
	/* The watches of the attempt before go with their fd. */
	touch_close(a);
	a->touch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (a->touch_fd < 0)
		return; /* touches are not counted; the job runs */
	if (loop_fd_add(a->loop, a->touch_fd, POLLIN, on_events, a) < 0) {
		close(a->touch_fd);
		return;
	}
	a->touch_on = true;
}

void touch_watch(struct agent *a, struct rank *r)
{
	char dir[sizeof(r->progress_file)];
	const char *slash = strrchr(r->progress_file, '/');

	r->touches = 0;
	r->touch_attr = false;
	r->touch_wd = -1;
	/* A relative path is the rank's workdir's: not watched. */
	if (!a->touch_on || r->progress_file[0] != '/')
		return;
	if (slash == r->progress_file)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s",
			 (int)(slash - r->progress_file), r->progress_file);
	/* The same directory twice gives the same watch. */
	r->touch_wd = inotify_add_watch(a->touch_fd, dir, TOUCH_MASK);
}

void touch_fini(struct agent *a)
{
	touch_close(a);
}
