/* sha256.c — SHA-256 and HMAC-SHA256; see sha256.h. */
#include <string.h>

#include "herd/sha256.h"

static const uint32_t k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror(uint32_t x, int n)
{
	return x >> n | x << (32 - n);
}

static void block(struct sha256 *c, const unsigned char *p)
{
	uint32_t w[64], s[8];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 =
		    ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ w[i - 15] >> 3;
		uint32_t s1 =
		    ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ w[i - 2] >> 10;

		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	memcpy(s, c->h, sizeof(s));
	for (int i = 0; i < 64; i++) {
		uint32_t e = s[4], a = s[0];
		uint32_t t1 = s[7] + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) +
			      ((e & s[5]) ^ (~e & s[6])) + k[i] + w[i];
		uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) +
			      ((a & s[1]) ^ (a & s[2]) ^ (s[1] & s[2]));

		memmove(s + 1, s, 7 * sizeof(s[0]));
		s[4] += t1;
		s[0] = t1 + t2;
	}
	for (int i = 0; i < 8; i++)
		c->h[i] += s[i];
}

void sha256_init(struct sha256 *c)
{
	static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
				       0xa54ff53a, 0x510e527f, 0x9b05688c,
				       0x1f83d9ab, 0x5be0cd19};

	memcpy(c->h, h0, sizeof(h0));
	c->bytes = 0;
	c->n = 0;
}

void sha256_update(struct sha256 *c, const void *data, size_t len)
{
	const unsigned char *p = data;

	c->bytes += len;
	if (c->n) {
		size_t take =
		    SHA256_BLOCK - c->n < len ? SHA256_BLOCK - c->n : len;

		memcpy(c->buf + c->n, p, take);
		c->n += take;
		p += take;
		len -= take;
		if (c->n < SHA256_BLOCK)
			return;
		block(c, c->buf);
		c->n = 0;
	}
	for (; len >= SHA256_BLOCK; p += SHA256_BLOCK, len -= SHA256_BLOCK)
		block(c, p);
	memcpy(c->buf, p, len);
	c->n = len;
}

void sha256_final(struct sha256 *c, unsigned char out[SHA256_LEN])
{
	uint64_t bits = c->bytes * 8;

	c->buf[c->n++] = 0x80;
	if (c->n > SHA256_BLOCK - 8) {
		memset(c->buf + c->n, 0, SHA256_BLOCK - c->n);
		block(c, c->buf);
		c->n = 0;
	}
	memset(c->buf + c->n, 0, SHA256_BLOCK - 8 - c->n);
	for (int i = 0; i < 8; i++)
		c->buf[SHA256_BLOCK - 1 - i] = (unsigned char)(bits >> (8 * i));
	block(c, c->buf);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (unsigned char)(c->h[i] >> 24);
		out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
		out[4 * i + 2] = (unsigned char)(c->h[i] >> 8);
		out[4 * i + 3] = (unsigned char)c->h[i];
	}
	explicit_bzero(c, sizeof(*c));
}

void hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
		 unsigned char out[SHA256_LEN])
{
	unsigned char k0[SHA256_BLOCK] = {0}, pad[SHA256_BLOCK];
	unsigned char inner[SHA256_LEN];
	struct sha256 c;

	if (key_len > SHA256_BLOCK) {
		sha256_init(&c);
		sha256_update(&c, key, key_len);
		sha256_final(&c, k0);
	} else if (key_len > 0) {
		memcpy(k0, key, key_len);
	}
	for (int i = 0; i < SHA256_BLOCK; i++)
		pad[i] = k0[i] ^ 0x36;
	sha256_init(&c);
	sha256_update(&c, pad, sizeof(pad));
	sha256_update(&c, data, len);
	sha256_final(&c, inner);
	for (int i = 0; i < SHA256_BLOCK; i++)
		pad[i] = k0[i] ^ 0x5c;
	sha256_init(&c);
	sha256_update(&c, pad, sizeof(pad));
	sha256_update(&c, inner, sizeof(inner));
	sha256_final(&c, out);
	explicit_bzero(k0, sizeof(k0));
	explicit_bzero(pad, sizeof(pad));
	explicit_bzero(inner, sizeof(inner));
}

int sha256_ct_differ(const void *a, const void *b, size_t len)
{
	const volatile unsigned char *x = a, *y = b;
	unsigned char d = 0;

	for (size_t i = 0; i < len; i++)
		d |= x[i] ^ y[i];
	return d != 0;
}
