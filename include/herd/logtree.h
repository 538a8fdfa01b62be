/* logtree.h — the job's log tree, made so that no other user can steer a
 * write of herd's (README "Security model"):
 *
 *   log.dir/                  the user's own, writable by nobody else
 *     latest -> RUN-ID        a symlink, replaced atomically at each run
 *     RUN-ID/                 new for every run: mkdir, never reused
 *       events.jsonl
 *       attempt-N/rank-R.log
 *
 * RUN-ID is the UTC start time to the millisecond and a random suffix,
 * 20261130-173500.123-4f2a: names sort by start time, and a run that
 * starts in the same millisecond as another (on another host sharing
 * log.dir) gets its own directory all the same (EEXIST: another suffix).
 *
 * The path to log.dir is walked from / one component at a time, with
 * O_NOFOLLOW, never by name twice (the rule of OpenSSH's safe_path(),
 * plus systemd's: a symlink is followed only when its owner is trusted):
 *   - every directory on the way is owned by root or by the user herd runs
 *     as, and is not writable by group or others unless it has the sticky
 *     bit (like /tmp: nobody else can rename or replace what we made in
 *     it);
 *   - a symlink on the way is followed only when owned by root or by the
 *     user (one planted in /tmp by somebody else is refused);
 *   - log.dir itself is owned by the user and writable by nobody else;
 *   - missing directories are made with the directory mode.
 * Inside the new RUN-ID every directory is made with mkdirat() and every
 * file with O_CREAT|O_EXCL|O_NOFOLLOW, relative to directory fds: nothing
 * already there is ever opened for writing.
 */
#ifndef HERD_LOGTREE_H
#define HERD_LOGTREE_H

#include <stddef.h>
#include <stdint.h>

#include "herd/err.h"

struct logtree;

/* The directory mode that goes with file_mode: the file's bits plus x
 * wherever r is set (0600 -> 0700, 0640 -> 0750, 0644 -> 0755). */
unsigned int logtree_dir_mode(unsigned int file_mode);

/* Makes log_dir (absolute) safely as above if missing, then a new run
 * directory in it, and points log_dir/latest at it.  file_mode is log.mode:
 * the exact mode of every file (the umask does not narrow it).  Returns a
 * tree the caller frees, or NULL with err: one line naming the path and
 * what to do. */
struct logtree *logtree_open(const char *log_dir, unsigned int file_mode,
			     struct herd_err *err);

/* "20261130-173500.123-4f2a"; owned by lt. */
const char *logtree_run_id(const struct logtree *lt);

/* log_dir/RUN-ID; owned by lt. */
const char *logtree_run_dir(const struct logtree *lt);

/* Makes RUN-ID/name, a new directory (EEXIST is an error).  Returns 0 or
 * -1 with err. */
int logtree_mkdir(struct logtree *lt, const char *name, struct herd_err *err);

/* Creates RUN-ID/path, a new file opened for appending: path is "name" or
 * "dir/name" with dir made by logtree_mkdir().  Returns the fd (the
 * caller owns it) or -1 with err. */
int logtree_create(struct logtree *lt, const char *path, struct herd_err *err);

/* As logtree_create() with mode instead of log.mode: for files only the
 * user may read whatever log.mode says (job.yaml may hold secrets). */
int logtree_create_mode(struct logtree *lt, const char *path,
			unsigned int mode, struct herd_err *err);

void logtree_free(struct logtree *lt);

/* The words a refusal of logtree_walk() says: "PREFIX/x is owned by bob
 * (uid 1001), who could HARM; put PLACE on a path owned by root or by
 * you", "... a symlink owned by bob; ...: remove it or REAL". */
struct logtree_words {
	const char *prefix; /* "log.dir: ", or "" */
	const char *harm;   /* "redirect herd's logs" */
	const char *place;  /* "log.dir" */
	const char *real;   /* "set log.dir to the real directory" */
};

/* Walks path (absolute) from / by the rule above for the directories on
 * the way to log.dir, path itself included: each owned by root or the
 * user and writable by nobody else unless sticky, symlinks followed only
 * when root's or the user's.  Makes nothing (a missing directory is an
 * error).  For other writes that must not be steered (herd init's
 * DIR).  Returns an O_PATH fd of path or -1 with err, one line. */
int logtree_walk(const char *path, const struct logtree_words *w,
		 struct herd_err *err);

/* A log file that reports its first failed write, once, and counts what
 * it could not write (a full disk must never pass in silence, nor stop
 * the job). */
struct logfile;

enum logfile_result {
	LOGFILE_OK = 0,	       /* every byte written */
	LOGFILE_FIRST_FAILURE, /* the file's first failed write: report
				* it (logfile_error()) */
	LOGFILE_LOST,	       /* failed again: counted, already reported */
};

/* Takes fd (closed by logfile_free()).  path is for messages.  lines: a
 * write is all or nothing (a short write is cut back with ftruncate()),
 * so the file holds whole lines only.  Returns NULL on out of memory
 * (then fd is closed). */
struct logfile *logfile_new(int fd, const char *path, int lines);

/* Appends len bytes; after a failure later writes are still tried (the
 * disk may have room again), each failed byte counted. */
enum logfile_result logfile_write(struct logfile *lf, const void *buf,
				  size_t len);

/* The errno of the first failed write, or 0. */
int logfile_error(const struct logfile *lf);

/* Bytes that could not be written. */
uint64_t logfile_lost(const struct logfile *lf);

const char *logfile_path(const struct logfile *lf);

/* Closes the file; NULL is fine. */
void logfile_free(struct logfile *lf);

#endif
