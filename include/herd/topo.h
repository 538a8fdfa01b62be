/* topo.h — what a node's hardware looks like to binding: GPUs, RDMA NICs,
 * Ethernet netdevs, NUMA nodes, packages and cores.
 *
 * Read once from hwloc (live discovery of this machine, or an XML export
 * made with lstopo), always with I/O discovery, then kept as plain data:
 * no hwloc topology is held after topo_load() returns.  The same data
 * travels as JSON (topo_summary(), sent in an agent's HELLO) and is
 * rebuilt on the controller with topo_from_summary(), so the binding
 * policy (herd/bind.h) plans a node it never touched.
 *
 * What counts as what:
 *   GPU     an NVIDIA PCI device (vendor 10de, class 0300 VGA or 0302 3D),
 *           or a CUDA/NVML OS device (cuda*, nvml*).  An OS device whose
 *           parent is a PCI device is that PCI device: one GPU, never two.
 *           Other display devices (the BMC's VGA chip) and NVSwitches are
 *           not GPUs.  Sorted in PCI bus order: index i is what CUDA calls
 *           device i with CUDA_DEVICE_ORDER=PCI_BUS_ID.
 *   NIC     an OpenFabrics OS device (mlx5_0, mlx4_0), its port (the
 *           lowest PortN in hwloc's info attributes whose PortNState is 4
 *           ACTIVE, else the lowest PortN, else 1) and its netdev (the
 *           network OS device under the same PCI function, e.g. ib0).
 *           Sorted by name.
 *   netdev  every other network OS device (Ethernet: eno1, enp225s0f0),
 *           sorted by name.
 *
 * Where a device sits (struct topo_loc): the NUMA nodes and package of
 * its nearest non-I/O ancestor, the PUs of that ancestor, and the chain
 * of host bridge and PCI bridges above it, from which "behind the same
 * PCIe switch" is decided.
 *
 * Every array is owned by the struct topo; topo_free() releases it.
 * Callers read the fields and never change them.
 */
#ifndef HERD_TOPO_H
#define HERD_TOPO_H

#include <stddef.h>

#include <hwloc.h>
#include <jansson.h>

#include "herd/err.h"

/* Device and interface names: IFNAMSIZ is 16, IB device names are at
 * most 64 (IB_DEVICE_NAME_MAX); longer names are refused. */
#define TOPO_NAME_MAX 64

/* "dddd:bb:dd.f" and a NUL; host bridges are written "dddd:bb". */
#define TOPO_BUSID_MAX 16

/* Bridges between a root complex and a device, host bridge included:
 * real machines have fewer than 8 (the DGX-2 has 6). */
#define TOPO_PCI_DEPTH_MAX 16

/* GPUs, NICs or netdevs on one node: real nodes have at most a few dozen;
 * the bound keeps a hostile summary from asking for unbounded memory. */
#define TOPO_DEVICES_MAX 1024

/* Cores, PUs, NUMA nodes or packages on one node, and the highest PU
 * number accepted: 4x the largest machines built today. */
#define TOPO_CPUS_MAX 16384

/* An XML file larger than this is refused before hwloc reads it: the
 * exports of large nodes are a few MiB. */
#define TOPO_XML_MAX (64 * 1024 * 1024)

/* Where a device or a NUMA node sits. */
struct topo_loc {
	hwloc_bitmap_t cpuset;	/* PUs of the nearest non-I/O ancestor */
	hwloc_bitmap_t nodeset; /* NUMA nodes (os indexes) local to it */
	int package;		/* os index of the one package holding it,
				 * -1 when it hangs above packages */
	int n_path;		/* entries of path used */
	/* host bridge ("dddd:bb", its secondary bus) then each PCI bridge
	 * (its own bus id) from the root down; empty for non-PCI places */
	char path[TOPO_PCI_DEPTH_MAX][TOPO_BUSID_MAX];
};

struct topo_gpu {
	char bus_id[TOPO_BUSID_MAX]; /* "0000:03:00.0"; "" when only an OS
				      * device without a PCI parent is known */
	char name[TOPO_NAME_MAX];    /* its OS device (nvml0, cuda0) or "" */
	struct topo_loc loc;
};

struct topo_nic {
	char name[TOPO_NAME_MAX];    /* mlx5_0 */
	int port;		     /* 1-based */
	char netdev[TOPO_NAME_MAX];  /* ib0, or "" when none */
	char bus_id[TOPO_BUSID_MAX]; /* "" when not under a PCI device */
	struct topo_loc loc;
};

struct topo_netdev {
	char name[TOPO_NAME_MAX];
	char bus_id[TOPO_BUSID_MAX];
	struct topo_loc loc;
};

struct topo_numa {
	unsigned os_index;
	int package;	       /* as in topo_loc */
	hwloc_bitmap_t cpuset; /* may be empty: memory-only nodes */
};

struct topo_package {
	unsigned os_index;
	hwloc_bitmap_t cpuset;
};

struct topo {
	hwloc_bitmap_t pus;    /* every PU binding may use */
	hwloc_bitmap_t *cores; /* PUs of each core, in PU order */
	size_t n_cores;
	struct topo_numa *numa; /* in os index order */
	size_t n_numa;
	struct topo_package *packages; /* in os index order */
	size_t n_packages;
	struct topo_gpu *gpus; /* PCI bus order */
	size_t n_gpus;
	struct topo_nic *nics; /* name order */
	size_t n_nics;
	struct topo_netdev *netdevs; /* name order */
	size_t n_netdevs;
};

/* topo_load() flags. */
enum {
	/* Skip I/O discovery: no GPUs, NICs or netdevs (benchmarks only;
	 * binding needs I/O). */
	TOPO_NO_IO = 1u << 0,
	/* Keep every PCI device and bridge (HWLOC_TYPE_FILTER_KEEP_ALL)
	 * instead of the important ones only; the answer is the same, the
	 * load is slower. */
	TOPO_IO_ALL = 1u << 1,
};

/* Loads the topology of this machine (xml_path NULL: live discovery,
 * which hwloc lets HWLOC_XMLFILE redirect) or of the lstopo XML export at
 * xml_path (read here, at most TOPO_XML_MAX bytes).  Live discovery
 * leaves out hwloc's pci (libpciaccess; Linux sysfs discovery already
 * gives the PCI devices), opencl and gl components.  Returns a topology
 * the caller frees with topo_free(), or NULL with err naming the file
 * and what was wrong ("cannot open", "not an hwloc XML topology", "no
 * PUs"). */
struct topo *topo_load(const char *xml_path, unsigned flags,
		       struct herd_err *err);

/* Frees t and everything it owns; NULL is fine. */
void topo_free(struct topo *t);

/* The JSON summary of t, for an agent's HELLO and for topo_from_summary():
 *
 *   {"pus": "0-255",
 *    "cores": ["0,128", "1,129", ...],
 *    "numa": [{"os_index": 0, "package": 0, "cpus": "0-15,128-143"}, ...],
 *    "packages": [{"os_index": 0, "cpus": "0-63,128-191"}, ...],
 *    "gpus": [{"bus_id": "0000:03:00.0", "name": "", LOC}, ...],
 *    "nics": [{"name": "mlx5_1", "port": 1, "netdev": "ib1",
 *              "bus_id": "0000:04:00.0", LOC}, ...],
 *    "netdevs": [{"name": "eno1", "bus_id": "0000:61:00.0", LOC}, ...]}
 *
 * where LOC is "cpus": cpu list, "numa": NUMA node list ("3"), "package":
 * os index or -1, "pci_path": ["0000:00", "0000:00:01.1", ...].  Counts are
 * the array lengths.  Returns a new reference, or NULL when out of
 * memory. */
json_t *topo_summary(const struct topo *t);

/* Rebuilds a topology from topo_summary()'s JSON, checking every field
 * and bound (TOPO_DEVICES_MAX, TOPO_CPUS_MAX, name lengths).  Returns a
 * topology the caller frees, or NULL with err naming the first bad field
 * ("topology summary: gpus[2].bus_id: expected a string"). */
struct topo *topo_from_summary(const json_t *summary, struct herd_err *err);

/* Writes the cpu list of set ("0-15,64-79"; "" for an empty set) into a
 * new string the caller frees, or returns NULL when out of memory. */
char *topo_cpulist(hwloc_const_bitmap_t set);

#endif
