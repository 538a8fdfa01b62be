/* spec.h — the job spec: job.yaml parsed with libyaml into one validated
 * struct, every key of the job file with its default filled in.
 *
 * Errors are "file:line:col: message" naming what was expected; unknown
 * keys suggest the nearest known key.  Text that later steps render
 * ({{name}}, {{checkpoint}}, {{resume_args}}, ...) is kept verbatim.
 *
 * A struct spec owns every string and array it points to; spec_free()
 * releases all of it.  NULL strings mean "not set" where the comment says
 * so; everything else has a default.
 */
#ifndef HERD_SPEC_H
#define HERD_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "herd/err.h"

/* A job file larger than this is refused before parsing: real specs are a
 * few KiB, and libyaml holds the whole document in memory. */
#define SPEC_FILE_MAX (1024 * 1024)

/* Collections nested deeper than this are refused while parsing (a job
 * file needs a handful of levels; libyaml's time grows with the square of
 * the depth). */
#define SPEC_DEPTH_MAX 32

enum spec_source {
	SPEC_SOURCE_NONE = 0,	/* no source key: hosts default to localhost */
	SPEC_SOURCE_HOSTS,	/* nodes.hosts: expression or list */
	SPEC_SOURCE_HOSTFILE,	/* nodes.hostfile: path */
	SPEC_SOURCE_SLURM,	/* nodes.slurm: true */
	SPEC_SOURCE_INVENTORY,	/* nodes.inventory: {url, token_env, filter} */
	SPEC_SOURCE_COMMAND,	/* nodes.command: discovery command */
};

/* nodes.transport: how each node's herd-agent is started.  auto: Slurm's
 * srun for nodes.slurm (or no source inside an allocation), a fork for a
 * lone localhost, else SSH.  local: every node of the host list gets its
 * own agent on this machine, which reports that node's name: a stand-in
 * for a cluster, to drive the controller with many named nodes. */
enum spec_transport { SPEC_TRANSPORT_AUTO = 0, SPEC_TRANSPORT_LOCAL };
enum spec_mode { SPEC_MODE_TORCH = 0, SPEC_MODE_PMIX, SPEC_MODE_PLAIN };
enum spec_host_keys { SPEC_HOST_KEYS_STRICT = 0, SPEC_HOST_KEYS_ACCEPT_NEW };
enum spec_bind_gpu { SPEC_BIND_GPU_AUTO = 0, SPEC_BIND_GPU_NONE };
enum spec_straggler {
	SPEC_STRAGGLER_WARN = 0,
	SPEC_STRAGGLER_OFF,
	SPEC_STRAGGLER_EVICT,
};
enum spec_warm { SPEC_WARM_AUTO = 0, SPEC_WARM_OFF };
enum spec_survivors { SPEC_SURVIVORS_KEEP = 0, SPEC_SURVIVORS_RESTART };
enum spec_memory { SPEC_MEMORY_AUTO = 0, SPEC_MEMORY_OFF };
enum spec_bind_nic {
	SPEC_BIND_NIC_AUTO = 0,
	SPEC_BIND_NIC_NONE,
	SPEC_BIND_NIC_LIST,	/* bind.nic given as a list: bind.nic_list */
};
enum spec_bind_cpu {
	SPEC_BIND_CPU_NUMA = 0,
	SPEC_BIND_CPU_CORES,
	SPEC_BIND_CPU_NONE,
};

/* A list of strings (env_pass globs, nic lists, slurm extra lines). */
struct spec_strv {
	char **v;
	size_t n;
};

/* metrics.patterns: one named POSIX extended regular expression with
 * exactly one capture group, applied to every line of rank output; the
 * group's text is the value (a number).  Compiled when the spec is parsed
 * (a bad pattern is a spec error at file:line:col) and compiled again
 * where it is used (the agent), from the text. */
#define SPEC_PATTERN_NAME_MAX 64
#define SPEC_PATTERN_MAX 1024
#define SPEC_PATTERNS_MAX 64

struct spec_pattern {
	char *name;	/* [A-Za-z_][A-Za-z0-9_]*, at most 64 bytes */
	char *regex;	/* POSIX ERE, at most 1024 bytes */
};

/* One environment entry, in the order written. */
struct spec_env {
	char *key;
	char *value;
};

/* Durations are milliseconds; -1 means "never / off" where allowed. */
struct spec {
	char *path;		/* the file as given (used in messages) */
	char *name;		/* default: file name without .yaml/.yml */

	struct {
		enum spec_source source;
		char *hosts;	/* SOURCE_HOSTS: one hostlist expression
				 * (a YAML list is joined with ',') */
		char *hostfile;	/* SOURCE_HOSTFILE */
		char *command;	/* SOURCE_COMMAND: run with /bin/sh -c */
		long command_timeout_ms;	/* default 30s */
		struct {
			char *url;
			char *token_env;	/* NULL: no token */
			char *filter;		/* NULL: none */
		} inventory;	/* SOURCE_INVENTORY */
		long count;	/* 0: all the source gives */
		long slots;	/* 0: GPUs found, else 1 */
		long min;	/* 0: all nodes (no shrinking) */
		char *spares;	/* hostlist expression, NULL: none */
		long readmit_after_ms;	/* -1: never (default) */
		enum spec_transport transport;	/* default auto */
	} nodes;

	struct {
		char *user;	/* NULL: the current user / ssh config */
		int port;	/* default 22 */
		char *identity;	/* NULL: ssh-agent and default keys */
		char *known_hosts;	/* default ~/.ssh/known_hosts */
		enum spec_host_keys host_keys;
		int fanout;	/* default 64 */
		long connect_timeout_ms;	/* default 10s */
		char *agent_dir;	/* default ~/.cache/herd: where each
					 * node keeps the uploaded herd-agent;
					 * absolute, or ~ / ~/... for the
					 * remote user's home */
	} ssh;

	struct {
		enum spec_mode mode;
		char *command;	/* required */
		char *workdir;	/* NULL: the directory herd runs in */
		struct spec_env *env;
		size_t n_env;
		struct spec_strv env_pass;	/* globs */
		int master_port;	/* default 29500 */
		enum spec_warm warm;	/* default auto: a warm Python
					 * interpreter per slot, for a
					 * command that runs a Python script */
		struct spec_strv preload;	/* modules the warm
						 * interpreter imports before
						 * LAUNCH; empty: by mode (torch:
						 * torch, torch.distributed) */
	} launch;

	struct {
		enum spec_bind_gpu gpu;
		enum spec_bind_nic nic;
		struct spec_strv nic_list;	/* nic: [mlx5_0, mlx5_1] */
		enum spec_bind_cpu cpu;
		char *topology_file;	/* NULL: discover with hwloc */
	} bind;

	struct {
		long heartbeat_ms;	/* default 500ms; see
					 * spec_silence_limit_ms */
		long timeout_ms;	/* default 3s */
		long grace_ms;		/* default 10s */
		long progress_timeout_ms;	/* -1: off (default) */
		long fence_timeout_ms;	/* pmix: a fence some node never
					 * joins fails the attempt (5m) */
		long notify_grace_ms;	/* pmix: how long the surviving
					 * ranks have, once told of a failure
					 * (PMIx event), before herd stops
					 * the attempt (default 1s; 0s: at
					 * once) */
		char *check_command;	/* NULL: none; a site's own check,
					 * run by sh -c on every node:
					 * non-zero is unhealthy, its last
					 * line of output the reason */
		bool preflight;		/* the gate before every attempt
					 * (default false) */
		long long min_free;	/* bytes free in workdir and
					 * checkpoint.dir (default 1 GiB) */
		enum spec_straggler straggler;	/* default warn */
		double straggler_ratio;	/* default 1.3 */
		long straggler_window_ms;	/* default 2m */
		int quarantine_after;	/* failures before a node is kept
					 * out of later runs (3; 0: never) */
		long quarantine_for_ms;	/* how long the record holds (24h) */
		long rejoin_timeout_ms;	/* a survivor that has not rejoined
					 * the new generation by then: the
					 * classic restart (default 30s) */
	} health;

	struct {
		int max;		/* default 3 */
		long backoff_ms;	/* default 2s; only between repeated
					 * failures (a crash loop) */
		enum spec_survivors survivors;	/* default keep (when the
						 * ranks speak the protocol) */
	} restart;

	struct {
		char *dir;		/* NULL: no checkpoints */
		char *latest_file;	/* NULL: use pattern */
		char *pattern;		/* NULL: none */
		char *complete_marker;	/* NULL: any match counts */
		char *resume_args;	/* NULL: empty */
		enum spec_memory memory; /* the memory tier: auto
					  * (default) or off */
		char *memory_dir;	/* the memory tier (default /dev/shm) */
		int replicas;		/* peer copies (default 1; 0: none) */
		long long memory_max;	/* bytes per node; 0: auto (half
					 * of memory_dir's filesystem) */
		long persist_every_ms;	/* memory -> dir (default 10m; -1:
					 * never) */
		bool keep_memory;	/* keep the tier at job end (false) */
	} checkpoint;

	struct {
		char *dir;		/* default "runs/{{name}}" */
		unsigned int mode;	/* of every log file, default 0600;
					 * directories get x where r is set */
	} log;

	struct {
		/* "HOST:PORT" or "PORT" (then 127.0.0.1); NULL: no
		 * Prometheus endpoint (default).  HOST is an IPv4 or
		 * bracketed IPv6 literal or "localhost". */
		char *listen;
		long interval_ms;	/* sample period; -1: auto (default),
					 * see spec_metrics_interval_ms */
		struct spec_pattern *patterns;	/* in the order written */
		size_t n_patterns;
	} metrics;

	struct {
		bool present;		/* a slurm: section was given */
		char *partition, *time, *account, *qos, *output;
		long nodes;		/* 0: nodes.count / host count */
		long gpus_per_node;	/* 0: not requested */
		bool exclusive;
		bool requeue;
		struct spec_strv extra;
	} slurm;
};

/* metrics.interval: auto takes 1 s up to SPEC_METRICS_PER_S nodes, then
 * one sample per node every nodes / SPEC_METRICS_PER_S seconds, so that
 * herd reads at most SPEC_METRICS_PER_S samples a second (each costs
 * its controller about 0.1 ms of CPU: 1,000 nodes at 1 s would take 10 %
 * of a core, at the auto 20 s 0.5 %). */
#define SPEC_METRICS_PER_S 50
static inline long spec_metrics_interval_ms(const struct spec *s, int nodes)
{
	if (s->metrics.interval_ms > 0)
		return s->metrics.interval_ms;
	if (nodes <= SPEC_METRICS_PER_S)
		return 1000;
	return (long)nodes * 1000 / SPEC_METRICS_PER_S;
}

/* Splits a metrics.listen value into a numeric host (IPv4 dotted or IPv6
 * without brackets; "localhost" and a bare port give "127.0.0.1") and a
 * port 1..65535.  host must have room for 46 bytes.  Returns 0, or -1
 * with err saying what is wrong. */
int spec_listen_parse(const char *text, char host[46], int *port,
		      struct herd_err *err);

/* Parses len bytes of YAML; path names the document in errors.  Returns a
 * validated spec the caller frees, or NULL with err filled. */
struct spec *spec_parse(const char *buf, size_t len, const char *path,
			struct herd_err *err);

/* Reads path (refusing files over SPEC_FILE_MAX) and parses it. */
struct spec *spec_load(const char *path, struct herd_err *err);

void spec_free(struct spec *spec);

/* Writes the resolved spec, every default filled in, as YAML that
 * spec_parse() accepts again.  Defaults without a number print as words
 * the parser takes back: count/min "all", slots and slurm.nodes "auto",
 * readmit_after "never", progress_timeout "off", unset strings "~".
 * Returns 0 or -1 (errno from stdio). */
int spec_print(const struct spec *spec, FILE *out);

/* 400 ms: TCP's shortest retransmission timeout (Linux TCP_RTO_MIN,
 * 200 ms, for a LAN's RTT), plus 200 ms for the kernel's timer granularity
 * (its retransmission timers fire up to tens of ms late, each), a heal
 * that lands just after a retransmission, and a busy scheduler on both
 * ends.  See spec_silence_limit_ms. */
#define SPEC_SILENCE_RTO_MS 400

/* The failure-detection rule: herd fails a node after
 * silence of
 *
 *     health.timeout + health.heartbeat + SPEC_SILENCE_RTO_MS
 *
 * (an agent judges herd cut off by the same rule with herd's interval:
 * spec_herd_silence_limit_ms).
 *
 * Why: after a network blip of length B, TCP delivers the first frame at
 * its next retransmission, which backs off from the RTO r (200 ms) as r,
 * 3r, 7r...: 0.2, 0.6, 1.4, 3.0, 6.2 s after the first lost send.  The
 * retransmission before the heal came less than B after that send and the
 * next one comes at most twice as late plus r, so the first frame arrives
 * less than 2B + r after the first lost send, itself at most one heartbeat
 * after the last frame that got through: a blip of B = timeout/2 leaves a
 * silence under heartbeat + timeout + r, below the limit.  A partition
 * that does not heal is caught at most the limit after it began:
 * health.timeout + 0.9 s with the default heartbeat (500 ms), within
 * health.timeout + 1 s for any heartbeat up to 600 ms. */
static inline long spec_silence_limit_ms(long timeout_ms, long heartbeat_ms)
{
	return timeout_ms + heartbeat_ms + SPEC_SILENCE_RTO_MS;
}

/* herd's own HEARTBEAT to each agent goes out every SPEC_HERD_BEATS
 * heartbeats (1 s with the default 500 ms), the agents' to herd every
 * health.heartbeat.  herd's detection of a node needs the node's frames
 * often (the heartbeat term of spec_silence_limit_ms is the node's
 * interval); an agent's only needs herd's, with herd's interval in the
 * rule.  Each frame herd writes wakes an agent, and with 1,000 nodes
 * those wakeups were most of an idle herd's CPU (bench/README.md). */
#define SPEC_HERD_BEATS 2

static inline long spec_herd_beat_ms(long heartbeat_ms)
{
	return SPEC_HERD_BEATS * heartbeat_ms;
}

/* The rule an agent applies to herd: the same, with herd's interval:
 * health.timeout + SPEC_HERD_BEATS * health.heartbeat +
 * SPEC_SILENCE_RTO_MS (4.4 s with the defaults). */
static inline long spec_herd_silence_limit_ms(long timeout_ms,
					      long heartbeat_ms)
{
	return spec_silence_limit_ms(timeout_ms,
				     spec_herd_beat_ms(heartbeat_ms));
}

const char *spec_mode_name(enum spec_mode mode);
const char *spec_source_name(enum spec_source source);
const char *spec_transport_name(enum spec_transport transport);
const char *spec_host_keys_name(enum spec_host_keys host_keys);
const char *spec_bind_gpu_name(enum spec_bind_gpu gpu);
const char *spec_bind_cpu_name(enum spec_bind_cpu cpu);
const char *spec_straggler_name(enum spec_straggler straggler);
const char *spec_warm_name(enum spec_warm warm);
const char *spec_survivors_name(enum spec_survivors survivors);
const char *spec_memory_name(enum spec_memory memory);

/* Lists (env, env_pass, bind.nic, slurm.extra) hold at most this many
 * entries: far beyond any real job, and it bounds the duplicate check. */
#define SPEC_LIST_MAX 4096

/* Linux's MAX_ARG_STRLEN (32 pages): the most bytes, NUL included, of
 * one argv or environment string handed to execve(); more fails with
 * E2BIG.  launch.command reaches the rank as the one argument of
 * `sh -c`, and each launch.env entry as one NAME=VALUE string, so
 * `herd validate` refuses what cannot be exec'd.  (The total of every
 * argument and variable, ARG_MAX, depends on the node's stack limit and
 * environment: only the exec on the node can tell, and the agent reports
 * its errno per rank.) */
#define SPEC_ARG_STRLEN_MAX (32 * 4096)

/* log.mode when the spec says nothing: logs and events for the user only
 * (training output can hold tokens and paths). */
#define SPEC_LOG_MODE_DEFAULT 0600u

/* ssh.agent_dir is at most this long: it is a directory on every node,
 * and with the agent's name it must stay well under PATH_MAX. */
#define SPEC_AGENT_DIR_MAX 1024

/* The longest duration accepted: one year, in milliseconds. */
#define SPEC_DURATION_MAX (8760L * 3600 * 1000)

/* Parses a duration: decimal digits and a unit, one of ms, s, m, h
 * ("500ms", "3s", "2m", "1h"); a plain number has no unit and is refused.
 * Stores milliseconds in *ms.  Returns 0, or -1 with err saying what was
 * expected (no position: the caller adds it). */
int spec_duration_parse(const char *text, long *ms, struct herd_err *err);

/* Writes ms (>= 0) with the largest unit that divides it exactly ("90s",
 * "2m", "1500ms") into buf of size bytes.  Returns 0, or -1 when buf is too
 * small or ms is negative. */
int spec_duration_format(long ms, char *buf, size_t size);

/* Room for any duration spec_duration_text writes. */
#define SPEC_DURATION_TEXT 32

/* A duration from the spec as a message shows it, the way the spec
 * writes durations ("10s", not "10000 ms"): spec_duration_format into
 * buf (at least SPEC_DURATION_TEXT bytes), else "Nms".  Returns buf. */
const char *spec_duration_text(long ms, char *buf, size_t size);

/* Parses a byte count: decimal digits with an optional binary unit, one
 * of K, M, G, T (or KiB, MiB, GiB, TiB), e.g. "512M", "10G", "0".
 * Returns 0, or -1 with err saying what was expected. */
int spec_bytes_parse(const char *text, long long *bytes, struct herd_err *err);

/* Writes bytes with the largest binary unit that divides it ("10G",
 * "1536M", "7") into buf.  Returns 0, or -1 when buf is too small. */
int spec_bytes_format(long long bytes, char *buf, size_t size);

#endif
