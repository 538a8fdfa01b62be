/* test_runlog.c — reading a run directory: events and metrics lines into
 * the model, bad and partial lines skipped and counted, files followed as
 * they grow, a file that appears later, bounded series and lines. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "herd/runlog.h"

static char root[] = "/tmp/herd-test-runlog.XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

static void feed_ev(struct runlog *rl, const char *line, int ok)
{
	assert_int_equal(runlog_feed_event(rl, line, strlen(line)), ok ? 0 : -1);
}

static void feed_met(struct runlog *rl, const char *line, int ok)
{
	assert_int_equal(runlog_feed_metrics(rl, line, strlen(line)),
			 ok ? 0 : -1);
}

/* A run directory with events.jsonl (empty) named name. */
static char *mkrun(const char *name)
{
	char *d, *f;
	int fd;

	assert_true(asprintf(&d, "%s/%s", root, name) > 0);
	assert_int_equal(mkdir(d, 0700), 0);
	assert_true(asprintf(&f, "%s/events.jsonl", d) > 0);
	fd = open(f, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	free(f);
	return d;
}

static void append(const char *dir, const char *file, const char *text)
{
	char *p;
	int fd;

	assert_true(asprintf(&p, "%s/%s", dir, file) > 0);
	fd = open(p, O_CREAT | O_WRONLY | O_APPEND, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	free(p);
}

static void test_events(void **state)
{
	char *d = mkrun("events");
	struct runlog *rl = runlog_open(d, NULL);
	struct runlog_node *n;

	(void)state;
	assert_non_null(rl);
	feed_ev(rl, "{\"t\":1000,\"event\":\"job_start\",\"job\":\"j\",\"run\":"
		    "\"R\",\"nodes\":2,\"spares\":1,\"mode\":\"torch\","
		    "\"transport\":\"local\"}", 1);
	feed_ev(rl, "{\"t\":1100,\"event\":\"node_up\",\"host\":\"a\"}", 1);
	feed_ev(rl, "{\"t\":1100,\"event\":\"node_up\",\"host\":\"b\"}", 1);
	feed_ev(rl, "{\"t\":1200,\"event\":\"attempt_start\",\"attempt\":1,"
		    "\"nodes\":2,\"world_size\":4,\"checkpoint\":null}", 1);
	feed_ev(rl, "{\"t\":1300,\"event\":\"rank_exit\",\"attempt\":1,"
		    "\"rank\":0,\"host\":\"a\",\"status\":1}", 1);
	feed_ev(rl, "{\"t\":1400,\"event\":\"node_failed\",\"host\":\"b\","
		    "\"reason\":\"gone <x>\",\"attempt\":1}", 1);
	feed_ev(rl, "{\"t\":1410,\"event\":\"attempt_end\",\"attempt\":1,"
		    "\"reason\":\"node b failed\",\"status\":1}", 1);
	feed_ev(rl, "{\"t\":1500,\"event\":\"spare_used\",\"host\":\"c\","
		    "\"attempt\":2}", 1);
	feed_ev(rl, "{\"t\":1600,\"event\":\"checkpoint_found\",\"path\":"
		    "\"/ck/3\",\"source\":\"dir\",\"attempt\":2}", 1);
	feed_ev(rl, "{\"t\":1700,\"event\":\"attempt_start\",\"attempt\":2,"
		    "\"nodes\":2,\"world_size\":4,\"checkpoint\":\"/ck/3\"}", 1);
	feed_ev(rl, "{\"t\":1750,\"event\":\"straggler\",\"host\":\"a\","
		    "\"ranks\":[0,1],\"ratio\":2.42,\"node_ms\":412,"
		    "\"median_ms\":170,\"window_ms\":10000,\"source\":"
		    "\"step_time\",\"action\":\"evict\",\"attempt\":2}", 1);
	feed_ev(rl, "{\"t\":1800,\"event\":\"node_evicted\",\"host\":\"a\","
		    "\"reason\":\"slow\",\"attempt\":2}", 1);
	/* Bad lines: counted, nothing else changes. */
	feed_ev(rl, "{\"t\":1900,\"event\":", 0);
	feed_ev(rl, "[1,2]", 0);
	feed_ev(rl, "{\"event\":\"job_end\"}", 0);	     /* no t */
	feed_ev(rl, "{\"t\":\"x\",\"event\":\"job_end\"}", 0); /* t not int */
	feed_ev(rl, "{\"t\":1,\"event\":7}", 0);
	feed_ev(rl, "{\"t\":1950,\"event\":\"some_future_event\"}", 1);
	assert_false(rl->ended);
	feed_ev(rl, "{\"t\":2000,\"event\":\"job_end\",\"status\":0,"
		    "\"attempts\":2}", 1);

	assert_string_equal(rl->job, "j");
	assert_string_equal(rl->run_id, "R");
	assert_int_equal(rl->want_nodes, 2);
	assert_int_equal(rl->spares, 1);
	assert_int_equal(rl->start_t, 1000);
	assert_true(rl->ended);
	assert_int_equal(rl->end_status, 0);
	assert_int_equal(rl->end_attempts, 2);
	assert_int_equal(rl->n_attempts, 2);
	assert_true(rl->attempts[0].ended);
	assert_int_equal(rl->attempts[0].status, 1);
	assert_string_equal(rl->attempts[0].reason, "node b failed");
	assert_null(rl->attempts[0].checkpoint);
	assert_false(rl->attempts[1].ended);
	assert_string_equal(rl->attempts[1].checkpoint, "/ck/3");
	assert_int_equal(rl->n_nodes, 3);
	n = runlog_node(rl, "b");
	assert_string_equal(n->state, "failed");
	assert_string_equal(n->reason, "gone <x>");
	assert_int_equal(n->failures, 1);
	n = runlog_node(rl, "a");
	assert_string_equal(n->state, "evicted");
	assert_string_equal(runlog_node(rl, "c")->state, "spare");
	assert_true(runlog_node(rl, "c")->spare_used);
	assert_null(runlog_node(rl, "nobody"));
	/* Marks: failed, spare, checkpoint, straggler, evicted, job_end. */
	assert_int_equal(rl->n_marks, 6);
	assert_string_equal(rl->marks[0].event, "node_failed");
	assert_string_equal(rl->marks[2].detail, "/ck/3");
	assert_string_equal(rl->marks[3].event, "straggler");
	assert_string_equal(rl->marks[3].detail,
			    "2.4x the median step time (412 vs 170 ms)");
	assert_string_equal(rl->marks[5].event, "job_end");
	assert_int_equal(rl->ev.lines, 19);
	assert_int_equal(rl->ev.bad, 5);
	runlog_free(rl);
	free(d);
}

static void test_metrics(void **state)
{
	char *d = mkrun("metrics");
	struct runlog *rl = runlog_open(d, NULL);
	struct runlog_node *n;
	double v, used, total;

	(void)state;
	feed_met(rl,
		 "{\"t\":1000,\"attempt\":1,\"job\":{\"step\":10,\"loss\":2.5,"
		 "\"tokens_per_s\":1000.0,\"slowest\":\"b\"},\"nodes\":["
		 "{\"node\":\"a\",\"state\":\"up\",\"rx_bytes_per_s\":5,"
		 "\"steps_per_s\":1.0,\"gpus\":[{\"gpu\":0,\"util_pct\":90,"
		 "\"mem_used\":1,\"mem_total\":4},{\"gpu\":1,\"util_pct\":70,"
		 "\"mem_used\":2,\"mem_total\":4}]},"
		 "{\"node\":\"b\",\"state\":\"up\",\"gpu_error\":\"no NVML\"},"
		 "\"not an object\"]}",
		 1);
	/* Downsampled: job only. */
	feed_met(rl, "{\"t\":2000,\"attempt\":1,\"job\":{\"step\":20,"
		     "\"loss\":2.0}}", 1);
	feed_met(rl, "{\"t\":2500,\"job\":[1]}", 0);
	feed_met(rl, "{\"t\":2500,\"nodes\":{}}", 0);
	feed_met(rl, "{\"job\":{}}", 0);
	feed_met(rl, "{\"t\":3000,\"job\":{\"loss\":\"NaN\",\"step\":1e400}}",
		 0); /* 1e400 is not JSON jansson takes */
	assert_int_equal(rl->met.lines, 6);
	assert_int_equal(rl->met.bad, 4);
	assert_int_equal(rl->first_metrics_t, 1000);
	assert_int_equal(rl->last_metrics_t, 2000);
	assert_true(runlog_job_value(rl, "step", &v));
	assert_true(v == 20);
	assert_false(runlog_job_value(rl, "tokens_per_s", &v));
	assert_int_equal(json_integer_value(json_object_get(rl->last_full, "t")),
			 1000);
	assert_int_equal(rl->job_s[RUNLOG_JOB_LOSS].n, 2);
	assert_true(rl->job_s[RUNLOG_JOB_LOSS].v[1] == 2.0);
	assert_int_equal(rl->job_s[RUNLOG_JOB_TOKENS_PER_S].n, 1);
	n = runlog_node(rl, "a");
	assert_non_null(n);
	assert_string_equal(n->state, "up");
	assert_int_equal(n->s[RUNLOG_NODE_GPU_UTIL].n, 1);
	assert_true(n->s[RUNLOG_NODE_GPU_UTIL].v[0] == 80);
	assert_true(runlog_node_gpu_mem(n->last, &used, &total));
	assert_true(used == 3 && total == 8);
	n = runlog_node(rl, "b");
	assert_false(runlog_node_gpu_util(n->last, &v));
	assert_int_equal(n->s[RUNLOG_NODE_GPU_UTIL].n, 0);
	runlog_free(rl);
	free(d);
}

static void test_series_bound(void **state)
{
	struct runlog_series s = {0};

	(void)state;
	for (int i = 0; i < 100000; i++)
		assert_int_equal(runlog_series_add(&s, i, i * 2), 0);
	assert_true(s.n <= RUNLOG_SERIES_MAX);
	assert_true(s.n >= RUNLOG_SERIES_MAX / 2);
	assert_true(s.t[0] == 0);
	for (size_t i = 1; i < s.n; i++) {
		assert_true(s.t[i] > s.t[i - 1]);
		assert_true(s.v[i] == s.t[i] * 2);
	}
	/* The whole run is covered, not just its start. */
	assert_true(s.t[s.n - 1] > 90000);
	free(s.t);
	free(s.v);
}

static void test_open_errors(void **state)
{
	struct herd_err err;
	char *p;

	(void)state;
	herd_err_clear(&err);
	assert_null(runlog_open("/nonexistent/run", &err));
	assert_non_null(strstr(err.text, "/nonexistent/run: No such file"));
	assert_true(asprintf(&p, "%s/empty", root) > 0);
	assert_int_equal(mkdir(p, 0700), 0);
	herd_err_clear(&err);
	assert_null(runlog_open(p, &err));
	assert_non_null(strstr(err.text, "not a run directory (no events.jsonl "
					 "or metrics.jsonl)"));
	append(p, "file", "x");
	free(p);
	assert_true(asprintf(&p, "%s/empty/file", root) > 0);
	herd_err_clear(&err);
	assert_null(runlog_open(p, &err));
	assert_non_null(strstr(err.text, "not a directory"));
	free(p);
}

static void test_follow(void **state)
{
	char *d = mkrun("follow");
	struct herd_err err;
	struct runlog *rl = runlog_open(d, &err);
	char *p;

	(void)state;
	assert_int_equal(runlog_update(rl, &err), 0);
	assert_true(rl->met.missing);
	append(d, "events.jsonl",
	       "{\"t\":1,\"event\":\"job_start\",\"job\":\"f\"}\n{\"t\":2,");
	assert_int_equal(runlog_update(rl, &err), 1);
	assert_int_equal(rl->ev.lines, 1); /* the partial line waits */
	assert_int_equal(rl->ev.bad, 0);
	assert_int_equal(runlog_update(rl, &err), 0);
	append(d, "events.jsonl",
	       "\"event\":\"job_end\",\"status\":3,\"attempts\":1}\n");
	assert_int_equal(runlog_update(rl, &err), 1);
	assert_int_equal(rl->ev.lines, 2);
	assert_true(rl->ended);
	assert_int_equal(rl->end_status, 3);
	/* metrics.jsonl appears later; an empty line is no line. */
	append(d, "metrics.jsonl", "{\"t\":5,\"job\":{\"step\":1}}\n\n");
	assert_int_equal(runlog_update(rl, &err), 1);
	assert_false(rl->met.missing);
	assert_int_equal(rl->met.lines, 1);
	runlog_free(rl);

	/* A file that cannot be read: one line naming it. */
	assert_true(asprintf(&p, "%s/metrics.jsonl", d) > 0);
	unlink(p);
	assert_int_equal(mkdir(p, 0700), 0);
	free(p);
	rl = runlog_open(d, &err);
	herd_err_clear(&err);
	assert_int_equal(runlog_update(rl, &err), -1);
	assert_non_null(strstr(err.text, "metrics.jsonl: Is a directory"));
	runlog_free(rl);
	free(d);
}

static void test_long_line(void **state)
{
	char *d = mkrun("long");
	struct herd_err err;
	struct runlog *rl = runlog_open(d, &err);
	size_t big = RUNLOG_LINE_MAX + 100000;
	char *line = malloc(big + 1), *p;
	int fd;

	(void)state;
	memset(line, 'x', big);
	line[big] = '\0';
	assert_true(asprintf(&p, "%s/metrics.jsonl", d) > 0);
	fd = open(p, O_CREAT | O_WRONLY | O_APPEND, 0600);
	assert_int_equal(write(fd, "{\"t\":1,\"job\":{}}\n", 17), 17);
	assert_int_equal(write(fd, line, big), (ssize_t)big);
	assert_int_equal(write(fd, "\n{\"t\":2,\"job\":{}}\n", 18), 18);
	close(fd);
	assert_int_equal(runlog_update(rl, &err), 1);
	assert_int_equal(rl->met.lines, 3);
	assert_int_equal(rl->met.bad, 1);
	assert_int_equal(rl->last_metrics_t, 2);
	runlog_free(rl);
	free(line);
	free(p);
	free(d);
}

static void test_tail(void **state)
{
	char *d = mkrun("tail");
	struct herd_err err;
	struct runlog *rl;

	(void)state;
	append(d, "metrics.jsonl",
	       "{\"t\":1,\"job\":{\"step\":1}}\n{\"t\":2,\"job\":{\"step\":2}}\n"
	       "{\"t\":3,\"job\":{\"step\":3}}\n");
	/* The last line and 4 bytes of the one before: that part is
	 * skipped, not counted. */
	rl = runlog_open(d, &err);
	runlog_metrics_tail(rl, 24 + 4);
	assert_int_equal(runlog_update(rl, &err), 1);
	assert_int_equal(rl->met.lines, 1);
	assert_int_equal(rl->met.bad, 0);
	assert_int_equal(rl->last_metrics_t, 3);
	runlog_free(rl);
	/* A tail longer than the file reads it all. */
	rl = runlog_open(d, &err);
	runlog_metrics_tail(rl, 1 << 20);
	assert_int_equal(runlog_update(rl, &err), 1);
	assert_int_equal(rl->met.lines, 3);
	runlog_free(rl);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_events),     cmocka_unit_test(test_metrics),
	    cmocka_unit_test(test_series_bound),
	    cmocka_unit_test(test_open_errors), cmocka_unit_test(test_follow),
	    cmocka_unit_test(test_long_line),	cmocka_unit_test(test_tail),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
