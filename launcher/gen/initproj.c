/* gen/initproj.c — project templates for `herd init`: the manifests and
 * their checks; see gen/initproj.h. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "herd/file.h"
#include "launcher/gen/initproj.h"

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
		for (size_t k = 0; k < INITPROJ_OWN_N; k++)
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
