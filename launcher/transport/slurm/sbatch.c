/* sbatch.c — the Slurm job description of `herd sbatch`, from the job
 * spec, and its batch script; see sbatch.h. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <slurm/slurm.h>

#include "herd/render.h"
#include "launcher/gen/template.h"
#include "launcher/transport/slurm/sbatch_int.h"

/* slurm.time is read here, not by libslurm's own parser: that one is not
 * in <slurm/slurm.h>, and only what the installed headers declare is
 * called (a declaration of ours would compile against any libslurm). */

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
