/* render.c — {{placeholder}} substitution; see render.h. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd/render.h"
#include "herd/suggest.h"

struct strbuf {
	char *s;
	size_t len, cap;
};

static int sb_add(struct strbuf *b, const char *p, size_t n)
{
	if (b->len + n + 1 > RENDER_MAX)
		return -1;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *s;

		while (cap < b->len + n + 1)
			cap *= 2;
		s = realloc(b->s, cap);
		if (!s)
			return -1;
		b->s = s;
		b->cap = cap;
	}
	memcpy(b->s + b->len, p, n);
	b->len += n;
	b->s[b->len] = '\0';
	return 0;
}

static int sb_str(struct strbuf *b, const char *s)
{
	return sb_add(b, s, strlen(s));
}

static int is_name_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '.';
}

/* One {{name}} or {{name|default}} starting at open ("{{"). */
struct placeholder {
	const char *name;
	size_t nlen;
	const char *dflt; /* NULL: no default */
	size_t dlen;
	const char *end; /* just after the closing "}}" */
};

/* Returns 1 when open starts a placeholder (ph filled), 0 when the "{{"
 * is plain text. */
static int placeholder_parse(const char *open, struct placeholder *ph)
{
	const char *q = open + 2;

	memset(ph, 0, sizeof(*ph));
	while (*q == ' ')
		q++;
	ph->name = q;
	while (is_name_char(*q))
		q++;
	ph->nlen = (size_t)(q - ph->name);
	while (*q == ' ')
		q++;
	if (ph->nlen && *q == '|') {
		/* {{name|default}}: the default runs to the "}}" on the same
		 * line; blanks around it are layout, not value. */
		const char *d = q + 1, *dend;

		q = strstr(d, "}}");
		if (!q || memchr(d, '\n', (size_t)(q - d)))
			return 0;
		dend = q;
		while (*d == ' ')
			d++;
		while (dend > d && dend[-1] == ' ')
			dend--;
		ph->dflt = d;
		ph->dlen = (size_t)(dend - d);
	}
	if (ph->nlen == 0 || q[0] != '}' || q[1] != '}')
		return 0;
	ph->end = q + 2;
	return 1;
}

/* The value of ph's name, or NULL when vars has none. */
static const char *placeholder_value(const struct placeholder *ph,
				     const struct render_var *vars,
				     size_t n_vars)
{
	for (size_t i = 0; i < n_vars; i++)
		if (strlen(vars[i].name) == ph->nlen &&
		    !strncmp(vars[i].name, ph->name, ph->nlen))
			return vars[i].value ? vars[i].value : "";
	return NULL;
}

char *render_text(const char *tmpl, const struct render_var *vars,
		  size_t n_vars, int strict, struct herd_err *err)
{
	struct strbuf b = {0};
	const char *p = tmpl;

	if (sb_add(&b, "", 0) < 0)
		goto oom;
	while (*p) {
		const char *open = strstr(p, "{{"), *value;
		struct placeholder ph;

		if (!open) {
			if (sb_str(&b, p) < 0)
				goto oom;
			break;
		}
		if (sb_add(&b, p, (size_t)(open - p)) < 0)
			goto oom;
		if (!placeholder_parse(open, &ph)) {
			if (sb_add(&b, "{{", 2) < 0) /* not a placeholder */
				goto oom;
			p = open + 2;
			continue;
		}
		value = placeholder_value(&ph, vars, n_vars);
		if (!value && ph.dflt) {
			if (sb_add(&b, ph.dflt, ph.dlen) < 0)
				goto oom;
		} else if (!value && strict) {
			herd_errprintf(err, "unknown placeholder {{%.*s}}",
				       (int)ph.nlen, ph.name);
			free(b.s);
			return NULL;
		} else if (value ? sb_str(&b, value) < 0
				 : sb_add(&b, open, (size_t)(ph.end - open)) <
				       0) {
			goto oom;
		}
		p = ph.end;
	}
	return b.s;
oom:
	free(b.s);
	herd_errprintf(err, "rendered text exceeds %u bytes", RENDER_MAX);
	return NULL;
}

char *render_suggest(const char *tmpl, const char *name, char *buf, size_t size)
{
	char names[RENDER_SUGGEST_NAMES][SUGGEST_WORD_MAX + 1];
	const char *ptrs[RENDER_SUGGEST_NAMES], *near;
	size_t n = 0;

	for (const char *p = tmpl;
	     n < RENDER_SUGGEST_NAMES && (p = strstr(p, "{{"));) {
		struct placeholder ph;

		if (!placeholder_parse(p, &ph)) {
			p += 2;
			continue;
		}
		if (ph.nlen <= SUGGEST_WORD_MAX) {
			snprintf(names[n], sizeof(names[n]), "%.*s",
				 (int)ph.nlen, ph.name);
			ptrs[n] = names[n];
			n++;
		}
		p = ph.end;
	}
	near = suggest_nearest(name, ptrs, n);
	if (!near || snprintf(buf, size, "%s", near) >= (int)size)
		return NULL;
	return buf;
}

/* ---- shell text ---------------------------------------------------------- */

char *render_shell_quote(const char *s)
{
	struct strbuf b = {0};

	if (sb_add(&b, "'", 1) < 0)
		goto oom;
	for (const char *p = s; *p; p++)
		if (*p == '\'' ? sb_add(&b, "'\\''", 4) < 0
			       : sb_add(&b, p, 1) < 0)
			goto oom;
	if (sb_add(&b, "'", 1) < 0)
		goto oom;
	return b.s;
oom:
	free(b.s);
	return NULL;
}

/* Where the scan of the shell text stands: how /bin/sh would read the
 * next character.  `unsure` is sticky: once set, no later placeholder is
 * accepted (the scan does not follow nesting). */
enum sh_quote { SH_PLAIN, SH_SINGLE, SH_DOUBLE, SH_COMMENT };

struct sh_scan {
	enum sh_quote q;
	const char *unsure; /* why the quoting cannot be told; NULL: it can */
	char prev;	    /* the previous character of the text, or 0 */
	int escaped;	    /* a '\\' ended the text: it escapes what follows */
};

static int sh_word_start(char prev)
{
	return prev == 0 || prev == ' ' || prev == '\t' || prev == '\n' ||
	       prev == ';' || prev == '&' || prev == '|' || prev == '(' ||
	       prev == ')' || prev == '<' || prev == '>';
}

/* The length of a command substitution $(...) at p whose end every shell
 * finds at the same ')': quotes in it balance, parentheses nest, and it
 * holds no placeholder, backquote, nested $( inside its quotes, '#',
 * here-document or `case` (whose patterns end in an unbalanced ')').
 * 0 otherwise.  ("$(dirname "$0")" is one.) */
static size_t sh_cmdsub_len(const char *p)
{
	enum sh_quote q = SH_PLAIN;
	int depth = 1;

	for (const char *c = p + 2; *c; c++) {
		if ((c[0] == '{' && c[1] == '{') || *c == '`' ||
		    (c[0] == '<' && c[1] == '<') || !strncmp(c, "case", 4))
			return 0;
		if (q == SH_SINGLE) {
			if (*c == '\'')
				q = SH_PLAIN;
		} else if (q == SH_DOUBLE) {
			if (*c == '\\' && c[1])
				c++;
			else if (*c == '"')
				q = SH_PLAIN;
			else if (c[0] == '$' && c[1] == '(')
				return 0;
		} else if (*c == '\\') {
			if (!c[1])
				return 0;
			c++;
		} else if (*c == '\'') {
			q = SH_SINGLE;
		} else if (*c == '"') {
			q = SH_DOUBLE;
		} else if (*c == '#') {
			return 0;
		} else if (*c == '(') {
			depth++;
		} else if (*c == ')' && --depth == 0) {
			return (size_t)(c + 1 - p);
		}
	}
	return 0;
}

/* The length of a simple expansion at p: `...`, $(...), ${...},
 * $((...)), $[...] or ((...)) whose body holds no quote, backslash,
 * nesting, '{' (so no placeholder) and, for commands, no '#' or '<'
 * (comments, here-documents): the first closing character ends it, for
 * every shell.  0 when p starts none, or one the scan cannot skip. */
static size_t sh_simple_expansion(const char *p)
{
	const char *q;
	char close;
	int twice = 0, cmd = 0;

	if (p[0] == '`') {
		q = p + 1;
		close = '`';
		cmd = 1;
	} else if (p[0] == '$' && p[1] == '(' && p[2] == '(') {
		q = p + 3;
		close = ')';
		twice = 1;
	} else if (p[0] == '(' && p[1] == '(') {
		q = p + 2;
		close = ')';
		twice = 1;
	} else if (p[0] == '$' && p[1] == '(') {
		return sh_cmdsub_len(p);
	} else if (p[0] == '$' && p[1] == '{') {
		q = p + 2;
		close = '}';
	} else if (p[0] == '$' && p[1] == '[') {
		q = p + 2;
		close = ']';
	} else {
		return 0;
	}
	for (; *q; q++) {
		if (*q == close) {
			if (!twice)
				return (size_t)(q + 1 - p);
			return q[1] == close ? (size_t)(q + 2 - p) : 0;
		}
		if (strchr("'\"\\`(){}[]", *q) || (cmd && strchr("#<", *q)))
			return 0;
		if (*q == '$' && !isalnum((unsigned char)q[1]) &&
		    !strchr("_@*#?!-$", q[1]))
			return 0;
	}
	return 0;
}

/* Whether ${...} at p (in plain text) is read as arithmetic by bash: an
 * array subscript ${a[...]} or a substring ${a:offset}, where quotes do
 * not protect a value (bash runs $(...) found in a subscript). */
static int sh_param_arith(const char *p)
{
	const char *q = p + 2;

	if (*q == '#' || *q == '!')
		q++;
	if (*q && strchr("@*#?!-$", *q))
		q++;
	else
		while (isalnum((unsigned char)*q) || *q == '_')
			q++;
	if (q == p + 2)
		return 1; /* no name: nothing the scan can tell */
	if (*q == '[')
		return 1;
	if (*q == ':' && !(q[1] && strchr("-=?+", q[1])))
		return 1;
	return 0;
}

/* Follows the shell's quoting over the n characters of literal text at
 * p (it may look past p[n], which is still in the template or NUL). */
static void sh_scan_text(struct sh_scan *s, const char *p, size_t n)
{
	size_t i = 0;

	if (n > 0 && s->escaped) {
		/* The text before ended with '\\': it escapes p[0]. */
		s->escaped = 0;
		s->prev = p[0];
		i = 1;
	}
	for (; i < n; i++) {
		char c = p[i];
		size_t len;

		if (c == '\\' && i + 1 == n &&
		    (s->q == SH_PLAIN || s->q == SH_DOUBLE)) {
			s->escaped = 1;
			s->prev = c;
			break;
		}

		switch (s->q) {
		case SH_PLAIN:
			if (c == '\\' && i + 1 < n) {
				i++;
				c = p[i];
			} else if ((c == '`' || c == '$' ||
				    (c == '(' && sh_word_start(s->prev))) &&
				   (len = sh_simple_expansion(p + i)) > 0 &&
				   i + len <= n) {
				i += len - 1;
				c = p[i];
			} else if (c == '\'') {
				s->q = SH_SINGLE;
			} else if (c == '"') {
				s->q = SH_DOUBLE;
			} else if (c == '`') {
				s->unsure = s->unsure ? s->unsure : "a `";
			} else if (c == '$' && p[i + 1] == '\'') {
				/* $'...': bash (and POSIX 2024) read \' in
				 * it as a quote, dash 0.5.12 ends it there:
				 * with a backslash before the next ', the
				 * scan cannot tell where it ends (the rest
				 * of the template counts, placeholders and
				 * all). */
				const char *b = p + i + 2;
				const char *e = strchr(b, '\'');

				if (memchr(b, '\\',
					   e ? (size_t)(e - b) : strlen(b)))
					s->unsure = s->unsure ? s->unsure
							      : "a $'...' with "
								"a backslash";
			} else if (c == '$' && p[i + 1] == '(' &&
				   p[i + 2] == '(') {
				/* Arithmetic reads no quotes (and bash
				 * evaluates subscripts in it). */
				s->unsure =
				    s->unsure ? s->unsure : "an arithmetic $((";
			} else if (c == '$' && p[i + 1] == '[') {
				s->unsure =
				    s->unsure ? s->unsure : "an arithmetic $[";
			} else if (c == '(' && p[i + 1] == '(' &&
				   sh_word_start(s->prev)) {
				s->unsure =
				    s->unsure ? s->unsure : "an arithmetic ((";
			} else if (c == '$' && p[i + 1] == '{' &&
				   sh_param_arith(p + i)) {
				s->unsure = s->unsure
						? s->unsure
						: "a ${name[...]} or "
						  "${name:offset} (arithmetic)";
			} else if (c == '<' && p[i + 1] == '<') {
				s->unsure = s->unsure ? s->unsure
						      : "a here-document <<";
			} else if (c == '#' && sh_word_start(s->prev)) {
				s->q = SH_COMMENT;
			}
			break;
		case SH_SINGLE:
			if (c == '\'')
				s->q = SH_PLAIN;
			break;
		case SH_DOUBLE:
			if (c == '\\' && i + 1 < n) {
				i++;
				c = p[i];
			} else if ((c == '`' || c == '$') &&
				   (len = sh_simple_expansion(p + i)) > 0 &&
				   i + len <= n) {
				i += len - 1;
				c = p[i];
			} else if (c == '"') {
				s->q = SH_PLAIN;
			} else if (c == '`' ||
				   (c == '$' &&
				    (p[i + 1] == '(' || p[i + 1] == '{' ||
				     p[i + 1] == '['))) {
				s->unsure = s->unsure ? s->unsure
						      : "a $(, ${, $[ or ` "
							"inside double quotes";
			}
			break;
		case SH_COMMENT:
			if (c == '\n')
				s->q = SH_PLAIN;
			break;
		}
		s->prev = c;
	}
}

/* Adds value (quoted unless raw) where the scan stands. */
static int sh_add_value(struct strbuf *b, const struct sh_scan *s,
			const char *value, size_t len, int raw)
{
	char *v = strndup(value, len), *q = NULL;
	int rc = -1;

	if (!v)
		return -1;
	if (raw) {
		rc = sb_str(b, v);
		goto out;
	}
	if (!(q = render_shell_quote(v)))
		goto out;
	/* In quotes: close them, add the quoted value, open them again. */
	if (s->q == SH_SINGLE)
		rc = sb_add(b, "'", 1) || sb_str(b, q) || sb_add(b, "'", 1) ? -1
									    : 0;
	else if (s->q == SH_DOUBLE)
		rc = sb_add(b, "\"", 1) || sb_str(b, q) || sb_add(b, "\"", 1)
			 ? -1
			 : 0;
	else
		rc = sb_str(b, q);
out:
	free(v);
	free(q);
	return rc;
}

static char *shell_render(const char *tmpl, const struct render_var *vars,
			  size_t n_vars, const char *words, int balanced,
			  struct herd_err *err)
{
	struct strbuf b = {0};
	struct sh_scan s = {.q = SH_PLAIN};
	const char *p = tmpl;

	if (sb_add(&b, "", 0) < 0)
		goto oom;
	while (*p) {
		const char *open = strstr(p, "{{"), *value;
		struct placeholder ph;
		size_t at = 0;
		int raw;

		if (!open)
			open = p + strlen(p);
		sh_scan_text(&s, p, (size_t)(open - p));
		if (sb_add(&b, p, (size_t)(open - p)) < 0)
			goto oom;
		if (!*open)
			break;
		if (!placeholder_parse(open, &ph)) {
			sh_scan_text(&s, open, 2);
			if (sb_add(&b, "{{", 2) < 0)
				goto oom;
			p = open + 2;
			continue;
		}
		p = ph.end;
		value = placeholder_value(&ph, vars, n_vars);
		if (!value && !ph.dflt) {
			/* Unknown: kept verbatim, as render_text does. */
			if (sb_add(&b, open, (size_t)(ph.end - open)) < 0)
				goto oom;
			continue;
		}
		at = (size_t)(open - tmpl) + 1;
		raw = value && words && strlen(words) == ph.nlen &&
		      !strncmp(words, ph.name, ph.nlen);
		if (s.q == SH_COMMENT) {
			herd_errprintf(err,
				       "character %zu: {{%.*s}} is in a # "
				       "comment, where the shell would not "
				       "read it as one argument; move it "
				       "out of the comment",
				       at, (int)ph.nlen, ph.name);
			goto fail;
		}
		if (s.escaped || (s.prev == '$' && s.q != SH_SINGLE)) {
			/* \'... or $'... would change the meaning of the
			 * quote herd puts first. */
			herd_errprintf(err,
				       "character %zu: {{%.*s}} follows a "
				       "'%c'; put a blank or quote between "
				       "them",
				       at, (int)ph.nlen, ph.name, s.prev);
			goto fail;
		}
		if (s.unsure) {
			herd_errprintf(err,
				       "character %zu: herd cannot tell how "
				       "the shell quotes {{%.*s}} after %s; "
				       "write it outside quotes, `...`, "
				       "$(...) in quotes and here-documents "
				       "(herd quotes the value itself)",
				       at, (int)ph.nlen, ph.name, s.unsure);
			goto fail;
		}
		if (raw && s.q != SH_PLAIN) {
			herd_errprintf(err,
				       "character %zu: {{%.*s}} is shell words "
				       "(checkpoint.resume_args): write it "
				       "outside quotes",
				       at, (int)ph.nlen, ph.name);
			goto fail;
		}
		if (value ? sh_add_value(&b, &s, value, strlen(value), raw) < 0
			  : sh_add_value(&b, &s, ph.dflt, ph.dlen, 0) < 0)
			goto oom;
		if (raw) {
			/* Words are shell text: the scan follows them (a
			 * '#', a quote or a '\\' in them changes how the
			 * rest of the template reads). */
			sh_scan_text(&s, value, strlen(value));
		} else {
			/* A quoted value ends like a word: "#" after it
			 * starts no comment. */
			s.prev = 'x';
			s.escaped = 0;
		}
	}
	if (!balanced && *tmpl && tmpl[strlen(tmpl) - 1] == '\\' &&
	    (s.unsure || s.escaped)) {
		/* A '\\' at the end of the input is unspecified by POSIX;
		 * bash keeps it or drops it depending on the value before
		 * it (one with a newline loses it).  (Where the scan is
		 * unsure, it may be such a '\\' too.) */
		herd_errprintf(err, "the text ends with a '\\', which escapes "
				    "nothing; remove it");
		goto fail;
	}
	if (balanced && (s.q != SH_PLAIN || s.escaped)) {
		/* The text is pasted into launch.command: it must leave
		 * the shell where it found it. */
		herd_errprintf(err, "the text ends %s",
			       s.q == SH_SINGLE	  ? "inside single quotes"
			       : s.q == SH_DOUBLE ? "inside double quotes"
			       : s.q == SH_COMMENT
				   ? "in a # comment, which would hide the "
				     "rest of launch.command"
				   : "with a '\\', which would escape what "
				     "follows it in launch.command");
		goto fail;
	}
	return b.s;
oom:
	herd_errprintf(err, "rendered text exceeds %u bytes", RENDER_MAX);
fail:
	free(b.s);
	return NULL;
}

char *render_shell(const char *tmpl, const struct render_var *vars,
		   size_t n_vars, const char *words, struct herd_err *err)
{
	return shell_render(tmpl, vars, n_vars, words, 0, err);
}

int render_shell_check(const char *tmpl, const struct render_var *vars,
		       size_t n_vars, const char *words, int balanced,
		       struct herd_err *err)
{
	char *out = shell_render(tmpl, vars, n_vars, words, balanced, err);

	free(out);
	return out ? 0 : -1;
}
