/* checkpoint.h — finding the newest complete checkpoint to resume from
 * (the keys checkpoint.latest_file, checkpoint.pattern and
 * checkpoint.complete_marker).
 *
 * Order of search:
 *   1. latest_file (DeepSpeed's "latest"): a file in dir naming the newest
 *      tag; dir/TAG counts when it is complete;
 *   2. pattern: every match of dir/PATTERN, newest first.  "Newest" is
 *      natural order of the names (step_9 < step_10 < global_step100),
 *      then modification time — names are what training scripts control,
 *      mtimes change when a directory is copied.
 * A candidate is complete when complete_marker (a file name) exists inside
 * it; with no marker configured every readable candidate is complete.
 * Every newer candidate passed over is reported with its reason, for the
 * checkpoint_skipped event.
 */
#ifndef HERD_CHECKPOINT_H
#define HERD_CHECKPOINT_H

#include <stddef.h>

#include "herd/err.h"

/* At most this many candidates are considered (newest first); a
 * directory with more matches than this is a misconfigured pattern. */
#define CHECKPOINT_CANDIDATES_MAX 100000
/* The latest_file's content (a tag) is at most this long. */
#define CHECKPOINT_TAG_MAX 4096

struct checkpoint_skip {
	char *path;
	char *reason;		/* "no COMPLETE marker", "unreadable: ..." */
};

struct checkpoint_result {
	char *path;		/* newest complete checkpoint; NULL: none */
	char *source;		/* "latest_file" or "pattern"; NULL: none */
	struct checkpoint_skip *skipped;
	size_t n_skipped;
};

/* Searches dir as described above.  latest_file, pattern and marker may be
 * NULL.  Returns 0 with res filled (res->path NULL when nothing
 * qualifies, including a missing dir), or -1 with err on a malformed
 * pattern or out of memory.  Free res with checkpoint_result_free(). */
int checkpoint_find(const char *dir, const char *latest_file,
		    const char *pattern, const char *marker,
		    struct checkpoint_result *res, struct herd_err *err);

void checkpoint_result_free(struct checkpoint_result *res);

/* Natural-order comparison of names ("step_9" < "step_10"); for tests. */
int checkpoint_name_cmp(const char *a, const char *b);

#endif
