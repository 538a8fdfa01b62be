/* test_render.c — {{placeholders}}: values, blanks, defaults, strict and
 * lenient unknown names, text that only looks like a placeholder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "herd/render.h"

static const struct render_var vars[] = {
    {"name", "job1"},
    {"a.b", "dotted"},
    {"empty", ""},
    {"null", NULL},
};

static void expect(const char *tmpl, int strict, const char *want)
{
	struct herd_err err;
	char *got = render_text(tmpl, vars, 4, strict, &err);

	if (!got)
		print_error("tmpl <%s>: %s\n", tmpl, err.text);
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void expect_error(const char *tmpl, const char *want)
{
	struct herd_err err;
	char *got = render_text(tmpl, vars, 4, 1, &err);

	assert_null(got);
	assert_string_equal(err.text, want);
}

static void test_values(void **state)
{
	(void)state;
	expect("", 1, "");
	expect("plain", 1, "plain");
	expect("{{name}}", 1, "job1");
	expect("x-{{ name }}-{{a.b}}-{{empty}}-{{null}}.", 1,
	       "x-job1-dotted--.");
	expect("{{name}}{{name}}", 1, "job1job1");
}

static void test_defaults(void **state)
{
	(void)state;
	expect("{{name|other}}", 1, "job1");
	expect("{{missing|8}}", 1, "8");
	expect("{{ missing | two words }}", 1, "two words");
	expect("{{missing|}}", 1, "");
	expect("{{missing|\"auto\"}}", 1, "\"auto\"");
	expect("{{empty|x}}", 1, "");
	expect("{{missing|a|b}}", 1, "a|b");
	expect("{{missing|{x}}", 1, "{x");
	/* the default ends at the first "}}" of its line */
	expect("{{missing|x}} }}", 1, "x }}");
	expect("{{missing|x\n}}", 0, "{{missing|x\n}}");
	expect("{{missing|x", 0, "{{missing|x");
	expect("{{|x}}", 1, "{{|x}}");
}

static void test_unknown(void **state)
{
	(void)state;
	expect("{{missing}} {{name}}", 0, "{{missing}} job1");
	expect_error("a {{missing}}", "unknown placeholder {{missing}}");
	expect("{{ not a placeholder }} {{", 1, "{{ not a placeholder }} {{");
	expect("{{{{name}}}}", 1, "{{job1}}");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_values),
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_unknown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
