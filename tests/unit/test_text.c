/* test_text.c — herd_text_clean (issue 23): what a terminal could act on
 * becomes '?', other UTF-8 text stays; herd_text_say_lines, the same a
 * line at a time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Another machine's stderr, a chunk at a time: each line prefixed and
 * cleaned, the newlines kept. */
static void say(const char *in, size_t len, const char *want)
{
	char *got = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&got, &n);

	assert_non_null(f);
	herd_text_say_lines(f, "a@n1: ", in, len);
	assert_int_equal(fclose(f), 0);
	assert_string_equal(got, want);
	free(got);
}

static void test_say_lines(void **state)
{
	static const char nul[] = "x\0y\n";

	(void)state;
	say("one\ntwo\n", 8, "a@n1: one\na@n1: two\n");
	say("\x1b]0;pwned\x07\x1b[2Jtail", 18, "a@n1: ?]0;pwned??[2Jtail");
	say("\n\n", 2, "a@n1: \na@n1: \n");
	say(nul, sizeof(nul) - 1, "a@n1: x?y\n");
	say("", 0, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_clean),
	    cmocka_unit_test(test_say_lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
