/* test_initproj.c — launcher/gen/initproj.c: the manifest's checks, values by
 * kind, every missing value named at once, an unknown --set, rendering
 * (copied files, derived values, herd run's placeholders kept, a result
 * that does not check), writing (no overwrite without force, a hand
 * edit refused by one --force and kept as NAME.orig by two, modes,
 * refused directories); and herd's own templates (templates/init): the
 * project shrinks, its ssh: section and next steps (issue 22). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "launcher/gen/initproj.h"

/* A templates directory in /tmp: DIR/init/t/manifest.json and its files. */
struct fixture {
	char dir[64];
	char proj[96];
};

static void put(const char *dir, const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static const char good_manifest[] =
    "{\"about\": \"a test\",\n"
    " \"files\": [\n"
    "  {\"to\": \"job.yaml\", \"from\": \"init/t/job.yaml.tmpl\", "
    "\"mode\": \"0644\"},\n"
    "  {\"to\": \"run.sh\", \"from\": \"init/t/run.sh.tmpl\", "
    "\"mode\": \"0755\"},\n"
    "  {\"to\": \"raw.py\", \"from\": \"init/t/raw.py\", \"mode\": \"0644\", "
    "\"copy\": true}],\n"
    " \"values\": [\n"
    "  {\"name\": \"corpus\", \"kind\": \"path\", \"about\": \"text\"},\n"
    "  {\"name\": \"base\", \"kind\": \"path\", \"about\": \"ckpt\"},\n"
    "  {\"name\": \"steps\", \"kind\": \"int\", \"default\": \"10\", "
    "\"about\": \"n\"},\n"
    "  {\"name\": \"par\", \"kind\": \"choice\", \"choices\": [\"ddp\", "
    "\"fsdp\"], \"default\": \"ddp\", \"about\": \"p\"},\n"
    "  {\"name\": \"hosts\", \"kind\": \"hosts\", \"default\": \"slurm\", "
    "\"about\": \"h\"},\n"
    "  {\"name\": \"tok\", \"kind\": \"tokenizer\", \"default\": \"800\", "
    "\"about\": \"t\"}],\n"
    " \"derived\": {\"args\": \"--steps {{steps}} --{{par}}\"},\n"
    " \"next\": [\"cd '{{project_dir}}'\", \"tok {{tok.args}}\"]}\n";

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char d[128];

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_initproj.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(d, sizeof(d), "%s/init", f->dir);
	assert_int_equal(mkdir(d, 0700), 0);
	snprintf(d, sizeof(d), "%s/init/t", f->dir);
	assert_int_equal(mkdir(d, 0700), 0);
	put(d, "manifest.json", good_manifest);
	put(d, "job.yaml.tmpl",
	    "name: t\nnodes:\n  {{hosts.yaml}}\nlaunch:\n  command: >-\n"
	    "    run '{{corpus}}' {{args}} {{resume_args}}\n");
	put(d, "run.sh.tmpl",
	    "#!/bin/sh\ncd '{{project_dir}}' && exec "
	    "'{{herd}}' run job.yaml # {{template}}\n");
	put(d, "raw.py", "print(f'{{not a placeholder}}')\n");
	snprintf(f->proj, sizeof(f->proj), "%s/proj", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static char *kind_check(const char *kind, const char *value)
{
	static char *const choices[] = {"ddp", "fsdp", NULL};
	struct herd_err err;

	return initproj_value_check(kind, choices, value, "/cwd", &err);
}

static void want_value(const char *kind, const char *value, const char *want)
{
	char *got = kind_check(kind, value);

	if (!want) {
		if (got)
			fail_msg("%s '%s' was taken as '%s'", kind, value, got);
		return;
	}
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void test_kinds(void **state)
{
	(void)state;
	want_value("int", "300", "300");
	want_value("int", "3x", NULL);
	want_value("int", "-1", NULL);
	want_value("int", "1234567890", NULL);
	want_value("int", "", NULL);
	want_value("number", "2e-5", "2e-5");
	want_value("number", "0.001", "0.001");
	want_value("number", "10", "10");
	want_value("number", "1E+3", "1E+3");
	want_value("number", ".1", NULL);
	want_value("number", "1.", NULL);
	want_value("number", "1e", NULL);
	want_value("number", "-1", NULL);
	want_value("number", "nan", NULL);
	want_value("args", "--seq-len 256 --x=a,b:c/d+e",
		   "--seq-len 256 --x=a,b:c/d+e");
	want_value("args", "", "");
	want_value("args", "--a; rm", NULL);
	want_value("args", "--a *", NULL);
	want_value("args", "a|b", NULL);
	want_value("args", "a>b", NULL);
	want_value("word", "job-1.a_b", "job-1.a_b");
	want_value("word", "-x", NULL);
	want_value("word", "a b", NULL);
	want_value("choice", "fsdp", "fsdp");
	want_value("choice", "zero", NULL);
	want_value("path", "data", "/cwd/data");
	want_value("path", "./data/x", "/cwd/data/x");
	want_value("path", ".", "/cwd");
	want_value("path", "/abs path/x", "/abs path/x");
	want_value("path", "", NULL);
	want_value("path", "a'b", NULL);
	want_value("path", "a\"b", NULL);
	want_value("path", "$(x)", NULL);
	want_value("path", "`x`", NULL);
	want_value("path", "a\\b", NULL);
	want_value("path", "a\nb", NULL);
	want_value("program", "python3", "python3");
	want_value("program", "bin/py", "/cwd/bin/py");
	want_value("program", "-c", NULL);
	want_value("time", "1-00:00:00", "1-00:00:00");
	want_value("time", "soon", NULL);
	want_value("hosts", "slurm", "slurm");
	want_value("hosts", "node[01-04]", "node[01-04]");
	want_value("hosts", "node[01-", NULL);
	want_value("tokenizer", "8000", "8000");
	want_value("tokenizer", "tok.model", "/cwd/tok.model");
	want_value("hostlist", "", "");
	want_value("hostlist", "node[05-06]", "node[05-06]");
	want_value("hostlist", "node[05-", NULL);
	want_value("file", "", "");
	want_value("file", "keys/id", "/cwd/keys/id");
	want_value("file", "~/.ssh/id", "~/.ssh/id");
	want_value("nope", "x", NULL);
}

static void test_builtin(void **state)
{
	struct herd_err err;
	char **names = initproj_names("templates", &err);
	int n = 0;

	(void)state;
	assert_non_null(names);
	assert_string_equal(names[0], "finetune");
	assert_string_equal(names[1], "pretrain");
	for (char **p = names; *p; p++, n++) {
		struct initproj *t = initproj_load("templates", *p, &err);

		if (!t)
			fail_msg("%s", err.text);
		initproj_free(t);
		free(*p);
	}
	free(names);
	assert_int_equal(n, 2);
}

static struct initproj *load(struct fixture *f)
{
	struct herd_err err;
	struct initproj *p = initproj_load(f->dir, "t", &err);

	if (!p)
		fail_msg("%s", err.text);
	return p;
}

/* Writes the manifest text and expects loading it to fail with want in
 * the error. */
static void bad_manifest(struct fixture *f, const char *text, const char *want)
{
	char d[128];
	struct herd_err err;
	struct initproj *p;

	snprintf(d, sizeof(d), "%s/init/t", f->dir);
	put(d, "manifest.json", text);
	p = initproj_load(f->dir, "t", &err);
	if (p)
		fail_msg("manifest taken: %s", text);
	if (!strstr(err.text, want))
		fail_msg("'%s' not in '%s'", want, err.text);
}

#define FILE1 "{\"to\": \"a\", \"from\": \"init/t/a\", \"mode\": \"0644\"}"

static void test_bad_manifests(void **state)
{
	struct fixture *f = *state;
	struct herd_err err;

	bad_manifest(f, "{", "manifest.json:");
	bad_manifest(f,
		     "{\"about\": \"x\", \"files\": [], \"values\": [], "
		     "\"extra\": 1}",
		     "extra");
	bad_manifest(f,
		     "{\"about\": \"x\", \"files\": [{\"to\": \"a/b\", "
		     "\"from\": \"x\", \"mode\": \"0644\"}], \"values\": []}",
		     "not a plain file name");
	bad_manifest(
	    f,
	    "{\"about\": \"x\", \"files\": [{\"to\": \"a\", "
	    "\"from\": \"../x\", \"mode\": \"0644\"}], \"values\": []}",
	    "expected a path under the templates directory");
	bad_manifest(f,
		     "{\"about\": \"x\", \"files\": [{\"to\": \"a\", "
		     "\"from\": \"x\", \"mode\": \"0777\"}], \"values\": []}",
		     "expected 0644 or 0755");
	bad_manifest(f,
		     "{\"about\": \"x\", \"files\": [" FILE1 ", " FILE1
		     "], \"values\": []}",
		     "file 'a' named twice");
	bad_manifest(f,
		     "{\"about\": \"x\", \"files\": [], \"values\": ["
		     "{\"name\": \"a\", \"kind\": \"int\", \"about\": \"\"},"
		     "{\"name\": \"a\", \"kind\": \"int\", \"about\": \"\"}]}",
		     "value 'a' named twice");
	bad_manifest(f,
		     "{\"about\": \"x\", \"files\": [], \"values\": ["
		     "{\"name\": \"a\", \"kind\": \"int\", \"default\": \"x\", "
		     "\"about\": \"\"}]}",
		     "its default 'x': expected a number");
	bad_manifest(
	    f,
	    "{\"about\": \"x\", \"files\": [], \"values\": ["
	    "{\"name\": \"a\", \"kind\": \"choice\", \"about\": \"\"}]}",
	    "a choice has choices");
	bad_manifest(
	    f,
	    "{\"about\": \"x\", \"files\": [], \"values\": ["
	    "{\"name\": \"herd\", \"kind\": \"int\", \"about\": \"\"}]}",
	    "'herd' is herd's own value");
	bad_manifest(
	    f,
	    "{\"about\": \"x\", \"files\": [], \"values\": ["
	    "{\"name\": \"a\", \"kind\": \"float\", \"about\": \"\"}]}",
	    "unknown kind 'float'");
	assert_null(initproj_load(f->dir, "nope", &err));
	assert_non_null(strstr(err.text, "no template 'nope': herd init's "
					 "templates are t"));
	assert_null(initproj_load(f->dir, "../t", &err));
}

static void test_missing_and_unknown(void **state)
{
	struct fixture *f = *state;
	struct initproj *p = load(f);
	struct render_var sets[] = {{"stepz", "3"}, {"lr", "1"}};
	struct herd_err err;

	assert_int_equal(
	    initproj_render(p, f->dir, NULL, 0, f->proj, "/bin/herd", &err),
	    -1);
	assert_string_equal(err.text,
			    "the t template needs corpus, base: give --set "
			    "NAME=VALUE for each (herd init t --help)");
	/* An unknown --set is named before the missing ones. */
	assert_int_equal(
	    initproj_render(p, f->dir, sets, 2, f->proj, "/bin/herd", &err),
	    -1);
	assert_non_null(strstr(err.text, "--set lr, stepz: the t template "
					 "takes no such value; it takes "
					 "corpus, base, steps, par, hosts, "
					 "tok"));
	initproj_free(p);
}

static void test_render(void **state)
{
	struct fixture *f = *state;
	struct initproj *p = load(f);
	/* The first of a name wins (herd init puts the last --set first). */
	struct render_var sets[] = {
	    {"corpus", "/t/c"}, {"base", "/b"},	     {"steps", "7"},
	    {"steps", "9"},	{"hosts", "n[1-2]"}, {"tok", "/m/tok.model"}};
	struct herd_err err;

	if (initproj_render(p, f->dir, sets, 6, f->proj, "/bin/herd", &err) < 0)
		fail_msg("%s", err.text);
	assert_string_equal(p->files[0].text,
			    "name: t\nnodes:\n  hosts: \"n[1-2]\"\nlaunch:\n"
			    "  command: >-\n    run '/t/c' --steps 7 --ddp "
			    "{{resume_args}}\n");
	assert_non_null(strstr(p->files[1].text, "cd '"));
	assert_non_null(
	    strstr(p->files[1].text, "'/bin/herd' run job.yaml # t"));
	assert_string_equal(p->files[2].text,
			    "print(f'{{not a placeholder}}')\n");
	assert_int_equal(p->n_next, 2);
	assert_string_equal(p->next[1], "tok --tokenizer '/m/tok.model'");
	initproj_free(p);
}

static void test_render_bad_result(void **state)
{
	struct fixture *f = *state;
	struct render_var sets[] = {{"corpus", "/c"}, {"base", "/b"}};
	char d[128];
	struct herd_err err;
	struct initproj *p;

	snprintf(d, sizeof(d), "%s/init/t", f->dir);
	put(d, "job.yaml.tmpl", "name: t\nlaunch: {cmd: {{steps}}}\n");
	p = load(f);
	assert_int_equal(
	    initproj_render(p, f->dir, sets, 2, f->proj, "/bin/herd", &err),
	    -1);
	assert_non_null(strstr(err.text, "job.yaml:"));
	initproj_free(p);
	put(d, "job.yaml.tmpl", "name: t\nlaunch: {command: x}\n");
	put(d, "run.sh.tmpl", "cd /\n");
	p = load(f);
	assert_int_equal(
	    initproj_render(p, f->dir, sets, 2, f->proj, "/bin/herd", &err),
	    -1);
	assert_non_null(
	    strstr(err.text, "mode 0755, but it does not start with \"#!\""));
	initproj_free(p);
	put(d, "job.yaml.tmpl", "name: {{nope}}\n");
	p = load(f);
	assert_int_equal(
	    initproj_render(p, f->dir, sets, 2, f->proj, "/bin/herd", &err),
	    -1);
	assert_non_null(strstr(err.text, "{{nope}}"));
	initproj_free(p);
}

static mode_t mode_of(const char *dir, const char *name)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(lstat(path, &st), 0);
	return st.st_mode;
}

/* The contents of dir/name into buf.  Returns 0 or -1. */
static int read_of(const char *dir, const char *name, char *buf, size_t size)
{
	char path[256];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "r")))
		return -1;
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
	return 0;
}

static void test_write(void **state)
{
	struct fixture *f = *state;
	struct render_var sets[] = {{"corpus", "/c"}, {"base", "/b"}};
	struct initproj *p = load(f);
	struct herd_err err;
	char link[128], path[256], text[4096];

	assert_int_equal(
	    initproj_render(p, f->dir, sets, 2, f->proj, "/bin/herd", &err), 0);
	assert_int_equal(initproj_write(p, f->proj, 0, &err), 0);
	assert_int_equal(mode_of(f->proj, ".") & 07777, 0755);
	assert_int_equal(mode_of(f->proj, "job.yaml") & 07777, 0644);
	assert_int_equal(mode_of(f->proj, "run.sh") & 07777, 0755);
	assert_false(p->files[0].replaced);
	/* Again: refused, every file named. */
	assert_int_equal(initproj_write(p, f->proj, 0, &err), -1);
	assert_non_null(strstr(err.text, "holds job.yaml, run.sh, raw.py "
					 "already: nothing written; give "
					 "--force to replace them"));
	assert_int_equal(initproj_write(p, f->proj, 1, &err), 0);
	assert_true(p->files[0].replaced && p->files[2].replaced);
	assert_false(p->files[0].kept || p->files[2].kept);
	/* A hand edit: refused by one --force, nothing written; kept as
	 * NAME.orig by two. */
	put(f->proj, "job.yaml", "mine\n");
	put(f->proj, "raw.py", "mine too\n");
	assert_int_equal(initproj_write(p, f->proj, 1, &err), -1);
	assert_non_null(strstr(err.text, "job.yaml, raw.py changed since herd "
					 "init wrote them (or herd init did "
					 "not write them): nothing written; "
					 "give --force twice"));
	assert_int_equal(read_of(f->proj, "job.yaml", text, sizeof(text)), 0);
	assert_string_equal(text, "mine\n");
	assert_int_equal(initproj_write(p, f->proj, 2, &err), 0);
	assert_true(p->files[0].kept && p->files[2].kept);
	assert_false(p->files[1].kept);
	assert_int_equal(read_of(f->proj, "job.yaml.orig", text, sizeof(text)),
			 0);
	assert_string_equal(text, "mine\n");
	assert_int_equal(read_of(f->proj, "job.yaml", text, sizeof(text)), 0);
	assert_string_equal(text, p->files[0].text);
	/* Without the sums file herd init cannot tell: a file that is not
	 * the new text counts as changed. */
	snprintf(path, sizeof(path), "%s/" INITPROJ_SUMS, f->proj);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(initproj_write(p, f->proj, 1, &err), 0);
	put(f->proj, INITPROJ_SUMS, "not json");
	put(f->proj, "run.sh", "#!/bin/sh\n");
	assert_int_equal(initproj_write(p, f->proj, 1, &err), -1);
	assert_non_null(strstr(err.text, "run.sh changed since herd init "
					 "wrote it"));
	/* A symlink to the project, with or without a trailing slash. */
	snprintf(link, sizeof(link), "%s/link", f->dir);
	assert_int_equal(symlink(f->proj, link), 0);
	assert_int_equal(initproj_write(p, link, 1, &err), -1);
	assert_non_null(strstr(err.text, "is a symbolic link"));
	strcat(link, "/");
	assert_int_equal(initproj_write(p, link, 1, &err), -1);
	assert_non_null(strstr(err.text, "is a symbolic link"));
	assert_int_equal(chmod(f->proj, 0775), 0);
	assert_int_equal(initproj_write(p, f->proj, 2, &err), -1);
	assert_non_null(strstr(err.text, "writable by its group (mode 0775)"));
	initproj_free(p);
}

/* Renders herd's pretrain template with sets; fails on an error. */
static struct initproj *builtin(const struct render_var *sets, size_t n)
{
	struct herd_err err;
	struct initproj *p = initproj_load("templates", "pretrain", &err);

	if (!p)
		fail_msg("%s", err.text);
	if (initproj_render(p, "templates", sets, n, "/proj", "/bin/herd",
			    &err) < 0)
		fail_msg("%s", err.text);
	return p;
}

static bool has_next(const struct initproj *p, const char *line)
{
	for (size_t i = 0; i < p->n_next; i++)
		if (!strcmp(p->next[i], line))
			return true;
	return false;
}

/* Issue 22: nodes.min 1 (a project shrinks), --set min= spares=; the
 * ssh: section from --set identity= known_hosts= and the next steps
 * saying which; under Slurm herd sbatch --wait, not herd run. */
static void test_builtin_render(void **state)
{
	struct render_var slurm[] = {{"corpus", "/c"}};
	struct render_var hosts[] = {{"corpus", "/c"}, {"hosts", "n[1-4]"}};
	struct render_var keyed[] = {{"corpus", "/c"},	 {"hosts", "n[1-4]"},
				     {"identity", "/k"}, {"known_hosts", "/kh"},
				     {"min", "3"},	 {"spares", "n[5-6]"}};
	struct initproj *p;

	(void)state;
	p = builtin(slurm, 1);
	assert_string_equal(p->files[0].to, "job.yaml");
	assert_non_null(strstr(p->files[0].text, "\n  min: 1\n"));
	assert_non_null(strstr(p->files[0].text, "\n  # spares: not given\n"));
	assert_non_null(strstr(p->files[0].text, "\nssh:\n"));
	assert_true(has_next(p, "herd sbatch --wait job.yaml  # inside an "
				"allocation already: herd run job.yaml"));
	assert_false(has_next(p, "herd run job.yaml"));
	initproj_free(p);
	p = builtin(hosts, 2);
	assert_true(has_next(p, "herd run job.yaml"));
	assert_non_null(
	    strstr(p->files[0].text, "\n  # identity: not given\n"));
	assert_true(has_next(p, "# ssh (job.yaml's ssh:): key none given "
				"(--set identity=): ~/.ssh/config's, else "
				"~/.ssh/herd_ed25519 (herd keys job.yaml "
				"makes it) or the ssh agent's; host keys "
				"checked in ~/.ssh/known_hosts"));
	initproj_free(p);
	p = builtin(keyed, 6);
	assert_non_null(strstr(p->files[0].text, "\n  identity: \"/k\"\n"));
	assert_non_null(strstr(p->files[0].text, "\n  known_hosts: \"/kh\"\n"));
	assert_non_null(strstr(p->files[0].text, "\n  min: 3\n"));
	assert_non_null(strstr(p->files[0].text, "\n  spares: \"n[5-6]\"\n"));
	assert_true(has_next(p, "# ssh (job.yaml's ssh:): key /k; host keys "
				"checked in /kh"));
	initproj_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kinds),
	    cmocka_unit_test(test_builtin),
	    cmocka_unit_test(test_builtin_render),
	    cmocka_unit_test_setup_teardown(test_bad_manifests, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_missing_and_unknown, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_render, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_render_bad_result, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_write, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
