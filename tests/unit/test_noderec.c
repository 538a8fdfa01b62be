/* test_noderec.c — the node record (issue 14): failures recorded per
 * host, counted within the window, aged out, bounded, the quarantine
 * rule; the file: 0700 directory and 0600 file, locked read-modify-write
 * that loses nothing between processes, corrupt files refused with a
 * clear error, directories of another owner or open mode refused. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "herd/noderec.h"

#define HOUR (3600L * 1000)
#define DAY (24 * HOUR)
#define T0 ((int64_t)1764585600000) /* 2025-12-01 10:40 UTC */

static char root[] = "/tmp/herd-test-noderec.XXXXXX";
static char state[256], nodes[300], herd[300];

static int setup(void **s)
{
	(void)s;
	if (!mkdtemp(root))
		return -1;
	snprintf(state, sizeof(state), "%s/state", root);
	snprintf(herd, sizeof(herd), "%s/herd", state);
	snprintf(nodes, sizeof(nodes), "%s/herd/nodes", state);
	setenv("XDG_STATE_HOME", state, 1);
	return 0;
}

static int teardown(void **s)
{
	char cmd[128];

	(void)s;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

/* Every test starts without a record. */
static int fresh(void **s)
{
	char cmd[600];

	(void)s;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", state);
	return system(cmd) == 0 ? 0 : -1;
}

static void note(const char *job, const char *host, int64_t t,
		 const char *reason)
{
	struct herd_err err;

	herd_err_clear(&err);
	if (noderec_note(job, host, t, "failed", reason, "run-1", 3, DAY,
			 &err) < 0)
		fail_msg("noderec_note: %s", err.text);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	assert_int_equal(chmod(path, mode), 0);
}

/* In memory: add, count in the window, the rule, prune. */
static void test_rule(void **s)
{
	struct noderec *r = noderec_new();
	const struct noderec_failure *last;
	struct noderec_host *h;

	(void)s;
	assert_non_null(r);
	assert_null(noderec_find(r, "n1"));
	assert_int_equal(noderec_add(r, "n1", T0, "failed", "crash 1", NULL),
			 0);
	assert_int_equal(
	    noderec_add(r, "n1", T0 + HOUR, "unhealthy", "disk full", "r2"), 0);
	assert_non_null(h = noderec_find(r, "n1"));
	assert_int_equal(h->n, 2);
	/* Both in the window; one quarantine_after 3 is not reached. */
	assert_int_equal(noderec_recent(h, T0 + 2 * HOUR, DAY, &last), 2);
	assert_string_equal(last->reason, "disk full");
	assert_int_equal(noderec_until(h, T0 + 2 * HOUR, 3, DAY), 0);
	/* quarantine_after 2: until the older of the two is a day old. */
	assert_true(noderec_until(h, T0 + 2 * HOUR, 2, DAY) == T0 + DAY);
	/* quarantine_after 0: never. */
	assert_int_equal(noderec_until(h, T0 + 2 * HOUR, 0, DAY), 0);
	/* An out-of-order failure (another run's clock) is sorted in. */
	assert_int_equal(
	    noderec_add(r, "n1", T0 + HOUR / 2, "straggler", "slow", NULL), 0);
	assert_string_equal(h->f[1].kind, "straggler");
	assert_true(noderec_until(h, T0 + 2 * HOUR, 3, DAY) == T0 + DAY);
	/* quarantine_after 2 with three: ends when the middle one ages. */
	assert_true(noderec_until(h, T0 + 2 * HOUR, 2, DAY) ==
		    T0 + HOUR / 2 + DAY);
	/* Aging out: a day after the first, two are left in the window. */
	assert_int_equal(noderec_recent(h, T0 + DAY, DAY, NULL), 2);
	assert_int_equal(noderec_until(h, T0 + DAY, 3, DAY), 0);
	assert_int_equal(noderec_recent(h, T0 + 2 * DAY, DAY, &last), 0);
	assert_null(last);
	noderec_prune(r, T0 + DAY + HOUR / 2, DAY);
	assert_int_equal(h->n, 1);
	noderec_prune(r, T0 + 2 * DAY, DAY);
	assert_int_equal(r->n, 0);
	assert_int_equal(noderec_remove(r, "n1"), -1);
	/* Bad arguments. */
	assert_int_equal(noderec_add(r, "", T0, "failed", "x", NULL), -1);
	assert_int_equal(noderec_add(r, "n1", T0, NULL, "x", NULL), -1);
	noderec_free(r);
	noderec_free(NULL);
}

/* Bounded: the last NODEREC_KEEP failures, reasons cut, hosts capped. */
static void test_bounded(void **s)
{
	struct noderec *r = noderec_new(), *again = NULL;
	struct noderec_host *h;
	struct herd_err err;
	char reason[1000], *text;

	(void)s;
	herd_err_clear(&err);
	memset(reason, 'x', sizeof(reason) - 1);
	reason[sizeof(reason) - 1] = '\0';
	reason[5] = '\n'; /* a control character: a space */
	for (int i = 0; i < NODEREC_KEEP + 10; i++)
		assert_int_equal(noderec_add(r, "n1", T0 + i, "failed", reason,
					     NULL),
				 0);
	h = noderec_find(r, "n1");
	assert_int_equal(h->n, NODEREC_KEEP);
	assert_true(h->f[0].t_ms == T0 + 10);
	assert_int_equal(strlen(h->f[0].reason), NODEREC_REASON_MAX);
	assert_int_equal(h->f[0].reason[5], ' ');
	for (int i = 0; i < NODEREC_HOSTS_MAX + 5; i++) {
		char host[32];

		snprintf(host, sizeof(host), "h%d", i);
		assert_int_equal(noderec_add(r, host, T0 + 100 + i, "failed",
					     "x", NULL),
				 0);
	}
	assert_int_equal(r->n, NODEREC_HOSTS_MAX);
	/* n1's last failure was the oldest: it went first. */
	assert_null(noderec_find(r, "n1"));
	assert_null(noderec_find(r, "h4"));
	assert_non_null(noderec_find(r, "h5"));
	/* What it prints parses back. */
	assert_non_null(text = noderec_json(r));
	assert_true(strlen(text) < NODEREC_FILE_MAX);
	assert_int_equal(noderec_parse(text, strlen(text), &again, &err), 0);
	assert_int_equal(again->n, NODEREC_HOSTS_MAX);
	free(text);
	noderec_free(again);
	noderec_free(r);
}

/* Parsing refuses what is not a record, with words. */
static void test_parse(void **s)
{
	static const char *const bad[] = {
	    "",
	    "[]",
	    "{",
	    "{\"version\":1,\"quarantine_after\":3,\"quarantine_for_ms\":1}",
	    "{\"version\":2,\"quarantine_after\":3,\"quarantine_for_ms\":1,"
	    "\"hosts\":{}}",
	    "{\"version\":1,\"quarantine_after\":-1,\"quarantine_for_ms\":1,"
	    "\"hosts\":{}}",
	    "{\"version\":1,\"quarantine_after\":3,\"quarantine_for_ms\":1,"
	    "\"hosts\":{},\"extra\":1}",
	    "{\"version\":1,\"quarantine_after\":3,\"quarantine_for_ms\":1,"
	    "\"hosts\":{\"n1\":[]}}",
	    "{\"version\":1,\"quarantine_after\":3,\"quarantine_for_ms\":1,"
	    "\"hosts\":{\"n1\":{\"failures\":[{\"t\":1,\"kind\":\"bad\","
	    "\"reason\":\"r\"}]}}}",
	    "{\"version\":1,\"quarantine_after\":3,\"quarantine_for_ms\":1,"
	    "\"hosts\":{\"n1\":{\"failures\":[{\"t\":\"1\",\"kind\":"
	    "\"failed\",\"reason\":\"r\"}]}}}",
	    "{\"version\":1,\"quarantine_after\":3,\"quarantine_for_ms\":1,"
	    "\"hosts\":{\"n1\":{\"failures\":[{\"t\":2,\"kind\":\"failed\","
	    "\"reason\":\"r\"},{\"t\":1,\"kind\":\"failed\",\"reason\":"
	    "\"r\"}]}}}",
	    "{\"version\":1,\"quarantine_after\":3,\"quarantine_for_ms\":1,"
	    "\"hosts\":{\"n\\u0001\":{\"failures\":[]}}}",
	    "{\"version\":1,\"quarantine_after\":3,\"quarantine_for_ms\":1,"
	    "\"hosts\":{\"n1\":{\"failures\":[{\"t\":1,\"kind\":\"failed\","
	    "\"reason\":\"a\\nb\"}]}}}",
	};
	const char *good =
	    "{\"version\":1,\"quarantine_after\":2,\"quarantine_for_ms\":5000,"
	    "\"hosts\":{\"n1\":{\"failures\":[{\"t\":1,\"kind\":\"failed\","
	    "\"reason\":\"r\",\"run\":null},{\"t\":2,\"kind\":\"straggler\","
	    "\"reason\":\"slow\",\"run\":\"x\"}]},\"n2\":{\"failures\":[]}}}";
	struct noderec *r = NULL;
	struct herd_err err;

	(void)s;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		herd_err_clear(&err);
		if (noderec_parse(bad[i], strlen(bad[i]), &r, &err) == 0)
			fail_msg("accepted: %s", bad[i]);
		assert_null(r);
		assert_true(err.text[0] != '\0');
	}
	assert_int_equal(noderec_parse(good, strlen(good), &r, &err), 0);
	assert_int_equal(r->quarantine_after, 2);
	assert_int_equal(r->quarantine_for_ms, 5000);
	assert_int_equal(r->n, 2);
	assert_null(r->hosts[0].f[0].run);
	assert_string_equal(r->hosts[0].f[1].run, "x");
	noderec_free(r);
}

/* The file: made 0700/0600, read back, cleared by host and whole. */
static void test_file(void **s)
{
	struct noderec *r = NULL;
	struct herd_err err;
	struct stat st;
	char path[400], **names = NULL;
	size_t n = 0;

	(void)s;
	herd_err_clear(&err);
	/* Nothing yet: an empty record, no jobs, nothing to clear. */
	assert_int_equal(noderec_load("train", &r, &err), 0);
	assert_int_equal(r->n, 0);
	noderec_free(r);
	assert_int_equal(noderec_jobs(&names, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(noderec_clear("train", NULL, &err), -1);
	assert_non_null(strstr(err.text, "has no node record"));

	note("train", "n1", T0, "heartbeats silent for 3.4 s");
	note("train", "n2", T0 + 1, "connection lost");
	note("train", "n1", T0 + 2, "agent error");
	note("other", "n9", T0, "x");
	assert_int_equal(stat(nodes, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	snprintf(path, sizeof(path), "%s/train.json", nodes);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);

	assert_int_equal(noderec_load("train", &r, &err), 0);
	assert_int_equal(r->n, 2);
	assert_int_equal(noderec_find(r, "n1")->n, 2);
	assert_string_equal(noderec_find(r, "n1")->f[1].reason, "agent error");
	assert_string_equal(noderec_find(r, "n1")->f[1].run, "run-1");
	assert_int_equal(r->quarantine_after, 3);
	assert_true(r->quarantine_for_ms == DAY);
	noderec_free(r);

	assert_int_equal(noderec_jobs(&names, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(names[0], "other");
	assert_string_equal(names[1], "train");
	noderec_names_free(names, n);

	/* Several at once: one write. */
	{
		const struct noderec_note v[] = {
		    {"n4", T0 + 5, "unhealthy", "disk full", NULL},
		    {"n5", T0 + 6, "straggler", "1.6x the median", "run-2"},
		    {"n4", T0 + 7, "failed", "gone", NULL},
		};

		assert_int_equal(noderec_note_all("train", v, 3, 3, DAY, &err),
				 0);
		assert_int_equal(noderec_load("train", &r, &err), 0);
		assert_int_equal(r->n, 4);
		assert_int_equal(noderec_find(r, "n4")->n, 2);
		assert_string_equal(noderec_find(r, "n5")->f[0].kind,
				    "straggler");
		noderec_free(r);
		/* A bad kind refuses the lot. */
		assert_int_equal(noderec_note("train", "n6", T0, "bogus", "x",
					      NULL, 3, DAY, &err),
				 -1);
	}
	/* Aging out when written: a failure two days later drops the old. */
	note("train", "n3", T0 + 2 * DAY, "late");
	assert_int_equal(noderec_load("train", &r, &err), 0);
	assert_int_equal(r->n, 1);
	assert_non_null(noderec_find(r, "n3"));
	noderec_free(r);

	assert_int_equal(noderec_clear("train", "n7", &err), -1);
	assert_int_equal(errno, ENOENT);
	assert_non_null(strstr(err.text, "no record of host n7"));
	assert_int_equal(noderec_clear("train", "n3", &err), 0);
	assert_int_equal(noderec_load("train", &r, &err), 0);
	assert_int_equal(r->n, 0);
	noderec_free(r);
	assert_int_equal(noderec_clear("other", NULL, &err), 0);
	assert_int_equal(noderec_clear("other", NULL, &err), -1);

	/* Names that cannot be files. */
	assert_int_equal(noderec_load("../x", &r, &err), -1);
	assert_non_null(strstr(err.text, "cannot name a node record"));
	assert_int_equal(noderec_load(".hidden", &r, &err), -1);
}

/* Concurrent writers (separate processes) lose nothing. */
static void test_concurrent(void **s)
{
	enum { PROCS = 4, EACH = 8 };
	struct noderec *r = NULL;
	struct herd_err err;
	pid_t pids[PROCS];
	size_t total = 0;

	(void)s;
	herd_err_clear(&err);
	for (int p = 0; p < PROCS; p++) {
		pids[p] = fork();
		assert_true(pids[p] >= 0);
		if (pids[p] == 0) {
			for (int i = 0; i < EACH; i++) {
				char host[16];

				snprintf(host, sizeof(host), "p%d", p);
				if (noderec_note("job", host, T0 + i, "failed",
						 "x", NULL, 3, DAY, &err) < 0)
					_exit(1);
			}
			_exit(0);
		}
	}
	for (int p = 0; p < PROCS; p++) {
		int status;

		assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	assert_int_equal(noderec_load("job", &r, &err), 0);
	assert_int_equal(r->n, PROCS);
	for (size_t i = 0; i < r->n; i++)
		total += r->hosts[i].n;
	assert_int_equal(total, PROCS * EACH);
	noderec_free(r);
}

/* A corrupt file: a clear error naming it and the fix, never a crash;
 * noderec_note does not overwrite it; --clear-all removes it. */
static void test_corrupt(void **s)
{
	struct noderec *r = NULL;
	struct herd_err err;
	char path[400];
	struct stat st;

	(void)s;
	herd_err_clear(&err);
	note("train", "n1", T0, "x");
	snprintf(path, sizeof(path), "%s/train.json", nodes);
	write_file(path, "{\"version\":1, \"hosts\": [garbage", 0600);
	assert_int_equal(noderec_load("train", &r, &err), -1);
	assert_null(r);
	assert_non_null(strstr(err.text, "train.json is not a node record"));
	assert_non_null(strstr(err.text, "--clear-all"));
	herd_err_clear(&err);
	assert_int_equal(noderec_note("train", "n2", T0, "failed", "x", NULL,
				      3, DAY, &err),
			 -1);
	assert_non_null(strstr(err.text, "not a node record"));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 31); /* untouched */
	assert_int_equal(noderec_clear("train", "n1", &err), -1);
	assert_int_equal(noderec_clear("train", NULL, &err), 0);
	assert_int_equal(noderec_load("train", &r, &err), 0);
	assert_int_equal(r->n, 0);
	noderec_free(r);

	/* A file open to others, a symlink: refused. */
	write_file(path,
		   "{\"version\":1,\"quarantine_after\":3,"
		   "\"quarantine_for_ms\":1,\"hosts\":{}}",
		   0666);
	assert_int_equal(noderec_load("train", &r, &err), -1);
	assert_non_null(strstr(err.text, "mode 0666"));
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_int_equal(noderec_load("train", &r, &err), -1);
	assert_non_null(strstr(err.text, "symlink"));
	assert_int_equal(unlink(path), 0);
}

/* The directories: mode too open, another owner, a symlink: refused, and
 * nothing is written through them. */
static void test_permissions(void **s)
{
	struct noderec *r = NULL;
	struct herd_err err;
	char **names = NULL;
	size_t n = 0;

	(void)s;
	herd_err_clear(&err);
	note("train", "n1", T0, "x");
	assert_int_equal(chmod(nodes, 0777), 0);
	assert_int_equal(noderec_load("train", &r, &err), -1);
	assert_non_null(strstr(err.text, "mode 0777"));
	assert_non_null(strstr(err.text, "chmod 700"));
	assert_int_equal(noderec_note("train", "n1", T0, "failed", "x", NULL,
				      3, DAY, &err),
			 -1);
	assert_int_equal(noderec_jobs(&names, &n, &err), -1);
	assert_int_equal(noderec_clear("train", "n1", &err), -1);
	assert_int_equal(chmod(nodes, 0700), 0);
	assert_int_equal(chmod(herd, 0757), 0);
	assert_int_equal(noderec_load("train", &r, &err), -1);
	assert_non_null(strstr(err.text, "mode 0757"));
	assert_int_equal(chmod(herd, 0700), 0);
	if (geteuid() == 0) {
		assert_int_equal(chown(nodes, 65534, 65534), 0);
		herd_err_clear(&err);
		assert_int_equal(noderec_load("train", &r, &err), -1);
		assert_non_null(strstr(err.text, "owned by uid 65534"));
		assert_int_equal(noderec_note("train", "n1", T0, "failed", "x",
					      NULL, 3, DAY, &err),
				 -1);
		assert_int_equal(chown(nodes, 0, 0), 0);
		/* A record file of another user. */
		{
			char path[400];

			snprintf(path, sizeof(path), "%s/train.json", nodes);
			assert_int_equal(chown(path, 65534, 65534), 0);
			assert_int_equal(noderec_load("train", &r, &err), -1);
			assert_non_null(strstr(err.text, "owned by uid 65534"));
		}
	}
	assert_null(r);
}

/* Issue 22 item 8: a record is the job's identity's, name and job file. */
static void test_key(void **s)
{
	char a[600], b[600], *ka, *kb, *ka2, *bare;
	struct noderec_note one = {"n1", 1000, "failed", "lost", NULL};
	struct noderec *r = NULL;
	struct herd_err err;
	char *text;

	(void)s;
	snprintf(a, sizeof(a), "%s-a.yaml", state);
	snprintf(b, sizeof(b), "%s-b.yaml", state);
	write_file(a, "x", 0600);
	write_file(b, "x", 0600);
	ka = noderec_key("job", a);
	kb = noderec_key("job", b);
	ka2 = noderec_key("job", a);
	bare = noderec_key("job", "/no/such/file.yaml");
	assert_non_null(ka);
	assert_non_null(kb);
	assert_string_not_equal(ka, kb);
	assert_string_equal(ka, ka2);
	assert_string_equal(bare, "job");
	assert_int_equal(strlen(ka), strlen("job@") + 8);
	assert_true(noderec_key_is(ka, "job"));
	assert_true(noderec_key_is("job", "job"));
	assert_false(noderec_key_is(ka, "jo"));
	assert_false(noderec_key_is("job@x", "job"));
	assert_true(noderec_name_ok(ka));

	herd_err_clear(&err);
	assert_int_equal(noderec_note_job(ka, "job", a, &one, 1, 3, DAY, &err),
			 0);
	assert_int_equal(noderec_load(ka, &r, &err), 0);
	assert_string_equal(r->job, "job");
	assert_string_equal(r->job_file, a);
	assert_non_null(noderec_find(r, "n1"));
	text = noderec_json(r);
	noderec_free(r);
	assert_int_equal(noderec_parse(text, strlen(text), &r, &err), 0);
	assert_string_equal(r->job_file, a);
	noderec_free(r);
	free(text);
	/* The other project's record is its own. */
	assert_int_equal(noderec_load(kb, &r, &err), 0);
	assert_int_equal(r->n, 0);
	noderec_free(r);
	unlink(a);
	unlink(b);
	free(ka);
	free(kb);
	free(ka2);
	free(bare);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rule),
	    cmocka_unit_test(test_bounded),
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test_setup(test_file, fresh),
	    cmocka_unit_test_setup(test_concurrent, fresh),
	    cmocka_unit_test_setup(test_corrupt, fresh),
	    cmocka_unit_test_setup(test_permissions, fresh),
	    cmocka_unit_test_setup(test_key, fresh),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
