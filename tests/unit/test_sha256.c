/* test_sha256.c — lib/sha256.c against FIPS 180-4 and RFC 4231 vectors,
 * and against OpenSSL for every length from 0 to 300 bytes, fed whole and
 * in pieces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "herd/sha256.h"

static void hex(const unsigned char *d, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void check_digest(const void *data, size_t len, const char *want)
{
	unsigned char md[SHA256_LEN];
	char text[2 * SHA256_LEN + 1];
	struct sha256 c;

	sha256_init(&c);
	sha256_update(&c, data, len);
	sha256_final(&c, md);
	hex(md, sizeof(md), text);
	assert_string_equal(text, want);
}

static void test_fips_vectors(void **state)
{
	char *a = malloc(1000000);
	unsigned char md[SHA256_LEN];
	char text[2 * SHA256_LEN + 1];
	struct sha256 c;

	(void)state;
	check_digest("", 0,
		     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934c"
		     "a495991b7852b855");
	check_digest("abc", 3,
		     "ba7816bf8f01cfea414140de5dae2223b00361a39617"
		     "7a9cb410ff61f20015ad");
	check_digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		     56,
		     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ec"
		     "edd419db06c1");
	assert_non_null(a);
	memset(a, 'a', 1000000);
	check_digest(a, 1000000,
		     "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497"
		     "200e046d39ccc7112cd0");
	/* The same million in pieces of 1 to 127 bytes. */
	sha256_init(&c);
	for (size_t off = 0, step = 1; off < 1000000;
	     off += step, step = step % 127 + 1)
		sha256_update(&c, a + off,
			      off + step > 1000000 ? 1000000 - off : step);
	sha256_final(&c, md);
	hex(md, sizeof(md), text);
	assert_string_equal(text, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a4"
				  "97200e046d39ccc7112cd0");
	free(a);
}

static void test_against_openssl(void **state)
{
	unsigned char data[300], key[200], ours[SHA256_LEN];
	unsigned char theirs[EVP_MAX_MD_SIZE];
	unsigned int tlen = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 131 + 7);
	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (unsigned char)(i * 17 + 3);
	for (size_t len = 0; len <= sizeof(data); len++) {
		struct sha256 c;
		size_t half = len / 3;

		sha256_init(&c);
		sha256_update(&c, data, half);
		sha256_update(&c, data + half, len - half);
		sha256_final(&c, ours);
		assert_int_equal(
		    EVP_Digest(data, len, theirs, &tlen, EVP_sha256(), NULL),
		    1);
		assert_int_equal(tlen, SHA256_LEN);
		assert_memory_equal(ours, theirs, SHA256_LEN);
		/* HMAC with keys shorter and longer than a block. */
		hmac_sha256(key, len % sizeof(key), data, len, ours);
		assert_non_null(HMAC(EVP_sha256(), key,
				     (int)(len % sizeof(key)), data, len,
				     theirs, &tlen));
		assert_memory_equal(ours, theirs, SHA256_LEN);
	}
}

static void check_hmac(const void *key, size_t klen, const char *data,
		       const char *want)
{
	unsigned char mac[SHA256_LEN];
	char text[2 * SHA256_LEN + 1];

	hmac_sha256(key, klen, data, strlen(data), mac);
	hex(mac, sizeof(mac), text);
	assert_string_equal(text, want);
}

static void test_rfc4231(void **state)
{
	unsigned char k1[20], k6[131];

	(void)state;
	memset(k1, 0x0b, sizeof(k1));
	memset(k6, 0xaa, sizeof(k6));
	check_hmac(k1, sizeof(k1), "Hi There",
		   "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c"
		   "2e32cff7");
	check_hmac("Jefe", 4, "what do ya want for nothing?",
		   "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b9"
		   "64ec3843");
	check_hmac(k6, sizeof(k6),
		   "Test Using Larger Than Block-Size Key - Hash Key First",
		   "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f"
		   "0ee37f54");
}

static void test_ct_differ(void **state)
{
	unsigned char a[32] = {0}, b[32] = {0};

	(void)state;
	assert_int_equal(sha256_ct_differ(a, b, sizeof(a)), 0);
	b[31] = 1;
	assert_int_equal(sha256_ct_differ(a, b, sizeof(a)), 1);
	b[31] = 0;
	b[0] = 0x80;
	assert_int_equal(sha256_ct_differ(a, b, sizeof(a)), 1);
	assert_int_equal(sha256_ct_differ(a, b, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fips_vectors),
	    cmocka_unit_test(test_against_openssl),
	    cmocka_unit_test(test_rfc4231),
	    cmocka_unit_test(test_ct_differ),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
