/* keys.h — SSH key pairs, authorized_keys and known_hosts for herd, with
 * libssh only (no ssh or ssh-keygen children).
 *
 * Local files are written atomically: a temporary file in the same
 * directory with its final mode, then rename().  Files on a node are
 * written the same way by a remote /bin/sh command that reads the new
 * content from its stdin, so every existing line survives and a reader
 * never sees half a file.
 *
 * Paths starting with "~/" are expanded by sshsess_expand_home(), the
 * same for every file herd touches, so tests can point HOME elsewhere.
 */
#ifndef HERD_LAUNCHER_KEYS_H
#define HERD_LAUNCHER_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <libssh/libssh.h>

#include "herd/err.h"

/* The identity `herd keys` makes when ssh.identity is not set. */
#define KEYS_DEFAULT_IDENTITY "~/.ssh/herd_ed25519"
/* Name of the key pair --mesh copies into every node's ~/.ssh. */
#define KEYS_MESH_NAME "id_herd_ed25519"

/* A file herd reads or writes here or on a node (authorized_keys,
 * known_hosts, a private key) larger than this is refused: real ones
 * are a few KiB, and each is held whole in memory. */
#define KEYS_FILE_MAX (1024 * 1024)

/* A line of stderr from a remote command quoted in an error. */
#define KEYS_STDERR_MAX 512

/* A key pair on this machine.  Every string is owned here and freed by
 * keys_pair_free(). */
struct keys_pair {
	char *private_path; /* ~ expanded */
	char *public_path;  /* private_path + ".pub" */
	char *type;	    /* "ssh-ed25519" */
	char *base64;	    /* the public key blob */
	char *private_text; /* the private key file as read */
	size_t private_len;
	bool created; /* keys_pair_load() made the pair */
};

/* Loads the key pair at private_path ("~/" allowed), making an ed25519
 * pair first when the private key does not exist (the directory is
 * created 0700 when missing; private 0600, public 0644), and writing the
 * public file again when only it is missing.  comment ends the public
 * line.  Returns 0 with kp filled (kp->created says whether it was
 * made), or -1 with err naming the file. */
int keys_pair_load(const char *private_path, const char *comment,
		   struct keys_pair *kp, struct herd_err *err);

/* Frees kp's strings (scrubbing the private text) and clears it. */
void keys_pair_free(struct keys_pair *kp);

/* Writes len bytes to path atomically (temporary file in the same
 * directory, fsync, rename) with the given mode.  Returns 0, or -1 with
 * err naming path. */
int keys_write_atomic(const char *path, const void *buf, size_t len,
		      mode_t mode, struct herd_err *err);

/* Whether text (len bytes, authorized_keys or known_hosts format) holds
 * a line with the key "type base64": the two words next to each other
 * anywhere in the line, so options and host patterns before them and
 * comments after them do not matter.  Returns 1 or 0. */
int keys_text_has_key(const char *text, size_t len, const char *type,
		      const char *base64);

/* Looks in known_hosts text (len bytes) for the lines that name host
 * (plain names only).  Returns 1 when one of them pins exactly the key
 * "type base64", 0 when none names host, or -LINE (1-based) of the
 * first line naming host with another key. */
int keys_known_hosts_match(const char *text, size_t len, const char *host,
			   const char *type, const char *base64);

/* Runs cmd on the node through an exec channel of an authenticated
 * session, feeding in (inlen bytes, may be NULL) to its stdin and then
 * EOF.  When out is not NULL, stdout is returned in *out (NUL-terminated,
 * caller frees) with its length in *outlen; more than KEYS_FILE_MAX bytes
 * is an error.  The last of stderr lands in errbuf (errlen bytes, may be
 * 0).  Returns the command's exit status (>= 0), or -1 with err filled
 * when the channel failed. */
int keys_remote_run(ssh_session s, const char *cmd, const void *in,
		    size_t inlen, char **out, size_t *outlen, char *errbuf,
		    size_t errlen, struct herd_err *err);

/* Reads ~/.ssh/NAME on the node into *out (caller frees; an empty string
 * when the file does not exist).  Returns 0, or -1 with err. */
int keys_remote_read(ssh_session s, const char *name, char **out,
		     size_t *outlen, struct herd_err *err);

/* Replaces ~/.ssh/NAME on the node with len bytes of buf, atomically:
 * ~/.ssh is made 0700 when missing, the bytes go to
 * NAME.herd-tmp.RANDOM with the given mode, which is then renamed over
 * NAME.  name must be a plain file name (letters, digits, '.', '_',
 * '-').  Returns 0, or -1 with err. */
int keys_remote_write(ssh_session s, const char *name, const void *buf,
		      size_t len, mode_t mode, struct herd_err *err);

/* Reads a password from the terminal (/dev/tty) with echo off, after
 * writing prompt there.  Returns a string the caller scrubs and frees,
 * or NULL when there is no terminal or reading failed. */
char *keys_read_password(const char *prompt);

#endif
