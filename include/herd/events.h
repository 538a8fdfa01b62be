/* events.h — the job's event log, log.dir/RUN-ID/events.jsonl: one JSON
 * object a line, "t" in Unix milliseconds, "event"
 * the name (job_start, node_up, attempt_start, rank_start, rank_exit, ...),
 * then the fields a reader needs.  Each line is written with one write()
 * and flushed, so a crash never leaves half a line and `tail -f` works; a
 * short write (full disk) is cut back, so the file holds whole lines only.
 */
#ifndef HERD_EVENTS_H
#define HERD_EVENTS_H

#include <stdint.h>

#include <jansson.h>

#include "herd/err.h"
#include "herd/logtree.h"

struct events;

/* Creates events.jsonl in the run directory of lt (new, log.mode).
 * Returns NULL with err. */
struct events *events_open(struct logtree *lt, struct herd_err *err);
void events_close(struct events *ev);

/* Writes {"t":..., "event":name, ...fields}.  Takes ownership of fields
 * (may be NULL).  ev may be NULL (no log): then nothing happens.
 * Returns 0, or -1 when the line was not written (events_error() says
 * why when the write failed). */
int events_emit(struct events *ev, const char *name, json_t *fields);

/* Called with every event emitted (name, the whole object, its t),
 * before it is written; the object is the emitter's (not to be kept). */
typedef void (*events_tap_fn)(void *arg, const char *name, const json_t *obj,
			      int64_t t);
/* Sets the one tap (NULL: none).  Nothing when ev is NULL. */
void events_set_tap(struct events *ev, events_tap_fn fn, void *arg);

/* The errno of the first failed write of events.jsonl, or 0. */
int events_error(const struct events *ev);

/* Bytes of events that could not be written. */
uint64_t events_lost(const struct events *ev);

/* The file's path, for messages ("" when ev is NULL). */
const char *events_path(const struct events *ev);

#endif
