/* test_render.c — {{placeholders}}: values, blanks, defaults, strict and
 * lenient unknown names, text that only looks like a placeholder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

/* ---- render_shell: every value one literal argument ---------------- */

static const char *const hostile[] = {
    "ckpt-2;touch INJ;#",
    "step 2",
    "it's",
    "a'b\"c\\d$(touch INJ)`touch INJ`$HOME*",
    "x\ntouch INJ",
    "",
    "-n",
};

static char *shell(const char *tmpl, const char *value, const char *words,
		   struct herd_err *err)
{
	const struct render_var v[] = {
	    {"v", value}, {"resume_args", words ? words : ""}};

	return render_shell(tmpl, v, 2, "resume_args", err);
}

/* Runs cmd with /bin/sh and returns what it printed (at most 4 KiB). */
static char *run_sh(const char *cmd)
{
	static char out[4096];
	FILE *f = popen(cmd, "r");
	size_t n;

	assert_non_null(f);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	assert_int_equal(pclose(f), 0);
	return out;
}

static void test_shell_quote(void **state)
{
	char *q;

	(void)state;
	q = render_shell_quote("a'b");
	assert_string_equal(q, "'a'\\''b'");
	free(q);
	q = render_shell_quote("");
	assert_string_equal(q, "''");
	free(q);
}

/* Each hostile value, placed bare, inside "..." and inside '...', reaches
 * printf as exactly one argument, byte for byte, and runs nothing. */
static void test_shell_one_argument(void **state)
{
	static const struct {
		const char *tmpl, *pre, *post;
	} tmpls[] = {
	    {"printf '<%s>' {{v}}", "", ""},
	    {"printf '<%s>' \"{{v}}\"", "", ""},
	    {"printf '<%s>' '{{v}}'", "", ""},
	    {"printf '<%s>' \"pre {{v}} $HOME\"", "pre ", " /"},
	    {"printf '<%s>' 'pre {{v}}'\"\"", "pre ", ""},
	    {"printf '<%s>' {{v|unused}}", "", ""},
	};

	(void)state;
	setenv("HOME", "/", 1);
	for (size_t t = 0; t < sizeof(tmpls) / sizeof(tmpls[0]); t++) {
		for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]);
		     i++) {
			struct herd_err err;
			char want[256], *cmd;

			cmd = shell(tmpls[t].tmpl, hostile[i], NULL, &err);
			if (!cmd)
				print_error("%s: %s\n", tmpls[t].tmpl,
					    err.text);
			assert_non_null(cmd);
			snprintf(want, sizeof(want), "<%s%s%s>", tmpls[t].pre,
				 hostile[i], tmpls[t].post);
			assert_string_equal(run_sh(cmd), want);
			free(cmd);
		}
	}
	assert_int_equal(access("INJ", F_OK), -1);
}

/* resume_args: rendered with the value quoted, then pasted as words. */
static void test_shell_words(void **state)
{
	const struct render_var v[] = {{"checkpoint", "/c/ckpt-2;touch INJ;#"}};
	struct herd_err err;
	char *resume, *cmd;

	(void)state;
	resume = render_shell("--resume {{checkpoint}}", v, 1, NULL, &err);
	assert_non_null(resume);
	assert_string_equal(resume, "--resume '/c/ckpt-2;touch INJ;#'");
	cmd = shell("printf '<%s>' {{resume_args}} end", "", resume, &err);
	assert_non_null(cmd);
	assert_string_equal(run_sh(cmd),
			    "<--resume></c/ckpt-2;touch INJ;#><end>");
	free(cmd);
	free(resume);
	/* No checkpoint: nothing at all. */
	cmd = shell("printf '<%s>' x {{resume_args}}", "", "", &err);
	assert_string_equal(run_sh(cmd), "<x>");
	free(cmd);
	assert_int_equal(access("INJ", F_OK), -1);
}

static void expect_shell_error(const char *tmpl, const char *want)
{
	struct herd_err err;
	char *got = shell(tmpl, "v", NULL, &err);

	if (got)
		print_error("tmpl <%s> rendered <%s>\n", tmpl, got);
	assert_null(got);
	if (!strstr(err.text, want))
		print_error("tmpl <%s>: %s\n", tmpl, err.text);
	assert_non_null(strstr(err.text, want));
}

/* Where a scan cannot tell the quoting, the template is refused. */
static void test_shell_refused(void **state)
{
	struct herd_err err;
	const struct render_var v[] = {{"v", "x"}};

	(void)state;
	expect_shell_error("echo \\{{v}}", "character 7: {{v}} follows a '\\'");
	expect_shell_error("echo \"\\{{v}}\"", "follows a '\\'");
	expect_shell_error("echo ${{v}}", "follows a '$'");
	expect_shell_error("echo `echo {{v}}`", "after a `");
	expect_shell_error("echo \"$(echo \"{{v}}\")\"", "after a $(");
	expect_shell_error("echo \"${X:-{{v}}}\"", "after a $(");
	expect_shell_error("cat <<EOF\n{{v}}\nEOF", "here-document");
	expect_shell_error("echo $(( {{v}} + 1 ))", "arithmetic");
	expect_shell_error("run # {{v}}", "in a # comment");
	expect_shell_error("echo \"{{resume_args}}\"", "shell words");
	expect_shell_error("echo '{{resume_args}}'", "shell words");
	/* Not refused: a comment ends at the line's end, '#' inside a word
	 * starts none, unknown names are kept verbatim. */
	assert_int_equal(render_shell_check("run # c\necho {{v}} a#b {{v}}",
					    v, 1, NULL, 0, &err),
			 0);
	assert_int_equal(render_shell_check("echo `x` {{unknown}}", v, 1,
					    NULL, 0, &err),
			 0);
	/* resume_args is pasted into the command: quotes must balance. */
	assert_int_equal(render_shell_check("--resume '{{v}}", v, 1, NULL, 1,
					    &err),
			 -1);
	assert_string_equal(err.text, "the text ends inside single quotes");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_values),
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_unknown),
	    cmocka_unit_test(test_shell_quote),
	    cmocka_unit_test(test_shell_one_argument),
	    cmocka_unit_test(test_shell_words),
	    cmocka_unit_test(test_shell_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
