/* gen/initproj.c — project templates for `herd init`; see gen/initproj.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "herd/file.h"
#include "herd/hostlist.h"
#include "herd/logtree.h"
#include "herd/suggest.h"
#include "launcher/gen/initproj.h"
#include "launcher/gen/template.h"

/* Placeholders herd run fills in at launch: kept as they are. */
static const char *const run_time[] = {"checkpoint", "resume_args", "attempt"};
#define N_RUN_TIME (sizeof(run_time) / sizeof(run_time[0]))

/* herd's own values: project_dir, herd, template. */
#define N_OWN 3

static const char *const kinds[] = {
    "int",  "number", "word",	   "choice", "path",	 "program",
    "time", "hosts",  "tokenizer", "args",   "hostlist", "file"};

static bool name_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

/* A project file name: one plain name, no '/', not "." or "..", not a
 * hidden file (initproj_write's temporary files are). */
static bool file_name_ok(const char *s)
{
	return *s && *s != '.' && !strchr(s, '/') && strlen(s) < NAME_MAX - 32;
}

/* A path under the templates directory: relative, no ".." component. */
static bool from_ok(const char *s)
{
	const char *p = s;

	if (!*s || *s == '/')
		return false;
	while (*p) {
		size_t n = strcspn(p, "/");

		if ((n == 2 && !strncmp(p, "..", 2)) || n == 0)
			return false;
		p += n;
		if (*p == '/')
			p++;
	}
	return true;
}

static void free_strv(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

void initproj_free(struct initproj *p)
{
	if (!p)
		return;
	free(p->name);
	free(p->about);
	for (size_t i = 0; i < p->n_files; i++) {
		free(p->files[i].to);
		free(p->files[i].from);
		free(p->files[i].text);
	}
	free(p->files);
	for (size_t i = 0; i < p->n_values; i++) {
		free(p->values[i].name);
		free(p->values[i].kind);
		free(p->values[i].def);
		free(p->values[i].about);
		free_strv(p->values[i].choices);
	}
	free(p->values);
	for (size_t i = 0; i < 2 * p->n_derived; i++)
		free(p->derived[i]);
	free(p->derived);
	for (size_t i = 0; i < p->n_next; i++)
		free(p->next[i]);
	free(p->next);
	free(p);
}

char **initproj_names(const char *tdir, struct herd_err *err)
{
	char dir[PATH_MAX], path[PATH_MAX + NAME_MAX + 32];
	struct dirent **ents = NULL;
	char **names;
	int n, k = 0;

	snprintf(dir, sizeof(dir), "%s/%s", tdir, INITPROJ_DIR);
	if ((n = scandir(dir, &ents, NULL, alphasort)) < 0) {
		herd_errprintf(err, "cannot read %s: %s", dir, strerror(errno));
		return NULL;
	}
	names = calloc((size_t)n + 1, sizeof(*names));
	for (int i = 0; i < n; i++) {
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s/manifest.json", dir,
			 ents[i]->d_name);
		if (names && ents[i]->d_name[0] != '.' &&
		    stat(path, &st) == 0 && S_ISREG(st.st_mode))
			names[k++] = strdup(ents[i]->d_name);
		free(ents[i]);
	}
	free(ents);
	if (!names)
		herd_errprintf(err, "out of memory");
	return names;
}

/* One "files" entry.  Returns 0, or -1 with err. */
static int load_file(json_t *j, size_t i, struct initproj_file *f,
		     const char *mpath, struct herd_err *err)
{
	const char *to, *from, *mode;
	int copy = 0;
	json_error_t jerr;

	if (json_unpack_ex(j, &jerr, JSON_STRICT, "{s:s s:s s:s s?b}", "to",
			   &to, "from", &from, "mode", &mode, "copy",
			   &copy) < 0)
		return herd_errprintf(err, "%s: files[%zu]: %s", mpath, i,
				      jerr.text);
	if (!file_name_ok(to))
		return herd_errprintf(err,
				      "%s: files[%zu].to: '%s' is not a plain "
				      "file name",
				      mpath, i, to);
	if (!from_ok(from))
		return herd_errprintf(err,
				      "%s: files[%zu].from: '%s': expected a "
				      "path under the templates directory",
				      mpath, i, from);
	if (strcmp(mode, "0644") && strcmp(mode, "0755"))
		return herd_errprintf(err,
				      "%s: files[%zu].mode: '%s': expected "
				      "0644 or 0755",
				      mpath, i, mode);
	f->to = strdup(to);
	f->from = strdup(from);
	f->mode = strcmp(mode, "0755") ? 0644 : 0755;
	f->copy = copy;
	if (!f->to || !f->from)
		return herd_errprintf(err, "out of memory");
	return 0;
}

static bool known_kind(const char *kind)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(kind, kinds[i]))
			return true;
	return false;
}

/* One "values" entry.  Returns 0, or -1 with err. */
static int load_value(json_t *j, size_t i, struct initproj_value *v,
		      const char *mpath, struct herd_err *err)
{
	const char *name, *kind, *about, *def = NULL;
	json_t *choices = NULL, *c;
	json_error_t jerr;
	size_t k;

	if (json_unpack_ex(j, &jerr, JSON_STRICT, "{s:s s:s s:s s?s s?o}",
			   "name", &name, "kind", &kind, "about", &about,
			   "default", &def, "choices", &choices) < 0)
		return herd_errprintf(err, "%s: values[%zu]: %s", mpath, i,
				      jerr.text);
	if (!name_ok(name))
		return herd_errprintf(err,
				      "%s: values[%zu].name: '%s': expected "
				      "letters, digits and '_'",
				      mpath, i, name);
	if (!known_kind(kind))
		return herd_errprintf(err,
				      "%s: values[%zu].kind: unknown kind "
				      "'%s'",
				      mpath, i, kind);
	if (!strcmp(kind, "choice") != (choices != NULL) ||
	    (choices && (!json_is_array(choices) || !json_array_size(choices) ||
			 json_array_size(choices) > INITPROJ_ITEMS_MAX)))
		return herd_errprintf(err,
				      "%s: values[%zu]: a choice has "
				      "choices, a list of words; nothing "
				      "else has",
				      mpath, i);
	v->name = strdup(name);
	v->kind = strdup(kind);
	v->about = strdup(about);
	v->def = def ? strdup(def) : NULL;
	if (!v->name || !v->kind || !v->about || (def && !v->def))
		return herd_errprintf(err, "out of memory");
	if (!choices)
		return 0;
	if (!(v->choices =
		  calloc(json_array_size(choices) + 1, sizeof(*v->choices))))
		return herd_errprintf(err, "out of memory");
	json_array_foreach(choices, k, c)
	{
		if (!json_is_string(c) || !name_ok(json_string_value(c)))
			return herd_errprintf(err,
					      "%s: values[%zu].choices[%zu]: "
					      "expected a word",
					      mpath, i, k);
		if (!(v->choices[k] = strdup(json_string_value(c))))
			return herd_errprintf(err, "out of memory");
	}
	return 0;
}

/* The manifest's checks beyond its syntax: no value named twice, nor
 * named like herd's own or a derived one; defaults of their kind. */
static int check_manifest(const struct initproj *p, const char *mpath,
			  struct herd_err *err)
{
	static const char *const own[] = {"project_dir", "herd", "template"};

	for (size_t i = 0; i < p->n_values; i++) {
		const struct initproj_value *v = &p->values[i];

		for (size_t k = 0; k < i; k++)
			if (!strcmp(p->values[k].name, v->name))
				return herd_errprintf(err,
						      "%s: value '%s' named "
						      "twice",
						      mpath, v->name);
		for (size_t k = 0; k < N_OWN; k++)
			if (!strcmp(own[k], v->name))
				return herd_errprintf(err,
						      "%s: '%s' is herd's own "
						      "value",
						      mpath, v->name);
		for (size_t k = 0; k < p->n_derived; k++)
			if (!strcmp(p->derived[2 * k], v->name))
				return herd_errprintf(err,
						      "%s: '%s' is both a "
						      "value and derived",
						      mpath, v->name);
		if (v->def) {
			struct herd_err e;
			char *ok = initproj_value_check(v->kind, v->choices,
							v->def, "/", &e);

			if (!ok)
				return herd_errprintf(err,
						      "%s: value '%s': its "
						      "default %s",
						      mpath, v->name, e.text);
			free(ok);
		}
	}
	return 0;
}

struct initproj *initproj_load(const char *tdir, const char *name,
			       struct herd_err *err)
{
	char mpath[PATH_MAX + NAME_MAX + 64];
	json_t *root = NULL, *files, *values, *derived = NULL, *next = NULL;
	json_t *e;
	struct initproj *p = NULL;
	const char *about, *key;
	json_error_t jerr;
	char *text = NULL;
	size_t len, i;

	if (!name_ok(name) || strlen(name) > NAME_MAX) {
		herd_errprintf(err, "'%s' is not a template name", name);
		return NULL;
	}
	snprintf(mpath, sizeof(mpath), "%s/%s/%s/manifest.json", tdir,
		 INITPROJ_DIR, name);
	if (!(text = file_read(mpath, INITPROJ_MANIFEST_MAX, &len))) {
		if (errno == ENOENT) {
			char **names = initproj_names(tdir, err);
			char known[512] = "";

			for (char **q = names; q && *q; q++)
				snprintf(known + strlen(known),
					 sizeof(known) - strlen(known), "%s%s",
					 known[0] ? ", " : "", *q);
			free_strv(names);
			herd_errprintf(err,
				       "no template '%s': herd init's "
				       "templates are %s (herd init --list)",
				       name, known[0] ? known : "none");
		} else {
			herd_errprintf(err, "%s: %s", mpath, strerror(errno));
		}
		return NULL;
	}
	if (!(root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr))) {
		herd_errprintf(err, "%s:%d:%d: %s", mpath, jerr.line,
			       jerr.column, jerr.text);
		goto fail;
	}
	if (json_unpack_ex(root, &jerr, JSON_STRICT, "{s:s s:o s:o s?o s?o}",
			   "about", &about, "files", &files, "values", &values,
			   "derived", &derived, "next", &next) < 0) {
		herd_errprintf(err, "%s: %s", mpath, jerr.text);
		goto fail;
	}
	if (!json_is_array(files) || !json_is_array(values) ||
	    (derived && !json_is_object(derived)) ||
	    (next && !json_is_array(next)) ||
	    json_array_size(files) > INITPROJ_ITEMS_MAX ||
	    json_array_size(values) > INITPROJ_ITEMS_MAX ||
	    (derived && json_object_size(derived) > INITPROJ_ITEMS_MAX) ||
	    (next && json_array_size(next) > INITPROJ_ITEMS_MAX)) {
		herd_errprintf(err,
			       "%s: expected files and values as lists, "
			       "derived as an object, next as a list, each "
			       "of at most %d",
			       mpath, INITPROJ_ITEMS_MAX);
		goto fail;
	}
	if (!(p = calloc(1, sizeof(*p))) || !(p->name = strdup(name)) ||
	    !(p->about = strdup(about)) ||
	    !(p->files =
		  calloc(json_array_size(files) + 1, sizeof(*p->files))) ||
	    !(p->values =
		  calloc(json_array_size(values) + 1, sizeof(*p->values))) ||
	    !(p->derived =
		  calloc(2 * (derived ? json_object_size(derived) : 0) + 1,
			 sizeof(*p->derived))) ||
	    !(p->next = calloc((next ? json_array_size(next) : 0) + 1,
			       sizeof(*p->next)))) {
		herd_errprintf(err, "out of memory");
		goto fail;
	}
	json_array_foreach(files, i, e)
	{
		p->n_files = i + 1;
		if (load_file(e, i, &p->files[i], mpath, err) < 0)
			goto fail;
		for (size_t k = 0; k < i; k++)
			if (!strcmp(p->files[k].to, p->files[i].to)) {
				herd_errprintf(err, "%s: file '%s' named twice",
					       mpath, p->files[i].to);
				goto fail;
			}
	}
	json_array_foreach(values, i, e)
	{
		p->n_values = i + 1;
		if (load_value(e, i, &p->values[i], mpath, err) < 0)
			goto fail;
	}
	if (derived)
		json_object_foreach(derived, key, e)
		{
			size_t k = p->n_derived++;

			if (!name_ok(key) || !json_is_string(e)) {
				herd_errprintf(err,
					       "%s: derived.%s: expected a "
					       "name and a text",
					       mpath, key);
				goto fail;
			}
			p->derived[2 * k] = strdup(key);
			p->derived[2 * k + 1] = strdup(json_string_value(e));
			if (!p->derived[2 * k] || !p->derived[2 * k + 1]) {
				herd_errprintf(err, "out of memory");
				goto fail;
			}
		}
	json_array_foreach(next, i, e)
	{
		if (!json_is_string(e)) {
			herd_errprintf(err, "%s: next[%zu]: expected a text",
				       mpath, i);
			goto fail;
		}
		if (!(p->next[p->n_next++] = strdup(json_string_value(e)))) {
			herd_errprintf(err, "out of memory");
			goto fail;
		}
	}
	if (check_manifest(p, mpath, err) < 0)
		goto fail;
	json_decref(root);
	free(text);
	return p;
fail:
	initproj_free(p);
	json_decref(root);
	free(text);
	return NULL;
}

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
		return hostlist_value(value,
				      "slurm or a hostlist such as node[01-04]",
				      err);
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
	struct render_var vars[3 * INITPROJ_ITEMS_MAX + N_OWN + N_RUN_TIME + 2];
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

/* Writes text to dfd/name through a temporary file and renameat()
 * (file_write_at: never through a link). */
static int write_at(int dfd, const char *dir, const char *name,
		    const char *text, mode_t mode, struct herd_err *err)
{
	if (file_write_at(dfd, name, text, strlen(text), mode) < 0)
		return herd_errprintf(err, "cannot write %s/%s: %s", dir, name,
				      strerror(errno));
	return 0;
}

/* How herd init's walk of DIR's parent names what it refuses. */
static const struct logtree_words dir_words = {
    .prefix = "",
    .harm = "replace the project's files",
    .place = "the project",
    .real = "give the real directory",
};

/* Opens dir (made 0755 when missing) after checking it is a directory of
 * the caller's that nobody else can write to, reached from / as log.dir
 * is (logtree_walk: no parent another user controls, no link of
 * theirs).  Everything after is relative to the fd.  Returns the fd, -1
 * when refused, -2 when it could not be made or opened. */
int initproj_open_dir(const char *given, struct herd_err *err)
{
	char dir[PATH_MAX], abs[PATH_MAX * 2], cwd[PATH_MAX];
	const char *base = ".";
	struct stat st;
	enum file_dir_status status;
	size_t n;
	int pfd, dfd;

	/* "link/" would follow the link: the name without its slashes. */
	if ((n = strlen(given)) >= sizeof(dir))
		return herd_errprintf(err, "%s: path too long", given);
	memcpy(dir, given, n + 1);
	while (n > 1 && dir[n - 1] == '/')
		dir[--n] = '\0';
	/* The parent is walked from /: a relative DIR from the current
	 * directory's real path. */
	if (dir[0] != '/' && !getcwd(cwd, sizeof(cwd))) {
		herd_errprintf(err, "cannot find the current directory: %s",
			       strerror(errno));
		return -2;
	}
	snprintf(abs, sizeof(abs), "%s%s%s", dir[0] == '/' ? "" : cwd,
		 dir[0] == '/' ? "" : "/", dir);
	{
		char *slash = strrchr(abs, '/');

		if (strcmp(slash + 1, ".") && strcmp(slash + 1, "..") &&
		    slash[1]) {
			base = slash + 1;
			if (slash == abs)
				slash++; /* "/p": the parent is / */
			*slash = '\0';
			if (!abs[0])
				strcpy(abs, "/");
		}
	}
	if ((pfd = logtree_walk(abs, &dir_words, err)) < 0)
		return -1;
	dfd = file_dir_open(pfd, base, 0755, &st, &status);
	close(pfd);
	switch (status) {
	case FILE_DIR_OK:
		return dfd;
	case FILE_DIR_MAKE_FAILED:
		herd_errprintf(err, "cannot make %s: %s", dir, strerror(errno));
		return -2;
	case FILE_DIR_OPEN_FAILED:
		herd_errprintf(err, "cannot open %s: %s", dir, strerror(errno));
		return -2;
	case FILE_DIR_LINK:
		return herd_errprintf(err,
				      "%s is a symbolic link: give the "
				      "directory it names, or another one",
				      dir);
	case FILE_DIR_NOT_DIR:
		return herd_errprintf(err, "%s is not a directory", dir);
	case FILE_DIR_NOT_OWNED:
		return herd_errprintf(err,
				      "%s belongs to uid %ld, not to you: herd "
				      "init writes only into your own "
				      "directories",
				      dir, (long)st.st_uid);
	case FILE_DIR_WRITABLE:
		return herd_errprintf(
		    err,
		    "%s is writable by %s (mode %04o), who "
		    "could replace the project's files; run "
		    "chmod go-w '%s' or choose another "
		    "directory",
		    dir, (st.st_mode & 002) ? "others" : "its group",
		    (unsigned)(st.st_mode & 07777), dir);
	case FILE_DIR_CHANGED:
		break;
	}
	return herd_errprintf(err, "%s changed while herd opened it", dir);
}

/* text's SHA-256 as 64 hex digits into hex (65 bytes).  Returns 0 or -1. */
static int sha256_hex(const void *text, size_t len, char *hex)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (!EVP_Digest(text, len, md, &mdlen, EVP_sha256(), NULL) ||
	    mdlen != 32)
		return -1;
	for (unsigned int i = 0; i < mdlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return 0;
}

/* The SHA-256 of the regular file dfd/name (not followed when a link)
 * into hex.  Returns 0, or -1 when it is not a regular file of at most
 * INITPROJ_FILE_MAX bytes or cannot be read. */
static int file_sha256(int dfd, const char *name, char *hex)
{
	size_t len = 0;
	char *buf = file_read_at(dfd, name, INITPROJ_FILE_MAX, &len);
	int rc;

	if (!buf)
		return -1;
	rc = sha256_hex(buf, len, hex);
	free(buf);
	return rc;
}

/* The sums file of the project in dfd ({"sha256": {FILE: HEX}}), or a
 * new empty one when there is none or it is not one. */
static json_t *sums_read(int dfd)
{
	int fd = openat(dfd, INITPROJ_SUMS, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	json_t *doc = NULL;
	json_error_t jerr;

	if (fd >= 0) {
		doc = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
		close(fd);
	}
	if (!json_is_object(json_object_get(doc, "sha256"))) {
		json_decref(doc);
		doc = json_pack("{s:s, s:{}}", "about",
				"the files herd init wrote and their SHA-256: "
				"herd init --force replaces only these "
				"unchanged",
				"sha256");
	}
	return doc;
}

static int sums_write(int dfd, const char *dir, json_t *doc,
		      struct herd_err *err)
{
	char *text = json_dumps(doc, JSON_INDENT(1) | JSON_SORT_KEYS);
	int rc;

	if (!text)
		return herd_errprintf(err, "out of memory");
	rc = write_at(dfd, dir, INITPROJ_SUMS, text, 0644, err);
	free(text);
	return rc;
}

/* Whether dfd/name is as herd init wrote it (its sum recorded in sums)
 * or holds text already. */
static bool unchanged(int dfd, const char *name, json_t *sums, const char *text)
{
	const char *was = json_string_value(
	    json_object_get(json_object_get(sums, "sha256"), name));
	char hex[65], want[65];

	if (file_sha256(dfd, name, hex) < 0)
		return false;
	if (was && !strcmp(was, hex))
		return true;
	return sha256_hex(text, strlen(text), want) == 0 && !strcmp(hex, want);
}

int initproj_write(struct initproj *p, const char *dir, int force,
		   struct herd_err *err)
{
	char exist[HERD_ERR_MAX / 2] = "", changed[HERD_ERR_MAX / 2] = "";
	json_t *sums = NULL, *tab;
	int dfd, rc = -1;

	if ((dfd = initproj_open_dir(dir, err)) < 0)
		return dfd;
	if (!(sums = sums_read(dfd))) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	tab = json_object_get(sums, "sha256");
	for (size_t i = 0; i < p->n_files; i++) {
		struct initproj_file *f = &p->files[i];
		struct stat st;

		f->replaced = f->kept = false;
		if (fstatat(dfd, f->to, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			herd_errprintf(err, "%s/%s: %s", dir, f->to,
				       strerror(errno));
			rc = -2;
			goto out;
		}
		if (S_ISDIR(st.st_mode)) {
			herd_errprintf(err,
				       "%s/%s is a directory: herd init "
				       "would write a file there",
				       dir, f->to);
			goto out;
		}
		f->replaced = true;
		snprintf(exist + strlen(exist), sizeof(exist) - strlen(exist),
			 "%s%s", exist[0] ? ", " : "", f->to);
		if (!unchanged(dfd, f->to, sums, f->text)) {
			f->kept = true;
			snprintf(changed + strlen(changed),
				 sizeof(changed) - strlen(changed), "%s%s",
				 changed[0] ? ", " : "", f->to);
		}
	}
	if (exist[0] && !force) {
		herd_errprintf(err,
			       "%s holds %s already: nothing written; give "
			       "--force to replace %s",
			       dir, exist, strchr(exist, ',') ? "them" : "it");
		goto out;
	}
	if (changed[0] && force < 2) {
		bool many = strchr(changed, ',') != NULL;

		const char *them = many ? "them" : "it";

		herd_errprintf(err,
			       "%s: %s changed since herd init wrote %s (or "
			       "herd init did not write %s): nothing written; "
			       "give --force twice to replace %s, keeping "
			       "yours as %s%s",
			       dir, changed, them, them, them,
			       many ? "FILE" : changed,
			       many ? ".orig each" : ".orig");
		goto out;
	}
	for (size_t i = 0; i < p->n_files; i++) {
		struct initproj_file *f = &p->files[i];
		char orig[NAME_MAX + 1];

		if (!f->kept)
			continue;
		snprintf(orig, sizeof(orig), "%s.orig", f->to);
		if (renameat(dfd, f->to, dfd, orig) < 0) {
			herd_errprintf(err, "cannot keep %s/%s as %s: %s", dir,
				       f->to, orig, strerror(errno));
			rc = -2;
			goto out;
		}
	}
	for (size_t i = 0; i < p->n_files; i++) {
		char hex[65];

		if (write_at(dfd, dir, p->files[i].to, p->files[i].text,
			     p->files[i].mode, err) < 0) {
			rc = -2;
			goto out;
		}
		if (sha256_hex(p->files[i].text, strlen(p->files[i].text),
			       hex) < 0 ||
		    json_object_set_new(tab, p->files[i].to, json_string(hex)) <
			0) {
			herd_errprintf(err, "cannot hash %s/%s", dir,
				       p->files[i].to);
			rc = -2;
			goto out;
		}
	}
	if (sums_write(dfd, dir, sums, err) < 0) {
		rc = -2;
		goto out;
	}
	if (fsync(dfd) < 0) {
		herd_errprintf(err, "cannot sync %s: %s", dir, strerror(errno));
		rc = -2;
		goto out;
	}
	rc = 0;
out:
	json_decref(sums);
	close(dfd);
	return rc;
}

int initproj_sums_update(const char *dir, const char *name,
			 struct herd_err *err)
{
	json_t *sums = NULL;
	char hex[65];
	int dfd, rc = -2;

	if ((dfd = initproj_open_dir(dir, err)) < 0)
		return dfd;
	if (file_sha256(dfd, name, hex) < 0) {
		herd_errprintf(err, "cannot read %s/%s", dir, name);
		goto out;
	}
	if (!(sums = sums_read(dfd)) ||
	    json_object_set_new(json_object_get(sums, "sha256"), name,
				json_string(hex)) < 0) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	if (sums_write(dfd, dir, sums, err) < 0)
		goto out;
	rc = 0;
out:
	json_decref(sums);
	close(dfd);
	return rc;
}
