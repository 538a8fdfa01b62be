/* gen/initproj_render.c — the values of a project template checked by
 * their kind, and its files rendered with them; see gen/initproj.h. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "herd/hostlist.h"
#include "herd/suggest.h"
#include "launcher/gen/initproj.h"
#include "launcher/gen/template.h"

/* Placeholders herd run fills in at launch: kept as they are. */
static const char *const run_time[] = {"checkpoint", "resume_args", "attempt"};
#define N_RUN_TIME (sizeof(run_time) / sizeof(run_time[0]))

/* No control character, nor one of the characters that shell or YAML
 * quoting would read. */
static bool text_safe(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f ||
		    strchr("'\"\\$`", *s))
			return false;
	return true;
}

static bool all_digits(const char *s, size_t max)
{
	size_t n = strlen(s);

	return n && n <= max && strspn(s, "0123456789") == n;
}

/* A number as JSON and Python both read it: digits, then an optional
 * fraction and exponent (2e-5, 0.001, 10). */
static bool number_ok(const char *s)
{
	size_t n = strspn(s, "0123456789");

	if (!n || n > 32)
		return false;
	s += n;
	if (*s == '.') {
		n = strspn(++s, "0123456789");
		if (!n || n > 32)
			return false;
		s += n;
	}
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '-' || *s == '+')
			s++;
		n = strspn(s, "0123456789");
		if (!n || n > 3)
			return false;
		s += n;
	}
	return *s == '\0';
}

/* path made absolute with cwd ("./" prefixes dropped); malloc'd. */
static char *absolute(const char *path, const char *cwd, struct herd_err *err)
{
	char *out;

	if (path[0] == '/')
		out = strdup(path);
	else {
		while (path[0] == '.' && path[1] == '/')
			path += 2 + strspn(path + 2, "/");
		if (!strcmp(path, ".") || !*path)
			out = strdup(cwd);
		else if (asprintf(&out, "%s%s%s", cwd,
				  cwd[strlen(cwd) - 1] == '/' ? "" : "/",
				  path) < 0)
			out = NULL;
	}
	if (!out)
		herd_errprintf(err, "out of memory");
	return out;
}
/* value when it expands to at least one host, else NULL with err saying
 * what was expected (expect) and why. */
static char *hostlist_value(const char *value, const char *expect,
			    struct herd_err *err)
{
	struct hostlist *hl;
	struct herd_err e;

	if ((hl = hostlist_expand(value, &e)) && hostlist_count(hl) > 0) {
		hostlist_free(hl);
		return strdup(value);
	}
	hostlist_free(hl);
	herd_errprintf(err, "'%s': expected %s%s%s", value, expect,
		       hl ? "" : ": ", hl ? "" : e.text);
	return NULL;
}

char *initproj_value_check(const char *kind, char *const *choices,
			   const char *value, const char *cwd,
			   struct herd_err *err)
{
	size_t n = strlen(value);

	if (n > INITPROJ_VALUE_MAX) {
		herd_errprintf(err, "is longer than %d bytes",
			       INITPROJ_VALUE_MAX);
		return NULL;
	}
	if (!text_safe(value)) {
		herd_errprintf(err,
			       "'%s' holds a control character or one of "
			       "' \" \\ $ `, which herd does not write into "
			       "shell and YAML text",
			       value);
		return NULL;
	}
	if (!strcmp(kind, "int")) {
		if (all_digits(value, 9))
			return strdup(value);
		herd_errprintf(err, "'%s': expected a number", value);
	} else if (!strcmp(kind, "number")) {
		if (number_ok(value))
			return strdup(value);
		herd_errprintf(err,
			       "'%s': expected a number such as 3e-4 or "
			       "0.001",
			       value);
	} else if (!strcmp(kind, "args")) {
		/* Pasted as words: nothing the shell would read as more. */
		if (strspn(value, "abcdefghijklmnopqrstuvwxyz"
				  "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
				  " ._=,:/+-") == n)
			return strdup(value);
		herd_errprintf(err,
			       "'%s': expected arguments made of letters, "
			       "digits, spaces and . _ = , : / + -",
			       value);
	} else if (!strcmp(kind, "word")) {
		if (n && n <= 64 && value[0] != '-' && value[0] != '.' &&
		    strspn(value,
			   "abcdefghijklmnopqrstuvwxyz"
			   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n)
			return strdup(value);
		herd_errprintf(err,
			       "'%s': expected a word (letters, digits, "
			       "'.', '_', '-')",
			       value);
	} else if (!strcmp(kind, "choice")) {
		char known[512] = "";

		for (char *const *c = choices; c && *c; c++) {
			if (!strcmp(*c, value))
				return strdup(value);
			snprintf(known + strlen(known),
				 sizeof(known) - strlen(known), "%s%s",
				 known[0] ? ", " : "", *c);
		}
		herd_errprintf(err, "'%s': expected one of %s", value, known);
	} else if (!strcmp(kind, "path")) {
		if (n)
			return absolute(value, cwd, err);
		herd_errprintf(err, "is empty: expected a path");
	} else if (!strcmp(kind, "program")) {
		if (n && value[0] != '-' && !strchr(value, ' '))
			return strchr(value, '/') ? absolute(value, cwd, err)
						  : strdup(value);
		herd_errprintf(err,
			       "'%s': expected a program (a name or a path "
			       "without spaces)",
			       value);
	} else if (!strcmp(kind, "time")) {
		if (n && n <= 32 && strspn(value, "0123456789:-") == n)
			return strdup(value);
		herd_errprintf(err,
			       "'%s': expected a time limit as Slurm writes "
			       "it (MINUTES, H:MM:SS, D-HH:MM:SS)",
			       value);
	} else if (!strcmp(kind, "hosts")) {
		if (!strcmp(value, "slurm"))
			return strdup(value);
		return hostlist_value(
		    value, "slurm or a hostlist such as node[01-04]", err);
	} else if (!strcmp(kind, "hostlist")) {
		if (!n)
			return strdup(value);
		return hostlist_value(
		    value, "a hostlist such as node[05-06], or nothing", err);
	} else if (!strcmp(kind, "file")) {
		/* "~/" stays: herd expands it where it reads the file (the
		 * shell does not after "--set NAME="). */
		if (!n || !strncmp(value, "~/", 2))
			return strdup(value);
		return absolute(value, cwd, err);
	} else if (!strcmp(kind, "tokenizer")) {
		if (all_digits(value, 9))
			return strdup(value);
		if (n)
			return absolute(value, cwd, err);
		herd_errprintf(err, "is empty: expected a vocabulary size or a "
				    ".model file");
	} else {
		herd_errprintf(err, "unknown kind %s", kind);
	}
	return NULL;
}

/* The value given for name with --set (the first one), or NULL. */
static const char *set_of(const struct render_var *sets, size_t n,
			  const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(sets[i].name, name))
			return sets[i].value;
	return NULL;
}

/* Appends name=value (both copied) to vars.  Returns 0 or -1. */
static int var_add(struct render_var *vars, size_t *n, const char *name,
		   const char *value)
{
	char *nm = strdup(name), *val = strdup(value);

	if (!nm || !val) {
		free(nm);
		free(val);
		return -1;
	}
	vars[*n].name = nm;
	vars[(*n)++].value = val;
	return 0;
}

/* The kind's derived value of v (hosts: NAME.yaml; tokenizer:
 * NAME.args), appended to vars.  Returns 0 or -1. */
static int kind_derived(const struct initproj_value *v, const char *value,
			struct render_var *vars, size_t *n)
{
	char name[128], *text = NULL;
	int rc;

	if (!strcmp(v->kind, "hosts")) {
		snprintf(name, sizeof(name), "%s.yaml", v->name);
		if (!strcmp(value, "slurm"))
			text = strdup("slurm: true");
		else if (asprintf(&text, "hosts: \"%s\"", value) < 0)
			text = NULL;
	} else if (!strcmp(v->kind, "hostlist") || !strcmp(v->kind, "file")) {
		/* The job file's key of the same name; a comment when not
		 * given (the job's default holds). */
		snprintf(name, sizeof(name), "%s.yaml", v->name);
		if (asprintf(&text, *value ? "%s: \"%s\"" : "# %s: not given",
			     v->name, value) < 0)
			text = NULL;
	} else if (!strcmp(v->kind, "tokenizer")) {
		snprintf(name, sizeof(name), "%s.args", v->name);
		if (asprintf(&text,
			     all_digits(value, 9) ? "--vocab-size %s"
						  : "--tokenizer '%s'",
			     value) < 0)
			text = NULL;
	} else {
		return 0;
	}
	if (!text)
		return -1;
	rc = var_add(vars, n, name, text);
	free(text);
	return rc;
}

/* The value name in vars, or NULL. */
static const char *var_get(const struct render_var *vars, size_t n,
			   const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(vars[i].name, name))
			return vars[i].value;
	return NULL;
}

/* For the value of kind hosts: NAME.run, the command that runs the job
 * (herd sbatch --wait under Slurm, else herd run), and NAME.ssh, a
 * comment line saying how herd reaches the nodes (the file values
 * identity and known_hosts, or what herd uses without them).  Appended
 * to vars.  Returns 0 or -1. */
static int run_derived(const struct initproj *p, struct render_var *vars,
		       size_t *n)
{
	const char *hosts = NULL, *id, *kh, *name = NULL;
	char key[160], *run = NULL, *ssh = NULL;
	int rc = -1;

	for (size_t i = 0; i < p->n_values && !name; i++)
		if (!strcmp(p->values[i].kind, "hosts"))
			name = p->values[i].name;
	if (!name || !(hosts = var_get(vars, *n, name)))
		return 0;
	id = var_get(vars, *n, "identity");
	kh = var_get(vars, *n, "known_hosts");
	if (!strcmp(hosts, "slurm")) {
		run = strdup("herd sbatch --wait job.yaml  # inside an "
			     "allocation already: herd run job.yaml");
		ssh = strdup("# ssh: not used: in the allocation herd starts "
			     "its agents with srun");
	} else {
		run = strdup("herd run job.yaml");
		if (asprintf(&ssh,
			     "# ssh (job.yaml's ssh:): key %s; host keys "
			     "checked in %s",
			     id && *id ? id
				       : "none given (--set identity=): "
					 "~/.ssh/config's, else "
					 "~/.ssh/herd_ed25519 (herd keys "
					 "job.yaml makes it) or the ssh "
					 "agent's",
			     kh && *kh ? kh : "~/.ssh/known_hosts") < 0)
			ssh = NULL;
	}
	if (run && ssh) {
		snprintf(key, sizeof(key), "%s.run", name);
		rc = var_add(vars, n, key, run);
		snprintf(key, sizeof(key), "%s.ssh", name);
		if (rc == 0)
			rc = var_add(vars, n, key, ssh);
	}
	free(run);
	free(ssh);
	return rc;
}

/* Every --set names a value of p; else the error lists them. */
static int check_sets_known(const struct initproj *p,
			    const struct render_var *sets, size_t n_sets,
			    struct herd_err *err)
{
	char unknown[HERD_ERR_MAX / 4] = "", known[HERD_ERR_MAX / 2] = "";

	/* sets holds the last --set first: named in the order given. */
	for (size_t i = n_sets; i-- > 0;) {
		bool found = false;

		for (size_t k = 0; k < p->n_values && !found; k++)
			found = !strcmp(p->values[k].name, sets[i].name);
		for (size_t k = i + 1; k < n_sets && !found; k++)
			found = !strcmp(sets[k].name, sets[i].name);
		if (!found)
			snprintf(unknown + strlen(unknown),
				 sizeof(unknown) - strlen(unknown), "%s%s",
				 unknown[0] ? ", " : "", sets[i].name);
	}
	if (!unknown[0])
		return 0;
	if (!strchr(unknown, ',')) {
		const char *names[INITPROJ_ITEMS_MAX], *near;
		size_t n = 0;

		for (size_t k = 0; k < p->n_values && n < INITPROJ_ITEMS_MAX;
		     k++)
			names[n++] = p->values[k].name;
		if ((near = suggest_nearest(unknown, names, n)))
			return herd_errprintf(
			    err,
			    "--set %s: the %s template takes no such "
			    "value (did you mean '%s'?; herd init %s --help)",
			    unknown, p->name, near, p->name);
	}
	for (size_t k = 0; k < p->n_values; k++)
		snprintf(known + strlen(known), sizeof(known) - strlen(known),
			 "%s%s", k ? ", " : "", p->values[k].name);
	return herd_errprintf(err,
			      "--set %s: the %s template takes no such "
			      "value; it takes %s (herd init %s --help)",
			      unknown, p->name, known, p->name);
}

int initproj_render(struct initproj *p, const char *tdir,
		    const struct render_var *sets, size_t n_sets,
		    const char *project_dir, const char *herd,
		    struct herd_err *err)
{
	struct render_var
	    vars[3 * INITPROJ_ITEMS_MAX + INITPROJ_OWN_N + N_RUN_TIME + 2];
	char missing[HERD_ERR_MAX / 2] = "", bad[HERD_ERR_MAX / 2] = "";
	char cwd[PATH_MAX];
	size_t n = 0, n_missing = 0;
	int rc = -1;

	if (check_sets_known(p, sets, n_sets, err) < 0)
		return -1;
	for (size_t i = 0; i < p->n_values; i++)
		if (!set_of(sets, n_sets, p->values[i].name) &&
		    !p->values[i].def) {
			snprintf(missing + strlen(missing),
				 sizeof(missing) - strlen(missing), "%s%s",
				 n_missing++ ? ", " : "", p->values[i].name);
		}
	if (n_missing)
		return herd_errprintf(err,
				      "the %s template needs %s: give --set "
				      "NAME=VALUE for %s (herd init %s --help)",
				      p->name, missing,
				      n_missing > 1 ? "each" : "it", p->name);
	if (!getcwd(cwd, sizeof(cwd)))
		return herd_errprintf(err,
				      "cannot tell the current "
				      "directory: %s",
				      strerror(errno));
	if (!text_safe(herd))
		return herd_errprintf(err,
				      "%s: herd's own path holds a control "
				      "character or one of ' \" \\ $ `, which "
				      "the batch script cannot name",
				      herd);
	if (!text_safe(project_dir))
		return herd_errprintf(err,
				      "%s: the project's path holds a control "
				      "character or one of ' \" \\ $ `, which "
				      "herd does not write into shell and "
				      "YAML text",
				      project_dir);
	if (var_add(vars, &n, "project_dir", project_dir) < 0 ||
	    var_add(vars, &n, "herd", herd) < 0 ||
	    var_add(vars, &n, "template", p->name) < 0)
		goto oom;
	for (size_t i = 0; i < p->n_values; i++) {
		const struct initproj_value *v = &p->values[i];
		const char *given = set_of(sets, n_sets, v->name);
		struct herd_err e;
		char *value = initproj_value_check(
		    v->kind, v->choices, given ? given : v->def, cwd, &e);

		/* Every bad value named at once, as missing ones are. */
		if (!value) {
			snprintf(bad + strlen(bad), sizeof(bad) - strlen(bad),
				 "%s--set %s: %.200s", bad[0] ? "; " : "",
				 v->name, e.text);
			continue;
		}
		rc = var_add(vars, &n, v->name, value);
		if (rc == 0)
			rc = kind_derived(v, value, vars, &n);
		free(value);
		if (rc < 0)
			goto oom;
		rc = -1;
	}
	if (bad[0]) {
		herd_errprintf(err, "%s", bad);
		goto out;
	}
	if (run_derived(p, vars, &n) < 0)
		goto oom;
	/* Kept for herd run, after everything else. */
	for (size_t i = 0; i < N_RUN_TIME; i++) {
		char keep[32];

		snprintf(keep, sizeof(keep), "{{%s}}", run_time[i]);
		if (var_add(vars, &n, run_time[i], keep) < 0)
			goto oom;
	}
	for (size_t i = 0; i < p->n_derived; i++) {
		struct herd_err e;
		char *text = render_text(p->derived[2 * i + 1], vars, n, 1, &e);

		if (!text) {
			herd_errprintf(err, "%s template: derived.%s: %s",
				       p->name, p->derived[2 * i], e.text);
			goto out;
		}
		rc = var_add(vars, &n, p->derived[2 * i], text);
		free(text);
		if (rc < 0)
			goto oom;
		rc = -1;
	}
	for (size_t i = 0; i < p->n_next; i++) {
		char *text = render_text(p->next[i], vars, n, 1, err);

		if (!text)
			goto out;
		free(p->next[i]);
		p->next[i] = text;
	}
	for (size_t i = 0; i < p->n_files; i++) {
		struct initproj_file *f = &p->files[i];
		char path[PATH_MAX * 2];
		struct herd_err e;
		char *text;

		snprintf(path, sizeof(path), "%s/%s", tdir, f->from);
		if (!(text = template_read(path, err)))
			goto out;
		free(f->text);
		if (f->copy) {
			f->text = text;
		} else {
			f->text = render_text(text, vars, n, 1, &e);
			free(text);
			if (!f->text) {
				herd_errprintf(err, "%s: %s", path, e.text);
				goto out;
			}
		}
		/* 0755 is for scripts and every script is 0755: a manifest
		 * that disagrees with its file is a template's bug. */
		if ((f->mode == 0755) != !strncmp(f->text, "#!", 2)) {
			herd_errprintf(err, "%s: mode %04o, but %s with \"#!\"",
				       path, (unsigned)f->mode,
				       f->mode == 0755 ? "it does not start"
						       : "it starts");
			goto out;
		}
		if (template_check(f->to, f->text, err) < 0)
			goto out;
	}
	rc = 0;
	goto out;
oom:
	herd_errprintf(err, "out of memory");
	rc = -1;
out:
	for (size_t i = 0; i < n; i++) {
		free((char *)vars[i].name);
		free((char *)vars[i].value);
	}
	return rc;
}
