/* test_spec.c — the job spec parser: durations, defaults, every error
 * class with its position, and the --print round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka needs the headers above first. */
#include <cmocka.h>

#include "herd/spec.h"

#define MIN "launch: {command: ./train}\n"

static struct spec *parse(const char *yaml, struct herd_err *err)
{
	herd_err_clear(err);
	return spec_parse(yaml, strlen(yaml), "job.yaml", err);
}

/* Parses yaml, which must fail with exactly want. */
static void fails(const char *yaml, const char *want)
{
	struct herd_err err;
	struct spec *s = parse(yaml, &err);

	if (s)
		print_error("accepted:\n%s\n", yaml);
	assert_null(s);
	assert_string_equal(err.text, want);
}

/* Parses yaml, which must fail with an error starting with want. */
static void fails_with(const char *yaml, const char *want)
{
	struct herd_err err;
	struct spec *s = parse(yaml, &err);

	if (s)
		print_error("accepted:\n%s\n", yaml);
	assert_null(s);
	if (strncmp(err.text, want, strlen(want)))
		print_error("got: %s\nwant: %s...\n", err.text, want);
	assert_int_equal(strncmp(err.text, want, strlen(want)), 0);
}

static struct spec *ok(const char *yaml)
{
	struct herd_err err;
	struct spec *s = parse(yaml, &err);

	if (!s)
		print_error("rejected: %s\n", err.text);
	assert_non_null(s);
	return s;
}

static void test_duration_parse(void **state)
{
	static const struct {
		const char *text;
		long ms;
	} good[] = {
	    {"500ms", 500},  {"3s", 3000}, {"2m", 120000},
	    {"1h", 3600000}, {"0s", 0},	   {"8760h", SPEC_DURATION_MAX},
	    {"90s", 90000},
	};
	static const char *const bad[] = {
	    "3",   "",	   "s",	   "3x",    "3 s",
	    "-1s", "1.5s", "3sec", "8761h", "99999999999999999999999ms",
	    "3S",  "ms3",
	};
	struct herd_err err;
	long ms;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ms = -2;
		assert_int_equal(spec_duration_parse(good[i].text, &ms, &err),
				 0);
		assert_int_equal(ms, good[i].ms);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(spec_duration_parse(bad[i], &ms, &err), -1);
	spec_duration_parse("3", &ms, &err);
	assert_non_null(strstr(err.text, "needs a unit"));
}

static void test_duration_format(void **state)
{
	char buf[32];

	(void)state;
	assert_int_equal(spec_duration_format(0, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "0s");
	spec_duration_format(1500, buf, sizeof(buf));
	assert_string_equal(buf, "1500ms");
	spec_duration_format(90000, buf, sizeof(buf));
	assert_string_equal(buf, "90s");
	spec_duration_format(120000, buf, sizeof(buf));
	assert_string_equal(buf, "2m");
	spec_duration_format(7200000, buf, sizeof(buf));
	assert_string_equal(buf, "2h");
	assert_int_equal(spec_duration_format(-1, buf, sizeof(buf)), -1);
	assert_int_equal(spec_duration_format(7200000, buf, 2), -1);
}

/* What messages print: the spec's way ("10s", "500ms"), never "10000 ms";
 * a value format cannot write still prints. */
static void test_duration_text(void **state)
{
	char buf[SPEC_DURATION_TEXT];

	(void)state;
	assert_string_equal(spec_duration_text(10000, buf, sizeof(buf)), "10s");
	assert_string_equal(spec_duration_text(500, buf, sizeof(buf)), "500ms");
	assert_string_equal(spec_duration_text(86400000, buf, sizeof(buf)),
			    "24h");
	assert_string_equal(spec_duration_text(-1, buf, sizeof(buf)), "-1ms");
	assert_ptr_equal(spec_duration_text(3000, buf, sizeof(buf)), buf);
}

static void test_defaults(void **state)
{
	struct spec *s = ok(MIN);

	(void)state;
	assert_string_equal(s->name, "job");
	assert_string_equal(s->path, "job.yaml");
	assert_int_equal(s->nodes.source, SPEC_SOURCE_NONE);
	assert_int_equal(s->nodes.command_timeout_ms, 30000);
	assert_int_equal(s->nodes.count, 0);
	assert_int_equal(s->nodes.slots, 0);
	assert_int_equal(s->nodes.min, 0);
	assert_null(s->nodes.spares);
	assert_int_equal(s->nodes.readmit_after_ms, -1);
	assert_int_equal(s->nodes.transport, SPEC_TRANSPORT_AUTO);
	assert_null(s->ssh.user);
	assert_int_equal(s->ssh.port, 22);
	assert_string_equal(s->ssh.known_hosts, "~/.ssh/known_hosts");
	assert_int_equal(s->ssh.host_keys, SPEC_HOST_KEYS_STRICT);
	assert_int_equal(s->ssh.fanout, 64);
	assert_int_equal(s->ssh.connect_timeout_ms, 10000);
	assert_string_equal(s->ssh.agent_dir, "~/.cache/herd");
	assert_int_equal(s->launch.mode, SPEC_MODE_TORCH);
	assert_string_equal(s->launch.command, "./train");
	assert_int_equal(s->launch.n_env, 0);
	assert_int_equal(s->launch.env_pass.n, 0);
	assert_int_equal(s->launch.master_port, 29500);
	assert_int_equal(s->bind.gpu, SPEC_BIND_GPU_AUTO);
	assert_int_equal(s->bind.nic, SPEC_BIND_NIC_AUTO);
	assert_int_equal(s->bind.cpu, SPEC_BIND_CPU_NUMA);
	assert_int_equal(s->health.heartbeat_ms, 500);
	assert_int_equal(s->health.timeout_ms, 3000);
	assert_int_equal(s->health.grace_ms, 10000);
	assert_int_equal(s->health.progress_timeout_ms, -1);
	assert_int_equal(s->restart.max, 3);
	assert_int_equal(s->restart.backoff_ms, 2000);
	assert_null(s->checkpoint.dir);
	assert_string_equal(s->log.dir, "runs/{{name}}");
	assert_int_equal(s->log.mode, 0600);
	assert_false(s->slurm.present);
	spec_free(s);
}

static void test_name_from_path(void **state)
{
	struct herd_err err;
	struct spec *s;

	(void)state;
	s = spec_parse(MIN, strlen(MIN), "jobs/llama-ft.yml", &err);
	assert_non_null(s);
	assert_string_equal(s->name, "llama-ft");
	spec_free(s);
	s = spec_parse(MIN, strlen(MIN), "/a/b/run.v2.yaml", &err);
	assert_non_null(s);
	assert_string_equal(s->name, "run.v2");
	spec_free(s);
}

static void test_values(void **state)
{
	struct spec *s = ok(
	    "name: ft\n"
	    "nodes:\n  hosts: [\"n[1-4]\", gpu7]\n  slots: 8\n  min: 5\n"
	    "  readmit_after: 5m\n  command_timeout: 500ms\n"
	    "launch:\n  mode: pmix\n"
	    "  command: python3 t.py {{resume_args}}\n"
	    "  env: {A: 1, B: true, C: x y, D: ~, E: '007'}\n"
	    "  env_pass: [HF_HOME, \"WANDB_*\"]\n"
	    "bind: {nic: [mlx5_0, mlx5_1], cpu: cores, gpu: none}\n"
	    "ssh: {host_keys: accept-new, port: 2222}\n"
	    "restart: {max: 0}\n"
	    "checkpoint: {dir: /c, resume_args: \"--resume {{checkpoint}}\"}\n"
	    "slurm:\n  time: 24:00:00\n  exclusive: true\n");

	(void)state;
	assert_int_equal(s->nodes.source, SPEC_SOURCE_HOSTS);
	assert_string_equal(s->nodes.hosts, "n[1-4],gpu7");
	assert_int_equal(s->nodes.slots, 8);
	assert_int_equal(s->nodes.min, 5);
	assert_int_equal(s->nodes.readmit_after_ms, 300000);
	assert_int_equal(s->nodes.command_timeout_ms, 500);
	assert_int_equal(s->launch.mode, SPEC_MODE_PMIX);
	assert_string_equal(s->launch.command, "python3 t.py {{resume_args}}");
	assert_int_equal(s->launch.n_env, 5);
	assert_string_equal(s->launch.env[0].key, "A");
	assert_string_equal(s->launch.env[0].value, "1");
	assert_string_equal(s->launch.env[1].value, "true");
	assert_string_equal(s->launch.env[2].value, "x y");
	assert_string_equal(s->launch.env[3].value, "");
	assert_string_equal(s->launch.env[4].value, "007");
	assert_int_equal(s->launch.env_pass.n, 2);
	assert_string_equal(s->launch.env_pass.v[1], "WANDB_*");
	assert_int_equal(s->bind.nic, SPEC_BIND_NIC_LIST);
	assert_int_equal(s->bind.nic_list.n, 2);
	assert_string_equal(s->bind.nic_list.v[1], "mlx5_1");
	assert_int_equal(s->bind.cpu, SPEC_BIND_CPU_CORES);
	assert_int_equal(s->bind.gpu, SPEC_BIND_GPU_NONE);
	assert_int_equal(s->ssh.host_keys, SPEC_HOST_KEYS_ACCEPT_NEW);
	assert_int_equal(s->ssh.port, 2222);
	assert_int_equal(s->restart.max, 0);
	assert_string_equal(s->checkpoint.resume_args,
			    "--resume {{checkpoint}}");
	assert_true(s->slurm.present);
	assert_string_equal(s->slurm.time, "24:00:00");
	assert_true(s->slurm.exclusive);
	assert_false(s->slurm.requeue);
	spec_free(s);
}

static void test_sources(void **state)
{
	struct spec *s;

	(void)state;
	s = ok(MIN "nodes: {hostfile: /etc/hf}\n");
	assert_int_equal(s->nodes.source, SPEC_SOURCE_HOSTFILE);
	assert_string_equal(s->nodes.hostfile, "/etc/hf");
	spec_free(s);
	s = ok(MIN "nodes: {slurm: true}\n");
	assert_int_equal(s->nodes.source, SPEC_SOURCE_SLURM);
	spec_free(s);
	s = ok(MIN "nodes: {slurm: false, command: ./discover}\n");
	assert_int_equal(s->nodes.source, SPEC_SOURCE_COMMAND);
	assert_string_equal(s->nodes.command, "./discover");
	spec_free(s);
	s = ok(MIN "nodes:\n  inventory: {url: 'http://inv/x', "
		   "token_env: TOK}\n");
	assert_int_equal(s->nodes.source, SPEC_SOURCE_INVENTORY);
	assert_string_equal(s->nodes.inventory.url, "http://inv/x");
	assert_string_equal(s->nodes.inventory.token_env, "TOK");
	assert_null(s->nodes.inventory.filter);
	assert_string_equal(spec_source_name(s->nodes.source), "inventory");
	spec_free(s);
}

static void test_unknown_key(void **state)
{
	(void)state;
	fails(MIN "nodes:\n  slot: 4\n",
	      "job.yaml:3:3: unknown key 'slot' in nodes (did you mean "
	      "'slots'?)");
	fails(MIN "nam: x\n",
	      "job.yaml:2:1: unknown key 'nam' (did you mean 'name'?)");
	fails_with(MIN "restart: {zzzzzz: 1}\n",
		   "job.yaml:2:11: unknown key 'zzzzzz' in restart (expected "
		   "one of: max, backoff, survivors)");
	fails(MIN "ssh: {host_key: strict}\n",
	      "job.yaml:2:7: unknown key 'host_key' in ssh (did you mean "
	      "'host_keys'?)");
}

static void test_wrong_types(void **state)
{
	(void)state;
	fails("launch:\n  command: [a, b]\n",
	      "job.yaml:2:12: expected a string for launch.command, got a "
	      "list");
	fails(MIN "nodes: 4\n",
	      "job.yaml:2:8: expected a mapping of keys for nodes, got a "
	      "scalar");
	fails(MIN "nodes: {count: {a: 1}}\n",
	      "job.yaml:2:16: expected a positive integer or 'all' for "
	      "nodes.count, got a mapping");
	fails(MIN "slurm: {exclusive: maybe}\n",
	      "job.yaml:2:20: expected true or false for slurm.exclusive, "
	      "got 'maybe'");
	fails(MIN "launch2: x\n",
	      "job.yaml:2:1: unknown key 'launch2' (did you mean 'launch'?)");
	fails(MIN "launch: {env: [A]}\n",
	      "job.yaml:2:1: duplicate key 'launch' (first at 1:1)");
	fails("launch: {command: x, env: [A]}\n",
	      "job.yaml:1:27: expected a mapping of variables for "
	      "launch.env, got a list");
	fails("launch: {command: x, env: {1A: x}}\n",
	      "job.yaml:1:28: expected a variable name (letters, digits, "
	      "'_') in launch.env, got '1A'");
	fails("launch: {command: x, env_pass: HF_HOME}\n",
	      "job.yaml:1:32: expected a list for launch.env_pass, got a "
	      "scalar");
	fails("launch: {command: ''}\n",
	      "job.yaml:1:19: expected a non-empty string for launch.command "
	      "(leave the key out for the default)");
	fails("launch: {command: \"a\\0b\"}\n",
	      "job.yaml:1:19: launch.command holds a NUL character");
	fails(MIN "{a: 1}: x\n",
	      "job.yaml:2:1: expected a key name, got a mapping");
	fails(MIN "name: a/b\n",
	      "job.yaml:2:7: expected a job name without '/', spaces or "
	      "control characters, got 'a/b'");
}

static void test_counts(void **state)
{
	(void)state;
	fails(MIN "nodes: {count: -1}\n",
	      "job.yaml:2:16: expected a positive integer or 'all' for "
	      "nodes.count, got -1 (negative)");
	fails(MIN "nodes: {count: 0}\n",
	      "job.yaml:2:16: expected a positive integer or 'all' for "
	      "nodes.count, got 0");
	fails(MIN "nodes: {slots: 0}\n",
	      "job.yaml:2:16: expected a positive integer or 'auto' for "
	      "nodes.slots, got 0");
	fails(MIN "nodes: {min: 0}\n",
	      "job.yaml:2:14: expected a positive integer or 'all' for "
	      "nodes.min, got 0");
	fails(MIN "ssh: {fanout: 0}\n",
	      "job.yaml:2:15: expected a positive integer for ssh.fanout, "
	      "got 0");
	fails(MIN "ssh: {port: 0}\n",
	      "job.yaml:2:13: expected a port number 1..65535 for ssh.port, "
	      "got 0");
	fails(MIN "ssh: {port: 65536}\n",
	      "job.yaml:2:13: expected a port number 1..65535 for ssh.port, "
	      "got 65536 (out of range)");
	fails("launch: {command: x, master_port: 0}\n",
	      "job.yaml:1:35: expected a port number 1..65535 for "
	      "launch.master_port, got 0");
	fails(MIN "restart: {max: -1}\n",
	      "job.yaml:2:16: expected an integer from 0 to 1000000 for "
	      "restart.max, got -1 (negative)");
	fails(MIN "nodes: {count: 4x}\n",
	      "job.yaml:2:16: expected a positive integer or 'all' for "
	      "nodes.count, got '4x'");
	fails(MIN "nodes: {count: 99999999999999999999999999}\n",
	      "job.yaml:2:16: expected a positive integer or 'all' for "
	      "nodes.count, got 99999999999999999999999999 (out of range)");
}

static void test_min_above_count(void **state)
{
	(void)state;
	fails(MIN "nodes:\n  count: 4\n  min: 5\n",
	      "job.yaml:4:8: nodes.min (5) is more than the 4 nodes of the "
	      "job (nodes.count)");
	fails(MIN "nodes:\n  hosts: node[01-04]\n  min: 5\n",
	      "job.yaml:4:8: nodes.min (5) is more than the 4 nodes of the "
	      "job (nodes.hosts)");
	fails(MIN "nodes:\n  hosts: [a, b]\n  count: 3\n",
	      "job.yaml:4:10: nodes.count (3) is more than the 2 hosts of "
	      "nodes.hosts");
	fails_with(MIN "nodes:\n  hosts: 'node[01-'\n",
		   "job.yaml:3:10: expected a hostlist expression for "
		   "nodes.hosts: ");
	fails_with(MIN "nodes:\n  spares: 'x[3-1]'\n",
		   "job.yaml:3:11: expected a hostlist expression for "
		   "nodes.spares: ");
	spec_free(ok(MIN "nodes:\n  hosts: node[01-04]\n  min: 4\n"));
}

static void test_enums(void **state)
{
	(void)state;
	fails(MIN "launch: {mode: mpi}\n",
	      "job.yaml:2:1: duplicate key 'launch' (first at 1:1)");
	fails("launch: {command: x, mode: mpi}\n",
	      "job.yaml:1:28: unknown value 'mpi' for launch.mode (expected "
	      "one of: torch, pmix, plain)");
	fails(MIN "bind: {cpu: socket}\n",
	      "job.yaml:2:13: unknown value 'socket' for bind.cpu (expected "
	      "one of: numa, cores, none)");
	fails(MIN "bind: {nic: eth0}\n",
	      "job.yaml:2:13: unknown value 'eth0' for bind.nic (expected "
	      "one of: auto, none, or a list of NIC names)");
	fails(MIN "ssh:\n  host_keys: off\n",
	      "job.yaml:3:14: ssh.host_keys cannot turn host key checking "
	      "off: use strict (keys pinned by 'herd keys') or accept-new "
	      "(pin a key on first contact)");
	fails(MIN "ssh: {host_keys: yes}\n",
	      "job.yaml:2:18: unknown value 'yes' for ssh.host_keys "
	      "(expected one of: strict, accept-new)");
}

static void test_durations_in_spec(void **state)
{
	(void)state;
	fails(MIN "health:\n  timeout: 3\n",
	      "job.yaml:3:12: bad duration '3' for health.timeout: a "
	      "duration needs a unit: write 3s or 3ms (units: ms, s, m, h)");
	fails_with(MIN "health: {progress_timeout: never}\n",
		   "job.yaml:2:28: bad duration 'never' for "
		   "health.progress_timeout (or 'off'): ");
	fails(MIN "health: {heartbeat: 5s}\n",
	      "job.yaml:2:21: health.timeout (3s) must be longer than "
	      "health.heartbeat (5s)");
	fails(MIN "health: {heartbeat: 0s}\n",
	      "job.yaml:2:21: expected a duration above zero for "
	      "health.heartbeat, got '0s'");
	spec_free(ok(MIN "health: {grace: 0s, progress_timeout: off}\n"
			 "nodes: {readmit_after: never}\n"));
}

/* The health gate's keys (issue 14): defaults, values and errors. */
static void test_health_gate_keys(void **state)
{
	struct herd_err err;
	char buf[32];
	long long b;
	struct spec *s;

	(void)state;
	s = ok(MIN);
	assert_null(s->health.check_command);
	assert_false(s->health.preflight);
	assert_true(s->health.min_free == 1LL << 30);
	assert_int_equal(s->health.straggler, SPEC_STRAGGLER_WARN);
	assert_true(s->health.straggler_ratio == 1.3);
	assert_int_equal(s->health.straggler_window_ms, 120000);
	assert_int_equal(s->health.quarantine_after, 3);
	assert_int_equal(s->health.quarantine_for_ms, 24L * 3600 * 1000);
	spec_free(s);
	s = ok(MIN "health:\n  check_command: /opt/site/ok --fast\n"
		   "  preflight: true\n  min_free: 512M\n"
		   "  straggler: evict\n  straggler_ratio: 1.5\n"
		   "  straggler_window: 30s\n  quarantine_after: 0\n"
		   "  quarantine_for: 2h\n");
	assert_string_equal(s->health.check_command, "/opt/site/ok --fast");
	assert_true(s->health.preflight);
	assert_true(s->health.min_free == 512LL << 20);
	assert_int_equal(s->health.straggler, SPEC_STRAGGLER_EVICT);
	assert_true(s->health.straggler_ratio == 1.5);
	assert_int_equal(s->health.straggler_window_ms, 30000);
	assert_int_equal(s->health.quarantine_after, 0);
	assert_int_equal(s->health.quarantine_for_ms, 7200000);
	spec_free(s);
	fails(MIN "health: {straggler_ratio: 1}\n",
	      "job.yaml:2:27: expected a number above 1 and at most 100 for "
	      "health.straggler_ratio (how many times slower than the "
	      "median), got '1'");
	fails(MIN "health: {straggler_ratio: nan}\n",
	      "job.yaml:2:27: expected a number above 1 and at most 100 for "
	      "health.straggler_ratio (how many times slower than the "
	      "median), got 'nan'");
	fails(MIN "health: {min_free: 10GB}\n",
	      "job.yaml:2:20: bad size '10GB' for health.min_free: expected "
	      "a size unit K, M, G or T after the number");
	fails(MIN "health: {straggler: kill}\n",
	      "job.yaml:2:21: unknown value 'kill' for health.straggler "
	      "(expected one of: warn, off, evict)");
	assert_int_equal(spec_bytes_parse("10G", &b, &err), 0);
	assert_true(b == 10LL << 30);
	assert_int_equal(spec_bytes_parse("7", &b, &err), 0);
	assert_true(b == 7);
	assert_int_equal(spec_bytes_parse("3KiB", &b, &err), 0);
	assert_true(b == 3072);
	assert_int_equal(spec_bytes_parse("-1G", &b, &err), -1);
	assert_int_equal(spec_bytes_parse("99999999999999999999", &b, &err),
			 -1);
	assert_int_equal(spec_bytes_parse("2000T", &b, &err), -1);
	assert_int_equal(spec_bytes_format(1536LL << 20, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "1536M");
	assert_int_equal(spec_bytes_format(1LL << 30, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "1G");
	assert_int_equal(spec_bytes_format(0, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "0");
}

static void test_host_sources(void **state)
{
	(void)state;
	fails(MIN "nodes:\n  hosts: n[1-4]\n  hostfile: /etc/hf\n",
	      "job.yaml:4:3: two host sources: nodes.hostfile and "
	      "nodes.hosts (at 3:3); give only one");
	fails(MIN "nodes:\n  slurm: true\n  command: ./d\n",
	      "job.yaml:4:3: two host sources: nodes.command and "
	      "nodes.slurm (at 3:3); give only one");
	fails(MIN "nodes:\n  inventory: {token_env: T}\n",
	      "job.yaml:3:14: nodes.inventory needs a url (the HTTP JSON API "
	      "to ask for hosts)");
}

/* nodes.transport: auto (the default) or local, which simulates named
 * nodes on this machine and so cannot take a Slurm allocation's nodes. */
static void test_transport(void **state)
{
	struct spec *s;

	(void)state;
	s = ok(MIN "nodes: {hosts: 'sim[1-1000]', transport: local}\n");
	assert_int_equal(s->nodes.transport, SPEC_TRANSPORT_LOCAL);
	assert_string_equal(spec_transport_name(s->nodes.transport), "local");
	spec_free(s);
	s = ok(MIN "nodes: {transport: auto}\n");
	assert_int_equal(s->nodes.transport, SPEC_TRANSPORT_AUTO);
	spec_free(s);
	fails(MIN "nodes: {hosts: a, transport: ssh}\n",
	      "job.yaml:2:30: unknown value 'ssh' for nodes.transport "
	      "(expected one of: auto, local)");
	fails(MIN "nodes: {hosts: a, transport: [local]}\n",
	      "job.yaml:2:30: expected a word for nodes.transport, got a "
	      "list");
	fails(MIN "nodes:\n  slurm: true\n  transport: local\n",
	      "job.yaml:4:14: nodes.transport: local starts every node's "
	      "agent on this machine, but nodes.slurm takes the nodes of a "
	      "Slurm allocation, where srun starts them: use one or the "
	      "other");
}

/* nodes.hosts and nodes.spares follow the host name rule of every other
 * source (hostfile_host_check), with the position of the expression. */
static void test_host_names(void **state)
{
	(void)state;
	fails(MIN "nodes:\n  hosts: 'a;b'\n",
	      "job.yaml:3:10: nodes.hosts: bad host name 'a;b' (character 2: "
	      "expected letters, digits, '.', '-' or '_'; ASCII only)");
	fails_with(MIN "nodes:\n  hosts: ['n1', '$(touch INJ)']\n",
		   "job.yaml:3:17: nodes.hosts: bad host name '$(touch");
	fails_with(MIN "nodes:\n  hosts:\n    - n1\n    - -oProxyCommand\n",
		   "job.yaml:5:7: nodes.hosts: bad host name '-oProxyCommand' "
		   "(it must start with a letter or digit)");
	fails_with(MIN "nodes:\n  hosts: n[1-2]\n  spares: 'n\xc3\xa9'\n",
		   "job.yaml:4:11: nodes.spares: bad host name");
	fails_with(MIN "nodes:\n  hosts: n1\n  spares: n2,-x\n",
		   "job.yaml:4:11: nodes.spares: bad host name '-x' (it must "
		   "start with a letter or digit)");
	fails_with(MIN "nodes:\n  hosts: n1\n  spares: .hidden\n",
		   "job.yaml:4:11: nodes.spares: bad host name '.hidden'");
	spec_free(ok(MIN "nodes:\n  hosts: [node-01, 10.0.0.2, a_b.example]\n"
			 "  spares: 'x[1-2]'\n"));
}

/* What execve() cannot take is refused before any node is touched. */
static void test_exec_limits(void **state)
{
	size_t n = SPEC_ARG_STRLEN_MAX + 40;
	char *yaml = malloc(n + 64), *p;
	struct herd_err err;
	struct spec *s;

	(void)state;
	assert_non_null(yaml);
	/* launch.command of 131,100 bytes: one argv string of sh -c. */
	p = yaml + snprintf(yaml, 64, "name: x\nlaunch:\n  command: ");
	memset(p, 'a', 131100);
	memcpy(p + 131100, "\n", 2);
	s = parse(yaml, &err);
	assert_null(s);
	assert_string_equal(err.text,
			    "job.yaml:3:12: launch.command is 131100 bytes; "
			    "Linux passes at most 131071 bytes as one argument "
			    "(MAX_ARG_STRLEN) and every rank would fail to "
			    "start: put the command in a script");
	/* 131,072 bytes and the NUL do not fit; 131,071 do. */
	memcpy(p + 131072, "\n", 2);
	s = parse(yaml, &err);
	assert_null(s);
	memcpy(p + 131071, "\n", 2);
	spec_free(ok(yaml));
	/* One launch.env entry, NAME=VALUE, is one string too. */
	p = yaml + snprintf(yaml, 64, "launch:\n  command: t\n  env:\n    BIG: ");
	memset(p, 'b', 131100);
	memcpy(p + 131100, "\n", 2);
	s = parse(yaml, &err);
	assert_null(s);
	assert_string_equal(err.text,
			    "job.yaml:4:10: launch.env.BIG is 131100 bytes; "
			    "Linux passes at most 131067 bytes in one variable "
			    "(MAX_ARG_STRLEN) and every rank would fail to "
			    "start: put the value in a file");
	free(yaml);
}

/* Placeholders of launch.command and resume_args must stand where herd
 * can quote them (render_shell). */
static void test_command_quoting(void **state)
{
	(void)state;
	fails_with("launch:\n  command: echo \"$(cat {{checkpoint}})\"\n",
		   "job.yaml:2:12: launch.command: character 13: herd cannot "
		   "tell how the shell quotes {{checkpoint}}");
	fails_with("launch:\n  command: run '{{resume_args}}'\n",
		   "job.yaml:2:12: launch.command: character 6: "
		   "{{resume_args}} is shell words");
	fails_with(MIN "checkpoint: {dir: /c, resume_args: \"--r '{{checkpoint}}\"}\n",
		   "job.yaml:2:36: checkpoint.resume_args: the text ends inside "
		   "single quotes");
	spec_free(ok("launch:\n  command: run \"--out={{name}}\" "
		     "{{resume_args}} # {{unknown}}\n"));
}

static void test_duplicates(void **state)
{
	(void)state;
	fails("launch:\n  command: a\n  command: b\n",
	      "job.yaml:3:3: duplicate key 'launch.command' (first at 2:3)");
	fails("launch:\n  command: a\n  env: {A: 1, A: 2}\n",
	      "job.yaml:3:15: duplicate variable 'A' in launch.env (first at "
	      "3:9)");
}

static void test_document_shapes(void **state)
{
	(void)state;
	fails("", "job.yaml:1:1: empty job file: expected a mapping of job "
		  "keys (launch.command at least)");
	fails("# nothing\n\n", "job.yaml:1:1: empty job file: expected a "
			       "mapping of job keys (launch.command at least)");
	fails("- a\n- b\n",
	      "job.yaml:1:1: expected a mapping of job keys "
	      "(name, nodes, launch, ...) at the top, got a list");
	fails("just text\n", "job.yaml:1:1: expected a mapping of job keys "
			     "(name, nodes, launch, ...) at the top, got a "
			     "scalar");
	fails(MIN "---\n" MIN, "job.yaml:2:1: a second YAML document; a job "
			       "file holds exactly one");
	fails("launch: &a {command: x}\nnodes: *a\n",
	      "job.yaml:2:8: aliases are not supported (*a): write the value "
	      "out");
	fails("launch:\n  command: \"caf\xe9\"\n",
	      "job.yaml:2:16: not valid UTF-8 text (invalid trailing UTF-8 "
	      "octet); a job file must be UTF-8");
	fails("launch:\n  command: \xff\n",
	      "job.yaml:2:12: not valid UTF-8 text (invalid leading UTF-8 "
	      "octet); a job file must be UTF-8");
	fails("\xff\xfel\0a\0:\0",
	      "job.yaml:1:1: starts with a UTF-16 or UTF-32 byte order mark; "
	      "a job file must be UTF-8 (iconv -f UTF-16 -t UTF-8)");
	fails("launch: {command: x, \"mode\\0x\": plain}\n",
	      "job.yaml:1:22: launch holds a NUL character");
	fails_with("launch: {command: x\n",
		   "job.yaml:2:1: invalid YAML: did not find expected ',' or "
		   "'}' (while parsing a flow mapping at 1:9)");
}

/* Issue 23: nesting is bounded while parsing, at the first start event
 * too deep; 1 MiB of "[" is refused at once (it took libyaml tens of
 * minutes), and a UTF-8 byte order mark is accepted. */
static void test_depth_and_bom(void **state)
{
	struct herd_err err;
	struct spec *s;
	char *buf;
	size_t n = SPEC_FILE_MAX - 64;

	(void)state;
	s = ok("\xef\xbb\xbf" MIN);
	assert_string_equal(s->launch.command, "./train");
	spec_free(s);
	fails("\xef\xbb\xbflaunch: {command: [x]}\n",
	      "job.yaml:1:19: expected a string for launch.command, got a "
	      "list");
	/* 32 levels are fine as YAML (then refused as a field), 33 not. */
	fails_with(MIN "x: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]"
		       "]]]]]]]]]]]\n",
		   "job.yaml:2:1: ");
	fails(MIN "x: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]"
		  "]]]]]]]]]]]]\n",
	      "job.yaml:2:35: nested deeper than 32 (a job file needs a few "
	      "levels)");
	fails(MIN "x:\n - - - - - - - - - - - - - - - - - - - - - - - - - - - "
		  "- - - - - - - a\n",
	      "job.yaml:3:64: nested deeper than 32 (a job file needs a few "
	      "levels)");
	buf = malloc(n + 1);
	assert_non_null(buf);
	memcpy(buf, "x: ", 3);
	memset(buf + 3, '[', n - 3);
	buf[n] = '\0';
	herd_err_clear(&err);
	s = spec_parse(buf, n, "job.yaml", &err);
	assert_null(s);
	assert_string_equal(err.text, "job.yaml:1:35: nested deeper than 32 "
				      "(a job file needs a few levels)");
	free(buf);
}

static void test_required_and_size(void **state)
{
	struct herd_err err;
	struct spec *s;
	char *big;

	(void)state;
	fails("launch:\n  workdir: /w\n",
	      "job.yaml:2:3: launch.command is required (the command every "
	      "rank runs)");
	fails("name: x\n", "job.yaml:1:1: launch.command is required (the "
			   "command every rank runs)");
	fails(MIN "checkpoint: {pattern: 'step_*'}\n",
	      "job.yaml:2:23: checkpoint.dir is required to look for "
	      "checkpoints");
	big = calloc(1, SPEC_FILE_MAX + 1);
	assert_non_null(big);
	memset(big, ' ', SPEC_FILE_MAX + 1);
	s = spec_parse(big, SPEC_FILE_MAX + 1, "big.yaml", &err);
	assert_null(s);
	assert_string_equal(err.text, "big.yaml:1:1: job file is 1048577 "
				      "bytes; at most 1048576 are allowed (a "
				      "job file is a few KiB)");
	free(big);
	s = spec_load("/nonexistent/job.yaml", &err);
	assert_null(s);
	assert_string_equal(err.text, "/nonexistent/job.yaml: No such file "
				      "or directory");
}

/* print -> parse -> print must give the same text. */
static char *printed(const struct spec *s)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	assert_non_null(f);
	assert_int_equal(spec_print(s, f), 0);
	assert_int_equal(fclose(f), 0);
	return text;
}

static void round_trip(const char *yaml)
{
	struct herd_err err;
	struct spec *a = ok(yaml), *b;
	char *t1 = printed(a), *t2;

	b = spec_parse(t1, strlen(t1), "printed.yaml", &err);
	if (!b)
		print_error("%s\n---\n%s\n", err.text, t1);
	assert_non_null(b);
	t2 = printed(b);
	assert_string_equal(t1, t2);
	assert_string_equal(a->name, b->name);
	free(t1);
	free(t2);
	spec_free(a);
	spec_free(b);
}

/* log.mode: owner rw always, group/others at most r; errors at the value. */
static void test_log_mode(void **state)
{
	static const struct {
		const char *text;
		unsigned int mode;
	} good[] = {{"0600", 0600}, {"0640", 0640}, {"0644", 0644},
		    {"0604", 0604}, {"640", 0640}, {"'0640'", 0640}};
	static const char *const bad[] = {"0666", "0700", "0400", "0660",
					  "0755", "4600", "06400", "60",
					  "0o640", "rw-r-----", "0608", "''"};
	char yaml[128], want[256];

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct spec *s;

		snprintf(yaml, sizeof(yaml), MIN "log:\n  mode: %s\n",
			 good[i].text);
		s = ok(yaml);
		assert_int_equal(s->log.mode, good[i].mode);
		spec_free(s);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(yaml, sizeof(yaml), MIN "log:\n  mode: %s\n", bad[i]);
		snprintf(want, sizeof(want),
			 "job.yaml:3:9: expected a file mode for log.mode: "
			 "0600, 0640, 0604 or 0644 (the owner reads and "
			 "writes, others at most read), got '%s'",
			 strcmp(bad[i], "''") ? bad[i] : "");
		fails(yaml, want);
	}
	{
		struct spec *s = ok(MIN "log: {mode: 644}\n");
		char *t = printed(s);

		assert_non_null(strstr(t, "\nlog:\n  dir: runs/{{name}}\n"
					  "  mode: 0644\n"));
		free(t);
		spec_free(s);
		s = ok(MIN);
		t = printed(s);
		assert_non_null(strstr(t, "\n  mode: 0600\n"));
		free(t);
		spec_free(s);
	}
	fails(MIN "log: {mode: [1]}\n",
	      "job.yaml:2:13: expected a file mode such as 0600 for "
	      "log.mode, got a list");
}

static void test_round_trip(void **state)
{
	(void)state;
	round_trip(MIN);
	round_trip(MIN "slurm:\n");
	round_trip("name: '123'\nlaunch:\n  command: \"echo 'a: b' \\\"c\\\"\\n"
		   "next line\"\n  env: {A: ~, B: 'null', C: 'yes', D: '',"
		   " E: \"\\u00e9t\\u00e9\"}\n  workdir: '~'\n"
		   "nodes: {hosts: [a, 'b[1-3]'], count: 2, min: 1}\n"
		   "bind: {nic: none}\nhealth: {progress_timeout: 1500ms}\n");
	round_trip(MIN "nodes:\n  inventory: {url: 'http://x:80/y?a=b&c',"
		       " filter: 'labels.gpu=a: b, n=#1'}\n");
	round_trip(MIN "nodes: {hostfile: '- odd name'}\n"
		       "slurm: {extra: ['--x=1', '#y'], nodes: 3}\n");
	round_trip(MIN "log: {dir: '/x/{{name}}', mode: 0640}\n");
	round_trip(MIN "nodes: {hosts: 'sim[1-3]', transport: local}\n");
}

/* health.notify_grace (issue 16): 1s by default, a duration (0s: stop at
 * once), printed back, errors at the value. */
static void test_notify_grace(void **state)
{
	struct spec *s;
	char *t;

	(void)state;
	s = ok(MIN);
	assert_int_equal(s->health.notify_grace_ms, 1000);
	spec_free(s);
	s = ok(MIN "health: {notify_grace: 0s}\n");
	assert_int_equal(s->health.notify_grace_ms, 0);
	spec_free(s);
	s = ok(MIN "health: {notify_grace: 2500ms}\n");
	assert_int_equal(s->health.notify_grace_ms, 2500);
	t = printed(s);
	assert_non_null(strstr(t, "\n  notify_grace: 2500ms\n"));
	free(t);
	spec_free(s);
	fails_with(MIN "health: {notify_grace: soon}\n",
		   "job.yaml:2:24: bad duration 'soon' for "
		   "health.notify_grace: ");
	fails(MIN "health: {notify_grace: 5}\n",
	      "job.yaml:2:24: bad duration '5' for health.notify_grace: a "
	      "duration needs a unit: write 5s or 5ms (units: ms, s, m, h)");
	round_trip(MIN "health: {notify_grace: 3s}\n");
}

/* ssh.agent_dir: absolute or under the remote home, one line, bounded. */
static void test_agent_dir(void **state)
{
	struct spec *s;
	char *yaml, *path;

	(void)state;
	s = ok(MIN "ssh: {agent_dir: /opt/herd agent}\n");
	assert_string_equal(s->ssh.agent_dir, "/opt/herd agent");
	spec_free(s);
	s = ok(MIN "ssh: {agent_dir: ~/scratch/herd}\n");
	assert_string_equal(s->ssh.agent_dir, "~/scratch/herd");
	spec_free(s);
	s = ok(MIN "ssh: {agent_dir: '~'}\n");
	assert_string_equal(s->ssh.agent_dir, "~");
	spec_free(s);
	/* A plain ~ is YAML's null: the default. */
	s = ok(MIN "ssh: {agent_dir: ~}\n");
	assert_string_equal(s->ssh.agent_dir, "~/.cache/herd");
	spec_free(s);
	fails(MIN "ssh: {agent_dir: .cache/herd}\n",
	      "job.yaml:2:18: expected an absolute path or one starting with "
	      "~/ (the home of the user on the node) for ssh.agent_dir, got "
	      "'.cache/herd'");
	fails(MIN "ssh:\n  agent_dir: ~other/herd\n",
	      "job.yaml:3:14: expected an absolute path or one starting with "
	      "~/ (the home of the user on the node) for ssh.agent_dir, got "
	      "'~other/herd'");
	fails(MIN "ssh: {agent_dir: \"/opt/a\\nb\"}\n",
	      "job.yaml:2:18: ssh.agent_dir holds a control character: "
	      "'/opt/a?b'");
	fails(MIN "ssh: {agent_dir: ''}\n",
	      "job.yaml:2:18: expected a non-empty string for ssh.agent_dir "
	      "(leave the key out for the default)");
	fails(MIN "ssh: {agent_dir: [/a]}\n",
	      "job.yaml:2:18: expected a string for ssh.agent_dir, got a list");
	path = malloc(SPEC_AGENT_DIR_MAX + 2);
	assert_non_null(path);
	memset(path, 'a', SPEC_AGENT_DIR_MAX + 1);
	path[0] = '/';
	path[SPEC_AGENT_DIR_MAX + 1] = '\0';
	assert_true(asprintf(&yaml, MIN "ssh: {agent_dir: %s}\n", path) > 0);
	fails(yaml, "job.yaml:2:18: ssh.agent_dir is 1025 bytes long; at most "
		    "1024 are allowed");
	free(yaml);
	path[SPEC_AGENT_DIR_MAX] = '\0';
	assert_true(asprintf(&yaml, MIN "ssh: {agent_dir: %s}\n", path) > 0);
	s = ok(yaml);
	assert_int_equal(strlen(s->ssh.agent_dir), SPEC_AGENT_DIR_MAX);
	spec_free(s);
	free(yaml);
	free(path);
	round_trip(MIN "ssh: {agent_dir: \"/opt/it's: #herd\"}\n");
	round_trip(MIN "ssh: {agent_dir: '~'}\n");
	round_trip(MIN "ssh: {agent_dir: ~/x}\n");
}

static void test_round_trip_full_example(void **state)
{
	struct herd_err err;
	struct spec *a = spec_load("examples/spec/full.yaml", &err), *b;
	char *t1, *t2;

	(void)state;
	if (!a)
		print_error("%s\n", err.text);
	assert_non_null(a);
	assert_string_equal(a->name, "llama-ft");
	assert_int_equal(a->slurm.gpus_per_node, 8);
	assert_int_equal(a->health.progress_timeout_ms, 600000);
	t1 = printed(a);
	b = spec_parse(t1, strlen(t1), "x.yaml", &err);
	assert_non_null(b);
	t2 = printed(b);
	assert_string_equal(t1, t2);
	free(t1);
	free(t2);
	spec_free(a);
	spec_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_duration_parse),
	    cmocka_unit_test(test_duration_format),
	    cmocka_unit_test(test_duration_text),
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_name_from_path),
	    cmocka_unit_test(test_values),
	    cmocka_unit_test(test_sources),
	    cmocka_unit_test(test_unknown_key),
	    cmocka_unit_test(test_wrong_types),
	    cmocka_unit_test(test_counts),
	    cmocka_unit_test(test_min_above_count),
	    cmocka_unit_test(test_enums),
	    cmocka_unit_test(test_durations_in_spec),
	    cmocka_unit_test(test_host_sources),
	    cmocka_unit_test(test_transport),
	    cmocka_unit_test(test_duplicates),
	    cmocka_unit_test(test_document_shapes),
	    cmocka_unit_test(test_depth_and_bom),
	    cmocka_unit_test(test_required_and_size),
	    cmocka_unit_test(test_host_names),
	    cmocka_unit_test(test_exec_limits),
	    cmocka_unit_test(test_command_quoting),
	    cmocka_unit_test(test_log_mode),
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_health_gate_keys),
	    cmocka_unit_test(test_notify_grace),
	    cmocka_unit_test(test_agent_dir),
	    cmocka_unit_test(test_round_trip_full_example),
	};

	spec_free(NULL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
