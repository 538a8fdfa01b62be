/* test_ratelog.c — a few lines, then one per interval, for what
 * strangers can trigger: the burst at once, the rest counted, the count
 * on the next line or in the summary, tokens back one per interval. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "herd/ratelog.h"

static void test_burst_then_one_per_interval(void **state)
{
	struct ratelog r;
	unsigned long left = 99;
	int lines = 0;

	(void)state;
	ratelog_init(&r, 5, 10000);
	/* 3,000 refusals within 3 s: the first five lines only. */
	for (int i = 0; i < 3000; i++) {
		int hit = ratelog_hit(&r, 1000 + i, &left);

		lines += hit;
		if (hit)
			assert_int_equal(left, 0);
	}
	assert_int_equal(lines, 5);
	assert_int_equal(r.suppressed, 2995);
	/* A token comes back one interval after the first line. */
	assert_int_equal(ratelog_due(&r), 11000);
	assert_false(ratelog_hit(&r, 10999, &left));
	assert_true(ratelog_hit(&r, 11000, &left));
	assert_int_equal(left, 2996);
	assert_false(ratelog_hit(&r, 11001, &left));
	assert_int_equal(ratelog_due(&r), 21000);
	/* A long quiet spell fills the bucket again, never past burst. */
	for (int i = 0; i < 5; i++)
		assert_true(ratelog_hit(&r, 1000000 + i, &left));
	assert_false(ratelog_hit(&r, 1000005, &left));
}

static void test_summary(void **state)
{
	struct ratelog r;
	unsigned long left = 0;

	(void)state;
	ratelog_init(&r, 1, 5000);
	assert_int_equal(ratelog_flush(&r, 0), 0);
	assert_true(ratelog_hit(&r, 100, &left));
	assert_int_equal(left, 0);
	for (int i = 0; i < 7; i++)
		assert_false(ratelog_hit(&r, 200 + i, &left));
	assert_int_equal(ratelog_due(&r), 5100);
	/* The summary at the due time takes that interval's token: what
	 * follows at once is counted again. */
	assert_int_equal(ratelog_flush(&r, 5100), 7);
	assert_int_equal(ratelog_flush(&r, 5100), 0);
	assert_false(ratelog_hit(&r, 5200, &left));
	assert_true(ratelog_hit(&r, 10100, &left));
	assert_int_equal(left, 1);
}

static void test_sparse(void **state)
{
	struct ratelog r;
	unsigned long left = 5;

	(void)state;
	/* Rare events are each logged, with nothing left out. */
	ratelog_init(&r, 1, 1000);
	for (int i = 0; i < 5; i++) {
		assert_true(ratelog_hit(&r, (int64_t)i * 2000, &left));
		assert_int_equal(left, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_burst_then_one_per_interval),
	    cmocka_unit_test(test_summary),
	    cmocka_unit_test(test_sparse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
