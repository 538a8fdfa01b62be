/* gen/initproj.h — project templates for `herd init`: a template is a
 * directory templates/init/NAME/ whose manifest.json lists the files a
 * project gets and the values they take.
 *
 * manifest.json (read with jansson, every key checked):
 *   about    one line: what the template makes (herd init --list)
 *   files    [{to, from, mode, copy?}]: the project file `to` (a plain
 *            name) made from `from` (relative to herd's templates
 *            directory, no ".."), mode "0644" or "0755"; rendered with
 *            the values unless copy is true (then copied as it is)
 *   values   [{name, kind, default?, choices?, about}]: what --set
 *            gives; a value without default is required
 *   derived  {NAME: TEXT}: more values, TEXT rendered with the others
 *   next     [TEXT]: the "next steps" lines, rendered with the values
 *
 * Kinds, checked before anything is rendered (a value goes into shell
 * and YAML text, so none may hold a control character or one of ' " \ $
 * and `):
 *   int        decimal digits, at most 9
 *   number     digits, an optional fraction and exponent (3e-4, 0.001):
 *              what JSON and Python both read
 *   args       words pasted as they are (extra arguments): letters,
 *              digits, spaces and . _ = , : / + - only, so no shell
 *              metacharacter; may be empty
 *   word       letters, digits, '.', '_', '-', not starting with '-' or '.'
 *   choice     one of choices
 *   path       a file name, made absolute (relative to the current
 *              directory)
 *   program    a command name, or a path (made absolute when relative)
 *   time       Slurm's time syntax: digits, ':' and '-'
 *   hosts      "slurm", or a Slurm hostlist expression; NAME.yaml is the
 *              nodes: entry for it ("slurm: true" or "hosts: \"...\"")
 *   hostlist   empty, or a Slurm hostlist expression; NAME.yaml is the
 *              job file's entry NAME: "VALUE" (a comment when empty)
 *   file       empty, or a path made absolute ("~/" kept: herd expands
 *              it); NAME.yaml as for hostlist
 *   tokenizer  a vocabulary size (digits) or a path; NAME.args is
 *              tokenize_corpus.py's argument for it (--vocab-size N or
 *              --tokenizer 'PATH')
 *
 * For the value of kind hosts, herd adds NAME.run (herd sbatch --wait
 * job.yaml under Slurm, else herd run job.yaml) and NAME.ssh (a comment
 * saying how herd reaches the nodes: the file values identity and
 * known_hosts, or what herd uses without them).
 * herd adds project_dir (the project's absolute path), herd (this herd's
 * path) and template (the template's name); {{checkpoint}},
 * {{resume_args}} and {{attempt}} are kept for herd run.
 * Nothing here prints or exits; errors come back in a struct herd_err.
 */
#ifndef HERD_LAUNCHER_INITPROJ_H
#define HERD_LAUNCHER_INITPROJ_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "herd/err.h"
#include "herd/render.h"

/* herd's own values (project_dir, herd, template): initproj_render()
 * fills them in, and a manifest may not name a value so. */
#define INITPROJ_OWN_N 3

/* The templates' directory under herd's templates directory. */
#define INITPROJ_DIR "init"

/* A manifest larger than this is not a manifest. */
#define INITPROJ_MANIFEST_MAX (256u * 1024)

/* At most this many files, values, derived values and next lines per
 * template: a manifest is written by hand. */
#define INITPROJ_ITEMS_MAX 64

/* In the project directory: the SHA-256 of each file herd init wrote
 * (JSON), so --force tells the user's edits from herd init's text. */
#define INITPROJ_SUMS ".herd-init.json"

/* A project file larger than this was not written by herd init. */
#define INITPROJ_FILE_MAX (16u * 1024 * 1024)

/* A value given with --set or a default: at most this long (a path). */
#define INITPROJ_VALUE_MAX 4096

struct initproj_file {
	char *to;      /* the project file's name */
	char *from;    /* relative to the templates directory */
	mode_t mode;   /* 0644 or 0755 */
	bool copy;     /* copied as it is, not rendered */
	char *text;    /* what initproj_render() made */
	bool replaced; /* initproj_write() replaced an existing file */
	bool kept;     /* ... that had changed: kept as NAME.orig */
};

struct initproj_value {
	char *name, *kind, *def, *about; /* def: NULL when required */
	char **choices;			 /* kind choice: NULL-terminated */
};

struct initproj {
	char *name, *about;
	struct initproj_file *files;
	size_t n_files;
	struct initproj_value *values;
	size_t n_values;
	char **derived; /* name, text, name, text, ...: n_derived pairs */
	size_t n_derived;
	char **next; /* n_next lines; rendered by initproj_render() */
	size_t n_next;
};

/* The sorted names of the templates in tdir/INITPROJ_DIR (directories
 * holding a manifest.json), NULL-terminated and malloc'd (free each and
 * the array).  Returns NULL with err. */
char **initproj_names(const char *tdir, struct herd_err *err);

/* Loads template name from the templates directory tdir.  Returns it, or
 * NULL with err naming the manifest (and the known templates when name
 * is not one). */
struct initproj *initproj_load(const char *tdir, const char *name,
			       struct herd_err *err);

void initproj_free(struct initproj *p);

/* Renders every file of p into its text (and the next lines) with sets
 * (n_sets --set values; the first of a name wins), the template's
 * defaults and herd's own values; project_dir is the project's
 * absolute path, herd the path of bin/herd.  Checks everything first:
 * an unknown --set (naming the values the template takes), every
 * required value that has none (all named in one error), each value
 * against its kind; then each rendered file (template_check).  Returns 0,
 * or -1 with err. */
int initproj_render(struct initproj *p, const char *tdir,
		    const struct render_var *sets, size_t n_sets,
		    const char *project_dir, const char *herd,
		    struct herd_err *err);

/* Writes the rendered files into dir, made 0755 when missing (its parent
 * must exist).  Refuses a dir that is a symlink, not a directory, not
 * owned by the caller or writable by group or others.  When a file
 * exists already, nothing is written unless force is 1 or more (then
 * each replaced file has replaced set); the error names every one.  A
 * file that changed since herd init wrote it (its SHA-256 is not the
 * one dir/INITPROJ_SUMS records, nor that of the new text), or that herd
 * init did not write, is replaced only when force is 2 or more: it is
 * renamed to NAME.orig first (and kept set).  Each file is written to a
 * temporary name in dir and renamed over its name; then INITPROJ_SUMS
 * with the SHA-256 of each.  Returns 0; -1 with err when refused (the
 * user's input), -2 with err when making dir or writing a file failed. */
int initproj_write(struct initproj *p, const char *dir, int force,
		   struct herd_err *err);

/* Opens dir (made 0755 when missing) as initproj_write does: its parent
 * walked from / by log.dir's rule (logtree_walk), dir itself the
 * caller's, no symlink, writable by nobody else.  Returns an O_RDONLY
 * directory fd to write relative to, -1 with err when refused, -2 with
 * err when it could not be made or opened. */
int initproj_open_dir(const char *dir, struct herd_err *err);

/* Records the SHA-256 of dir/name as it is now in dir/INITPROJ_SUMS (a
 * file herd changed after initproj_write: --tune's ds_zero3.json).
 * Returns 0, -1 or -2 with err as initproj_write. */
int initproj_sums_update(const char *dir, const char *name,
			 struct herd_err *err);

/* Checks value against kind (choices for kind choice) and returns its
 * malloc'd form: a path made absolute with cwd.  Returns NULL with err
 * ("VALUE: expected ..."). */
char *initproj_value_check(const char *kind, char *const *choices,
			   const char *value, const char *cwd,
			   struct herd_err *err);

#endif
