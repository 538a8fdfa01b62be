/* test_check.c — the agent's checks of the health gate (agent/check.c,
 * gpu_check in agent/nvml.c): directories and free space, the RDMA ports
 * of a fake sysfs tree, MASTER_ADDR's interface, the site script's verdict
 * and last line, the GPUs through the fake NVML.  Linked with the agent's
 * own objects but main.o (agent_send is tests/unit/agent_stub.c's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/agent.h"
#include "agent/check.h"
#include "agent/measure.h"
#include "tests/unit/agent_stub.h"

#define FAKE_NVML "build/tests/libnvidia-ml.so.1"

static char dir[256];

static void put(const char *rel, const char *text)
{
	char path[512], *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	for (slash = strchr(path + strlen(dir) + 1, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(path, 0700);
		*slash = '/';
	}
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static const char *str(json_t *e, const char *key)
{
	const char *v = json_string_value(json_object_get(e, key));

	return v ? v : "";
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/herd-test-check-XXXXXX");
	assert_non_null(mkdtemp(dir));
	return 0;
}

static int teardown(void **state)
{
	char cmd[300];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static void test_dir(void **state)
{
	char path[512], want[600];
	json_t *e;

	(void)state;
	e = check_dir("workdir", dir, 1024, false);
	assert_string_equal(str(e, "status"), "ok");
	assert_non_null(strstr(str(e, "value"), " free"));
	json_decref(e);

	/* More than any disk has. */
	e = check_dir("workdir", dir, 1LL << 62, false);
	assert_string_equal(str(e, "status"), "fail");
	assert_non_null(strstr(str(e, "reason"), "free, health.min_free is "
						 "4096.0 PiB"));
	json_decref(e);

	snprintf(path, sizeof(path), "%s/none", dir);
	e = check_dir("workdir", path, 0, false);
	assert_string_equal(str(e, "status"), "fail");
	snprintf(want, sizeof(want), "workdir %s: No such file or directory",
		 path);
	assert_string_equal(str(e, "reason"), want);
	json_decref(e);

	/* A checkpoint directory the job makes: its parent is judged. */
	snprintf(path, sizeof(path), "%s/ckpt/run1", dir);
	e = check_dir("checkpoint", path, 0, true);
	assert_string_equal(str(e, "status"), "ok");
	snprintf(want, sizeof(want), " free in %s", dir);
	assert_non_null(strstr(str(e, "value"), want));
	json_decref(e);

	put("file", "x");
	snprintf(path, sizeof(path), "%s/file", dir);
	e = check_dir("checkpoint", path, 0, true);
	assert_string_equal(str(e, "status"), "fail");
	snprintf(want, sizeof(want), "checkpoint %s is not a directory", path);
	assert_string_equal(str(e, "reason"), want);
	json_decref(e);
}

static void test_rdma(void **state)
{
	json_t *checks = json_array(), *e;

	(void)state;
	/* No tree: skipped. */
	check_rdma(dir, checks);
	assert_int_equal(json_array_size(checks), 1);
	e = json_array_get(checks, 0);
	assert_string_equal(str(e, "status"), "skipped");
	assert_string_equal(str(e, "reason"), "no RDMA devices");
	json_array_clear(checks);

	put("class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
	put("class/infiniband/mlx5_0/ports/1/rate", "100 Gb/sec (4X EDR)\n");
	put("class/infiniband/mlx5_1/ports/1/state", "1: DOWN\n");
	put("class/infiniband/mlx5_1/ports/1/rate", "10 Gb/sec (4X SDR)\n");
	put("class/infiniband/mlx5_1/ports/2/rate", "25 Gb/sec (1X EDR)\n");
	check_rdma(dir, checks);
	assert_int_equal(json_array_size(checks), 3);
	e = json_array_get(checks, 0);
	assert_string_equal(str(e, "status"), "ok");
	assert_string_equal(str(e, "port"), "mlx5_0/1");
	assert_true(json_number_value(json_object_get(e, "rate")) == 100.0);
	assert_string_equal(str(e, "value"), "100 Gb/sec (4X EDR)");
	e = json_array_get(checks, 1);
	assert_string_equal(str(e, "status"), "fail");
	assert_string_equal(str(e, "reason"),
			    "RDMA port mlx5_1/1 is 1: DOWN, not ACTIVE");
	assert_null(json_object_get(e, "rate"));
	e = json_array_get(checks, 2); /* no state file */
	assert_string_equal(str(e, "reason"),
			    "RDMA port mlx5_1/2 is unreadable, not ACTIVE");
	json_decref(checks);
}

static void test_net(void **state)
{
	json_t *e;

	(void)state;
	e = check_net(dir, "127.0.0.1");
	assert_string_equal(str(e, "status"), "ok");
	assert_string_equal(str(e, "value"), "lo");
	json_decref(e);

	put("class/net/lo/operstate", "down\n");
	e = check_net(dir, "127.0.0.1");
	assert_string_equal(str(e, "status"), "fail");
	assert_string_equal(str(e, "reason"),
			    "lo (MASTER_ADDR's network) is down");
	json_decref(e);

	e = check_net(dir, "203.0.113.77"); /* TEST-NET-3 */
	assert_string_equal(str(e, "status"), "skipped");
	assert_string_equal(str(e, "reason"),
			    "no interface on MASTER_ADDR 203.0.113.77's network");
	json_decref(e);
	e = check_net(dir, NULL);
	assert_string_equal(str(e, "status"), "skipped");
	json_decref(e);
}

static void test_last_line(void **state)
{
	static const struct {
		const char *out, *want;
	} cases[] = {
		{"", ""},
		{"\n\n  \n", ""},
		{"one\ntwo\n", "two"},
		{"one\ntwo\n\n \t\n", "two"},
		{"  padded  \r\n", "padded"},
		{"no newline", "no newline"},
		{"bell\a and \xc3\xa9\n", "bell? and ??"},
	};
	char line[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		check_last_line(cases[i].out, strlen(cases[i].out), line,
				sizeof(line));
		assert_string_equal(line, cases[i].want);
	}
	/* Cut to the buffer. */
	check_last_line("abcdefgh\n", 9, line, 5);
	assert_string_equal(line, "abcd");
}

static void test_script_entry(void **state)
{
	static const char out[] = "checking\nscratch is full\n";
	json_t *e;

	(void)state;
	e = check_script_entry(0, false, 1000, out, sizeof(out) - 1);
	assert_string_equal(str(e, "status"), "ok");
	assert_string_equal(str(e, "value"), "scratch is full");
	json_decref(e);
	e = check_script_entry(3 << 8, false, 1000, out, sizeof(out) - 1);
	assert_string_equal(str(e, "status"), "fail");
	assert_string_equal(str(e, "reason"), "scratch is full");
	json_decref(e);
	e = check_script_entry(3 << 8, false, 1000, "", 0);
	assert_string_equal(str(e, "reason"), "check_command exited 3");
	json_decref(e);
	e = check_script_entry(9, false, 1000, "", 0); /* SIGKILL */
	assert_string_equal(str(e, "reason"),
			    "check_command killed by signal 9");
	json_decref(e);
	e = check_script_entry(9, true, 1500, out, sizeof(out) - 1);
	assert_string_equal(str(e, "reason"),
			    "check_command timed out after 1500ms: scratch "
			    "is full");
	json_decref(e);
}

static void test_gpus(void **state)
{
	char path[512];
	struct gpu *g;
	json_t *e;

	(void)state;
	g = gpu_open("libherd-test-no-such-nvml.so.1");
	e = gpu_check(g, -1);
	assert_string_equal(str(e, "status"), "skipped");
	assert_non_null(strstr(str(e, "reason"), "no NVML"));
	json_decref(e);
	e = gpu_check(g, 8); /* the topology shows GPUs: NVML must work */
	assert_string_equal(str(e, "status"), "fail");
	assert_non_null(strstr(str(e, "reason"), "8 GPUs expected, but no "
						 "NVML"));
	json_decref(e);
	gpu_close(g);

	snprintf(path, sizeof(path), "%s/nvml", dir);
	put("nvml", "count 4\n2 ecc_uncorrected 5\n3 retired_pending 1\n"
		    "0 ecc_uncorrected 0\n1 retired_pending 0\n");
	setenv("FAKE_NVML_VALUES", path, 1);
	g = gpu_open(FAKE_NVML);
	assert_null(gpu_error(g));
	e = gpu_check(g, 8);
	assert_string_equal(str(e, "status"), "fail");
	assert_string_equal(str(e, "reason"),
			    "4 GPUs visible, 8 expected; GPU 2: 5 uncorrectable "
			    "ECC errors; GPU 3: retired pages pending (reset "
			    "it)");
	assert_string_equal(str(e, "value"), "4 GPUs");
	json_decref(e);
	gpu_close(g);

	put("nvml", "count 2\n0 ecc_uncorrected 0\n");
	g = gpu_open(FAKE_NVML);
	e = gpu_check(g, 2);
	assert_string_equal(str(e, "status"), "ok");
	json_decref(e);
	gpu_close(g);
	unsetenv("FAKE_NVML_VALUES");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rdma, setup, teardown),
		cmocka_unit_test_setup_teardown(test_net, setup, teardown),
		cmocka_unit_test(test_last_line),
		cmocka_unit_test(test_script_entry),
		cmocka_unit_test_setup_teardown(test_gpus, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
