/* test_metrics.c — the agent's sampler (agent/measure.c, agent/nvml.c),
 * linked with the agent's own objects but main.o (agent_send is
 * tests/unit/agent_stub.c's recorder): the /proc/net/dev and RDMA sysfs
 * readers on files of a temporary directory, the $HERD_METRICS tail
 * (partial, over-long and bad lines), the shipped metrics.patterns
 * (examples/spec/metrics-*.yaml) on real lines of the programs they are
 * for, NVML through the fake library the tests build
 * (build/tests/libnvidia-ml.so.1), and a whole METRICS body against the
 * wire contract (proto_frame_check). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/agent.h"
#include "agent/measure.h"
#include "herd/spec.h"
#include "tests/unit/agent_stub.h"

#define FAKE_NVML "build/tests/libnvidia-ml.so.1"

static char tmpdir[256];

static int setup_dir(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/herd-test-metrics-XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	return 0;
}

static int teardown_dir(void **state)
{
	char cmd[512];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void append_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "a");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void mkdirs(const char *path)
{
	char cmd[1100];

	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", path);
	assert_int_equal(system(cmd), 0);
}

static json_int_t int_at(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	if (!json_is_integer(v))
		fail_msg("key %s: not an integer in %s", key,
			 json_dumps(obj, JSON_COMPACT));
	return json_integer_value(v);
}

/* ---- /proc/net/dev ---------------------------------------------------------- */

static void test_net(void **state)
{
	char path[512];
	json_t *arr = json_array(), *e;

	(void)state;
	snprintf(path, sizeof(path), "%s/dev", tmpdir);
	/* Real layout: two header lines; a long name touches its colon. */
	write_file(path,
		   "Inter-|   Receive                                                |  Transmit\n"
		   " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"
		   "    lo:  123456     100    0    0    0     0          0         0   123456     100    0    0    0     0       0          0\n"
		   "  eth0: 1000 10 1 2 0 0 0 0 2000 20 3 4 0 0 0 0\n"
		   "veth0123456789a:5 6 7 8 0 0 0 0 9 10 11 12 0 0 0 0\n"
		   "  bad0: 1 2 3\n");
	assert_int_equal(metrics_read_net(path, arr), 0);
	assert_int_equal(json_array_size(arr), 2);
	e = json_array_get(arr, 0);
	assert_string_equal(json_string_value(json_object_get(e, "dev")), "eth0");
	assert_int_equal(int_at(e, "rx_bytes"), 1000);
	assert_int_equal(int_at(e, "rx_packets"), 10);
	assert_int_equal(int_at(e, "rx_errors"), 1);
	assert_int_equal(int_at(e, "rx_drops"), 2);
	assert_int_equal(int_at(e, "tx_bytes"), 2000);
	assert_int_equal(int_at(e, "tx_packets"), 20);
	assert_int_equal(int_at(e, "tx_errors"), 3);
	assert_int_equal(int_at(e, "tx_drops"), 4);
	e = json_array_get(arr, 1);
	assert_string_equal(json_string_value(json_object_get(e, "dev")),
			    "veth0123456789a");
	assert_int_equal(int_at(e, "rx_bytes"), 5);
	assert_int_equal(int_at(e, "tx_drops"), 12);
	json_decref(arr);

	arr = json_array();
	snprintf(path, sizeof(path), "%s/none", tmpdir);
	assert_int_equal(metrics_read_net(path, arr), -1);
	/* The machine's own file reads (whatever it holds). */
	assert_int_equal(metrics_read_net("/proc/net/dev", arr), 0);
	json_decref(arr);
}

/* ---- /sys/class/infiniband -------------------------------------------------- */

static void counters(const char *root, const char *dev, const char *port,
		     const char *rcv, const char *xmit, const char *downed,
		     const char *sym, const char *rcv_err)
{
	char dir[1024], path[1100];
	const char *names[] = {"port_rcv_data", "port_xmit_data", "link_downed",
			       "symbol_error", "port_rcv_errors"};
	const char *vals[] = {rcv, xmit, downed, sym, rcv_err};

	snprintf(dir, sizeof(dir), "%s/%s/ports/%s/counters", root, dev, port);
	mkdirs(dir);
	for (int i = 0; i < 5; i++) {
		if (!vals[i])
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		write_file(path, vals[i]);
	}
}

static void test_rdma(void **state)
{
	char root[512], path[600];
	json_t *arr = json_array(), *e;

	(void)state;
	snprintf(root, sizeof(root), "%s/infiniband", tmpdir);
	/* No such directory: a node without RDMA. */
	assert_int_equal(metrics_read_rdma(root, arr), 0);
	assert_int_equal(json_array_size(arr), 0);

	counters(root, "mlx5_1", "1", "7\n", "8\n", "0\n", "0\n", "0\n");
	counters(root, "mlx5_0", "2", "1\n", "2\n", "0\n", "0\n", "0\n");
	counters(root, "mlx5_0", "1", "1000\n", "2500\n", "1\n", "2\n",
		 "3\n");
	/* A driver that lacks some counters: 0. */
	counters(root, "mlx4_0", "1", "10\n", NULL, NULL, "x\n", NULL);
	/* Not a port number: skipped. */
	snprintf(path, sizeof(path), "%s/mlx5_0/ports/bogus", root);
	mkdirs(path);
	assert_int_equal(metrics_read_rdma(root, arr), 0);
	assert_int_equal(json_array_size(arr), 4);
	/* In name order: mlx4_0/1, mlx5_0/1, mlx5_0/2, mlx5_1/1. */
	e = json_array_get(arr, 0);
	assert_string_equal(json_string_value(json_object_get(e, "dev")),
			    "mlx4_0");
	assert_int_equal(int_at(e, "rx_bytes"), 40);
	assert_int_equal(int_at(e, "tx_bytes"), 0);
	assert_int_equal(int_at(e, "symbol_error"), 0);
	e = json_array_get(arr, 1);
	assert_string_equal(json_string_value(json_object_get(e, "dev")),
			    "mlx5_0");
	assert_int_equal(int_at(e, "port"), 1);
	/* port_*_data count 4-byte words. */
	assert_int_equal(int_at(e, "rx_bytes"), 4000);
	assert_int_equal(int_at(e, "tx_bytes"), 10000);
	assert_int_equal(int_at(e, "link_downed"), 1);
	assert_int_equal(int_at(e, "symbol_error"), 2);
	assert_int_equal(int_at(e, "rcv_errors"), 3);
	assert_int_equal(int_at(json_array_get(arr, 2), "port"), 2);
	assert_string_equal(
		json_string_value(json_object_get(json_array_get(arr, 3), "dev")),
		"mlx5_1");
	json_decref(arr);
}

/* ---- $HERD_METRICS lines ----------------------------------------------------- */

static double val(const struct train *t, const char *name)
{
	for (int i = 0; i < t->n_vals; i++)
		if (!strcmp(t->vals[i].name, name))
			return t->vals[i].v;
	fail_msg("no value %s", name);
	return 0;
}

static bool has(const struct train *t, const char *name)
{
	for (int i = 0; i < t->n_vals; i++)
		if (!strcmp(t->vals[i].name, name))
			return true;
	return false;
}

static void feed(struct train *t, const char *text)
{
	train_feed(t, text, strlen(text));
}

static void test_train_feed(void **state)
{
	static struct train t;
	char big[METRICS_LINE_MAX + 100];
	const char *a = "{\"step\": 1, \"loss\": 2.5, \"tokens\": 1000}\n"
			"{\"step\": 2, \"lo";
	const char *b = "ss\": 2.25, \"tokens\": 1000, \"samples\": 4}\r\n";

	(void)state;
	memset(&t, 0, sizeof(t));
	t.fd = -1;
	/* A line split over two reads is one record. */
	train_feed(&t, a, strlen(a));
	assert_int_equal(t.records, 1);
	assert_true(val(&t, "loss") == 2.5);
	train_feed(&t, b, strlen(b));
	assert_int_equal(t.records, 2);
	assert_int_equal(t.bad, 0);
	assert_true(val(&t, "step") == 2);
	assert_true(val(&t, "loss") == 2.25);
	/* tokens and samples add up; the rest is the latest. */
	assert_true(val(&t, "tokens") == 2000);
	assert_true(val(&t, "samples") == 4);

	/* Byte by byte. */
	for (const char *p = "{\"step\":3}\n"; *p; p++)
		train_feed(&t, p, 1);
	assert_int_equal(t.records, 3);
	assert_true(val(&t, "step") == 3);

	/* Bad lines are counted and skipped; empty lines are nothing. */
	feed(&t, "not json\n[1,2]\n\n{\"step\":\n");
	assert_int_equal(t.bad, 3);
	assert_int_equal(t.records, 3);

	/* A line over 4 KiB is skipped whole, in pieces or not; the next
	 * line counts. */
	memset(big, 'x', sizeof(big));
	big[0] = '{';
	train_feed(&t, big, 3000);
	train_feed(&t, big, 3000);
	feed(&t, "}\n{\"step\": 4}\n");
	assert_int_equal(t.bad, 4);
	assert_int_equal(t.records, 4);
	assert_true(val(&t, "step") == 4);

	/* Non-numbers, booleans and names that are not metric names are
	 * ignored. */
	feed(&t, "{\"phase\": \"eval\", \"ok\": true, \"9x\": 1, \"a b\": 2, "
		 "\"lr\": 1e-4, \"nested\": {\"x\": 1}}\n");
	assert_int_equal(t.records, 5);
	assert_false(has(&t, "phase"));
	assert_false(has(&t, "ok"));
	assert_false(has(&t, "9x"));
	assert_false(has(&t, "a b"));
	assert_false(has(&t, "nested"));
	assert_true(val(&t, "lr") == 1e-4);

	/* At most PROTO_TRAIN_VALUES_MAX names. */
	for (int i = 0; i < 100; i++) {
		char name[16];

		snprintf(name, sizeof(name), "v%d", i);
		train_set(&t, name, i);
	}
	assert_int_equal(t.n_vals, PROTO_TRAIN_VALUES_MAX);

	/* As METRICS carries them: whole numbers as integers. */
	{
		json_t *v = train_values(&t);

		assert_true(json_is_integer(json_object_get(v, "step")));
		assert_true(json_is_integer(json_object_get(v, "tokens")));
		assert_true(json_is_real(json_object_get(v, "loss")));
		assert_int_equal(json_object_size(v), PROTO_TRAIN_VALUES_MAX);
		json_decref(v);
	}
}

/* ---- an agent with a sampler ---------------------------------------------- */

static struct agent *agent_with_ranks(int n)
{
	struct agent *a = calloc(1, sizeof(*a));

	assert_non_null(a);
	a->loop = loop_new();
	assert_non_null(a->loop);
	a->ranks = calloc((size_t)n, sizeof(*a->ranks));
	assert_non_null(a->ranks);
	a->n_ranks = n;
	for (int i = 0; i < n; i++) {
		a->ranks[i].rank = 10 + i;
		a->ranks[i].out.fd = a->ranks[i].err.fd = -1;
	}
	a->attempt = 1;
	metrics_init(a);
	assert_non_null(a->metrics);
	return a;
}

static void agent_free(struct agent *a)
{
	metrics_fini(a);
	free(a->ranks);
	loop_free(a->loop);
	free(a);
}

/* The LAUNCH fields metrics.c reads, with the patterns of a spec file. */
static json_t *launch_with(const char *spec_path)
{
	struct herd_err err;
	struct spec *spec = spec_load(spec_path, &err);
	json_t *pats = json_array();

	if (!spec)
		fail_msg("%s", err.text);
	for (size_t i = 0; i < spec->metrics.n_patterns; i++)
		json_array_append_new(
			pats, json_pack("{s:s, s:s}", "name",
					spec->metrics.patterns[i].name, "regex",
					spec->metrics.patterns[i].regex));
	spec_free(spec);
	return json_pack("{s:i, s:o}", "metrics_interval_ms", 1000, "patterns",
			 pats);
}

static void output(struct agent *a, const char *text)
{
	metrics_output(a, &a->ranks[0], text, strlen(text));
}

static struct train *train0(struct agent *a)
{
	/* The body carries what the first rank's record holds. */
	json_t *body = metrics_body(a), *t;
	static struct train copy;
	const char *name;
	json_t *v;

	assert_non_null(body);
	memset(&copy, 0, sizeof(copy));
	t = json_array_get(json_object_get(body, "train"), 0);
	if (t) {
		copy.records = json_integer_value(json_object_get(t, "records"));
		json_object_foreach(json_object_get(t, "values"), name, v)
			train_set(&copy, name, json_number_value(v));
	}
	json_decref(body);
	return &copy;
}

static void test_patterns_hf_trainer(void **state)
{
	struct agent *a = agent_with_ranks(1);
	json_t *launch = launch_with("examples/spec/metrics-hf-trainer.yaml");
	struct train *t;

	(void)state;
	metrics_launch(a, launch);
	assert_true(metrics_has_patterns(a));
	/* transformers 4.x Trainer, logging_steps: every line as printed. */
	output(a, "{'loss': 2.1034, 'grad_norm': 5.8312, 'learning_rate': "
		  "4.9e-05, 'epoch': 0.02}\n"
		  " 10%|█         | 50/500 [00:12<01:48,  4.15it/s]\n"
		  "{'loss': 1.9321, 'grad_norm': 3.456219673156738, "
		  "'learning_rate': 4.5e-05, 'epoch': 0.5}\n");
	output(a, "{'eval_loss': 1.8123, 'eval_runtime': 2.1, "
		  "'eval_samples_per_second': 95.2, 'epoch': 1.0}\n"
		  "{'train_runtime': 120.5, 'train_samples_per_second': 33.2, "
		  "'train_steps_per_second': 4.15, 'train_loss': 1.7, "
		  "'epoch': 1.0}\n");
	/* Quoted numbers (newer versions). */
	output(a, "{'loss': '1.5000', 'grad_norm': '2.0', 'learning_rate': "
		  "'4e-05', 'epoch': '1.5'}\n");
	t = train0(a);
	assert_int_equal(t->records, 5);
	assert_true(val(t, "loss") == 1.5);
	assert_true(val(t, "grad_norm") == 2.0);
	assert_true(val(t, "learning_rate") == 4e-05);
	assert_true(val(t, "epoch") == 1.5);
	assert_true(val(t, "eval_loss") == 1.8123);
	json_decref(launch);
	agent_free(a);
}

static void test_patterns_deepspeed(void **state)
{
	struct agent *a = agent_with_ranks(1);
	json_t *launch = launch_with("examples/spec/metrics-deepspeed.yaml");
	struct train *t;

	(void)state;
	metrics_launch(a, launch);
	output(a, "[2025-01-10 12:00:00,123] [INFO] [logging.py:128:log_dist] "
		  "[Rank 0] step=10, skipped=0, lr=[0.0001], "
		  "mom=[(0.9, 0.999)]\n"
		  "[2025-01-10 12:00:00,456] [INFO] [timer.py:264:stop] "
		  "epoch=0/micro_step=20/global_step=10, "
		  "RunningAvgSamplesPerSec=97.53, CurrSamplesPerSec=98.1, "
		  "MemAllocated=1.2GB, MaxMemAllocated=3.4GB\n"
		  "[2025-01-10 12:00:05,001] [INFO] [logging.py:128:log_dist] "
		  "[Rank 0] step=20, skipped=1, lr=[9.5e-05], "
		  "mom=[(0.9, 0.999)]\n");
	t = train0(a);
	assert_int_equal(t->records, 3);
	assert_true(val(t, "step") == 20);
	assert_true(val(t, "skipped") == 1);
	assert_true(val(t, "lr") == 9.5e-05);
	assert_true(val(t, "samples_per_s") == 97.53);
	json_decref(launch);
	agent_free(a);
}

static void test_patterns_torch_ddp(void **state)
{
	struct agent *a = agent_with_ranks(1);
	json_t *launch = launch_with("examples/spec/metrics-torch-ddp.yaml");
	struct train *t;

	(void)state;
	metrics_launch(a, launch);
	/* examples/torch-ddp/train.py's lines. */
	output(a, "step 11/30 loss 0.5120 33.0 steps/s\n"
		  "step 12/30 loss 0.4821 35.2 steps/s\n"
		  "rank 0/4 on node01: done\n");
	t = train0(a);
	assert_int_equal(t->records, 2);
	assert_true(val(t, "step") == 12);
	assert_true(val(t, "loss") == 0.4821);
	assert_true(val(t, "steps_per_s") == 35.2);
	json_decref(launch);
	agent_free(a);
}

/* No patterns: output is not looked at; a new LAUNCH starts the values
 * again. */
static void test_patterns_per_launch(void **state)
{
	struct agent *a = agent_with_ranks(1);
	json_t *launch = launch_with("examples/spec/metrics-torch-ddp.yaml");
	json_t *plain = json_pack("{s:i}", "metrics_interval_ms", 500);

	(void)state;
	metrics_launch(a, launch);
	output(a, "step 1/30 loss 0.5 1.0 steps/s\n");
	assert_int_equal(train0(a)->records, 1);
	metrics_launch(a, plain);
	assert_false(metrics_has_patterns(a));
	output(a, "step 2/30 loss 0.4 1.0 steps/s\n");
	assert_int_equal(train0(a)->records, 0);
	json_decref(plain);
	json_decref(launch);
	agent_free(a);
}

/* The tail of a real file: what was appended since the last sample,
 * a partial last line completed later, a truncated file read again. */
static void test_tail_file(void **state)
{
	struct agent *a = agent_with_ranks(2);
	json_t *launch = json_pack("{s:i}", "metrics_interval_ms", 1000);
	char path[512];
	struct train *t;

	(void)state;
	snprintf(path, sizeof(path), "%s/rank-10.metrics", tmpdir);
	snprintf(a->ranks[0].metrics_file, sizeof(a->ranks[0].metrics_file),
		 "%s", path);
	/* The second rank's file is a directory: never read. */
	snprintf(a->ranks[1].metrics_file, sizeof(a->ranks[1].metrics_file),
		 "%s", tmpdir);
	metrics_launch(a, launch);
	/* Not written yet. */
	assert_int_equal(train0(a)->records, 0);
	append_file(path, "{\"step\": 1, \"tokens\": 512}\n{\"step\": 2, ");
	t = train0(a);
	assert_int_equal(t->records, 1);
	append_file(path, "\"tokens\": 512}\n");
	t = train0(a);
	assert_int_equal(t->records, 2);
	assert_true(val(t, "step") == 2);
	assert_true(val(t, "tokens") == 1024);
	/* Truncated and written again: read from its start. */
	write_file(path, "{\"step\": 3}\n");
	t = train0(a);
	assert_int_equal(t->records, 3);
	assert_true(val(t, "step") == 3);
	json_decref(launch);
	agent_free(a);
}

/* ---- NVML through the fake library ------------------------------------------ */

static void test_gpu_fake(void **state)
{
	char path[512];
	struct gpu *g;
	json_t *arr = json_array(), *e;

	(void)state;
	snprintf(path, sizeof(path), "%s/nvml", tmpdir);
	write_file(path, "count 2\n"
			 "0 util 91\n0 mem_used 1024\n0 mem_total 2048\n"
			 "0 temp 61\n0 power 300500\n0 sm_mhz 1980\n"
			 "0 ecc_corrected 3\n0 ecc_uncorrected 1\n"
			 "0 throttle 4\n"
			 "1 util 10\n1 temp -\n");
	setenv("FAKE_NVML_VALUES", path, 1);
	g = gpu_open(FAKE_NVML);
	assert_non_null(g);
	if (gpu_error(g))
		fail_msg("%s", gpu_error(g));
	gpu_sample(g, arr);
	assert_int_equal(json_array_size(arr), 2);
	e = json_array_get(arr, 0);
	assert_int_equal(int_at(e, "index"), 0);
	assert_int_equal(int_at(e, "util_pct"), 91);
	assert_int_equal(int_at(e, "mem_used"), 1024);
	assert_int_equal(int_at(e, "mem_total"), 2048);
	assert_int_equal(int_at(e, "temp_c"), 61);
	assert_int_equal(int_at(e, "power_mw"), 300500);
	assert_int_equal(int_at(e, "sm_mhz"), 1980);
	assert_int_equal(int_at(e, "ecc_corrected"), 3);
	assert_int_equal(int_at(e, "ecc_uncorrected"), 1);
	assert_int_equal(int_at(e, "throttle"), 4);
	assert_null(json_object_get(e, "xid"));
	/* What NVML cannot give is left out. */
	e = json_array_get(arr, 1);
	assert_int_equal(json_object_size(e), 2);
	assert_int_equal(int_at(e, "util_pct"), 10);
	json_decref(arr);

	/* Values change while the agent runs; an Xid event is kept as the
	 * GPU's last one. */
	write_file(path, "count 2\n0 util 55\n1 util 20\n1 xid 79\n");
	arr = json_array();
	gpu_sample(g, arr);
	assert_int_equal(int_at(json_array_get(arr, 0), "util_pct"), 55);
	assert_null(json_object_get(json_array_get(arr, 0), "xid"));
	assert_int_equal(int_at(json_array_get(arr, 1), "xid"), 79);
	json_decref(arr);
	arr = json_array();
	gpu_sample(g, arr);
	assert_int_equal(int_at(json_array_get(arr, 1), "xid"), 79);
	json_decref(arr);
	gpu_close(g);

	/* NVML present but its driver is not: said why. */
	write_file(path, "init 9\ncount 1\n");
	g = gpu_open(FAKE_NVML);
	assert_non_null(gpu_error(g));
	assert_string_equal(gpu_error(g), "no NVML (nvmlInit: Driver Not Loaded)");
	arr = json_array();
	gpu_sample(g, arr);
	assert_int_equal(json_array_size(arr), 0);
	json_decref(arr);
	gpu_close(g);

	/* No library at all. */
	g = gpu_open("libherd-test-no-such-nvml.so.1");
	assert_non_null(gpu_error(g));
	assert_non_null(strstr(gpu_error(g), "no NVML (libherd-test-no-such-nvml.so.1: "));
	gpu_close(g);
	unsetenv("FAKE_NVML_VALUES");
}

/* ---- the whole frame ------------------------------------------------------- */

static void check_frame(json_t *body)
{
	struct proto_frame f = {.type = PROTO_METRICS, .body = body};
	struct herd_err err;
	size_t len;
	char *buf;

	herd_err_clear(&err);
	if (proto_frame_check(&f, PROTO_TO_HERD, &err) < 0)
		fail_msg("%s in %s", err.text, json_dumps(body, JSON_COMPACT));
	buf = proto_encode(PROTO_METRICS, body, NULL, 0, &len, &err);
	assert_non_null(buf);
	free(buf);
}

static void on_deadline(struct loop *loop, void *arg)
{
	*(int *)arg = 1;
	loop_stop(loop);
}

/* Until the sampler sent a METRICS. */
static void on_poll(struct loop *loop, void *arg)
{
	if (agent_stub_last(PROTO_METRICS))
		loop_stop(loop);
	else
		loop_timer_add(loop, 10, on_poll, arg);
}

static void test_body(void **state)
{
	struct agent *a = agent_with_ranks(2);
	json_t *launch = launch_with("examples/spec/metrics-torch-ddp.yaml");
	json_t *body, *gpus = json_array();
	char path[512];
	struct gpu *g;

	(void)state;
	metrics_launch(a, launch);
	output(a, "step 5/30 loss 0.25 10.0 steps/s\n");
	body = metrics_body(a);
	check_frame(body);
	assert_int_equal(int_at(body, "attempt"), 1);
	assert_true(int_at(body, "cpus") >= 1);
	assert_true(int_at(body, "t") > 1700000000000);
	/* Ranks not running: known, with no memory. */
	assert_int_equal(json_array_size(json_object_get(body, "ranks")), 2);
	assert_int_equal(int_at(json_array_get(json_object_get(body, "ranks"),
					       1),
				"rank"),
			 11);
	assert_int_equal(json_array_size(json_object_get(body, "train")), 1);
	/* This machine has no NVML (the unit tests do not put the fake on
	 * the library path): said in every frame. */
	if (json_array_size(json_object_get(body, "gpus")) == 0)
		assert_non_null(strstr(json_string_value(json_object_get(
					       body, "gpu_error")),
				       "no NVML ("));

	/* With the fake's GPUs, every value present. */
	snprintf(path, sizeof(path), "%s/nvml2", tmpdir);
	write_file(path, "count 3\n"
			 "0 util 100\n0 mem_used 80000000000\n"
			 "0 mem_total 85899345920\n0 temp 90\n0 power 700000\n"
			 "0 sm_mhz 1980\n0 ecc_corrected 0\n"
			 "0 ecc_uncorrected 0\n0 throttle 68\n0 xid 48\n");
	setenv("FAKE_NVML_VALUES", path, 1);
	g = gpu_open(FAKE_NVML);
	gpu_sample(g, gpus);
	json_object_set_new(body, "gpus", gpus);
	json_object_del(body, "gpu_error");
	check_frame(body);
	assert_int_equal(json_array_size(gpus), 3);
	gpu_close(g);
	unsetenv("FAKE_NVML_VALUES");
	json_decref(body);

	/* The timer sends it (agent_send is recorded). */
	agent_stub_reset();
	{
		json_t *fast = json_pack("{s:i}", "metrics_interval_ms", 100);

		metrics_launch(a, fast);
		json_decref(fast);
	}
	{
		int fired = 0;
		long t = loop_timer_add(a->loop, 20000, on_deadline, &fired);

		loop_timer_add(a->loop, 0, on_poll, NULL);
		assert_int_equal(loop_run(a->loop), 0);
		loop_timer_del(a->loop, t);
		assert_false(fired);
	}
	assert_non_null(agent_stub_last(PROTO_METRICS));
	check_frame(agent_stub_last(PROTO_METRICS));
	agent_stub_reset();
	json_decref(launch);
	agent_free(a);
}

static void on_stop_soon(struct loop *loop, void *arg)
{
	(void)arg;
	loop_stop(loop);
}

/* Every touch of a progress file is counted (agent/touch.c): utime
 * (Python's Path.touch of an existing file), touch(1) (open, futimens,
 * close: one), a create, a write, a rename onto it; another file of the
 * directory is not its; a rank without a watched file has no count. */
static void test_touches(void **state)
{
	struct agent *a = agent_with_ranks(2);
	char path[300], other[300], tmp[300], cmd[1024];
	json_t *body, *ranks;
	struct rank r = {0};
	int fd;

	(void)state;
	/* The rule alone. */
	touch_event(&r, IN_OPEN);
	touch_event(&r, IN_ATTRIB);
	touch_event(&r, IN_CLOSE_WRITE);
	assert_int_equal(r.touches, 1);
	touch_event(&r, IN_ATTRIB);
	touch_event(&r, IN_ATTRIB);
	assert_int_equal(r.touches, 3);
	touch_event(&r, IN_OPEN);
	touch_event(&r, IN_MODIFY);
	touch_event(&r, IN_CLOSE_WRITE);
	assert_int_equal(r.touches, 4);

	snprintf(path, sizeof(path), "%s/touch/rank-10.progress", tmpdir);
	snprintf(other, sizeof(other), "%s/touch/rank-11.other", tmpdir);
	snprintf(tmp, sizeof(tmp), "%s/touch/tmp", tmpdir);
	snprintf(cmd, sizeof(cmd), "%s/touch", tmpdir);
	mkdirs(cmd);
	snprintf(a->ranks[0].progress_file, sizeof(a->ranks[0].progress_file),
		 "%s", path);
	touch_launch(a);
	touch_watch(a, &a->ranks[0]);
	touch_watch(a, &a->ranks[1]);
	assert_true(a->ranks[0].touch_wd > 0);
	assert_int_equal(a->ranks[1].touch_wd, -1);
	/* A create (1), three utimes (3), two touch(1)s (2), a write (1),
	 * a rename onto it (1); the other file's touches are not its. */
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	/* The kernel merges identical events not read yet: the agent
	 * reads between two touches (as its loop does between steps). */
	for (int i = 0; i < 3; i++) {
		assert_int_equal(utimensat(AT_FDCWD, path, NULL, 0), 0);
		loop_timer_add(a->loop, 30, on_stop_soon, NULL);
		assert_int_equal(loop_run(a->loop), 0);
	}
	snprintf(cmd, sizeof(cmd), "touch '%s' && touch '%s' && touch '%s'",
		 path, path, other);
	assert_int_equal(system(cmd), 0);
	append_file(path, "x\n");
	write_file(tmp, "y\n");
	assert_int_equal(rename(tmp, path), 0);
	loop_timer_add(a->loop, 100, on_stop_soon, NULL);
	assert_int_equal(loop_run(a->loop), 0);
	assert_int_equal(a->ranks[0].touches, 8);

	body = metrics_body(a);
	check_frame(body);
	ranks = json_object_get(body, "ranks");
	assert_int_equal(int_at(json_array_get(ranks, 0), "touches"), 8);
	assert_null(json_object_get(json_array_get(ranks, 1), "touches"));
	json_decref(body);
	touch_fini(a);
	agent_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_net),
		cmocka_unit_test(test_rdma),
		cmocka_unit_test(test_train_feed),
		cmocka_unit_test(test_patterns_hf_trainer),
		cmocka_unit_test(test_patterns_deepspeed),
		cmocka_unit_test(test_patterns_torch_ddp),
		cmocka_unit_test(test_patterns_per_launch),
		cmocka_unit_test(test_tail_file),
		cmocka_unit_test(test_gpu_fake),
		cmocka_unit_test(test_body),
		cmocka_unit_test(test_touches),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
