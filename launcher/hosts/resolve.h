/* resolve.h — turn a job spec's nodes: section into an ordered node list
 * plus spares.
 *
 * Each host source (hosts, hostfile, slurm, inventory, command) is one
 * entry of a table of functions in resolve.c; an entry without a function
 * is a source this herd cannot resolve here, reported as such.
 *
 * Rules applied after the source:
 *   - no source: the Slurm allocation when SLURM_JOB_ID is set, else the
 *     one node "localhost";
 *   - nodes.count N: the first N hosts are nodes, the rest become spares
 *     (before the hosts of nodes.spares); N above what the source gives is
 *     an error naming both numbers;
 *   - nodes.spares: expanded and appended to the spares; a host that is
 *     both node and spare, or a spare listed twice, is an error;
 *   - slots: nodes.slots when set, else what a hostfile says, else 0
 *     ("decided per node at launch").
 */
#ifndef HERD_LAUNCHER_RESOLVE_H
#define HERD_LAUNCHER_RESOLVE_H

#include "herd/err.h"
#include "herd/hostfile.h"
#include "herd/spec.h"

/* A discovery command's stdout beyond this is an error: a host list of the
 * largest cluster is well under 1 MiB; 16 MiB bounds a runaway script. */
#define RESOLVE_COMMAND_OUTPUT_MAX (16 * 1024 * 1024)

/* An inventory's answer beyond this is an error (as a command's). */
#define RESOLVE_INVENTORY_MAX RESOLVE_COMMAND_OUTPUT_MAX

/* The last line of a failing command's stderr quoted in the error. */
#define RESOLVE_STDERR_LINE_MAX 256

/* Why resolution failed: the exit status a command should give. */
enum resolve_fail {
	RESOLVE_FAIL_NONE = 0,
	RESOLVE_FAIL_INPUT,   /* the user's input: spec values, hostfile */
	RESOLVE_FAIL_RUNTIME, /* a command failed, timed out, no allocation */
};

/* The result; both lists are owned here and freed by resolve_free(). */
struct resolved {
	struct hostfile *nodes;	 /* at least one node */
	struct hostfile *spares; /* possibly empty, never NULL */
	enum resolve_fail fail;	 /* set when resolve_nodes() fails */
};

/* Resolves spec's nodes.  Paths (hostfile) are relative to the directory
 * of spec->path, where a discovery command also runs; its stderr passes
 * through to ours.  Returns 0 with res filled, or -1 with err filled,
 * res->fail saying which kind of failure, and no lists held. */
int resolve_nodes(const struct spec *spec, struct resolved *res,
		  struct herd_err *err);

/* Frees both lists and clears res; fine on a zeroed or failed res. */
void resolve_free(struct resolved *res);

#endif
