/* test_failcost.c — what a failure cost, from events (failcost.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "herd/failcost.h"

static void feed(struct failcosts *fc, const char *line)
{
	json_t *o = json_loads(line, 0, NULL);

	assert_non_null(o);
	failcost_event(fc, json_string_value(json_object_get(o, "event")), o,
		       (int64_t)json_integer_value(json_object_get(o, "t")));
	json_decref(o);
}

/* A node lost, a restart from step_50 with a peer restore; then a node
 * lost with the survivors kept; then a rank failure the job ends on. */
static void test_costs(void **state)
{
	struct failcosts fc = {0};
	double t[] = {1000, 59000, 70000, 119000}, v[] = {40, 58, 60, 90};
	struct failcost_total tot;
	char b[256];

	(void)state;
	feed(&fc, "{\"t\":500,\"event\":\"node_failed\",\"host\":\"x\",\"attempt\":0}");
	assert_int_equal(fc.n, 0);
	feed(&fc, "{\"t\":60000,\"event\":\"node_failed\",\"host\":\"n2\",\"reason\":\"gone\",\"attempt\":1,\"silent_ms\":120}");
	feed(&fc, "{\"t\":60001,\"event\":\"node_failed\",\"host\":\"n4\",\"attempt\":1,\"silent_ms\":9}");
	feed(&fc, "{\"t\":60010,\"event\":\"attempt_end\",\"attempt\":1,\"status\":1}");
	feed(&fc, "{\"t\":62000,\"event\":\"attempt_start\",\"attempt\":2,\"checkpoint\":\"/c/step_00000050/\"}");
	feed(&fc, "{\"t\":62100,\"event\":\"checkpoint_restored\",\"rank\":0,\"step\":50,\"tier\":\"disk\",\"ms\":300}");
	feed(&fc, "{\"t\":62200,\"event\":\"checkpoint_restored\",\"rank\":1,\"step\":50,\"tier\":\"peer\",\"ms\":700}");
	feed(&fc, "{\"t\":120000,\"event\":\"node_failed\",\"host\":\"n1\",\"attempt\":2,\"silent_ms\":3000}");
	feed(&fc, "{\"t\":120900,\"event\":\"rejoin\",\"generation\":1,\"ms\":900,\"fell_back\":false}");
	feed(&fc, "{\"t\":130000,\"event\":\"attempt_end\",\"attempt\":2,\"status\":7,\"reason\":\"rank 1 exited 7\"}");
	feed(&fc, "{\"t\":130001,\"event\":\"job_end\",\"status\":7}");
	failcost_steps(&fc, t, v, 4);
	assert_int_equal(fc.n, 3);
	assert_string_equal(fc.v[0].hosts, "n2,n4");
	assert_int_equal(fc.v[0].detect_ms, 120);
	assert_int_equal(fc.v[0].how, FAILCOST_RESTART);
	assert_int_equal(fc.v[0].recover_ms, 2000);
	assert_int_equal(fc.v[0].restore_ms, 700);
	assert_string_equal(fc.v[0].restore_tier, "peer");
	assert_int_equal(fc.v[0].step_before, 58);
	assert_int_equal(fc.v[0].step_restored, 50);
	assert_int_equal(fc.v[0].steps_redone, 8);
	assert_string_equal(failcost_format(&fc.v[0], b, sizeof(b)),
			    "detect 0.12 s, restart 2.00 s, restore 0.70 s "
			    "(peer), 8 steps redone");
	assert_int_equal(fc.v[1].how, FAILCOST_REJOIN);
	assert_int_equal(fc.v[1].recover_ms, 900);
	assert_int_equal(fc.v[1].steps_redone, 0);
	assert_null(fc.v[2].hosts);
	assert_int_equal(fc.v[2].how, FAILCOST_ENDED);
	assert_string_equal(fc.v[2].reason, "rank 1 exited 7");
	tot = failcost_total(&fc);
	assert_int_equal(tot.n, 2);
	assert_int_equal(tot.recover_ms, 1450);
	assert_int_equal(tot.restore_ms, 700);
	assert_int_equal(tot.steps_redone, 4);
	{
		json_t *j = failcost_json(&fc);

		assert_int_equal(json_array_size(j), 3);
		assert_string_equal(json_string_value(json_object_get(
					json_array_get(j, 1), "how")),
				    "rejoin");
		assert_null(json_object_get(json_array_get(j, 1),
					    "restore_ms"));
		json_decref(j);
	}
	failcost_free(&fc);
}

/* A restart without a checkpoint starts from step 0: every step is
 * redone.  The bound keeps the newest failures. */
static void test_scratch_and_bound(void **state)
{
	struct failcosts fc = {0};
	double t[] = {1000}, v[] = {30};
	char line[256];

	(void)state;
	feed(&fc, "{\"t\":2000,\"event\":\"node_failed\",\"host\":\"n2\",\"attempt\":1}");
	feed(&fc, "{\"t\":2500,\"event\":\"attempt_start\",\"attempt\":2}");
	failcost_steps(&fc, t, v, 1);
	assert_int_equal(fc.v[0].step_restored, 0);
	assert_int_equal(fc.v[0].steps_redone, 30);
	for (int i = 0; i < FAILCOST_MAX + 5; i++) {
		snprintf(line, sizeof(line),
			 "{\"t\":%d,\"event\":\"node_failed\",\"host\":\"h\","
			 "\"attempt\":%d}", 3000 + 2 * i, i + 2);
		feed(&fc, line);
		snprintf(line, sizeof(line),
			 "{\"t\":%d,\"event\":\"attempt_start\",\"attempt\":%d}",
			 3001 + 2 * i, i + 3);
		feed(&fc, line);
	}
	assert_int_equal(fc.n, FAILCOST_MAX);
	assert_int_equal(fc.dropped, 6);
	assert_int_equal(fc.v[fc.n - 1].attempt, FAILCOST_MAX + 6);
	failcost_free(&fc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_costs),
		cmocka_unit_test(test_scratch_and_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
