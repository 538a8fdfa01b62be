/* ratelog.h — at most one log line per interval for a message that
 * strangers can trigger at will (the slurm listener's "refused a
 * connection"): the first one is logged at once, the rest of the
 * interval only counted, and the next line logged says how many were
 * left out.  3,000 refused connections give a handful of lines, not
 * 3,000.
 *
 * Pure: the caller passes the time and prints; nothing here prints.
 */
#ifndef HERD_RATELOG_H
#define HERD_RATELOG_H

#include <stdbool.h>
#include <stdint.h>

struct ratelog {
	int64_t interval_ms;
	int64_t next_ms;	  /* no line before this time */
	unsigned long suppressed; /* counted, not logged, since the last line */
	bool started;
};

/* Sets interval_ms and clears the counts. */
void ratelog_init(struct ratelog *r, int64_t interval_ms);

/* One occurrence at now_ms: true when a line should be logged now (and
 * *suppressed tells how many occurrences were left out before it, which
 * are then cleared); false when it only counts. */
bool ratelog_hit(struct ratelog *r, int64_t now_ms, unsigned long *suppressed);

/* For a summary after the interval (a timer, or at the end): how many
 * were left out since the last line, cleared; 0 when none.  Also opens
 * the next interval at now_ms when it returns non-zero. */
unsigned long ratelog_flush(struct ratelog *r, int64_t now_ms);

/* When a summary line for the suppressed ones is due (the end of the
 * current interval); meaningful only while r->suppressed > 0. */
int64_t ratelog_due(const struct ratelog *r);

#endif
