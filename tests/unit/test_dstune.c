/* test_dstune.c — the DeepSpeed bucket rule: the README's table, monotone
 * in bandwidth, latency and ranks, the clamps; the platform file's
 * network section; herd bench's table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "herd/dstune.h"

static struct ds_tuned tune(double lat_us, double gbps, long ranks, int e)
{
	struct ds_net n = {lat_us, gbps * 1e9 / 8, ranks, e};
	struct ds_tuned t;

	ds_tune_rule(&n, &t);
	return t;
}

/* The README's table: 10/25 Gb/s Ethernet at 50 us a hop, 100/200/400
 * Gb/s IB at 14 us; 16, 64 and 256 ranks; bf16. */
static void test_table(void **state)
{
	static const struct {
		double gbps, lat;
		long ranks, reduce, prefetch, persist;
	} rows[] = {
	    {10, 50, 16, 5000000, 10000000, 500000},
	    {10, 50, 64, 20000000, 40000000, 1000000},
	    {10, 50, 256, 80000000, 160000000, 1000000},
	    {25, 50, 16, 12500000, 25000000, 1000000},
	    {25, 50, 64, 50000000, 100000000, 1000000},
	    {25, 50, 256, 200000000, 400000000, 1000000},
	    {100, 14, 16, 14000000, 28000000, 1000000},
	    {100, 14, 64, 56000000, 112000000, 1000000},
	    {100, 14, 256, 224000000, 448000000, 1000000},
	    {200, 14, 16, 28000000, 56000000, 1000000},
	    {200, 14, 64, 112000000, 224000000, 1000000},
	    {200, 14, 256, 448000000, 500000000, 1000000},
	    {400, 14, 16, 56000000, 112000000, 1000000},
	    {400, 14, 64, 224000000, 448000000, 1000000},
	    {400, 14, 256, 500000000, 500000000, 1000000},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ds_tuned t =
		    tune(rows[i].lat, rows[i].gbps, rows[i].ranks, 2);

		assert_int_equal(t.reduce_bucket_size, rows[i].reduce);
		assert_int_equal(t.allgather_bucket_size, rows[i].reduce);
		assert_int_equal(t.prefetch_bucket_size, rows[i].prefetch);
		assert_int_equal(t.param_persistence_threshold,
				 rows[i].persist);
	}
	/* 400 Gb/s, 64 ranks: 10 x 64 x 14 us x 50 GB/s = 448 MB. */
	assert_true(tune(14, 400, 64, 2).bucket_bytes > 447.9e6 &&
		    tune(14, 400, 64, 2).bucket_bytes < 448.1e6);
	/* fp32: half the elements for the same bytes. */
	assert_int_equal(tune(14, 400, 64, 4).reduce_bucket_size, 112000000);
}

static void test_monotone(void **state)
{
	long prev = 0;

	(void)state;
	/* In bandwidth: never smaller, strictly larger between the clamps. */
	for (double g = 0.001; g < 10000; g *= 1.5) {
		struct ds_tuned t = tune(20, g, 16, 2);

		assert_true(t.reduce_bucket_size >= prev);
		if (!t.clamped_low && !t.clamped_high && prev > DS_BUCKET_MIN)
			assert_true(t.reduce_bucket_size > prev);
		assert_true(t.prefetch_bucket_size >= t.reduce_bucket_size);
		prev = t.reduce_bucket_size;
	}
	/* In latency. */
	prev = 0;
	for (double l = 0.01; l < 100000; l *= 1.5) {
		struct ds_tuned t = tune(l, 25, 16, 2);

		assert_true(t.reduce_bucket_size >= prev);
		prev = t.reduce_bucket_size;
	}
	/* In ranks. */
	prev = 0;
	for (long p = 2; p < 100000; p *= 2) {
		struct ds_tuned t = tune(14, 100, p, 2);

		assert_true(t.reduce_bucket_size >= prev);
		prev = t.reduce_bucket_size;
	}
}

static void test_clamps(void **state)
{
	struct ds_tuned t;
	struct ds_net bad = {-1, 0, 0, 3};

	(void)state;
	/* 50 Mbit/s between 3 namespaces: far below the floor. */
	t = tune(30, 0.05, 3, 2);
	assert_true(t.clamped_low);
	assert_int_equal(t.reduce_bucket_size, DS_BUCKET_MIN);
	assert_int_equal(t.prefetch_bucket_size, 2 * DS_BUCKET_MIN);
	assert_int_equal(t.param_persistence_threshold, DS_PERSIST_MIN);
	t = tune(1000, 1000, 1000, 2);
	assert_true(t.clamped_high);
	assert_int_equal(t.reduce_bucket_size, DS_BUCKET_MAX);
	assert_int_equal(t.prefetch_bucket_size, DS_BUCKET_MAX);
	assert_int_equal(t.param_persistence_threshold, DS_PERSIST_MAX);
	/* Nonsense in, the floor out, never a crash. */
	ds_tune_rule(&bad, &t);
	assert_int_equal(t.reduce_bucket_size, DS_BUCKET_MIN);
}

static int net(const char *text, struct ds_platform_net *out,
	       struct herd_err *err)
{
	herd_err_clear(err);
	return ds_platform_net_parse(text, strlen(text), "p.json", out, err);
}

static void expect_net_error(const char *text, const char *want)
{
	struct ds_platform_net n;
	struct herd_err err;

	assert_int_equal(net(text, &n, &err), -1);
	if (!strstr(err.text, want))
		print_error("got <%s>, want <%s>\n", err.text, want);
	assert_non_null(strstr(err.text, want));
}

static void test_platform(void **state)
{
	struct ds_platform_net n;
	struct herd_err err;

	(void)state;
	assert_int_equal(net("{\"gpus\": []}", &n, &err), 0);
	assert_int_equal(
	    net("{\"network\": {\"nics\": ["
		"{\"name\": \"mlx5_0\", \"rate_gbps\": 400, \"fabric\": "
		"\"ib\"},"
		"{\"name\": \"mlx5_1\", \"rate_gbps\": 400, \"fabric\": \"ib\"}"
		"]}}",
		&n, &err),
	    1);
	assert_int_equal(n.n_nics, 2);
	assert_true(n.rate_gbps_sum == 800);
	assert_true(n.latency_us == DS_LAT_IB_US && !n.latency_given);
	assert_string_equal(n.fabric, "ib");
	assert_int_equal(
	    net("{\"network\": {\"latency_us\": 3.5, \"nics\": ["
		"{\"name\": \"eth0\", \"rate_gbps\": 25, \"fabric\": "
		"\"ethernet\"},"
		"{\"name\": \"r0\", \"rate_gbps\": 100, \"fabric\": \"roce\"}"
		"]}}",
		&n, &err),
	    1);
	assert_true(n.latency_us == 3.5 && n.latency_given);
	assert_string_equal(n.fabric, "mixed");
	/* Without latency_us, the largest default of the fabrics. */
	assert_int_equal(
	    net("{\"network\": {\"nics\": ["
		"{\"name\": \"eth0\", \"rate_gbps\": 25, \"fabric\": "
		"\"ethernet\"},"
		"{\"name\": \"r0\", \"rate_gbps\": 100, \"fabric\": \"roce\"}"
		"]}}",
		&n, &err),
	    1);
	assert_true(n.latency_us == DS_LAT_ETHERNET_US);

	expect_net_error("{\"network\": {\n  \"nics\": [,]}}", "p.json:2:");
	expect_net_error("[1]", "p.json: expected an object");
	expect_net_error("{\"network\": 3}", "network: expected an object");
	expect_net_error("{\"network\": {\"nic\": []}}",
			 "network: unknown key 'nic'");
	expect_net_error("{\"network\": {\"nics\": []}}",
			 "network.nics: expected an array of 1 to");
	expect_net_error("{\"network\": {\"nics\": [1]}}",
			 "network.nics[0]: expected an object");
	expect_net_error("{\"network\": {\"nics\": [{\"name\": \"a\", "
			 "\"rate_gbps\": \"400\", \"fabric\": \"ib\"}]}}",
			 "network.nics[0].rate_gbps: expected the link rate");
	expect_net_error("{\"network\": {\"nics\": [{\"name\": \"a\", "
			 "\"rate_gbps\": 400, \"fabric\": \"omnipath\"}]}}",
			 "network.nics[0].fabric: expected \"ib\"");
	expect_net_error("{\"network\": {\"nics\": [{\"name\": \"a\", "
			 "\"rate_gbps\": 400}]}}",
			 "network.nics[0]: rate_gbps and fabric are required");
	expect_net_error("{\"network\": {\"nics\": [{\"name\": \"a\", "
			 "\"speed\": 400}]}}",
			 "network.nics[0]: unknown key 'speed'");
	expect_net_error("{\"network\": {\"latency_us\": 0, \"nics\": "
			 "[{\"name\": \"a\", \"rate_gbps\": 400, \"fabric\": "
			 "\"ib\"}]}}",
			 "network.latency_us: expected the hop latency");
}

static const char bench_out[] =
    "ring all-reduce over 3 nodes (TCP, float32 sums, 3 timed rounds "
    "after 1 warm-up):\n"
    "  rank  host                     address\n"
    "  0     node01                   10.231.10.2\n"
    "  1     node02                   10.231.10.3\n"
    "  2     node03                   10.231.10.4\n"
    "\n"
    "         bytes      time_us   algbw_GB/s   busbw_GB/s  check\n"
    "             8        120.0        0.000        0.000  ok\n"
    "       4194304       4120.0        1.018        1.357  ok\n";

static void test_bench(void **state)
{
	struct ds_bench b;
	struct herd_err err;
	char *bad;

	(void)state;
	herd_err_clear(&err);
	assert_int_equal(ds_bench_parse(bench_out, &b, &err), 0);
	assert_int_equal(b.nodes, 3);
	assert_int_equal(b.small_bytes, 8);
	assert_int_equal(b.large_bytes, 4194304);
	assert_true(b.hop_latency_us == 30.0); /* 120 / (2 x 2) */
	/* 1.357 GB/s x 4120 / (4120 - 120) */
	assert_true(b.bandwidth_Bps > 1.3977e9 && b.bandwidth_Bps < 1.3978e9);

	assert_int_equal(ds_bench_parse("one node: nothing crosses", &b, &err),
			 -1);
	assert_non_null(strstr(err.text, "printed no table"));
	assert_int_equal(
	    ds_bench_parse("ring all-reduce over 1 node (TCP)\n", &b, &err),
	    -1);
	assert_non_null(strstr(err.text, "one node"));
	bad = strdup(bench_out);
	assert_non_null(bad);
	memcpy(strstr(bad, "ok\n       4194304"), "XX", 2);
	assert_int_equal(ds_bench_parse(bad, &b, &err), -1);
	assert_non_null(strstr(err.text, "8 bytes gave wrong sums"));
	free(bad);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table),  cmocka_unit_test(test_monotone),
	    cmocka_unit_test(test_clamps), cmocka_unit_test(test_platform),
	    cmocka_unit_test(test_bench),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
