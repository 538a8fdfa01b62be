/* pmix/topo.c — this node's hardware topology, given to the ranks.
 *
 * Open MPI's MPI_Init loads the node's hwloc topology (with its I/O
 * devices) in every rank, unless its PMIx server gives it one: the job
 * data's PMIX_LOCAL_TOPO, the topology as hwloc XML, which Open MPI 4.1
 * loads instead (as it does under its own daemons).  Each rank's
 * discovery reads much of /sys; the ranks of a node do it at the same
 * time, and it was the largest part of herd's MPI_Init that a launcher
 * can take away (bench/README.md).  The agent registers the XML with
 * the attempt's namespace instead: read from the user's cache directory
 * (rundir.c, beside the topology summary of HELLO, under the same key:
 * the host, its boot, its devices, this agent's allowed cpus and memory)
 * or, when none matches, discovered once on a thread of its own started
 * with the PMIx server (the wait for herd's LAUNCH hides it) and kept
 * there for the next start.  The ranks' cpu binding is set by the agent
 * as before (the XML is the node's, the binding the rank's own).
 *
 * Discovery as Open MPI's: the important I/O devices (PCI bridges,
 * GPUs, NICs), without the components the agent never needs (lib/topo/topo.c
 * says why: "pci" repeats the linux component's sysfs reading, "opencl"
 * and "gl" start drivers).  A topology that cannot be read, or whose
 * XML is larger than TOPO_XML_MAX, is not given: the ranks discover
 * their own, as before.
 *
 * The same MPI_Init opens and starts, in every rank, the point-to-point
 * layers that need an RDMA fabric (Open MPI's pml cm with its psm, psm2
 * and ofi transports, and pml ucx), which on a node without one all give
 * up, some after a timed wait, before ob1 (shared memory and TCP) is
 * taken: about 150 ms of each rank's MPI_Init here.  On a node with no
 * RDMA device, psrv_setup_proc says ob1 at once (OMPI_MCA_pml), unless
 * the node's or the job's environment chooses.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hwloc.h>

#include "agent/pmix/pmix_int.h"

/* Larger ones (hosts with many devices) are left to the ranks. */
#define TOPO_XML_MAX (4u << 20)

static pthread_t topo_thread;
static bool topo_started, topo_joined;
static char *topo_xml;	  /* written by the thread, read after the join */
static int topo_dfd = -1; /* the thread's own dup of a->user_fd */

static void *discover(void *arg)
{
	static const char *const skip[] = {"pci", "opencl", "gl"};
	hwloc_topology_t t;
	char *xml = NULL;
	int len = 0;

	(void)arg;
	if (hwloc_topology_init(&t) < 0)
		return NULL;
	hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	for (size_t i = 0; i < sizeof(skip) / sizeof(*skip); i++)
		hwloc_topology_set_components(
		    t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, skip[i]);
	if (hwloc_topology_load(t) == 0 &&
	    hwloc_topology_export_xmlbuffer(t, &xml, &len, 0) == 0 && xml) {
		if (len > 1 && (unsigned)len <= TOPO_XML_MAX &&
		    (topo_xml = strdup(xml)) && topo_dfd >= 0)
			rundir_topo_xml_put(topo_dfd, topo_xml);
		hwloc_free_xmlbuffer(t, xml);
	}
	hwloc_topology_destroy(t);
	if (topo_dfd >= 0)
		close(topo_dfd);
	topo_dfd = -1;
	return NULL;
}

void psrv_topo_start(struct agent *a)
{
	if (topo_started)
		return;
	topo_started = true;
	if (a->user_ok && (topo_xml = rundir_topo_xml_get(a->user_fd))) {
		topo_joined = true;
		return;
	}
	if (a->user_ok)
		topo_dfd = fcntl(a->user_fd, F_DUPFD_CLOEXEC, 3);
	if (pthread_create(&topo_thread, NULL, discover, NULL) != 0) {
		if (topo_dfd >= 0)
			close(topo_dfd);
		topo_dfd = -1;
		topo_joined = true; /* none: the ranks discover their own */
	}
}

/* Whether dir has an entry (not "." or ".."); false when it is missing. */
static bool has_entry(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	bool any = false;

	if (!d)
		return false;
	while (!any && (e = readdir(d)))
		any = e->d_name[0] != '.' &&
		      (!prefix || !strncmp(e->d_name, prefix, strlen(prefix)));
	closedir(d);
	return any;
}

bool psrv_node_has_fabric(void)
{
	static int known = -1;

	/* Every RDMA device (InfiniBand, RoCE, Omni-Path's hfi1, QLogic's
	 * qib, EFA, usNIC) is a verbs device in /sys/class/infiniband;
	 * Slingshot's are in /sys/class/cxi; PSM's device files too. */
	if (known < 0)
		known = has_entry("/sys/class/infiniband", NULL) ||
			has_entry("/sys/class/cxi", NULL) ||
			has_entry("/dev", "hfi1") || has_entry("/dev", "ipath");
	return known;
}

const char *psrv_topo_xml(struct agent *a)
{
	psrv_topo_start(a);
	if (!topo_joined) {
		pthread_join(topo_thread, NULL);
		topo_joined = true;
	}
	return topo_xml;
}
