/* auth.h — the per-job secret and the mutual challenge-response that an
 * agent started by the slurm transport runs when it connects back to herd
 * over TCP.
 *
 * herd makes a random secret per job and hands it to the agents only
 * through their environment (HERD_JOB_SECRET, never argv, never logs).
 * Over the fresh connection, before a single frame:
 *
 *   herd  -> agent   CHALLENGE  "HRDc" nonce_c                    36 bytes
 *   agent -> herd    RESPONSE   "HRDa" nonce_a mac_a              68 bytes
 *                    mac_a = HMAC-SHA256(secret, "herd-agent" || nonce_c ||
 * nonce_a) herd  -> agent   CONFIRM    "HRDk" mac_c                      36
 * bytes mac_c = HMAC-SHA256(secret, "herd-ctl" || nonce_a || nonce_c) agent ->
 * herd    NAME       "HRDn" u8 len, len bytes (1..255) the node
 *
 * Nonces are 32 random bytes (getrandom) made fresh by each side, so a
 * recorded exchange cannot be replayed; the two labels differ, so one
 * side's MAC never passes for the other's.  herd checks mac_a before it
 * sends anything that depends on the secret, the agent checks mac_c
 * before it trusts anything: a stray process can neither join a job nor
 * pose as its controller.  MACs are compared in constant time.  Every
 * message has a fixed size or a one-byte length, and the exchanges below
 * are bounded by a deadline.
 *
 * Errors never contain the secret or a MAC.
 */
#ifndef HERD_AUTH_H
#define HERD_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "herd/err.h"

#define AUTH_SECRET_LEN	    32
#define AUTH_SECRET_HEX_LEN (2 * AUTH_SECRET_LEN)
#define AUTH_NONCE_LEN	    32
#define AUTH_MAC_LEN	    32 /* SHA-256 */
#define AUTH_TAG_LEN	    4
#define AUTH_CHALLENGE_LEN  (AUTH_TAG_LEN + AUTH_NONCE_LEN)
#define AUTH_RESPONSE_LEN   (AUTH_TAG_LEN + AUTH_NONCE_LEN + AUTH_MAC_LEN)
#define AUTH_CONFIRM_LEN    (AUTH_TAG_LEN + AUTH_MAC_LEN)
/* A node name fits one length byte; Slurm node names are far shorter. */
#define AUTH_NAME_MAX 255
/* 10 s for a whole exchange: two round trips on a cluster network take
 * milliseconds; a peer that stalls longer is not an agent of ours. */
#define AUTH_TIMEOUT_MS 10000

/* The environment variable that carries the hex secret to the agents. */
#define AUTH_SECRET_ENV "HERD_JOB_SECRET"

struct auth_secret {
	unsigned char key[AUTH_SECRET_LEN];
};

/* Makes a random secret (getrandom) and its hex form (lower case,
 * NUL-terminated) into hex.  Returns 0, or -1 with err. */
int auth_secret_new(struct auth_secret *s, char hex[AUTH_SECRET_HEX_LEN + 1],
		    struct herd_err *err);

/* Parses exactly AUTH_SECRET_HEX_LEN hex digits.  Returns 0, or -1 with
 * err (which never quotes the input). */
int auth_secret_from_hex(struct auth_secret *s, const char *hex,
			 struct herd_err *err);

/* Wipes a secret (or any key material) so it does not linger in memory. */
void auth_wipe(void *p, size_t len);

/* ---- the messages, without I/O (unit-tested one by one) ---------------- */

/* herd: a fresh nonce_c and the CHALLENGE carrying it.  Returns 0 or -1
 * with err (no randomness). */
int auth_challenge_make(unsigned char msg[AUTH_CHALLENGE_LEN],
			unsigned char nonce_c[AUTH_NONCE_LEN],
			struct herd_err *err);

/* agent: checks the CHALLENGE's tag, takes nonce_c from it, makes a fresh
 * nonce_a and the RESPONSE.  Returns 0 or -1 with err. */
int auth_response_make(const struct auth_secret *s,
		       const unsigned char challenge[AUTH_CHALLENGE_LEN],
		       unsigned char msg[AUTH_RESPONSE_LEN],
		       unsigned char nonce_c[AUTH_NONCE_LEN],
		       unsigned char nonce_a[AUTH_NONCE_LEN],
		       struct herd_err *err);

/* herd: checks the RESPONSE against its own nonce_c; on success fills
 * the CONFIRM to send.  Returns 0, or -1 with err ("bad tag", "wrong
 * secret"). */
int auth_response_check(const struct auth_secret *s,
			const unsigned char nonce_c[AUTH_NONCE_LEN],
			const unsigned char msg[AUTH_RESPONSE_LEN],
			unsigned char confirm[AUTH_CONFIRM_LEN],
			struct herd_err *err);

/* agent: checks the CONFIRM.  Returns 0, or -1 with err. */
int auth_confirm_check(const struct auth_secret *s,
		       const unsigned char nonce_c[AUTH_NONCE_LEN],
		       const unsigned char nonce_a[AUTH_NONCE_LEN],
		       const unsigned char msg[AUTH_CONFIRM_LEN],
		       struct herd_err *err);

/* Whether name is a node name we accept: 1..AUTH_NAME_MAX bytes of
 * [A-Za-z0-9._-]. */
int auth_name_ok(const char *name, size_t len);

/* ---- herd's side, driven by an event loop ----------------------------- */

/* One handshake on herd's side: every message has a fixed size (the
 * name a one-byte length first), so the state is one buffer and a step.
 * The caller owns the fd, the deadline and the loop; nothing here
 * blocks.  Wipe with auth_ctl_wipe() (it holds the confirmation). */
enum auth_ctl_step {
	AUTH_CTL_RESPONSE,  /* challenge out, waiting for the response */
	AUTH_CTL_NAME_HEAD, /* proven: confirmation out, "HRDn" + length */
	AUTH_CTL_NAME,	    /* the name's bytes */
	AUTH_CTL_DONE,
};

struct auth_ctl {
	enum auth_ctl_step step;
	unsigned char nonce_c[AUTH_NONCE_LEN];
	/* The message being read: at most a response or a name. */
	unsigned char in[AUTH_RESPONSE_LEN > AUTH_NAME_MAX ? AUTH_RESPONSE_LEN
							   : AUTH_NAME_MAX];
	size_t in_len, want;
	/* The message being sent: a challenge or a confirmation. */
	unsigned char out[AUTH_CHALLENGE_LEN > AUTH_CONFIRM_LEN
			      ? AUTH_CHALLENGE_LEN
			      : AUTH_CONFIRM_LEN];
	size_t out_len, out_off;
	char name[AUTH_NAME_MAX + 1]; /* the agent's node, once DONE */
};

/* Starts a handshake: a fresh challenge is queued to send (send it at
 * once, before anything else).  Returns 0 or -1 with err. */
int auth_ctl_begin(struct auth_ctl *h, struct herd_err *err);

/* Does whatever I/O on fd is possible now without waiting: sends what is
 * queued, reads at most the rest of the message expected (never a byte
 * past the handshake), checks it when complete.  Returns 1 when the
 * handshake is over (h->name is the agent's node), 0 when it waits for
 * the peer (auth_ctl_wants_write() says which way), -1 with err (peer
 * hung up, bad message, wrong secret). */
int auth_ctl_io(struct auth_ctl *h, int fd, const struct auth_secret *s,
		struct herd_err *err);

/* Whether the peer proved the secret (its response checked out). */
bool auth_ctl_proven(const struct auth_ctl *h);
/* Whether output is queued (wait for POLLOUT rather than POLLIN). */
bool auth_ctl_wants_write(const struct auth_ctl *h);
/* What the handshake waits for, for errors: "response", "node name"... */
const char *auth_ctl_waiting_for(const struct auth_ctl *h);
void auth_ctl_wipe(struct auth_ctl *h);

/* ---- whole exchanges over a connected stream socket -------------------- */

/* herd's side on fd, blocking (auth_ctl_io under poll() until timeout_ms
 * from the call have passed; for tests and tools).  On success fills
 * name (the agent's node name, NUL-terminated) and returns 0; else -1
 * with err saying what went wrong (timeout, early end, bad message,
 * wrong secret).  fd stays open and owned by the caller. */
int auth_ctl_handshake(int fd, const struct auth_secret *s, int timeout_ms,
		       char name[AUTH_NAME_MAX + 1], struct herd_err *err);

/* The agent's side: answers the challenge, checks herd's proof, then
 * sends name (auth_name_ok).  Returns 0, or -1 with err. */
int auth_agent_handshake(int fd, const struct auth_secret *s, const char *name,
			 int timeout_ms, struct herd_err *err);

#endif
