/* measure.c — what the agent measures and sends to herd (METRICS).
 *
 * After the first LAUNCH a timer on the agent's loop samples the node
 * every metrics_interval_ms (LAUNCH says; the spec's metrics.interval)
 * and sends one METRICS frame: load, per-rank CPU and RSS, the network
 * interfaces' counters (/proc/net/dev), the RDMA ports' counters
 * (/sys/class/infiniband), the GPUs through NVML, and the training values
 * of each rank.  Counters are cumulative; herd computes the rates.
 *
 * NVML is dlopen()ed once at agent start (nvml.c): a node without it
 * says why in every METRICS (gpu_error).
 *
 * Training values come two ways: each rank may append JSON lines to the
 * node-local file $HERD_METRICS (tailed at every sample), and the
 * metrics.patterns of the spec (compiled once per LAUNCH) are matched
 * against every line of rank output (metrics_output(), only when there
 * are patterns).  The values restart with each LAUNCH: an attempt's
 * ranks are new processes, and the frame names its attempt.
 *
 * Cost: a sample opens a handful of /proc files, a few per RDMA port and
 * two per rank, and a few NVML calls per GPU: bench/metrics measures it
 * (the bound: 1 % of one core at 1 s).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/check.h"
#include "agent/measure.h"

/* ---- training values ------------------------------------------------------ */

bool train_set(struct train *t, const char *name, double value)
{
	bool sum = !strcmp(name, "tokens") || !strcmp(name, "samples");
	int i;

	if (!isfinite(value) || !proto_metric_name_ok(name))
		return false;
	for (i = 0; i < t->n_vals; i++)
		if (!strcmp(t->vals[i].name, name))
			break;
	if (i == t->n_vals) {
		if (t->n_vals == PROTO_TRAIN_VALUES_MAX)
			return false;
		snprintf(t->vals[i].name, sizeof(t->vals[i].name), "%s", name);
		t->vals[i].v = 0;
		t->n_vals++;
	}
	if (sum && isfinite(t->vals[i].v + value))
		t->vals[i].v += value;
	else if (!sum)
		t->vals[i].v = value;
	return true;
}

/* One complete line of a $HERD_METRICS file (no newline). */
static void train_line(struct train *t, const char *line, size_t len)
{
	json_t *obj, *v;
	const char *key;

	while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
		len--;
	if (len == 0)
		return;
	obj = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(obj)) {
		t->bad++;
		json_decref(obj);
		return;
	}
	t->records++;
	json_object_foreach(obj, key, v)
	{
		if (json_is_number(v))
			train_set(t, key, json_number_value(v));
	}
	json_decref(obj);
}

void train_feed(struct train *t, const char *buf, size_t len)
{
	while (len > 0) {
		const char *nl = memchr(buf, '\n', len);
		size_t n = nl ? (size_t)(nl - buf) : len;

		if (t->skipping) {
			/* the rest of an over-long line */
		} else if (t->len + n >= sizeof(t->line)) {
			t->skipping = true;
			t->bad++;
		} else if (t->len == 0 && nl) {
			train_line(t, buf, n); /* whole line: no copy */
		} else {
			memcpy(t->line + t->len, buf, n);
			t->len += n;
			if (nl)
				train_line(t, t->line, t->len);
		}
		if (!nl)
			return;
		t->len = 0;
		t->skipping = false;
		buf += n + 1;
		len -= n + 1;
	}
}

json_t *train_values(const struct train *t)
{
	json_t *obj = json_object();

	for (int i = 0; i < t->n_vals; i++) {
		double v = t->vals[i].v;

		/* Whole numbers as integers (step, tokens), so they read
		 * back exactly. */
		bool whole = v > -9007199254740992.0 &&
			     v < 9007199254740992.0 &&
			     (double)(json_int_t)v == v;

		json_object_set_new(obj, t->vals[i].name,
				    whole ? json_integer((json_int_t)v)
					  : json_real(v));
	}
	return obj;
}

/* Reads what the rank appended to its file since the last sample. */
static void train_tail(struct train *t, const char *path)
{
	static char buf[64 * 1024];
	struct stat st;
	size_t total = 0;

	if (!path[0])
		return;
	if (t->fd < 0) {
		t->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (t->fd < 0)
			return; /* not written yet */
		/* A FIFO or a device would block or never end. */
		if (fstat(t->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			close(t->fd);
			t->fd = -1;
			return;
		}
	}
	if (fstat(t->fd, &st) == 0 && st.st_size < t->off) {
		/* truncated: start again from its beginning */
		t->off = 0;
		t->len = 0;
		t->skipping = false;
	}
	while (total < METRICS_READ_MAX) {
		ssize_t n = pread(t->fd, buf, sizeof(buf), t->off);

		if (n <= 0)
			break;
		t->off += n;
		total += (size_t)n;
		train_feed(t, buf, (size_t)n);
	}
}

/* ---- node counters -------------------------------------------------------- */

int metrics_read_net(const char *path, json_t *arr)
{
	static const char *const keys[8] = {
	    "rx_bytes", "rx_packets", "rx_errors", "rx_drops",
	    "tx_bytes", "tx_packets", "tx_errors", "tx_drops"};
	/* Their columns in /proc/net/dev (rx: bytes packets errs drop fifo
	 * frame compressed multicast, then tx: bytes packets errs drop). */
	static const int cols[8] = {0, 1, 2, 3, 8, 9, 10, 11};
	char line[512];
	FILE *f = fopen(path, "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':'), *name = line;
		unsigned long long v[16] = {0};
		json_t *dev;

		if (!colon)
			continue; /* the two header lines */
		*colon = '\0';
		while (*name == ' ')
			name++;
		if (!*name || !strcmp(name, "lo"))
			continue;
		if (sscanf(colon + 1,
			   "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu "
			   "%llu %llu",
			   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
			   &v[7], &v[8], &v[9], &v[10], &v[11]) < 12)
			continue;
		if (json_array_size(arr) >= PROTO_METRICS_DEVS_MAX)
			break;
		dev = json_pack("{s:s}", "dev", name);
		for (int k = 0; k < 8; k++)
			json_object_set_new(
				dev, keys[k],
				json_integer((json_int_t)(v[cols[k]] &
							  (~0ULL >> 1))));
		json_array_append_new(arr, dev);
	}
	fclose(f);
	return 0;
}

/* One counter file: a decimal number.  0 when missing or unreadable (a
 * driver that lacks one of them). */
static json_int_t read_counter(int dirfd, const char *name)
{
	char buf[64];
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	unsigned long long v;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if (sscanf(buf, "%llu", &v) != 1)
		return 0;
	return (json_int_t)(v & (~0ULL >> 1));
}

static int name_cmp(const struct dirent **x, const struct dirent **y)
{
	return strcmp((*x)->d_name, (*y)->d_name);
}

static int no_dots(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

int metrics_read_rdma(const char *root, json_t *arr)
{
	struct dirent **devs = NULL;
	int n_devs = scandir(root, &devs, no_dots, name_cmp);

	if (n_devs < 0)
		return 0; /* no RDMA devices */
	for (int d = 0; d < n_devs; d++) {
		char path[4096];
		struct dirent **ports = NULL;
		int n_ports;

		snprintf(path, sizeof(path), "%s/%s/ports", root,
			 devs[d]->d_name);
		n_ports = scandir(path, &ports, no_dots, name_cmp);
		for (int p = 0; p < n_ports; p++) {
			char cpath[4096 + 512], *end;
			long port = strtol(ports[p]->d_name, &end, 10);
			int dirfd;

			if (*end || port < 1 || port > 0x7fffffff ||
			    json_array_size(arr) >= PROTO_METRICS_DEVS_MAX)
				continue;
			snprintf(cpath, sizeof(cpath), "%s/%s/counters", path,
				 ports[p]->d_name);
			dirfd = open(cpath,
				     O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (dirfd < 0)
				continue;
			json_array_append_new(
				arr,
				json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I}",
					  "dev", devs[d]->d_name, "port",
					  (json_int_t)port, "rx_bytes",
					  read_counter(dirfd, "port_rcv_data") *
						  4,
					  "tx_bytes",
					  read_counter(dirfd, "port_xmit_data") *
						  4,
					  "link_downed",
					  read_counter(dirfd, "link_downed"),
					  "symbol_error",
					  read_counter(dirfd, "symbol_error"),
					  "rcv_errors",
					  read_counter(dirfd, "port_rcv_errors")));
			close(dirfd);
		}
		for (int p = 0; p < n_ports; p++)
			free(ports[p]);
		free(ports);
	}
	for (int d = 0; d < n_devs; d++)
		free(devs[d]);
	free(devs);
	return 0;
}

/* 256: processes of one rank's tree that a sample looks at (a rank with
 * a few data-loader workers has ten); bounds a sample's cost. */
#define RANK_TREE_MAX 256

/* Adds pid's CPU ticks (its own and those of its reaped children, so the
 * sum does not drop when a child ends) and resident pages to *ticks and
 * *pages, then does the same for its children (the main thread's
 * /proc/PID/task/PID/children), at most *budget processes.  -1 when pid
 * is gone. */
static int tree_usage(long pid, int *budget, unsigned long long *ticks,
		      long long *pages)
{
	char path[128], buf[1024];
	FILE *f;
	int ok = -1;

	if (*budget <= 0)
		return 0;
	(*budget)--;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f)) {
		/* Fields after the command name, which may hold spaces. */
		char *p = strrchr(buf, ')');
		unsigned long long ut = 0, st = 0;
		long long cut = 0, cst = 0, rss = 0;

		if (p && sscanf(p + 2,
				"%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
				"%llu %llu %lld %lld %*d %*d %*d %*d %*u %*u "
				"%lld",
				&ut, &st, &cut, &cst, &rss) == 5) {
			*ticks += ut + st + (unsigned long long)(cut > 0 ? cut : 0) +
				  (unsigned long long)(cst > 0 ? cst : 0);
			*pages += rss > 0 ? rss : 0;
			ok = 0;
		}
	}
	fclose(f);
	if (ok < 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/task/%ld/children", pid, pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	for (long child; *budget > 0 && fscanf(f, "%ld", &child) == 1;)
		if (child > 0)
			tree_usage(child, budget, ticks, pages);
	fclose(f);
	return 0;
}

/* CPU milliseconds and RSS KiB of the rank under keeper pid: the
 * keeper's child (sh -c COMMAND) and every process below it, so a
 * program the shell started is counted.  -1 when it cannot be read
 * (gone). */
static int rank_usage(pid_t keeper, int64_t *cpu_ms, int64_t *rss_kb)
{
	char path[128];
	FILE *f;
	long child = 0;
	unsigned long long ticks = 0;
	long long pages = 0;
	int budget = RANK_TREE_MAX;
	long hz = sysconf(_SC_CLK_TCK);
	long page = sysconf(_SC_PAGESIZE);

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)keeper,
		 (int)keeper);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &child) != 1)
		child = 0;
	fclose(f);
	if (child <= 0 || tree_usage(child, &budget, &ticks, &pages) < 0)
		return -1;
	*cpu_ms = (int64_t)(ticks * 1000 / (unsigned long long)(hz > 0 ? hz : 100));
	*rss_kb = (int64_t)(pages * (page > 0 ? page : 4096) / 1024);
	return 0;
}

static double load1(void)
{
	double l = 0;
	FILE *f = fopen("/proc/loadavg", "re");

	if (f) {
		if (fscanf(f, "%lf", &l) != 1 || !(l >= 0))
			l = 0;
		fclose(f);
	}
	return l;
}

/* ---- the sampler on the agent's loop ---------------------------------------- */

struct measure_state {
	int64_t interval_ms;	/* 0 until the first LAUNCH */
	long timer;
	int64_t last_ms;	/* when the last sample went (loop clock) */
	struct gpu *gpu;
	/* metrics.patterns of the current attempt */
	regex_t re[PROTO_PATTERNS_MAX];
	char names[PROTO_PATTERNS_MAX][65];
	int n_re;
	/* one per rank of a->ranks */
	struct train *train;
	int n_train;
	int debug_fd;	/* $HERD_AGENT_METRICS_LOG, -1 when not set */
};

static struct train *train_of(struct agent *a, const struct rank *r)
{
	struct measure_state *m = a->metrics;
	long i = r - a->ranks;

	if (!m || i < 0 || i >= m->n_train)
		return NULL;
	return &m->train[i];
}

static void trains_free(struct measure_state *m)
{
	for (int i = 0; i < m->n_train; i++)
		if (m->train[i].fd >= 0)
			close(m->train[i].fd);
	free(m->train);
	m->train = NULL;
	m->n_train = 0;
}

static void patterns_free(struct measure_state *m)
{
	for (int i = 0; i < m->n_re; i++)
		regfree(&m->re[i]);
	m->n_re = 0;
}

void metrics_init(struct agent *a)
{
	struct measure_state *m = calloc(1, sizeof(*m));
	const char *log = getenv("HERD_AGENT_METRICS_LOG");

	if (!m)
		return; /* no metrics, the job still runs */
	m->debug_fd = -1;
	/* A debugging aid: every METRICS body, one JSON line each (the
	 * user's own file; never followed through a symlink). */
	if (log && *log)
		m->debug_fd = open(log,
				   O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW |
					   O_CLOEXEC,
				   0600);
	m->gpu = gpu_open("libnvidia-ml.so.1");
	a->metrics = m;
}

json_t *metrics_body(struct agent *a)
{
	struct measure_state *m = a->metrics;
	json_t *ranks = json_array(), *net = json_array(), *rdma = json_array();
	json_t *gpus = json_array(), *train = json_array(), *body;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	for (int i = 0; i < a->n_ranks; i++) {
		struct rank *r = &a->ranks[i];
		struct train *t = m && i < m->n_train ? &m->train[i] : NULL;
		int64_t cpu = t ? t->cpu_ms : 0, rss = 0;

		/* An exited rank keeps its last CPU time (a counter must
		 * not go back), with no memory. */
		if (r->running && rank_usage(r->pid, &cpu, &rss) < 0) {
			cpu = t ? t->cpu_ms : 0;
			rss = 0;
		}
		if (t) {
			t->cpu_ms = cpu;
			train_tail(t, r->metrics_file);
		}
		json_array_append_new(
			ranks,
			r->touch_wd > 0
				? json_pack("{s:i, s:I, s:I, s:I}", "rank",
					    r->rank, "cpu_ms", (json_int_t)cpu,
					    "rss_kb", (json_int_t)rss,
					    "touches", (json_int_t)r->touches)
				: json_pack("{s:i, s:I, s:I}", "rank", r->rank,
					    "cpu_ms", (json_int_t)cpu,
					    "rss_kb", (json_int_t)rss));
		if (t && t->records > 0)
			json_array_append_new(
				train, json_pack("{s:i, s:I, s:o}", "rank",
						 r->rank, "records",
						 (json_int_t)t->records,
						 "values", train_values(t)));
	}
	metrics_read_net("/proc/net/dev", net);
	metrics_read_rdma("/sys/class/infiniband", rdma);
	if (m)
		gpu_sample(m->gpu, gpus);
	body = json_pack("{s:I, s:i, s:f, s:i, s:o, s:o, s:o, s:o, s:o}", "t",
			 (json_int_t)loop_wall_ms(), "attempt", a->attempt,
			 "load1", load1(), "cpus", (int)(cpus > 0 ? cpus : 1),
			 "ranks", ranks, "net", net, "rdma", rdma, "gpus",
			 gpus, "train", train);
	if (body && gpu_error(m ? m->gpu : NULL))
		json_object_set_new(body, "gpu_error",
				    json_string(gpu_error(m ? m->gpu : NULL)));
	return body;
}

/* Sends a sample when one is due at now.  Samples ride on the agent's
 * heartbeats (metrics_beat), which herd reads in one burst for all its
 * nodes; a sample whose own timer fired between two beats would cost
 * herd one more wakeup per node.  A sample is due an interval after the
 * last, less half a heartbeat (so a beat just before the due time takes
 * it, and the period stays the interval). */
static void sample(struct agent *a, int64_t now)
{
	struct measure_state *m = a->metrics;
	int64_t slack = a->hb_interval_ms / 2;
	json_t *body;

	if (slack > m->interval_ms / 2)
		slack = m->interval_ms / 2;
	if (m->last_ms && now - m->last_ms < m->interval_ms - slack)
		return;
	/* An exiting agent sends nothing more: its queue must drain. */
	if (a->state == AGENT_EXITING)
		return;
	m->last_ms = now;
	body = metrics_body(a);
	if (!body)
		return;
	if (m->debug_fd >= 0) {
		char *text = json_dumps(body, JSON_COMPACT);

		if (text) {
			size_t len = strlen(text);

			text[len] = '\n'; /* replaces the NUL */
			if (write(m->debug_fd, text, len + 1) < 0)
				m->debug_fd = -1;
			free(text);
		}
	}
	agent_send(a, PROTO_METRICS, body, NULL, 0);
}

/* The timer: a sample when no heartbeat took it (herd silent, or a
 * heartbeat longer than the interval). */
static void on_sample(struct loop *loop, void *arg)
{
	struct agent *a = arg;
	struct measure_state *m = a->metrics;

	m->timer = loop_timer_add(loop, m->interval_ms, on_sample, a);
	if (m->timer < 0)
		m->timer = 0;
	sample(a, loop_now_ms());
}

void metrics_beat(struct agent *a, int64_t now)
{
	if (a->metrics && a->metrics->interval_ms > 0)
		sample(a, now);
}

void metrics_launch(struct agent *a, json_t *launch)
{
	struct measure_state *m = a->metrics;
	json_t *pats = json_object_get(launch, "patterns"), *p;
	json_int_t iv = json_integer_value(
		json_object_get(launch, "metrics_interval_ms"));
	size_t i;

	if (!m)
		return;
	trains_free(m);
	patterns_free(m);
	m->train = calloc(a->n_ranks > 0 ? (size_t)a->n_ranks : 1,
			  sizeof(*m->train));
	if (m->train) {
		m->n_train = a->n_ranks;
		for (int r = 0; r < m->n_train; r++)
			m->train[r].fd = -1;
	}
	json_array_foreach(pats, i, p)
	{
		const char *name = json_string_value(json_object_get(p, "name"));
		const char *re = json_string_value(json_object_get(p, "regex"));

		if (!name || !re || m->n_re >= PROTO_PATTERNS_MAX)
			continue;
		/* spec.c compiled it on herd's machine; this libc may
		 * still refuse it: that pattern then matches nothing. */
		if (regcomp(&m->re[m->n_re], re, REG_EXTENDED) != 0) {
			fprintf(stderr,
				"herd-agent: metrics.patterns.%s does not "
				"compile here; ignored\n",
				name);
			continue;
		}
		snprintf(m->names[m->n_re], sizeof(m->names[0]), "%s", name);
		m->n_re++;
	}
	/* 100 ms .. 1 h: proto.c checked the floor. */
	if (iv < 100)
		iv = 1000;
	if (iv > 3600000)
		iv = 3600000;
	/* A file launch.env named may hold lines of an earlier attempt:
	 * only what is appended from now on counts.  (Ours were removed
	 * before the ranks started.) */
	for (int r = 0; r < m->n_train && r < a->n_ranks; r++) {
		const char *f = a->ranks[r].metrics_file;
		size_t dl = strlen(a->run_dir);
		struct stat st;

		if (f[0] && !(dl && !strncmp(f, a->run_dir, dl) &&
			      f[dl] == '/') &&
		    stat(f, &st) == 0 && S_ISREG(st.st_mode))
			m->train[r].off = st.st_size;
	}
	if (m->timer && m->interval_ms == iv)
		return;
	if (m->timer)
		loop_timer_del(a->loop, m->timer);
	m->interval_ms = iv;
	m->timer = loop_timer_add(a->loop, iv, on_sample, a);
	if (m->timer < 0)
		m->timer = 0;
}

bool metrics_has_patterns(const struct agent *a)
{
	return a->metrics && a->metrics->n_re > 0;
}

void metrics_output(struct agent *a, struct rank *r, const char *buf,
		    size_t len)
{
	struct measure_state *m = a->metrics;
	struct train *t = train_of(a, r);
	char line[METRICS_LINE_MAX];

	if (!m || m->n_re == 0 || !t)
		return;
	while (len > 0) {
		const char *nl = memchr(buf, '\n', len);
		size_t n = nl ? (size_t)(nl - buf) : len, cut;
		bool hit = false;

		cut = n < sizeof(line) ? n : sizeof(line) - 1;
		memcpy(line, buf, cut);
		line[cut] = '\0';
		for (int i = 0; i < m->n_re; i++) {
			regmatch_t g[2];
			char num[64], *end;
			size_t glen;
			double v;

			if (regexec(&m->re[i], line, 2, g, 0) != 0 ||
			    g[1].rm_so < 0)
				continue;
			glen = (size_t)(g[1].rm_eo - g[1].rm_so);
			if (glen == 0 || glen >= sizeof(num))
				continue;
			memcpy(num, line + g[1].rm_so, glen);
			num[glen] = '\0';
			v = strtod(num, &end);
			if (*end || !isfinite(v))
				continue;
			hit |= train_set(t, m->names[i], v);
		}
		if (hit)
			t->records++;
		if (!nl)
			break;
		buf += n + 1;
		len -= n + 1;
	}
}

void metrics_fini(struct agent *a)
{
	struct measure_state *m = a->metrics;

	if (!m)
		return;
	if (m->timer)
		loop_timer_del(a->loop, m->timer);
	trains_free(m);
	patterns_free(m);
	gpu_close(m->gpu);
	if (m->debug_fd >= 0)
		close(m->debug_fd);
	free(m);
	a->metrics = NULL;
}

json_t *metrics_gpu_check(struct agent *a, int expected)
{
	return gpu_check(a->metrics ? a->metrics->gpu : NULL, expected);
}
