/* test_hostfile.c — every hostfile format read and written, detection,
 * errors with line numbers, round trips. */
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

#include "herd/hostfile.h"

static struct hostfile *parse(const char *text, enum hostfile_format fmt,
			      struct herd_err *err)
{
	herd_err_clear(err);
	return hostfile_parse(text, strlen(text), "hf", fmt, err);
}

/* Parses text, which must fail; checks that the message holds want. */
static void expect_error(const char *text, enum hostfile_format fmt,
			 const char *want)
{
	struct herd_err err;
	struct hostfile *hf = parse(text, fmt, &err);

	if (hf || !strstr(err.text, want))
		print_error("text <%s>: got <%s>, want <%s>\n", text,
			    hf ? "(parsed)" : err.text, want);
	assert_null(hf);
	assert_non_null(strstr(err.text, want));
}

/* Checks hf against "host:slots" pairs joined by spaces. */
static void expect_hosts(const struct hostfile *hf, const char *want)
{
	char got[4096];
	size_t off = 0;

	got[0] = '\0';
	for (size_t i = 0; i < hf->count && off < sizeof(got); i++) {
		int n = snprintf(got + off, sizeof(got) - off, "%s%s:%d",
				 i ? " " : "", hf->entries[i].host,
				 hf->entries[i].slots);
		assert_true(n > 0);
		off += (size_t)n;
	}
	assert_string_equal(got, want);
}

static char *write_str(const struct hostfile *hf, enum hostfile_format fmt,
		       int default_slots)
{
	struct herd_err err;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(hostfile_write(hf, fmt, default_slots, f, &err), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static void test_format_names(void **state)
{
	(void)state;
	for (int f = HOSTFILE_AUTO; f <= HOSTFILE_SLURM; f++)
		assert_int_equal(hostfile_format_parse(hostfile_format_name(f)),
				 f);
	assert_int_equal(hostfile_format_parse("deepspeed"),
			 HOSTFILE_DEEPSPEED);
	assert_int_equal(hostfile_format_parse("DeepSpeed"), -1);
	assert_int_equal(hostfile_format_parse(""), -1);
	assert_int_equal(hostfile_format_parse(NULL), -1);
}

static void test_read_plain(void **state)
{
	struct herd_err err;
	struct hostfile *hf;

	(void)state;
	hf = parse("# nodes\n\nn1\n  n2  # trailing\n\tn3\r\nn4",
		   HOSTFILE_PLAIN, &err);
	assert_non_null(hf);
	expect_hosts(hf, "n1:0 n2:0 n3:0 n4:0");
	assert_int_equal(hf->entries[0].line, 3);
	assert_int_equal(hf->entries[3].line, 6);
	assert_int_equal(hf->format, HOSTFILE_PLAIN);
	hostfile_free(hf);
}

static void test_read_deepspeed(void **state)
{
	struct herd_err err;
	struct hostfile *hf;

	(void)state;
	hf = parse("worker-1 slots=8\nworker-2 slots=4 # half\n",
		   HOSTFILE_DEEPSPEED, &err);
	assert_non_null(hf);
	expect_hosts(hf, "worker-1:8 worker-2:4");
	hostfile_free(hf);
}

static void test_read_openmpi(void **state)
{
	struct herd_err err;
	struct hostfile *hf;

	(void)state;
	hf =
	    parse("a slots=8 max_slots=8\nb\nc slots=2\nd max_slots=6 slots=3\n"
		  "e max-slots=4\n",
		  HOSTFILE_OPENMPI, &err);
	assert_non_null(hf);
	expect_hosts(hf, "a:8 b:0 c:2 d:3 e:0");
	hostfile_free(hf);
}

static void test_read_mpich(void **state)
{
	struct herd_err err;
	struct hostfile *hf;

	(void)state;
	hf = parse("host1:8\nhost2:2\nhost3\n", HOSTFILE_MPICH, &err);
	assert_non_null(hf);
	expect_hosts(hf, "host1:8 host2:2 host3:0");
	hostfile_free(hf);
}

static void test_read_slurm(void **state)
{
	struct herd_err err;
	struct hostfile *hf;

	(void)state;
	hf = parse("n[1-3],m1\n", HOSTFILE_SLURM, &err);
	assert_non_null(hf);
	expect_hosts(hf, "n1:0 n2:0 n3:0 m1:0");
	hostfile_free(hf);

	/* Spanning lines: joined with ','; a break inside brackets or after
	 * ',' continues the expression. */
	hf = parse("# cluster\nn[1-2],\nn[5,\n7]\nm[1-2] x1\n", HOSTFILE_SLURM,
		   &err);
	assert_non_null(hf);
	expect_hosts(hf, "n1:0 n2:0 n5:0 n7:0 m1:0 m2:0 x1:0");
	assert_int_equal(hf->entries[0].line, 2);
	assert_int_equal(hf->entries[3].line, 2);
	assert_int_equal(hf->entries[4].line, 5);
	hostfile_free(hf);
}

static void test_plain_expressions(void **state)
{
	struct herd_err err;
	struct hostfile *hf;

	(void)state;
	hf = parse("a1\nn[01-02]\nb,c\n", HOSTFILE_PLAIN, &err);
	assert_non_null(hf);
	expect_hosts(hf, "a1:0 n01:0 n02:0 b:0 c:0");
	assert_int_equal(hf->entries[2].line, 2);
	hostfile_free(hf);
}

static void test_detect(void **state)
{
	struct {
		const char *text;
		enum hostfile_format want;
	} cases[] = {
	    {"a\nb\n", HOSTFILE_PLAIN},
	    {"", HOSTFILE_PLAIN},
	    {"# only a comment\n", HOSTFILE_PLAIN},
	    {"a slots=2\nb slots=2\n", HOSTFILE_DEEPSPEED},
	    {"a slots=2 max_slots=2\n", HOSTFILE_OPENMPI},
	    {"a slots=2\nb\n", HOSTFILE_OPENMPI},
	    {"a\nb slots=2\n", HOSTFILE_OPENMPI},
	    {"a:4\nb:4\n", HOSTFILE_MPICH},
	    {"a\nb:4\n", HOSTFILE_MPICH},
	    {"n[1-4]\n", HOSTFILE_SLURM},
	    {"a,b\n", HOSTFILE_SLURM},
	    {"# x slots=3\nn1\n", HOSTFILE_PLAIN},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum hostfile_format got =
		    hostfile_detect(cases[i].text, strlen(cases[i].text));

		if (got != cases[i].want)
			print_error("<%s>: got %s\n", cases[i].text,
				    hostfile_format_name(got));
		assert_int_equal(got, cases[i].want);
	}
}

static void test_auto_parse(void **state)
{
	struct herd_err err;
	struct hostfile *hf;

	(void)state;
	hf = parse("a slots=2\nb slots=4\n", HOSTFILE_AUTO, &err);
	assert_non_null(hf);
	assert_int_equal(hf->format, HOSTFILE_DEEPSPEED);
	expect_hosts(hf, "a:2 b:4");
	hostfile_free(hf);

	hf = parse("a:3\nb\n", HOSTFILE_AUTO, &err);
	assert_non_null(hf);
	assert_int_equal(hf->format, HOSTFILE_MPICH);
	expect_hosts(hf, "a:3 b:0");
	hostfile_free(hf);

	hf = parse("n[1-2]\n", HOSTFILE_AUTO, &err);
	assert_non_null(hf);
	assert_int_equal(hf->format, HOSTFILE_SLURM);
	hostfile_free(hf);
}

static void test_errors(void **state)
{
	(void)state;
	expect_error("", HOSTFILE_PLAIN, "no hosts in hf");
	expect_error("# nothing\n\n  \n", HOSTFILE_AUTO, "no hosts in hf");
	expect_error("a slots=8\nb slots=x\n", HOSTFILE_DEEPSPEED,
		     "hf:2: bad slots value 'x'");
	expect_error("a slots=0\n", HOSTFILE_DEEPSPEED,
		     "hf:1: slots must be at least 1, not '0'");
	expect_error("\na slots=-2\n", HOSTFILE_OPENMPI,
		     "hf:2: slots must be at least 1, not '-2'");
	expect_error("a slots=\n", HOSTFILE_DEEPSPEED, "hf:1: missing slots");
	expect_error("a slots=99999999999999999999\n", HOSTFILE_DEEPSPEED,
		     "hf:1: slots value '99999999999999999999' is too large");
	expect_error("a\n", HOSTFILE_DEEPSPEED, "hf:1: expected 'slots=N'");
	expect_error("a slots=2 junk\n", HOSTFILE_DEEPSPEED,
		     "hf:1: unexpected 'junk'");
	expect_error("a cpus=2\n", HOSTFILE_DEEPSPEED,
		     "hf:1: unexpected 'cpus=2'");
	expect_error("a slots=2 foo=1\n", HOSTFILE_OPENMPI,
		     "hf:1: unexpected 'foo=1'");
	expect_error("a slots=2 slots=3\n", HOSTFILE_OPENMPI,
		     "slots given twice");
	expect_error("a slots=4 max_slots=2\n", HOSTFILE_OPENMPI,
		     "hf:1: max_slots=2 is less than slots=4");
	expect_error("slots=4 max_slots=8\n", HOSTFILE_OPENMPI,
		     "hf:1: expected a host name first, found 'slots=4'");
	expect_error("max_slots=8 a\n", HOSTFILE_AUTO,
		     "hf:1: expected a host name first");
	expect_error("a b\n", HOSTFILE_PLAIN, "hf:1: unexpected 'b'");
	expect_error("a b\n", HOSTFILE_AUTO, "hf:1: unexpected 'b'");
	expect_error("a:x\n", HOSTFILE_MPICH, "hf:1: bad slots value 'x'");
	expect_error("a:0\n", HOSTFILE_MPICH, "hf:1: slots must be at least 1");
	expect_error("a:\n", HOSTFILE_MPICH, "hf:1: missing slots value");
	expect_error("a:2 b\n", HOSTFILE_MPICH, "hf:1: unexpected 'b'");
	expect_error("n1\nn2\n\nn1\n", HOSTFILE_PLAIN,
		     "hf:4: host 'n1' listed twice (first on line 1)");
	expect_error("a slots=1\nb slots=1\na slots=2\n", HOSTFILE_AUTO,
		     "hf:3: host 'a' listed twice (first on line 1)");
	expect_error("n[1-3]\nn2\n", HOSTFILE_SLURM,
		     "hf:2: host 'n2' listed twice (first on line 1)");
	expect_error("ho$t\n", HOSTFILE_PLAIN, "hf:1: bad host name 'ho$t'");
	/* The one host name rule of every source. */
	expect_error("ok\n-oProxyCommand=x\n", HOSTFILE_PLAIN,
		     "hf:2: bad host name '-oProxyCommand=x' (it must start "
		     "with a letter or digit)");
	expect_error("ok\n-n1\n", HOSTFILE_PLAIN,
		     "hf:2: bad host name '-n1' (it must start with a letter "
		     "or digit)");
	expect_error("-n1 slots=2\n", HOSTFILE_DEEPSPEED,
		     "hf:1: bad host name '-n1'");
	expect_error("a;b:4\n", HOSTFILE_MPICH, "hf:1: bad host name 'a;b'");
	expect_error("n\xc3\xa9\n", HOSTFILE_PLAIN,
		     "hf:1: bad host name 'n\xc3\xa9' (character 2: expected "
		     "letters, digits, '.', '-' or '_'; ASCII only)");
	expect_error("n[1-2],_x\n", HOSTFILE_SLURM, "bad host name '_x'");
	expect_error("n[1-3\n", HOSTFILE_SLURM, "hf:1: expected ']'");
	/* Found by fuzz_hostfile: read as plain, this host could not be
	 * written as a Slurm hostlist (libslurm saturates the number). */
	expect_error("n1\n66666666666666666666666666666\n", HOSTFILE_PLAIN,
		     "hf:2: bad host name '66666666666666666666666666666' (the "
		     "number it ends in is larger than 18446744073709551614");
}

static void test_host_check(void **state)
{
	static const char *const good[] = {"n1",
					   "node-01",
					   "10.0.0.1",
					   "a_b.example.org",
					   "N",
					   "0",
					   "n18446744073709551614",
					   "n000000000000000000000000001"};
	static const char *const bad[] = {
	    "",
	    "-n",
	    ".n",
	    "_n",
	    "a;b",
	    "$(id)",
	    "`id`",
	    "a b",
	    "a\tb",
	    "a\nb",
	    "n\xc3\xa9",
	    "a/b",
	    "a:b",
	    "a'b",
	    "a\"b",
	    "a=b",
	    "a\\b",
	    "n18446744073709551615",
	    "66666666666666666666666666666",
	};
	struct herd_err err;
	char longest[HOSTFILE_HOST_MAX + 2];

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_int_equal(hostfile_host_check(good[i], "w", &err), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(hostfile_host_check(bad[i], "w", &err), -1);
		assert_int_equal(strncmp(err.text, "w: ", 3), 0);
		/* Never a control byte in the message. */
		for (const char *p = err.text; *p; p++)
			assert_true((unsigned char)*p >= 0x20);
	}
	memset(longest, 'a', sizeof(longest) - 1);
	longest[HOSTFILE_HOST_MAX] = '\0';
	assert_int_equal(hostfile_host_check(longest, "w", &err), 0);
	longest[HOSTFILE_HOST_MAX] = 'a';
	longest[HOSTFILE_HOST_MAX + 1] = '\0';
	assert_int_equal(hostfile_host_check(longest, "w", &err), -1);
}

static void test_nul_and_long_lines(void **state)
{
	struct herd_err err;
	struct hostfile *hf;
	char *big;
	const char nul[] = "a\nb\0c\n";

	(void)state;
	hf = hostfile_parse(nul, sizeof(nul) - 1, "hf", HOSTFILE_PLAIN, &err);
	assert_null(hf);
	assert_string_equal(err.text, "hf:2: unexpected NUL byte");

	big = malloc(HOSTFILE_LINE_MAX + 10);
	assert_non_null(big);
	memset(big, 'a', HOSTFILE_LINE_MAX + 9);
	big[0] = 'x';
	big[1] = '\n';
	big[HOSTFILE_LINE_MAX + 9] = '\0';
	hf = parse(big, HOSTFILE_PLAIN, &err);
	assert_null(hf);
	assert_non_null(strstr(err.text, "hf:2: line longer than"));

	/* A long host name on a line within the limit. */
	memset(big, 'h', 300);
	big[300] = '\0';
	hf = parse(big, HOSTFILE_PLAIN, &err);
	assert_null(hf);
	assert_non_null(strstr(err.text, "hf:1: host name"));
	assert_non_null(strstr(err.text, "longer than 255"));
	free(big);
}

static void test_write(void **state)
{
	struct herd_err err;
	struct hostfile *hf;
	char *s;

	(void)state;
	hf = parse("n1 slots=4\nn2\nn3 slots=2\n", HOSTFILE_OPENMPI, &err);
	assert_non_null(hf);

	s = write_str(hf, HOSTFILE_PLAIN, 1);
	assert_string_equal(s, "n1\nn2\nn3\n");
	free(s);
	s = write_str(hf, HOSTFILE_DEEPSPEED, 8);
	assert_string_equal(s, "n1 slots=4\nn2 slots=8\nn3 slots=2\n");
	free(s);
	s = write_str(hf, HOSTFILE_OPENMPI, 0);
	assert_string_equal(s, "n1 slots=4 max_slots=4\nn2 slots=1 "
			       "max_slots=1\nn3 slots=2 max_slots=2\n");
	free(s);
	s = write_str(hf, HOSTFILE_MPICH, 1);
	assert_string_equal(s, "n1:4\nn2:1\nn3:2\n");
	free(s);
	s = write_str(hf, HOSTFILE_SLURM, 1);
	assert_string_equal(s, "n[1-3]\n");
	free(s);

	assert_int_equal(hostfile_write(hf, HOSTFILE_AUTO, 1, stdout, &err),
			 -1);
	assert_non_null(strstr(err.text, "'auto'"));
	hostfile_free(hf);

	/* An empty list writes nothing in every format. */
	hf = hostfile_new();
	assert_non_null(hf);
	for (int f = HOSTFILE_PLAIN; f <= HOSTFILE_SLURM; f++) {
		s = write_str(hf, f, 1);
		assert_string_equal(s, "");
		free(s);
	}
	hostfile_free(hf);
}

static void test_round_trip(void **state)
{
	const char *src = "gpu-01 slots=8\ngpu-02 slots=8\ngpu-03 slots=4\n"
			  "cpu.a slots=1\nx_1 slots=2\ngpu-10 slots=8\n";
	struct herd_err err;
	struct hostfile *hf;

	(void)state;
	hf = parse(src, HOSTFILE_DEEPSPEED, &err);
	assert_non_null(hf);
	for (int f = HOSTFILE_PLAIN; f <= HOSTFILE_SLURM; f++) {
		char *s = write_str(hf, f, 1);
		struct hostfile *back = parse(s, HOSTFILE_AUTO, &err);

		if (!back)
			print_error("%s: %s\n<%s>\n", hostfile_format_name(f),
				    err.text, s);
		assert_non_null(back);
		assert_int_equal(back->count, hf->count);
		for (size_t i = 0; i < hf->count; i++) {
			assert_string_equal(back->entries[i].host,
					    hf->entries[i].host);
			if (f != HOSTFILE_PLAIN && f != HOSTFILE_SLURM)
				assert_int_equal(back->entries[i].slots,
						 hf->entries[i].slots);
		}
		/* Reading with the named format gives the same as AUTO. */
		hostfile_free(back);
		back = parse(s, f, &err);
		assert_non_null(back);
		assert_int_equal(back->count, hf->count);
		hostfile_free(back);
		free(s);
	}
	hostfile_free(hf);
}

static void test_push_and_duplicates(void **state)
{
	struct herd_err err;
	struct hostfile *hf = hostfile_new();
	size_t a, b;

	(void)state;
	assert_non_null(hf);
	assert_int_equal(hostfile_find_duplicate(hf, &a, &b), 0);
	assert_int_equal(hostfile_push(hf, "x", 0, 0, &err), 0);
	assert_int_equal(hostfile_push(hf, "y", 2, 0, &err), 0);
	assert_int_equal(hostfile_find_duplicate(hf, &a, &b), 0);
	assert_int_equal(hostfile_push(hf, "z", 0, 0, &err), 0);
	assert_int_equal(hostfile_push(hf, "y", 0, 0, &err), 0);
	assert_int_equal(hostfile_push(hf, "x", 0, 0, &err), 0);
	assert_int_equal(hostfile_push(hf, "y", 0, 0, &err), 0);
	/* The second occurrence that comes first wins: y at 3 (of 1). */
	assert_int_equal(hostfile_find_duplicate(hf, &a, &b), 1);
	assert_int_equal(a, 1);
	assert_int_equal(b, 3);
	hostfile_free(hf);
}

static void test_load(void **state)
{
	char path[] = "/tmp/herd-test-hostfile-XXXXXX";
	struct herd_err err;
	struct hostfile *hf;
	const char *text = "n1:2\nn2:2\n";
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	hf = hostfile_load(path, HOSTFILE_AUTO, &err);
	assert_non_null(hf);
	expect_hosts(hf, "n1:2 n2:2");
	hostfile_free(hf);

	fd = open(path, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "n1\nn1 slots=2\n", 14), 14);
	close(fd);
	hf = hostfile_load(path, HOSTFILE_AUTO, &err);
	assert_null(hf);
	assert_non_null(strstr(err.text, path));
	assert_non_null(strstr(err.text, ":2: host 'n1' listed twice"));
	unlink(path);

	hf = hostfile_load(path, HOSTFILE_AUTO, &err);
	assert_null(hf);
	assert_non_null(strstr(err.text, "cannot open hostfile"));
	assert_non_null(strstr(err.text, "No such file"));

	/* A FIFO nobody writes: refused at once, never waited on; a
	 * device, a directory. */
	assert_int_equal(mkfifo(path, 0600), 0);
	hf = hostfile_load(path, HOSTFILE_AUTO, &err);
	assert_null(hf);
	assert_non_null(strstr(err.text, "not a regular file"));
	unlink(path);
	hf = hostfile_load("/dev/zero", HOSTFILE_AUTO, &err);
	assert_null(hf);
	assert_non_null(strstr(err.text, "/dev/zero: not a regular file"));
	hf = hostfile_load("/", HOSTFILE_AUTO, &err);
	assert_null(hf);
	assert_non_null(strstr(err.text, "/: not a regular file"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_format_names),
	    cmocka_unit_test(test_read_plain),
	    cmocka_unit_test(test_read_deepspeed),
	    cmocka_unit_test(test_read_openmpi),
	    cmocka_unit_test(test_read_mpich),
	    cmocka_unit_test(test_read_slurm),
	    cmocka_unit_test(test_plain_expressions),
	    cmocka_unit_test(test_detect),
	    cmocka_unit_test(test_auto_parse),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_host_check),
	    cmocka_unit_test(test_nul_and_long_lines),
	    cmocka_unit_test(test_write),
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_push_and_duplicates),
	    cmocka_unit_test(test_load),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
