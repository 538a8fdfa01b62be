/* measure.h — the parts of the agent's sampler (measure.c, nvml.c) that
 * the unit tests drive directly: the readers take the root of what they
 * read, so a test hands them a temporary directory instead of /proc or
 * /sys. */
#ifndef HERD_AGENT_METRICS_H
#define HERD_AGENT_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "herd/proto.h"

/* 4 KiB: the longest line of a $HERD_METRICS file; a longer one is
 * skipped (counted as bad).  Also how much of an output line the
 * patterns see. */
#define METRICS_LINE_MAX 4096
/* 1 MiB: the most read from one rank's $HERD_METRICS per sample; the rest
 * waits for the next sample, so a rank that writes wildly cannot make a
 * sample take long. */
#define METRICS_READ_MAX (1024u * 1024)

/* One training value of a rank. */
struct train_value {
	char name[65];	/* proto.h's metric name, at most 64 bytes */
	double v;
};

/* What one rank reported: its $HERD_METRICS file (tailed) and the lines
 * of its output that metrics.patterns matched. */
struct train {
	int fd;		/* the file, -1 until it exists */
	off_t off;	/* bytes of it consumed */
	char line[METRICS_LINE_MAX];	/* a partial last line */
	size_t len;
	bool skipping;	/* inside a line over METRICS_LINE_MAX */
	int64_t records;	/* records seen */
	int64_t bad;	/* lines skipped: over the limit, not a JSON object */
	struct train_value vals[PROTO_TRAIN_VALUES_MAX];
	int n_vals;
	int64_t cpu_ms;	/* last sampled CPU time of the rank */
};

/* Records value under name: "tokens" and "samples" add up, every other
 * name keeps its latest value.  A name that is not a metric name, a value
 * that is not finite, or a new name past PROTO_TRAIN_VALUES_MAX is
 * dropped.  Returns true when kept. */
bool train_set(struct train *t, const char *name, double value);

/* Feeds len bytes of a $HERD_METRICS file: every complete line is one
 * JSON object whose numeric keys are recorded (train_set); a partial last
 * line waits for the rest.  Lines over METRICS_LINE_MAX and lines that
 * are not a JSON object count as bad and are skipped. */
void train_feed(struct train *t, const char *buf, size_t len);

/* The rank's values as METRICS carries them: {NAME: number}. */
json_t *train_values(const struct train *t);

/* Reads a /proc/net/dev file (path) and appends one entry per interface
 * but lo (at most PROTO_METRICS_DEVS_MAX) to arr, as METRICS' net.
 * Returns 0, or -1 when the file cannot be read. */
int metrics_read_net(const char *path, json_t *arr);

/* Reads the RDMA port counters under root (/sys/class/infiniband):
 * root/DEV/ports/PORT/counters/{port_rcv_data, port_xmit_data,
 * link_downed, symbol_error, port_rcv_errors}, in name order, at most
 * PROTO_METRICS_DEVS_MAX ports, appended to arr as METRICS' rdma (data
 * counters are 4-byte words: x 4).  A missing root is no RDMA (0). */
int metrics_read_rdma(const char *root, json_t *arr);

/* nvml.c: NVML, loaded at run time.  Opaque. */
struct gpu;

/* dlopen()s lib ("libnvidia-ml.so.1"), initialises NVML and finds the
 * GPUs.  Returns the handle; with no usable NVML, a handle whose
 * gpu_error() says why ("no NVML (...)").  NULL only when out of
 * memory. */
struct gpu *gpu_open(const char *lib);
/* Why there are no GPU values, or NULL. */
const char *gpu_error(const struct gpu *g);
/* Appends METRICS' gpus entries (values NVML cannot give left out) to
 * arr, Xid events collected first (never waiting). */
void gpu_sample(struct gpu *g, json_t *arr);
void gpu_close(struct gpu *g);
/* The health gate's "gpus" check (check.h's entry): expected GPUs (-1:
 * none asked for) visible, none with uncorrectable (volatile) ECC errors
 * or retired pages pending.  No NVML: skipped, or a failure when GPUs
 * are expected. */
json_t *gpu_check(struct gpu *g, int expected);
struct agent;
json_t *metrics_gpu_check(struct agent *a, int expected);

#endif
