/* dstune.h — DeepSpeed ZeRO-3 bucket sizes from the network (`herd render
 * ds_zero3 --tune`).  A pure rule (ds_tune_rule), and the two ways herd
 * learns the network: the "network" section of a platform file
 * (ds_platform_net_parse) or the table `herd bench` prints
 * (ds_bench_parse).  Nothing here touches the network or the disk.
 *
 * The rule.  ZeRO-3's collectives (reduce-scatter of gradients, all-gather
 * of parameters) run as NCCL rings over all P ranks of the job.  A ring
 * collective of B bytes takes P - 1 steps; each step costs the hop
 * latency l (the slowest hop: the one between two nodes) and moves B / P
 * bytes over each link at the bandwidth r, so
 *
 *     T(B) = (P - 1) l  +  (P - 1)/P * B / r.
 *
 * The latency term is hidden when each step's transfer is K times its
 * latency: B / (P r) >= K l, i.e.
 *
 *     bucket_bytes = K * P * l * r,        K = 10 (latency <= 1/11 of T)
 *
 * and the bucket in DeepSpeed's unit (elements, not bytes) is
 * bucket_bytes / elem_bytes (2 for bf16/fp16, 4 for fp32), clamped to
 * [DS_BUCKET_MIN, DS_BUCKET_MAX].  reduce_bucket_size and
 * allgather_bucket_size are that bucket; stage3_prefetch_bucket_size is
 * DS_PREFETCH_BUCKETS buckets (one gathering while the previous one is
 * computed on), clamped the same; stage3_param_persistence_threshold is
 * the parameter size whose whole transfer takes as long as the
 * collective's latency, bucket / K (a smaller parameter's all-gather is
 * latency-bound: it is cheaper to keep it whole on every rank), clamped
 * to [DS_PERSIST_MIN, DS_PERSIST_MAX]. */
#ifndef HERD_DSTUNE_H
#define HERD_DSTUNE_H

#include <stdbool.h>
#include <stddef.h>

#include "herd/err.h"

#define DS_TUNE_K	    10.0
#define DS_BUCKET_MIN	    100000L    /* elements: 200 KB in bf16 */
#define DS_BUCKET_MAX	    500000000L /* elements: DeepSpeed's default, 1 GB */
#define DS_PREFETCH_BUCKETS 2
#define DS_PERSIST_MIN	    10000L
#define DS_PERSIST_MAX	    1000000L

/* Hop latency assumed per fabric when a platform file gives none (µs):
 * ib and roce: NCCL's own tuning model counts about 14 µs per network
 * step of a ring with its Simple protocol (the one large buffers use);
 * ethernet (NCCL's socket transport, TCP through the kernel): 50 µs. */
#define DS_LAT_IB_US	   14.0
#define DS_LAT_ROCE_US	   14.0
#define DS_LAT_ETHERNET_US 50.0

/* A platform file's network section above this many NICs is refused. */
#define DS_NICS_MAX 64

/* What the rule needs to know. */
struct ds_net {
	double hop_latency_us; /* l: one ring step between two nodes, > 0 */
	double bandwidth_Bps;  /* r: bytes/s a node sends into the ring, > 0 */
	long ranks;	       /* P: ranks of the job (nodes x slots), >= 2 */
	int elem_bytes;	       /* 2 (bf16, fp16) or 4 (fp32) */
};

/* What it gives; sizes are DeepSpeed's: elements. */
struct ds_tuned {
	double bucket_bytes; /* K P l r before clamping */
	long reduce_bucket_size;
	long allgather_bucket_size;
	long prefetch_bucket_size;
	long param_persistence_threshold;
	bool clamped_low, clamped_high; /* the bucket hit a bound */
};

/* Applies the rule above.  Inputs out of range (<= 0, NaN) are treated as
 * the smallest sensible value: latency 0.1 µs, bandwidth 1 B/s, 2 ranks,
 * 2 bytes per element, so the function always fills out. */
void ds_tune_rule(const struct ds_net *in, struct ds_tuned *out);

enum ds_fabric { DS_FABRIC_IB, DS_FABRIC_ROCE, DS_FABRIC_ETHERNET };

/* The "network" section of a platform file:
 *
 *   {"gpus": [...],                          (binding: herd/bind.h)
 *    "network": {
 *      "nics": [{"name": "mlx5_0", "rate_gbps": 400, "fabric": "ib"},
 *               ...],
 *      "latency_us": 14}}                    (optional)
 *
 * nics: the NICs the job's collectives use on each node (one entry per
 * NIC, not the management port); name a string (for messages), rate_gbps
 * the link rate in Gb/s (number > 0, at most 100000), fabric "ib",
 * "roce" or "ethernet".  latency_us (number > 0, at most 100000): the hop
 * latency; without it, the largest default of the NICs' fabrics.  Other
 * keys are errors. */
struct ds_platform_net {
	size_t n_nics;
	double rate_gbps_sum; /* the node's bandwidth into the ring */
	double latency_us;    /* given or the fabric default */
	bool latency_given;
	const char *fabric; /* "ib", "roce", "ethernet", "mixed" */
};

/* Parses text (len bytes; name for messages).  Returns 1 with out filled
 * when the file has a "network" section, 0 when it has none (a binding
 * only file), -1 with err ("name:line:col: ..." for malformed JSON,
 * "name: network.nics[1].rate_gbps: ..." for a wrong shape). */
int ds_platform_net_parse(const char *text, size_t len, const char *name,
			  struct ds_platform_net *out, struct herd_err *err);

/* What `herd bench` printed. */
struct ds_bench {
	int nodes;	    /* n of "ring all-reduce over n nodes" */
	size_t small_bytes; /* the smallest size's row */
	double small_time_us;
	size_t large_bytes; /* the largest size's row */
	double large_time_us;
	double large_busbw_GBps;
	double hop_latency_us; /* small_time_us / (2 (n - 1)) */
	/* large_busbw_GBps * 1e9, with the latency taken out when the large
	 * size's time is more than twice the small one's:
	 * * large_time / (large_time - small_time) (the alpha-beta model
	 * fitted through the two rows: busbw of the transfer alone). */
	double bandwidth_Bps;
};

/* Reads `herd bench`'s (herd-agent probe's) stdout: the node count and
 * the table rows.  Returns 0, or -1 with err (one node, no rows, a row
 * that says FAILED, a zero bandwidth). */
int ds_bench_parse(const char *text, struct ds_bench *out,
		   struct herd_err *err);

#endif
