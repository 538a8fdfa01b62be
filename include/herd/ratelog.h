/* ratelog.h — a few log lines, then at most one per interval, for a
 * message that strangers can trigger at will (the slurm listener's
 * "rejected a connection"): the first `burst` occurrences are logged as
 * they come (they usually differ and tell the story), then one token
 * comes back per interval; what arrives without a token is only
 * counted, and the next line logged says how many were left out.
 * 3,000 refused connections give a handful of lines, not 3,000.
 *
 * Pure: the caller passes the time and prints; nothing here prints.
 */
#ifndef HERD_RATELOG_H
#define HERD_RATELOG_H

#include <stdint.h>

struct ratelog {
	int64_t interval_ms;
	unsigned burst, tokens;	  /* lines that may be logged now */
	int64_t refill_ms;	  /* the next token comes one interval later */
	unsigned long suppressed; /* counted, not logged, since the last line */
};

/* burst >= 1 lines at once, then one per interval_ms. */
void ratelog_init(struct ratelog *r, unsigned burst, int64_t interval_ms);

/* One occurrence at now_ms: non-zero when a line should be logged now
 * (and *suppressed tells how many occurrences were left out before it,
 * which are then cleared); 0 when it is only counted. */
int ratelog_hit(struct ratelog *r, int64_t now_ms, unsigned long *suppressed);

/* A summary line (from a timer at ratelog_due(), or at the end): how
 * many were left out since the last line, cleared, and the line takes a
 * token when one is there; 0 when none was left out. */
unsigned long ratelog_flush(struct ratelog *r, int64_t now_ms);

/* When the next token comes back: the time for a summary of the
 * suppressed ones (meaningful while r->suppressed > 0). */
int64_t ratelog_due(const struct ratelog *r);

#endif
