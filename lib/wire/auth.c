/* auth.c — the per-job secret and the challenge-response of auth.h.
 *
 * HMAC-SHA256 and the constant-time compare come from OpenSSL's libcrypto,
 * loaded with dlopen() at the first handshake: herd-agent needs it only
 * under the slurm transport, and loading it at every agent start cost the
 * node more CPU than the rest of the start (bench/README.md); randomness
 * from getrandom().  Reads and writes share one
 * deadline per exchange and use MSG_NOSIGNAL, so a vanished peer is an error,
 * not a SIGPIPE.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include "herd/auth.h"

static const unsigned char tag_challenge[AUTH_TAG_LEN] = {'H', 'R', 'D', 'c'};
static const unsigned char tag_response[AUTH_TAG_LEN] = {'H', 'R', 'D', 'a'};
static const unsigned char tag_confirm[AUTH_TAG_LEN] = {'H', 'R', 'D', 'k'};
static const unsigned char tag_name[AUTH_TAG_LEN] = {'H', 'R', 'D', 'n'};

static const char label_agent[] = "herd-agent";
static const char label_ctl[] = "herd-ctl";

void auth_wipe(void *p, size_t len)
{
	if (p)
		explicit_bzero(p, len);
}

/* libcrypto's HMAC(), EVP_sha256() and CRYPTO_memcmp(), loaded once. */
struct crypto_fns {
	unsigned char *(*hmac)(const void *md, const void *key, int key_len,
			       const unsigned char *d, size_t n,
			       unsigned char *out, unsigned int *out_len);
	const void *(*sha256)(void);
	int (*memcmp)(const void *a, const void *b, size_t len);
};

static const struct crypto_fns *crypto(struct herd_err *err)
{
	static struct crypto_fns fns;
	static bool loaded;
	void *h;

	if (loaded)
		return &fns;
	h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		herd_errprintf(err, "cannot load libcrypto.so.3 (%s); install "
				    "OpenSSL 3 (Debian: libssl3)",
			       dlerror());
		return NULL;
	}
	*(void **)&fns.hmac = dlsym(h, "HMAC");
	*(void **)&fns.sha256 = dlsym(h, "EVP_sha256");
	*(void **)&fns.memcmp = dlsym(h, "CRYPTO_memcmp");
	if (!fns.hmac || !fns.sha256 || !fns.memcmp) {
		herd_errprintf(err, "libcrypto.so.3 lacks HMAC, EVP_sha256 or "
				    "CRYPTO_memcmp");
		return NULL;
	}
	loaded = true;
	return &fns;
}

/* 0 when a and b are equal, in a time that does not depend on where they
 * differ; the MACs were made through crypto(), so it is loaded. */
static int mac_differ(const void *a, const void *b, size_t len)
{
	const struct crypto_fns *c = crypto(NULL);

	return c ? c->memcmp(a, b, len) != 0 : 1;
}

static int random_bytes(unsigned char *buf, size_t len, struct herd_err *err)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = getrandom(buf + off, len - off, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return herd_errprintf(err, "getrandom: %s",
					      n < 0 ? strerror(errno)
						    : "no bytes");
		off += (size_t)n;
	}
	return 0;
}

int auth_secret_new(struct auth_secret *s, char hex[AUTH_SECRET_HEX_LEN + 1],
		    struct herd_err *err)
{
	static const char digits[] = "0123456789abcdef";

	if (random_bytes(s->key, sizeof(s->key), err) < 0)
		return -1;
	for (size_t i = 0; i < AUTH_SECRET_LEN; i++) {
		hex[2 * i] = digits[s->key[i] >> 4];
		hex[2 * i + 1] = digits[s->key[i] & 15];
	}
	hex[AUTH_SECRET_HEX_LEN] = '\0';
	return 0;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int auth_secret_from_hex(struct auth_secret *s, const char *hex,
			 struct herd_err *err)
{
	size_t len = hex ? strnlen(hex, AUTH_SECRET_HEX_LEN + 1) : 0;

	if (len != AUTH_SECRET_HEX_LEN)
		return herd_errprintf(err,
				      "the job secret must be %d hex digits",
				      AUTH_SECRET_HEX_LEN);
	for (size_t i = 0; i < AUTH_SECRET_LEN; i++) {
		int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			auth_wipe(s->key, sizeof(s->key));
			return herd_errprintf(err, "the job secret must be "
						   "hex digits only");
		}
		s->key[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

/* HMAC-SHA256(secret, label || a || b) into mac. */
static int mac_of(const struct auth_secret *s, const char *label,
		  const unsigned char *a, const unsigned char *b,
		  unsigned char mac[AUTH_MAC_LEN], struct herd_err *err)
{
	/* The longest label plus two nonces. */
	unsigned char data[sizeof(label_agent) + 2 * AUTH_NONCE_LEN];
	size_t llen = strlen(label), off = 0;
	const struct crypto_fns *c = crypto(err);
	unsigned int len = 0;

	memcpy(data, label, llen);
	off += llen;
	memcpy(data + off, a, AUTH_NONCE_LEN);
	off += AUTH_NONCE_LEN;
	memcpy(data + off, b, AUTH_NONCE_LEN);
	off += AUTH_NONCE_LEN;
	if (!c || !c->hmac(c->sha256(), s->key, (int)sizeof(s->key), data, off,
			   mac, &len) ||
	    len != AUTH_MAC_LEN) {
		if (c)
			herd_errprintf(err, "HMAC-SHA256 failed");
		return -1;
	}
	return 0;
}

int auth_challenge_make(unsigned char msg[AUTH_CHALLENGE_LEN],
			unsigned char nonce_c[AUTH_NONCE_LEN],
			struct herd_err *err)
{
	if (random_bytes(nonce_c, AUTH_NONCE_LEN, err) < 0)
		return -1;
	memcpy(msg, tag_challenge, AUTH_TAG_LEN);
	memcpy(msg + AUTH_TAG_LEN, nonce_c, AUTH_NONCE_LEN);
	return 0;
}

int auth_response_make(const struct auth_secret *s,
		       const unsigned char challenge[AUTH_CHALLENGE_LEN],
		       unsigned char msg[AUTH_RESPONSE_LEN],
		       unsigned char nonce_c[AUTH_NONCE_LEN],
		       unsigned char nonce_a[AUTH_NONCE_LEN],
		       struct herd_err *err)
{
	if (memcmp(challenge, tag_challenge, AUTH_TAG_LEN))
		return herd_errprintf(err, "not a herd challenge");
	memcpy(nonce_c, challenge + AUTH_TAG_LEN, AUTH_NONCE_LEN);
	if (random_bytes(nonce_a, AUTH_NONCE_LEN, err) < 0)
		return -1;
	memcpy(msg, tag_response, AUTH_TAG_LEN);
	memcpy(msg + AUTH_TAG_LEN, nonce_a, AUTH_NONCE_LEN);
	return mac_of(s, label_agent, nonce_c, nonce_a,
		      msg + AUTH_TAG_LEN + AUTH_NONCE_LEN, err);
}

int auth_response_check(const struct auth_secret *s,
			const unsigned char nonce_c[AUTH_NONCE_LEN],
			const unsigned char msg[AUTH_RESPONSE_LEN],
			unsigned char confirm[AUTH_CONFIRM_LEN],
			struct herd_err *err)
{
	const unsigned char *nonce_a = msg + AUTH_TAG_LEN;
	unsigned char want[AUTH_MAC_LEN];
	int rc = -1;

	if (memcmp(msg, tag_response, AUTH_TAG_LEN)) {
		herd_errprintf(err, "not a herd-agent response");
		goto out;
	}
	if (mac_of(s, label_agent, nonce_c, nonce_a, want, err) < 0)
		goto out;
	if (mac_differ(want, msg + AUTH_TAG_LEN + AUTH_NONCE_LEN,
			     AUTH_MAC_LEN)) {
		herd_errprintf(err, "wrong secret (the agent's proof does "
				    "not match this job)");
		goto out;
	}
	memcpy(confirm, tag_confirm, AUTH_TAG_LEN);
	rc =
	    mac_of(s, label_ctl, nonce_a, nonce_c, confirm + AUTH_TAG_LEN, err);
out:
	auth_wipe(want, sizeof(want));
	return rc;
}

int auth_confirm_check(const struct auth_secret *s,
		       const unsigned char nonce_c[AUTH_NONCE_LEN],
		       const unsigned char nonce_a[AUTH_NONCE_LEN],
		       const unsigned char msg[AUTH_CONFIRM_LEN],
		       struct herd_err *err)
{
	unsigned char want[AUTH_MAC_LEN];
	int rc = -1;

	if (memcmp(msg, tag_confirm, AUTH_TAG_LEN)) {
		herd_errprintf(err, "not a herd confirmation");
		goto out;
	}
	if (mac_of(s, label_ctl, nonce_a, nonce_c, want, err) < 0)
		goto out;
	if (mac_differ(want, msg + AUTH_TAG_LEN, AUTH_MAC_LEN)) {
		herd_errprintf(err, "wrong secret (the controller's proof "
				    "does not match this job)");
		goto out;
	}
	rc = 0;
out:
	auth_wipe(want, sizeof(want));
	return rc;
}

int auth_name_ok(const char *name, size_t len)
{
	if (len == 0 || len > AUTH_NAME_MAX)
		return 0;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return 0;
	}
	return 1;
}

/* ---- I/O under one deadline ------------------------------------------- */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd is ready for events or the deadline passes; doing
 * names the step in the error ("waiting for the response"). */
static int wait_fd(int fd, short events, int64_t deadline, const char *doing,
		   const char *what, struct herd_err *err)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = events};
		int64_t left = deadline - now_ms();
		int n;

		if (left <= 0)
			return herd_errprintf(err, "timed out %s the %s", doing,
					      what);
		n = poll(&p, 1, (int)(left > 60000 ? 60000 : left));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return herd_errprintf(err, "poll: %s", strerror(errno));
		if (n > 0)
			return 0;
	}
}

static int read_full(int fd, void *buf, size_t len, int64_t deadline,
		     const char *what, struct herd_err *err)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n;

		if (wait_fd(fd, POLLIN, deadline, "waiting for", what, err) < 0)
			return -1;
		n = recv(fd, (char *)buf + off, len - off, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return herd_errprintf(err, "reading the %s: %s", what,
					      strerror(errno));
		if (n == 0)
			return herd_errprintf(err,
					      "the peer hung up in the %s "
					      "(%zu of %zu bytes)",
					      what, off, len);
		off += (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len, int64_t deadline,
		      const char *what, struct herd_err *err)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n;

		if (wait_fd(fd, POLLOUT, deadline, "sending", what, err) < 0)
			return -1;
		n = send(fd, (const char *)buf + off, len - off,
			 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return herd_errprintf(err, "sending the %s: %s", what,
					      strerror(errno));
		off += (size_t)n;
	}
	return 0;
}

/* ---- herd's side, one step at a time ---------------------------------- */

int auth_ctl_begin(struct auth_ctl *h, struct herd_err *err)
{
	memset(h, 0, sizeof(*h));
	if (auth_challenge_make(h->out, h->nonce_c, err) < 0)
		return -1;
	h->out_len = AUTH_CHALLENGE_LEN;
	h->step = AUTH_CTL_RESPONSE;
	h->want = AUTH_RESPONSE_LEN;
	return 0;
}

bool auth_ctl_proven(const struct auth_ctl *h)
{
	return h->step != AUTH_CTL_RESPONSE;
}

bool auth_ctl_wants_write(const struct auth_ctl *h)
{
	return h->out_off < h->out_len;
}

const char *auth_ctl_waiting_for(const struct auth_ctl *h)
{
	if (auth_ctl_wants_write(h))
		return h->step == AUTH_CTL_RESPONSE
			   ? "challenge to be taken"
			   : "confirmation to be taken";
	switch (h->step) {
	case AUTH_CTL_RESPONSE:
		return "response";
	case AUTH_CTL_NAME_HEAD:
	case AUTH_CTL_NAME:
		return "node name";
	default:
		return "nothing";
	}
}

void auth_ctl_wipe(struct auth_ctl *h)
{
	auth_wipe(h, sizeof(*h));
}

/* A whole message arrived in h->in: check it and move on. */
static int ctl_advance(struct auth_ctl *h, const struct auth_secret *s,
		       struct herd_err *err)
{
	switch (h->step) {
	case AUTH_CTL_RESPONSE:
		if (auth_response_check(s, h->nonce_c, h->in, h->out, err) < 0)
			return -1;
		h->out_len = AUTH_CONFIRM_LEN;
		h->out_off = 0;
		h->step = AUTH_CTL_NAME_HEAD;
		h->want = AUTH_TAG_LEN + 1;
		break;
	case AUTH_CTL_NAME_HEAD:
		if (memcmp(h->in, tag_name, AUTH_TAG_LEN) ||
		    h->in[AUTH_TAG_LEN] == 0)
			return herd_errprintf(err, "not a node name message");
		h->step = AUTH_CTL_NAME;
		h->want = h->in[AUTH_TAG_LEN];
		break;
	case AUTH_CTL_NAME:
		if (!auth_name_ok((const char *)h->in, h->want))
			return herd_errprintf(
			    err, "the node name holds characters a "
				 "host name cannot have");
		memcpy(h->name, h->in, h->want);
		h->name[h->want] = '\0';
		h->step = AUTH_CTL_DONE;
		h->want = 0;
		break;
	default:
		return herd_errprintf(err, "handshake already over");
	}
	h->in_len = 0;
	return 0;
}

int auth_ctl_io(struct auth_ctl *h, int fd, const struct auth_secret *s,
		struct herd_err *err)
{
	for (;;) {
		ssize_t n;

		if (h->out_off < h->out_len) {
			n = send(fd, h->out + h->out_off,
				 h->out_len - h->out_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				return 0;
			if (n < 0)
				return herd_errprintf(err, "sending the %s: %s",
						      h->step ==
							      AUTH_CTL_RESPONSE
							  ? "challenge"
							  : "confirmation",
						      strerror(errno));
			h->out_off += (size_t)n;
			continue;
		}
		if (h->step == AUTH_CTL_DONE)
			return 1;
		/* Exactly the rest of this message: what follows the
		 * handshake stays in the socket for its reader. */
		n = recv(fd, h->in + h->in_len, h->want - h->in_len,
			 MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0)
			return herd_errprintf(err, "reading the %s: %s",
					      auth_ctl_waiting_for(h),
					      strerror(errno));
		if (n == 0)
			return herd_errprintf(err,
					      "the peer hung up in the %s "
					      "(%zu of %zu bytes)",
					      auth_ctl_waiting_for(h),
					      h->in_len, h->want);
		h->in_len += (size_t)n;
		if (h->in_len == h->want && ctl_advance(h, s, err) < 0)
			return -1;
	}
}

int auth_ctl_handshake(int fd, const struct auth_secret *s, int timeout_ms,
		       char name[AUTH_NAME_MAX + 1], struct herd_err *err)
{
	int64_t deadline = now_ms() + timeout_ms;
	struct auth_ctl h;
	int rc = -1, step;

	name[0] = '\0';
	if (auth_ctl_begin(&h, err) < 0)
		goto out;
	while ((step = auth_ctl_io(&h, fd, s, err)) == 0) {
		bool w = auth_ctl_wants_write(&h);

		if (wait_fd(
			fd, w ? POLLOUT : POLLIN, deadline,
			w ? "sending" : "waiting for",
			w ? (auth_ctl_proven(&h) ? "confirmation" : "challenge")
			  : auth_ctl_waiting_for(&h),
			err) < 0)
			goto out;
	}
	if (step < 0)
		goto out;
	memcpy(name, h.name, sizeof(h.name));
	rc = 0;
out:
	auth_ctl_wipe(&h);
	return rc;
}

int auth_agent_handshake(int fd, const struct auth_secret *s, const char *name,
			 int timeout_ms, struct herd_err *err)
{
	int64_t deadline = now_ms() + timeout_ms;
	unsigned char challenge[AUTH_CHALLENGE_LEN],
	    response[AUTH_RESPONSE_LEN];
	unsigned char nonce_c[AUTH_NONCE_LEN], nonce_a[AUTH_NONCE_LEN];
	unsigned char confirm[AUTH_CONFIRM_LEN];
	unsigned char msg[AUTH_TAG_LEN + 1 + AUTH_NAME_MAX];
	size_t len = strlen(name);

	if (!auth_name_ok(name, len))
		return herd_errprintf(err, "node name '%.*s' cannot be sent",
				      AUTH_NAME_MAX, name);
	if (read_full(fd, challenge, sizeof(challenge), deadline, "challenge",
		      err) < 0 ||
	    auth_response_make(s, challenge, response, nonce_c, nonce_a, err) <
		0 ||
	    write_full(fd, response, sizeof(response), deadline, "response",
		       err) < 0 ||
	    read_full(fd, confirm, sizeof(confirm), deadline, "confirmation",
		      err) < 0 ||
	    auth_confirm_check(s, nonce_c, nonce_a, confirm, err) < 0)
		return -1;
	memcpy(msg, tag_name, AUTH_TAG_LEN);
	msg[AUTH_TAG_LEN] = (unsigned char)len;
	memcpy(msg + AUTH_TAG_LEN + 1, name, len);
	return write_full(fd, msg, AUTH_TAG_LEN + 1 + len, deadline,
			  "node name", err);
}
