/* cli.c — what several commands share (cli.h): where this herd's
 * herd-agent is, and the job file's relative paths made absolute.  The
 * cmd_*.c files are leaves: they call in here, nothing calls them but
 * main.c.
 */
#include <libgen.h>
#include <stdbool.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/cli.h"
#include "herd/render.h"
#include "herd/spec.h"
#include "herd/suggest.h"
#include "launcher/hosts/resolve.h"

void cli_error(const char *fmt, ...)
{
	va_list ap;

	fputs("herd: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "herd: %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\ntry 'herd %s --help'\n", cmd);
	return EXIT_SPEC;
}

/* The options a help text names: each word starting with '-' after a
 * blank, '[', '|', '(' or ',', up to a character that cannot be in an
 * option name ("--topology=FILE" gives "--topology").  Returns how many
 * were put in words (malloc'd, the caller frees them). */
static size_t help_options(const char *help, char **words, size_t max)
{
	size_t n = 0;

	for (const char *p = help; *p && n < max; p++) {
		size_t len = 0;

		if (*p != '-' || (p > help && !strchr(" \t\n[|(,", p[-1])))
			continue;
		while (p[len] == '-' || (p[len] >= 'a' && p[len] <= 'z') ||
		       (p[len] >= 'A' && p[len] <= 'Z') ||
		       (p[len] >= '0' && p[len] <= '9'))
			len++;
		if (len < 2 || p[len - 1] == '-' || (p[1] == '-' && len < 4))
			continue;
		words[n] = strndup(p, len);
		for (size_t i = 0; words[n] && i < n; i++)
			if (!strcmp(words[i], words[n])) {
				free(words[n]);
				words[n] = NULL;
			}
		if (words[n])
			n++;
		p += len - 1;
	}
	return n;
}

int cli_bad_option(const char *cmd, const char *arg, void (*usage)(FILE *))
{
	char *help = NULL, *words[CLI_HELP_OPTIONS_MAX], typed[128];
	const char *near = NULL;
	size_t help_len = 0, n = 0;
	FILE *f = open_memstream(&help, &help_len);

	snprintf(typed, sizeof(typed), "%.*s", (int)strcspn(arg, "="), arg);
	if (f) {
		usage(f);
		if (fclose(f) == 0)
			n = help_options(help, words, CLI_HELP_OPTIONS_MAX);
	}
	for (size_t i = 0; i < n && !near; i++)
		if (!strcmp(words[i], typed))
			near = words[i];
	if (near && (!strcmp(near, arg) || !strchr(arg, '=')))
		cli_usage(cmd, "option '%s' needs a value", typed);
	else if (near)
		cli_usage(cmd, "option '%s' takes no value", typed);
	else if ((near = suggest_nearest(typed, (const char *const *)words, n)))
		cli_usage(cmd, "unknown option '%s' (did you mean '%s'?)", arg,
			  near);
	else
		cli_usage(cmd, "unknown option '%s'", arg);
	for (size_t i = 0; i < n; i++)
		free(words[i]);
	free(help);
	return EXIT_SPEC;
}

/* A short-option cluster: "-x..." (not "--", not "-"). */
static bool is_cluster(const char *w)
{
	return w && w[0] == '-' && w[1] && w[1] != '-';
}

const char *cli_bad_word(int argc, char *const argv[])
{
	static char letter[3];
	const char *prev = optind > 0 && optind - 1 < argc ? argv[optind - 1]
							   : "";

	if (optopt > ' ' && optopt < 127 &&
	    ((is_cluster(prev) && strchr(prev + 1, optopt)) ||
	     (optind < argc && is_cluster(argv[optind]) &&
	      strchr(argv[optind] + 1, optopt)))) {
		letter[0] = '-';
		letter[1] = (char)optopt;
		letter[2] = '\0';
		return letter;
	}
	return prev;
}

int cli_agent_path(char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n < 0)
		return -1;
	self[n] = '\0';
	snprintf(out, len, "%s/herd-agent", dirname(self));
	return access(out, X_OK);
}

/* A relative launch.workdir or checkpoint.dir means "next to the job
 * file" (as nodes.hostfile does): the ranks start in the remote user's
 * home, so a relative path would silently mean something else there. */
static int absolutize(char **path, const char *job_path)
{
	char *copy, *dir, *abs, real[PATH_MAX];

	if (!*path || (*path)[0] == '/')
		return 0;
	copy = strdup(job_path);
	if (!copy)
		return -1;
	dir = dirname(copy);
	if (!realpath(dir, real)) {
		free(copy);
		return -1;
	}
	free(copy);
	if (asprintf(&abs, "%s/%s", real, *path) < 0)
		return -1;
	free(*path);
	*path = abs;
	return 0;
}

int cli_job_paths(struct spec *spec, const char *job_path)
{
	if (absolutize(&spec->launch.workdir, job_path) < 0 ||
	    absolutize(&spec->checkpoint.dir, job_path) < 0 ||
	    absolutize(&spec->bind.topology_file, job_path) < 0)
		return -1;
	return 0;
}

int cli_resolve(const struct spec *spec, struct resolved *res)
{
	struct herd_err err;

	herd_err_clear(&err);
	if (resolve_nodes(spec, res, &err) < 0) {
		cli_error("%s", err.text);
		return res->fail == RESOLVE_FAIL_INPUT ? EXIT_SPEC : 1;
	}
	return 0;
}

int cli_job_open(const char *cmd, const char *path, char *agent,
		 size_t agent_len, struct spec **spec, struct resolved *res)
{
	struct herd_err err;
	int status;

	*spec = NULL;
	if (agent && cli_agent_path(agent, agent_len) < 0) {
		cli_error("%s: cannot find herd-agent next to herd (%s)", cmd,
			  agent);
		return 1;
	}
	herd_err_clear(&err);
	*spec = spec_load(path, &err);
	if (!*spec) {
		fprintf(stderr, "%s\n", err.text);
		return EXIT_SPEC;
	}
	if (cli_job_paths(*spec, path) < 0) {
		cli_error("%s: cannot resolve paths next to %s", cmd, path);
		return 1;
	}
	status = cli_resolve(*spec, res);
	return status;
}

bool cli_set_name_ok(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
		      s[i] == '.'))
			return false;
	return true;
}

int cli_set_push(const char *what, const char *kv, struct render_var *vars,
		 size_t *n, size_t max)
{
	const char *eq = strchr(kv, '=');

	if (!eq || !cli_set_name_ok(kv, (size_t)(eq - kv))) {
		cli_error("%s--set %s: expected NAME=VALUE, NAME of letters, "
			  "digits, '_' and '.'",
			  what, kv);
		return -1;
	}
	if (*n == max) {
		cli_error("%smore than %zu --set options", what, max);
		return -1;
	}
	/* render_text takes the first match: the last --set of a name wins
	 * by going first. */
	memmove(vars + 1, vars, *n * sizeof(*vars));
	if (!(vars[0].name = strndup(kv, (size_t)(eq - kv)))) {
		memmove(vars, vars + 1, *n * sizeof(*vars));
		cli_error("out of memory");
		return -1;
	}
	vars[0].value = eq + 1;
	(*n)++;
	return 0;
}
