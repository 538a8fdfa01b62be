/* template.h — herd's job templates (the .tmpl files in templates/),
 * found next to bin/herd: in DIR/../templates, then in
 * DIR/../share/herd/templates (an installed herd).  `herd sbatch` renders
 * sbatch.sh.tmpl; `herd render` renders any of them, or a user's own file.
 */
#ifndef HERD_LAUNCHER_TEMPLATE_H
#define HERD_LAUNCHER_TEMPLATE_H

#include <stddef.h>

#include "herd/err.h"

/* A template larger than this is refused (Slurm's own MaxScriptSize). */
#define TEMPLATE_MAX (4u * 1024 * 1024)

/* The templates directory of the program at self (the path of bin/herd)
 * into dir (size bytes).  Returns 0, or -1 with err naming both places
 * looked in. */
int template_dir(const char *self, char *dir, size_t size,
		 struct herd_err *err);

/* Reads the template file at path: at most TEMPLATE_MAX bytes, no NUL
 * byte.  Returns its malloc'd text, or NULL with err. */
char *template_read(const char *path, struct herd_err *err);

/* Reads the template called name from the templates directory of self.
 * Returns its malloc'd text, or NULL with err. */
char *template_load(const char *self, const char *name, struct herd_err *err);

/* Checks a rendered file by its name: a .json file must be JSON, a .yaml
 * (.yml) file a valid herd job (spec_parse; errors as NAME:line:col).
 * Other files pass.  Returns 0, or -1 with err. */
int template_check(const char *name, const char *text, struct herd_err *err);

#endif
