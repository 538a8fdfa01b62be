/* test_hostlist.c — unit tests of lib/job/hostlist.c: expansion, compression,
 * errors, the host caps.  Expected texts come from
 * `scontrol show hostnames` / `scontrol show hostlist` (Slurm 22.05). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "herd/hostlist.h"

/* Expands expr and checks the hosts joined by ' ' equal want. */
static void check_expand(const char *expr, const char *want)
{
	struct herd_err err;
	struct hostlist *hl;
	char got[4096];
	size_t len = 0;

	herd_err_clear(&err);
	hl = hostlist_expand(expr, &err);
	if (!hl)
		fail_msg("%s: %s", expr, err.text);
	got[0] = '\0';
	for (size_t i = 0; i < hostlist_count(hl); i++) {
		int n = snprintf(got + len, sizeof(got) - len, "%s%s",
				 i ? " " : "", hostlist_nth(hl, i));

		assert_true(n > 0 && (size_t)n < sizeof(got) - len);
		len += (size_t)n;
	}
	assert_string_equal(got, want);
	hostlist_free(hl);
}

static void check_compress(const char *expr, const char *want)
{
	struct herd_err err;
	struct hostlist *hl = hostlist_expand(expr, &err);
	char *s;

	if (!hl)
		fail_msg("%s: %s", expr, err.text);
	s = hostlist_compress(hl);
	assert_non_null(s);
	assert_string_equal(s, want);
	free(s);
	hostlist_free(hl);
}

/* Checks that expr fails with exactly message msg. */
static void check_error(const char *expr, const char *msg)
{
	struct herd_err err;
	struct hostlist *hl;

	herd_err_clear(&err);
	hl = hostlist_expand(expr, &err);
	assert_null(hl);
	assert_string_equal(err.text, msg);
}

static void test_expand_ranges(void **state)
{
	(void)state;
	check_expand("node[001-004]", "node001 node002 node003 node004");
	check_expand("n[8-10]", "n8 n9 n10");
	check_expand("n[08-10]", "n08 n09 n10");
	check_expand("n[001-3]", "n001 n002 n003");
	check_expand("n[1-003]", "n1 n2 n3");
	check_expand("n[1-3,7,10-12]", "n1 n2 n3 n7 n10 n11 n12");
	check_expand("n[0-0]", "n0");
	check_expand("[1-3]", "1 2 3");
	check_expand("n1[1-3]", "n11 n12 n13");
}

static void test_expand_groups(void **state)
{
	(void)state;
	check_expand("rack[1-2]-gpu[01-02]",
		     "rack1-gpu01 rack1-gpu02 rack2-gpu01 rack2-gpu02");
	/* Slurm: last group innermost, the others right to left. */
	check_expand("a[1-2]b[3-4]c[5-6]",
		     "a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 a1b4c6 a2b4c5 "
		     "a2b4c6");
	check_expand("n[1-2][3-4]", "n13 n14 n23 n24");
	check_expand("n[1-3]x[4]", "n1x4 n2x4 n3x4");
}

static void test_expand_lists(void **state)
{
	(void)state;
	check_expand("n3,n1,n1,n[1-2]", "n3 n1 n1 n1 n2");
	check_expand("n1 n2\tn3", "n1 n2 n3");
	check_expand(",,n1,,n2,", "n1 n2");
	check_expand("", "");
	check_expand("a.b-c_d", "a.b-c_d");
	check_expand("n[18446744073709551613-18446744073709551614]",
		     "n18446744073709551613 n18446744073709551614");
}

static void test_compress(void **state)
{
	(void)state;
	check_compress("node[001-128]", "node[001-128]");
	check_compress("n[8-10]", "n[8-10]");
	check_compress("n9,n10", "n[9-10]");
	check_compress("n009,n10", "n[009,10]");
	check_compress("n[1-3],n01", "n[1-3,01]");
	check_compress("n3,n1,n2", "n[3,1-2]");
	check_compress("n1,n1,n2", "n[1,1-2]");
	check_compress("a1b2,a1b3", "a1b[2-3]");
	check_compress("rack[1-2]-gpu[01-04]",
		       "rack1-gpu[01-04],rack2-gpu[01-04]");
	check_compress("n1[1-3],n14", "n1[1-3],n14");
	check_compress("n11,n12,n13", "n[11-13]");
	check_compress("n,n1", "n,n1");
	check_compress("n1,n2,n,n3", "n[1-2],n,n3");
	check_compress("1,2,3", "[1-3]");
	check_compress("n[99-100],n101", "n[99-101]");
	check_compress("n[00-02],n[3-10]", "n[00-02,3-10]");
	check_compress("n[5-6],n[1-4]", "n[5-6,1-4]");
	check_compress("", "");
}

static void test_push_host(void **state)
{
	struct herd_err err;
	struct hostlist *hl = hostlist_new();
	char *s;

	(void)state;
	assert_non_null(hl);
	assert_int_equal(hostlist_push_host(hl, "n01", &err), 0);
	assert_int_equal(hostlist_push_host(hl, "n02", &err), 0);
	assert_int_equal(hostlist_push(hl, "n[03-04]", &err), 0);
	assert_int_equal(hostlist_push_host(hl, "login", &err), 0);
	s = hostlist_compress(hl);
	assert_string_equal(s, "n[01-04],login");
	free(s);
	assert_int_equal(hostlist_push_host(hl, "", &err), -1);
	assert_int_equal(hostlist_push_host(hl, "a,b", &err), -1);
	assert_int_equal(hostlist_push_host(hl, "n[1]", &err), -1);
	assert_int_equal(hostlist_count(hl), 5);
	hostlist_free(hl);
}

static void test_errors(void **state)
{
	(void)state;
	check_error("node[", "column 6: expected a number, found end of input");
	check_error("n[5-1]", "column 3: range 5-1 goes down (expected "
			      "LOW-HIGH)");
	check_error("]x[", "column 1: unexpected ']' (expected a host name "
			   "or '[')");
	check_error("n[1-99999999999999999999]",
		    "column 5: number too large (expected at most "
		    "18446744073709551614)");
	check_error("n[1-3]x", "column 7: expected ',' or end of input after "
			       "']' (Slurm allows no text after the last "
			       "bracket)");
	check_error("n[1-3", "column 6: expected ',', '-' or ']', found end "
			     "of input");
	check_error("n[1,,2]", "column 5: expected a number, found ','");
	check_error("n[1-]", "column 5: expected a number, found ']'");
	check_error("n[a]", "column 3: expected a number, found 'a'");
	check_error("n[1 ]", "column 4: expected ',', '-' or ']', found ' '");
	check_error("ok,n\x01", "column 5: expected a host name character, "
				"found byte 0x01");
}

static void test_name_too_long(void **state)
{
	char expr[400];
	struct herd_err err;

	(void)state;
	memset(expr, 'a', 300);
	expr[300] = '\0';
	assert_null(hostlist_expand(expr, &err));
	assert_string_equal(err.text, "column 1: host names longer than 255 "
				      "characters");
	/* Padding counts too. */
	snprintf(expr, sizeof(expr), "n[%0260d]", 1);
	assert_null(hostlist_expand(expr, &err));
}

static void test_cap(void **state)
{
	struct herd_err err;
	struct hostlist *hl;

	(void)state;
	/* One range: Slurm's cap, refused here before Slurm says it. */
	check_error("n[1-65537]", "column 3: range 1-65537 holds more than "
				  "65536 hosts (Slurm's limit for one range)");
	check_error("n[0-18446744073709551614]",
		    "column 3: range 0-18446744073709551614 holds more than "
		    "65536 hosts (Slurm's limit for one range)");
	check_error("n[1-1001][1-1000]", "column 1: more than 1000000 hosts "
					 "(HOSTLIST_MAX)");
	/* The product of groups is checked before anything is made. */
	check_error("a,n[1-60000][1-60000][1-60000]",
		    "column 3: more than 1000000 hosts (HOSTLIST_MAX)");
	hl = hostlist_expand("n[1-65536]", &err);
	assert_non_null(hl);
	assert_int_equal(hostlist_count(hl), 65536);
	hostlist_free(hl);
	hl = hostlist_expand("n[1-1000]-[1-1000]", &err);
	assert_non_null(hl);
	assert_int_equal(hostlist_count(hl), HOSTLIST_MAX);
	assert_string_equal(hostlist_nth(hl, HOSTLIST_MAX - 1), "n1000-1000");
	/* A Slurm range per host (the text after the first groups keeps
	 * them apart): read from the back, in Slurm's order all the same
	 * (with three groups the first runs fastest, as scontrol says). */
	hostlist_free(hl);
	hl = hostlist_expand("n[1-2000]x[1-3]y[7]", &err);
	assert_non_null(hl);
	assert_int_equal(hostlist_count(hl), 6000);
	assert_string_equal(hostlist_nth(hl, 0), "n1x1y7");
	assert_string_equal(hostlist_nth(hl, 1), "n2x1y7");
	assert_string_equal(hostlist_nth(hl, 2000), "n1x2y7");
	assert_string_equal(hostlist_nth(hl, 5999), "n2000x3y7");
	hostlist_free(hl);
	hl = hostlist_expand("n[1-1000]-[1-1000]", &err);
	assert_non_null(hl);
	/* A push beyond the cap fails and leaves the list as it was. */
	assert_int_equal(hostlist_push(hl, "m1", &err), -1);
	assert_int_equal(hostlist_push_host(hl, "m1", &err), -1);
	assert_int_equal(hostlist_count(hl), HOSTLIST_MAX);
	hostlist_free(hl);
}

static void test_push_error_keeps_list(void **state)
{
	struct herd_err err;
	struct hostlist *hl = hostlist_expand("n[1-3]", &err);
	char *s;

	(void)state;
	assert_non_null(hl);
	assert_int_equal(hostlist_push(hl, "m[1-2],x[", &err), -1);
	assert_int_equal(hostlist_push_host(hl, "n[4]", &err), -1);
	assert_int_equal(hostlist_count(hl), 3);
	assert_string_equal(hostlist_nth(hl, 2), "n3");
	assert_null(hostlist_nth(hl, 3));
	s = hostlist_compress(hl);
	assert_string_equal(s, "n[1-3]");
	free(s);
	hostlist_free(hl);
	hostlist_free(NULL);
}

/* Slurm turns a number above ULONG_MAX into ULONG_MAX: host
 * n99999999999999999999 would come back as n18446744073709551615. */
static void test_number_too_large(void **state)
{
	struct herd_err err;
	struct hostlist *hl = hostlist_new();

	(void)state;
	check_error("a,n99999999999999999999",
		    "column 4: number too large (expected at most "
		    "18446744073709551614)");
	check_error("n18446744073709551615",
		    "column 2: number too large (expected at most "
		    "18446744073709551614)");
	check_expand("n18446744073709551614", "n18446744073709551614");
	/* Digits before '[' are part of the hosts' number: expanded, the
	 * host would be refused as a plain name, and so would the list
	 * hostlist_compress makes of it. */
	check_error("a, n1844674407370955161[4-5]",
		    "column 4: the hosts end in a number too large (expected "
		    "at most 18446744073709551614, the digits before '[' "
		    "included)");
	check_error("x,nZ0333333332333333333332[00]",
		    "column 3: the hosts end in a number too large (expected "
		    "at most 18446744073709551614, the digits before '[' "
		    "included)");
	check_error("n1[84467440737095516][15]",
		    "column 1: the hosts end in a number too large (expected "
		    "at most 18446744073709551614, the digits before '[' "
		    "included)");
	check_expand("n1844674407370955161[4]", "n18446744073709551614");
	check_compress("n1844674407370955161[3-4]",
		       "n1844674407370955161[3-4]");
	assert_non_null(hl);
	assert_int_equal(hostlist_push_host(hl, "n99999999999999999999", &err),
			 -1);
	assert_string_equal(err.text, "column 2: number too large (expected "
				      "at most 18446744073709551614)");
	assert_int_equal(hostlist_count(hl), 0);
	hostlist_free(hl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_expand_ranges),
	    cmocka_unit_test(test_expand_groups),
	    cmocka_unit_test(test_expand_lists),
	    cmocka_unit_test(test_compress),
	    cmocka_unit_test(test_push_host),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_name_too_long),
	    cmocka_unit_test(test_cap),
	    cmocka_unit_test(test_push_error_keeps_list),
	    cmocka_unit_test(test_number_too_large),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
