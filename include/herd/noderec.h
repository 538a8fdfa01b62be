/* noderec.h — what a job remembers of its nodes between runs:
 * the node record, one file per job next to the job registry (jobreg.h),
 * with the same rules (0700 directories checked for owner and mode, 0600
 * files written atomically, read only when a regular file of the user's):
 *
 *   $XDG_STATE_HOME/herd/nodes/KEY.json   (default ~/.local/state/herd)
 *   $XDG_STATE_HOME/herd/nodes/KEY.lock   (flock: one writer at a time)
 *
 * KEY is the job's identity, noderec_key(): NAME@HASH, the job's name and
 * a hash of its job file's real path, so that two projects whose jobs
 * have the same (default) name keep records of their own; an older
 * record is keyed by NAME alone.
 *
 *   {"version": 1, "quarantine_after": 3, "quarantine_for_ms": 86400000,
 *    "job": "train", "job_file": "/home/u/proj/train.yaml",
 *    "hosts": {"h1n3": {"failures": [
 *        {"t": 1764585600000, "kind": "failed",
 *         "reason": "heartbeats silent for 3.4 s",
 *         "run": "20261201-053100.123-4f2a"}]}}}
 *
 * t is Unix time in ms; kind is "failed" (crash, partition, silence),
 * "unhealthy" (the health gate) or "straggler"; run is the run id
 * (logtree.h) or null.  quarantine_after/for are the job's
 * health.quarantine_after/for when the last failure was written (so that
 * `herd nodes NAME` can tell what is quarantined without the job file).
 *
 * The quarantine rule: a host with at least quarantine_after (> 0)
 * failures newer than now - quarantine_for is quarantined until the
 * oldest of the last quarantine_after of them is quarantine_for old.
 *
 * Bounded: a host keeps its last NODEREC_KEEP failures, a reason at most
 * NODEREC_REASON_MAX bytes, a file at most NODEREC_HOSTS_MAX hosts and
 * NODEREC_FILE_MAX bytes.  Failures older than quarantine_for are dropped
 * whenever the file is written (a host with none left goes).
 *
 * Library code: nothing here prints or exits; errors go to a caller-owned
 * struct herd_err.
 */
#ifndef HERD_NODEREC_H
#define HERD_NODEREC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "herd/err.h"

/* Failures kept per host: more than any sensible quarantine_after (a
 * larger quarantine_after can never be reached; herd says so). */
#define NODEREC_KEEP 32
/* A reason is one line for a terminal; longer ones are cut. */
#define NODEREC_REASON_MAX 240
/* Hosts a record holds: a job's failing nodes, not its whole cluster;
 * past it the host whose last failure is oldest goes. */
#define NODEREC_HOSTS_MAX 4096
/* 4096 hosts x 32 failures x ~350 bytes, rounded up. */
#define NODEREC_FILE_MAX (64u << 20)

struct noderec_failure {
	int64_t t_ms; /* Unix ms */
	char *kind;   /* failed, unhealthy, straggler */
	char *reason;
	char *run; /* or NULL */
};

struct noderec_host {
	char *host;
	struct noderec_failure *f; /* oldest first */
	size_t n;
};

/* A record in memory.  Owned by whoever made it (noderec_free()). */
struct noderec {
	char *job, *job_file;	    /* the job's name and file, or NULL */
	int quarantine_after;	    /* -1: not in the file */
	long quarantine_for_ms;	    /* -1: not in the file */
	struct noderec_host *hosts; /* in file order */
	size_t n;
};

/* An empty record, NULL when out of memory. */
struct noderec *noderec_new(void);
void noderec_free(struct noderec *r);

/* Parses a record's JSON text (strict: the format above, no other
 * members; every limit above).  Returns 0 with *out, or -1 with err
 * naming what is wrong. */
int noderec_parse(const char *text, size_t len, struct noderec **out,
		  struct herd_err *err);

/* The record as JSON text, malloc'd; NULL when out of memory. */
char *noderec_json(const struct noderec *r);

/* host's entry or NULL. */
struct noderec_host *noderec_find(const struct noderec *r, const char *host);

/* Appends a failure to host's list (made when missing), keeping the last
 * NODEREC_KEEP; reason is cut to NODEREC_REASON_MAX bytes (at a UTF-8
 * character's start); run may be NULL.  A new host past
 * NODEREC_HOSTS_MAX pushes out the host whose last failure is oldest.
 * Returns 0, or -1 when out of memory or an argument is empty. */
int noderec_add(struct noderec *r, const char *host, int64_t t_ms,
		const char *kind, const char *reason, const char *run);

/* Removes host's entry.  Returns 0, or -1 when there is none. */
int noderec_remove(struct noderec *r, const char *host);

/* Drops failures at or before now_ms - window_ms, and hosts left with
 * none. */
void noderec_prune(struct noderec *r, int64_t now_ms, long window_ms);

/* Failures of h newer than now_ms - window_ms; *last (may be NULL) gets
 * the newest of them or NULL. */
size_t noderec_recent(const struct noderec_host *h, int64_t now_ms,
		      long window_ms, const struct noderec_failure **last);

/* When h's quarantine ends (Unix ms), by the rule above; 0 when h is not
 * quarantined at now_ms (after <= 0: never). */
int64_t noderec_until(const struct noderec_host *h, int64_t now_ms, int after,
		      long window_ms);

/* Whether name can name a record file: non-empty, no '/', no leading
 * '.', at most 209 bytes (a job name may be longer than a file name). */
bool noderec_name_ok(const char *name);

/* The record key of the job called name whose job file is job_file:
 * "name@HASH" (HASH: 8 hex digits of the file's real path), or name when
 * job_file is NULL or cannot be resolved.  malloc'd, NULL when out of
 * memory. */
char *noderec_key(const char *name, const char *job_file);

/* Whether key is name's: name itself or name@HASH. */
bool noderec_key_is(const char *key, const char *name);

/* The files. */

/* The record directory into buf.  create: make it (0700).  Returns 0, or
 * -1 with err (errno ENOENT when it does not exist and create is false;
 * EPERM when a directory has the wrong owner or mode). */
int noderec_dir(char *buf, size_t size, bool create, struct herd_err *err);

/* Reads job's record.  No file (or no directory): an empty record.
 * Returns 0 with *out, or -1 with err (a corrupt file, a file or
 * directory of the wrong owner or mode). */
int noderec_load(const char *job, struct noderec **out, struct herd_err *err);

/* Adds one failure to job's record under its lock (concurrent runs of
 * the same job lose nothing), dropping what is older than window_ms and
 * setting quarantine_after/window_ms as the record's policy.  A corrupt
 * file is not overwritten (-1 with err).  Returns 0 or -1 with err. */
int noderec_note(const char *job, const char *host, int64_t t_ms,
		 const char *kind, const char *reason, const char *run,
		 int quarantine_after, long window_ms, struct herd_err *err);

/* One failure for noderec_note_all(). */
struct noderec_note {
	const char *host;
	int64_t t_ms;
	const char *kind, *reason, *run; /* run may be NULL */
};

/* noderec_note() for n failures at once: one lock, one read, one write
 * (a partition that fails many nodes costs one file write). */
int noderec_note_all(const char *job, const struct noderec_note *v, size_t n,
		     int quarantine_after, long window_ms,
		     struct herd_err *err);

/* noderec_note_all() that also writes the job's name and job file into
 * the record (either may be NULL: kept as they were). */
int noderec_note_job(const char *job, const char *name, const char *job_file,
		     const struct noderec_note *v, size_t n,
		     int quarantine_after, long window_ms,
		     struct herd_err *err);

/* Removes host's entry from job's record under its lock (host NULL: the
 * whole file).  Returns 0, or -1 with err; errno ENOENT when the job has
 * no record or the host none in it. */
int noderec_clear(const char *job, const char *host, struct herd_err *err);

/* The job names with a record file, sorted.  *names is malloc'd, as is
 * every name (noderec_names_free()).  No directory: 0 names.  Returns 0,
 * or -1 with err. */
int noderec_jobs(char ***names, size_t *n, struct herd_err *err);
void noderec_names_free(char **names, size_t n);

#endif
