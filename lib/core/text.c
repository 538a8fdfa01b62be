/* text.c — see text.h. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "herd/text.h"

/* The length of the valid UTF-8 sequence at p, 0 when there is none
 * (overlong forms, surrogates and values above U+10FFFF included). */
static size_t utf8_len(const unsigned char *p)
{
	unsigned cp;
	size_t n;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, cp = p[0] & 0x1fu;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, cp = p[0] & 0x0fu;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, cp = p[0] & 0x07u;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3fu);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

char *herd_text_clean(char *s)
{
	unsigned char *p = (unsigned char *)s;

	while (p && *p) {
		size_t n = utf8_len(p);

		if (n == 0 || *p < 0x20 || *p == 0x7f ||
		    (n == 2 && p[0] == 0xc2 && p[1] < 0xa0)) {
			/* '?' for the byte, or for each byte of a C1 control.
			 */
			*p++ = '?';
			if (n == 2)
				*p++ = '?';
			continue;
		}
		p += n;
	}
	return s;
}

void herd_text_say_lines(FILE *out, const char *prefix, const char *buf,
			 size_t len)
{
	char *line = malloc(len + 1);
	size_t start = 0;

	if (!line)
		return;
	for (size_t i = 0; i <= len; i++) {
		size_t n = i - start;

		if (i < len && buf[i] != '\n')
			continue;
		if (n > 0 || i < len) {
			for (size_t k = 0; k < n; k++)
				line[k] = buf[start + k] ? buf[start + k] : '?';
			line[n] = '\0';
			fprintf(out, "%s%s%s", prefix, herd_text_clean(line),
				i < len ? "\n" : "");
		}
		start = i + 1;
	}
	free(line);
}

void herd_json_clean(json_t *j)
{
	const char *key;
	json_t *v;
	size_t i;

	if (json_is_string(j)) {
		const char *in = json_string_value(j);
		size_t len = json_string_length(j);
		char *s = malloc(len + 1);

		if (!s)
			return;
		/* A NUL inside the string is a control too. */
		for (i = 0; i < len; i++)
			s[i] = in[i] ? in[i] : '?';
		s[len] = '\0';
		json_string_setn(j, herd_text_clean(s), len);
		free(s);
	} else if (json_is_object(j)) {
		json_object_foreach(j, key, v)
		{
			herd_json_clean(v);
		}
	} else if (json_is_array(j)) {
		json_array_foreach(j, i, v)
		{
			herd_json_clean(v);
		}
	}
}
