/* cmd/render.c — `herd render TEMPLATE [--set k=v ...] [-o DIR]`: fill a
 * job template's {{placeholders}} and check what comes out. */
#include <dirent.h>
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

#include <yaml.h>

#include "launcher/cli.h"
#include "herd/render.h"
#include "herd/spec.h"
#include "herd/suggest.h"
#include "launcher/gen/template.h"
#include "launcher/gen/tune.h"

/* Writing the output failed: not the user's input. */
#define EXIT_RUNTIME 1

/* More --set options than this is a runaway script, not a job. */
#define SETS_MAX 256

/* What --tune fills in, after the --set values (which win). */
#define N_TUNED 4

/* Placeholders herd run fills in at launch: kept as they are. */
static const char *const run_time[] = {"checkpoint", "resume_args", "attempt"};
#define N_RUN_TIME (sizeof(run_time) / sizeof(run_time[0]))

static void render_usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: herd render TEMPLATE [--set NAME=VALUE ...] [-o DIR]\n"
	    "                   [--tune JOB.yaml [--platform FILE]]\n"
	    "       herd render --list\n"
	    "\n"
	    "Fills the {{placeholders}} of a job template and prints the\n"
	    "result, or writes it into DIR.  TEMPLATE is a file, or the\n"
	    "name of one of herd's templates (see --list):\n"
	    "  ds_zero3   DeepSpeed ZeRO-3 config (ds_zero3.json)\n"
	    "  finetune   herd job that fine-tunes a model with DeepSpeed\n"
	    "             (finetune.yaml; needs --set hosts=... model=...)\n"
	    "  sbatch     the batch script `herd sbatch` writes\n"
	    "\n"
	    "  --set NAME=VALUE  a value for {{NAME}}; a placeholder written\n"
	    "                    {{NAME|DEFAULT}} takes DEFAULT without one\n"
	    "  -o, --output DIR  write DIR/NAME (the template's file name\n"
	    "                    without .tmpl), replacing it atomically\n"
	    "  --tune JOB.yaml   fill reduce_bucket_size,\n"
	    "                    allgather_bucket_size, prefetch_bucket_size\n"
	    "                    and param_persistence_threshold from the\n"
	    "                    job's network: the \"network\" section of a\n"
	    "                    platform file (--platform, else the job's\n"
	    "                    bind.topology_file, else\n"
	    "                    " TUNE_PLATFORM_DEFAULT "),\n"
	    "                    else a herd bench run of the job; what it\n"
	    "                    found and chose goes to stderr; a --set of\n"
	    "                    the same name wins\n"
	    "  --platform FILE   the platform file --tune reads, e.g.\n"
	    "                    {\"network\": {\"nics\": [{\"name\":\n"
	    "                    \"mlx5_0\", \"rate_gbps\": 400,\n"
	    "                    \"fabric\": \"ib\"}], \"latency_us\": 14}}\n"
	    "                    (fabric ib, roce or ethernet; one entry per\n"
	    "                    NIC; latency_us optional)\n"
	    "  --list            print herd's templates and where they are\n"
	    "  -h, --help        show this text\n"
	    "\n"
	    "{{checkpoint}}, {{resume_args}} and {{attempt}} are kept for\n"
	    "herd run to fill in at each launch.  What comes out is checked:\n"
	    "a .json file must be JSON, a .yaml file a valid herd job.\n"
	    "A --set value that goes into shell text (launch.command,\n"
	    "checkpoint.resume_args, health.check_command, nodes.command,\n"
	    "or a script) may hold only letters, digits, spaces and\n"
	    "._=,:/+-@%%; no value of a job or script a control character.\n"
	    "\n"
	    "Exit status: 0 success; 1 the output could not be written or\n"
	    "the --tune bench run failed;\n"
	    "2 a bad template, a missing or unknown value, a result that\n"
	    "does not check, or bad usage.\n");
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

static bool is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The sorted names of the .tmpl files in dir; NULL-terminated, malloc'd
 * (free each and the array), or NULL when dir cannot be read. */
static char **list_templates(const char *dir)
{
	struct dirent **ents = NULL;
	char **names;
	int n = scandir(dir, &ents, NULL, alphasort), k = 0;

	if (n < 0)
		return NULL;
	names = calloc((size_t)n + 1, sizeof(*names));
	for (int i = 0; i < n; i++) {
		if (names && ents[i]->d_name[0] != '.' &&
		    ends_with(ents[i]->d_name, ".tmpl"))
			names[k++] = strdup(ents[i]->d_name);
		free(ents[i]);
	}
	free(ents);
	return names;
}

static void free_names(char **names)
{
	for (char **p = names; p && *p; p++)
		free(*p);
	free(names);
}

/* A built-in template's short name: its file name up to the first '.'. */
static bool short_name_is(const char *file, const char *want)
{
	size_t n = strcspn(file, ".");

	return strlen(want) == n && !strncmp(file, want, n);
}

/* The template's path into path: arg itself when it is a file (or holds
 * a '/'), else the built-in template of that name. */
static int find_template(const char *self, const char *arg, char *path,
			 size_t size, struct herd_err *err)
{
	char dir[PATH_MAX], known[512] = "";
	bool found = false;
	char **names;
	int rc = -1;

	if (strchr(arg, '/') || is_file(arg)) {
		snprintf(path, size, "%s", arg);
		return 0;
	}
	if (template_dir(self, dir, sizeof(dir), err) < 0)
		return -1;
	if (!(names = list_templates(dir)))
		return herd_errprintf(err, "cannot read %s: %s", dir,
				      strerror(errno));
	for (char **p = names; *p; p++) {
		size_t len = strlen(known);

		if (!strcmp(*p, arg) || short_name_is(*p, arg)) {
			found = true;
			if (snprintf(path, size, "%s/%s", dir, *p) >= (int)size)
				herd_errprintf(err, "%s/%s: path too long", dir,
					       *p);
			else
				rc = 0;
			break;
		}
		snprintf(known + len, sizeof(known) - len, "%s%.*s",
			 len ? ", " : "", (int)strcspn(*p, "."), *p);
	}
	if (!found)
		herd_errprintf(err,
			       "no template '%s': herd's templates are %s "
			       "(in %s), or give a file",
			       arg, known[0] ? known : "none", dir);
	free_names(names);
	return rc;
}

static int cmd_list(const char *self)
{
	char dir[PATH_MAX];
	struct herd_err err;
	char **names;

	if (template_dir(self, dir, sizeof(dir), &err) < 0) {
		cli_error("%s", err.text);
		return EXIT_SPEC;
	}
	if (!(names = list_templates(dir))) {
		cli_error("cannot read %s: %s", dir, strerror(errno));
		return EXIT_SPEC;
	}
	printf("herd's templates in %s:\n", dir);
	for (char **p = names; *p; p++)
		printf("  %-10.*s %.*s\n", (int)strcspn(*p, "."), *p,
		       (int)(strlen(*p) - strlen(".tmpl")), *p);
	free_names(names);
	return 0;
}

/* Renders text with vars (strict).  Every placeholder without a value
 * or a default is named in one message. */
static char *render_all(const char *text, struct render_var *vars,
			size_t n_vars, const char *tmpl_name,
			struct herd_err *err)
{
	struct render_var probe[SETS_MAX + N_TUNED + N_RUN_TIME + 32];
	char missing[HERD_ERR_MAX / 2] = "";
	size_t n = n_vars, n_missing = 0;
	char *out;

	memcpy(probe, vars, n_vars * sizeof(*vars));
	for (;;) {
		char *name;

		out = render_text(text, probe, n, 1, err);
		if (out || n == sizeof(probe) / sizeof(probe[0]))
			break;
		/* "unknown placeholder {{NAME}}": go on without it, to
		 * name every missing one at once. */
		if (strncmp(err->text, "unknown placeholder {{", 22) != 0)
			return NULL;
		name = err->text + 22;
		name[strcspn(name, "}")] = '\0';
		snprintf(missing + strlen(missing),
			 sizeof(missing) - strlen(missing), "%s%s",
			 n_missing ? ", " : "", name);
		probe[n].name = strdup(name);
		probe[n++].value = "";
		n_missing++;
	}
	for (size_t i = n_vars; i < n; i++)
		free((char *)probe[i].name);
	if (n_missing) {
		free(out);
		herd_errprintf(err,
			       "%s: no value for %s: give --set NAME=VALUE "
			       "for each",
			       tmpl_name, missing);
		return NULL;
	}
	return out;
}

/* Bytes per element of the gradients and parameters DeepSpeed moves: 4
 * when the --set values turn both bf16 and fp16 off, else 2. */
static int elem_bytes(const struct render_var *vars, size_t n_sets)
{
	const char *bf16 = "true", *fp16 = "false"; /* the defaults */

	/* render_text takes the first match: vars[0] is the last --set. */
	for (size_t i = n_sets; i-- > 0;) {
		if (!strcmp(vars[i].name, "bf16"))
			bf16 = vars[i].value;
		else if (!strcmp(vars[i].name, "fp16"))
			fp16 = vars[i].value;
	}
	return !strcmp(bf16, "true") || !strcmp(fp16, "true") ? 2 : 4;
}

/* A --set whose name the template never uses is a typo: an error. */
static int check_sets_used(const char *text, struct render_var *vars,
			   size_t n_sets, const char *tmpl_name,
			   struct herd_err *err)
{
	static const char mark[] = "\001herd-render-mark\001";
	char near[SUGGEST_WORD_MAX + 1];

	for (size_t i = 0; i < n_sets; i++) {
		const char *saved = vars[i].value;
		struct herd_err e;
		char *out;
		bool used;

		vars[i].value = mark;
		out = render_text(text, &vars[i], 1, 0, &e);
		vars[i].value = saved;
		used = out && strstr(out, mark);
		free(out);
		if (!used &&
		    render_suggest(text, vars[i].name, near, sizeof(near)))
			return herd_errprintf(err,
					      "--set %s: %s has no "
					      "{{%s}} (did you mean '%s'?)",
					      vars[i].name, tmpl_name,
					      vars[i].name, near);
		if (!used)
			return herd_errprintf(err,
					      "--set %s: %s has no "
					      "{{%s}}",
					      vars[i].name, tmpl_name,
					      vars[i].name);
	}
	return 0;
}

/* ---- values that go into shell text ------------------------------------
 *
 * A job's launch.command (and the other fields below) is shell text the
 * job's author wrote: a --set value pasted into it as it is would be
 * shell code ("org/m; touch F;", "$(id)").  Such a value may hold only
 * characters the shell reads as themselves (spaces split words, as
 * {{extra_args}} wants); anything else is refused, naming the field.  A
 * script template (#! or .sh) is shell text throughout.  No --set value
 * of a job or a script may hold a control character (a newline would
 * start a YAML key or a shell command of its own). */

/* The fields of a job file that /bin/sh reads. */
static const char *const shell_fields[][2] = {
    {"launch", "command"},
    {"checkpoint", "resume_args"},
    {"health", "check_command"},
    {"nodes", "command"},
};
#define N_SHELL_FIELDS (sizeof(shell_fields) / sizeof(shell_fields[0]))

#define SHELL_SAFE_PUNCT " ._=,:/+-@%"

/* The first character of v the shell would act on, or 0. */
static char shell_unsafe(const char *v)
{
	for (; *v; v++)
		if (!((*v >= 'a' && *v <= 'z') || (*v >= 'A' && *v <= 'Z') ||
		      (*v >= '0' && *v <= '9') || strchr(SHELL_SAFE_PUNCT, *v)))
			return *v;
	return 0;
}

static yaml_node_t *map_get(yaml_document_t *doc, yaml_node_t *map,
			    const char *key)
{
	if (!map || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(doc, p->key);

		if (k && k->type == YAML_SCALAR_NODE &&
		    !strcmp((const char *)k->data.scalar.value, key))
			return yaml_document_get_node(doc, p->value);
	}
	return NULL;
}

/* Whether text is YAML nested at most SPEC_DEPTH_MAX deep, checked on
 * the event stream, as spec_parse() does before it loads a document. */
static bool shallow(const char *text)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	bool ok = false, done = false;
	int depth = 0;

	if (!yaml_parser_initialize(&parser))
		return false;
	yaml_parser_set_input_string(&parser, (const unsigned char *)text,
				     strlen(text));
	while (!done && yaml_parser_parse(&parser, &ev)) {
		if (ev.type == YAML_SEQUENCE_START_EVENT ||
		    ev.type == YAML_MAPPING_START_EVENT)
			done = ++depth > SPEC_DEPTH_MAX;
		else if (ev.type == YAML_SEQUENCE_END_EVENT ||
			 ev.type == YAML_MAPPING_END_EVENT)
			depth--;
		else if (ev.type == YAML_STREAM_END_EVENT)
			done = ok = true;
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
	return ok;
}

/* Which shell field of the job text (rendered with stand-ins) holds
 * mark: its index, -1 when none, -2 when the text is no YAML mapping
 * (then every value counts as shell text: nothing is guessed). */
static int shell_field_of(const char *text, const char *mark)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	yaml_node_t *root;
	int found = -2;

	if (!shallow(text) || !yaml_parser_initialize(&parser))
		return -2;
	yaml_parser_set_input_string(&parser, (const unsigned char *)text,
				     strlen(text));
	if (!yaml_parser_load(&parser, &doc)) {
		yaml_parser_delete(&parser);
		return -2;
	}
	root = yaml_document_get_root_node(&doc);
	if (root && root->type == YAML_MAPPING_NODE) {
		found = -1;
		for (size_t f = 0; f < N_SHELL_FIELDS && found < 0; f++) {
			yaml_node_t *v = map_get(
			    &doc, map_get(&doc, root, shell_fields[f][0]),
			    shell_fields[f][1]);

			if (v && v->type == YAML_SCALAR_NODE &&
			    strstr((const char *)v->data.scalar.value, mark))
				found = (int)f;
		}
	}
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return found;
}

/* Checks the --set values of a job (.yaml) or script template as above.
 * Returns 0, or -1 with err. */
static int check_shell_values(const char *text, struct render_var *vars,
			      size_t n_sets, const char *out_name,
			      struct herd_err *err)
{
	bool job = ends_with(out_name, ".yaml") || ends_with(out_name, ".yml");
	bool script =
	    !job && (ends_with(out_name, ".sh") || !strncmp(text, "#!", 2));

	if (!job && !script)
		return 0;
	for (size_t i = 0; i < n_sets; i++) {
		const char *value = vars[i].value, *where = "the script";
		char where_buf[64];
		bool later = false;
		char bad;

		/* render_text takes the first of a name: the others are
		 * overridden and never written. */
		for (size_t k = 0; k < i; k++)
			later = later || !strcmp(vars[k].name, vars[i].name);
		if (later)
			continue;
		for (const char *c = value; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				return herd_errprintf(
				    err,
				    "--set %s: the value holds a control "
				    "character (a newline, a tab, ...)",
				    vars[i].name);
		if (!(bad = shell_unsafe(value)))
			continue;
		if (job) {
			static const char mark[] = "herdrendermark";
			struct render_var probe[SETS_MAX + 1];
			struct herd_err e;
			char *out;
			int f;

			/* The job with a stand-in for this value (first:
			 * it wins), the other values as they are. */
			probe[0] = (struct render_var){vars[i].name, mark};
			memcpy(probe + 1, vars, n_sets * sizeof(*vars));
			out = render_text(text, probe, n_sets + 1, 0, &e);
			f = out ? shell_field_of(out, mark) : -2;
			free(out);
			if (f == -1)
				continue;
			if (f >= 0) {
				snprintf(where_buf, sizeof(where_buf), "%s.%s",
					 shell_fields[f][0],
					 shell_fields[f][1]);
				where = where_buf;
			} else {
				where = "the job (whose shell text cannot be "
					"told)";
			}
		}
		return herd_errprintf(
		    err,
		    "--set %s: '%s' goes into %s, which /bin/sh reads, and "
		    "holds '%c': a value there may hold only letters, digits, "
		    "spaces and %s (write such a value into the job file "
		    "yourself, quoted)",
		    vars[i].name, value, where, bad, SHELL_SAFE_PUNCT + 1);
	}
	return 0;
}

/* Writes text to dir/name through a temporary file and a rename, mode
 * 0644 (0755 for a script starting with "#!"). */
static int write_output(const char *dir, const char *name, const char *text,
			char *path, size_t size, struct herd_err *err)
{
	char tmp[PATH_MAX];
	size_t len = strlen(text), off = 0;
	int fd;

	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return herd_errprintf(err, "cannot make %s: %s", dir,
				      strerror(errno));
	if (snprintf(path, size, "%s/%s", dir, name) >= (int)size ||
	    snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, name) >=
		(int)sizeof(tmp))
		return herd_errprintf(err, "%s/%s: path too long", dir, name);
	if ((fd = mkstemp(tmp)) < 0)
		return herd_errprintf(err, "cannot write in %s: %s", dir,
				      strerror(errno));
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		off += (size_t)n;
	}
	if (off < len || fchmod(fd, strncmp(text, "#!", 2) ? 0644 : 0755) < 0 ||
	    fsync(fd) < 0) {
		herd_errprintf(err, "cannot write %s: %s", tmp,
			       strerror(errno));
		close(fd);
		unlink(tmp);
		return -1;
	}
	if (close(fd) < 0 || rename(tmp, path) < 0) {
		herd_errprintf(err, "cannot write %s: %s", path,
			       strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

int cmd_render(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"list", no_argument, NULL, 'l'},
	    {"set", required_argument, NULL, 's'},
	    {"output", required_argument, NULL, 'o'},
	    {"tune", required_argument, NULL, 't'},
	    {"platform", required_argument, NULL, 'p'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct render_var vars[SETS_MAX + N_TUNED + N_RUN_TIME];
	char tuned_vals[N_TUNED][32];
	const char *tune_job_path = NULL, *platform = NULL;
	struct tune_result tuned;
	size_t n_tuned = 0;
	char self[PATH_MAX], tmpl_path[PATH_MAX], out_name[NAME_MAX + 1];
	char run_vals[N_RUN_TIME][32], written[PATH_MAX + NAME_MAX + 2];
	const char *tmpl = NULL, *out_dir = NULL, *base;
	char *text = NULL, *out = NULL;
	size_t n_sets = 0, n;
	struct herd_err err;
	bool list = false;
	int status = EXIT_SPEC, c;
	ssize_t len;

	herd_err_clear(&err);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			render_usage(stdout);
			return 0;
		case 'l':
			list = true;
			break;
		case 's':
			if (cli_set_push("", optarg, vars, &n_sets, SETS_MAX) <
			    0)
				goto out;
			break;
		case 'o':
			out_dir = optarg;
			break;
		case 't':
			tune_job_path = optarg;
			break;
		case 'p':
			platform = optarg;
			break;
		case ':':
			/* the option as typed: -o or --output */
			cli_error("%s needs %s", argv[optind - 1],
				  optopt == 's'	  ? "NAME=VALUE"
				  : optopt == 'o' ? "a directory"
				  : optopt == 't' ? "a job file (JOB.yaml)"
						  : "a platform file");
			goto out;
		default:
			cli_bad_option("render", cli_bad_word(argc, argv),
				       render_usage);
			goto out;
		}
	}
	if (argc - optind > 1) {
		cli_error("render: one template at a time ('%s' and '%s')",
			  argv[optind], argv[optind + 1]);
		goto out;
	}
	if (optind < argc)
		tmpl = argv[optind];
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len < 0) {
		cli_error("cannot find herd itself: %s", strerror(errno));
		goto out;
	}
	self[len] = '\0';
	if (list) {
		status = cmd_list(self);
		goto out;
	}
	if (!tmpl) {
		cli_usage("render", "expected a TEMPLATE (herd render --list "
				    "shows them)");
		goto out;
	}
	if (platform && !tune_job_path) {
		cli_error("render: --platform goes with --tune JOB.yaml");
		goto out;
	}
	if (find_template(self, tmpl, tmpl_path, sizeof(tmpl_path), &err) < 0 ||
	    !(text = template_read(tmpl_path, &err)))
		goto fail;
	base = strrchr(tmpl_path, '/');
	base = base ? base + 1 : tmpl_path;
	n = strlen(base);
	if (ends_with(base, ".tmpl") && n > 5)
		n -= 5;
	snprintf(out_name, sizeof(out_name), "%.*s", (int)n, base);
	if (check_sets_used(text, vars, n_sets, base, &err) < 0 ||
	    check_shell_values(text, vars, n_sets, out_name, &err) < 0)
		goto fail;
	/* After the --set values (which win): the tuned ones, then herd
	 * run's own. */
	if (tune_job_path) {
		static const char *const names[N_TUNED] = {
		    "reduce_bucket_size", "allgather_bucket_size",
		    "prefetch_bucket_size", "param_persistence_threshold"};
		long vals[N_TUNED];
		int rc;

		/* Before any network run: the template must take them. */
		for (size_t i = 0; i < N_TUNED; i++) {
			struct render_var v = {names[i], "0"};

			if (check_sets_used(text, &v, 1, base, &err) < 0) {
				cli_error("render: --tune: %s has no {{%s}}: "
					  "--tune fills {{%s}}, {{%s}}, {{%s}} "
					  "and {{%s}}, as ds_zero3 has them",
					  base, names[i], names[0], names[1],
					  names[2], names[3]);
				goto out;
			}
		}
		rc = tune_job(tune_job_path, platform, elem_bytes(vars, n_sets),
			      &tuned, &err);
		if (rc) {
			cli_error("render: --tune: %s", err.text);
			status = rc;
			goto out;
		}
		tune_print(stderr, &tuned);
		for (size_t i = 0; i < n_sets; i++)
			for (size_t k = 0; k < N_TUNED; k++)
				if (!strcmp(vars[i].name, names[k]))
					fprintf(stderr,
						"herd: tune: --set %s=%s wins "
						"over the tuned value\n",
						vars[i].name, vars[i].value);
		vals[0] = tuned.tuned.reduce_bucket_size;
		vals[1] = tuned.tuned.allgather_bucket_size;
		vals[2] = tuned.tuned.prefetch_bucket_size;
		vals[3] = tuned.tuned.param_persistence_threshold;
		for (size_t i = 0; i < N_TUNED; i++) {
			snprintf(tuned_vals[i], sizeof(tuned_vals[i]), "%ld",
				 vals[i]);
			vars[n_sets + i] =
			    (struct render_var){names[i], tuned_vals[i]};
		}
		n_tuned = N_TUNED;
	}
	for (size_t i = 0; i < N_RUN_TIME; i++) {
		snprintf(run_vals[i], sizeof(run_vals[i]), "{{%s}}",
			 run_time[i]);
		vars[n_sets + n_tuned + i] =
		    (struct render_var){run_time[i], run_vals[i]};
	}
	if (!(out = render_all(text, vars, n_sets + n_tuned + N_RUN_TIME, base,
			       &err)) ||
	    template_check(out_name, out, &err) < 0)
		goto fail;
	if (!out_dir) {
		if (fputs(out, stdout) < 0 || fflush(stdout) != 0) {
			cli_error("cannot write the output: %s",
				  strerror(errno));
			status = EXIT_RUNTIME;
			goto out;
		}
		status = 0;
		goto out;
	}
	if (write_output(out_dir, out_name, out, written, sizeof(written),
			 &err) < 0) {
		cli_error("%s", err.text);
		status = EXIT_RUNTIME;
		goto out;
	}
	printf("wrote %s\n", written);
	status = 0;
	goto out;
fail:
	cli_error("%s", err.text);
out:
	for (size_t i = 0; i < n_sets; i++)
		free((char *)vars[i].name);
	free(text);
	free(out);
	return status;
}
