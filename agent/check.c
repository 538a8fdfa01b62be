/* check.c — the agent's checks of the health gate.
 *
 * herd sends CHECK before an attempt (health.preflight) or for
 * `herd check`; the agent answers with one CHECK frame listing each
 * check's verdict: the job's directories (exist, writable, free space),
 * the GPUs (NVML: count, uncorrectable ECC errors, pages waiting to be
 * retired), the RDMA ports (state and rate, from sysfs), the interface on
 * MASTER_ADDR's network and the site's own script (health.check_command).
 * Everything but the script is quick and done at once; the script runs as
 * a child of the loop (sh -c, its own process group), its output read as
 * it comes (the last CHECK_OUT_KEEP bytes kept), killed after the timeout
 * herd gave.  The answer goes when it has ended.  Judging across nodes
 * (clock offset, RDMA rates against the other nodes) is herd's. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/check.h"
#include "herd/spec.h"
#include "agent/measure.h"

/* 4 KiB: what is kept of the script's output (its end). */
#define CHECK_OUT_KEEP 4096
/* 200: the longest reason taken from the script's output. */
#define CHECK_REASON_MAX 200

const char *check_sysfs(void)
{
	const char *s = getenv("HERD_AGENT_SYSFS");

	return s && *s ? s : "/sys";
}

json_t *check_entry(const char *name, const char *status, const char *reason,
		    const char *value)
{
	json_t *e = json_pack("{s:s, s:s}", "name", name, "status", status);

	if (e && reason)
		json_object_set_new(e, "reason", json_string(reason));
	if (e && value)
		json_object_set_new(e, "value", json_string(value));
	return e;
}

/* "12.3 GiB" */
static void human_bytes(unsigned long long b, char *buf, size_t size)
{
	static const char *const unit[] = {"B",	  "KiB", "MiB",
					   "GiB", "TiB", "PiB"};
	double v = (double)b;
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, size, "%llu B", b);
	else
		snprintf(buf, size, "%.1f %s", v, unit[u]);
}

json_t *check_dir(const char *name, const char *path, long long min_free,
		  bool missing_ok)
{
	char why[512 + PATH_MAX], tmp[PATH_MAX + 64], have[32], want[32];
	char dir[PATH_MAX], value[PATH_MAX + 64];
	struct statvfs vfs;
	struct stat st;
	unsigned long long avail;
	bool parent = false;
	int fd;

	snprintf(dir, sizeof(dir), "%s", path);
	while (stat(dir, &st) < 0) {
		char *slash;

		if (errno != ENOENT || !missing_ok || dir[0] != '/') {
			snprintf(why, sizeof(why), "%s %s: %s", name, path,
				 strerror(errno));
			return check_entry(name, "fail", why, NULL);
		}
		/* Made by the job: its closest existing parent must do. */
		slash = strrchr(dir, '/');
		if (slash == dir)
			slash[1] = '\0';
		else
			*slash = '\0';
		parent = true;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, sizeof(why), "%s %s is not a directory", name,
			 dir);
		return check_entry(name, "fail", why, NULL);
	}
	snprintf(tmp, sizeof(tmp), "%s/.herd-check-%d", dir, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0) {
		snprintf(why, sizeof(why), "%s %s not writable (%s)", name, dir,
			 strerror(errno));
		return check_entry(name, "fail", why, NULL);
	}
	close(fd);
	unlink(tmp);
	if (statvfs(dir, &vfs) < 0) {
		snprintf(why, sizeof(why), "%s %s: statvfs: %s", name, dir,
			 strerror(errno));
		return check_entry(name, "fail", why, NULL);
	}
	avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
	human_bytes(avail, have, sizeof(have));
	if (min_free > 0 && avail < (unsigned long long)min_free) {
		human_bytes((unsigned long long)min_free, want, sizeof(want));
		snprintf(why, sizeof(why),
			 "%s %s has %s free, health.min_free is %s", name, dir,
			 have, want);
		return check_entry(name, "fail", why, NULL);
	}
	snprintf(value, sizeof(value), "%s free%s%s", have,
		 parent ? " in " : "", parent ? dir : "");
	return check_entry(name, "ok", NULL, value);
}

/* The first line of root/rel (newline cut) into buf; -1 when unreadable. */
static int read_line(const char *root, const char *rel, char *buf, size_t size)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (!fgets(buf, (int)size, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static int no_dots(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

void check_rdma(const char *sysfs, json_t *checks)
{
	char root[PATH_MAX];
	struct dirent **devs = NULL;
	int n_devs, ports_seen = 0;

	snprintf(root, sizeof(root), "%s/class/infiniband", sysfs);
	n_devs = scandir(root, &devs, no_dots, alphasort);
	for (int d = 0; d < n_devs; d++) {
		char pdir[PATH_MAX + 300];
		struct dirent **ports = NULL;
		int n_ports;

		snprintf(pdir, sizeof(pdir), "%s/%s/ports", root,
			 devs[d]->d_name);
		n_ports = scandir(pdir, &ports, no_dots, alphasort);
		for (int p = 0; p < n_ports; p++) {
			char state[128], rate[128], port[600], why[900];
			char rel[600];
			json_t *e;

			ports_seen++;
			snprintf(port, sizeof(port), "%s/%s", devs[d]->d_name,
				 ports[p]->d_name);
			snprintf(rel, sizeof(rel), "%s/state",
				 ports[p]->d_name);
			if (read_line(pdir, rel, state, sizeof(state)) < 0)
				snprintf(state, sizeof(state), "unreadable");
			snprintf(rel, sizeof(rel), "%s/rate", ports[p]->d_name);
			if (read_line(pdir, rel, rate, sizeof(rate)) < 0)
				rate[0] = '\0';
			if (!strstr(state, "ACTIVE")) {
				snprintf(why, sizeof(why),
					 "RDMA port %s is %s, not ACTIVE", port,
					 state);
				e = check_entry("rdma", "fail", why, rate);
			} else {
				e = check_entry("rdma", "ok", NULL, rate);
				/* "100 Gb/sec (4X EDR)": herd compares the
				 * number across the nodes. */
				if (e && rate[0])
					json_object_set_new(
					    e, "rate",
					    json_real(strtod(rate, NULL)));
			}
			if (e)
				json_object_set_new(e, "port",
						    json_string(port));
			if (json_array_size(checks) < PROTO_CHECKS_MAX - 8)
				json_array_append_new(checks, e);
			else
				json_decref(e);
			free(ports[p]);
		}
		free(ports);
		free(devs[d]);
	}
	free(devs);
	if (ports_seen == 0)
		json_array_append_new(
		    checks,
		    check_entry("rdma", "skipped", "no RDMA devices", NULL));
}

static bool same_net(struct in_addr a, struct in_addr b, struct in_addr m)
{
	return (a.s_addr & m.s_addr) == (b.s_addr & m.s_addr);
}

json_t *check_net(const char *sysfs, const char *master_addr)
{
	struct ifaddrs *ifs = NULL;
	struct in_addr want;
	char ifname[IF_NAMESIZE + 1] = "", why[256], oper[64], rel[128];
	unsigned flags = 0;

	if (!master_addr)
		return check_entry("net", "skipped", "no MASTER_ADDR", NULL);
	if (inet_pton(AF_INET, master_addr, &want) != 1)
		return check_entry("net", "skipped",
				   "MASTER_ADDR is not an IPv4 address", NULL);
	if (getifaddrs(&ifs) < 0) {
		snprintf(why, sizeof(why), "getifaddrs: %s", strerror(errno));
		return check_entry("net", "fail", why, NULL);
	}
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || !i->ifa_netmask ||
		    i->ifa_addr->sa_family != AF_INET)
			continue;
		if (same_net(
			((struct sockaddr_in *)i->ifa_addr)->sin_addr, want,
			((struct sockaddr_in *)i->ifa_netmask)->sin_addr)) {
			snprintf(ifname, sizeof(ifname), "%s", i->ifa_name);
			flags = i->ifa_flags;
			break;
		}
	}
	freeifaddrs(ifs);
	if (!ifname[0]) {
		snprintf(why, sizeof(why),
			 "no interface on MASTER_ADDR %s's network",
			 master_addr);
		return check_entry("net", "skipped", why, NULL);
	}
	if (!(flags & IFF_UP) || !(flags & IFF_RUNNING)) {
		snprintf(why, sizeof(why), "%s (MASTER_ADDR's network) is %s",
			 ifname, !(flags & IFF_UP) ? "down" : "not running");
		return check_entry("net", "fail", why, ifname);
	}
	snprintf(rel, sizeof(rel), "class/net/%s/operstate", ifname);
	if (read_line(sysfs, rel, oper, sizeof(oper)) == 0 &&
	    (!strcmp(oper, "down") || !strcmp(oper, "lowerlayerdown"))) {
		snprintf(why, sizeof(why), "%s (MASTER_ADDR's network) is %s",
			 ifname, oper);
		return check_entry("net", "fail", why, ifname);
	}
	return check_entry("net", "ok", NULL, ifname);
}

void check_last_line(const char *out, size_t len, char *line, size_t size)
{
	size_t end = len, start, n;

	line[0] = '\0';
	for (;;) {
		/* trailing whitespace and newlines */
		while (end > 0 && strchr(" \t\r\n", out[end - 1]))
			end--;
		if (end == 0)
			return;
		start = end;
		while (start > 0 && out[start - 1] != '\n')
			start--;
		while (start < end && strchr(" \t\r", out[start]))
			start++;
		if (start < end)
			break;
		end = start;
	}
	n = end - start;
	if (n > size - 1)
		n = size - 1;
	memcpy(line, out + start, n);
	line[n] = '\0';
	/* A NUL or invalid UTF-8 would not encode: control bytes become
	 * '?' and so do bytes above 0x7f (the reason is for a table). */
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)line[i] < 0x20 ||
		    (unsigned char)line[i] > 0x7e)
			line[i] = '?';
}

json_t *check_script_entry(int status, bool timed_out, long long timeout_ms,
			   const char *out, size_t len)
{
	char last[CHECK_REASON_MAX + 1], why[CHECK_REASON_MAX + 128];

	check_last_line(out, len, last, sizeof(last));
	if (timed_out) {
		char took[SPEC_DURATION_TEXT];

		snprintf(
		    why, sizeof(why), "check_command timed out after %s%s%s",
		    spec_duration_text((long)timeout_ms, took, sizeof(took)),
		    last[0] ? ": " : "", last);
		return check_entry("script", "fail", why, NULL);
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return check_entry("script", "ok", NULL, last[0] ? last : NULL);
	if (last[0])
		snprintf(why, sizeof(why), "%s", last);
	else if (WIFEXITED(status))
		snprintf(why, sizeof(why), "check_command exited %d",
			 WEXITSTATUS(status));
	else
		snprintf(why, sizeof(why), "check_command killed by signal %d",
			 WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	return check_entry("script", "fail", why, NULL);
}

/* ---- the CHECK frame on the agent's loop -----------------------------------
 */

struct check_state {
	json_t *checks;	    /* the answer being built; NULL: none */
	int64_t t_ms;	    /* wall clock when CHECK arrived */
	int64_t rx_mono_ms; /* monotonic, the same moment */
	pid_t pid;	    /* the script, 0 when none runs */
	int out_fd;	    /* its stdout and stderr, -1 once at EOF */
	long timer;
	bool timed_out;
	long long timeout_ms;
	int status;
	bool exited;
	char out[2 * CHECK_OUT_KEEP];
	size_t out_len;
};

static void check_send(struct agent *a)
{
	struct check_state *s = a->check;
	int64_t held = loop_now_ms() - s->rx_mono_ms;

	/* t_ms: the agent's clock when CHECK came; held_ms: how long the
	 * agent kept it (herd's offset takes it out of the round trip). */
	agent_send(a, PROTO_CHECK,
		   json_pack("{s:I, s:I, s:o}", "t_ms", (json_int_t)s->t_ms,
			     "held_ms", (json_int_t)(held > 0 ? held : 0),
			     "checks", s->checks),
		   NULL, 0);
	s->checks = NULL;
}

static void check_out_close(struct agent *a)
{
	struct check_state *s = a->check;

	if (s->out_fd >= 0) {
		loop_fd_del(a->loop, s->out_fd);
		close(s->out_fd);
		s->out_fd = -1;
	}
}

/* Reads what the script wrote, keeping its last CHECK_OUT_KEEP bytes. */
static void check_out_read(struct agent *a)
{
	struct check_state *s = a->check;

	for (;;) {
		ssize_t n;

		if (s->out_len > CHECK_OUT_KEEP) {
			memmove(s->out, s->out + s->out_len - CHECK_OUT_KEEP,
				CHECK_OUT_KEEP);
			s->out_len = CHECK_OUT_KEEP;
		}
		n = read(s->out_fd, s->out + s->out_len,
			 sizeof(s->out) - s->out_len);
		if (n > 0) {
			s->out_len += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		check_out_close(a); /* EOF or an error */
		return;
	}
}

static void check_script_done(struct agent *a)
{
	struct check_state *s = a->check;

	if (s->out_fd >= 0)
		check_out_read(a); /* what is left in the pipe */
	check_out_close(a);
	if (s->timer) {
		loop_timer_del(a->loop, s->timer);
		s->timer = 0;
	}
	json_array_append_new(
	    s->checks, check_script_entry(s->status, s->timed_out,
					  s->timeout_ms, s->out, s->out_len));
	s->pid = 0;
	check_send(a);
}

static void on_script_out(struct loop *loop, int fd, short revents, void *arg)
{
	struct agent *a = arg;

	(void)loop;
	(void)fd;
	(void)revents;
	check_out_read(a);
}

static void on_script_exit(struct loop *loop, const struct proc_exit *e,
			   void *arg)
{
	struct agent *a = arg;
	struct check_state *s = a->check;

	(void)loop;
	if (!s || s->pid != e->pid)
		return;
	s->status = e->status;
	if (e->step != PROC_STEP_NONE) {
		int n = snprintf(s->out, sizeof(s->out),
				 "\ncannot run sh: %s\n", strerror(e->err));

		s->out_len = n > 0 ? (size_t)n : 0;
		s->status = 127 << 8;
	}
	check_script_done(a);
}

static void on_script_timeout(struct loop *loop, void *arg)
{
	struct agent *a = arg;
	struct check_state *s = a->check;

	(void)loop;
	s->timer = 0;
	if (s->pid > 0) {
		s->timed_out = true;
		kill(-s->pid, SIGKILL); /* its own group: every child */
	}
}

static void check_script_start(struct agent *a, const char *cmd,
			       const char *workdir)
{
	struct check_state *s = a->check;
	char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
	struct proc_opts opts = {0};
	struct herd_err err;
	int p[2];
	pid_t pid;

	herd_err_clear(&err);
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
		snprintf(err.text, sizeof(err.text), "pipe: %s",
			 strerror(errno));
		goto fail;
	}
	opts.io[1].kind = PROC_FD_DUP;
	opts.io[1].fd = p[1];
	opts.io[2].kind = PROC_FD_DUP;
	opts.io[2].fd = p[1];
	opts.group = PROC_GROUP_NEW;
	opts.workdir = workdir;
	pid = proc_spawn(a->loop, argv, &opts, on_script_exit, a, &err);
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		goto fail;
	}
	s->pid = pid;
	s->out_fd = p[0];
	if (loop_fd_add(a->loop, s->out_fd, POLLIN, on_script_out, a) < 0) {
		close(s->out_fd);
		s->out_fd = -1;
	}
	s->timer = loop_timer_add(a->loop, s->timeout_ms, on_script_timeout, a);
	return;
fail:
	json_array_append_new(s->checks,
			      check_entry("script", "fail", err.text, NULL));
	check_send(a);
}

void check_on_frame(struct agent *a, struct proto_frame *f)
{
	json_t *b = f->body;
	const char *workdir = json_string_value(json_object_get(b, "workdir"));
	const char *ckpt =
	    json_string_value(json_object_get(b, "checkpoint_dir"));
	const char *cmd =
	    json_string_value(json_object_get(b, "check_command"));
	long long min_free = json_integer_value(json_object_get(b, "min_free"));
	int gpus = (int)json_integer_value(json_object_get(b, "gpus"));
	struct check_state *s = a->check;
	char cwd[PATH_MAX];

	if (!s && !(s = a->check = calloc(1, sizeof(*s))))
		return; /* herd's gate times out and says so */
	if (s->pid > 0 || s->checks)
		return; /* one at a time: the running one answers */
	s->out_fd = -1;
	s->t_ms = loop_wall_ms();
	s->rx_mono_ms = loop_now_ms();
	s->timed_out = false;
	s->out_len = 0;
	s->timeout_ms =
	    json_integer_value(json_object_get(b, "check_timeout_ms"));
	s->checks = json_array();
	/* Ranks run in launch.workdir, else where the agent was started. */
	if (!workdir && getcwd(cwd, sizeof(cwd)))
		workdir = cwd;
	if (workdir)
		json_array_append_new(
		    s->checks, check_dir("workdir", workdir, min_free, false));
	json_array_append_new(
	    s->checks, ckpt ? check_dir("checkpoint", ckpt, min_free, true)
			    : check_entry("checkpoint", "skipped",
					  "no checkpoint.dir", NULL));
	json_array_append_new(s->checks, metrics_gpu_check(a, gpus));
	check_rdma(check_sysfs(), s->checks);
	json_array_append_new(
	    s->checks,
	    check_net(check_sysfs(),
		      json_string_value(json_object_get(b, "master_addr"))));
	if (!cmd) {
		json_array_append_new(
		    s->checks, check_entry("script", "skipped",
					   "no health.check_command", NULL));
		check_send(a);
		return;
	}
	check_script_start(a, cmd, workdir);
}

void check_fini(struct agent *a)
{
	struct check_state *s = a->check;

	if (!s)
		return;
	if (s->pid > 0) {
		kill(-s->pid, SIGKILL);
		proc_forget(a->loop, s->pid);
	}
	check_out_close(a);
	if (s->timer)
		loop_timer_del(a->loop, s->timer);
	json_decref(s->checks);
	free(s);
	a->check = NULL;
}
