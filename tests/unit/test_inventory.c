/* test_inventory.c — an inventory's JSON answer into hosts: shapes, name
 * keys, slots, filters (scalars, nested keys, arrays), errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "herd/inventory.h"

static struct hostfile *parse(const char *json, const char *filter,
			      struct herd_err *err)
{
	herd_err_clear(err);
	return inventory_parse(json, strlen(json), filter, "inv", err);
}

/* Parses json with filter; the hosts must be want ("host:slots ..."). */
static void expect_hosts(const char *json, const char *filter,
			 const char *want)
{
	struct herd_err err;
	struct hostfile *hf = parse(json, filter, &err);
	char got[4096];
	size_t off = 0;

	if (!hf)
		print_error("json <%s> filter <%s>: %s\n", json,
			    filter ? filter : "", err.text);
	assert_non_null(hf);
	got[0] = '\0';
	for (size_t i = 0; i < hf->count && off < sizeof(got); i++) {
		int n = snprintf(got + off, sizeof(got) - off, "%s%s:%d",
				 i ? " " : "", hf->entries[i].host,
				 hf->entries[i].slots);
		assert_true(n > 0);
		off += (size_t)n;
	}
	assert_string_equal(got, want);
	hostfile_free(hf);
}

static void expect_error(const char *json, const char *filter,
			 const char *want)
{
	struct herd_err err;
	struct hostfile *hf = parse(json, filter, &err);

	if (hf || !strstr(err.text, want))
		print_error("json <%s>: got <%s>, want <%s>\n", json,
			    hf ? "(parsed)" : err.text, want);
	assert_null(hf);
	assert_non_null(strstr(err.text, want));
	assert_memory_equal(err.text, "inv: ", 5);
}

static const char objects[] =
    "{\"nodes\": ["
    "{\"name\": \"a1\", \"slots\": 8, \"state\": \"ready\", \"rack\": 1,"
    " \"labels\": {\"zone\": \"x\", \"deep\": {\"k\": \"v\"}},"
    " \"tags\": [\"ib\", 7, true]},"
    "{\"hostname\": \"a2\", \"state\": \"drain\", \"rack\": 1.5,"
    " \"labels\": {\"zone\": \"y\"}, \"ok\": false, \"note\": null},"
    "{\"host\": \"a3\", \"slots\": 2, \"state\": \"ready\", \"rack\": 2}"
    "]}";

static void test_shapes(void **state)
{
	(void)state;
	expect_hosts("[\"n1\", \"n2\"]", NULL, "n1:0 n2:0");
	expect_hosts("{\"nodes\": [\"n1\"]}", NULL, "n1:0");
	expect_hosts("{\"hosts\": [\"h1\", {\"name\": \"h2\"}]}", "", "h1:0 h2:0");
	/* name wins over hostname and host */
	expect_hosts("[{\"host\": \"c\", \"hostname\": \"b\", \"name\": \"a\"}]",
		     NULL, "a:0");
	expect_hosts(objects, NULL, "a1:8 a2:0 a3:2");
}

static void test_filters(void **state)
{
	(void)state;
	expect_hosts(objects, "state=ready", "a1:8 a3:2");
	expect_hosts(objects, " state = ready ", "a1:8 a3:2");
	expect_hosts(objects, "rack=1", "a1:8");
	expect_hosts(objects, "rack=1.5", "a2:0");
	expect_hosts(objects, "labels.zone=y", "a2:0");
	expect_hosts(objects, "labels.deep.k=v", "a1:8");
	expect_hosts(objects, "tags=ib", "a1:8");
	expect_hosts(objects, "tags=7", "a1:8");
	expect_hosts(objects, "tags=true", "a1:8");
	expect_hosts(objects, "ok=false", "a2:0");
	expect_hosts(objects, "note=null", "a2:0");
	expect_hosts(objects, "state=ready,rack=2", "a3:2");
	expect_hosts(objects, "state=ready,,rack=2", "a3:2");
	/* A string entry has no members: a filter drops it. */
	expect_hosts("[\"s\", {\"name\": \"o\", \"k\": \"\"}]", "k=", "o:0");
}

static void test_filter_check(void **state)
{
	struct herd_err err;

	(void)state;
	assert_int_equal(inventory_filter_check(NULL, &err), 0);
	assert_int_equal(inventory_filter_check("", &err), 0);
	assert_int_equal(inventory_filter_check("a=b, c.d=e", &err), 0);
	assert_int_equal(inventory_filter_check("a", &err), -1);
	assert_string_equal(err.text, "expected key=value, found 'a'");
	assert_int_equal(inventory_filter_check(" =b", &err), -1);
	assert_string_equal(err.text, "expected a key before '=b'");
	assert_int_equal(inventory_filter_check(" , ", &err), -1);
	assert_string_equal(err.text, "expected key=value[,key=value...]");
	{
		char many[512] = "";

		for (int i = 0; i <= INVENTORY_FILTER_MAX; i++)
			strcat(many, "k=v,");
		assert_int_equal(inventory_filter_check(many, &err), -1);
		assert_non_null(strstr(err.text, "more than 32"));
	}
}

static void test_errors(void **state)
{
	(void)state;
	expect_error("", NULL, "not JSON");
	expect_error("<html>", NULL, "not JSON: invalid token near '<' (line 1, column 1)");
	expect_error("{\"a\": 1, \"a\": 2}", NULL, "not JSON: duplicate object key");
	expect_error("42", NULL, "expected an array of hosts");
	expect_error("{\"items\": []}", NULL, "or an object with a \"nodes\" array");
	expect_error("{\"nodes\": {}}", NULL, "expected \"nodes\" to be an array");
	expect_error("[1]", NULL, "entry 1: expected a host name or an object");
	expect_error("[\"a\", {\"id\": 3}]", NULL, "entry 2: expected a \"name\" string");
	expect_error("[{\"name\": 5}]", NULL, "entry 1: expected a \"name\" string");
	expect_error("[{\"name\": \"a\", \"slots\": 0}]", NULL,
		     "entry 1 (a): expected \"slots\" to be an integer from 1 to 65536");
	expect_error("[{\"name\": \"a\", \"slots\": \"8\"}]", NULL, "entry 1 (a)");
	expect_error("[{\"name\": \"a\", \"slots\": 65537}]", NULL, "entry 1 (a)");
	expect_error("[\"ok\", \"bad host\"]", NULL, "entry 2: bad host name 'bad host'");
	expect_error("[\"\"]", NULL, "entry 1: expected a host name");
	/* The one host name rule of every source. */
	expect_error("[\"ok\", \"-oProxyCommand\"]", NULL,
		     "entry 2: bad host name '-oProxyCommand' (it must start "
		     "with a letter or digit)");
	expect_error("[{\"name\": \"a;b\"}]", NULL, "entry 1: bad host name 'a;b'");
	expect_error("[\"$(id)\"]", NULL, "entry 1: bad host name '$(id)'");
	expect_error("[\"n\\u00e9\"]", NULL, "entry 1: bad host name");
	expect_error("[]", NULL, "the inventory lists no hosts");
	expect_error("{\"nodes\": []}", "a=b", "no host of 0 matches the filter 'a=b'");
	expect_error(objects, "state=gone", "no host of 3 matches the filter 'state=gone'");
	expect_error(objects, "nokey", "filter: expected key=value");
	/* a malformed entry is an error even when the filter would drop it */
	expect_error("[{\"name\": \"a\", \"slots\": -1, \"s\": 1}]", "s=2", "entry 1 (a)");
}

static void test_nul_inside(void **state)
{
	struct herd_err err;
	static const char json[] = "[\"a\"]\0[\"b\"]";
	struct hostfile *hf;

	(void)state;
	hf = inventory_parse(json, sizeof(json) - 1, NULL, "inv", &err);
	assert_null(hf);
	assert_non_null(strstr(err.text, "not JSON"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shapes),
	    cmocka_unit_test(test_filters),
	    cmocka_unit_test(test_filter_check),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_nul_inside),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
