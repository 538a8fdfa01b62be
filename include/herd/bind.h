/* bind.h — the binding policy: which GPU, NIC and CPUs each local rank of
 * a node gets.  A pure function of a topology (herd/topo.h), the number
 * of slots and the job's bind: keys; it touches no hardware.  Applying the
 * result (sched_setaffinity, the environment) is the agent's job.
 *
 * Policy for `slots` local ranks on a node with G GPUs (PCI bus order):
 *
 *   GPU   local rank i gets GPU floor(i * G / slots): consecutive ranks
 *         share a GPU when slots > G (8 ranks on 4 GPUs: 0,0,1,1,2,2,3,3),
 *         and GPUs are left idle in order when slots < G.  bind.gpu: none,
 *         or no GPU on the node: no GPU, and ranks are CPU-only.
 *   CPUs  a rank's domain is the CPUs of its GPU's NUMA node(s) (those of
 *         the GPU's nearest non-I/O hwloc ancestor); when those NUMA nodes
 *         have no PUs, the PUs of that ancestor itself (its package or
 *         the machine).  A CPU-only rank's domain is a NUMA node with
 *         PUs, by blocks: rank i gets the floor(i * N / slots)-th of the N
 *         NUMA nodes that have PUs (neighbouring ranks stay together).
 *         The ranks with the same domain split it evenly, whole cores
 *         first: with k ranks on C cores, k <= C, the j-th of them gets
 *         cores [floor(j*C/k), floor((j+1)*C/k)) with all their PUs; with
 *         k > C they split the domain's PUs (ordered core by core) the same
 *         way, at least one PU each (PUs are then shared when k > PUs).
 *           bind.cpu: cores  the rank's cpuset is its share;
 *           bind.cpu: numa   the rank's cpuset is the whole domain, shared
 *                            with the other ranks of that domain;
 *           bind.cpu: none   no cpuset.
 *         threads (OMP_NUM_THREADS) is the number of cores in the rank's
 *         share (1 when it holds only hyperthreads), in cores and numa
 *         mode alike, so ranks sharing a NUMA node do not oversubscribe it.
 *   NIC   bind.nic: auto  the NIC nearest the rank's GPU (or, CPU-only,
 *                         its NUMA node), by these classes:
 *                           0 behind the same PCIe switch (a PCI bridge
 *                             above both),
 *                           1 under the same host bridge (root complex),
 *                           2 on the same single NUMA node,
 *                           3 in the same package,
 *                           4 anywhere on the node;
 *                         among equally near NICs, the one fewest earlier
 *                         ranks of this node got, then the first by name
 *                         (ranks spread over NICs).
 *         bind.nic: list  rank i gets list[i mod n]; entries are "mlx5_0"
 *                         or "mlx5_0:2" (port) and must exist on the node.
 *         bind.nic: none  no NIC.
 *
 * Platform file (bind.topology_file, /etc/rdma/network_topology.json
 * style): what the operator knows beats discovery.  JSON:
 *
 *   {"gpus": [
 *      {"bus_id": "0000:03:00.0", "nic": "mlx5_1", "port": 1,
 *       "netdev": "ib1", "cpus": "48-63"},
 *      ...]}
 *
 * bus_id is required ("03:00.0" means domain 0000); nic, port, netdev and
 * cpus are optional and replace, for ranks on that GPU, the discovered
 * NIC (with its port and netdev), port, netdev and CPU domain.  Other keys
 * are errors; GPUs not listed keep discovery; "gpus" may be left out.  A
 * top-level "network" section (the NICs' link rates and fabric) is what
 * `herd render --tune` reads (herd/dstune.h); it is checked here too.  A bus id, NIC, netdev or
 * CPU the node does not have is an error naming the file and the entry.
 */
#ifndef HERD_BIND_H
#define HERD_BIND_H

#include <sched.h>
#include <stddef.h>

#include "herd/err.h"
#include "herd/spec.h"
#include "herd/topo.h"

/* A platform file larger than this is refused: one entry per GPU is a few
 * hundred bytes. */
#define BIND_PLATFORM_FILE_MAX (1024 * 1024)

/* Ranks on one node: the same bound as a hostfile's slots. */
#define BIND_SLOTS_MAX 65536

/* bind_env() writes at most this many variables. */
#define BIND_ENV_MAX 4

/* Longest value bind_env() writes: "=" + NIC name + ":" + port. */
#define BIND_ENV_VALUE_MAX (TOPO_NAME_MAX + 16)

/* A parsed platform file (opaque). */
struct bind_platform;

/* The job's bind: keys, borrowed from the spec and the platform file. */
struct bind_opts {
	enum spec_bind_gpu gpu;
	enum spec_bind_nic nic;
	enum spec_bind_cpu cpu;
	const char *const *nic_list; /* bind.nic list, n_nic_list entries */
	size_t n_nic_list;
	const struct bind_platform *platform; /* NULL: none */
};

/* What one local rank gets.  Strings are "" and numbers -1 when none. */
struct bind_rank {
	int local_rank;
	int gpu; /* index in the node's PCI bus order */
	char gpu_bus_id[TOPO_BUSID_MAX];
	char nic[TOPO_NAME_MAX];    /* mlx5_1 */
	int nic_port;		    /* 1-based; -1 without a NIC */
	char netdev[TOPO_NAME_MAX]; /* ib1 */
	char *cpus;  /* Linux cpu list "0-15,128-143"; NULL: no binding.
		      * Owned; bind_ranks_release() frees it. */
	int n_cpus;  /* PUs in cpus, 0 without a cpuset */
	int threads; /* cores of the rank's share (OMP_NUM_THREADS),
		      * 0 with bind.cpu: none */
	int numa;    /* os index of the one NUMA node holding all of cpus
		      * (its memory is preferred); -1: none or several */
};

/* One environment variable from bind_env(). */
struct bind_env_var {
	const char *key; /* static */
	char value[BIND_ENV_VALUE_MAX];
};

/* Fills o from spec's bind: section (borrowing spec's strings) with
 * platform as the parsed bind.topology_file (NULL when none). */
void bind_opts_from_spec(struct bind_opts *o, const struct spec *spec,
			 const struct bind_platform *platform);

/* Parses a platform file's text (len bytes); name is used in errors:
 * "name:line:col: message" for malformed JSON (from jansson), "name:
 * gpus[1].nic: expected a string" for a wrong shape.  Returns a platform
 * the caller frees with bind_platform_free(), or NULL with err. */
struct bind_platform *bind_platform_parse(const char *text, size_t len,
					  const char *name,
					  struct herd_err *err);

/* Reads path (at most BIND_PLATFORM_FILE_MAX bytes) and parses it. */
struct bind_platform *bind_platform_load(const char *path,
					 struct herd_err *err);

/* NULL is fine. */
void bind_platform_free(struct bind_platform *p);

/* The default number of slots on a node: its GPU count, or 1 without
 * GPUs. */
int bind_default_slots(const struct topo *t);

/* Plans `slots` local ranks (1..BIND_SLOTS_MAX) of one node with
 * topology t into out[0..slots-1] (caller-owned; previous contents are
 * overwritten, not freed).  Returns 0, or -1 with err (a platform file or
 * NIC list naming what the node lacks; out of memory) and nothing in out
 * to release. */
int bind_plan(const struct topo *t, int slots, const struct bind_opts *o,
	      struct bind_rank *out, struct herd_err *err);

/* Frees the cpus strings of out[0..n-1]; fine on zeroed entries. */
void bind_ranks_release(struct bind_rank *out, size_t n);

/* The environment that carries r's binding, in this order, only what
 * applies:
 *   CUDA_VISIBLE_DEVICES  the GPU index ("3")
 *   CUDA_DEVICE_ORDER     PCI_BUS_ID (so that index means bus order)
 *   NCCL_IB_HCA           "=mlx5_1:1": '=' makes NCCL match the name
 *                         exactly (a bare "mlx5_1" also matches mlx5_10)
 *   OMP_NUM_THREADS       r->threads
 * Writes at most BIND_ENV_MAX entries to out and returns how many.  The
 * caller applies the user's launch.env after these, so the user wins. */
size_t bind_env(const struct bind_rank *r, struct bind_env_var *out);

/* Converts r->cpus to a cpu_set_t for sched_setaffinity(); 0 on success,
 * -1 when r has no cpuset or a PU does not fit in cpu_set_t. */
int bind_rank_cpu_set(const struct bind_rank *r, cpu_set_t *set);

#endif
