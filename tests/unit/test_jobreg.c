/* test_jobreg.c — the job registry (directories made 0700 and checked,
 * entries written atomically 0600, listed newest first, found by run dir,
 * id and name) and the control socket directory. */
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
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "herd/jobreg.h"

static char root[] = "/tmp/herd-test-jobreg.XXXXXX";
static char state[256], runtime[256];

static int setup(void **s)
{
	(void)s;
	if (!mkdtemp(root))
		return -1;
	snprintf(state, sizeof(state), "%s/state", root);
	snprintf(runtime, sizeof(runtime), "%s/run", root);
	setenv("XDG_STATE_HOME", state, 1);
	return mkdir(runtime, 0700);
}

static int teardown(void **s)
{
	char cmd[128];

	(void)s;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

/* Every test starts without a registry. */
static int fresh(void **s)
{
	char cmd[600];

	(void)s;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'/herd", state, runtime);
	return system(cmd) == 0 ? 0 : -1;
}

static void entry(struct jobreg_entry *e, const char *id, const char *name,
		  const char *run_dir, int64_t started)
{
	memset(e, 0, sizeof(*e));
	e->id = (char *)id;
	e->name = (char *)name;
	e->run_dir = (char *)run_dir;
	e->pid = 4242;
	e->started_ms = started;
	e->job_file = "/home/u/job.yaml";
	e->cwd = "/home/u";
}

static void test_empty_and_dir(void **s)
{
	struct herd_err err;
	struct jobreg_entry *v;
	char dir[512], want[512];
	struct stat st;
	size_t n = 1;

	(void)s;
	herd_err_clear(&err);
	/* No registry yet: nothing listed, nothing made. */
	assert_int_equal(jobreg_list(&v, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(jobreg_dir(dir, sizeof(dir), false, &err), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(stat(state, &st), -1);
	assert_int_equal(jobreg_dir(dir, sizeof(dir), true, &err), 0);
	snprintf(want, sizeof(want), "%s/herd/jobs", state);
	assert_string_equal(dir, want);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	snprintf(want, sizeof(want), "%s/herd", state);
	assert_int_equal(stat(want, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
}

static void test_write_list(void **s)
{
	struct herd_err err;
	struct jobreg_entry e, *v = NULL;
	char path[512];
	struct stat st;
	size_t n = 0;
	mode_t old;

	(void)s;
	herd_err_clear(&err);
	/* Whatever the umask: 0700 directories, 0600 files. */
	old = umask(0);
	entry(&e, "20261201-053100.123-4f2a", "a", "/logs/a/1", 1000);
	assert_int_equal(jobreg_write(&e, &err), 0);
	umask(old);
	entry(&e, "20261201-053200.000-0001", "b", "/logs/b/1", 3000);
	e.host = "login1";
	e.remote_herd = "/home/u/.herd/herd";
	e.detached = true;
	assert_int_equal(jobreg_write(&e, &err), 0);
	entry(&e, "20261201-053150.000-0002", "a", "/logs/a/2", 2000);
	assert_int_equal(jobreg_write(&e, &err), 0);
	snprintf(path, sizeof(path), "%s/herd/jobs/%s.json", state, e.id);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	snprintf(path, sizeof(path), "%s/herd/jobs", state);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);

	assert_int_equal(jobreg_list(&v, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_string_equal(v[0].id, "20261201-053200.000-0001");
	assert_string_equal(v[0].host, "login1");
	assert_string_equal(v[0].remote_herd, "/home/u/.herd/herd");
	assert_true(v[0].detached);
	assert_string_equal(v[1].id, "20261201-053150.000-0002");
	assert_null(v[1].host);
	assert_null(v[1].sock);
	assert_false(v[1].detached);
	assert_int_equal(v[1].pid, 4242);
	assert_int_equal(v[1].started_ms, 2000);
	assert_string_equal(v[1].cwd, "/home/u");
	assert_string_equal(v[2].id, "20261201-053100.123-4f2a");
	jobreg_entries_free(v, n);

	/* Rewriting an entry replaces it, atomically: no temporary left. */
	entry(&e, "20261201-053100.123-4f2a", "a", "/logs/a/1", 1000);
	e.pid = 7;
	assert_int_equal(jobreg_write(&e, &err), 0);
	assert_int_equal(jobreg_list(&v, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_int_equal(v[2].pid, 7);
	jobreg_entries_free(v, n);
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd),
			 "test $(ls -A '%s/herd/jobs' | wc -l) = 3", state);
		assert_int_equal(system(cmd), 0);
	}

	/* A bad id is refused: it would name another file. */
	entry(&e, "../x", "a", "/logs", 1);
	assert_int_equal(jobreg_write(&e, &err), -1);
	entry(&e, ".hidden", "a", "/logs", 1);
	assert_int_equal(jobreg_write(&e, &err), -1);
}

static void test_list_skips(void **s)
{
	struct herd_err err;
	struct jobreg_entry e, *v = NULL;
	char path[600], dir[512];
	size_t n = 0;
	FILE *f;

	(void)s;
	herd_err_clear(&err);
	entry(&e, "good", "g", "/logs/g", 5);
	assert_int_equal(jobreg_write(&e, &err), 0);
	assert_int_equal(jobreg_dir(dir, sizeof(dir), false, &err), 0);
	/* Not JSON, no run_dir, a file name that is not its id, a
	 * symlink, a temporary: none is an entry. */
	snprintf(path, sizeof(path), "%s/junk.json", dir);
	assert_non_null(f = fopen(path, "w"));
	fputs("not json", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/norun.json", dir);
	assert_non_null(f = fopen(path, "w"));
	fputs("{\"id\":\"norun\"}", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/other.json", dir);
	assert_non_null(f = fopen(path, "w"));
	fputs("{\"id\":\"good2\",\"run_dir\":\"/x\"}", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/link.json", dir);
	assert_int_equal(symlink("good.json", path), 0);
	snprintf(path, sizeof(path), "%s/.good.json.tmp-1-0", dir);
	assert_non_null(f = fopen(path, "w"));
	fputs("{\"id\":\"good\",\"run_dir\":\"/x\"}", f);
	fclose(f);
	assert_int_equal(jobreg_list(&v, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(v[0].id, "good");
	jobreg_entries_free(v, n);
}

static void test_refused(void **s)
{
	struct herd_err err;
	struct jobreg_entry e, *v = NULL;
	char herd[512], jobs[512], elsewhere[512];
	size_t n = 0;

	(void)s;
	herd_err_clear(&err);
	entry(&e, "x", "x", "/logs/x", 1);
	snprintf(herd, sizeof(herd), "%s/herd", state);
	snprintf(jobs, sizeof(jobs), "%s/herd/jobs", state);
	snprintf(elsewhere, sizeof(elsewhere), "%s/elsewhere", root);

	/* Group-writable jobs directory. */
	assert_int_equal(mkdir(state, 0700), 0);
	assert_int_equal(mkdir(herd, 0700), 0);
	assert_int_equal(mkdir(jobs, 0700), 0);
	assert_int_equal(chmod(jobs, 0770), 0);
	assert_int_equal(jobreg_write(&e, &err), -1);
	assert_non_null(strstr(err.text, "mode 0770"));
	assert_non_null(strstr(err.text, "chmod 700"));
	assert_null(strchr(err.text, '\n'));
	assert_int_equal(jobreg_list(&v, &n, &err), -1);
	assert_int_equal(chmod(jobs, 0700), 0);
	assert_int_equal(jobreg_write(&e, &err), 0);

	/* A symlink for herd/: refused, nothing written through it. */
	assert_int_equal(system("true"), 0);
	{
		char cmd[1200];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -m 700 '%s'",
			 herd, elsewhere);
		assert_int_equal(system(cmd), 0);
	}
	assert_int_equal(symlink(elsewhere, herd), 0);
	assert_int_equal(jobreg_write(&e, &err), -1);
	assert_non_null(strstr(err.text, "is a symlink"));
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s')\"",
			 elsewhere);
		assert_int_equal(system(cmd), 0);
	}
	assert_int_equal(unlink(herd), 0);

	/* Another owner (as root only: chown). */
	if (geteuid() == 0) {
		assert_int_equal(mkdir(herd, 0700), 0);
		assert_int_equal(chown(herd, 65534, 65534), 0);
		assert_int_equal(jobreg_write(&e, &err), -1);
		assert_non_null(strstr(err.text, "owned by uid 65534"));
		assert_int_equal(rmdir(herd), 0);
	}

	/* A file where the directory goes. */
	{
		FILE *f = fopen(herd, "w");

		assert_non_null(f);
		fclose(f);
		assert_int_equal(jobreg_write(&e, &err), -1);
		assert_int_equal(unlink(herd), 0);
	}
}

static void test_find(void **s)
{
	struct herd_err err;
	struct jobreg_entry e, got;
	char run1[512], run2[512], other[512], cwd[512], path[600];
	FILE *f;

	(void)s;
	herd_err_clear(&err);
	snprintf(run1, sizeof(run1), "%s/logs/train/20261201-050000.000-aaaa",
		 root);
	snprintf(run2, sizeof(run2), "%s/logs/train/20261201-060000.000-bbbb",
		 root);
	snprintf(other, sizeof(other), "%s/logs/train/20261201-070000.000-cccc",
		 root);
	{
		char cmd[2000];

		snprintf(cmd, sizeof(cmd), "mkdir -p '%s' '%s' '%s'", run1,
			 run2, other);
		assert_int_equal(system(cmd), 0);
	}
	entry(&e, "20261201-050000.000-aaaa", "train", run1, 100);
	assert_int_equal(jobreg_write(&e, &err), 0);
	entry(&e, "20261201-060000.000-bbbb", "train", run2, 200);
	assert_int_equal(jobreg_write(&e, &err), 0);
	entry(&e, "20261201-055000.000-dddd", "eval", "/gone", 150);
	assert_int_equal(jobreg_write(&e, &err), 0);

	/* By name: the newest. */
	assert_int_equal(jobreg_find("train", &got, &err), 0);
	assert_string_equal(got.id, "20261201-060000.000-bbbb");
	jobreg_entry_clear(&got);
	/* By id. */
	assert_int_equal(jobreg_find("20261201-050000.000-aaaa", &got, &err),
			 0);
	assert_string_equal(got.run_dir, run1);
	assert_int_equal(got.pid, 4242);
	jobreg_entry_clear(&got);
	assert_int_equal(jobreg_find("eval", &got, &err), 0);
	assert_string_equal(got.run_dir, "/gone");
	jobreg_entry_clear(&got);
	/* By run dir, also relative and through a trailing slash. */
	assert_int_equal(jobreg_find(run1, &got, &err), 0);
	assert_string_equal(got.id, "20261201-050000.000-aaaa");
	assert_int_equal(got.pid, 4242);
	jobreg_entry_clear(&got);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	snprintf(path, sizeof(path), "%s/logs/train", root);
	assert_int_equal(chdir(path), 0);
	assert_int_equal(jobreg_find("20261201-060000.000-bbbb/", &got, &err),
			 0);
	assert_string_equal(got.name, "train");
	assert_int_equal(got.started_ms, 200);
	jobreg_entry_clear(&got);
	assert_int_equal(chdir(cwd), 0);

	/* A run dir nobody registered: made up from its run.json. */
	snprintf(path, sizeof(path), "%s/run.json", other);
	assert_non_null(f = fopen(path, "w"));
	fputs("{\"id\":\"20261201-070000.000-cccc\",\"name\":\"train\","
	      "\"job_file\":\"/j.yaml\",\"cwd\":\"/w\",\"started\":300}\n",
	      f);
	fclose(f);
	assert_int_equal(jobreg_find(other, &got, &err), 0);
	assert_string_equal(got.id, "20261201-070000.000-cccc");
	assert_string_equal(got.run_dir, other);
	assert_string_equal(got.job_file, "/j.yaml");
	assert_string_equal(got.cwd, "/w");
	assert_int_equal(got.pid, 0);
	assert_null(got.host);
	jobreg_entry_clear(&got);
	/* Still by name: the registry's newest, not the unregistered dir. */
	assert_int_equal(jobreg_find("train", &got, &err), 0);
	assert_string_equal(got.id, "20261201-060000.000-bbbb");
	jobreg_entry_clear(&got);

	/* Nothing: one line naming it and where to look. */
	assert_int_equal(jobreg_find("nosuch", &got, &err), -1);
	assert_string_equal(err.text,
			    "no job nosuch here (herd list shows yours)");
	/* A directory that is no run. */
	snprintf(path, sizeof(path), "%s/logs", root);
	assert_int_equal(jobreg_find(path, &got, &err), -1);
	assert_non_null(strstr(err.text, "not a run directory"));
	assert_int_equal(jobreg_find("/no/such/dir", &got, &err), -1);
}

static void test_entry_json(void **s)
{
	struct herd_err err;
	struct jobreg_entry e, got;
	char *text;

	(void)s;
	entry(&e, "id1", NULL, "/r", 12);
	e.machine = "login2";
	assert_non_null(text = jobreg_entry_json(&e));
	/* The contract's keys, null where unset. */
	assert_non_null(strstr(text, "\"host\":null"));
	assert_non_null(strstr(text, "\"sock\":null"));
	assert_non_null(strstr(text, "\"remote_herd\":null"));
	assert_non_null(strstr(text, "\"detached\":false"));
	assert_non_null(strstr(text, "\"started\":12"));
	assert_int_equal(jobreg_entry_parse(text, strlen(text), &got, &err), 0);
	assert_string_equal(got.id, "id1");
	assert_string_equal(got.machine, "login2");
	assert_null(got.name);
	jobreg_entry_clear(&got);
	free(text);
	assert_int_equal(jobreg_entry_parse("[]", 2, &got, &err), -1);
	assert_int_equal(
	    jobreg_entry_parse("{\"id\":1,\"run_dir\":\"/r\"}", 24, &got, &err),
	    -1);
}

static void test_sock_dir(void **s)
{
	struct herd_err err;
	char dir[512], want[512], path[512];
	struct stat st;

	(void)s;
	herd_err_clear(&err);
	/* XDG_RUNTIME_DIR ours and 0700: DIR/herd, made 0700. */
	setenv("XDG_RUNTIME_DIR", runtime, 1);
	assert_int_equal(jobreg_sock_dir(dir, sizeof(dir), true, &err), 0);
	snprintf(want, sizeof(want), "%s/herd", runtime);
	assert_string_equal(dir, want);
	assert_int_equal(lstat(dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(jobreg_sock_path("20261201-053100.123-4f2a", path,
					  sizeof(path), false, &err),
			 0);
	snprintf(want, sizeof(want), "%s/herd/20261201-053100.123-4f2a.sock",
		 runtime);
	assert_string_equal(path, want);
	/* Opened up to its group: refused (a socket dir has no g/o bits). */
	assert_int_equal(chmod(dir, 0750), 0);
	assert_int_equal(jobreg_sock_dir(dir, sizeof(dir), false, &err), -1);
	assert_non_null(strstr(err.text, "mode 0750"));
	assert_int_equal(rmdir(dir), 0);
	/* A symlink: refused. */
	assert_int_equal(symlink("/tmp", dir), 0);
	assert_int_equal(jobreg_sock_dir(dir, sizeof(dir), true, &err), -1);
	assert_non_null(strstr(err.text, "is a symlink"));
	snprintf(path, sizeof(path), "%s/herd", runtime);
	assert_int_equal(unlink(path), 0);

	/* XDG_RUNTIME_DIR open to others, or unset: /tmp/herd-EUID. */
	assert_int_equal(chmod(runtime, 0755), 0);
	snprintf(want, sizeof(want), "/tmp/herd-%u", (unsigned)geteuid());
	assert_int_equal(jobreg_sock_dir(dir, sizeof(dir), true, &err), 0);
	assert_string_equal(dir, want);
	assert_int_equal(chmod(runtime, 0700), 0);
	unsetenv("XDG_RUNTIME_DIR");
	assert_int_equal(jobreg_sock_dir(dir, sizeof(dir), true, &err), 0);
	assert_string_equal(dir, want);
	assert_int_equal(lstat(dir, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_uid, geteuid());
	assert_int_equal(st.st_mode & 07777, 0700);

	/* A socket path longer than sockaddr_un holds: refused. */
	{
		char longdir[400];

		snprintf(longdir, sizeof(longdir), "%s/%s", runtime,
			 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
		assert_int_equal(mkdir(longdir, 0700), 0);
		setenv("XDG_RUNTIME_DIR", longdir, 1);
		assert_int_equal(jobreg_sock_path("20261201-053100.123-4f2a",
						  path, sizeof(path), true,
						  &err),
				 -1);
		assert_non_null(strstr(err.text, "too long"));
		unsetenv("XDG_RUNTIME_DIR");
	}
}

/* jobreg_sock_new(): the shared directory when it is fine, else one of
 * the run's own (issue 23 item 6). */
static void test_sock_new(void **s)
{
	static const char id[] = "20261201-053100.123-4f2a";
	struct herd_err err, note;
	char path[512], want[512], dir[512], *slash;
	struct stat st;
	bool priv = true;

	(void)s;
	herd_err_clear(&err);
	/* A fine XDG_RUNTIME_DIR: DIR/herd/ID.sock, no note. */
	setenv("XDG_RUNTIME_DIR", runtime, 1);
	assert_int_equal(
	    jobreg_sock_new(id, path, sizeof(path), &priv, &note, &err), 0);
	snprintf(want, sizeof(want), "%s/herd/%s.sock", runtime, id);
	assert_string_equal(path, want);
	assert_false(priv);
	assert_string_equal(note.text, "");

	/* DIR/herd a symlink (planted): a directory of the run's own. */
	snprintf(dir, sizeof(dir), "%s/herd", runtime);
	assert_int_equal(rmdir(dir), 0);
	assert_int_equal(symlink("/tmp", dir), 0);
	assert_int_equal(
	    jobreg_sock_new(id, path, sizeof(path), &priv, &note, &err), 0);
	assert_true(priv);
	assert_non_null(strstr(note.text, "is a symlink"));
	snprintf(want, sizeof(want), "/tmp/herd-%u.", (unsigned)geteuid());
	assert_int_equal(strncmp(path, want, strlen(want)), 0);
	slash = strrchr(path, '/');
	assert_non_null(slash);
	assert_string_equal(slash + 1, "20261201-053100.123-4f2a.sock");
	assert_true(strlen(path) < sizeof(((struct sockaddr_un *)0)->sun_path));
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	assert_non_null(strstr(note.text, dir));
	assert_int_equal(lstat(dir, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_uid, geteuid());
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(rmdir(dir), 0);
	snprintf(dir, sizeof(dir), "%s/herd", runtime);
	assert_int_equal(unlink(dir), 0);

	/* A path too long for sockaddr_un: a directory of the run's own. */
	{
		char longdir[400];

		snprintf(longdir, sizeof(longdir), "%s/%s", runtime,
			 "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
			 "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
		assert_int_equal(mkdir(longdir, 0700), 0);
		setenv("XDG_RUNTIME_DIR", longdir, 1);
		assert_int_equal(
		    jobreg_sock_new(id, path, sizeof(path), &priv, &note, &err),
		    0);
		assert_true(priv);
		assert_non_null(strstr(note.text, "too long"));
		assert_int_equal(strncmp(path, want, strlen(want)), 0);
		slash = strrchr(path, '/');
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
		assert_int_equal(rmdir(dir), 0);
	}
	/* A bad id: refused, nothing made. */
	assert_int_equal(
	    jobreg_sock_new("../x", path, sizeof(path), &priv, &note, &err),
	    -1);
	unsetenv("XDG_RUNTIME_DIR");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_empty_and_dir, fresh),
	    cmocka_unit_test_setup(test_write_list, fresh),
	    cmocka_unit_test_setup(test_list_skips, fresh),
	    cmocka_unit_test_setup(test_refused, fresh),
	    cmocka_unit_test_setup(test_find, fresh),
	    cmocka_unit_test_setup(test_entry_json, fresh),
	    cmocka_unit_test_setup(test_sock_dir, fresh),
	    cmocka_unit_test_setup(test_sock_new, fresh),
	};

	unsetenv("XDG_RUNTIME_DIR");
	return cmocka_run_group_tests(tests, setup, teardown);
}
