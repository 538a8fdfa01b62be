/* test_preauth.c — the pool of unauthenticated connections: per-source
 * and total bounds, which connection goes (the oldest of the source, or
 * of the busiest source), arrival order, IPv4 and IPv4-mapped IPv6 as one
 * source. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "herd/preauth.h"

static struct preauth_src v4(const char *ip)
{
	struct sockaddr_in in = {.sin_family = AF_INET};
	struct preauth_src src;

	assert_int_equal(inet_pton(AF_INET, ip, &in.sin_addr), 1);
	preauth_src_of(&src, (struct sockaddr *)&in);
	return src;
}

/* Owners are the addresses of these slots. */
static int slot[64];

static void test_bounds_checked(void **state)
{
	(void)state;
	assert_null(preauth_new(0, 1));
	assert_null(preauth_new(4, 0));
	assert_null(preauth_new(4, 5));
	preauth_free(preauth_new(4, 4));
	preauth_free(NULL);
}

static void test_per_source(void **state)
{
	struct preauth *p = preauth_new(16, 3);
	struct preauth_src a = v4("10.0.0.1"), b = v4("10.0.0.2");
	int64_t since = 0;

	(void)state;
	assert_non_null(p);
	assert_null(preauth_oldest(p, NULL));
	for (int i = 0; i < 3; i++) {
		assert_null(preauth_victim(p, &a));
		assert_int_equal(preauth_add(p, &a, &slot[i], 100 + i), 0);
	}
	assert_int_equal(preauth_count_src(p, &a), 3);
	/* A fourth from a: its oldest goes, not the newcomer. */
	assert_ptr_equal(preauth_victim(p, &a), &slot[0]);
	assert_int_equal(preauth_add(p, &a, &slot[3], 103), -1);
	/* Another source is not held back by a's. */
	assert_null(preauth_victim(p, &b));
	assert_int_equal(preauth_add(p, &b, &slot[10], 104), 0);
	preauth_del(p, &slot[0]);
	assert_null(preauth_victim(p, &a));
	assert_int_equal(preauth_add(p, &a, &slot[3], 105), 0);
	/* Arrival order: slot 1 is now the oldest. */
	assert_ptr_equal(preauth_oldest(p, &since), &slot[1]);
	assert_int_equal(since, 101);
	/* Deleting from the middle keeps the order of the rest. */
	preauth_del(p, &slot[2]);
	preauth_del(p, &slot[1]);
	assert_ptr_equal(preauth_oldest(p, &since), &slot[10]);
	assert_int_equal(since, 104);
	preauth_del(p, &slot[42]); /* absent: no-op */
	assert_int_equal(preauth_count(p), 2);
	preauth_free(p);
}

static void test_total_busiest_goes(void **state)
{
	struct preauth *p = preauth_new(6, 4);
	struct preauth_src a = v4("10.0.0.1"), b = v4("10.0.0.2"),
			   c = v4("10.0.0.3"), d = v4("10.0.0.4"), e;

	(void)state;
	/* b first (oldest overall), then a flood from a. */
	assert_int_equal(preauth_add(p, &b, &slot[0], 1), 0);
	for (int i = 1; i <= 4; i++)
		assert_int_equal(preauth_add(p, &a, &slot[i], 1 + i), 0);
	assert_int_equal(preauth_add(p, &c, &slot[5], 6), 0);
	assert_int_equal(preauth_count(p), 6);
	/* Full: a newcomer from d displaces a's oldest, not b's (older,
	 * but b holds one connection and a four). */
	assert_ptr_equal(preauth_victim(p, &d), &slot[1]);
	preauth_del(p, &slot[1]);
	assert_null(preauth_victim(p, &d));
	assert_int_equal(preauth_add(p, &d, &slot[6], 7), 0);
	/* Ties between sources: the one whose oldest is older goes. */
	preauth_del(p, &slot[2]);
	preauth_del(p, &slot[3]);
	assert_int_equal(preauth_add(p, &c, &slot[7], 8), 0);
	assert_int_equal(preauth_add(p, &d, &slot[8], 9), 0);
	/* b:1 (t1), a:1 (t5), c:2 (t6, t8), d:2 (t7, t9): c's t6. */
	e = v4("10.0.0.9");
	assert_ptr_equal(preauth_victim(p, &e), &slot[5]);
	preauth_free(p);
}

static void test_many_sources(void **state)
{
	struct preauth *p = preauth_new(32, 2);
	char ip[32];

	(void)state;
	/* Every stranger on its own address: the oldest overall goes. */
	for (int i = 0; i < 32; i++) {
		struct preauth_src s;

		snprintf(ip, sizeof(ip), "127.0.%d.%d", i / 200, 1 + i % 200);
		s = v4(ip);
		assert_null(preauth_victim(p, &s));
		assert_int_equal(preauth_add(p, &s, &slot[i], i), 0);
	}
	{
		struct preauth_src s = v4("10.1.1.1");

		assert_ptr_equal(preauth_victim(p, &s), &slot[0]);
	}
	preauth_free(p);
}

static void test_v4_mapped_is_one_source(void **state)
{
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
	struct sockaddr_storage other = {.ss_family = AF_UNIX};
	struct preauth_src mapped, plain = v4("192.168.7.9"), none;

	(void)state;
	assert_int_equal(
	    inet_pton(AF_INET6, "::ffff:192.168.7.9", &in6.sin6_addr), 1);
	preauth_src_of(&mapped, (struct sockaddr *)&in6);
	assert_memory_equal(&mapped, &plain, sizeof(plain));
	preauth_src_of(&none, (struct sockaddr *)&other);
	for (size_t i = 0; i < sizeof(none.addr); i++)
		assert_int_equal(none.addr[i], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bounds_checked),
	    cmocka_unit_test(test_per_source),
	    cmocka_unit_test(test_total_busiest_goes),
	    cmocka_unit_test(test_many_sources),
	    cmocka_unit_test(test_v4_mapped_is_one_source),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
