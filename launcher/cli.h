/* cli.h — the commands of bin/herd.  Each cmd_* takes the arguments after
 * the command name (argv[0] is the command name) and returns the process
 * exit status. */
#ifndef HERD_LAUNCHER_CLI_H
#define HERD_LAUNCHER_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Exit statuses shared by every command. */
#define EXIT_SPEC 2	/* bad job spec or bad usage */

int cmd_validate(int argc, char **argv);
int cmd_hosts(int argc, char **argv);
int cmd_hostlist(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_sbatch(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_keys(int argc, char **argv);
int cmd_render(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_attach(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_list_jobs(int argc, char **argv); /* herd list */
int cmd_logs(int argc, char **argv);
int cmd_nodes(int argc, char **argv); /* herd nodes */
int cmd_init(int argc, char **argv);  /* herd init */

struct spec;

/* Makes the spec's relative launch.workdir, checkpoint.dir and
 * bind.topology_file absolute, relative to the directory of the job file
 * at job_path.  Returns 0, or -1 (out of memory, directory gone). */
int cli_job_paths(struct spec *spec, const char *job_path);

struct resolved;
/* Resolves the job's nodes once (resolve.h), for the whole command.
 * Returns 0, or the exit status after saying why on stderr: EXIT_SPEC
 * for the user's input, 1 for a failed discovery command or request. */
int cli_resolve(const struct spec *spec, struct resolved *res);

/* What run, bench and plan do first: finds the herd-agent next to herd
 * (into agent, unless agent is NULL), loads the job file at path, makes
 * its paths absolute (cli_job_paths) and resolves its nodes once
 * (cli_resolve).  Returns 0, or the exit status after saying why on
 * stderr with "herd: CMD: ..." (cmd: the command's name).  *spec is the
 * caller's to free either way (NULL when loading failed); so is res. */
int cli_job_open(const char *cmd, const char *path, char *agent,
		 size_t agent_len, struct spec **spec, struct resolved *res);

/* The herd-agent installed next to this herd, into out; returns 0, or -1
 * when it is not there (out still names where it was looked for). */
int cli_agent_path(char *out, size_t len);

/* A usage error of herd CMD: "herd: CMD: message" and the hint
 * "try 'herd CMD --help'" on stderr (not the whole help).  Returns
 * EXIT_SPEC. */
int cli_usage(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The options of a help text that cli_bad_option looks at, at most. */
#define CLI_HELP_OPTIONS_MAX 64

/* arg is no option of herd CMD (or an option without its value, or a
 * flag given "=VALUE"): says so as cli_usage does, with "did you mean"
 * the nearest option that the command's help (what usage writes) names.
 * Returns EXIT_SPEC. */
int cli_bad_option(const char *cmd, const char *arg, void (*usage)(FILE *));

/* The word getopt_long just refused, for cli_bad_option: a long option
 * as typed, "-x" for a bad letter x of a short-option cluster ("-j.yaml":
 * getopt leaves optind on the cluster until its last letter, so
 * argv[optind - 1] is then the word before it). */
const char *cli_bad_word(int argc, char *const argv[]);

/* Prints "herd: " + message to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A --set NAME (herd render, herd init): letters, digits, '_', '.'. */
bool cli_set_name_ok(const char *s, size_t n);
/* --set NAME=VALUE: kv checked and put in front of vars (*n of max), so
 * that the last --set of a name is the first match render_text finds;
 * vars[0].name is malloc'd, value points into kv.  what prefixes the
 * errors ("init: " or "").  Returns 0, or -1 said on stderr. */
struct render_var;
int cli_set_push(const char *what, const char *kv, struct render_var *vars,
		 size_t *n, size_t max);

#endif
