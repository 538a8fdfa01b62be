/* test_checkpoint.c — newest complete checkpoint: latest_file, pattern,
 * natural order, markers, skipped reasons. */
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

#include "herd/checkpoint.h"

static char root[] = "/tmp/herd-test-ckpt.XXXXXX";

static void touch(const char *rel)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	f = fopen(p, "w");
	assert_non_null(f);
	fclose(f);
}

static void mkd(const char *rel)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

static int setup(void **state)
{
	(void)state;
	memcpy(root + strlen(root) - 6, "XXXXXX", 6);
	assert_non_null(mkdtemp(root));
	return 0;
}

static int teardown(void **state)
{
	char cmd[600];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_natural_order(void **state)
{
	(void)state;
	assert_true(checkpoint_name_cmp("step_9", "step_10") < 0);
	assert_true(checkpoint_name_cmp("step_000010", "step_9") > 0);
	assert_true(checkpoint_name_cmp("global_step100", "global_step99") > 0);
	assert_int_equal(checkpoint_name_cmp("a1", "a1"), 0);
	assert_true(checkpoint_name_cmp("a", "a1") < 0);
}

static void test_pattern_newest_complete(void **state)
{
	struct checkpoint_result res;
	struct herd_err err;
	char want[512];

	(void)state;
	mkd("step_9");
	touch("step_9/COMPLETE");
	mkd("step_10");
	touch("step_10/COMPLETE");
	mkd("step_11");	/* newest, incomplete: skipped */
	mkd(".tmp-step_12-1");	/* an unfinished atomic save: ignored */
	assert_int_equal(checkpoint_find(root, NULL, "step_*", "COMPLETE",
					 &res, &err), 0);
	snprintf(want, sizeof(want), "%s/step_10", root);
	assert_string_equal(res.path, want);
	assert_string_equal(res.source, "pattern");
	assert_int_equal(res.n_skipped, 1);
	assert_non_null(strstr(res.skipped[0].path, "step_11"));
	assert_string_equal(res.skipped[0].reason, "no COMPLETE marker");
	checkpoint_result_free(&res);
}

static void test_latest_file(void **state)
{
	struct checkpoint_result res;
	struct herd_err err;
	FILE *f;
	char p[512];

	(void)state;
	mkd("global_step5");
	touch("global_step5/COMPLETE");
	mkd("global_step7");
	snprintf(p, sizeof(p), "%s/latest", root);
	f = fopen(p, "w");
	fputs("global_step5\n", f);
	fclose(f);
	assert_int_equal(checkpoint_find(root, "latest", "global_step*",
					 "COMPLETE", &res, &err), 0);
	assert_non_null(res.path);
	assert_non_null(strstr(res.path, "global_step5"));
	assert_string_equal(res.source, "latest_file");
	checkpoint_result_free(&res);

	/* latest names an incomplete one: fall back to the pattern. */
	f = fopen(p, "w");
	fputs("global_step7", f);
	fclose(f);
	assert_int_equal(checkpoint_find(root, "latest", "global_step*",
					 "COMPLETE", &res, &err), 0);
	assert_non_null(strstr(res.path, "global_step5"));
	assert_int_equal(res.n_skipped, 1);
	assert_non_null(strstr(res.skipped[0].path, "global_step7"));
	checkpoint_result_free(&res);
}

static void write_latest(const char *text)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/latest", root);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* DeepSpeed's `latest` holds one name of checkpoint.dir.  Shell text in
 * it is a name like any other (herd quotes it, render_shell); what would
 * leave the directory or break a line is skipped with a reason. */
static void test_latest_hostile(void **state)
{
	static const char *const refused[] = {
	    "../outside", "a/b", "/etc", "..", ".", "two\nlines", "tab\there",
	};
	struct checkpoint_result res;
	struct herd_err err;
	char want[512];

	(void)state;
	mkd("ckpt-2;touch INJ;#");
	mkd("step 3");
	mkd("step_1");
	write_latest(" ckpt-2;touch INJ;#\n");
	assert_int_equal(checkpoint_find(root, "latest", "step_*", NULL, &res,
					 &err), 0);
	snprintf(want, sizeof(want), "%s/ckpt-2;touch INJ;#", root);
	assert_string_equal(res.path, want);
	assert_string_equal(res.source, "latest_file");
	checkpoint_result_free(&res);
	write_latest("step 3");
	assert_int_equal(checkpoint_find(root, "latest", NULL, NULL, &res,
					 &err), 0);
	snprintf(want, sizeof(want), "%s/step 3", root);
	assert_string_equal(res.path, want);
	checkpoint_result_free(&res);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		write_latest(refused[i]);
		assert_int_equal(checkpoint_find(root, "latest", "step_*",
						 NULL, &res, &err), 0);
		snprintf(want, sizeof(want), "%s/step_1", root);
		assert_string_equal(res.path, want);
		assert_string_equal(res.source, "pattern");
		assert_int_equal(res.n_skipped, 1);
		assert_non_null(strstr(res.skipped[0].reason,
				       "latest names no entry"));
		checkpoint_result_free(&res);
	}
}

static void test_none(void **state)
{
	struct checkpoint_result res;
	struct herd_err err;

	(void)state;
	assert_int_equal(checkpoint_find("/nonexistent/herd", "latest",
					 "step_*", "COMPLETE", &res, &err), 0);
	assert_null(res.path);
	checkpoint_result_free(&res);
	assert_int_equal(checkpoint_find(root, NULL, "nomatch_*", NULL, &res,
					 &err), 0);
	assert_null(res.path);
	checkpoint_result_free(&res);
	assert_int_equal(checkpoint_find(root, NULL, "a/b", NULL, &res, &err),
			 -1);
	assert_non_null(strstr(err.text, "without '/'"));
}

/* `latest` as a FIFO (anyone who can write checkpoint.dir can make one):
 * herd neither blocks on it nor reads it; it is skipped with its reason
 * and the pattern decides.  (Before, fopen() waited for a writer
 * forever: the alarm ends the test.) */
static void test_latest_fifo(void **state)
{
	struct checkpoint_result res;
	struct herd_err err;
	char p[512], want[512];

	(void)state;
	mkd("step_1");
	snprintf(p, sizeof(p), "%s/latest", root);
	assert_int_equal(mkfifo(p, 0644), 0);
	alarm(10);
	assert_int_equal(checkpoint_find(root, "latest", "step_*", NULL, &res,
					 &err), 0);
	alarm(0);
	snprintf(want, sizeof(want), "%s/step_1", root);
	assert_string_equal(res.path, want);
	assert_int_equal(res.n_skipped, 1);
	assert_non_null(strstr(res.skipped[0].reason, "not a regular file"));
	checkpoint_result_free(&res);
	unlink(p);
	/* A link to a directory is no tag either. */
	assert_int_equal(symlink(".", p), 0);
	assert_int_equal(checkpoint_find(root, "latest", "step_*", NULL, &res,
					 &err), 0);
	assert_string_equal(res.path, want);
	assert_non_null(strstr(res.skipped[0].reason, "not a regular file"));
	checkpoint_result_free(&res);
}

/* A directory found by the pattern whose name holds a newline is skipped
 * as latest's tag is: it would end a line of herd's messages (and, in a
 * command, a comment). */
static void test_pattern_control(void **state)
{
	struct checkpoint_result res;
	struct herd_err err;
	char want[512];

	(void)state;
	mkd("step_1");
	mkd("step_9\ntouch INJ");
	assert_int_equal(checkpoint_find(root, NULL, "step_*", NULL, &res,
					 &err), 0);
	snprintf(want, sizeof(want), "%s/step_1", root);
	assert_string_equal(res.path, want);
	assert_int_equal(res.n_skipped, 1);
	assert_non_null(strstr(res.skipped[0].reason, "control character"));
	snprintf(want, sizeof(want), "%s/step_9?touch INJ", root);
	assert_string_equal(res.skipped[0].path, want);
	checkpoint_result_free(&res);
}

/* Names that are not UTF-8 cannot go into JSON (the LAUNCH message, the
 * events): skipped with their reason, shown with '?'.  (Before, the
 * attempt sent a LAUNCH without its command and the node was evicted.)
 * In latest, the same. */
static void test_not_utf8(void **state)
{
	static const char *const bad[] = {
	    "step_9\xff", "step_8\xc3", "step_7\xc0\xaf", "step_6\xed\xa0\x80",
	    "step_5\xf4\x90\x80\x80",
	};
	struct checkpoint_result res;
	struct herd_err err;
	char want[512];

	(void)state;
	mkd("step_1");
	mkd("step_2\xc3\xa9");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		mkd(bad[i]);
	assert_int_equal(checkpoint_find(root, NULL, "step_*", NULL, &res,
					 &err), 0);
	snprintf(want, sizeof(want), "%s/step_2\xc3\xa9", root);
	assert_string_equal(res.path, want);
	assert_int_equal(res.n_skipped, sizeof(bad) / sizeof(bad[0]));
	for (size_t i = 0; i < res.n_skipped; i++) {
		assert_non_null(strstr(res.skipped[i].reason, "not valid UTF-8"));
		for (const char *p = res.skipped[i].path; *p; p++)
			assert_true((unsigned char)*p < 0x80);
	}
	checkpoint_result_free(&res);
	write_latest("step_9\xff");
	assert_int_equal(checkpoint_find(root, "latest", NULL, NULL, &res,
					 &err), 0);
	assert_null(res.path);
	assert_int_equal(res.n_skipped, 1);
	assert_non_null(strstr(res.skipped[0].reason, "latest names no entry"));
	checkpoint_result_free(&res);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_natural_order),
		cmocka_unit_test_setup_teardown(test_pattern_newest_complete,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_latest_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_latest_hostile, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_none, setup, teardown),
		cmocka_unit_test_setup_teardown(test_latest_fifo, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_pattern_control, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_not_utf8, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
