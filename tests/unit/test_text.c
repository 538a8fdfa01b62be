/* test_text.c — herd_text_clean (issue 23): what a terminal could act on
 * becomes '?', other UTF-8 text stays. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* cmocka needs the headers above first. */
#include <cmocka.h>

#include "herd/text.h"

static void clean(const char *in, const char *want)
{
	char buf[256];

	snprintf(buf, sizeof(buf), "%s", in);
	assert_string_equal(herd_text_clean(buf), want);
}

static void test_clean(void **state)
{
	(void)state;
	clean("step_100 (train.py:7)", "step_100 (train.py:7)");
	clean("innocent\x1b[1A\x1b[2K\rherd: all fine",
	      "innocent?[1A?[2K?herd: all fine");
	clean("\x1b]0;OWNED\x07x.py", "?]0;OWNED?x.py");
	clean("a\tb\nc\x7f", "a?b?c?");
	clean("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80",
	      "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80");
	clean("C1 \xc2\x9b"
	      "2J \xc2\x85",
	      "C1 ??2J ??");
	clean("raw \x9b"
	      "2J \xff \xc3",
	      "raw ?2J ? ?");
	clean("overlong \xc0\xaf \xe0\x80\xaf surrogate \xed\xa0\x80",
	      "overlong ?? ??? surrogate ???");
	assert_null(herd_text_clean(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_clean),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
