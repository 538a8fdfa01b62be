/* jobreg.h — the user's jobs known on this machine: one file
 * per job in a registry directory of the user's own, and the directory of
 * the jobs' control sockets.
 *
 *   $XDG_STATE_HOME/herd/jobs/ID.json    (default ~/.local/state/herd/jobs)
 *   $XDG_RUNTIME_DIR/herd/ID.sock        (else /tmp/herd-EUID/ID.sock,
 *                                         else /tmp/herd-EUID.RANDOM/ID.sock:
 *                                         jobreg_sock_new())
 *
 * The job id is the run id of lib/run/logtree.c (20261201-053100.123-4f2a);
 * the job's run directory is log.dir/ID.  An entry is written once, when
 * `herd run` has made its run directory, and never deleted by herd run.
 *
 * Both directories are herd's: made 0700 when missing and checked every
 * time they are used: a directory (not a symlink), owned by the user herd
 * runs as, writable by nobody else (the socket directory: no group or
 * other bits at all).  A wrong one is refused with one line that names it
 * and what to do: nobody else can plant or replace an entry or a socket.
 * Every file is written atomically (a new 0600 file under a name of its
 * own, O_EXCL|O_NOFOLLOW, then renamed into place), and read only when it
 * is a regular file of the user's.
 */
#ifndef HERD_JOBREG_H
#define HERD_JOBREG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "herd/err.h"

/* An entry file is a few hundred bytes; a path is at most PATH_MAX. */
#define JOBREG_ENTRY_MAX (64u << 10)

/* Every string is malloc'd and owned by the entry (jobreg_entry_clear());
 * name, host, job_file, cwd, sock, remote_herd, machine may be NULL. */
struct jobreg_entry {
	char *id, *name, *run_dir, *host, *job_file, *cwd, *sock, *remote_herd;
	/* The machine the controller runs on (gethostname()): a home shared
	 * by several login nodes holds one registry, and a pid means
	 * something on its own machine only.  NULL: not known. */
	char *machine;
	/* The Slurm job the run was part of (SLURM_JOB_ID when herd run
	 * started, digits only); NULL: none. */
	char *slurm_job;
	long pid;	    /* the controller's pid (on host), 0: unknown */
	int64_t started_ms; /* Unix ms */
	bool detached;
};

/* The registry directory (see above) into buf.  create: make what is
 * missing (0700).  Returns 0, or -1 with err (errno ENOENT when it does
 * not exist and create is false). */
int jobreg_dir(char *buf, size_t size, bool create, struct herd_err *err);

/* Writes DIR/ID.json for e atomically (0600), making the directory when
 * missing; an entry with the same id is replaced.  e->id and e->run_dir
 * must be set; an id must be a plain file name (no '/', no leading '.').
 * Returns 0 or -1 with err. */
int jobreg_write(const struct jobreg_entry *e, struct herd_err *err);

/* Every readable entry, newest first (started_ms, then id).  Files that
 * are not entries (not *.json, not a regular file of the user's, not a
 * JSON object with id and run_dir) are skipped.  No registry yet: 0
 * entries.  *out is malloc'd (jobreg_entries_free()); returns 0 or -1
 * with err. */
int jobreg_list(struct jobreg_entry **out, size_t *n, struct herd_err *err);

void jobreg_entries_free(struct jobreg_entry *v, size_t n);

/* Removes the registry entry of job id (DIR/ID.json), nothing else: the
 * run directory stays.  The registry is checked as every use checks it,
 * and the entry must be a regular file of the user's (a symlink or
 * another's file is left alone and named in err); the caller decides
 * that the job has ended.  Returns 0, or -1 with err (errno ENOENT when
 * there is no such entry). */
int jobreg_forget(const char *id, struct herd_err *err);

/* Frees the strings of e and zeroes it; NULL is fine. */
void jobreg_entry_clear(struct jobreg_entry *e);

/* JOB -> entry: a path (contains '/' or names an existing directory) = a
 * run dir (its registry entry when there is one, else an entry made up
 * from the directory and its run.json: pid 0, host NULL); else an exact
 * id; else a name (the newest entry with that name).  out is filled
 * (jobreg_entry_clear()).  Returns 0, or -1 with err "no job JOB here
 * (herd list shows yours)" or why the registry could not be read. */
int jobreg_find(const char *job, struct jobreg_entry *out,
		struct herd_err *err);

/* The control socket directory: $XDG_RUNTIME_DIR/herd when
 * XDG_RUNTIME_DIR is set to an absolute directory owned by the user with
 * mode 0700, else /tmp/herd-EUID.  create: make it (0700) when missing.
 * Checked as above; refused in one line otherwise.  The socket of job ID
 * is DIR/ID.sock (jobreg_sock_path()).  Returns 0 or -1 with err. */
int jobreg_sock_dir(char *buf, size_t size, bool create, struct herd_err *err);

/* The control socket of a new run of job id (ctl/sock.c listens there,
 * the registry entry records it: clients go by the entry, never by
 * recomputing it): DIR/ID.sock in the socket directory above; when that
 * directory is refused (/tmp/herd-EUID made first by another user, a
 * symlink, open to others) or the path would not fit in sockaddr_un's
 * 108 bytes, in a directory of this run's own, /tmp/herd-EUID.RANDOM (mkdtemp)
 * (mkdtemp(3), 0700, checked as above).  *priv: the latter (the caller
 * removes it after the socket); note then says why (for a warning), else
 * it is empty.  Returns 0 or -1 with err. */
int jobreg_sock_new(const char *id, char *buf, size_t size, bool *priv,
		    struct herd_err *note, struct herd_err *err);

/* DIR/ID.sock into buf (sockaddr_un holds 108 bytes: a longer path is an
 * error): where a run of job id would listen in the shared directory, for
 * an entry that does not record its socket.  Returns 0 or -1 with err. */
int jobreg_sock_path(const char *id, char *buf, size_t size, bool create,
		     struct herd_err *err);

/* An entry as a JSON object text (the file's contents), malloc'd; NULL
 * on out of memory. */
char *jobreg_entry_json(const struct jobreg_entry *e);

/* Parses an entry's JSON text into out.  Returns 0, or -1 with err when
 * it is not an object with string id and run_dir. */
int jobreg_entry_parse(const char *text, size_t len, struct jobreg_entry *out,
		       struct herd_err *err);

/* What other state of herd's own (the node records of noderec.h) shares
 * with the registry: */
/* Opens $XDG_STATE_HOME/herd/SUB (default ~/.local/state/herd/SUB; sub a
 * plain name) and checks every directory on the way as above; its path
 * into path.  create: make what is missing (0700).  Returns an O_PATH
 * directory fd, or -1 with err (errno ENOENT when it does not exist and
 * create is false). */
int jobreg_state_open(const char *sub, char *path, size_t size, bool create,
		      struct herd_err *err);

/* Writes len bytes of buf under name in the directory dfd (shown: its
 * path, for messages) atomically: a new 0600 file under a temporary name
 * of its own (O_EXCL|O_NOFOLLOW), fsync'd, then renamed over name.
 * Returns 0 or -1 with err. */
int jobreg_write_at(int dfd, const char *shown, const char *name,
		    const char *buf, size_t len, struct herd_err *err);

#endif
