/* tune.h — DeepSpeed bucket sizes for a job's network (`herd render
 * ds_zero3 --tune JOB.yaml`; `herd init` calls it too).  Where the
 * numbers come from, in this order:
 *
 *   1. a platform file with a "network" section (herd/dstune.h): the
 *      platform argument (--platform), else the job's bind.topology_file,
 *      else /etc/rdma/network_topology.json on the machine herd runs on;
 *      all read here, on the controller's machine, as bind.topology_file
 *      always is: one file describes every node (the job's nodes are
 *      alike; a file that differs per node would give different buckets
 *      per rank, which DeepSpeed cannot use anyway);
 *   2. else a `herd bench` run of the job (cmd/bench.c, in a child
 *      process whose stdout is read): an 8-byte and a 4 MiB ring
 *      all-reduce give the hop latency and the bandwidth.
 *
 * The rule (ds_tune_rule) then gives the sizes. */
#ifndef HERD_LAUNCHER_TUNE_H
#define HERD_LAUNCHER_TUNE_H

#include <stdbool.h>
#include <stdio.h>

#include "herd/dstune.h"
#include "herd/err.h"

/* The platform file read when neither --platform nor bind.topology_file
 * names one with a "network" section. */
#define TUNE_PLATFORM_DEFAULT "/etc/rdma/network_topology.json"

/* Ranks per node assumed when the job says slots: auto (GPUs found) and
 * nothing else tells: an 8-GPU node. */
#define TUNE_SLOTS_ASSUMED 8

/* The sizes and rounds of the bench run. */
#define TUNE_BENCH_SIZES "8,4M"
#define TUNE_BENCH_ITERS "5"

struct tune_result {
	char source[512]; /* "platform file PATH" or "herd bench" */
	bool measured;	  /* from herd bench */
	struct ds_platform_net platform; /* when !measured */
	struct ds_bench bench;		 /* when measured */
	long nodes, slots;		 /* P = nodes x slots */
	bool slots_assumed;		 /* TUNE_SLOTS_ASSUMED */
	struct ds_net net;		 /* what the rule got */
	struct ds_tuned tuned;		 /* what it gave */
};

/* Tunes for the job file at job_path: platform (NULL: none given) and
 * elem_bytes (2 for bf16/fp16, 4 for fp32) as above.  A bench run's own
 * progress and errors go to stderr.  Returns 0 with out filled, or the
 * exit status (2 the user's input: the job, the platform file; 1 the
 * bench run failed) with err. */
int tune_job(const char *job_path, const char *platform, int elem_bytes,
	     struct tune_result *out, struct herd_err *err);

/* Prints what tune_job measured and chose, "herd: tune: " lines, the last
 * two of key=value pairs:
 *   herd: tune: inputs latency_us=L bandwidth_Bps=R ranks=P elem_bytes=E
 *   herd: tune: chose reduce_bucket_size=... allgather_bucket_size=...
 *               stage3_prefetch_bucket_size=...
 *               stage3_param_persistence_threshold=... */
void tune_print(FILE *f, const struct tune_result *r);

#endif
