/* cmd_init.c — `herd init TEMPLATE DIR [--set K=V ...] [--force]`: write
 * a whole project (job, training scripts, DeepSpeed config, batch
 * scripts, README) from one of herd's project templates (initproj.h). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "herd/render.h"
#include "initproj.h"
#include "template.h"

/* Writing the project failed: not the user's input. */
#define EXIT_RUNTIME 1

/* More --set options than this is a runaway script. */
#define SETS_MAX 256

static void init_usage(FILE *out)
{
	fprintf(out,
		"usage: herd init TEMPLATE DIR [--set NAME=VALUE ...] "
		"[--force]\n"
		"       herd init --list\n"
		"       herd init TEMPLATE --help\n"
		"\n"
		"Writes a complete training project into DIR (made when "
		"missing):\n"
		"job.yaml (the herd job), train.py, tokenize.py and "
		"tokenize.yaml\n"
		"(tokenize.py over the nodes), ds_zero3.json,\n"
		"batch.sbatch (herd under Slurm), srun-pmix.sbatch (Slurm "
		"without\n"
		"herd) and a README.md with the steps from here to a "
		"finished run.\n"
		"\n"
		"  --set NAME=VALUE  a value of the template (TEMPLATE --help "
		"lists\n"
		"                    them); every value without a default "
		"must be given\n"
		"  --force           replace files DIR holds already (each is "
		"named)\n"
		"  --list            the templates, a line each\n"
		"  -h, --help        this text; after TEMPLATE, the "
		"template's values\n"
		"\n"
		"Paths given with --set are made absolute.  What is written "
		"is checked\n"
		"first: ds_zero3.json must be JSON, job.yaml a valid herd "
		"job.\n"
		"\n"
		"Exit status: 0 success; 1 DIR could not be written; 2 a "
		"missing,\n"
		"unknown or bad value, files that exist without --force, a "
		"DIR that\n"
		"is a symlink or not yours, or bad usage.\n");
}

static int list_templates(const char *tdir)
{
	struct herd_err err;
	char **names = initproj_names(tdir, &err);

	if (!names) {
		cli_error("init: %s", err.text);
		return EXIT_SPEC;
	}
	for (char **p = names; *p; p++) {
		struct initproj *t = initproj_load(tdir, *p, &err);

		if (t)
			printf("%-10s %s\n", *p, t->about);
		else
			cli_error("init: %s", err.text);
		initproj_free(t);
		free(*p);
	}
	free(names);
	return 0;
}

static void template_help(const struct initproj *p)
{
	printf("herd init %s DIR: %s\n\nvalues (--set NAME=VALUE):\n", p->name,
	       p->about);
	for (size_t i = 0; i < p->n_values; i++) {
		const struct initproj_value *v = &p->values[i];

		printf("  %-15s %s", v->name, v->about);
		if (v->def)
			printf(" (default %s)\n", v->def[0] ? v->def : "''");
		else
			printf(" (required)\n");
	}
	printf("\nfiles:");
	for (size_t i = 0; i < p->n_files; i++)
		printf(" %s", p->files[i].to);
	printf("\n");
}

/* The project directory's absolute path (its parent's real path, so a
 * project made from a symlinked parent still names a real place). */
static int project_path(const char *dir, char *out, size_t size)
{
	char parent[PATH_MAX], real[PATH_MAX], *copy = strdup(dir), *slash;
	const char *base;
	size_t n;

	if (!copy)
		return -1;
	n = strlen(copy);
	while (n > 1 && copy[n - 1] == '/')
		copy[--n] = '\0';
	slash = strrchr(copy, '/');
	if (!slash) {
		snprintf(parent, sizeof(parent), ".");
		base = copy;
	} else {
		snprintf(parent, sizeof(parent), "%.*s",
			 slash == copy ? 1 : (int)(slash - copy), copy);
		base = slash + 1;
	}
	if (!realpath(parent, real) || !*base || !strcmp(base, ".") ||
	    !strcmp(base, "..")) {
		if (!realpath(copy, real)) {
			free(copy);
			return -1;
		}
		snprintf(out, size, "%s", real);
		free(copy);
		return 0;
	}
	if (snprintf(out, size, "%s%s%s", real, strcmp(real, "/") ? "/" : "",
		     base) >= (int)size) {
		free(copy);
		errno = ENAMETOOLONG;
		return -1;
	}
	free(copy);
	return 0;
}

int cmd_init(int argc, char **argv)
{
	struct render_var sets[SETS_MAX];
	char self[PATH_MAX], tdir[PATH_MAX], proj[PATH_MAX];
	const char *tmpl = NULL, *dir = NULL;
	struct initproj *p = NULL;
	bool list = false, help = false, force = false;
	size_t n_sets = 0;
	struct herd_err err;
	int status = EXIT_SPEC, rc;
	ssize_t len;

	herd_err_clear(&err);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *kv = NULL, *eq;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			help = true;
		} else if (!strcmp(a, "--list")) {
			list = true;
		} else if (!strcmp(a, "--force")) {
			force = true;
		} else if (!strcmp(a, "--set") || !strncmp(a, "--set=", 6)) {
			if (a[5] == '=')
				kv = a + 6;
			else if (i + 1 < argc)
				kv = argv[++i];
			else {
				cli_error("init: --set needs NAME=VALUE");
				goto out;
			}
			eq = strchr(kv, '=');
			if (!eq || eq == kv) {
				cli_error("init: --set %s: expected NAME=VALUE",
					  kv);
				goto out;
			}
			if (n_sets == SETS_MAX) {
				cli_error("init: more than %d --set options",
					  SETS_MAX);
				goto out;
			}
			/* The first match wins: the last --set of a name
			 * goes first. */
			memmove(sets + 1, sets, n_sets * sizeof(*sets));
			sets[0].name = strndup(kv, (size_t)(eq - kv));
			sets[0].value = eq + 1;
			n_sets++;
			if (!sets[0].name) {
				cli_error("out of memory");
				goto out;
			}
		} else if (a[0] == '-' && a[1]) {
			cli_error("init: unknown option '%s' (try 'herd init "
				  "--help')",
				  a);
			goto out;
		} else if (!tmpl) {
			tmpl = a;
		} else if (!dir) {
			dir = a;
		} else {
			cli_error("init: one template and one directory ('%s' "
				  "is a third)",
				  a);
			goto out;
		}
	}
	if (help && !tmpl) {
		init_usage(stdout);
		status = 0;
		goto out;
	}
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len < 0) {
		cli_error("init: cannot find herd itself: %s", strerror(errno));
		goto out;
	}
	self[len] = '\0';
	if (template_dir(self, tdir, sizeof(tdir), &err) < 0) {
		cli_error("init: %s", err.text);
		goto out;
	}
	if (list) {
		status = list_templates(tdir);
		goto out;
	}
	if (!tmpl) {
		init_usage(stderr);
		goto out;
	}
	if (!(p = initproj_load(tdir, tmpl, &err))) {
		cli_error("init: %s", err.text);
		goto out;
	}
	if (help) {
		template_help(p);
		status = 0;
		goto out;
	}
	if (!dir) {
		cli_error("init: where should the project go? herd init %s "
			  "DIR [--set NAME=VALUE ...]",
			  tmpl);
		goto out;
	}
	if (project_path(dir, proj, sizeof(proj)) < 0) {
		/* Its parent is missing: the same error as a failed mkdir. */
		cli_error("init: cannot make %s: %s", dir, strerror(errno));
		status = EXIT_RUNTIME;
		goto out;
	}
	if (initproj_render(p, tdir, sets, n_sets, proj, self, &err) < 0) {
		cli_error("init: %s", err.text);
		goto out;
	}
	if ((rc = initproj_write(p, dir, force, &err)) < 0) {
		cli_error("init: %s", err.text);
		/* A refusal is about the user's input; a failed write not. */
		status = rc == -2 ? EXIT_RUNTIME : EXIT_SPEC;
		goto out;
	}
	for (size_t i = 0; i < p->n_files; i++)
		printf("%s %s/%s\n",
		       p->files[i].replaced ? "replaced" : "wrote", proj,
		       p->files[i].to);
	if (p->n_next) {
		printf("\nnext steps:\n");
		for (size_t i = 0; i < p->n_next; i++)
			printf("  %s\n", p->next[i]);
	}
	status = 0;
out:
	for (size_t i = 0; i < n_sets; i++)
		free((char *)sets[i].name);
	initproj_free(p);
	return status;
}
