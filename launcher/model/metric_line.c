/* model/metric_line.c — the metrics table as metrics.jsonl lines and as
 * the one status line of herd run; see metric_table.h. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/model/metric_table_int.h"

/* --- metrics.jsonl -------------------------------------------------------- */

static const char *state_name(enum metrics_state s)
{
	static const char *const names[] = {"connecting", "up", "failed",
					    "spare", "gone"};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

static void set_real(json_t *o, const char *key, double v)
{
	json_object_set_new(o, key, json_real(v));
}

static void set_int(json_t *o, const char *key, json_int_t v)
{
	json_object_set_new(o, key, json_integer(v));
}

static json_t *job_json(const struct metrics_job *j)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (j->has_step)
		set_int(o, "step", j->step);
	if (j->has_loss)
		set_real(o, "loss", j->loss);
	if (j->has_loss && j->has_loss_step)
		set_int(o, "loss_step", j->loss_step);
	if (j->has_tokens)
		set_int(o, "tokens_total", (json_int_t)j->tokens_total);
	if (j->has_tokens_rate)
		set_real(o, "tokens_per_s", j->tokens_per_s);
	if (j->has_steps_rate)
		set_real(o, "steps_per_s", j->steps_per_s);
	if (j->has_gpu) {
		set_int(o, "gpu_util_min", j->gpu_util_min);
		set_real(o, "gpu_util_avg", j->gpu_util_avg);
	}
	if (j->has_net) {
		set_real(o, "rx_bytes_per_s", j->rx_bytes_per_s);
		set_real(o, "tx_bytes_per_s", j->tx_bytes_per_s);
	}
	set_int(o, "drops", (json_int_t)j->drops);
	if (j->slowest)
		json_object_set_new(o, "slowest", json_string(j->slowest));
	return o;
}

/* A GPU of the body as metrics.jsonl writes it: gpu (the index), the
 * integer values NVML gave, power in watts. */
static json_t *gpu_json(json_t *g)
{
	static const char *const keys[] = {
	    "util_pct",	     "mem_used",	"mem_total", "temp_c", "sm_mhz",
	    "ecc_corrected", "ecc_uncorrected", "throttle",  "xid"};
	json_t *o = json_object();
	json_t *v;

	if (!o)
		return NULL;
	set_int(o, "gpu", json_integer_value(json_object_get(g, "index")));
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (json_is_integer(v = json_object_get(g, keys[k])))
			json_object_set(o, keys[k], v);
	if (json_is_integer(v = json_object_get(g, "power_mw")))
		set_real(o, "power_w", (double)json_integer_value(v) / 1000.0);
	return o;
}

static json_t *rdma_json(const struct mnode *nd, json_t *d)
{
	json_t *o = json_object();
	json_t *p = nd->prev ? mtab_match(json_object_get(nd->prev, "rdma"), d,
					  "dev", "port")
			     : NULL;
	int64_t dt =
	    nd->cur_t - json_integer_value(json_object_get(nd->prev, "t"));

	if (!o)
		return NULL;
	json_object_set(o, "dev", json_object_get(d, "dev"));
	json_object_set(o, "port", json_object_get(d, "port"));
	if (p && dt > 0 && mtab_u64(d, "rx_bytes") >= mtab_u64(p, "rx_bytes") &&
	    mtab_u64(d, "tx_bytes") >= mtab_u64(p, "tx_bytes")) {
		set_real(o, "rx_bytes_per_s",
			 (double)(mtab_u64(d, "rx_bytes") -
				  mtab_u64(p, "rx_bytes")) *
			     1000.0 / (double)dt);
		set_real(o, "tx_bytes_per_s",
			 (double)(mtab_u64(d, "tx_bytes") -
				  mtab_u64(p, "tx_bytes")) *
			     1000.0 / (double)dt);
	}
	set_int(o, "link_downed", (json_int_t)mtab_u64(d, "link_downed"));
	set_int(o, "symbol_error", (json_int_t)mtab_u64(d, "symbol_error"));
	set_int(o, "rcv_errors", (json_int_t)mtab_u64(d, "rcv_errors"));
	return o;
}

static json_t *node_json(const struct metrics *m, const struct mnode *nd)
{
	json_t *o = json_object(), *a, *v;
	size_t i;

	if (!o)
		return NULL;
	json_object_set_new(o, "node", json_string(nd->name));
	json_object_set_new(o, "state", json_string(state_name(nd->state)));
	/* A failed (evicted) node's last values are not current: its line
	 * says only that it failed. */
	if (!nd->cur || nd->state == METRICS_FAILED)
		return o;
	if (json_is_number(v = json_object_get(nd->cur, "load1")))
		json_object_set(o, "load1", v);
	if (nd->cpu_pct >= 0 && nd->prev)
		set_real(o, "cpu_pct", nd->cpu_pct);
	set_int(o, "rss_kib", (json_int_t)nd->rss_kib);
	if (nd->has_rates) {
		set_real(o, "rx_bytes_per_s", nd->rx_rate);
		set_real(o, "tx_bytes_per_s", nd->tx_rate);
	}
	set_int(o, "rx_bytes", (json_int_t)nd->rx_bytes);
	set_int(o, "tx_bytes", (json_int_t)nd->tx_bytes);
	set_int(o, "drops", (json_int_t)nd->drops_acc);
	set_int(o, "errors", (json_int_t)nd->errors);
	if (mtab_trains(m, nd) || (nd->state != METRICS_UP && nd->cur)) {
		if (nd->has_step)
			set_int(o, "step", nd->step);
		if (nd->has_step_rate)
			set_real(o, "steps_per_s", nd->step_rate);
		if (nd->has_loss)
			set_real(o, "loss", nd->loss);
		if (nd->has_tokens_rate)
			set_real(o, "tokens_per_s", nd->tokens_rate);
	}
	a = json_object_get(nd->cur, "gpus");
	if (json_array_size(a)) {
		json_t *gs = json_array();

		json_array_foreach(a, i, v)
		    json_array_append_new(gs, gpu_json(v));
		json_object_set_new(o, "gpus", gs);
	}
	if (json_is_string(v = json_object_get(nd->cur, "gpu_error")))
		json_object_set(o, "gpu_error", v);
	a = json_object_get(nd->cur, "rdma");
	if (json_array_size(a)) {
		json_t *rs = json_array();

		json_array_foreach(a, i, v)
		    json_array_append_new(rs, rdma_json(nd, v));
		json_object_set_new(o, "rdma", rs);
	}
	return o;
}

/* Whether the line at elapsed_ms carries per-node detail. */
static bool detail_due(struct metrics *m, int64_t elapsed_ms)
{
	int64_t every;

	if (!m->any_detail)
		return true;
	if (elapsed_ms < m->next_detail_ms)
		return false;
	if (elapsed_ms < m->ds.full_ms)
		return true;
	every = elapsed_ms < m->ds.late_ms ? m->ds.mid_every_ms
					   : m->ds.late_every_ms;
	/* On the grid: one line per period whatever the interval, even
	 * when a tick comes a little early. */
	return elapsed_ms / every != m->last_detail_ms / every;
}

void metrics_set_final(struct metrics *m)
{
	m->final = true;
}

json_t *metrics_line(struct metrics *m, int64_t t_ms, int64_t elapsed_ms,
		     bool force_nodes)
{
	struct metrics_job j;
	json_t *o, *nodes;

	metrics_job(m, &j);
	if (!m->final) {
		if (j.has_tokens_rate && j.tokens_per_s > 0) {
			m->has_tok = true;
			m->tok = j.tokens_per_s;
		}
		if (j.has_steps_rate && j.steps_per_s > 0) {
			m->has_steps = true;
			m->steps = j.steps_per_s;
		}
	} else {
		if (m->has_tok && (!j.has_tokens_rate || j.tokens_per_s <= 0)) {
			j.has_tokens_rate = true;
			j.tokens_per_s = m->tok;
		}
		if (m->has_steps && (!j.has_steps_rate || j.steps_per_s <= 0)) {
			j.has_steps_rate = true;
			j.steps_per_s = m->steps;
		}
	}
	o = json_pack("{s:I, s:i, s:I, s:i, s:i, s:o}", "t", (json_int_t)t_ms,
		      "attempt", j.attempt, "elapsed_ms",
		      (json_int_t)elapsed_ms, "nodes_up", j.nodes_up, "spares",
		      j.spares, "job", job_json(&j));
	if (!o)
		return NULL;
	if (!force_nodes && !detail_due(m, elapsed_ms))
		return o;
	m->any_detail = true;
	m->last_detail_ms = elapsed_ms;
	nodes = json_array();
	for (int i = 0; i < m->n; i++)
		json_array_append_new(nodes, node_json(m, &m->nodes[i]));
	json_object_set_new(o, "nodes", nodes);
	if (m->ds.bytes_per_s > 0) {
		/* The size as written (JSON_COMPACT; reals are shorter
		 * with a precision, so this is an upper bound). */
		size_t bytes = json_dumpb(o, NULL, 0, JSON_COMPACT);

		m->next_detail_ms =
		    elapsed_ms +
		    (int64_t)(bytes * 1000 / (size_t)m->ds.bytes_per_s);
	}
	return o;
}

/* --- the status line ------------------------------------------------------ */

/* 1234 -> "1234", 65536 -> "65.5k", 1.2e9 -> "1.2G". */
static void human(char *buf, size_t size, double v)
{
	static const char units[] = " kMGTP";
	int u = 0;

	while (fabs(v) >= 1000 && u < 5) {
		v /= 1000;
		u++;
	}
	if (u == 0)
		snprintf(buf, size, "%.0f", v);
	else
		snprintf(buf, size, "%.*f%c",
			 v < 10	   ? 2
			 : v < 100 ? 1
				   : 0,
			 v, units[u]);
}

char *metrics_status(struct metrics *m, char *buf, size_t size, int width)
{
	struct metrics_job j;
	char a[32], b[32];
	size_t len = 0, max;

	metrics_job(m, &j);
#define PUT(...)                                                               \
	do {                                                                   \
		if (len < size)                                                \
			len += (size_t)snprintf(buf + len, size - len,         \
						__VA_ARGS__);                  \
	} while (0)
	PUT("attempt %d | nodes %d up", j.attempt, j.nodes_up);
	if (j.spares)
		PUT(", %d spare%s", j.spares, j.spares == 1 ? "" : "s");
	if (j.nodes_failed)
		PUT(", %d failed", j.nodes_failed);
	/* The step and loss the lowest rank reporting a loss (rank 0, which
	 * prints them) reported; "(min N)" when some rank is behind it. */
	PUT(" | step ");
	if (j.has_loss && j.has_loss_step) {
		PUT("%" PRId64, j.loss_step);
		if (j.has_step && j.step < j.loss_step)
			PUT(" (min %" PRId64 ")", j.step);
	} else if (j.has_step) {
		PUT("%" PRId64, j.step);
	} else {
		PUT("-");
	}
	PUT(" | loss ");
	if (j.has_loss)
		PUT("%.4g", j.loss);
	else
		PUT("-");
	PUT(" | tok/s ");
	if (j.has_tokens_rate) {
		human(a, sizeof(a), j.tokens_per_s);
		PUT("%s", a);
	} else {
		PUT("-");
	}
	PUT(" | GPU ");
	if (j.has_gpu)
		PUT("%d/%.0f%%", j.gpu_util_min, j.gpu_util_avg);
	else
		PUT("-");
	PUT(" | net ");
	if (j.has_net) {
		human(a, sizeof(a), j.rx_bytes_per_s);
		human(b, sizeof(b), j.tx_bytes_per_s);
		PUT("rx %sB/s tx %sB/s", a, b);
	} else {
		PUT("-");
	}
	PUT(" | drops %" PRIu64, j.drops);
	PUT(" | slowest %s", j.slowest ? j.slowest : "-");
#undef PUT
	max = width > 1 ? (size_t)width - 1 : 0;
	if (len >= size)
		len = size - 1;
	if (len > max)
		len = max;
	buf[len] = '\0';
	/* Node names are the user's: nothing but printable ASCII on the
	 * terminal. */
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] < 0x20 ||
		    (unsigned char)buf[i] > 0x7e)
			buf[i] = '?';
	return buf;
}
