/* sbatch_int.h — the job description of herd sbatch, shared by its two
 * halves (sbatch.c: from the spec, and the script; sbatch_slurm.c: its
 * submission through libslurm).  Private to launcher/transport/slurm/. */
#ifndef HERD_LAUNCHER_SBATCH_INT_H
#define HERD_LAUNCHER_SBATCH_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "herd/spec.h"
#include "launcher/transport/slurm/sbatch.h"

struct sbatch {
	char *name, *herd, *job_file, *workdir;
	char *output;	  /* absolute; NULL: Slurm's slurm-%j.out */
	char *output_dir; /* see sbatch_output_dir() */
	const char *partition, *account, *qos, *time; /* the spec's; NULL:
						       * not set */
	uint32_t time_limit; /* minutes; NO_VAL: the partition's */
	uint32_t nodes;
	uint32_t gpus_per_node; /* 0: none */
	bool exclusive, requeue;
	char *features, *gres, *exc_nodes, *req_nodes, *reservation;
	uint64_t memory;	/* MB (| MEM_PER_CPU); NO_VAL64: not set */
	uint16_t cpus_per_task; /* NO_VAL16: not set */
	char *tres_per_node;	/* "gres:gpu:N" and --gres, ','-joined */
	const struct spec_strv *extra; /* the spec's, written verbatim */
};

#endif
