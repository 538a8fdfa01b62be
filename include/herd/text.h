/* text.h — text from outside herd (a rank's output, a node's answer, a
 * line of events.jsonl) made fit for herd's own output: one terminal
 * line that no escape sequence can rewrite. */
#ifndef HERD_TEXT_H
#define HERD_TEXT_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

/* Replaces in place, with '?', every byte of s that a terminal could act
 * on: the C0 controls (newline, tab, ESC, BEL, ...), DEL, the C1 controls
 * U+0080..U+009F (CSI, OSC written as UTF-8) and each byte that is not
 * part of valid UTF-8 (a raw 0x9b is CSI to an 8-bit terminal).  Other
 * UTF-8 text is kept.  Returns s; NULL stays NULL. */
char *herd_text_clean(char *s);

/* Writes buf[0..len) to out a line at a time, each line after prefix and
 * cleaned as above (a NUL shows as '?'); text after the last newline is
 * written without one.  For another machine's stderr, read in chunks. */
void herd_text_say_lines(FILE *out, const char *prefix, const char *buf,
			 size_t len);

/* Every string in j (j itself, or in its arrays and objects; keys left
 * alone) cleaned as above, in place (a NUL inside shows as '?'): for what
 * another machine says that herd prints or writes to its events.  A
 * json_string_value() taken from j before is no longer valid. */
void herd_json_clean(json_t *j);

#endif
