/* events.h — the job's event log, log.dir/events.jsonl (DESIGN.md "Event
 * log"): one JSON object a line, "t" in Unix milliseconds, "event" the
 * name (job_start, node_up, attempt_start, rank_start, rank_exit, ...),
 * then the fields a reader needs.  Each line is written with one write()
 * and flushed, so a crash never leaves half a line and `tail -f` works.
 */
#ifndef HERD_EVENTS_H
#define HERD_EVENTS_H

#include <jansson.h>

#include "herd/err.h"

struct events;

/* Opens path for appending (creating its directory).  Returns NULL with
 * err. */
struct events *events_open(const char *path, struct herd_err *err);
void events_close(struct events *ev);

/* Writes {"t":..., "event":name, ...fields}.  Takes ownership of fields
 * (may be NULL).  ev may be NULL (no log): then nothing happens.
 * Returns 0 or -1. */
int events_emit(struct events *ev, const char *name, json_t *fields);

/* mkdir -p with mode for every missing component.  Returns 0 or -1 with
 * errno. */
int events_mkdirs(const char *path, unsigned int mode);

#endif
