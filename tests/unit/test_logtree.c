/* test_logtree.c — the log tree (a new run directory, latest, exclusive
 * creation, refused directories) and log files that count what a full
 * disk (/dev/full) lost. */
#include <errno.h>
#include <fcntl.h>
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

#include "herd/logtree.h"

static char root[] = "/tmp/herd-test-logtree.XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_dir_mode(void **state)
{
	(void)state;
	assert_int_equal(logtree_dir_mode(0600), 0700);
	assert_int_equal(logtree_dir_mode(0640), 0750);
	assert_int_equal(logtree_dir_mode(0644), 0755);
	assert_int_equal(logtree_dir_mode(0604), 0705);
}

static void test_runs(void **state)
{
	struct herd_err err;
	struct logtree *a, *b;
	char dir[128], link[256], target[64], path[512];
	struct stat st;
	ssize_t n;
	int fd;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/runs/job", root);
	a = logtree_open(dir, 0600, &err);
	if (!a)
		print_error("%s\n", err.text);
	assert_non_null(a);
	b = logtree_open(dir, 0600, &err);
	assert_non_null(b);
	assert_string_not_equal(logtree_run_id(a), logtree_run_id(b));
	/* RUN-IDs sort by start time (to the millisecond: a and b may
	 * share one, then only the suffix differs). */
	assert_true(strncmp(logtree_run_id(a), logtree_run_id(b), 19) <= 0);
	snprintf(link, sizeof(link), "%s/latest", dir);
	n = readlink(link, target, sizeof(target) - 1);
	assert_true(n > 0);
	target[n] = '\0';
	assert_string_equal(target, logtree_run_id(b));
	snprintf(path, sizeof(path), "%s/%s", dir, logtree_run_id(a));
	assert_string_equal(logtree_run_dir(a), path);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);

	assert_int_equal(logtree_mkdir(a, "attempt-1", &err), 0);
	assert_int_equal(logtree_mkdir(a, "attempt-1", &err), -1);
	fd = logtree_create(a, "attempt-1/rank-0.log", &err);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	close(fd);
	/* Never opens what is already there. */
	assert_int_equal(logtree_create(a, "attempt-1/rank-0.log", &err), -1);
	snprintf(path, sizeof(path), "%s/%s/attempt-1/rank-1.log", dir,
		 logtree_run_id(a));
	assert_int_equal(symlink("/dev/null", path), 0);
	assert_int_equal(logtree_create(a, "attempt-1/rank-1.log", &err), -1);
	assert_non_null(strstr(err.text, "File exists"));
	logtree_free(a);
	logtree_free(b);
}

static void test_refused(void **state)
{
	struct herd_err err;
	char dir[128], want[1024];

	(void)state;
	assert_null(logtree_open("runs/x", 0600, &err));
	assert_string_equal(err.text, "log.dir runs/x is not absolute");

	snprintf(dir, sizeof(dir), "%s/open", root);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(chmod(dir, 0777), 0);
	assert_null(logtree_open(dir, 0600, &err));
	snprintf(want, sizeof(want),
		 "log.dir: %s is writable by everyone (mode 0777), who could "
		 "plant links in it; run chmod go-w '%s'",
		 dir, dir);
	assert_string_equal(err.text, want);

	/* Below it, not sticky: refused where a name is looked up. */
	snprintf(dir, sizeof(dir), "%s/open/sub", root);
	assert_null(logtree_open(dir, 0600, &err));
	assert_non_null(strstr(err.text, "open is writable by everyone"));

	/* Sticky like /tmp: herd may make its own directory there. */
	snprintf(dir, sizeof(dir), "%s/open", root);
	assert_int_equal(chmod(dir, 01777), 0);
	snprintf(dir, sizeof(dir), "%s/open/sub", root);
	{
		struct logtree *lt = logtree_open(dir, 0640, &err);
		struct stat st;

		assert_non_null(lt);
		assert_int_equal(stat(dir, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0750);
		logtree_free(lt);
	}

	/* latest that herd did not make. */
	snprintf(dir, sizeof(dir), "%s/odd", root);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(want, sizeof(want), "%s/latest", dir);
	assert_int_equal(mkdir(want, 0700), 0);
	assert_null(logtree_open(dir, 0600, &err));
	assert_non_null(strstr(err.text, "latest is not a symlink"));
}

static void test_logfile_full(void **state)
{
	struct logfile *lf;
	int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);

	(void)state;
	assert_true(fd >= 0);
	lf = logfile_new(fd, "/dev/full", 0);
	assert_non_null(lf);
	assert_int_equal(logfile_write(lf, "abc", 3), LOGFILE_FIRST_FAILURE);
	assert_int_equal(logfile_error(lf), ENOSPC);
	assert_int_equal(logfile_write(lf, "de", 2), LOGFILE_LOST);
	assert_int_equal(logfile_lost(lf), 5);
	assert_string_equal(logfile_path(lf), "/dev/full");
	logfile_free(lf);
	logfile_free(NULL);

	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	lf = logfile_new(fd, "/dev/null", 1);
	assert_int_equal(logfile_write(lf, "line\n", 5), LOGFILE_OK);
	assert_int_equal(logfile_lost(lf), 0);
	assert_int_equal(logfile_error(lf), 0);
	logfile_free(lf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dir_mode),
	    cmocka_unit_test(test_runs),
	    cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_logfile_full),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
