/* render.h — fills {{placeholders}} in job text (commands, paths, job
 * templates).  A placeholder is {{name}} with optional spaces inside the
 * braces; names are [A-Za-z0-9_.]+.  {{name|default}} gives the text up
 * to the closing "}}" on the same line (blanks around it dropped) when
 * name has no value.
 * Values come from a caller-given list of name/value pairs.
 */
#ifndef HERD_RENDER_H
#define HERD_RENDER_H

#include <stddef.h>

#include "herd/err.h"

/* A rendered text larger than this is refused (a template that expands
 * into itself or a runaway value). */
#define RENDER_MAX (16u * 1024 * 1024)

struct render_var {
	const char *name;
	const char *value;
};

/* Returns a malloc'd copy of tmpl with every {{name}} replaced by its
 * value, else its default.  An unknown name without a default is an
 * error when strict is nonzero, and is kept verbatim otherwise.  An unclosed "{{" is kept verbatim.  Returns NULL
 * with err. */
char *render_text(const char *tmpl, const struct render_var *vars,
		  size_t n_vars, int strict, struct herd_err *err);

#endif
