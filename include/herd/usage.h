/* usage.h — this process's own cost, for the record of a job (job_end in
 * events.jsonl) and for bench/scale: CPU time and peak memory from
 * getrusage(2). */
#ifndef HERD_USAGE_H
#define HERD_USAGE_H

#include <jansson.h>

/* Adds to obj (a JSON object the caller owns):
 *   cpu_ms           user + system CPU of this process so far (RUSAGE_SELF)
 *   children_cpu_ms  the same for the children it has waited for
 *                    (RUSAGE_CHILDREN: local agents, discovery commands,
 *                    srun; remote work is not counted)
 *   peak_rss_kib     this process's peak resident set, KiB (ru_maxrss)
 * Returns 0, or -1 when getrusage or jansson fails (obj may then hold
 * some of the fields). */
int usage_add_json(json_t *obj);

#endif
