/* spec_yaml.c — the libyaml side of the parse: the first pass over the
 * events (no aliases, one document, bounded depth) and libyaml's errors in
 * herd's words, with their positions.
 */
#include <string.h>
#include <yaml.h>

#include "spec_int.h"

/* ---- libyaml errors ---------------------------------------------------- */

int spec_yaml_fail(struct ctx *c, const yaml_parser_t *p, const char *buf,
		   size_t len)
{
	yaml_mark_t m = {0, 0, 0};
	size_t end;

	switch (p->error) {
	case YAML_MEMORY_ERROR:
		return herd_errprintf(c->err, "%s: out of memory", c->path);
	case YAML_READER_ERROR:
		/* Reader errors carry a byte offset, not a mark.  A bad
		 * trailing octet is shown at the start of its sequence,
		 * where the wrong character is. */
		end = p->problem_offset < len ? p->problem_offset : len;
		if (p->problem && strstr(p->problem, "trailing")) {
			while (end > 0 &&
			       ((unsigned char)buf[end - 1] & 0xc0) == 0x80)
				end--;
			if (end > 0 && (unsigned char)buf[end - 1] >= 0xc0)
				end--;
		}
		for (size_t i = 0; i < end; i++) {
			if (buf[i] == '\n') {
				m.line++;
				m.column = 0;
			} else if (((unsigned char)buf[i] & 0xc0) != 0x80) {
				m.column++;
			}
		}
		if (p->problem && strstr(p->problem, "UTF-"))
			return spec_perr(c, m,
					 "not valid UTF-8 text (%s); a job "
					 "file must be UTF-8",
					 p->problem);
		if (p->problem_value >= 0)
			return spec_perr(c, m,
					 "%s (byte 0x%02x); a job file must "
					 "be printable UTF-8 text",
					 p->problem ? p->problem
						    : "bad character",
					 (unsigned)p->problem_value & 0xffu);
		return spec_perr(c, m, "%s",
				 p->problem ? p->problem : "bad text");
	case YAML_SCANNER_ERROR:
	case YAML_PARSER_ERROR:
		/* libyaml names a tab as "character that cannot start any
		 * token": say what it is, since it looks like blanks. */
		if (p->problem_mark.index < len &&
		    buf[p->problem_mark.index] == '\t') {
			size_t i = p->problem_mark.index;

			while (i > 0 &&
			       (buf[i - 1] == ' ' || buf[i - 1] == '\t'))
				i--;
			if (i == 0 || buf[i - 1] == '\n')
				return spec_perr(
				    c, p->problem_mark,
				    "a tab in the indentation: YAML "
				    "indents with spaces only");
			return spec_perr(c, p->problem_mark,
					 "a tab where YAML takes none: write "
					 "spaces");
		}
		if (p->context)
			return spec_perr(c, p->problem_mark,
					 "invalid YAML: %s (%s "
					 "at %zu:%zu)",
					 p->problem, p->context,
					 p->context_mark.line + 1,
					 p->context_mark.column + 1);
		return spec_perr(c, p->problem_mark, "invalid YAML: %s",
				 p->problem ? p->problem : "syntax error");
	default:
		return spec_perr(c, p->problem_mark, "invalid YAML: %s",
				 p->problem ? p->problem : "error");
	}
}

/* The first pass: events only, refusing aliases, a second document and
 * nesting deeper than SPEC_DEPTH_MAX, so that the loader never expands an
 * alias nor spends minutes on "[[[[..." (libyaml's scanner is quadratic
 * in the depth of flow collections: a 1 MiB file of them held herd for
 * tens of minutes).  The depth is checked on each start event, so the
 * parse stops at the first collection too deep. */
int spec_prescan(struct ctx *c, const char *buf, size_t len)
{
	yaml_parser_t p;
	yaml_event_t ev;
	int docs = 0, rc = -1, done = 0, depth = 0;

	if (!yaml_parser_initialize(&p))
		return herd_errprintf(c->err, "%s: out of memory", c->path);
	yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
	/* UTF-16 is refused like any other non-UTF-8 text. */
	yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING);
	while (!done) {
		if (!yaml_parser_parse(&p, &ev)) {
			spec_yaml_fail(c, &p, buf, len);
			goto out;
		}
		if (ev.type == YAML_ALIAS_EVENT) {
			spec_perr(c, ev.start_mark,
				  "aliases are not supported "
				  "(*%.40s): write the value out",
				  ev.data.alias.anchor);
			yaml_event_delete(&ev);
			goto out;
		}
		if (ev.type == YAML_SEQUENCE_START_EVENT ||
		    ev.type == YAML_MAPPING_START_EVENT) {
			if (++depth > SPEC_DEPTH_MAX) {
				spec_perr(c, ev.start_mark,
					  "nested deeper than %d (a job file "
					  "needs a few levels)",
					  SPEC_DEPTH_MAX);
				yaml_event_delete(&ev);
				goto out;
			}
		} else if (ev.type == YAML_SEQUENCE_END_EVENT ||
			   ev.type == YAML_MAPPING_END_EVENT) {
			depth--;
		}
		if (ev.type == YAML_DOCUMENT_START_EVENT && ++docs > 1) {
			spec_perr(c, ev.start_mark,
				  "a second YAML document; a job "
				  "file holds exactly one");
			yaml_event_delete(&ev);
			goto out;
		}
		done = ev.type == YAML_STREAM_END_EVENT;
		yaml_event_delete(&ev);
	}
	if (!docs) {
		yaml_mark_t m = {0, 0, 0};

		spec_perr(c, m,
			  "empty job file: expected a mapping of job keys "
			  "(launch.command at least)");
		goto out;
	}
	rc = 0;
out:
	yaml_parser_delete(&p);
	return rc;
}
