/* cmd/sbatch.c — `herd sbatch JOB.yaml [--dry-run] [--wait]`: render the
 * batch script, submit it with libslurm, print the job id. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "launcher/cli.h"
#include "herd/logtree.h"
#include "herd/spec.h"
#include "launcher/transport/slurm/sbatch.h"

extern char **environ;

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: herd sbatch JOB.yaml [--dry-run] [--wait [--parsable]]\n\n"
	    "Renders a batch script from templates/sbatch.sh.tmpl (next to\n"
	    "bin/herd: ../templates, or ../share/herd/templates) with the\n"
	    "slurm: section of the job as #SBATCH lines and a body that runs\n"
	    "'herd run JOB.yaml' inside the allocation, submits it with\n"
	    "libslurm and prints the job id (the id alone, for scripts).\n\n"
	    "  --dry-run   print the batch script; submit nothing\n"
	    "  --wait      follow the job to its end; exit with its exit\n"
	    "              status (not COMPLETED: a line saying its state).\n"
	    "              Prints 'submitted batch job ID (output: FILE)',\n"
	    "              then a line 'job ID: STATE' at each change\n"
	    "              (PENDING, RUNNING on NODES, COMPLETED)\n"
	    "  --parsable  with --wait: print only the job id, as without\n"
	    "  -h, --help  show this text\n\n"
	    "The job runs in the current directory, with the current\n"
	    "environment; a relative slurm.output is relative to it, and its\n"
	    "directory is created.  slurm.nodes defaults to nodes.count, else\n"
	    "1.  slurm.extra may hold --constraint, --gres, --mem,\n"
	    "--mem-per-cpu, --exclude, --nodelist, --reservation and\n"
	    "--cpus-per-task; herd sets these in the job itself, since Slurm\n"
	    "does not read #SBATCH lines of a script submitted this way.\n\n"
	    "Exit status: 0, the job id printed; 1, Slurm refused the job or\n"
	    "could"
	    " not be reached; 2, a bad job file or usage.\n");
}

/* Variables sbatch adds to the job's environment and herd adds too:
 * slurmstepd reads SLURM_JOB_NAME for %x in output paths, SLURM_UMASK
 * for the umask of the batch script. */
enum { ENV_SUBMIT_DIR, ENV_SUBMIT_HOST, ENV_JOB_NAME, ENV_UMASK, ENV_ADDED };

static bool env_added(const char *entry, char *const *added)
{
	for (int i = 0; i < ENV_ADDED; i++) {
		size_t n = strcspn(added[i], "=") + 1;

		if (!strncmp(entry, added[i], n))
			return true;
	}
	return false;
}

/* The job's environment: ours, as sbatch --export=ALL passes it (SLURM_CONF
 * and PATH among it), with the variables above set as sbatch sets them
 * (a SLURM_UMASK of ours is kept, as sbatch keeps it).  The strings are
 * environ's or added[]'s (ENV_ADDED entries, malloc'd, the caller frees
 * them); the array is malloc'd. */
static char **job_env(const char *cwd, const char *name, char **added)
{
	char host[HOST_NAME_MAX + 1] = "";
	const char *umask_env = getenv("SLURM_UMASK");
	mode_t mask = umask(0);
	size_t n = 0, k = 0;
	char **env;

	umask(mask);
	gethostname(host, sizeof(host) - 1);
	if (asprintf(&added[ENV_SUBMIT_DIR], "SLURM_SUBMIT_DIR=%s", cwd) < 0)
		added[ENV_SUBMIT_DIR] = NULL;
	if (asprintf(&added[ENV_SUBMIT_HOST], "SLURM_SUBMIT_HOST=%s", host) < 0)
		added[ENV_SUBMIT_HOST] = NULL;
	if (asprintf(&added[ENV_JOB_NAME], "SLURM_JOB_NAME=%s", name) < 0)
		added[ENV_JOB_NAME] = NULL;
	if ((umask_env
		 ? asprintf(&added[ENV_UMASK], "SLURM_UMASK=%s", umask_env)
		 : asprintf(&added[ENV_UMASK], "SLURM_UMASK=0%o",
			    (unsigned)mask)) < 0)
		added[ENV_UMASK] = NULL;
	for (int i = 0; i < ENV_ADDED; i++)
		if (!added[i])
			return NULL;
	for (char **e = environ; *e; e++)
		n++;
	env = calloc(n + ENV_ADDED + 1, sizeof(*env));
	if (!env)
		return NULL;
	for (char **e = environ; *e; e++)
		if (!env_added(*e, added))
			env[k++] = *e;
	for (int i = 0; i < ENV_ADDED; i++)
		env[k++] = added[i];
	env[k] = NULL;
	return env;
}

/* mkdir -p: Slurm does not make the output file's directory, and a job
 * whose output cannot be opened fails without a word.  Missing
 * directories get log.mode's directory mode (0700 by default): the
 * output holds every rank's output, as the rank logs do. */
static int make_dirs(const char *path, unsigned int mode)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);
	struct stat st;

	if (len >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || !*p) {
			char c = *p;

			*p = '\0';
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return -1;
			*p = c;
			if (!c)
				break;
		}
	}
	if (stat(buf, &st) < 0)
		return -1;
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	return 0;
}

/* --wait: the job's output file once, then each state it is seen in. */
static void print_seen(uint32_t job_id, const struct sbatch_seen *seen,
		       void *arg)
{
	(void)arg;
	if (seen->first)
		printf("submitted batch job %u (output: %s)\n", job_id,
		       seen->output[0] ? seen->output : "unknown");
	printf("job %u: %s", job_id, seen->state);
	if (seen->nodes && !strcmp(seen->state, "RUNNING"))
		printf(" on %s", seen->nodes);
	putchar('\n');
	fflush(stdout);
}

int cmd_sbatch(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"dry-run", no_argument, NULL, 'n'},
	    {"wait", no_argument, NULL, 'W'},
	    {"parsable", no_argument, NULL, 'P'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	char self[PATH_MAX], job_file[PATH_MAX], cwd[PATH_MAX];
	char *tmpl = NULL, *script = NULL, *added[ENV_ADDED] = {NULL};
	char **env = NULL;
	struct spec *spec = NULL;
	struct sbatch *sb = NULL;
	struct sbatch_end end;
	unsigned int out_mode;
	struct herd_err err;
	bool dry_run = false, wait = false, slurm = false, parsable = false;
	uint32_t job_id;
	ssize_t n;
	int ch, status = 1;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, "nWh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'n':
			dry_run = true;
			break;
		case 'W':
			wait = true;
			break;
		case 'P':
			parsable = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return cli_bad_option("sbatch", cli_bad_word(argc, argv),
					      usage);
		}
	}
	if (optind != argc - 1)
		return cli_usage("sbatch",
				 "expected one job file (JOB.yaml), "
				 "got %d arguments",
				 argc - optind);
	if (dry_run && wait)
		return cli_usage("sbatch", "--dry-run submits nothing to wait "
					   "for");
	if (parsable && !wait)
		return cli_usage("sbatch",
				 "--parsable goes with --wait (without "
				 "it the job id is all herd sbatch "
				 "prints)");
	herd_err_clear(&err);
	spec = spec_load(argv[optind], &err);
	if (!spec) {
		fprintf(stderr, "%s\n", err.text);
		return EXIT_SPEC;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0) {
		cli_error("sbatch: cannot find bin/herd: %s", strerror(errno));
		goto out;
	}
	self[n] = '\0';
	if (!realpath(argv[optind], job_file) || !getcwd(cwd, sizeof(cwd))) {
		cli_error("sbatch: %s: %s", argv[optind], strerror(errno));
		goto out;
	}
	sb = sbatch_new(spec, self, job_file, cwd, &err);
	if (!sb) {
		cli_error("sbatch: %s: %s", argv[optind], err.text);
		status = EXIT_SPEC;
		goto out;
	}
	tmpl = sbatch_template_load(self, &err);
	if (!tmpl) {
		cli_error("sbatch: %s", err.text);
		goto out;
	}
	script = sbatch_script(sb, tmpl, &err);
	if (!script) {
		cli_error("sbatch: %s", err.text);
		goto out;
	}
	if (dry_run) {
		fputs(script, stdout);
		status = fflush(stdout) ? 1 : 0;
		goto out;
	}
	env = job_env(cwd, spec->name, added);
	if (!env) {
		cli_error("sbatch: out of memory");
		goto out;
	}
	out_mode = logtree_dir_mode(spec->log.mode);
	if (sbatch_output_dir(sb) &&
	    make_dirs(sbatch_output_dir(sb), out_mode) < 0) {
		cli_error("sbatch: cannot make %s for slurm.output: %s",
			  sbatch_output_dir(sb), strerror(errno));
		goto out;
	}
	sbatch_slurm_init();
	slurm = true;
	if (sbatch_submit(sb, script, env, &job_id, &err) < 0) {
		cli_error("sbatch: %s", err.text);
		goto out;
	}
	if (!wait || parsable) {
		printf("%u\n", job_id);
		if (fflush(stdout))
			goto out;
	}
	if (!wait) {
		status = 0;
		goto out;
	}
	if (sbatch_wait(job_id, parsable ? NULL : print_seen, NULL, &end,
			&err) < 0) {
		cli_error("sbatch: %s", err.text);
		goto out;
	}
	if (!end.completed || end.status)
		cli_error("sbatch: job %u ended %s, exit status %d", job_id,
			  end.state, end.status);
	status = end.status;
out:
	if (slurm)
		sbatch_slurm_fini();
	free(env);
	for (int i = 0; i < ENV_ADDED; i++)
		free(added[i]);
	free(script);
	free(tmpl);
	sbatch_free(sb);
	spec_free(spec);
	return status;
}
