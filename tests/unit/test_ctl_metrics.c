/* test_ctl_metrics.c — the controller's metrics table (launcher/model/metric_table.c):
 * rates from the difference of two samples over the agent's clock,
 * counter resets as new baselines, the job-wide values of I12-CONTRACT,
 * the slowest node, metrics.jsonl's downsampling bound (a fake clock over
 * two hours), the Prometheus exposition (checked by promtool) and the
 * status line.
 */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "launcher/model/metric_table.h"

static const char *const names3[] = {"node1", "node2", "node3"};

/* One node's sample: net eth0 (rx, tx, drops), rank r0 and r0+1 with
 * step, loss (r0 only) and tokens, one GPU at util. */
struct sample {
	int64_t t;
	int attempt;
	uint64_t rx, tx, rx_drops;
	int r0;
	int64_t step;
	double loss;
	uint64_t tokens;
	int util;
	uint64_t cpu_ms;
};

static json_t *body(const struct sample *s)
{
	json_t *b = json_pack(
	    "{s:I, s:i, s:f, s:i,"
	    " s:[{s:i, s:I, s:I}, {s:i, s:I, s:I}],"
	    " s:[{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}],"
	    " s:[],"
	    " s:[{s:i, s:i, s:I, s:I, s:i, s:I, s:i, s:I, s:I, s:I}],"
	    " s:[{s:i, s:i, s:{s:I, s:f, s:I}},"
	    "    {s:i, s:i, s:{s:I, s:I}}]}",
	    "t", (json_int_t)s->t, "attempt", s->attempt, "load1", 1.5, "cpus",
	    8, "ranks", "rank", s->r0, "cpu_ms", (json_int_t)s->cpu_ms,
	    "rss_kb", (json_int_t)1000, "rank", s->r0 + 1, "cpu_ms",
	    (json_int_t)s->cpu_ms, "rss_kb", (json_int_t)2000, "net", "dev",
	    "eth0", "rx_bytes", (json_int_t)s->rx, "tx_bytes",
	    (json_int_t)s->tx, "rx_packets", (json_int_t)1, "tx_packets",
	    (json_int_t)1, "rx_drops", (json_int_t)s->rx_drops, "tx_drops",
	    (json_int_t)0, "rx_errors", (json_int_t)0, "tx_errors",
	    (json_int_t)0, "rdma", "gpus", "index", 0, "util_pct", s->util,
	    "mem_used", (json_int_t)1 << 30, "mem_total", (json_int_t)1 << 34,
	    "temp_c", 60, "power_mw", (json_int_t)300500, "sm_mhz", 1980,
	    "ecc_corrected", (json_int_t)0, "ecc_uncorrected", (json_int_t)0,
	    "throttle", (json_int_t)0, "train", "rank", s->r0, "records", 3,
	    "values", "step", (json_int_t)s->step, "loss", s->loss, "tokens",
	    (json_int_t)s->tokens, "rank", s->r0 + 1, "records", 3, "values",
	    "step", (json_int_t)s->step, "tokens", (json_int_t)s->tokens);

	assert_non_null(b);
	return b;
}

static void feed(struct metrics *m, int i, const struct sample *s)
{
	json_t *b = body(s);

	assert_int_equal(metrics_feed(m, i, b), 0);
	json_decref(b);
}

static struct metrics *three_up(void)
{
	struct metrics *m = metrics_new(3, names3);

	assert_non_null(m);
	metrics_set_attempt(m, 1);
	for (int i = 0; i < 3; i++)
		metrics_set_state(m, i, METRICS_UP);
	return m;
}

/* Two samples 2 s apart: rates are the differences over t; tokens and
 * steps per second are job-wide sums / the slowest node. */
static void test_rates(void **state)
{
	struct metrics *m = three_up();
	struct metrics_job j;

	(void)state;
	for (int i = 0; i < 3; i++) {
		struct sample a = {.t = 10000,
				   .attempt = 1,
				   .rx = 1000,
				   .tx = 500,
				   .r0 = 2 * i,
				   .step = 10,
				   .loss = 2.0 + i,
				   .tokens = 1000,
				   .util = 50 + 10 * i,
				   .cpu_ms = 1000};
		struct sample b = a;

		feed(m, i, &a);
		b.t = 12000;
		b.rx = 5000;	 /* 2000 B/s */
		b.tx = 1500;	 /* 500 B/s */
		b.step = 14;	 /* 2 steps/s */
		b.tokens = 5000; /* 2 ranks x 2000 tokens/s */
		b.cpu_ms = 3000; /* 2 ranks x 100 % */
		feed(m, i, &b);
	}
	metrics_job(m, &j);
	assert_int_equal(j.nodes_up, 3);
	assert_true(j.has_net);
	assert_true(fabs(j.rx_bytes_per_s - 6000) < 1e-6);
	assert_true(fabs(j.tx_bytes_per_s - 1500) < 1e-6);
	assert_true(j.has_step && j.step == 14);
	assert_true(j.has_loss && j.loss == 2.0); /* rank 0's */
	assert_true(j.has_tokens_rate && fabs(j.tokens_per_s - 12000) < 1e-6);
	/* tokens since the start: 3 nodes x 2 ranks x 5000 */
	assert_int_equal(j.tokens_total, 30000);
	assert_true(j.has_steps_rate && fabs(j.steps_per_s - 2.0) < 1e-6);
	assert_null(j.slowest); /* a tie: none named */
	assert_true(j.has_gpu && j.gpu_util_min == 50 &&
		    fabs(j.gpu_util_avg - 60) < 1e-6);
	metrics_free(m);
}

/* A counter lower than before (the agent restarted): a new baseline, no
 * negative rate; drops since the start keep counting from it. */
static void test_counter_reset(void **state)
{
	struct metrics *m = metrics_new(1, names3);
	struct metrics_job j;
	struct sample s = {.t = 1000,
			   .attempt = 1,
			   .rx = 10000,
			   .tx = 10000,
			   .rx_drops = 5,
			   .step = 1,
			   .tokens = 100};
	json_t *line;

	(void)state;
	assert_non_null(m);
	metrics_set_attempt(m, 1);
	metrics_set_state(m, 0, METRICS_UP);
	feed(m, 0, &s);
	s.t = 2000;
	s.rx = 20000;
	s.rx_drops = 7;
	feed(m, 0, &s);
	metrics_job(m, &j);
	assert_true(j.has_net && fabs(j.rx_bytes_per_s - 10000) < 1e-6);
	/* The first sample is the baseline (item 11): the 5 drops from
	 * before the job are not counted, the 2 since are. */
	assert_int_equal(j.drops, 2);

	/* The agent restarted: every counter from 0 again. */
	s.t = 3000;
	s.rx = 300;
	s.tx = 300;
	s.rx_drops = 2;
	feed(m, 0, &s);
	metrics_job(m, &j);
	assert_false(j.has_net);      /* no rate this time, never < 0 */
	assert_int_equal(j.drops, 4); /* 2 before, 2 since */
	line = metrics_line(m, 1, 3000, true);
	assert_null(
	    json_object_get(json_array_get(json_object_get(line, "nodes"), 0),
			    "rx_bytes_per_s"));
	json_decref(line);

	/* And rates again from the new baseline. */
	s.t = 4000;
	s.rx = 1300;
	feed(m, 0, &s);
	metrics_job(m, &j);
	assert_true(j.has_net && fabs(j.rx_bytes_per_s - 1000) < 1e-6);

	/* A sample not after the latest is ignored. */
	{
		json_t *b = body(&s);

		assert_int_equal(metrics_feed(m, 0, b), -1);
		json_decref(b);
	}
	metrics_free(m);
}

/* A node whose ranks step slower is the slowest; failed nodes and other
 * attempts' values do not count. */
static void test_slowest(void **state)
{
	struct metrics *m = three_up();
	struct metrics_job j;
	char line[512];

	(void)state;
	for (int k = 0; k <= 10; k++)
		for (int i = 0; i < 3; i++) {
			struct sample s = {.t = 1000 * k,
					   .attempt = 1,
					   .r0 = 2 * i,
					   .step = i == 1 ? k / 2 : k,
					   .loss = 1.0,
					   .util = 90};

			feed(m, i, &s);
		}
	metrics_job(m, &j);
	assert_non_null(j.slowest);
	assert_string_equal(j.slowest, "node2");
	assert_true(fabs(j.steps_per_s - 0.5) < 1e-6);
	assert_int_equal(j.step, 5);
	metrics_status(m, line, sizeof(line), 200);
	assert_non_null(strstr(line, "slowest node2"));

	/* node2 failed: out of the job-wide values. */
	metrics_set_state(m, 1, METRICS_FAILED);
	metrics_job(m, &j);
	assert_null(j.slowest);
	assert_int_equal(j.step, 10);
	assert_int_equal(j.nodes_up, 2);
	assert_int_equal(j.nodes_failed, 1);

	/* Attempt 2: attempt 1's training values no longer count. */
	metrics_set_attempt(m, 2);
	metrics_job(m, &j);
	assert_false(j.has_step);
	assert_false(j.has_loss);
	metrics_free(m);
}

/* The bound of metrics.jsonl on a long run: a fake clock, a 1 s interval,
 * 4 nodes, 2 hours.  Detail with every node: every sample for 10 min,
 * every 10 s to 1 h, every 60 s after; the job line every sample. */
static void test_downsample_bound(void **state)
{
	static const char *const names4[] = {"node1", "node2", "node3",
					     "node4"};
	struct metrics *m = metrics_new(4, names4);
	size_t detail[3] = {0}, bytes[3] = {0}, job_only_max = 0;
	size_t lines = 0;

	(void)state;
	assert_non_null(m);
	metrics_set_attempt(m, 1);
	for (int i = 0; i < 4; i++)
		metrics_set_state(m, i, METRICS_UP);
	for (int64_t t = 0; t <= 2 * 3600 * 1000; t += 1000) {
		int phase = t < 600000 ? 0 : t < 3600000 ? 1 : 2;
		json_t *line;
		char *text;

		for (int i = 0; i < 4; i++) {
			struct sample s = {.t = t + 1,
					   .attempt = 1,
					   .rx = (uint64_t)t * 1000,
					   .tx = (uint64_t)t * 900,
					   .r0 = 2 * i,
					   .step = t / 1000,
					   .loss = 1.23456,
					   .tokens = (uint64_t)t * 65,
					   .util = 91,
					   .cpu_ms = (uint64_t)t};

			feed(m, i, &s);
		}
		line = metrics_line(m, 1764550000000 + t, t, false);
		text = json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(7));
		assert_non_null(text);
		lines++;
		if (json_object_get(line, "nodes")) {
			detail[phase]++;
			bytes[phase] += strlen(text) + 1;
		} else if (strlen(text) + 1 > job_only_max) {
			job_only_max = strlen(text) + 1;
		}
		free(text);
		json_decref(line);
	}
	assert_int_equal(lines, 7201);
	assert_int_equal(detail[0], 600);
	assert_int_equal(detail[1], 300);
	assert_int_equal(detail[2], 61); /* 3600 s..7200 s, both ends */
	/* The numbers README states: a node's detail (2 ranks, 1 net
	 * device, 1 GPU) is under 600 bytes a line, so after the first hour
	 * under 36 KB per node per hour; the job line alone under 400 bytes
	 * (1.5 MB an hour at 1 s). */
	assert_true(bytes[2] / detail[2] < 4 * 600);
	assert_true(job_only_max < 400);
	printf("detail line with 4 nodes: %zu bytes; job line: %zu bytes\n",
	       bytes[2] / detail[2], job_only_max);
	metrics_free(m);
}

/* A big job's detail lines are big: never more than bytes_per_s on
 * average, whatever the schedule says (here 4 nodes, ~2 KB a line, a
 * budget of 500 bytes/s: a detail line every 4 to 5 s in the first 10
 * minutes instead of every second). */
static void test_downsample_budget(void **state)
{
	static const char *const names4[] = {"node1", "node2", "node3",
					     "node4"};
	struct metrics *m = metrics_new(4, names4);
	int detail = 0;

	(void)state;
	assert_non_null(m);
	metrics_downsample(m)->bytes_per_s = 500;
	metrics_set_attempt(m, 1);
	for (int i = 0; i < 4; i++)
		metrics_set_state(m, i, METRICS_UP);
	for (int64_t t = 0; t < 60000; t += 1000) {
		json_t *line;

		for (int i = 0; i < 4; i++) {
			struct sample s = {.t = t + 1,
					   .attempt = 1,
					   .r0 = 2 * i,
					   .step = t / 1000,
					   .loss = 1.23456,
					   .util = 91};

			feed(m, i, &s);
		}
		line = metrics_line(m, 1764550000000 + t, t, false);
		detail += json_object_get(line, "nodes") != NULL;
		json_decref(line);
	}
	assert_in_range(detail, 12, 16);
	metrics_free(m);
}

/* The exposition: every family with HELP and TYPE, labels escaped, and
 * `promtool check metrics` clean. */
static void test_prometheus(void **state)
{
	static const char *const odd[] = {"we\"ird\\node\n1", "node2"};
	struct metrics *m = metrics_new(2, odd);
	char *text;
	size_t len;
	FILE *p;
	struct sample s = {.t = 1000,
			   .attempt = 1,
			   .rx = 100,
			   .tx = 50,
			   .step = 3,
			   .loss = 0.5,
			   .tokens = 10,
			   .util = 77,
			   .cpu_ms = 1500};
	static const char *const names[] = {
	    "herd_attempt 1\n",
	    "herd_nodes{state=\"up\"} 2\n",
	    "herd_nodes{state=\"failed\"} 0\n",
	    "herd_nodes{state=\"spare\"} 0\n",
	    "herd_train_step 4\n",
	    "herd_train_loss 0.5\n",
	    "herd_train_tokens_total 80\n",
	    "herd_train_tokens_per_second 40\n",
	    "herd_node_steps_per_second{node=\"node2\"} 1\n",
	    "herd_gpu_utilization_ratio{node=\"node2\",gpu=\"0\"} 0.77\n",
	    "herd_gpu_memory_used_bytes{node=\"node2\",gpu=\"0\"} 1073741824\n",
	    "herd_gpu_memory_total_bytes{node=\"node2\",gpu=\"0\"} "
	    "17179869184\n",
	    "herd_gpu_temperature_celsius{node=\"node2\",gpu=\"0\"} 60\n",
	    "herd_gpu_power_watts{node=\"node2\",gpu=\"0\"} 300.5\n",
	    "herd_gpu_sm_clock_hertz{node=\"node2\",gpu=\"0\"} 1980000000\n",
	    "herd_gpu_ecc_errors_total{node=\"node2\",gpu=\"0\",type="
	    "\"corrected\"} 0\n",
	    "herd_gpu_ecc_errors_total{node=\"node2\",gpu=\"0\",type="
	    "\"uncorrected\"} 0\n",
	    "herd_gpu_throttle_reasons{node=\"node2\",gpu=\"0\"} 0\n",
	    "herd_network_receive_bytes_total{node=\"node2\",device=\"eth0\"} "
	    "200\n",
	    "herd_network_transmit_bytes_total{node=\"node2\",device=\"eth0\"} "
	    "100\n",
	    "herd_network_receive_drops_total{node=\"node2\",device=\"eth0\"} "
	    "0\n",
	    "herd_network_transmit_drops_total{node=\"node2\",device=\"eth0\"} "
	    "0\n",
	    "herd_network_receive_errors_total{node=\"node2\",device=\"eth0\"} "
	    "0\n",
	    "herd_network_transmit_errors_total{node=\"node2\",device=\"eth0\"}"
	    " 0\n",
	    "herd_rank_cpu_seconds_total{node=\"node2\",rank=\"0\"} 2\n",
	    "herd_rank_resident_memory_bytes{node=\"node2\",rank=\"1\"} "
	    "2048000\n",
	    "herd_node_load1{node=\"node2\"} 1.5\n",
	    "{node=\"we\\\"ird\\\\node\\n1\"}",
	    "# HELP herd_train_loss ",
	    "# TYPE herd_train_tokens_total counter\n",
	    "# TYPE herd_gpu_utilization_ratio gauge\n",
	};

	(void)state;
	assert_non_null(m);
	metrics_set_attempt(m, 1);
	for (int i = 0; i < 2; i++) {
		metrics_set_state(m, i, METRICS_UP);
		feed(m, i, &s);
	}
	s.t = 2000;
	s.rx = 200;
	s.tx = 100;
	s.step = 4;
	s.tokens = 20;
	s.cpu_ms = 2000;
	for (int i = 0; i < 2; i++)
		feed(m, i, &s);
	text = metrics_prometheus(m, &len);
	assert_non_null(text);
	assert_int_equal(strlen(text), len);
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
		if (!strstr(text, names[k]))
			fail_msg("missing %s in:\n%s", names[k], text);
	p = popen("promtool check metrics", "w");
	assert_non_null(p);
	fwrite(text, 1, len, p);
	assert_int_equal(pclose(p), 0);
	free(text);
	metrics_free(m);
}

/* The status line: every field, cut to the terminal's width, printable
 * only. */
static void test_status(void **state)
{
	struct metrics *m = three_up();
	char line[512];

	(void)state;
	for (int i = 0; i < 3; i++) {
		struct sample s = {.t = 1000,
				   .attempt = 1,
				   .rx = 0,
				   .r0 = 2 * i,
				   .step = 7,
				   .loss = 1.93,
				   .tokens = 0,
				   .util = 80 + i};

		feed(m, i, &s);
		s.t = 2000;
		s.rx = 1200000000;
		s.tx = 1100000000;
		s.step = 8;
		s.tokens = 32768;
		feed(m, i, &s);
	}
	metrics_set_state(m, 2, METRICS_SPARE);
	metrics_status(m, line, sizeof(line), 300);
	assert_string_equal(line,
			    "attempt 1 | nodes 2 up, 1 spare | step 8 | "
			    "loss 1.93 | tok/s 131k | GPU 80/80% | net rx "
			    "2.40GB/s tx 2.20GB/s | drops 0 | slowest -");
	metrics_status(m, line, sizeof(line), 30);
	assert_int_equal(strlen(line), 29);
	metrics_free(m);
}

/* Steps longer than the sampling interval (issue 22 item 10): a step
 * every 5 s, a sample every 1 s.  tokens/s is the tokens of the steps
 * over their time, at every sample once two steps ended: never 0 nor
 * unknown between two steps, never a burst at the sample that saw one. */
static void test_slow_steps(void **state)
{
	static const int64_t step_ms[] = {5000, 5300};
	char line[512];

	(void)state;
	for (size_t k = 0; k < 2; k++) {
		struct metrics *m = metrics_new(1, names3);
		struct metrics_job j;
		/* 2 ranks x 1000 tokens a step */
		double want = 2000.0 * 1000.0 / (double)step_ms[k];
		double tol = k == 0 ? 1e-6 : 0.15 * want;

		assert_non_null(m);
		metrics_set_attempt(m, 1);
		metrics_set_state(m, 0, METRICS_UP);
		for (int64_t t = 0; t <= 60000; t += 1000) {
			struct sample s = {.t = 100000 + t,
					   .attempt = 1,
					   .step = t / step_ms[k],
					   .loss = 2.0,
					   .tokens = 1000 * (uint64_t)(t /
								       step_ms[k])};

			feed(m, 0, &s);
			metrics_job(m, &j);
			if (t < 2 * step_ms[k])
				continue;
			if (!j.has_tokens_rate ||
			    fabs(j.tokens_per_s - want) > tol)
				fail_msg("t=%" PRId64 " ms, steps of %" PRId64
					 " ms: tokens/s %s%.1f, want %.1f",
					 t, step_ms[k],
					 j.has_tokens_rate ? "" : "unknown ",
					 j.tokens_per_s, want);
			if (!j.has_steps_rate ||
			    fabs(j.steps_per_s * (double)step_ms[k] / 1000.0 -
				 1.0) > (k == 0 ? 1e-6 : 0.15))
				fail_msg("t=%" PRId64 " ms: steps/s %s%.3f", t,
					 j.has_steps_rate ? "" : "unknown ",
					 j.steps_per_s);
			metrics_status(m, line, sizeof(line), 300);
			assert_null(strstr(line, "tok/s 0 "));
			assert_null(strstr(line, "tok/s -"));
		}
		/* The ranks stall: after two steps' time without one the
		 * rate falls. */
		for (int64_t t = 61000; t <= 120000; t += 1000) {
			struct sample s = {.t = 100000 + t,
					   .attempt = 1,
					   .step = 60000 / step_ms[k],
					   .loss = 2.0,
					   .tokens =
					       1000 * (uint64_t)(60000 /
								 step_ms[k])};

			feed(m, 0, &s);
		}
		metrics_job(m, &j);
		assert_true(j.has_tokens_rate && j.tokens_per_s > 0 &&
			    j.tokens_per_s < want / 2);
		metrics_free(m);
	}
}

/* The status line shows the step and loss rank 0 reported (as it prints
 * them), and labels a rank behind it. */
static void test_status_rank0_step(void **state)
{
	struct metrics *m = three_up();
	char line[512];

	(void)state;
	for (int i = 0; i < 3; i++) {
		struct sample s = {.t = 1000,
				   .attempt = 1,
				   .r0 = 2 * i,
				   .step = i == 2 ? 9 : 10,
				   .loss = 1.5 + i};

		feed(m, i, &s);
	}
	metrics_status(m, line, sizeof(line), 300);
	assert_non_null(strstr(line, "| step 10 (min 9) | loss 1.5 |"));
	/* in step: no label */
	metrics_set_state(m, 2, METRICS_FAILED);
	metrics_status(m, line, sizeof(line), 300);
	assert_non_null(strstr(line, "| step 10 | loss 1.5 |"));
	metrics_free(m);
}

/* An evicted node's last values are not written as current (item 11):
 * its line in metrics.jsonl has its name and state only. */
static void test_failed_node_no_values(void **state)
{
	struct metrics *m = three_up();
	json_t *line, *n;

	(void)state;
	for (int k = 1; k <= 2; k++)
		for (int i = 0; i < 3; i++) {
			struct sample s = {.t = 1000 * k,
					   .attempt = 1,
					   .rx = 1000 * (uint64_t)k,
					   .r0 = 2 * i,
					   .step = k,
					   .loss = 1.0,
					   .util = 90};

			feed(m, i, &s);
		}
	metrics_set_state(m, 1, METRICS_FAILED);
	line = metrics_line(m, 1, 3000, true);
	n = json_array_get(json_object_get(line, "nodes"), 1);
	assert_string_equal(json_string_value(json_object_get(n, "state")),
			    "failed");
	assert_int_equal(json_object_size(n), 2); /* node, state */
	n = json_array_get(json_object_get(line, "nodes"), 0);
	assert_non_null(json_object_get(n, "gpus"));
	json_decref(line);
	metrics_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rates),
	    cmocka_unit_test(test_counter_reset),
	    cmocka_unit_test(test_slowest),
	    cmocka_unit_test(test_downsample_bound),
	    cmocka_unit_test(test_downsample_budget),
	    cmocka_unit_test(test_prometheus),
	    cmocka_unit_test(test_status),
	    cmocka_unit_test(test_slow_steps),
	    cmocka_unit_test(test_status_rank0_step),
	    cmocka_unit_test(test_failed_node_no_values),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
