/* view/ctlclient.c — see view/ctlclient.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "launcher/view/ctlclient.h"
#include "herd/jobreg.h"
#include "herd/proto.h"
#include "herd/runlog.h"
#include "launcher/view/remote.h"

int ctlclient_find(const char *job, struct ctlclient_job *out,
		   struct herd_err *err)
{
	struct jobreg_entry e = {0};
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (jobreg_find(job, &e, err) < 0)
		return -1;
	if (remote_entry_is_remote(&e)) {
		/* herd attach|stop on the host runs there (the remote
		 * proxy); this herd has no socket of that job. */
		herd_errprintf(err,
			       "%s runs on %s: ask herd there (herd attach and "
			       "herd stop do when the job was started with "
			       "--on)",
			       e.id, e.host);
		goto out;
	}
	if (strlen(e.id) >= sizeof(out->id) ||
	    strlen(e.run_dir) >= sizeof(out->run_dir)) {
		herd_errprintf(err, "%s: name too long", e.id);
		goto out;
	}
	memcpy(out->id, e.id, strlen(e.id) + 1);
	memcpy(out->run_dir, e.run_dir, strlen(e.run_dir) + 1);
	out->pid = e.pid;
	if (e.sock && strlen(e.sock) < sizeof(out->sock))
		memcpy(out->sock, e.sock, strlen(e.sock) + 1);
	else if (jobreg_sock_path(e.id, out->sock, sizeof(out->sock), false,
				  err) < 0)
		goto out;
	rc = 0;
out:
	jobreg_entry_clear(&e);
	return rc;
}

static int not_running(const struct ctlclient_job *j, struct herd_err *err)
{
	char pid[32] = "";
	struct herd_err why;
	struct runlog *rl;

	/* An ended job (job_end in its events.jsonl) is not to be resumed:
	 * say how it ended. */
	herd_err_clear(&why);
	if ((rl = runlog_open(j->run_dir, &why))) {
		runlog_metrics_tail(rl, 4096);
		if (runlog_update(rl, &why) >= 0 && rl->ended) {
			herd_errprintf(err,
				       "%s: ended (status %d); herd status %s "
				       "shows it",
				       j->id, rl->end_status, j->id);
			runlog_free(rl);
			return -1;
		}
		runlog_free(rl);
	}

	if (j->pid > 0)
		snprintf(pid, sizeof(pid), " (pid %ld)", j->pid);
	return herd_errprintf(err,
			      "%s: controller not running%s; `herd run "
			      "--resume %s` starts it again",
			      j->id, pid, j->run_dir);
}

/* The controller is there (its socket takes connections) but has not
 * accepted ours in CTLCLIENT_CONNECT_S. */
static int not_answering(const struct ctlclient_job *j, struct herd_err *err)
{
	if (j->pid > 0)
		return herd_errprintf(
		    err,
		    "%s: the controller (pid %ld) has not answered in %d s: "
		    "stopped (kill -CONT %ld lets it go on) or hung",
		    j->id, j->pid, CTLCLIENT_CONNECT_S, j->pid);
	return herd_errprintf(err,
			      "%s: the controller has not answered in %d s: "
			      "stopped or hung",
			      j->id, CTLCLIENT_CONNECT_S);
}

int ctlclient_request(const struct ctlclient_job *j, const char *op,
		      struct herd_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval bound = {.tv_sec = CTLCLIENT_CONNECT_S};
	json_t *body = json_pack("{s:s}", "op", op);
	char *frame = NULL;
	size_t len = 0, off = 0;
	int fd = -1, rc = -1;

	if (!body ||
	    !(frame = proto_encode(PROTO_CTL_REQ, body, NULL, 0, &len, err)))
		goto out;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", j->sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		herd_errprintf(err, "socket: %s", strerror(errno));
		goto out;
	}
	/* Bounded: a controller that never accepts (stopped, hung) fills
	 * its backlog, and a plain connect would then wait for ever.  On a
	 * Unix socket SO_SNDTIMEO bounds connect() too (EAGAIN). */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof(bound)) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno == ENOENT || errno == ECONNREFUSED)
			not_running(j, err);
		else if (errno == EAGAIN || errno == EWOULDBLOCK)
			not_answering(j, err);
		else
			herd_errprintf(err, "%s: %s", j->sock, strerror(errno));
		goto out;
	}
	while (off < len) {
		ssize_t n = send(fd, frame + off, len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			not_answering(j, err);
			goto out;
		}
		if (n <= 0) {
			not_running(j, err);
			goto out;
		}
		off += (size_t)n;
	}
	bound.tv_sec = 0; /* what follows (attach) may wait */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof(bound));
	rc = fd;
	fd = -1;
out:
	if (fd >= 0)
		close(fd);
	free(frame);
	json_decref(body);
	return rc;
}

int ctlclient_next(int fd, struct proto_reader *r, struct proto_frame **f,
		   struct herd_err *err)
{
	char buf[16384];

	*f = NULL;
	for (;;) {
		int rc = proto_reader_next(r, f, err);
		ssize_t n;

		if (rc < 0)
			return -1;
		if (rc == 1) {
			if (proto_frame_check(*f, PROTO_TO_CLIENT, err) < 0) {
				proto_frame_free(*f);
				*f = NULL;
				return -1;
			}
			return 1;
		}
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return herd_errprintf(err, "read: %s", strerror(errno));
		if (n == 0)
			return 0;
		if (proto_reader_feed(r, buf, (size_t)n, err) < 0)
			return -1;
	}
}
