/* test_bind.c — the binding policy on a small hand-made topology (built
 * from a JSON summary, so every rule is visible here), the platform file
 * parser and checks, NIC lists, bind_env and bind_rank_cpu_set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "herd/bind.h"

/* Two packages, one NUMA node each; 4 cores of 2 PUs per NUMA node
 * (core c = PUs c and c+8).  GPU 0 (0000:10:00.0) on NUMA 0 behind switch
 * 0000:00:01.0 with mlx5_0; mlx5_1 under the same host bridge but another
 * root port; GPU 1 (0000:80:00.0) on NUMA 1; mlx5_2 on NUMA 1 under its
 * own host bridge. */
static const char *const SUMMARY =
    "{\"pus\": \"0-15\","
    " \"cores\": [\"0,8\", \"1,9\", \"2,10\", \"3,11\", \"4,12\", \"5,13\","
    "            \"6,14\", \"7,15\"],"
    " \"numa\": [{\"os_index\": 0, \"package\": 0, \"cpus\": \"0-3,8-11\"},"
    "          {\"os_index\": 1, \"package\": 1, \"cpus\": \"4-7,12-15\"}],"
    " \"packages\": [{\"os_index\": 0, \"cpus\": \"0-3,8-11\"},"
    "              {\"os_index\": 1, \"cpus\": \"4-7,12-15\"}],"
    " \"gpus\": ["
    "  {\"bus_id\": \"0000:10:00.0\", \"name\": \"\", \"cpus\": \"0-3,8-11\","
    "   \"numa\": \"0\", \"package\": 0,"
    "   \"pci_path\": [\"0000:00\", \"0000:00:01.0\"]},"
    "  {\"bus_id\": \"0000:80:00.0\", \"name\": \"\", \"cpus\": \"4-7,12-15\","
    "   \"numa\": \"1\", \"package\": 1, \"pci_path\": [\"0000:80\"]}],"
    " \"nics\": ["
    "  {\"name\": \"mlx5_0\", \"port\": 1, \"netdev\": \"ib0\","
    "   \"bus_id\": \"0000:11:00.0\", \"cpus\": \"0-3,8-11\", \"numa\": \"0\","
    "   \"package\": 0, \"pci_path\": [\"0000:00\", \"0000:00:01.0\"]},"
    "  {\"name\": \"mlx5_1\", \"port\": 2, \"netdev\": \"ib1\","
    "   \"bus_id\": \"0000:21:00.0\", \"cpus\": \"0-3,8-11\", \"numa\": \"0\","
    "   \"package\": 0, \"pci_path\": [\"0000:00\", \"0000:00:02.0\"]},"
    "  {\"name\": \"mlx5_2\", \"port\": 1, \"netdev\": \"ib2\","
    "   \"bus_id\": \"0000:c1:00.0\", \"cpus\": \"4-7,12-15\", \"numa\": "
    "\"1\","
    "   \"package\": 1, \"pci_path\": [\"0000:c0\"]}],"
    " \"netdevs\": [{\"name\": \"eno1\", \"bus_id\": \"\", \"cpus\": "
    "\"0-15\","
    "   \"numa\": \"0-1\", \"package\": -1, \"pci_path\": []}]}";

static struct topo *topo(void)
{
	json_error_t jerr;
	json_t *s = json_loads(SUMMARY, 0, &jerr);
	struct herd_err err;
	struct topo *t;

	if (!s)
		print_error("summary:%d:%d: %s\n", jerr.line, jerr.column,
			    jerr.text);
	assert_non_null(s);
	t = topo_from_summary(s, &err);
	if (!t)
		print_error("%s\n", err.text);
	assert_non_null(t);
	json_decref(s);
	return t;
}

static void opts(struct bind_opts *o, enum spec_bind_cpu cpu)
{
	memset(o, 0, sizeof(*o));
	o->gpu = SPEC_BIND_GPU_AUTO;
	o->nic = SPEC_BIND_NIC_AUTO;
	o->cpu = cpu;
}

/* Plans slots ranks and checks "gpu nic:port cpus threads" per rank. */
static void expect_plan(const struct topo *t, int slots,
			const struct bind_opts *o, const char *const *want)
{
	struct bind_rank r[16];
	struct herd_err err;

	assert_true(slots <= 16);
	herd_err_clear(&err);
	if (bind_plan(t, slots, o, r, &err) < 0)
		fail_msg("bind_plan: %s", err.text); /* r[] is not set */
	for (int i = 0; i < slots; i++) {
		char got[256];

		snprintf(got, sizeof(got), "%d %s:%d %s %d", r[i].gpu,
			 r[i].nic[0] ? r[i].nic : "-", r[i].nic_port,
			 r[i].cpus ? r[i].cpus : "-", r[i].threads);
		if (strcmp(got, want[i]))
			print_error("rank %d: got <%s>, want <%s>\n", i, got,
				    want[i]);
		assert_string_equal(got, want[i]);
		assert_int_equal(r[i].local_rank, i);
	}
	bind_ranks_release(r, (size_t)slots);
}

static void test_default_slots(void **state)
{
	struct topo *t = topo();

	(void)state;
	assert_int_equal(bind_default_slots(t), 2);
	t->n_gpus = 0; /* the arrays stay owned; topo_free frees by count */
	assert_int_equal(bind_default_slots(t), 1);
	t->n_gpus = 2;
	topo_free(t);
}

static void test_slots_equal_gpus(void **state)
{
	struct topo *t = topo();
	struct bind_opts o;
	/* GPU 0: mlx5_0 behind its switch (class 0) beats mlx5_1 (host
	 * bridge, class 1).  GPU 1: no shared bridge; mlx5_2 on its NUMA
	 * node (class 2).  numa: the whole NUMA node; threads = 4 cores. */
	const char *const numa[] = {"0 mlx5_0:1 0-3,8-11 4",
				    "1 mlx5_2:1 4-7,12-15 4"};

	(void)state;
	opts(&o, SPEC_BIND_CPU_NUMA);
	expect_plan(t, 2, &o, numa);
	topo_free(t);
}

static void test_more_ranks_than_gpus(void **state)
{
	struct topo *t = topo();
	struct bind_opts o;
	/* 4 ranks on 2 GPUs: 0,0,1,1; two ranks per NUMA node, 2 whole
	 * cores each with their hyperthreads. */
	const char *const cores[] = {
	    "0 mlx5_0:1 0-1,8-9 2", "0 mlx5_0:1 2-3,10-11 2",
	    "1 mlx5_2:1 4-5,12-13 2", "1 mlx5_2:1 6-7,14-15 2"};
	/* 6 ranks: GPU floor(i*2/6) = 0,0,0,1,1,1; 3 ranks on 4 cores:
	 * [0,1) [1,2) [2,4). */
	const char *const six[] = {
	    "0 mlx5_0:1 0,8 1",	 "0 mlx5_0:1 1,9 1",  "0 mlx5_0:1 2-3,10-11 2",
	    "1 mlx5_2:1 4,12 1", "1 mlx5_2:1 5,13 1", "1 mlx5_2:1 6-7,14-15 2"};
	/* 16 ranks, 8 per NUMA node of 4 cores: PUs split core by core
	 * (0,8,1,9,...): one PU each, hyperthreads after whole cores ran
	 * out; threads 1. */
	const char *const sixteen[] = {
	    "0 mlx5_0:1 0 1",  "0 mlx5_0:1 8 1",  "0 mlx5_0:1 1 1",
	    "0 mlx5_0:1 9 1",  "0 mlx5_0:1 2 1",  "0 mlx5_0:1 10 1",
	    "0 mlx5_0:1 3 1",  "0 mlx5_0:1 11 1", "1 mlx5_2:1 4 1",
	    "1 mlx5_2:1 12 1", "1 mlx5_2:1 5 1",  "1 mlx5_2:1 13 1",
	    "1 mlx5_2:1 6 1",  "1 mlx5_2:1 14 1", "1 mlx5_2:1 7 1",
	    "1 mlx5_2:1 15 1"};

	(void)state;
	opts(&o, SPEC_BIND_CPU_CORES);
	expect_plan(t, 4, &o, cores);
	expect_plan(t, 6, &o, six);
	expect_plan(t, 16, &o, sixteen);
	topo_free(t);
}

static void test_fewer_ranks_than_gpus(void **state)
{
	struct topo *t = topo();
	struct bind_opts o;
	const char *const one[] = {"0 mlx5_0:1 0-3,8-11 4"};

	(void)state;
	opts(&o, SPEC_BIND_CPU_CORES);
	expect_plan(t, 1, &o, one);
	topo_free(t);
}

static void test_cpu_only_and_none(void **state)
{
	struct topo *t = topo();
	struct bind_opts o;
	/* bind.gpu none: 2 ranks on 2 NUMA nodes by blocks; each gets the
	 * NIC on its NUMA node, spreading: NUMA 0 has mlx5_0 and mlx5_1
	 * at class 2: least used, then first by name. */
	const char *const cpu[] = {"-1 mlx5_0:1 0-3,8-11 4",
				   "-1 mlx5_2:1 4-7,12-15 4"};
	const char *const four[] = {
	    "-1 mlx5_0:1 0-1,8-9 2", "-1 mlx5_1:2 2-3,10-11 2",
	    "-1 mlx5_2:1 4-5,12-13 2", "-1 mlx5_2:1 6-7,14-15 2"};
	const char *const none[] = {"0 -:-1 - 0", "1 -:-1 - 0"};

	(void)state;
	opts(&o, SPEC_BIND_CPU_NUMA);
	o.gpu = SPEC_BIND_GPU_NONE;
	expect_plan(t, 2, &o, cpu);
	o.cpu = SPEC_BIND_CPU_CORES;
	expect_plan(t, 4, &o, four);
	opts(&o, SPEC_BIND_CPU_NONE);
	o.nic = SPEC_BIND_NIC_NONE;
	expect_plan(t, 2, &o, none);
	topo_free(t);
}

static void test_nic_list(void **state)
{
	struct topo *t = topo();
	struct bind_opts o;
	const char *const list[] = {"mlx5_2", "mlx5_1:1"};
	/* rank i gets list[i mod 2]; numa: ranks 0 and 1 share NUMA 0
	 * (2 cores' worth of threads each). */
	const char *const want[] = {"0 mlx5_2:1 0-3,8-11 2",
				    "0 mlx5_1:1 0-3,8-11 2",
				    "1 mlx5_2:1 4-7,12-15 4"};
	const char *const bad[] = {"mlx5_9"};
	const char *const badport[] = {"mlx5_0:x"};
	struct bind_rank r[3];
	struct herd_err err;

	(void)state;
	opts(&o, SPEC_BIND_CPU_NUMA);
	o.nic = SPEC_BIND_NIC_LIST;
	o.nic_list = list;
	o.n_nic_list = 2;
	expect_plan(t, 3, &o, want);
	o.nic_list = bad;
	o.n_nic_list = 1;
	assert_int_equal(bind_plan(t, 3, &o, r, &err), -1);
	assert_non_null(strstr(err.text, "bind.nic: NIC mlx5_9 is not on "
					 "this node (it has 3 RDMA NICs, "
					 "first mlx5_0)"));
	o.nic_list = badport;
	assert_int_equal(bind_plan(t, 3, &o, r, &err), -1);
	assert_non_null(strstr(err.text, "expected NAME or NAME:PORT"));
	o.n_nic_list = 0;
	assert_int_equal(bind_plan(t, 3, &o, r, &err), -1);
	assert_non_null(strstr(err.text, "the list is empty"));
	topo_free(t);
}

static void test_slots_bounds(void **state)
{
	struct topo *t = topo();
	struct bind_opts o;
	struct bind_rank r[1];
	struct herd_err err;

	(void)state;
	opts(&o, SPEC_BIND_CPU_NUMA);
	assert_int_equal(bind_plan(t, 0, &o, r, &err), -1);
	assert_non_null(strstr(err.text, "slots: 0 is not between 1"));
	assert_int_equal(bind_plan(t, BIND_SLOTS_MAX + 1, &o, r, &err), -1);
	topo_free(t);
}

static struct bind_platform *platform(const char *text, struct herd_err *err)
{
	herd_err_clear(err);
	return bind_platform_parse(text, strlen(text), "net.json", err);
}

static void expect_platform_error(const char *text, const char *want)
{
	struct herd_err err;
	struct bind_platform *p = platform(text, &err);

	if (p || !strstr(err.text, want))
		print_error("text <%s>: got <%s>, want <%s>\n", text,
			    p ? "(parsed)" : err.text, want);
	assert_null(p);
	assert_non_null(strstr(err.text, want));
}

static void test_platform_parse_errors(void **state)
{
	(void)state;
	expect_platform_error("{\"gpus\": [\n  {\"bus_id\": 1,}\n]}",
			      "net.json:2:");
	expect_platform_error("[]", "expected an object");
	expect_platform_error("{\"nics\": []}", "unknown key 'nics'");
	expect_platform_error("{\"gpus\": {}}", "gpus: expected an array");
	expect_platform_error("{\"gpus\": [3]}", "gpus[0]: expected an object");
	expect_platform_error("{\"gpus\": [{\"nic\": \"mlx5_0\"}]}",
			      "gpus[0]: bus_id is missing");
	expect_platform_error("{\"gpus\": [{\"bus_id\": \"zz:00.0\"}]}",
			      "gpus[0].bus_id: expected a PCI bus id");
	expect_platform_error("{\"gpus\": [{\"bus_id\": \"00:00.9\"}]}",
			      "gpus[0].bus_id: expected a PCI bus id");
	expect_platform_error("{\"gpus\": [{\"bus_id\": \"10:00.0\", "
			      "\"port\": 0}]}",
			      "gpus[0].port: expected an integer from 1");
	expect_platform_error("{\"gpus\": [{\"bus_id\": \"10:00.0\", "
			      "\"cpus\": \"a-b\"}]}",
			      "gpus[0].cpus: expected a cpu list");
	expect_platform_error("{\"gpus\": [{\"bus_id\": \"10:00.0\", "
			      "\"nic\": \"\"}]}",
			      "gpus[0].nic: expected a device name");
	expect_platform_error("{\"gpus\": [{\"bus_id\": \"10:00.0\", "
			      "\"hca\": \"x\"}]}",
			      "gpus[0]: unknown key 'hca'");
	expect_platform_error("{\"gpus\": [{\"bus_id\": \"10:00.0\"}, "
			      "{\"bus_id\": \"0000:10:00.0\"}]}",
			      "gpus[1]: GPU 0000:10:00.0 is already listed as "
			      "gpus[0]");
	expect_platform_error("{\"gpus\": [], \"gpus\": []}",
			      "duplicate object key");
	/* The "network" section (herd render --tune) is checked here too. */
	expect_platform_error("{\"network\": {\"nics\": [{\"name\": "
			      "\"mlx5_0\", \"rate_gbps\": 0, \"fabric\": "
			      "\"ib\"}]}}",
			      "network.nics[0].rate_gbps: expected");
}

/* A file with only a network section binds nothing and is fine. */
static void test_platform_network_only(void **state)
{
	struct herd_err err;
	struct bind_platform *p =
	    platform("{\"network\": {\"nics\": [{\"name\": \"mlx5_0\", "
		     "\"rate_gbps\": 400, \"fabric\": \"ib\"}]}}",
		     &err);

	(void)state;
	if (!p)
		print_error("%s\n", err.text);
	assert_non_null(p);
	bind_platform_free(p);
}

/* Plans 2 ranks with platform text, which must fail with want. */
static void expect_platform_mismatch(const char *text, const char *want)
{
	struct topo *t = topo();
	struct herd_err err;
	struct bind_platform *p = platform(text, &err);
	struct bind_opts o;
	struct bind_rank r[2];

	assert_non_null(p);
	opts(&o, SPEC_BIND_CPU_NUMA);
	o.platform = p;
	assert_int_equal(bind_plan(t, 2, &o, r, &err), -1);
	if (!strstr(err.text, want))
		print_error("got <%s>, want <%s>\n", err.text, want);
	assert_non_null(strstr(err.text, want));
	bind_platform_free(p);
	topo_free(t);
}

static void test_platform(void **state)
{
	struct topo *t = topo();
	struct herd_err err;
	struct bind_platform *p = platform(
	    "{\"gpus\": [{\"bus_id\": \"80:00.0\", \"nic\": \"mlx5_1\","
	    " \"netdev\": \"eno1\", \"port\": 1, \"cpus\": \"4-5\"}]}",
	    &err);
	struct bind_opts o;
	struct bind_rank r[4];
	/* GPU 1's ranks take mlx5_1 port 1 on eno1 and split 4-5. */
	const char *const want[] = {"0 mlx5_0:1 0-1,8-9 2",
				    "0 mlx5_0:1 2-3,10-11 2", "1 mlx5_1:1 4 1",
				    "1 mlx5_1:1 5 1"};

	(void)state;
	assert_non_null(p);
	opts(&o, SPEC_BIND_CPU_CORES);
	o.platform = p;
	expect_plan(t, 4, &o, want);
	assert_int_equal(bind_plan(t, 4, &o, r, &err), 0);
	assert_string_equal(r[3].netdev, "eno1");
	assert_string_equal(r[0].netdev, "ib0");
	bind_ranks_release(r, 4);
	bind_platform_free(p);
	topo_free(t);

	expect_platform_mismatch("{\"gpus\": [{\"bus_id\": \"99:00.0\"}]}",
				 "net.json: gpus[0]: GPU 0000:99:00.0 is not "
				 "on this node (it has 2 GPUs, first "
				 "0000:10:00.0)");
	expect_platform_mismatch("{\"gpus\": [{\"bus_id\": \"10:00.0\","
				 " \"nic\": \"mlx4_0\"}]}",
				 "gpus[0]: NIC mlx4_0 is not on this node");
	expect_platform_mismatch("{\"gpus\": [{\"bus_id\": \"10:00.0\","
				 " \"netdev\": \"ib7\"}]}",
				 "gpus[0]: netdev ib7 is not on this node");
	expect_platform_mismatch("{\"gpus\": [{\"bus_id\": \"10:00.0\","
				 " \"cpus\": \"0-16\"}]}",
				 "gpus[0]: cpus name CPUs this node does not "
				 "have (it has 0-15)");
}

static void test_env_and_cpu_set(void **state)
{
	struct topo *t = topo();
	struct bind_opts o;
	struct bind_rank r[2];
	struct bind_env_var env[BIND_ENV_MAX];
	struct herd_err err;
	cpu_set_t set;
	size_t n;

	(void)state;
	opts(&o, SPEC_BIND_CPU_CORES);
	assert_int_equal(bind_plan(t, 2, &o, r, &err), 0);
	n = bind_env(&r[1], env);
	assert_int_equal(n, 4);
	assert_string_equal(env[0].key, "CUDA_VISIBLE_DEVICES");
	assert_string_equal(env[0].value, "1");
	assert_string_equal(env[1].key, "CUDA_DEVICE_ORDER");
	assert_string_equal(env[1].value, "PCI_BUS_ID");
	assert_string_equal(env[2].key, "NCCL_IB_HCA");
	assert_string_equal(env[2].value, "=mlx5_2:1");
	assert_string_equal(env[3].key, "OMP_NUM_THREADS");
	assert_string_equal(env[3].value, "4");
	assert_int_equal(bind_rank_cpu_set(&r[1], &set), 0);
	assert_int_equal(CPU_COUNT(&set), 8);
	assert_true(CPU_ISSET(4, &set) && CPU_ISSET(15, &set));
	assert_false(CPU_ISSET(3, &set));
	bind_ranks_release(r, 2);

	opts(&o, SPEC_BIND_CPU_NONE);
	o.gpu = SPEC_BIND_GPU_NONE;
	o.nic = SPEC_BIND_NIC_NONE;
	assert_int_equal(bind_plan(t, 1, &o, r, &err), 0);
	assert_int_equal(bind_env(&r[0], env), 0);
	assert_int_equal(bind_rank_cpu_set(&r[0], &set), -1);
	bind_ranks_release(r, 1);
	topo_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_default_slots),
	    cmocka_unit_test(test_platform_network_only),
	    cmocka_unit_test(test_slots_equal_gpus),
	    cmocka_unit_test(test_more_ranks_than_gpus),
	    cmocka_unit_test(test_fewer_ranks_than_gpus),
	    cmocka_unit_test(test_cpu_only_and_none),
	    cmocka_unit_test(test_nic_list),
	    cmocka_unit_test(test_slots_bounds),
	    cmocka_unit_test(test_platform_parse_errors),
	    cmocka_unit_test(test_platform),
	    cmocka_unit_test(test_env_and_cpu_set),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
