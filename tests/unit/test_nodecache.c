/* test_nodecache.c — the remote commands of launcher/transport/ssh/nodecache.c, run
 * here through /bin/sh as a node's login shell would: every argument
 * arrives as one literal word, the environment entry is exported, a
 * program that is missing or not this build is not run (97), an unsafe
 * cache is refused with its reason (98). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "herd/version.h"
#include "launcher/transport/ssh/nodecache.h"

/* A program that prints its arguments, one per line, then its
 * HERD_PROXIED; NUL-free and small. */
static const char fake_prog[] = "#!/bin/sh\n"
				"for a in \"$@\"; do printf '<%s>\\n' \"$a\"; "
				"done\n"
				"printf 'E=%s\\n' \"$HERD_PROXIED\"\n";

struct fixture {
	char dir[64];	  /* the cache: a new 0700 directory in /tmp */
	char src[96];	  /* the program on "this machine" */
	char cached[256]; /* dir/NAME */
	struct nodecache_bin b;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct herd_err err;
	FILE *out;

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/herd-nodecache.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->src, sizeof(f->src), "%s.src", f->dir);
	assert_non_null(out = fopen(f->src, "w"));
	fputs(fake_prog, out);
	fclose(out);
	herd_err_clear(&err);
	assert_int_equal(nodecache_bin_init(&f->b, f->src, "herd", &err), 0);
	snprintf(f->cached, sizeof(f->cached), "%s/%s", f->dir, f->b.name);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", f->dir, f->src);
	if (system(cmd) != 0) {
		/* leave it: /tmp is cleaned anyway */
	}
	free(f);
	return 0;
}

/* Puts the program into the cache as an upload would leave it. */
static void install(struct fixture *f)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && chmod 700 '%s'", f->src,
		 f->cached, f->cached);
	assert_int_equal(system(cmd), 0);
}

/* Runs cmd through /bin/sh (the node's login shell) with output to
 * out (at most len - 1 bytes, NUL-terminated).  Returns its exit
 * status. */
static int run(const char *cmd, char *out, size_t len)
{
	FILE *p = popen(cmd, "r");
	size_t n;
	int st;

	assert_non_null(p);
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	st = pclose(p);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void test_name(void **state)
{
	struct fixture *f = *state;
	char want[64];

	snprintf(want, sizeof(want), "herd-%s-", HERD_VERSION);
	assert_memory_equal(f->b.name, want, strlen(want));
	assert_memory_equal(f->b.name + strlen(want), f->b.sha256, 12);
	assert_int_equal(strlen(f->b.sha256), 64);
	assert_int_equal(f->b.size, (long)strlen(fake_prog));
}

static void test_literal_args(void **state)
{
	struct fixture *f = *state;
	const char *args[] = {"a b",	    "it's", "$(touch /tmp/herd-pwned)",
			      "two\nlines", "",	    "*",
			      "--"};
	char out[1024], *cmd;

	install(f);
	unlink("/tmp/herd-pwned");
	cmd = nodecache_start_command(f->dir, &f->b, "HERD_PROXIED=tok'en",
				      args, sizeof(args) / sizeof(args[0]));
	assert_non_null(cmd);
	assert_int_equal(run(cmd, out, sizeof(out)), 0);
	assert_string_equal(out, "<a b>\n<it's>\n<$(touch /tmp/herd-pwned)>\n"
				 "<two\nlines>\n<>\n<*>\n<-->\nE=tok'en\n");
	assert_int_not_equal(access("/tmp/herd-pwned", F_OK), 0);
	free(cmd);
}

static void test_check_only(void **state)
{
	struct fixture *f = *state;
	char out[256], *cmd;

	cmd = nodecache_start_command(f->dir, &f->b, NULL, NULL, 0);
	assert_non_null(cmd);
	/* not there yet */
	assert_int_equal(run(cmd, out, sizeof(out)), NODECACHE_MISSING);
	install(f);
	assert_int_equal(run(cmd, out, sizeof(out)), 0);
	assert_string_equal(out, ""); /* checked, not run */
	free(cmd);
}

static void test_not_this_build(void **state)
{
	struct fixture *f = *state;
	char out[256], cmd2[1024], *cmd;

	install(f);
	snprintf(cmd2, sizeof(cmd2), "echo 'echo planted' >>'%s'", f->cached);
	assert_int_equal(system(cmd2), 0);
	cmd = nodecache_start_command(f->dir, &f->b, NULL,
				      (const char *[]){"x"}, 1);
	assert_non_null(cmd);
	assert_int_equal(run(cmd, out, sizeof(out)), NODECACHE_MISSING);
	assert_null(strstr(out, "planted"));
	/* a program of another mode is not run either */
	install(f);
	assert_int_equal(chmod(f->cached, 0755), 0);
	assert_int_equal(run(cmd, out, sizeof(out)), NODECACHE_MISSING);
	free(cmd);
}

static void test_unsafe_dir(void **state)
{
	struct fixture *f = *state;
	char out[1024], *cmd, *full = NULL;

	install(f);
	assert_int_equal(chmod(f->dir, 0777), 0);
	cmd = nodecache_start_command(f->dir, &f->b, NULL,
				      (const char *[]){"x"}, 1);
	assert_non_null(cmd);
	/* the reason is the tagged line on stderr */
	assert_true(asprintf(&full, "%s 2>&1", cmd) > 0);
	assert_int_equal(run(full, out, sizeof(out)), NODECACHE_REFUSED);
	assert_non_null(strstr(out, NODECACHE_REASON_TAG "refusing the "
							 "herd-agent cache"));
	assert_non_null(strstr(out, "writable by group/other"));
	assert_null(strstr(out, "E="));
	free(full);
	free(cmd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_name, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_literal_args, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_check_only, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_not_this_build, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_unsafe_dir, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
