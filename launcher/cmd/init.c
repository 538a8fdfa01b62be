/* cmd/init.c — `herd init TEMPLATE DIR [--set K=V ...] [--force]`: write
 * a whole project (job, training scripts, DeepSpeed config, batch
 * scripts, README) from one of herd's project templates (gen/initproj.h). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "launcher/cli.h"
#include "herd/render.h"
#include "launcher/gen/initproj.h"
#include "launcher/gen/template.h"
#include "launcher/gen/tune.h"

/* Writing the project failed: not the user's input. */
#define EXIT_RUNTIME 1

/* More --set options than this is a runaway script. */
#define SETS_MAX 256

static void init_usage(FILE *out)
{
	fprintf(out,
		"usage: herd init TEMPLATE DIR [--set NAME=VALUE ...] "
		"[--force]\n"
		"                 [--tune [--platform FILE]]\n"
		"       herd init --list\n"
		"       herd init TEMPLATE --help\n"
		"\n"
		"Writes a complete training project into DIR (made when "
		"missing):\n"
		"job.yaml (the herd job), train.py, tokenize_corpus.py and "
		"tokenize.yaml\n"
		"(tokenize_corpus.py over the nodes), ds_zero3.json,\n"
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
		"named) that\n"
		"                    are as herd init wrote them "
		"(DIR/" INITPROJ_SUMS " holds\n"
		"                    their SHA-256); a file changed since, "
		"or not herd\n"
		"                    init's, is refused: nothing is written\n"
		"  --force --force   replace changed files too, each kept as "
		"FILE.orig\n"
		"  --tune            set ds_zero3.json's bucket sizes from the "
		"network of\n"
		"                    the project's nodes, as herd render "
		"ds_zero3 --tune\n"
		"                    does (a platform file, else a herd bench "
		"run)\n"
		"  --platform FILE   with --tune: the platform file to read\n"
		"  --list            the templates, a line each\n"
		"  -h, --help        this text; after TEMPLATE, the "
		"template's values\n"
		"  --                what follows is TEMPLATE and DIR, even "
		"when it\n"
		"                    starts with '-'\n"
		"\n"
		"Paths given with --set are made absolute.  What is written "
		"is checked\n"
		"first: ds_zero3.json must be JSON, job.yaml a valid herd "
		"job.\n"
		"\n"
		"Values every template takes (TEMPLATE --help lists them "
		"all):\n"
		"  hosts=slurm|HOSTLIST  the nodes; slurm (the default): those "
		"of the\n"
		"                    allocation, and the next steps run the "
		"job with\n"
		"                    herd sbatch --wait job.yaml, not herd "
		"run\n"
		"  min=N             nodes.min: after losing nodes the job "
		"restarts on\n"
		"                    spares, else on at least N nodes "
		"(default 1: it\n"
		"                    shrinks; train.py says the new global "
		"batch)\n"
		"  spares=HOSTLIST   nodes.spares, taken before shrinking "
		"(default none)\n"
		"  identity=FILE, known_hosts=FILE\n"
		"                    job.yaml's ssh: key and host keys; "
		"without them\n"
		"                    herd uses ~/.ssh/config, "
		"~/.ssh/herd_ed25519 or the\n"
		"                    ssh agent, and ~/.ssh/known_hosts (the "
		"next steps\n"
		"                    say which)\n"
		"\n"
		"train.py checkpoints the step it reached on SIGTERM (herd "
		"stop, scancel,\n"
		"a preemption; Slurm's --signal) and exits, within "
		"health.grace.\n"
		"\n"
		"Exit status: 0 success; 1 DIR could not be written; 2 a "
		"missing,\n"
		"unknown or bad value, files that exist without --force, a "
		"DIR that\n"
		"is a symlink or not yours or under a directory or link of "
		"another\n"
		"user's, files changed since herd init wrote them\n"
		"without --force twice, or bad usage.\n");
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

/* --tune: the four sizes of the project's ds_zero3.json for the network
 * of its job.yaml (tune.h), set through jansson and written back
 * atomically (a new file in the project directory, renamed over it), in
 * dir opened and checked again as initproj_write does (initproj_open_dir)
 * and relative to that fd.  Returns 0, or an exit status said on stderr. */
static int tune_project(const char *dir, const char *proj, const char *platform)
{
	char job[PATH_MAX], ds[PATH_MAX], tmp[NAME_MAX + 1];
	struct tune_result r;
	struct herd_err err;
	json_error_t jerr;
	json_t *doc, *z, *b, *f;
	int rc, fd, dfd, elem;

	herd_err_clear(&err);
	if (snprintf(job, sizeof(job), "%s/job.yaml", proj) >=
		(int)sizeof(job) ||
	    snprintf(ds, sizeof(ds), "%s/ds_zero3.json", proj) >=
		(int)sizeof(ds)) {
		cli_error("init: --tune: %s: path too long", proj);
		return EXIT_SPEC;
	}
	snprintf(tmp, sizeof(tmp), ".ds_zero3.json.herd-init-%ld",
		 (long)getpid());
	if ((dfd = initproj_open_dir(dir, &err)) < 0) {
		cli_error("init: --tune: %s", err.text);
		return dfd == -2 ? EXIT_RUNTIME : EXIT_SPEC;
	}
	if ((fd = openat(dfd, "ds_zero3.json",
			 O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		cli_error("init: --tune: cannot read %s: %s", ds,
			  strerror(errno));
		close(dfd);
		return EXIT_SPEC;
	}
	doc = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
	close(fd);
	if (!doc) {
		cli_error("init: --tune: %s:%d:%d: %s", ds, jerr.line,
			  jerr.column, jerr.text);
		close(dfd);
		return EXIT_SPEC;
	}
	z = json_object_get(doc, "zero_optimization");
	b = json_object_get(json_object_get(doc, "bf16"), "enabled");
	f = json_object_get(json_object_get(doc, "fp16"), "enabled");
	if (!json_is_object(z)) {
		cli_error("init: --tune: %s has no zero_optimization object",
			  ds);
		json_decref(doc);
		close(dfd);
		return EXIT_SPEC;
	}
	elem = json_is_true(b) || json_is_true(f) ? 2 : 4;
	if ((rc = tune_job(job, platform, elem, &r, &err)) != 0) {
		cli_error("init: --tune: %s; the project is written, its "
			  "ds_zero3.json keeps the template's sizes",
			  err.text);
		json_decref(doc);
		close(dfd);
		return rc;
	}
	tune_print(stderr, &r);
	json_object_set_new(z, "reduce_bucket_size",
			    json_integer(r.tuned.reduce_bucket_size));
	json_object_set_new(z, "allgather_bucket_size",
			    json_integer(r.tuned.allgather_bucket_size));
	json_object_set_new(z, "stage3_prefetch_bucket_size",
			    json_integer(r.tuned.prefetch_bucket_size));
	json_object_set_new(z, "stage3_param_persistence_threshold",
			    json_integer(r.tuned.param_persistence_threshold));
	rc = 0;
	fd = openat(dfd, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		bool ok =
		    fchmod(fd, 0644) == 0 &&
		    json_dumpfd(doc, fd,
				JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0 &&
		    write(fd, "\n", 1) == 1 && fsync(fd) == 0;
		int e = errno;

		if (close(fd) < 0 && ok)
			e = errno, ok = false;
		if (ok && renameat(dfd, tmp, dfd, "ds_zero3.json") < 0)
			e = errno, ok = false;
		if (!ok)
			unlinkat(dfd, tmp, 0);
		errno = e;
		fd = ok ? 0 : -1;
	}
	if (fd < 0) {
		cli_error("init: --tune: cannot write %s: %s", ds,
			  strerror(errno));
		rc = EXIT_RUNTIME;
	} else {
		printf("tuned %s (reduce_bucket_size %ld)\n", ds,
		       r.tuned.reduce_bucket_size);
	}
	json_decref(doc);
	close(dfd);
	return rc;
}

int cmd_init(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"list", no_argument, NULL, 'l'},
	    {"force", no_argument, NULL, 'f'},
	    {"tune", no_argument, NULL, 't'},
	    {"platform", required_argument, NULL, 'p'},
	    {"set", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct render_var sets[SETS_MAX];
	char self[PATH_MAX], tdir[PATH_MAX], proj[PATH_MAX];
	const char *tmpl = NULL, *dir = NULL, *platform = NULL;
	struct initproj *p = NULL;
	bool list = false, help = false, tune = false;
	int force = 0; /* --force given twice: changed files too */
	size_t n_sets = 0;
	struct herd_err err;
	int status = EXIT_SPEC, rc, c;
	ssize_t len;

	herd_err_clear(&err);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			help = true;
			break;
		case 'l':
			list = true;
			break;
		case 'f':
			force++;
			break;
		case 't':
			tune = true;
			break;
		case 'p':
			platform = optarg;
			break;
		case 's':
			if (cli_set_push("init: ", optarg, sets, &n_sets,
					 SETS_MAX) < 0)
				goto out;
			break;
		case ':':
			if (optopt == 'p')
				cli_error("init: --platform needs a FILE");
			else
				cli_error("init: --set needs NAME=VALUE");
			goto out;
		default:
			cli_bad_option("init", cli_bad_word(argc, argv), init_usage);
			goto out;
		}
	}
	if (argc - optind > 2) {
		cli_error("init: one template and one directory ('%s' is a "
			  "third)",
			  argv[optind + 2]);
		goto out;
	}
	if (optind < argc)
		tmpl = argv[optind];
	if (optind + 1 < argc)
		dir = argv[optind + 1];
	if (platform && !tune) {
		cli_error("init: --platform goes with --tune");
		goto out;
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
		cli_usage("init", "expected a TEMPLATE and a DIR (herd init "
				  "--list shows the templates)");
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
	for (size_t i = 0; i < p->n_files; i++) {
		printf("%s %s/%s", p->files[i].replaced ? "replaced" : "wrote",
		       proj, p->files[i].to);
		if (p->files[i].kept)
			printf(" (yours, changed since herd init wrote it, "
			       "kept as %s.orig)",
			       p->files[i].to);
		printf("\n");
	}
	fflush(stdout);
	if (tune && (rc = tune_project(dir, proj, platform)) != 0) {
		status = rc;
		goto out;
	}
	if (tune &&
	    (rc = initproj_sums_update(dir, "ds_zero3.json", &err)) < 0) {
		cli_error("init: --tune: %s", err.text);
		status = rc == -2 ? EXIT_RUNTIME : EXIT_SPEC;
		goto out;
	}
	if (p->n_next) {
		printf("\nnext steps:\n");
		for (size_t i = 0; i < p->n_next; i++)
			if (p->next[i][0])
				printf("  %s\n", p->next[i]);
	}
	status = 0;
out:
	for (size_t i = 0; i < n_sets; i++)
		free((char *)sets[i].name);
	initproj_free(p);
	return status;
}
