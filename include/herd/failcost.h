/* failcost.h — what each failure of a job cost, from its events
 * (events.jsonl) and the job's step in metrics.jsonl: shown by the status
 * line, `herd status` and `herd report`.
 *
 * A failure starts at a node_failed (of an attempt that ran), or at an
 * attempt_end of a rank's failure that no node_failed explained; nodes
 * that fail before the job is running again belong to the same failure.
 * It ends when the job runs again: a rejoin (the survivors kept
 * training) or the next attempt_start (a restart).  Its cost, split:
 *   detect    how long the node was silent before herd called it failed
 *             (node_failed silent_ms; 0 for a rank's failure or an older
 *             herd's events);
 *   recover   rejoin ms, or attempt_start.t minus the failure's t;
 *   restore   the slowest checkpoint_restored ms of its ranks (none
 *             reported: not known);
 *   redone    the job's step just before the failure minus the step
 *             training resumed from (checkpoint_restored step, else the
 *             step_N of the attempt's checkpoint, else 0 for a restart
 *             from scratch).
 * Unknown values are -1.  Bounded: the newest FAILCOST_MAX failures are
 * kept, older ones counted in dropped. */
#ifndef HERD_FAILCOST_H
#define HERD_FAILCOST_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define FAILCOST_MAX 1024

enum failcost_how {
	FAILCOST_OPEN,	  /* the job is not running again yet */
	FAILCOST_RESTART, /* a new attempt */
	FAILCOST_REJOIN,  /* the survivors kept training */
	FAILCOST_ENDED,	  /* the job ended on it (no restart) */
};

struct failcost {
	int64_t t;    /* when the failure was seen */
	int attempt;  /* the attempt it hit */
	char *hosts;  /* the failed nodes, "a,b"; NULL: a rank failed */
	char *reason; /* the first node's or the attempt's, or NULL */
	int64_t detect_ms;
	enum failcost_how how;
	int64_t recover_ms;
	int64_t restore_ms;
	char *restore_tier; /* of the slowest restore, or NULL */
	int64_t step_before;
	int64_t step_restored;
	int64_t steps_redone;
};

struct failcosts {
	struct failcost *v;
	size_t n;
	uint64_t dropped;
};

/* Takes one event (its name, the object, its t); any other event is
 * ignored.  Out of memory loses the event, never the failures. */
void failcost_event(struct failcosts *fc, const char *event, const json_t *o,
		    int64_t t);

/* Fills step_before and steps_redone from the job's step series (t in
 * Unix ms, ascending, n points): the last step seen before each failure.
 * Call again after more metrics arrived. */
void failcost_steps(struct failcosts *fc, const double *t, const double *v,
		    size_t n);

/* "detect 0.1 s, restart 2.3 s, restore 0.4 s (memory), 12 steps redone"
 * for f, into buf (truncated to len).  Returns buf. */
char *failcost_format(const struct failcost *f, char *buf, size_t len);

/* The means over the failures the job recovered from (n of them), each
 * part over the failures that know it; -1 when none does. */
struct failcost_total {
	size_t n;
	int64_t detect_ms, recover_ms, restore_ms, steps_redone;
};
struct failcost_total failcost_total(const struct failcosts *fc);
/* "detect 0.1 s, rejoin or restart 2.3 s, restore 0.4 s, 12 steps
 * redone" for the means.  Returns buf. */
char *failcost_format_total(const struct failcost_total *t, char *buf,
			    size_t len);

/* A JSON array of the failures (fields as in struct failcost, the -1s
 * left out).  NULL when out of memory. */
json_t *failcost_json(const struct failcosts *fc);

void failcost_free(struct failcosts *fc);

#endif
