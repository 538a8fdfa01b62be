/* test_suggest.c — unit tests of lib/core/suggest.c: the edit distance and
 * the nearest known word ("did you mean"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "herd/suggest.h"

static void test_distance(void **state)
{
	(void)state;
	assert_int_equal(suggest_distance("", ""), 0);
	assert_int_equal(suggest_distance("status", "status"), 0);
	assert_int_equal(suggest_distance("", "abc"), 3);
	assert_int_equal(suggest_distance("abc", ""), 3);
	/* A swap of neighbours is one edit (Levenshtein would say 2). */
	assert_int_equal(suggest_distance("stauts", "status"), 1);
	assert_int_equal(suggest_distance("detatch", "detach"), 1);
	assert_int_equal(suggest_distance("stesp", "steps"), 1);
	assert_int_equal(suggest_distance("kitten", "sitting"), 3);
	assert_int_equal(suggest_distance("flaw", "lawn"), 2);
	/* Optimal string alignment: "ca" -> "abc" is 3 (no edit twice). */
	assert_int_equal(suggest_distance("ca", "abc"), 3);
}

static void test_too_long(void **state)
{
	char big[SUGGEST_WORD_MAX + 2];

	(void)state;
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(suggest_distance(big, "a"), SIZE_MAX);
	assert_int_equal(suggest_distance("a", big), SIZE_MAX);
	big[SUGGEST_WORD_MAX] = '\0';
	assert_int_equal(suggest_distance(big, big), 0);
}

static void test_nearest(void **state)
{
	static const char *const cmds[] = {"validate", "run",	 "status",
					   "stop",     "sbatch", NULL,
					   "top",      "report", "list"};
	static const char *const opts[] = {"--dry-run", "-v", "--detach",
					   "--resume", "--help"};
	size_t n = sizeof(cmds) / sizeof(cmds[0]);

	(void)state;
	assert_string_equal(suggest_nearest("stauts", cmds, n), "status");
	assert_string_equal(suggest_nearest("stat", cmds, n), "status");
	assert_string_equal(suggest_nearest("valdiate", cmds, n), "validate");
	assert_string_equal(suggest_nearest("lsit", cmds, n), "list");
	assert_string_equal(suggest_nearest("--detatch", opts, 5), "--detach");
	assert_string_equal(suggest_nearest("--dryrun", opts, 5), "--dry-run");
	/* Nothing near: no guess. */
	assert_null(suggest_nearest("frobnicate", cmds, n));
	assert_null(suggest_nearest("x", cmds, n));
	assert_null(suggest_nearest("-x", opts, 5));
	assert_null(suggest_nearest("stauts", cmds, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_distance),
	    cmocka_unit_test(test_too_long),
	    cmocka_unit_test(test_nearest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
