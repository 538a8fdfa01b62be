/* sha256.h — SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), in plain C.
 *
 * herd-agent needs them for the job secret's challenge-response (auth.h)
 * and for the key of the topology it keeps (agent/rundir.c), and for
 * nothing else from libcrypto: loading and initialising libcrypto cost
 * every agent start about 3.5 ms of the node's CPU, more than everything
 * herd hashes there.  Tested against FIPS 180-4 and RFC 4231 vectors
 * (tests/unit/test_sha256.c).
 */
#ifndef HERD_SHA256_H
#define HERD_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN   32
#define SHA256_BLOCK 64

struct sha256 {
	uint32_t h[8];
	uint64_t bytes; /* hashed so far */
	unsigned char buf[SHA256_BLOCK];
	size_t n; /* bytes in buf */
};

void sha256_init(struct sha256 *c);
void sha256_update(struct sha256 *c, const void *data, size_t len);
/* The digest into out; c is wiped. */
void sha256_final(struct sha256 *c, unsigned char out[SHA256_LEN]);

/* HMAC-SHA256(key, data) into out; every copy of the key is wiped. */
void hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
		 unsigned char out[SHA256_LEN]);

/* 0 when a and b are equal, in a time that does not depend on where they
 * differ (for MACs). */
int sha256_ct_differ(const void *a, const void *b, size_t len);

#endif
