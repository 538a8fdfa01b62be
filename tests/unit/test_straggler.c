/* test_straggler.c — the straggler detector (launcher/model/straggler_rule.c):
 * samples with timestamps in, verdicts out.  The window must hold
 * continuously, each node is reported once per attempt, the reference is
 * the median over nodes (the faster of two), the sources come in order
 * (step_time, step rate, progress touches) and the best common one is
 * used, a node's value is the median of its ranks'.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "launcher/model/straggler_rule.h"

#define WINDOW 3000
#define TICK 500

/* Feeds one step_time sample for every node (one rank each, rank ==
 * node) at t, node i taking ms[i]. */
static void feed_st(struct straggler *s, int n, int64_t t, const double *ms)
{
	for (int i = 0; i < n; i++) {
		struct straggler_obs o = {.has_step_time = true,
					  .step_time_s = ms[i] / 1000.0};

		assert_int_equal(straggler_sample(s, i, i, t, &o), 0);
	}
}

static struct straggler *make(int n)
{
	struct straggler *s = straggler_new(n, 1.3, WINDOW, 3 * TICK);

	assert_non_null(s);
	for (int i = 0; i < n; i++)
		straggler_set_active(s, i, true);
	return s;
}

/* Node 2 takes 2x: reported once the window has passed, not before, and
 * only once; nobody else. */
static void test_window(void **state)
{
	struct straggler *s = make(3);
	struct straggler_verdict v[4];
	double ms[3] = {100, 110, 220};
	int64_t t;
	int got = 0;

	(void)state;
	for (t = 0; t <= 10000; t += TICK) {
		int k;

		feed_st(s, 3, t, ms);
		k = straggler_eval(s, t, v, 4);
		if (t < WINDOW)
			assert_int_equal(k, 0);
		if (k) {
			assert_int_equal(t, WINDOW);
			assert_int_equal(k, 1);
			assert_int_equal(v[0].node, 2);
			assert_int_equal(v[0].source, STRAGGLER_SRC_STEP_TIME);
			assert_true(v[0].ratio > 1.99 && v[0].ratio < 2.01);
			assert_true(v[0].median_ms > 109 && v[0].median_ms < 111);
			assert_true(v[0].node_ms > 219 && v[0].node_ms < 221);
			assert_int_equal(v[0].slow_ms, WINDOW);
		}
		got += k;
	}
	assert_int_equal(got, 1);
	/* A new attempt: reported again after a window. */
	straggler_reset(s);
	for (t = 20000; t <= 20000 + WINDOW; t += TICK) {
		feed_st(s, 3, t, ms);
		got += straggler_eval(s, t, v, 4);
	}
	assert_int_equal(got, 2);
	straggler_free(s);
}

/* Slow, then one sample fast: the window starts again. */
static void test_continuous(void **state)
{
	struct straggler *s = make(4);
	struct straggler_verdict v[4];
	double slow[4] = {100, 100, 100, 150}, fast[4] = {100, 100, 100, 120};
	int64_t t, when = -1;

	(void)state;
	for (t = 0; t <= 12000; t += TICK) {
		feed_st(s, 4, t, t == 2500 ? fast : slow);
		if (straggler_eval(s, t, v, 4)) {
			assert_int_equal(v[0].node, 3);
			assert_int_equal(when, -1);
			when = t;
		}
	}
	/* Slow again from 3000: reported at 3000 + WINDOW. */
	assert_int_equal(when, 3000 + WINDOW);
	straggler_free(s);
}

/* Just below the ratio: never. */
static void test_below_ratio(void **state)
{
	struct straggler *s = make(3);
	struct straggler_verdict v[4];
	double ms[3] = {100, 100, 129};

	(void)state;
	for (int64_t t = 0; t <= 20000; t += TICK) {
		feed_st(s, 3, t, ms);
		assert_int_equal(straggler_eval(s, t, v, 4), 0);
	}
	straggler_free(s);
}

/* Two nodes: compared with the faster (1.4x: a straggler; against the
 * mean it would be 1.17x).  One node: nothing to compare with. */
static void test_two_and_one(void **state)
{
	struct straggler *s = make(2), *one = make(1);
	struct straggler_verdict v[4];
	double ms[2] = {100, 140};
	int got = 0;

	(void)state;
	for (int64_t t = 0; t <= 5000; t += TICK) {
		feed_st(s, 2, t, ms);
		feed_st(one, 1, t, ms + 1);
		if (straggler_eval(s, t, v, 4)) {
			assert_int_equal(v[0].node, 1);
			assert_true(v[0].median_ms > 99 && v[0].median_ms < 101);
			got++;
		}
		assert_int_equal(straggler_eval(one, t, v, 4), 0);
	}
	assert_int_equal(got, 1);
	straggler_free(s);
	straggler_free(one);
}

/* An inactive node (a spare, an evicted node) is not judged and not
 * part of the median. */
static void test_inactive(void **state)
{
	struct straggler *s = make(3);
	struct straggler_verdict v[4];
	double ms[3] = {100, 400, 400};
	int got = 0;

	(void)state;
	straggler_set_active(s, 0, false);
	for (int64_t t = 0; t <= 8000; t += TICK) {
		feed_st(s, 3, t, ms);
		got += straggler_eval(s, t, v, 4);
	}
	assert_int_equal(got, 0);
	straggler_free(s);
}

/* Step rates: node 1 advances half as fast; no step_time anywhere. */
static void test_step_rate(void **state)
{
	struct straggler *s = make(3);
	struct straggler_verdict v[4];
	int got = 0;

	(void)state;
	for (int64_t t = 0; t <= 10000; t += TICK) {
		for (int i = 0; i < 3; i++) {
			/* 100 ms per step; node 1 200 ms. */
			struct straggler_obs o = {
			    .has_step = true,
			    .step = (double)(t / (i == 1 ? 200 : 100))};

			straggler_sample(s, i, i, t, &o);
		}
		if (straggler_eval(s, t, v, 4)) {
			assert_int_equal(v[0].node, 1);
			assert_int_equal(v[0].source, STRAGGLER_SRC_STEP);
			assert_true(v[0].ratio > 1.7 && v[0].ratio < 2.3);
			got++;
		}
	}
	assert_int_equal(got, 1);
	straggler_free(s);
}

/* Touches only; and a rank that stops touching grows slower and slower
 * (the time since its last touch). */
static void test_progress(void **state)
{
	struct straggler *s = make(3);
	struct straggler_verdict v[4];
	int got = 0;

	(void)state;
	for (int64_t t = 0; t <= 12000; t += TICK) {
		for (int i = 0; i < 3; i++) {
			/* Node 2 stops at 4 s. */
			int64_t tt = i == 2 && t > 4000 ? 4000 : t;
			struct straggler_obs o = {.has_touches = true,
						  .touches = tt / 250};

			straggler_sample(s, i, i, t, &o);
		}
		if (straggler_eval(s, t, v, 4)) {
			assert_int_equal(v[0].node, 2);
			assert_int_equal(v[0].source, STRAGGLER_SRC_PROGRESS);
			got++;
		}
	}
	assert_int_equal(got, 1);
	assert_true(straggler_node_ms(s, 0, STRAGGLER_SRC_PROGRESS) > 249);
	assert_true(straggler_node_ms(s, 0, STRAGGLER_SRC_PROGRESS) < 251);
	assert_true(straggler_node_ms(s, 0, STRAGGLER_SRC_STEP) < 0);
	straggler_free(s);
}

/* Before a count moves nothing is said (start-up is not slowness). */
static void test_no_motion(void **state)
{
	struct straggler *s = make(3);
	struct straggler_verdict v[4];

	(void)state;
	for (int64_t t = 0; t <= 10000; t += TICK) {
		for (int i = 0; i < 3; i++) {
			struct straggler_obs o = {
			    .has_touches = true,
			    .touches = i == 0 ? t / 100 : 0};

			straggler_sample(s, i, i, t, &o);
		}
		assert_int_equal(straggler_eval(s, t, v, 4), 0);
	}
	straggler_free(s);
}

/* Mixed sources: node 0 reports step_time, the others only step; the
 * common source (step) is used for all. */
static void test_common_source(void **state)
{
	struct straggler *s = make(3);
	struct straggler_verdict v[4];
	int got = 0;

	(void)state;
	for (int64_t t = 0; t <= 10000; t += TICK) {
		for (int i = 0; i < 3; i++) {
			struct straggler_obs o = {
			    .has_step_time = i == 0,
			    .step_time_s = 5.0, /* would be slow */
			    .has_step = true,
			    .step = (double)(t / (i == 2 ? 300 : 100))};

			straggler_sample(s, i, i, t, &o);
		}
		if (straggler_eval(s, t, v, 4)) {
			assert_int_equal(v[0].node, 2);
			assert_int_equal(v[0].source, STRAGGLER_SRC_STEP);
			got++;
		}
	}
	assert_int_equal(got, 1);
	straggler_free(s);
}

/* A node's value is the median of its ranks': one slow rank of three
 * does not make the node slow; two do. */
static void test_rank_median(void **state)
{
	struct straggler *s = make(3);
	struct straggler_verdict v[4];
	int got = 0;

	(void)state;
	for (int64_t t = 0; t <= 8000; t += TICK) {
		for (int i = 0; i < 3; i++)
			for (int r = 0; r < 3; r++) {
				double ms = 100;
				struct straggler_obs o = {.has_step_time = true};

				if (i == 1 && r == 0)
					ms = 500; /* one rank of node 1 */
				if (i == 2 && r < 2)
					ms = 500; /* two ranks of node 2 */
				o.step_time_s = ms / 1000;
				straggler_sample(s, i, i * 3 + r, t, &o);
			}
		if (straggler_eval(s, t, v, 4)) {
			assert_int_equal(v[0].node, 2);
			got++;
		}
	}
	assert_int_equal(got, 1);
	straggler_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_window),
	    cmocka_unit_test(test_continuous),
	    cmocka_unit_test(test_below_ratio),
	    cmocka_unit_test(test_two_and_one),
	    cmocka_unit_test(test_inactive),
	    cmocka_unit_test(test_step_rate),
	    cmocka_unit_test(test_progress),
	    cmocka_unit_test(test_no_motion),
	    cmocka_unit_test(test_common_source),
	    cmocka_unit_test(test_rank_median),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
