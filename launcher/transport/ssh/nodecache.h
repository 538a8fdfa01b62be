/* transport/ssh/nodecache.h — herd's own programs in ssh.agent_dir on a node: the
 * herd-agent every job starts there, and bin/herd itself for
 * `herd run --detach --on HOST` and the remote proxy (remote.c).
 *
 * A program is cached under PREFIX-VERSION-HASH (its version and the first
 * 48 bits of its SHA-256), uploaded over an exec channel (no SFTP server
 * needed) and checked on the node, by the shell that runs it, right
 * before every exec: the directory chain must be safe (OpenSSH's
 * safe_path() rule, see transport/ssh/nodecache.c) and the file a 0700 regular file of
 * the user's with this very SHA-256.  Whoever else could write the cache
 * could otherwise make herd run their program as the job user.
 *
 * Every function here blocks (libssh in blocking mode) and may run on any
 * thread; a session is used by one thread at a time.  Reasons go to a
 * caller-owned buffer as one line without the node's name.
 */
#ifndef HERD_LAUNCHER_NODECACHE_H
#define HERD_LAUNCHER_NODECACHE_H

#include <stddef.h>

#include <libssh/libssh.h>

#include "herd/err.h"

/* The start command exits with this when no cached program of this build
 * exists, or one that fails its check in a safe directory (an unusual
 * value, so a failing program is not taken for a missing one). */
#define NODECACHE_MISSING 97
/* The remote scripts exit with this after one line on stderr, tagged
 * NODECACHE_REASON_TAG, saying what is wrong (unsafe cache, full disk). */
#define NODECACHE_REFUSED    98
#define NODECACHE_REASON_TAG "herd-agent-error: "
/* The cache when ssh.agent_dir is not set ("~" is $HOME on the node). */
#define NODECACHE_DEFAULT_DIR "~/.cache/herd"
/* How long to wait for the first bytes of a remote command (the upload's
 * "ready", an agent's HELLO). */
#define NODECACHE_FIRST_BYTES_MS 30000
/* A program over 256 MiB is not one of herd's. */
#define NODECACHE_BIN_MAX (256L * 1024 * 1024)

/* One of herd's programs, as the cache names and checks it. */
struct nodecache_bin {
	const char *path; /* on this machine (borrowed) */
	char name[96];	  /* PREFIX-VERSION-HASH in the cache */
	char sha256[65];  /* of the whole file, hex */
	long size;	  /* bytes, <= NODECACHE_BIN_MAX */
};

/* Reads and hashes the program at path; prefix names it in the cache
 * ("agent", "herd").  Returns 0, or -1 with err naming the file. */
int nodecache_bin_init(struct nodecache_bin *b, const char *path,
		       const char *prefix, struct herd_err *err);

/* The remote command that checks b in dir (ssh.agent_dir as written,
 * "~" allowed) and execs it with args (each one literal argument); with
 * env not NULL ("NAME=VALUE") that is exported to it first.  Without args
 * it only checks: exit 0 when b is there and passes.  Exit
 * NODECACHE_MISSING or NODECACHE_REFUSED otherwise (before any exec).
 * Returns a malloc'd string, or NULL when out of memory. */
char *nodecache_start_command(const char *dir, const struct nodecache_bin *b,
			      const char *env, const char *const *args,
			      size_t n_args);

/* Uploads b into dir over an exec channel of the logged-in session s.
 * Returns 0, or -1 with the reason in why (one line). */
int nodecache_upload(ssh_session s, const char *dir,
		     const struct nodecache_bin *b, char *why, size_t whylen);

/* Makes sure dir on s holds b, checked: one remote command when it does,
 * an upload and a second check when it does not.  Returns 0, or -1 with
 * the reason in why. */
int nodecache_ensure(ssh_session s, const char *dir,
		     const struct nodecache_bin *b, char *why, size_t whylen);

/* After a remote command ended: the line its script tagged with
 * NODECACHE_REASON_TAG, else the last non-empty line of its stderr, into
 * out (control characters shown as '?'); "" when it printed nothing. */
void nodecache_reason(ssh_channel ch, char *out, size_t outlen);

#endif
