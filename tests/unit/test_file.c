/* test_file.c — file.h: reads with a limit, writes relative to a
 * directory fd that replace atomically and never follow a link, and
 * directories opened only when no one else controls them. */
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

#include "herd/file.h"

/* A fresh private directory and its fd, for each test. */
struct tdir {
	char path[64];
	int fd;
};

static int setup(void **state)
{
	struct tdir *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	snprintf(t->path, sizeof(t->path), "/tmp/test_file.XXXXXX");
	assert_non_null(mkdtemp(t->path));
	t->fd = open(t->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(t->fd >= 0);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct tdir *t = *state;
	char cmd[128];

	close(t->fd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->path);
	assert_int_equal(system(cmd), 0);
	free(t);
	return 0;
}

/* How many entries t's directory holds (dot files too). */
static int entries(const struct tdir *t)
{
	char cmd[128];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", t->path);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_int_equal(fscanf(p, "%d", &n), 1);
	pclose(p);
	return n;
}

static void test_write_read(void **state)
{
	struct tdir *t = *state;
	struct stat st;
	size_t len = 0;
	char *buf;

	assert_int_equal(file_write_at(t->fd, "a", "hello\n", 6, 0640), 0);
	assert_int_equal(fstatat(t->fd, "a", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0640);
	buf = file_read_at(t->fd, "a", 64, &len);
	assert_non_null(buf);
	assert_int_equal(len, 6);
	assert_string_equal(buf, "hello\n");
	free(buf);
	/* replaced whole; no temporary left */
	assert_int_equal(file_write_at(t->fd, "a", "x", 1, 0600), 0);
	buf = file_read_at(t->fd, "a", 64, &len);
	assert_non_null(buf);
	assert_string_equal(buf, "x");
	free(buf);
	assert_int_equal(entries(t), 1);
	/* the limit */
	errno = 0;
	assert_null(file_read_at(t->fd, "a", 0, &len));
	assert_int_equal(errno, EFBIG);
}

/* A link at the name is replaced by the file; its target is untouched. */
static void test_write_replaces_link(void **state)
{
	struct tdir *t = *state;
	struct stat st;
	size_t len = 0;
	char *buf;

	assert_int_equal(file_write_at(t->fd, "target", "keep", 4, 0600), 0);
	assert_int_equal(symlinkat("target", t->fd, "link"), 0);
	errno = 0;
	assert_null(file_read_at(t->fd, "link", 64, &len));
	assert_int_equal(errno, ELOOP);
	assert_int_equal(file_write_at(t->fd, "link", "new", 3, 0600), 0);
	assert_int_equal(fstatat(t->fd, "link", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(S_ISREG(st.st_mode));
	buf = file_read_at(t->fd, "target", 64, &len);
	assert_non_null(buf);
	assert_string_equal(buf, "keep");
	free(buf);
}

/* A link planted at the temporary's name is not written through: the
 * write fails and the link's target stays as it was. */
static void test_write_refuses_planted_tmp(void **state)
{
	struct tdir *t = *state;
	char tmp[64];
	size_t len = 0;
	char *buf;

	assert_int_equal(file_write_at(t->fd, "target", "keep", 4, 0600), 0);
	snprintf(tmp, sizeof(tmp), ".f.herd-%ld", (long)getpid());
	assert_int_equal(symlinkat("target", t->fd, tmp), 0);
	errno = 0;
	assert_int_equal(file_write_at(t->fd, "f", "evil", 4, 0600), -1);
	assert_int_equal(errno, EEXIST);
	buf = file_read_at(t->fd, "target", 64, &len);
	assert_non_null(buf);
	assert_string_equal(buf, "keep");
	free(buf);
}

static void test_dir_open(void **state)
{
	struct tdir *t = *state;
	enum file_dir_status status;
	struct stat st;
	int fd;

	/* made when missing, with the mode given (umask permitting) */
	fd = file_dir_open(t->fd, "d", 0700, &st, &status);
	assert_true(fd >= 0);
	assert_int_equal(status, FILE_DIR_OK);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(file_write_at(fd, "in", "1", 1, 0600), 0);
	close(fd);
	/* opened again as it is */
	fd = file_dir_open(t->fd, "d", 0700, &st, &status);
	assert_true(fd >= 0);
	close(fd);
	/* group-writable: refused */
	assert_int_equal(fchmodat(t->fd, "d", 0770, 0), 0);
	assert_int_equal(file_dir_open(t->fd, "d", 0700, &st, &status), -1);
	assert_int_equal(status, FILE_DIR_WRITABLE);
	assert_int_equal(st.st_mode & 07777, 0770);
	/* a link to a directory: refused, not followed */
	assert_int_equal(symlinkat("d", t->fd, "l"), 0);
	assert_int_equal(file_dir_open(t->fd, "l", 0700, &st, &status), -1);
	assert_int_equal(status, FILE_DIR_LINK);
	/* a file */
	assert_int_equal(file_write_at(t->fd, "f", "", 0, 0600), 0);
	assert_int_equal(file_dir_open(t->fd, "f", 0700, &st, &status), -1);
	assert_int_equal(status, FILE_DIR_NOT_DIR);
	/* cannot be made */
	assert_int_equal(file_dir_open(t->fd, "no/such", 0700, &st, &status),
			 -1);
	assert_int_equal(status, FILE_DIR_MAKE_FAILED);
}

/* A directory of another user (root's /) is refused as not owned, unless
 * the test itself runs as root. */
static void test_dir_not_owned(void **state)
{
	enum file_dir_status status;
	struct stat st;
	int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int fd;

	(void)state;
	assert_true(root >= 0);
	fd = file_dir_open(root, "usr", 0700, &st, &status);
	if (geteuid() == 0) {
		assert_true(fd >= 0);
		close(fd);
	} else {
		assert_int_equal(fd, -1);
		assert_int_equal(status, FILE_DIR_NOT_OWNED);
	}
	close(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_write_read, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_write_replaces_link, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_write_refuses_planted_tmp,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dir_open, setup, teardown),
	    cmocka_unit_test(test_dir_not_owned),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
