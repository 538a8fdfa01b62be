/* test_render.c — {{placeholders}}: values, blanks, defaults, strict and
 * lenient unknown names, text that only looks like a placeholder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
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


/* Runs cmd with shell ("/bin/sh" or "/bin/bash") -c, stderr to
 * /dev/null; returns what it printed (at most size-1 bytes, the rest
 * read and dropped) and puts its wait status in *status. */
static size_t run_with(const char *shell, const char *cmd, char *out,
		       size_t size, int *status)
{
	int fds[2];
	size_t len = 0;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(fds[1], 1);
		dup2(null, 2);
		close(fds[0]);
		execl(shell, shell, "-c", cmd, (char *)NULL);
		_exit(126);
	}
	close(fds[1]);
	for (;;) {
		char buf[4096];
		ssize_t n = read(fds[0], buf, sizeof(buf));

		if (n <= 0)
			break;
		for (ssize_t k = 0; k < n; k++)
			if (len + 1 < size)
				out[len++] = buf[k];
	}
	out[len] = '\0';
	close(fds[0]);
	assert_int_equal(waitpid(pid, status, 0), pid);
	return len;
}

/* Templates where bash reads quotes differently from a plain scan
 * (bash is /bin/sh on many cluster systems): refused, never rendered. */
static void test_shell_bash_contexts(void **state)
{
	(void)state;
	/* $'...': bash reads \' inside it as a quote, so herd's opening '
	 * would close the string and the value would run as code. */
	expect_shell_error("printf x $'a\\'{{v}}'", "$'...' with a backslash");
	expect_shell_error("printf x $'\\t{{v}}'", "$'...' with a backslash");
	/* Arithmetic: bash runs $(...) found in an array subscript of a
	 * value, quotes or not. */
	expect_shell_error("echo $[ {{v}} ]", "arithmetic $[");
	expect_shell_error("(( {{v}} )); echo x", "arithmetic ((");
	expect_shell_error("for ((i = {{v}}; i < 2; i++)); do :; done",
			   "arithmetic ((");
	expect_shell_error("echo ${a[{{v}}]}", "${name[...]}");
	expect_shell_error("echo ${U:{{v}}}", "${name:offset}");
	expect_shell_error("echo ${U: -{{v}}}", "${name:offset}");
	expect_shell_error("echo \"$[{{v}}]\"", "inside double quotes");
	/* A '\' at the very end: bash keeps it after 'SAFE' and drops it
	 * after a value with a newline (the rendering would depend on the
	 * value). */
	expect_shell_error("printf x {{v}}\\", "ends with a '\\'");
	expect_shell_error("printf x {{v}} $'\\'\\", "ends with a '\\'");
	/* Not refused: $'...' without a backslash ends at the same ' for
	 * every shell. */
	{
		const struct render_var v[] = {{"v", "x"}};
		struct herd_err err;

		assert_int_equal(render_shell_check("printf x $'a' {{v}} "
						    "$'{{v}}'",
						    v, 1, NULL, 0, &err),
				 0);
	}
}

/* A simple $(...), ${...}, `...` or $((...)) before a placeholder ends
 * where every shell ends it: the command is not refused (it was, with
 * "cannot tell", for python "${HOME}/train.py" --resume {{checkpoint}}),
 * and the value is still one argument for dash and bash. */
static void test_shell_simple_expansions(void **state)
{
	static const struct {
		const char *tmpl, *want;
	} t[] = {
	    {"printf '<%s>' \"${HOME}t.py\" {{v}}", "</t.py><V>"},
	    {"printf '<%s>' \"$(echo a b)\" \"in {{v}}\"", "<a b><in V>"},
	    {"printf '<%s>' \"$(echo \"a)\" ')')\" {{v}}", "<a) )><V>"},
	    {"printf '<%s>' `echo a` {{v}}", "<a><V>"},
	    {"printf '<%s>' $((1+2)) \"$((3))\" {{v}}", "<3><3><V>"},
	    {"printf '<%s>' \"$(dirname /x/y)\" {{v}} \"${#HOME}\"",
	     "</x><V><1>"},
	    {"printf '<%s>' \"${HOME:-/}\" ${U:-{{v}}} ${U-{{v}}}",
	     "</><V><V>"},
	};
	static const char *const shells[] = {"/bin/sh", "/bin/bash"};
	const char *value = "x;touch INJ;#'\"$(touch INJ)";

	(void)state;
	setenv("HOME", "/", 1);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct herd_err err;
		char *cmd = shell(t[i].tmpl, value, NULL, &err), want[256];
		const char *v;
		size_t k = 0;

		if (!cmd)
			print_error("%s: %s\n", t[i].tmpl, err.text);
		assert_non_null(cmd);
		/* want with V replaced by the value */
		for (const char *w = t[i].want; *w && k + 64 < sizeof(want);
		     w++)
			if (*w == 'V')
				for (v = value; *v; v++)
					want[k++] = *v;
			else
				want[k++] = *w;
		want[k] = '\0';
		for (size_t s = 0; s < 2; s++) {
			char out[512];
			int status;

			run_with(shells[s], cmd, out, sizeof(out), &status);
			if (strcmp(out, want))
				print_error("%s: %s printed <%s>\n", cmd,
					    shells[s], out);
			assert_string_equal(out, want);
		}
		free(cmd);
	}
	assert_int_equal(access("INJ", F_OK), -1);
}

/* resume_args is shell text pasted into launch.command: the scan follows
 * it.  A '#' in it would put a later {{checkpoint}} in a comment, where a
 * newline in the name ends the comment and the rest runs; a trailing '\'
 * would escape herd's opening quote.  validate refuses both. */
static void test_shell_words_scanned(void **state)
{
	const struct render_var v[] = {
	    {"checkpoint", "/c/ckpt-1\ntouch INJ\n"}};
	struct herd_err err;
	char *resume, *cmd;

	(void)state;
	resume = render_shell("--resume {{checkpoint}} # resume", v, 1, NULL,
			      &err);
	assert_non_null(resume);
	cmd = shell("printf '<%s>' {{resume_args}} --out {{v}}",
		    "/c/ckpt-1\ntouch INJ\n", resume, &err);
	if (cmd)
		print_error("rendered <%s>\n", cmd);
	assert_null(cmd);
	assert_non_null(strstr(err.text, "in a # comment"));
	free(resume);
	assert_int_equal(render_shell_check("--resume {{checkpoint}} # c", v,
					    1, NULL, 1, &err),
			 -1);
	assert_non_null(strstr(err.text, "ends in a # comment"));
	assert_int_equal(render_shell_check("--resume {{checkpoint}} \\", v,
					    1, NULL, 1, &err),
			 -1);
	assert_non_null(strstr(err.text, "ends with a '\\'"));
	/* Words ending in '\' at run time: the placeholder after them is
	 * refused (it would follow a '\'). */
	cmd = shell("printf '<%s>' {{resume_args}}{{v}}", "a;touch INJ",
		    "--x \\", &err);
	assert_null(cmd);
	assert_int_equal(access("INJ", F_OK), -1);
}

/* Property: for templates made of shell pieces (quotes, escapes, $'...',
 * expansions, comments, newlines, arithmetic) and placeholders, whatever
 * render_shell accepts gives, under dash and bash, exactly the output of
 * the same template with a harmless value, with that value replaced by
 * the hostile one: the value is literal data wherever it lands.  The
 * refusal depends on the template only. */
static void test_shell_property(void **state)
{
	static const char *const piece[] = {
	    " ",       " ",	  " ",	    "\"",     "\"",	  "'",
	    "'",       "\\",	  "\\\\",   "$",      "#",	  "\n",
	    "a",       "=",	  "{{v}}",  "{{v}}",  "{{v}}",	  "{{w}}",
	    "$'",      "$'\\t",	  "${U:-",  "}",      "\"${HOME}\"", "$(echo x)",
	    "`echo y`", "$((1+2))", "((",     "$[",     "${A[",	  "]",
	    ")",       "$\"",	  "--c=",   "{{v|d}}", "<<",	  ">#",
	    "$'\\'",  "\n((",	  "$[ ",    "${A:",
	    "\"$(echo \"q)\")\"", "$(echo ')')",
	};
	/* The first value is the harmless one. */
	static const char *const values[] = {
	    "SAFE", "x;touch INJ;#", "a'b", "q\"\\$(touch INJ)`touch INJ`",
	    "n\ntouch INJ\n", "'\\''", "", "-n", "\xc3\xa9\xff",
	    "a}b]c)d", "${IFS}$'\\''", "\\", "a[$(touch INJ)]",
	};
	enum { NV = sizeof(values) / sizeof(values[0]) };
	static const char *const shells[] = {"/bin/sh", "/bin/bash"};
	uint32_t seed = 2463534242u;
	int rendered = 0, refused = 0;
	char dir[] = "/tmp/herd-render-XXXXXX", cwd[4096];

	(void)state;
	/* Code a rendering should not run creates INJ here. */
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_non_null(mkdtemp(dir));
	assert_int_equal(chdir(dir), 0);
	setenv("HOME", "/h", 1);
	unsetenv("U");
	for (int t = 0; t < 250; t++) {
		char tmpl[512] = "printf '%s\\001' ", *cmd[NV] = {0};
		char script[65536] = "";
		int n;

		seed ^= seed << 13, seed ^= seed >> 17, seed ^= seed << 5;
		n = 2 + (int)(seed % 7);
		for (int k = 0; k < n; k++) {
			seed ^= seed << 13, seed ^= seed >> 17, seed ^= seed << 5;
			strcat(tmpl, piece[seed % (sizeof(piece) /
						   sizeof(piece[0]))]);
		}
		for (size_t h = 0; h < NV; h++) {
			const struct render_var v[] = {{"v", values[h]},
						       {"w", values[h]}};
			struct herd_err e;
			char *q;

			cmd[h] = render_shell(tmpl, v, 2, NULL, &e);
			if (!cmd[h] != !cmd[0])
				print_error("<%s>: refused for one value only\n",
					    tmpl);
			assert_true(!cmd[h] == !cmd[0]);
			if (!cmd[h])
				continue;
			/* Each rendering on its own, in a subshell (a
			 * syntax error ends that one only), then its
			 * status: OUTPUT \002 STATUS \003. */
			q = render_shell_quote(cmd[h]);
			assert_non_null(q);
			assert_true(strlen(script) + strlen(q) + 64 <
				    sizeof(script));
			strcat(script, "(eval ");
			strcat(script, q);
			strcat(script, "); printf '\\002%d\\003' $?\n");
			free(q);
		}
		if (!cmd[0]) {
			refused++;
			continue;
		}
		rendered++;
		for (size_t s = 0; s < 2; s++) {
			static char out[65536];
			char *rec[NV], *p = out;
			int status;

			run_with(shells[s], script, out, sizeof(out), &status);
			for (size_t h = 0; h < NV; h++) {
				char *end = strchr(p, '\003');

				if (!end)
					print_error("%s: <%s>: output <%s>\n",
						    shells[s], script, out);
				assert_non_null(end);
				*end = '\0';
				rec[h] = p;
				p = end + 1;
			}
			for (size_t h = 1; h < NV; h++) {
				char want[8192];
				size_t k = 0;

				for (const char *c = rec[0]; *c; c++) {
					if (!strncmp(c, "SAFE", 4)) {
						for (const char *q = values[h];
						     *q; q++)
							want[k++] = *q;
						c += 3;
					} else {
						want[k++] = *c;
					}
				}
				want[k] = '\0';
				if (strcmp(rec[h], want))
					print_error("%s: template <%s>\nsafe "
						    "<%s>\nbad <%s>\n",
						    shells[s], tmpl, cmd[0],
						    cmd[h]);
				assert_string_equal(rec[h], want);
			}
		}
		for (size_t h = 0; h < NV; h++)
			free(cmd[h]);
		if (access("INJ", F_OK) == 0)
			print_error("template <%s> ran code\n", tmpl);
		assert_int_equal(access("INJ", F_OK), -1);
	}
	print_message("property: %d templates run with %d values under "
		      "dash and bash, %d refused\n",
		      rendered, NV, refused);
	assert_true(rendered > 150);
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(rmdir(dir), 0);
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
	    cmocka_unit_test(test_shell_bash_contexts),
	    cmocka_unit_test(test_shell_simple_expansions),
	    cmocka_unit_test(test_shell_words_scanned),
	    cmocka_unit_test(test_shell_property),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
