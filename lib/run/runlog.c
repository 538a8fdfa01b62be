/* lib/run/runlog.c — the model of a run directory; see runlog.h. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "herd/runlog.h"
#include "herd/text.h"

const char *const runlog_job_keys[RUNLOG_JOB_N_] = {
    [RUNLOG_JOB_STEP] = "step",
    [RUNLOG_JOB_LOSS] = "loss",
    [RUNLOG_JOB_TOKENS_PER_S] = "tokens_per_s",
    [RUNLOG_JOB_STEPS_PER_S] = "steps_per_s",
    [RUNLOG_JOB_GPU_UTIL_MIN] = "gpu_util_min",
    [RUNLOG_JOB_GPU_UTIL_AVG] = "gpu_util_avg",
    [RUNLOG_JOB_RX_BYTES_PER_S] = "rx_bytes_per_s",
    [RUNLOG_JOB_TX_BYTES_PER_S] = "tx_bytes_per_s",
    [RUNLOG_JOB_DROPS] = "drops",
};

const char *const runlog_node_keys[RUNLOG_NODE_N_] = {
    [RUNLOG_NODE_GPU_UTIL] = "gpu_util",
    [RUNLOG_NODE_RX_BYTES_PER_S] = "rx_bytes_per_s",
    [RUNLOG_NODE_TX_BYTES_PER_S] = "tx_bytes_per_s",
    [RUNLOG_NODE_STEPS_PER_S] = "steps_per_s",
    [RUNLOG_NODE_CPU_PCT] = "cpu_pct",
    [RUNLOG_NODE_RSS_KIB] = "rss_kib",
};

/* --- small helpers ------------------------------------------------------ */

bool runlog_number(const json_t *obj, const char *key, double *v)
{
	json_t *j = json_object_get(obj, key);

	if (!json_is_number(j))
		return false;
	*v = json_number_value(j);
	return isfinite(*v);
}

static char *dup_str(const json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return herd_text_clean(s ? strdup(s) : NULL);
}

static void set_str(char **dst, const json_t *obj, const char *key)
{
	char *s = dup_str(obj, key);

	if (!s)
		return;
	free(*dst);
	*dst = s;
}

static int get_int(const json_t *obj, const char *key, int def)
{
	json_t *j = json_object_get(obj, key);

	return json_is_integer(j) ? (int)json_integer_value(j) : def;
}

bool runlog_node_gpu_util(const json_t *node, double *v)
{
	json_t *gpus = json_object_get(node, "gpus"), *g;
	double sum = 0, x;
	size_t i, n = 0;

	json_array_foreach(gpus, i, g)
	{
		if (runlog_number(g, "util_pct", &x)) {
			sum += x;
			n++;
		}
	}
	if (!n)
		return false;
	*v = sum / (double)n;
	return true;
}

bool runlog_node_gpu_mem(const json_t *node, double *used, double *total)
{
	json_t *gpus = json_object_get(node, "gpus"), *g;
	double u = 0, t = 0, x;
	size_t i, n = 0;

	json_array_foreach(gpus, i, g)
	{
		if (runlog_number(g, "mem_used", &x)) {
			u += x;
			n++;
		}
		if (runlog_number(g, "mem_total", &x))
			t += x;
	}
	if (!n)
		return false;
	*used = u;
	*total = t;
	return true;
}

int runlog_series_add(struct runlog_series *s, double t, double v)
{
	if (!s->t) {
		s->t = malloc(RUNLOG_SERIES_MAX * sizeof(*s->t));
		s->v = malloc(RUNLOG_SERIES_MAX * sizeof(*s->v));
		if (!s->t || !s->v) {
			free(s->t);
			free(s->v);
			s->t = s->v = NULL;
			return -1;
		}
		s->stride = 1;
	}
	if (s->n && s->skipped + 1 < s->stride) {
		s->skipped++;
		return 0;
	}
	s->skipped = 0;
	if (s->n == RUNLOG_SERIES_MAX) {
		/* Full: keep every other point, take later ones at half the
		 * rate; the plot keeps the shape of the whole run. */
		for (size_t i = 0; i < s->n / 2; i++) {
			s->t[i] = s->t[2 * i];
			s->v[i] = s->v[2 * i];
		}
		s->n /= 2;
		s->stride *= 2;
	}
	s->t[s->n] = t;
	s->v[s->n] = v;
	s->n++;
	return 0;
}

static void series_free(struct runlog_series *s)
{
	free(s->t);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

struct runlog_node *runlog_node(const struct runlog *rl, const char *name)
{
	json_t *j = json_object_get(rl->node_index, name);

	return j ? &rl->nodes[json_integer_value(j)] : NULL;
}

/* The node named name, added when new; NULL when out of memory. */
static struct runlog_node *node_get(struct runlog *rl, const char *name)
{
	struct runlog_node *n = runlog_node(rl, name), *grown;

	if (n)
		return n;
	grown = realloc(rl->nodes, (rl->n_nodes + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	rl->nodes = grown;
	n = &rl->nodes[rl->n_nodes];
	memset(n, 0, sizeof(*n));
	n->name = herd_text_clean(strdup(name));
	if (!n->name || json_object_set_new(rl->node_index, name,
					    json_integer((json_int_t)rl->n_nodes)) < 0) {
		free(n->name);
		return NULL;
	}
	rl->n_nodes++;
	return n;
}

/* --- events.jsonl ------------------------------------------------------- */

static struct runlog_attempt *attempt_get(struct runlog *rl, int number)
{
	struct runlog_attempt *a;

	for (size_t i = rl->n_attempts; i-- > 0;)
		if (rl->attempts[i].attempt == number)
			return &rl->attempts[i];
	if (rl->n_attempts >= RUNLOG_ATTEMPTS_MAX) {
		rl->attempts_dropped++;
		return NULL;
	}
	a = realloc(rl->attempts, (rl->n_attempts + 1) * sizeof(*a));
	if (!a)
		return NULL;
	rl->attempts = a;
	a = &rl->attempts[rl->n_attempts++];
	memset(a, 0, sizeof(*a));
	a->attempt = number;
	return a;
}

static void add_mark(struct runlog *rl, int64_t t, const char *event,
		     const char *host, const char *detail, int attempt)
{
	struct runlog_mark *m;

	if (rl->n_marks >= RUNLOG_MARKS_MAX) {
		rl->marks_dropped++;
		return;
	}
	m = realloc(rl->marks, (rl->n_marks + 1) * sizeof(*m));
	if (!m)
		return;
	rl->marks = m;
	m = &rl->marks[rl->n_marks];
	m->t = t;
	m->event = herd_text_clean(strdup(event));
	m->host = herd_text_clean(host ? strdup(host) : NULL);
	m->detail = herd_text_clean(detail ? strdup(detail) : NULL);
	m->attempt = attempt;
	if (!m->event) {
		free(m->host);
		free(m->detail);
		return;
	}
	rl->n_marks++;
}

static void node_event(struct runlog *rl, const char *event, const json_t *o,
		       int64_t t, int attempt)
{
	const char *host = json_string_value(json_object_get(o, "host"));
	const char *reason = json_string_value(json_object_get(o, "reason"));
	struct runlog_node *n;

	if (!host || !(n = node_get(rl, host)))
		return;
	if (!strcmp(event, "node_up")) {
		n->state = "up";
		return;
	}
	if (!strcmp(event, "rank_start")) {
		if (!n->state)
			n->state = "up";
		return;
	}
	if (!strcmp(event, "node_failed")) {
		n->state = "failed";
		n->failures++;
	} else if (!strcmp(event, "node_evicted")) {
		n->state = "evicted";
		n->evictions++;
	} else if (!strcmp(event, "node_readmitted")) {
		n->state = "readmitted";
	} else if (!strcmp(event, "spare_used")) {
		n->spare_used = true;
		if (!n->state)
			n->state = "spare";
	} else if (!strcmp(event, "node_quarantined")) {
		/* Left out of the job by its node record (noderec.h). */
		n->state = "quarantined";
		reason = json_string_value(json_object_get(o, "last_reason"));
	} else if (!strcmp(event, "rank_hung")) {
		char d[64];

		snprintf(d, sizeof(d), "rank %d silent %lld ms",
			 get_int(o, "rank", -1),
			 (long long)json_integer_value(
			     json_object_get(o, "silent_ms")));
		add_mark(rl, t, event, host, d, attempt);
		return;
	} else if (!strcmp(event, "straggler")) {
		char d[96];

		snprintf(d, sizeof(d),
			 "%.1fx the median step time (%lld vs %lld ms)",
			 json_number_value(json_object_get(o, "ratio")),
			 (long long)json_integer_value(
			     json_object_get(o, "node_ms")),
			 (long long)json_integer_value(
			     json_object_get(o, "median_ms")));
		add_mark(rl, t, event, host, d, attempt);
		return;
	}
	if (reason) {
		free(n->reason);
		n->reason = herd_text_clean(strdup(reason));
	}
	add_mark(rl, t, event, host, reason, attempt);
}

int runlog_feed_event(struct runlog *rl, const char *line, size_t len)
{
	json_t *o = json_loadb(line, len, 0, NULL);
	const char *event = json_string_value(json_object_get(o, "event"));
	json_t *tj = json_object_get(o, "t");
	int64_t t;
	int attempt;
	struct runlog_attempt *a;

	rl->ev.lines++;
	if (!json_is_object(o) || !event || !json_is_integer(tj)) {
		json_decref(o);
		rl->ev.bad++;
		return -1;
	}
	t = (int64_t)json_integer_value(tj);
	attempt = get_int(o, "attempt", 0);
	failcost_event(&rl->failures, event, o, t);
	if (!strcmp(event, "job_start")) {
		set_str(&rl->job, o, "job");
		set_str(&rl->run_id, o, "run");
		set_str(&rl->mode, o, "mode");
		set_str(&rl->transport, o, "transport");
		rl->want_nodes = get_int(o, "nodes", 0);
		rl->spares = get_int(o, "spares", 0);
		rl->start_t = t;
	} else if (!strcmp(event, "attempt_start")) {
		if ((a = attempt_get(rl, attempt))) {
			a->start_t = t;
			a->nodes = get_int(o, "nodes", 0);
			a->world_size = get_int(o, "world_size", 0);
			set_str(&a->checkpoint, o, "checkpoint");
		}
	} else if (!strcmp(event, "attempt_end")) {
		if ((a = attempt_get(rl, attempt))) {
			a->end_t = t;
			a->ended = true;
			a->status = get_int(o, "status", 0);
			set_str(&a->reason, o, "reason");
		}
	} else if (!strcmp(event, "checkpoint_found")) {
		add_mark(rl, t, event, NULL,
			 json_string_value(json_object_get(o, "path")),
			 attempt);
	} else if (!strcmp(event, "job_paused") ||
		   !strcmp(event, "job_resumed")) {
		add_mark(rl, t, event, NULL, NULL, attempt);
	} else if (!strcmp(event, "job_end")) {
		char d[32];

		rl->ended = true;
		rl->end_t = t;
		rl->end_status = get_int(o, "status", 0);
		rl->end_attempts = get_int(o, "attempts", 0);
		snprintf(d, sizeof(d), "status %d", rl->end_status);
		add_mark(rl, t, event, NULL, d, rl->end_attempts);
	} else if (!strcmp(event, "node_up") || !strcmp(event, "rank_start") ||
		   !strcmp(event, "node_failed") ||
		   !strcmp(event, "node_evicted") ||
		   !strcmp(event, "node_readmitted") ||
		   !strcmp(event, "spare_used") || !strcmp(event, "rank_hung") ||
		   !strcmp(event, "node_quarantined") ||
		   !strcmp(event, "straggler")) {
		node_event(rl, event, o, t, attempt);
	}
	/* Other events (rank_exit, checkpoint_skipped, ...) are not shown. */
	json_decref(o);
	return 0;
}

/* --- metrics.jsonl ------------------------------------------------------ */

static void metrics_node(struct runlog *rl, json_t *obj, int64_t t)
{
	const char *name = json_string_value(json_object_get(obj, "node"));
	struct runlog_node *n;
	double v;

	if (!name || !(n = node_get(rl, name)))
		return;
	json_decref(n->last);
	n->last = json_incref(obj);
	n->last_t = t;
	if (!n->state) {
		/* Events never named it: take the metrics' word, as one of
		 * ours (the string must outlive the line). */
		static const char *const known[] = {"up", "failed", "evicted",
						    "spare"};
		const char *st = json_string_value(json_object_get(obj, "state"));

		n->state = "up";
		for (size_t k = 0; st && k < sizeof(known) / sizeof(*known); k++)
			if (!strcmp(st, known[k]))
				n->state = known[k];
	}
	/* A failed (evicted) node's line holds its last values (older
	 * herds wrote them on every line): its plots end where it failed. */
	{
		const char *st =
		    json_string_value(json_object_get(obj, "state"));

		if (st && !strcmp(st, "failed"))
			return;
	}
	if (runlog_node_gpu_util(obj, &v))
		runlog_series_add(&n->s[RUNLOG_NODE_GPU_UTIL], (double)t, v);
	for (int k = RUNLOG_NODE_RX_BYTES_PER_S; k < RUNLOG_NODE_N_; k++)
		if (runlog_number(obj, runlog_node_keys[k], &v))
			runlog_series_add(&n->s[k], (double)t, v);
}

int runlog_feed_metrics(struct runlog *rl, const char *line, size_t len)
{
	json_t *o = json_loadb(line, len, 0, NULL);
	json_t *tj = json_object_get(o, "t");
	json_t *job = json_object_get(o, "job");
	json_t *nodes = json_object_get(o, "nodes");
	json_t *node;
	int64_t t;
	size_t i;
	double v;

	rl->met.lines++;
	if (!json_is_object(o) || !json_is_integer(tj) ||
	    (job && !json_is_object(job)) || (nodes && !json_is_array(nodes))) {
		json_decref(o);
		rl->met.bad++;
		return -1;
	}
	t = (int64_t)json_integer_value(tj);
	if (!rl->first_metrics_t)
		rl->first_metrics_t = t;
	rl->last_metrics_t = t;
	for (int k = 0; k < RUNLOG_JOB_N_; k++)
		if (runlog_number(job, runlog_job_keys[k], &v))
			runlog_series_add(&rl->job_s[k], (double)t, v);
	{
		double step, loss;

		if (runlog_number(job, "loss", &loss) &&
		    (runlog_number(job, "loss_step", &step) ||
		     runlog_number(job, "step", &step)))
			runlog_series_add(&rl->loss_by_step, step, loss);
	}
	json_array_foreach(nodes, i, node)
	{
		if (json_is_object(node))
			metrics_node(rl, node, t);
	}
	json_decref(rl->last);
	rl->last = o;
	if (nodes) {
		json_decref(rl->last_full);
		rl->last_full = json_incref(o);
	}
	return 0;
}

bool runlog_job_value(const struct runlog *rl, const char *key, double *v)
{
	return runlog_number(json_object_get(rl->last, "job"), key, v);
}

/* --- files -------------------------------------------------------------- */

typedef int (*feed_fn)(struct runlog *rl, const char *line, size_t len);

/* Hands every whole line in f->buf to feed and keeps the partial rest. */
static void split_lines(struct runlog *rl, struct runlog_file *f, feed_fn feed)
{
	size_t start = 0;
	char *nl;

	while ((nl = memchr(f->buf + start, '\n', f->len - start))) {
		size_t end = (size_t)(nl - f->buf);

		if (f->discarding) {
			f->discarding = false;
		} else if (end > start) {
			feed(rl, f->buf + start, end - start);
		}
		start = end + 1;
	}
	memmove(f->buf, f->buf + start, f->len - start);
	f->len -= start;
	if (f->len >= RUNLOG_LINE_MAX) {
		/* Too long to be ours: skip up to its newline. */
		if (!f->discarding) {
			f->lines++;
			f->bad++;
		}
		f->discarding = true;
		f->len = 0;
	}
}

static int file_update(struct runlog *rl, struct runlog_file *f, feed_fn feed,
		       struct herd_err *err)
{
	int got = 0;

	if (f->fd < 0) {
		char *path;

		if (asprintf(&path, "%s/%s", rl->dir, f->name) < 0)
			return herd_errprintf(err, "out of memory");
		f->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (f->fd < 0) {
			int e = errno;

			free(path);
			if (e == ENOENT) {
				f->missing = true;
				return 0;
			}
			return herd_errprintf(err, "%s/%s: %s", rl->dir,
					      f->name, strerror(e));
		}
		free(path);
		f->missing = false;
		if (f->tail) {
			struct stat st;

			/* Start inside the file: the partial line there is
			 * skipped, not counted. */
			if (fstat(f->fd, &st) == 0 && S_ISREG(st.st_mode) &&
			    (uint64_t)st.st_size > f->tail &&
			    lseek(f->fd, st.st_size - (off_t)f->tail, SEEK_SET) >= 0)
				f->discarding = true;
		}
	}
	for (;;) {
		ssize_t r;

		if (f->cap - f->len < 65536) {
			size_t cap = f->cap ? f->cap * 2 : 131072;
			char *b;

			if (cap > RUNLOG_LINE_MAX + 131072)
				cap = RUNLOG_LINE_MAX + 131072;
			if (cap <= f->cap)
				return herd_errprintf(err, "out of memory");
			b = realloc(f->buf, cap);
			if (!b)
				return herd_errprintf(err, "out of memory");
			f->buf = b;
			f->cap = cap;
		}
		r = read(f->fd, f->buf + f->len, f->cap - f->len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return herd_errprintf(err, "%s/%s: %s", rl->dir,
					      f->name, strerror(errno));
		if (r == 0)
			break;
		got = 1;
		f->len += (size_t)r;
		split_lines(rl, f, feed);
	}
	return got;
}

void runlog_metrics_tail(struct runlog *rl, uint64_t bytes)
{
	rl->met.tail = bytes;
}

int runlog_update(struct runlog *rl, struct herd_err *err)
{
	int a, b;

	a = file_update(rl, &rl->ev, runlog_feed_event, err);
	if (a < 0)
		return -1;
	b = file_update(rl, &rl->met, runlog_feed_metrics, err);
	if (b < 0)
		return -1;
	if (a || b)
		failcost_steps(&rl->failures, rl->job_s[RUNLOG_JOB_STEP].t,
			       rl->job_s[RUNLOG_JOB_STEP].v,
			       rl->job_s[RUNLOG_JOB_STEP].n);
	return a || b;
}

struct runlog *runlog_open(const char *dir, struct herd_err *err)
{
	struct runlog *rl = NULL;
	struct stat st;
	char *p = NULL;
	int has = 0;

	if (stat(dir, &st) < 0) {
		herd_errprintf(err, "%s: %s", dir, strerror(errno));
		goto out;
	}
	if (!S_ISDIR(st.st_mode)) {
		herd_errprintf(err, "%s: not a directory", dir);
		goto out;
	}
	for (int i = 0; i < 2; i++) {
		if (asprintf(&p, "%s/%s", dir,
			     i ? "metrics.jsonl" : "events.jsonl") < 0) {
			p = NULL;
			herd_errprintf(err, "out of memory");
			goto out;
		}
		if (access(p, F_OK) == 0)
			has = 1;
		free(p);
		p = NULL;
	}
	if (!has) {
		herd_errprintf(err,
			       "%s: not a run directory (no events.jsonl or "
			       "metrics.jsonl)",
			       dir);
		goto out;
	}
	rl = calloc(1, sizeof(*rl));
	if (!rl || !(rl->dir = strdup(dir)) ||
	    !(rl->node_index = json_object())) {
		herd_errprintf(err, "out of memory");
		runlog_free(rl);
		rl = NULL;
		goto out;
	}
	rl->ev.name = "events.jsonl";
	rl->met.name = "metrics.jsonl";
	rl->ev.fd = rl->met.fd = -1;
out:
	return rl;
}

void runlog_free(struct runlog *rl)
{
	if (!rl)
		return;
	failcost_free(&rl->failures);
	for (int i = 0; i < 2; i++) {
		struct runlog_file *f = i ? &rl->met : &rl->ev;

		if (f->fd >= 0)
			close(f->fd);
		free(f->buf);
	}
	free(rl->dir);
	free(rl->job);
	free(rl->run_id);
	free(rl->mode);
	free(rl->transport);
	for (size_t i = 0; i < rl->n_attempts; i++) {
		free(rl->attempts[i].checkpoint);
		free(rl->attempts[i].reason);
	}
	free(rl->attempts);
	for (size_t i = 0; i < rl->n_nodes; i++) {
		struct runlog_node *n = &rl->nodes[i];

		free(n->name);
		free(n->reason);
		json_decref(n->last);
		for (int k = 0; k < RUNLOG_NODE_N_; k++)
			series_free(&n->s[k]);
	}
	free(rl->nodes);
	json_decref(rl->node_index);
	for (size_t i = 0; i < rl->n_marks; i++) {
		free(rl->marks[i].event);
		free(rl->marks[i].host);
		free(rl->marks[i].detail);
	}
	free(rl->marks);
	json_decref(rl->last);
	json_decref(rl->last_full);
	for (int k = 0; k < RUNLOG_JOB_N_; k++)
		series_free(&rl->job_s[k]);
	series_free(&rl->loss_by_step);
	free(rl);
}
