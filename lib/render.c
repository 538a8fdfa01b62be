/* render.c — {{placeholder}} substitution; see render.h. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "herd/render.h"

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

static int is_name_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '.';
}

char *render_text(const char *tmpl, const struct render_var *vars,
		  size_t n_vars, int strict, struct herd_err *err)
{
	struct strbuf b = {0};
	const char *p = tmpl;

	if (sb_add(&b, "", 0) < 0)
		goto oom;
	while (*p) {
		const char *open = strstr(p, "{{"), *q, *name, *end, *dflt;
		const char *value = NULL;
		size_t nlen;

		if (!open) {
			if (sb_add(&b, p, strlen(p)) < 0)
				goto oom;
			break;
		}
		if (sb_add(&b, p, (size_t)(open - p)) < 0)
			goto oom;
		q = open + 2;
		while (*q == ' ')
			q++;
		name = q;
		while (is_name_char(*q))
			q++;
		nlen = (size_t)(q - name);
		while (*q == ' ')
			q++;
		dflt = NULL;
		if (nlen && *q == '|') {
			/* {{name|default}}: the default runs to the "}}" on the
			 * same line. */
			dflt = q + 1;
			q = strstr(dflt, "}}");
			if (!q || memchr(dflt, '\n', (size_t)(q - dflt))) {
				if (sb_add(&b, "{{", 2) < 0)
					goto oom;
				p = open + 2;
				continue;
			}
		}
		if (nlen == 0 || q[0] != '}' || q[1] != '}') {
			if (sb_add(&b, "{{", 2) < 0)	/* not a placeholder */
				goto oom;
			p = open + 2;
			continue;
		}
		end = q + 2;
		for (size_t i = 0; i < n_vars; i++) {
			if (strlen(vars[i].name) == nlen &&
			    !strncmp(vars[i].name, name, nlen)) {
				value = vars[i].value ? vars[i].value : "";
				break;
			}
		}
		if (!value && dflt) {
			const char *dend = q;

			/* Blanks around the default are layout, not value. */
			while (*dflt == ' ')
				dflt++;
			while (dend > dflt && dend[-1] == ' ')
				dend--;
			if (sb_add(&b, dflt, (size_t)(dend - dflt)) < 0)
				goto oom;
			p = end;
			continue;
		}
		if (!value && strict) {
			herd_errprintf(err, "unknown placeholder {{%.*s}}",
				       (int)nlen, name);
			free(b.s);
			return NULL;
		}
		if (value ? sb_add(&b, value, strlen(value)) < 0
			  : sb_add(&b, open, (size_t)(end - open)) < 0)
			goto oom;
		p = end;
	}
	return b.s;
oom:
	free(b.s);
	herd_errprintf(err, "rendered text exceeds %u bytes", RENDER_MAX);
	return NULL;
}
