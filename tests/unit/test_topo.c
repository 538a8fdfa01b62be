/* test_topo.c — topology from the real hwloc exports of
 * tests/integration/data/plan/topologies: GPUs (PCI and NVML, never
 * counted twice), NICs with port and netdev, NUMA nodes, cores; the JSON
 * summary round trip and its checks; load errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "herd/topo.h"

/* The tests run from the repository root (make unit). */
#define TOPO_DIR "tests/integration/data/plan/topologies/"

static struct topo *load(const char *name)
{
	char path[256];
	struct herd_err err;
	struct topo *t;

	snprintf(path, sizeof(path), TOPO_DIR "%s.xml", name);
	herd_err_clear(&err);
	t = topo_load(path, 0, &err);
	if (!t)
		print_error("%s: %s\n", path, err.text);
	assert_non_null(t);
	return t;
}

static void expect_list(hwloc_const_bitmap_t set, const char *want)
{
	char *got = topo_cpulist(set);

	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void test_jureca(void **state)
{
	struct topo *t = load("jureca-dc-gpu");
	const char *gpus[] = {"0000:03:00.0", "0000:44:00.0", "0000:84:00.0",
			      "0000:c4:00.0"};

	(void)state;
	/* The ASPEED VGA 62:00.0 is not a GPU. */
	assert_int_equal(t->n_gpus, 4);
	for (size_t i = 0; i < 4; i++)
		assert_string_equal(t->gpus[i].bus_id, gpus[i]);
	assert_int_equal(t->n_nics, 4);
	assert_string_equal(t->nics[1].name, "mlx5_1");
	assert_string_equal(t->nics[1].netdev, "ib1");
	assert_string_equal(t->nics[1].bus_id, "0000:04:00.0");
	assert_int_equal(t->nics[1].port, 1);
	assert_int_equal(t->n_numa, 8);
	assert_int_equal(t->n_packages, 2);
	assert_int_equal(t->n_cores, 128);
	expect_list(t->pus, "0-255");
	expect_list(t->cores[0], "0,128");
	expect_list(t->numa[3].cpuset, "48-63,176-191");
	/* GPU 0 and mlx5_1 hang under NUMA 3, behind one switch: their
	 * PCI paths share the host bridge and more. */
	expect_list(t->gpus[0].loc.nodeset, "3");
	assert_int_equal(t->gpus[0].loc.package, 0);
	assert_true(t->gpus[0].loc.n_path >= 2);
	assert_string_equal(t->gpus[0].loc.path[1], t->nics[1].loc.path[1]);
	/* Ethernet netdevs, not those of the RDMA NICs. */
	assert_true(t->n_netdevs >= 2);
	for (size_t i = 0; i < t->n_netdevs; i++)
		assert_null(strstr(t->netdevs[i].name, "ib"));
	topo_free(t);
}

static void test_dgx2_nvml_once(void **state)
{
	struct topo *t = load("nvidia-dgx2");

	(void)state;
	/* nvml0..15 under their PCI devices: 16, not 32; NVSwitches are
	 * not GPUs. */
	assert_int_equal(t->n_gpus, 16);
	assert_string_equal(t->gpus[0].bus_id, "0000:34:00.0");
	assert_string_equal(t->gpus[0].name, "nvml0");
	assert_string_equal(t->gpus[15].bus_id, "0000:e7:00.0");
	assert_string_equal(t->gpus[15].name, "nvml15");
	assert_int_equal(t->n_nics, 0);
	expect_list(t->pus, "0-1,24-25");
	assert_int_equal(t->n_cores, 4);
	expect_list(t->gpus[8].loc.nodeset, "1");
	topo_free(t);
}

static void test_jusuf_and_juropa3(void **state)
{
	struct topo *t = load("jusuf-gpu");

	(void)state;
	assert_int_equal(t->n_gpus, 1);
	assert_string_equal(t->gpus[0].bus_id, "0000:01:00.0");
	expect_list(t->gpus[0].loc.nodeset, "3");
	assert_int_equal(t->n_nics, 2);
	assert_string_equal(t->nics[0].name, "mlx5_0");
	assert_string_equal(t->nics[0].netdev, "enp33s0f0");
	assert_string_equal(t->nics[1].name, "mlx5_1");
	assert_string_equal(t->nics[1].netdev, "ib0");
	expect_list(t->nics[1].loc.nodeset, "2");
	topo_free(t);

	t = load("juropa3-gpu");
	assert_int_equal(t->n_gpus, 2);
	assert_int_equal(t->n_nics, 1);
	assert_string_equal(t->nics[0].name, "mlx4_0");
	/* Host bridges on the Machine: no package. */
	assert_int_equal(t->gpus[1].loc.package, -1);
	expect_list(t->gpus[1].loc.nodeset, "0-1");
	topo_free(t);
}

static void test_no_io(void **state)
{
	struct herd_err err;
	struct topo *t =
	    topo_load(TOPO_DIR "jureca-dc-gpu.xml", TOPO_NO_IO, &err);

	(void)state;
	assert_non_null(t);
	assert_int_equal(t->n_gpus, 0);
	assert_int_equal(t->n_nics, 0);
	assert_int_equal(t->n_cores, 128);
	topo_free(t);
	t = topo_load(TOPO_DIR "jureca-dc-gpu.xml", TOPO_IO_ALL, &err);
	assert_non_null(t);
	assert_int_equal(t->n_gpus, 4);
	topo_free(t);
}

static void test_summary_round_trip(void **state)
{
	const char *names[] = {"jureca-dc-gpu", "jusuf-gpu", "juropa3-gpu",
			       "nvidia-dgx2", "cpu-only"};

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct topo *t = load(names[i]), *u;
		json_t *s = topo_summary(t), *s2;
		struct herd_err err;
		char *text;

		assert_non_null(s);
		/* Small enough for a HELLO frame. */
		text = json_dumps(s, JSON_COMPACT);
		assert_non_null(text);
		assert_true(strlen(text) < 64 * 1024);
		free(text);
		u = topo_from_summary(s, &err);
		if (!u)
			print_error("%s: %s\n", names[i], err.text);
		assert_non_null(u);
		s2 = topo_summary(u);
		assert_true(json_equal(s, s2));
		assert_int_equal(u->n_gpus, t->n_gpus);
		json_decref(s);
		json_decref(s2);
		topo_free(t);
		topo_free(u);
	}
}

/* The summary of jusuf with one change made by edit; from_summary must
 * fail with want in the message. */
static void expect_summary_error(void (*edit)(json_t *), const char *want)
{
	struct topo *t = load("jusuf-gpu");
	json_t *s = topo_summary(t);
	struct herd_err err;
	struct topo *u;

	edit(s);
	herd_err_clear(&err);
	u = topo_from_summary(s, &err);
	if (u || !strstr(err.text, want))
		print_error("got <%s>, want <%s>\n", err.text, want);
	assert_null(u);
	assert_non_null(strstr(err.text, want));
	json_decref(s);
	topo_free(t);
}

static void no_pus(json_t *s)
{
	json_object_set_new(s, "pus", json_string(""));
}

static void bad_gpu_bus(json_t *s)
{
	json_object_set_new(json_array_get(json_object_get(s, "gpus"), 0),
			    "bus_id", json_integer(3));
}

static void bad_cpus(json_t *s)
{
	json_object_set_new(json_array_get(json_object_get(s, "nics"), 1),
			    "cpus", json_string("0-x"));
}

static void huge_cpu(json_t *s)
{
	json_array_set_new(json_object_get(s, "cores"), 0,
			   json_string("99999999"));
}

static void bad_port(json_t *s)
{
	json_object_set_new(json_array_get(json_object_get(s, "nics"), 0),
			    "port", json_integer(0));
}

static void long_name(json_t *s)
{
	char name[200];

	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	json_object_set_new(json_array_get(json_object_get(s, "nics"), 0),
			    "name", json_string(name));
}

static void no_numa(json_t *s)
{
	json_object_del(s, "numa");
}

static void long_path(json_t *s)
{
	json_t *p = json_array();

	for (int i = 0; i <= TOPO_PCI_DEPTH_MAX; i++)
		json_array_append_new(p, json_string("0000:00"));
	json_object_set_new(json_array_get(json_object_get(s, "gpus"), 0),
			    "pci_path", p);
}

static void test_summary_errors(void **state)
{
	struct herd_err err;

	(void)state;
	expect_summary_error(no_pus, "pus: expected at least one PU");
	expect_summary_error(bad_gpu_bus, "gpus[0].bus_id: expected a string");
	expect_summary_error(bad_cpus, "nics[1].cpus: expected a cpu list");
	expect_summary_error(huge_cpu, "cores[0].pus: expected a cpu list");
	expect_summary_error(bad_port, "nics[0].port: expected an integer");
	expect_summary_error(long_name, "nics[0].name: expected a string");
	expect_summary_error(no_numa, "numa: expected an array");
	expect_summary_error(long_path, "gpus[0].pci_path: expected an array");
	assert_null(topo_from_summary(json_null(), &err));
	assert_non_null(strstr(err.text, "expected an object"));
}

static void test_load_errors(void **state)
{
	struct herd_err err;
	char path[] = "/tmp/test_topo_XXXXXX";
	int fd;

	(void)state;
	assert_null(topo_load("/nonexistent/topo.xml", 0, &err));
	assert_non_null(strstr(err.text, "cannot open topology "
					 "/nonexistent/topo.xml"));
	assert_null(topo_load("/tmp", 0, &err));
	assert_non_null(strstr(err.text, "not a regular file"));
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "<topology><object", 17), 17);
	close(fd);
	assert_null(topo_load(path, 0, &err));
	assert_non_null(strstr(err.text, "not an hwloc XML topology"));
	unlink(path);
}

static void test_live(void **state)
{
	struct herd_err err;
	struct topo *t = topo_load(NULL, 0, &err);

	(void)state;
	/* This machine: at least one PU, core and NUMA node. */
	assert_non_null(t);
	assert_true(t->n_cores >= 1);
	assert_true(t->n_numa >= 1);
	assert_false(hwloc_bitmap_iszero(t->pus));
	topo_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_jureca),
	    cmocka_unit_test(test_dgx2_nvml_once),
	    cmocka_unit_test(test_jusuf_and_juropa3),
	    cmocka_unit_test(test_no_io),
	    cmocka_unit_test(test_summary_round_trip),
	    cmocka_unit_test(test_summary_errors),
	    cmocka_unit_test(test_load_errors),
	    cmocka_unit_test(test_live),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
