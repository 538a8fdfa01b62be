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
 * error when strict is nonzero, and is kept verbatim otherwise.  An unclosed
 * "{{" is kept verbatim.  Returns NULL with err. */
char *render_text(const char *tmpl, const struct render_var *vars,
		  size_t n_vars, int strict, struct herd_err *err);

/* The placeholders of a template that render_suggest looks at, at most. */
#define RENDER_SUGGEST_NAMES 256

/* "Did you mean": the placeholder name of tmpl nearest to name
 * (suggest_nearest), copied into buf of size bytes.  Returns buf, or NULL
 * when none is near enough (or buf is too small). */
char *render_suggest(const char *tmpl, const char *name, char *buf,
		     size_t size);

/* ---- text that /bin/sh will read (launch.command, resume_args) ----
 *
 * Every value herd puts into a command must reach the program as exactly
 * one literal argument, whatever it holds (a checkpoint directory is
 * named by whoever writes checkpoint.dir: "ckpt-2;touch INJ;#" or
 * "step 2" are names, not shell text).  render_shell() therefore puts each
 * value in single quotes (a ' inside as '\'') and, since the template is
 * shell text the user wrote, follows its quoting: a placeholder written
 * inside "..." or '...' closes that quote, adds the quoted value and opens
 * it again ("--out={{name}}" gives "--out="'job'"").
 *
 * Where a plain scan of the text cannot tell how the shell will read a
 * placeholder (inside `...`, inside "$(...)" or "${...}", after a
 * here-document "<<", in a # comment) the template is refused rather
 * than guessed at.  So are the places where bash (/bin/sh on many
 * clusters) reads quotes differently from dash: a $'...' with a
 * backslash, and arithmetic ($((, $[, ((, ${a[...]}, ${a:offset}), where
 * bash runs a $(...) found in a value's array subscript, quotes or not.
 * A simple $(...), ${...}, `...` or $((...)) written before a
 * placeholder (no placeholder inside, quotes balanced) is skipped where
 * every shell ends it ("${HOME}/t.py", "$(dirname "$0")").  What a
 * program does with its argument (eval, let, [[ x -eq y ]], sh -c) is
 * its own business: herd promises one literal argument.
 *
 * One variable may be named `words`: its value is shell words herd built
 * itself (checkpoint.resume_args, already rendered with render_shell()),
 * pasted as they are; it must stand outside quotes, and the scan follows
 * them (a # or a trailing \ in them counts). */

/* Returns a malloc'd copy of s in single quotes for /bin/sh, or NULL when
 * out of memory. */
char *render_shell_quote(const char *s);

/* As render_text (lenient: unknown names are kept verbatim) with each
 * value quoted as described above; words (may be NULL) names the one
 * variable pasted unquoted.  Defaults ({{x|text}}) are values too.
 * Returns NULL with err ("character N: ...") when the template places a
 * placeholder where its quoting cannot be told, or is over RENDER_MAX. */
char *render_shell(const char *tmpl, const struct render_var *vars,
		   size_t n_vars, const char *words, struct herd_err *err);

/* The checks of render_shell() for `herd validate` (vars may hold
 * stand-in values: only their names matter): every placeholder of tmpl
 * with a value or default stands where its quoting can be told, words
 * (may be NULL) outside quotes, and when balanced is nonzero the text
 * ends outside any quote (resume_args, which is pasted into the
 * command).  Returns 0, or -1 with err ("character N: ..."). */
int render_shell_check(const char *tmpl, const struct render_var *vars,
		       size_t n_vars, const char *words, int balanced,
		       struct herd_err *err);

#endif
