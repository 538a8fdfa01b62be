/* sbatch.c — batch script and Slurm job description of `herd sbatch`;
 * see sbatch.h. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "herd/render.h"
#include "launcher/transport/slurm/sbatch.h"
#include "launcher/gen/template.h"

/* Only what <slurm/slurm.h> declares is used: libslurm's private
 * helpers (its time parser, its state names, its log options) have no
 * stable layout, and a declaration of our own would compile against a
 * libslurm that lays them out otherwise and corrupt memory there. */

/* Slurm's words for the base job states (what squeue prints), indexed by
 * the header's enum job_states. */
static const char *const job_state_names[JOB_END] = {
    [JOB_PENDING] = "PENDING",	   [JOB_RUNNING] = "RUNNING",
    [JOB_SUSPENDED] = "SUSPENDED", [JOB_COMPLETE] = "COMPLETED",
    [JOB_CANCELLED] = "CANCELLED", [JOB_FAILED] = "FAILED",
    [JOB_TIMEOUT] = "TIMEOUT",	   [JOB_NODE_FAIL] = "NODE_FAIL",
    [JOB_PREEMPTED] = "PREEMPTED", [JOB_BOOT_FAIL] = "BOOT_FAIL",
    [JOB_DEADLINE] = "DEADLINE",   [JOB_OOM] = "OUT_OF_MEMORY",
};

static const char *job_state_name(uint32_t state)
{
	uint32_t base = state & JOB_STATE_BASE;

	return base < JOB_END && job_state_names[base] ? job_state_names[base]
						       : "UNKNOWN";
}

/* Reads one run of digits at *p into *v (at most 9 digits: no overflow
 * in the sum below).  Returns 0, or -1 when *p is no digit. */
static int time_field(const char **p, long *v)
{
	int n = 0;

	*v = 0;
	while (isdigit((unsigned char)**p) && n < 10) {
		*v = *v * 10 + (**p - '0');
		(*p)++;
		n++;
	}
	return n && n < 10 ? 0 : -1;
}

/* A slurm.time value the way sbatch --time reads it: MINUTES, MM:SS,
 * HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, or "-1", "infinite",
 * "unlimited" (any case).  Returns whole minutes (seconds round up),
 * (long)INFINITE, or -1 for text it cannot read. */
static long time_minutes(const char *s)
{
	long f[4], secs;
	int n = 0;
	bool days = false;
	const char *p = s;

	if (!strcmp(s, "-1") || !strcasecmp(s, "infinite") ||
	    !strcasecmp(s, "unlimited"))
		return (long)INFINITE;
	if (time_field(&p, &f[n++]) < 0)
		return -1;
	if (*p == '-') {
		days = true;
		p++;
		if (time_field(&p, &f[n++]) < 0)
			return -1;
	}
	while (*p == ':' && n < 4) {
		p++;
		if (time_field(&p, &f[n++]) < 0)
			return -1;
	}
	if (*p)
		return -1;
	if (days) /* D-HH[:MM[:SS]] */
		secs = f[0] * 86400 + f[1] * 3600 + (n > 2 ? f[2] * 60 : 0) +
		       (n > 3 ? f[3] : 0);
	else if (n == 3) /* HH:MM:SS */
		secs = f[0] * 3600 + f[1] * 60 + f[2];
	else if (n <= 2) /* MINUTES[:SS] */
		secs = f[0] * 60 + (n > 1 ? f[1] : 0);
	else
		return -1;
	return (secs + 59) / 60;
}

/* libslurm prints its own messages ("error: ...") on stderr, at a level
 * only its private log options change.  herd reports each failure once,
 * in its own words, so each libslurm call that may log runs between
 * quiet_begin() and quiet_end(), with fd 2 on /dev/null (herd sbatch has
 * one thread: nothing of herd's is written meanwhile).  Returns the saved
 * stderr, or -1 (then nothing was changed). */
static int quiet_begin(void)
{
	int saved, null;

	fflush(stderr);
	null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null < 0)
		return -1;
	saved = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
	if (saved >= 0 && dup2(null, STDERR_FILENO) < 0) {
		close(saved);
		saved = -1;
	}
	close(null);
	return saved;
}

/* Puts stderr back (saved: quiet_begin's); keeps errno, which holds
 * libslurm's answer. */
static void quiet_end(int saved)
{
	int e = errno;

	if (saved >= 0) {
		fflush(stderr);
		dup2(saved, STDERR_FILENO);
		close(saved);
	}
	errno = e;
}

/* slurm.extra lines herd maps to job description fields. */
enum extra_field {
	EXTRA_FEATURES,
	EXTRA_GRES,
	EXTRA_MEM,
	EXTRA_MEM_PER_CPU,
	EXTRA_EXCLUDE,
	EXTRA_NODELIST,
	EXTRA_RESERVATION,
	EXTRA_CPUS_PER_TASK,
};

static const struct extra_opt {
	const char *name; /* long option, without "--" */
	char short_name;  /* 0: none */
	enum extra_field field;
} extra_opts[] = {
    {"constraint", 'C', EXTRA_FEATURES},
    {"gres", 0, EXTRA_GRES},
    {"mem", 0, EXTRA_MEM},
    {"mem-per-cpu", 0, EXTRA_MEM_PER_CPU},
    {"exclude", 'x', EXTRA_EXCLUDE},
    {"nodelist", 'w', EXTRA_NODELIST},
    {"reservation", 0, EXTRA_RESERVATION},
    {"cpus-per-task", 'c', EXTRA_CPUS_PER_TASK},
};

#define EXTRA_SUPPORTED                                                        \
	"--constraint (-C), --gres, --mem, --mem-per-cpu, --exclude (-x), "    \
	"--nodelist (-w), --reservation, --cpus-per-task (-c)"

struct sbatch {
	char *name, *herd, *job_file, *workdir;
	char *output;	  /* absolute; NULL: Slurm's slurm-%j.out */
	char *output_dir; /* see sbatch_output_dir() */
	const char *partition, *account, *qos, *time; /* the spec's; NULL:
						       * not set */
	uint32_t time_limit; /* minutes; NO_VAL: the partition's */
	uint32_t nodes;
	uint32_t gpus_per_node; /* 0: none */
	bool exclusive, requeue;
	char *features, *gres, *exc_nodes, *req_nodes, *reservation;
	uint64_t memory;	/* MB (| MEM_PER_CPU); NO_VAL64: not set */
	uint16_t cpus_per_task; /* NO_VAL16: not set */
	char *tres_per_node;	/* "gres:gpu:N" and --gres, ','-joined */
	const struct spec_strv *extra; /* the spec's, written verbatim */
};

/* A value that goes on an #SBATCH line: sbatch reads the line with its own
 * quoting rules, so a control character, '"' or '\' could change what the
 * line means; such values are refused, never escaped. */
static int check_value(const char *what, const char *v, struct herd_err *err)
{
	for (const char *p = v; *p; p++)
		if (iscntrl((unsigned char)*p) || *p == '"' || *p == '\\')
			return herd_errprintf(
			    err,
			    "%s: \"%s\" cannot be written on an #SBATCH line "
			    "(control character, '\"' or '\\')",
			    what, v);
	return 0;
}

/* A path the script names: one line each, so no control characters. */
static int check_path(const char *what, const char *v, struct herd_err *err)
{
	for (const char *p = v; *p; p++)
		if (iscntrl((unsigned char)*p))
			return herd_errprintf(
			    err, "%s: '%s' holds a control character", what, v);
	return 0;
}

static int set_str(char **dst, const char *v)
{
	char *s = strdup(v);

	if (!s)
		return -1;
	free(*dst);
	*dst = s;
	return 0;
}

/* Memory as sbatch --mem reads it: a number and an optional unit K, M, G
 * or T (default M); stored in MB, rounded up. */
static int parse_mem(const char *v, uint64_t *mb)
{
	char *end;
	unsigned long long n;
	uint64_t scale_num = 1, scale_den = 1;

	if (!isdigit((unsigned char)*v))
		return -1;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno)
		return -1;
	switch (toupper((unsigned char)*end)) {
	case '\0':
		break;
	case 'M':
		end++;
		break;
	case 'K':
		scale_den = 1024;
		end++;
		break;
	case 'G':
		scale_num = 1024;
		end++;
		break;
	case 'T':
		scale_num = 1024 * 1024;
		end++;
		break;
	default:
		return -1;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -1;
	/* Below MEM_PER_CPU's bit and NO_VAL64 alike. */
	if (n > (UINT64_C(1) << 50) / scale_num)
		return -1;
	*mb = (n * scale_num + scale_den - 1) / scale_den;
	return 0;
}

/* Splits one slurm.extra line into a mapped option and its value (NULL
 * when not mapped): "--name=value", "--name value", "-Xvalue",
 * "-X value".  *value is malloc'd (NULL when out of memory). */
static const struct extra_opt *extra_split(const char *line, char **value)
{
	const struct extra_opt *opt = NULL;
	const char *p = line, *v = NULL;
	size_t n;

	*value = NULL;
	while (isspace((unsigned char)*p))
		p++;
	for (size_t i = 0;
	     !opt && i < sizeof(extra_opts) / sizeof(extra_opts[0]); i++) {
		n = strlen(extra_opts[i].name);
		if (p[0] == '-' && p[1] == '-' &&
		    !strncmp(p + 2, extra_opts[i].name, n) &&
		    (p[2 + n] == '=' || p[2 + n] == '\0' ||
		     isspace((unsigned char)p[2 + n]))) {
			opt = &extra_opts[i];
			v = p + 2 + n + (p[2 + n] == '=');
		} else if (p[0] == '-' && extra_opts[i].short_name &&
			   p[1] == extra_opts[i].short_name) {
			opt = &extra_opts[i];
			v = p + 2;
		}
	}
	if (!opt)
		return NULL;
	while (isspace((unsigned char)*v))
		v++;
	n = strlen(v);
	while (n && isspace((unsigned char)v[n - 1]))
		n--;
	*value = strndup(v, n);
	return *value ? opt : NULL;
}

static int extra_apply(struct sbatch *sb, const char *line,
		       struct herd_err *err)
{
	const struct extra_opt *opt;
	char *value = NULL, *end;
	unsigned long n;
	int rc = -1;

	opt = extra_split(line, &value);
	if (!opt) {
		herd_errprintf(err,
			       "slurm.extra: herd sbatch cannot pass '%s' to "
			       "Slurm (it maps only " EXTRA_SUPPORTED
			       "; slurm.* keys cover the rest)",
			       line);
		goto out;
	}
	if (!*value) {
		herd_errprintf(err, "slurm.extra: '%s' needs a value", line);
		goto out;
	}
	if (check_value("slurm.extra", line, err) < 0)
		goto out;
	switch (opt->field) {
	case EXTRA_FEATURES:
		rc = set_str(&sb->features, value);
		break;
	case EXTRA_GRES:
		rc = set_str(&sb->gres, value);
		break;
	case EXTRA_MEM:
	case EXTRA_MEM_PER_CPU:
		if (parse_mem(value, &sb->memory) < 0) {
			herd_errprintf(err,
				       "slurm.extra: '%s': expected a memory "
				       "size such as 4096, 500M, 32G or 1T",
				       line);
			goto out;
		}
		if (opt->field == EXTRA_MEM_PER_CPU)
			sb->memory |= MEM_PER_CPU;
		rc = 0;
		break;
	case EXTRA_EXCLUDE:
		rc = set_str(&sb->exc_nodes, value);
		break;
	case EXTRA_NODELIST:
		rc = set_str(&sb->req_nodes, value);
		break;
	case EXTRA_RESERVATION:
		rc = set_str(&sb->reservation, value);
		break;
	case EXTRA_CPUS_PER_TASK:
		errno = 0;
		n = strtoul(value, &end, 10);
		if (!isdigit((unsigned char)*value) || *end || errno || !n ||
		    n >= NO_VAL16) {
			herd_errprintf(err,
				       "slurm.extra: '%s': expected a number "
				       "of CPUs from 1 to %u",
				       line, NO_VAL16 - 1);
			goto out;
		}
		sb->cpus_per_task = (uint16_t)n;
		rc = 0;
		break;
	}
	if (rc < 0)
		herd_errprintf(err, "out of memory");
out:
	free(value);
	return rc;
}

/* slurm.output: {{name}} filled (Slurm's own %j, %x, ... kept), made
 * absolute against the job's working directory as sbatch does. */
static int output_path(struct sbatch *sb, const char *output,
		       struct herd_err *err)
{
	const struct render_var vars[] = {{"name", sb->name}};
	char *text, *slash;
	int rc = -1;

	text = render_text(output, vars, 1, 1, err);
	if (!text)
		return -1;
	if (!*text) {
		herd_errprintf(err, "slurm.output: empty path");
		goto out;
	}
	if (text[0] == '/') {
		sb->output = text;
		text = NULL;
	} else if (asprintf(&sb->output, "%s/%s", sb->workdir, text) < 0) {
		sb->output = NULL;
		herd_errprintf(err, "out of memory");
		goto out;
	}
	if (check_value("slurm.output", sb->output, err) < 0)
		goto out;
	slash = strrchr(sb->output, '/');
	if (slash > sb->output &&
	    !memchr(sb->output, '%', (size_t)(slash - sb->output))) {
		sb->output_dir =
		    strndup(sb->output, (size_t)(slash - sb->output));
		if (!sb->output_dir) {
			herd_errprintf(err, "out of memory");
			goto out;
		}
	}
	rc = 0;
out:
	free(text);
	return rc;
}

struct sbatch *sbatch_new(const struct spec *spec, const char *herd,
			  const char *job_file, const char *workdir,
			  struct herd_err *err)
{
	struct sbatch *sb = NULL, *ret = NULL;
	long nodes;

	sb = calloc(1, sizeof(*sb));
	if (!sb) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	sb->time_limit = NO_VAL;
	sb->memory = NO_VAL64;
	sb->cpus_per_task = NO_VAL16;
	sb->name = strdup(spec->name);
	sb->herd = strdup(herd);
	sb->job_file = strdup(job_file);
	sb->workdir = strdup(workdir);
	if (!sb->name || !sb->herd || !sb->job_file || !sb->workdir) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	if (check_value("name", sb->name, err) < 0 ||
	    check_value("working directory", sb->workdir, err) < 0 ||
	    check_path("herd", herd, err) < 0 ||
	    check_path("job file", job_file, err) < 0)
		goto out;
	sb->partition = spec->slurm.partition;
	sb->account = spec->slurm.account;
	sb->qos = spec->slurm.qos;
	sb->time = spec->slurm.time;
	if ((sb->partition &&
	     check_value("slurm.partition", sb->partition, err) < 0) ||
	    (sb->account &&
	     check_value("slurm.account", sb->account, err) < 0) ||
	    (sb->qos && check_value("slurm.qos", sb->qos, err) < 0) ||
	    (sb->time && check_value("slurm.time", sb->time, err) < 0))
		goto out;
	if (sb->time) {
		long mins = time_minutes(sb->time);

		if (mins < 0 ||
		    (mins >= (long)NO_VAL && mins != (long)INFINITE)) {
			herd_errprintf(err,
				       "slurm.time: '%s': expected MINUTES, "
				       "[D-]HH:MM[:SS], D-HH or 'infinite'",
				       sb->time);
			goto out;
		}
		sb->time_limit = (uint32_t)mins;
	}
	nodes = spec->slurm.nodes ? spec->slurm.nodes
				  : (spec->nodes.count ? spec->nodes.count : 1);
	if (nodes < 1 || nodes >= (long)NO_VAL) {
		herd_errprintf(err, "slurm.nodes: %ld is out of range", nodes);
		goto out;
	}
	sb->nodes = (uint32_t)nodes;
	if (spec->slurm.gpus_per_node < 0 ||
	    spec->slurm.gpus_per_node >= (long)NO_VAL16) {
		herd_errprintf(err, "slurm.gpus_per_node: %ld is out of range",
			       spec->slurm.gpus_per_node);
		goto out;
	}
	sb->gpus_per_node = (uint32_t)spec->slurm.gpus_per_node;
	sb->exclusive = spec->slurm.exclusive;
	sb->requeue = spec->slurm.requeue;
	if (spec->slurm.output && output_path(sb, spec->slurm.output, err) < 0)
		goto out;
	for (size_t i = 0; i < spec->slurm.extra.n; i++)
		if (extra_apply(sb, spec->slurm.extra.v[i], err) < 0)
			goto out;
	sb->extra = &spec->slurm.extra;
	if (sb->gpus_per_node || sb->gres) {
		const char *g = sb->gres ? sb->gres : "";
		int n;

		if (sb->gpus_per_node)
			n = asprintf(
			    &sb->tres_per_node, "gres:gpu:%u%s%s%s",
			    sb->gpus_per_node, *g ? "," : "",
			    *g && strncmp(g, "gres:", 5) ? "gres:" : "", g);
		else
			n = asprintf(&sb->tres_per_node, "%s%s",
				     strncmp(g, "gres:", 5) ? "gres:" : "", g);
		if (n < 0) {
			sb->tres_per_node = NULL;
			herd_errprintf(err, "out of memory");
			goto out;
		}
	}
	ret = sb;
	sb = NULL;
out:
	sbatch_free(sb);
	return ret;
}

void sbatch_free(struct sbatch *sb)
{
	int saved = errno;

	if (!sb)
		return;
	free(sb->name);
	free(sb->herd);
	free(sb->job_file);
	free(sb->workdir);
	free(sb->output);
	free(sb->output_dir);
	free(sb->features);
	free(sb->gres);
	free(sb->exc_nodes);
	free(sb->req_nodes);
	free(sb->reservation);
	free(sb->tres_per_node);
	free(sb);
	errno = saved;
}

const char *sbatch_output_dir(const struct sbatch *sb)
{
	return sb->output_dir;
}

char *sbatch_template_load(const char *self, struct herd_err *err)
{
	return template_load(self, SBATCH_TEMPLATE, err);
}

/* Appends to a malloc'd string; -1 when out of memory or past
 * SBATCH_SCRIPT_MAX. */
static int cat(char **s, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int cat(char **s, size_t *len, const char *fmt, ...)
{
	va_list ap;
	char *add;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&add, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	if (*len + (size_t)n + 1 > SBATCH_SCRIPT_MAX) {
		free(add);
		return -1;
	}
	char *grown = realloc(*s, *len + (size_t)n + 1);
	if (!grown) {
		free(add);
		return -1;
	}
	memcpy(grown + *len, add, (size_t)n + 1);
	*s = grown;
	*len += (size_t)n;
	free(add);
	return 0;
}

/* "#SBATCH --opt=value", the value in double quotes when sbatch would
 * otherwise split it (check_value() kept '"' and '\' out). */
static int option(char **s, size_t *len, const char *opt, const char *value)
{
	bool quote = strpbrk(value, " \t#'") != NULL;

	return cat(s, len, "#SBATCH --%s=%s%s%s\n", opt, quote ? "\"" : "",
		   value, quote ? "\"" : "");
}

static char *options(const struct sbatch *sb)
{
	char *s = NULL, num[32];
	size_t len = 0;
	int rc = 0;

	rc |= cat(&s, &len, "%s", "");
	rc |= option(&s, &len, "job-name", sb->name);
	rc |= option(&s, &len, "chdir", sb->workdir);
	if (sb->partition)
		rc |= option(&s, &len, "partition", sb->partition);
	if (sb->time)
		rc |= option(&s, &len, "time", sb->time);
	if (sb->account)
		rc |= option(&s, &len, "account", sb->account);
	if (sb->qos)
		rc |= option(&s, &len, "qos", sb->qos);
	snprintf(num, sizeof(num), "%u", sb->nodes);
	rc |= option(&s, &len, "nodes", num);
	if (sb->gpus_per_node) {
		snprintf(num, sizeof(num), "%u", sb->gpus_per_node);
		rc |= option(&s, &len, "gpus-per-node", num);
	}
	if (sb->exclusive)
		rc |= cat(&s, &len, "#SBATCH --exclusive\n");
	if (sb->requeue)
		rc |= cat(&s, &len, "#SBATCH --requeue\n");
	if (sb->output)
		rc |= option(&s, &len, "output", sb->output);
	for (size_t i = 0; i < sb->extra->n; i++) {
		const char *e = sb->extra->v[i];

		while (isspace((unsigned char)*e))
			e++;
		rc |= cat(&s, &len, "#SBATCH %s\n", e);
	}
	if (rc) {
		free(s);
		return NULL;
	}
	/* The template puts the block on a line of its own. */
	if (len && s[len - 1] == '\n')
		s[len - 1] = '\0';
	return s;
}

char *sbatch_script(const struct sbatch *sb, const char *tmpl,
		    struct herd_err *err)
{
	char *opts = NULL, *herd = NULL, *job = NULL, *wd = NULL;
	char *script = NULL, *ret = NULL;

	opts = options(sb);
	herd = render_shell_quote(sb->herd);
	job = render_shell_quote(sb->job_file);
	wd = render_shell_quote(sb->workdir);
	if (!opts || !herd || !job || !wd) {
		herd_errprintf(err, "out of memory or script over 4 MiB");
		goto out;
	}
	const struct render_var vars[] = {
	    {"name", sb->name}, {"job_file", job},	  {"herd", herd},
	    {"workdir", wd},	{"sbatch_options", opts},
	};
	script =
	    render_text(tmpl, vars, sizeof(vars) / sizeof(vars[0]), 1, err);
	if (!script)
		goto out;
	if (strncmp(script, "#!", 2)) {
		herd_errprintf(err, "the batch script template must start "
				    "with '#!' (Slurm refuses anything else)");
		goto out;
	}
	if (strlen(script) > SBATCH_SCRIPT_MAX) {
		herd_errprintf(err, "the batch script is over 4 MiB");
		goto out;
	}
	ret = script;
	script = NULL;
out:
	free(script);
	free(opts);
	free(herd);
	free(job);
	free(wd);
	return ret;
}

#ifdef __SANITIZE_ADDRESS__
/* libslurm 22.05 leaks the answer to a refused submission
 * (slurm_submit_batch_job drops RESPONSE_SLURM_RC's data without freeing
 * it): not ours to free, so LeakSanitizer, which reads this hook in
 * sanitizer builds, is told to let it be. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:slurm_submit_batch_job\n";
}

/* Without this, a suppressed leak adds a table to herd's one-line
 * refusal on stderr. */
const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
	return "print_suppressions=0";
}
#endif

void sbatch_slurm_init(void)
{
	int q = quiet_begin();

	slurm_init(NULL);
	quiet_end(q);
}

void sbatch_slurm_fini(void)
{
	int q = quiet_begin();

	slurm_fini();
	quiet_end(q);
}

/* What a refusal was about, in the spec's terms ("" when Slurm's words
 * say it all). */
static void refusal_subject(const struct sbatch *sb, int e, char *buf,
			    size_t size)
{
	const char *part = sb->partition ? sb->partition : "";

	buf[0] = '\0';
	switch (e) {
	case ESLURM_INVALID_PARTITION_NAME:
	case ESLURM_PARTITION_NOT_AVAIL:
		snprintf(buf, size, "partition \"%s\"", part);
		break;
	case ESLURM_INVALID_NODE_COUNT:
	case ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE:
	case ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE:
	case ESLURM_TOO_MANY_REQUESTED_CPUS:
		snprintf(buf, size, "nodes %u in %s%s%s", sb->nodes,
			 *part ? "partition \"" : "the default partition", part,
			 *part ? "\"" : "");
		break;
	case ESLURM_INVALID_ACCOUNT:
		snprintf(buf, size, "account \"%s\"",
			 sb->account ? sb->account : "");
		break;
	case ESLURM_INVALID_QOS:
		snprintf(buf, size, "qos \"%s\"", sb->qos ? sb->qos : "");
		break;
	case ESLURM_INVALID_TIME_LIMIT:
		snprintf(buf, size, "time \"%s\"", sb->time ? sb->time : "");
		break;
	case ESLURM_INVALID_FEATURE:
		snprintf(buf, size, "constraint \"%s\"",
			 sb->features ? sb->features : "");
		break;
	case ESLURM_INVALID_GRES:
		snprintf(buf, size, "gres \"%s\"",
			 sb->tres_per_node ? sb->tres_per_node : "");
		break;
	case ESLURM_INVALID_NODE_NAME:
		snprintf(buf, size, "nodelist \"%s\", exclude \"%s\"",
			 sb->req_nodes ? sb->req_nodes : "",
			 sb->exc_nodes ? sb->exc_nodes : "");
		break;
	default:
		break;
	}
}

/* The Slurm error behind a pending reason that no time will clear: with
 * EnforcePartLimits=NO slurmctld takes a job its partition can never run
 * (more nodes than it has, over its MaxNodes or MaxTime) and leaves it
 * pending for good; it decides that while taking the job.  0: none. */
static int never_starts(uint32_t job_id)
{
	job_info_msg_t *msg = NULL;
	int e = 0;

	int q = quiet_begin();
	int rc = slurm_load_job(&msg, job_id, SHOW_ALL);

	quiet_end(q);
	if (rc != SLURM_SUCCESS)
		return 0;
	if (msg->record_count >= 1 &&
	    (msg->job_array[0].job_state & JOB_STATE_BASE) == JOB_PENDING) {
		switch (msg->job_array[0].state_reason) {
		case WAIT_PART_CONFIG:
			e = ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE;
			break;
		case WAIT_PART_NODE_LIMIT:
			e = ESLURM_INVALID_NODE_COUNT;
			break;
		case WAIT_PART_TIME_LIMIT:
			e = ESLURM_INVALID_TIME_LIMIT;
			break;
		default:
			break;
		}
	}
	slurm_free_job_info_msg(msg);
	return e;
}

int sbatch_submit(const struct sbatch *sb, const char *script, char *const *env,
		  uint32_t *job_id, struct herd_err *err)
{
	job_desc_msg_t desc;
	submit_response_msg_t *resp = NULL;
	char subject[512];
	uint32_t n_env = 0;
	int e, q, rc;

	while (env[n_env])
		n_env++;
	slurm_init_job_desc_msg(&desc);
	/* libslurm only reads these; the casts drop const for its API. */
	desc.script = (char *)script;
	desc.name = sb->name;
	desc.work_dir = sb->workdir;
	desc.environment = (char **)env;
	desc.env_size = n_env;
	desc.user_id = getuid();
	desc.group_id = getgid();
	desc.partition = (char *)sb->partition;
	desc.account = (char *)sb->account;
	desc.qos = (char *)sb->qos;
	desc.time_limit = sb->time_limit;
	desc.min_nodes = sb->nodes;
	desc.max_nodes = sb->nodes;
	desc.tres_per_node = sb->tres_per_node;
	if (sb->exclusive)
		desc.shared = JOB_SHARED_NONE;
	if (sb->requeue)
		desc.requeue = 1;
	desc.std_out = sb->output;
	desc.features = sb->features;
	desc.exc_nodes = sb->exc_nodes;
	desc.req_nodes = sb->req_nodes;
	desc.reservation = sb->reservation;
	desc.pn_min_memory = sb->memory;
	desc.cpus_per_task = sb->cpus_per_task;
	q = quiet_begin();
	rc = slurm_submit_batch_job(&desc, &resp);
	quiet_end(q);
	if (rc != SLURM_SUCCESS) {
		e = slurm_get_errno();
		/* Below 2000: system and communication errors; 5000s: socket
		 * errors.  The rest is slurmctld saying no. */
		if (e < ESLURM_INVALID_PARTITION_NAME ||
		    (e >= SLURM_PROTOCOL_SOCKET_IMPL_ZERO_RECV_LENGTH &&
		     e < SLURM_PROTOCOL_SOCKET_IMPL_ZERO_RECV_LENGTH + 1000))
			return herd_errprintf(err, "cannot submit the job: %s",
					      slurm_strerror(e));
		refusal_subject(sb, e, subject, sizeof(subject));
		return herd_errprintf(err, "Slurm refused the job: %s%s%s%s",
				      slurm_strerror(e), *subject ? " (" : "",
				      subject, *subject ? ")" : "");
	}
	*job_id = resp->job_id;
	slurm_free_submit_response_response_msg(resp);
	e = never_starts(*job_id);
	if (e) {
		refusal_subject(sb, e, subject, sizeof(subject));
		q = quiet_begin();
		slurm_kill_job(*job_id, SIGKILL, 0);
		quiet_end(q);
		return herd_errprintf(err,
				      "Slurm refused the job: %s (%s%sit could "
				      "never start: job %u cancelled)",
				      slurm_strerror(e), subject,
				      *subject ? "; " : "", *job_id);
	}
	return 0;
}

/* Sleeps ms milliseconds, whole even when a signal interrupts. */
static void pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Base states after SUSPENDED are ends; a job still completing, or being
 * requeued, has not ended yet. */
static bool job_ended(uint32_t state)
{
	if ((state & JOB_STATE_BASE) <= JOB_SUSPENDED)
		return false;
	return !(state & (JOB_COMPLETING | JOB_REQUEUE | JOB_REQUEUE_FED));
}

/* Tells seen about job when its state differs from the last one told
 * (last: the caller's, "" at first).  Returns 1 when it told. */
static int tell_seen(uint32_t job_id, const slurm_job_info_t *job,
		     sbatch_seen_fn seen, void *arg, char *last, size_t size)
{
	const char *state = job_state_name(job->job_state);
	char output[PATH_MAX];
	struct sbatch_seen s;

	if (!strcmp(state, last))
		return 0;
	output[0] = '\0';
	/* Slurm's own filling of %j, %x, %u, ... (its header takes no
	 * const job). */
	slurm_get_job_stdout(output, (int)sizeof(output),
			     (slurm_job_info_t *)job);
	s = (struct sbatch_seen){
	    .state = state,
	    .nodes = job->nodes && job->nodes[0] ? job->nodes : NULL,
	    .output = output,
	    .first = !last[0],
	};
	snprintf(last, size, "%s", state);
	if (seen)
		seen(job_id, &s, arg);
	return 1;
}

int sbatch_wait(uint32_t job_id, sbatch_seen_fn seen, void *arg,
		struct sbatch_end *end, struct herd_err *err)
{
	char last[128] = "";
	long delay = 500;
	int errors = 0;

	for (;;) {
		job_info_msg_t *msg = NULL;
		int q = quiet_begin();
		int rc = slurm_load_job(&msg, job_id, SHOW_ALL);

		quiet_end(q);
		if (rc != SLURM_SUCCESS) {
			int e = slurm_get_errno();

			if (e == ESLURM_INVALID_JOB_ID)
				return herd_errprintf(
				    err,
				    "job %u: slurmctld no longer knows it "
				    "(ended and purged between two polls?)",
				    job_id);
			if (++errors >= SBATCH_WAIT_ERRORS_MAX)
				return herd_errprintf(
				    err, "job %u: cannot follow it: %s", job_id,
				    slurm_strerror(e));
		} else if (msg->record_count < 1) {
			slurm_free_job_info_msg(msg);
			return herd_errprintf(
			    err, "job %u: slurmctld answered without it",
			    job_id);
		} else {
			const slurm_job_info_t *job = &msg->job_array[0];
			uint32_t base = job->job_state & JOB_STATE_BASE;
			int code = (int)job->exit_code;

			errors = 0;
			if (tell_seen(job_id, job, seen, arg, last,
				      sizeof(last)))
				delay = 500;
			if (job_ended(job->job_state)) {
				snprintf(end->state, sizeof(end->state), "%s",
					 job_state_name(base));
				end->completed = base == JOB_COMPLETE;
				if (WIFSIGNALED(code))
					end->status = 128 + WTERMSIG(code);
				else
					end->status = WEXITSTATUS(code);
				if (!end->completed && !end->status)
					end->status = 1;
				slurm_free_job_info_msg(msg);
				return 0;
			}
			slurm_free_job_info_msg(msg);
		}
		pause_ms(delay);
		if (delay < 2000)
			delay = delay * 2 > 2000 ? 2000 : delay * 2;
	}
}
