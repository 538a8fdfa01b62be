/* topo.c — a node's GPUs, NICs, netdevs, NUMA nodes and cores, read once
 * from hwloc and kept as plain data.  See herd/topo.h for the contract.
 *
 * hwloc answers every question here (what is a GPU's PCI parent, which
 * bridge is above it, which PUs a NUMA node has); nothing reads sysfs or
 * parses the XML by hand.  The hwloc topology lives only inside
 * topo_load().  The JSON summary, to and from, is topo_json.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "herd/file.h"
#include "herd/topo.h"
#include "topo_int.h"

/* PCI vendor id of NVIDIA and the display classes its GPUs report. */
#define PCI_VENDOR_NVIDIA 0x10de
#define PCI_CLASS_VGA	  0x0300
#define PCI_CLASS_3D	  0x0302

/* InfiniBand port state ACTIVE in hwloc's PortNState info. */
#define IB_PORT_ACTIVE "4"

/* hwloc components left out of live discovery (see topo_load()). */
static const char *const live_skip[] = {"pci", "opencl", "gl"};

/* Highest port number looked for in PortNState infos: HCAs have 1 or 2. */
#define NIC_PORTS_MAX 16

/* --- small helpers ---------------------------------------------------- */

static void loc_clear(struct topo_loc *loc)
{
	hwloc_bitmap_free(loc->cpuset);
	hwloc_bitmap_free(loc->nodeset);
	loc->cpuset = NULL;
	loc->nodeset = NULL;
}

void topo_free(struct topo *t)
{
	if (!t)
		return;
	hwloc_bitmap_free(t->pus);
	for (size_t i = 0; i < t->n_cores; i++)
		hwloc_bitmap_free(t->cores[i]);
	free(t->cores);
	for (size_t i = 0; i < t->n_numa; i++)
		hwloc_bitmap_free(t->numa[i].cpuset);
	free(t->numa);
	for (size_t i = 0; i < t->n_packages; i++)
		hwloc_bitmap_free(t->packages[i].cpuset);
	free(t->packages);
	for (size_t i = 0; i < t->n_gpus; i++)
		loc_clear(&t->gpus[i].loc);
	free(t->gpus);
	for (size_t i = 0; i < t->n_nics; i++)
		loc_clear(&t->nics[i].loc);
	free(t->nics);
	for (size_t i = 0; i < t->n_netdevs; i++)
		loc_clear(&t->netdevs[i].loc);
	free(t->netdevs);
	free(t);
}

char *topo_cpulist(hwloc_const_bitmap_t set)
{
	char *s = NULL;

	if (hwloc_bitmap_iszero(set))
		return strdup("");
	if (hwloc_bitmap_list_asprintf(&s, set) < 0)
		return NULL;
	return s;
}

/* Copies src into a fixed field; -1 when it does not fit. */
int topo_copy_name(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);

	if (n >= size)
		return -1;
	memcpy(dst, src, n + 1);
	return 0;
}

/* Grows *v (of *n elements of size sz) by one zeroed element; returns it
 * or NULL when out of memory or past TOPO_DEVICES_MAX. */
static void *push(void *v, size_t *n, size_t sz, size_t max)
{
	void **pv = v;
	char *nv;

	if (*n >= max)
		return NULL;
	nv = realloc(*pv, (*n + 1) * sz);
	if (!nv)
		return NULL;
	*pv = nv;
	memset(nv + *n * sz, 0, sz);
	return nv + (*n)++ * sz;
}

static int cmp_gpu(const void *a, const void *b)
{
	const struct topo_gpu *x = a, *y = b;

	/* GPUs without a bus id go last, by name. */
	if (!x->bus_id[0] != !y->bus_id[0])
		return x->bus_id[0] ? -1 : 1;
	if (x->bus_id[0])
		return strcmp(x->bus_id, y->bus_id);
	return strcmp(x->name, y->name);
}

static int cmp_nic(const void *a, const void *b)
{
	return strcmp(((const struct topo_nic *)a)->name,
		      ((const struct topo_nic *)b)->name);
}

static int cmp_netdev(const void *a, const void *b)
{
	return strcmp(((const struct topo_netdev *)a)->name,
		      ((const struct topo_netdev *)b)->name);
}

static int cmp_numa(const void *a, const void *b)
{
	unsigned x = ((const struct topo_numa *)a)->os_index;
	unsigned y = ((const struct topo_numa *)b)->os_index;

	return x < y ? -1 : x > y;
}

static int cmp_package(const void *a, const void *b)
{
	unsigned x = ((const struct topo_package *)a)->os_index;
	unsigned y = ((const struct topo_package *)b)->os_index;

	return x < y ? -1 : x > y;
}

static int cmp_core(const void *a, const void *b)
{
	int x = hwloc_bitmap_first(*(hwloc_const_bitmap_t const *)a);
	int y = hwloc_bitmap_first(*(hwloc_const_bitmap_t const *)b);

	return x < y ? -1 : x > y;
}

/* Sorts the arrays into the documented orders. */
void topo_sort(struct topo *t)
{
	if (t->n_cores)
		qsort(t->cores, t->n_cores, sizeof(*t->cores), cmp_core);
	if (t->n_numa)
		qsort(t->numa, t->n_numa, sizeof(*t->numa), cmp_numa);
	if (t->n_packages)
		qsort(t->packages, t->n_packages, sizeof(*t->packages),
		      cmp_package);
	if (t->n_gpus)
		qsort(t->gpus, t->n_gpus, sizeof(*t->gpus), cmp_gpu);
	if (t->n_nics)
		qsort(t->nics, t->n_nics, sizeof(*t->nics), cmp_nic);
	if (t->n_netdevs)
		qsort(t->netdevs, t->n_netdevs, sizeof(*t->netdevs),
		      cmp_netdev);
}

/* --- from hwloc -------------------------------------------------------- */

static void pci_busid(const struct hwloc_pcidev_attr_s *p, char *buf)
{
	snprintf(buf, TOPO_BUSID_MAX, "%04x:%02x:%02x.%01x",
		 (unsigned)p->domain & 0xffff, (unsigned)p->bus,
		 (unsigned)p->dev, (unsigned)p->func & 0xf);
}

static int package_of(hwloc_topology_t topo, hwloc_obj_t obj)
{
	hwloc_obj_t p;

	if (obj->type == HWLOC_OBJ_PACKAGE)
		return (int)obj->os_index;
	p = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, obj);
	return p ? (int)p->os_index : -1;
}

/* Fills loc for an I/O object (PCI device or OS device). */
static int loc_of_io(hwloc_topology_t topo, hwloc_obj_t obj,
		     struct topo_loc *loc)
{
	hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, obj);
	hwloc_obj_t b, first = obj->parent;
	int n = 0, skip;

	if (!anc)
		return -1;
	/* An OS device hangs under its PCI device: the bridges start
	 * above that. */
	while (first && (first->type == HWLOC_OBJ_OS_DEVICE ||
			 first->type == HWLOC_OBJ_PCI_DEVICE))
		first = first->parent;
	loc->cpuset = hwloc_bitmap_dup(anc->cpuset);
	loc->nodeset = hwloc_bitmap_dup(anc->nodeset);
	if (!loc->cpuset || !loc->nodeset)
		return -1;
	loc->package = package_of(topo, anc);
	/* Count the bridges above, then write them root first; past
	 * TOPO_PCI_DEPTH_MAX keep the ones nearest the root, which decide
	 * "same root complex" and "same switch". */
	for (b = first; b && b->type == HWLOC_OBJ_BRIDGE; b = b->parent)
		n++;
	skip = n > TOPO_PCI_DEPTH_MAX ? n - TOPO_PCI_DEPTH_MAX : 0;
	n -= skip;
	loc->n_path = n;
	for (b = first; b && b->type == HWLOC_OBJ_BRIDGE; b = b->parent) {
		const struct hwloc_bridge_attr_s *ba = &b->attr->bridge;

		if (skip > 0) {
			skip--;
			continue;
		}
		n--;
		if (ba->upstream_type == HWLOC_OBJ_BRIDGE_HOST)
			snprintf(loc->path[n], TOPO_BUSID_MAX, "%04x:%02x",
				 (unsigned)ba->downstream.pci.domain & 0xffff,
				 (unsigned)ba->downstream.pci.secondary_bus);
		else
			pci_busid(&ba->upstream.pci, loc->path[n]);
	}
	return 0;
}

static bool is_nvidia_gpu_pci(hwloc_obj_t obj)
{
	const struct hwloc_pcidev_attr_s *p = &obj->attr->pcidev;

	return p->vendor_id == PCI_VENDOR_NVIDIA &&
	       (p->class_id == PCI_CLASS_VGA || p->class_id == PCI_CLASS_3D);
}

static bool is_nvidia_gpu_osdev(hwloc_obj_t obj)
{
	hwloc_obj_osdev_type_t ty = obj->attr->osdev.type;

	if (ty != HWLOC_OBJ_OSDEV_GPU && ty != HWLOC_OBJ_OSDEV_COPROC)
		return false;
	return obj->name && (!strncmp(obj->name, "nvml", 4) ||
			     !strncmp(obj->name, "cuda", 4));
}

/* Adds (or finds) the GPU of PCI device pci; returns it or NULL. */
static struct topo_gpu *gpu_of_pci(hwloc_topology_t topo, struct topo *t,
				   hwloc_obj_t pci)
{
	char id[TOPO_BUSID_MAX];
	struct topo_gpu *g;

	pci_busid(&pci->attr->pcidev, id);
	for (size_t i = 0; i < t->n_gpus; i++)
		if (!strcmp(t->gpus[i].bus_id, id))
			return &t->gpus[i];
	g = push(&t->gpus, &t->n_gpus, sizeof(*g), TOPO_DEVICES_MAX);
	if (!g)
		return NULL;
	memcpy(g->bus_id, id, sizeof(id));
	if (loc_of_io(topo, pci, &g->loc) < 0)
		return NULL;
	return g;
}

/* The port to use: lowest ACTIVE PortN, else lowest PortN, else 1. */
static int nic_port(hwloc_obj_t osdev)
{
	int first = 0;

	for (int p = 1; p <= NIC_PORTS_MAX; p++) {
		char key[32];
		const char *state;

		snprintf(key, sizeof(key), "Port%dState", p);
		state = hwloc_obj_get_info_by_name(osdev, key);
		if (!state)
			continue;
		if (!strcmp(state, IB_PORT_ACTIVE))
			return p;
		if (!first)
			first = p;
	}
	return first ? first : 1;
}

/* The network OS device beside osdev under the same parent, or NULL. */
static hwloc_obj_t netdev_beside(hwloc_obj_t osdev)
{
	if (!osdev->parent)
		return NULL;
	for (hwloc_obj_t c = osdev->parent->io_first_child; c;
	     c = c->next_sibling)
		if (c->type == HWLOC_OBJ_OS_DEVICE &&
		    c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && c->name)
			return c;
	return NULL;
}

static bool has_openfabrics_beside(hwloc_obj_t osdev)
{
	if (!osdev->parent || osdev->parent->type != HWLOC_OBJ_PCI_DEVICE)
		return false;
	for (hwloc_obj_t c = osdev->parent->io_first_child; c;
	     c = c->next_sibling)
		if (c->type == HWLOC_OBJ_OS_DEVICE &&
		    c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
			return true;
	return false;
}

static int collect_cpus(hwloc_topology_t topo, struct topo *t,
			struct herd_err *err)
{
	int depth;
	hwloc_obj_t o = NULL;

	t->pus = hwloc_bitmap_dup(hwloc_get_root_obj(topo)->cpuset);
	if (!t->pus)
		return herd_errprintf(err, "out of memory");
	if (hwloc_bitmap_iszero(t->pus))
		return herd_errprintf(err, "no PUs");
	if (hwloc_bitmap_last(t->pus) >= TOPO_CPUS_MAX)
		return herd_errprintf(err, "PU %d is above the limit of %d",
				      hwloc_bitmap_last(t->pus),
				      TOPO_CPUS_MAX - 1);
	/* Cores; an export without Core objects gets one core per PU. */
	depth = hwloc_get_type_depth(topo, HWLOC_OBJ_CORE);
	if (depth < 0)
		depth = hwloc_get_type_depth(topo, HWLOC_OBJ_PU);
	while ((o = hwloc_get_next_obj_by_depth(topo, depth, o))) {
		hwloc_bitmap_t *c;

		if (hwloc_bitmap_iszero(o->cpuset))
			continue;
		c = push(&t->cores, &t->n_cores, sizeof(*c), TOPO_CPUS_MAX);
		if (!c || !(*c = hwloc_bitmap_dup(o->cpuset)))
			return herd_errprintf(err, "out of memory");
	}
	while ((o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, o))) {
		struct topo_numa *n;

		n = push(&t->numa, &t->n_numa, sizeof(*n), TOPO_CPUS_MAX);
		if (!n || !(n->cpuset = hwloc_bitmap_dup(o->cpuset)))
			return herd_errprintf(err, "out of memory");
		n->os_index = o->os_index;
		n->package = package_of(topo, o);
	}
	while ((o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, o))) {
		struct topo_package *p;

		p = push(&t->packages, &t->n_packages, sizeof(*p),
			 TOPO_CPUS_MAX);
		if (!p || !(p->cpuset = hwloc_bitmap_dup(o->cpuset)))
			return herd_errprintf(err, "out of memory");
		p->os_index = o->os_index;
	}
	return 0;
}

static int collect_gpus(hwloc_topology_t topo, struct topo *t,
			struct herd_err *err)
{
	hwloc_obj_t o = NULL;

	while ((o = hwloc_get_next_pcidev(topo, o)))
		if (is_nvidia_gpu_pci(o) && !gpu_of_pci(topo, t, o))
			return herd_errprintf(err, "too many GPUs or out of "
						   "memory");
	/* CUDA/NVML OS devices: the same GPU as their PCI parent. */
	while ((o = hwloc_get_next_osdev(topo, o))) {
		struct topo_gpu *g;

		if (!is_nvidia_gpu_osdev(o))
			continue;
		if (o->parent && o->parent->type == HWLOC_OBJ_PCI_DEVICE) {
			g = gpu_of_pci(topo, t, o->parent);
		} else {
			g = push(&t->gpus, &t->n_gpus, sizeof(*g),
				 TOPO_DEVICES_MAX);
			if (g && loc_of_io(topo, o, &g->loc) < 0)
				g = NULL;
		}
		if (!g)
			return herd_errprintf(err, "too many GPUs or out of "
						   "memory");
		/* The first OS device names it (nvml0 before cuda0 is as
		 * good as the reverse: both are the same device). */
		if (!g->name[0] &&
		    topo_copy_name(g->name, sizeof(g->name), o->name))
			return herd_errprintf(err,
					      "GPU name '%.64s...' is too "
					      "long",
					      o->name);
	}
	return 0;
}

static int collect_net(hwloc_topology_t topo, struct topo *t,
		       struct herd_err *err)
{
	hwloc_obj_t o = NULL;

	while ((o = hwloc_get_next_osdev(topo, o))) {
		hwloc_obj_osdev_type_t ty = o->attr->osdev.type;
		bool pci = o->parent && o->parent->type == HWLOC_OBJ_PCI_DEVICE;

		if (!o->name)
			continue;
		if (ty == HWLOC_OBJ_OSDEV_OPENFABRICS) {
			struct topo_nic *n;
			hwloc_obj_t nd = netdev_beside(o);

			n = push(&t->nics, &t->n_nics, sizeof(*n),
				 TOPO_DEVICES_MAX);
			if (!n || loc_of_io(topo, o, &n->loc) < 0)
				return herd_errprintf(err, "too many NICs or "
							   "out of memory");
			if (topo_copy_name(n->name, sizeof(n->name), o->name) ||
			    (nd && topo_copy_name(n->netdev, sizeof(n->netdev),
						  nd->name)))
				return herd_errprintf(err,
						      "NIC name '%.64s' "
						      "is too long",
						      o->name);
			n->port = nic_port(o);
			if (pci)
				pci_busid(&o->parent->attr->pcidev, n->bus_id);
		} else if (ty == HWLOC_OBJ_OSDEV_NETWORK &&
			   !has_openfabrics_beside(o)) {
			struct topo_netdev *n;

			n = push(&t->netdevs, &t->n_netdevs, sizeof(*n),
				 TOPO_DEVICES_MAX);
			if (!n || loc_of_io(topo, o, &n->loc) < 0)
				return herd_errprintf(err, "too many netdevs "
							   "or out of memory");
			if (topo_copy_name(n->name, sizeof(n->name), o->name))
				return herd_errprintf(err,
						      "netdev name "
						      "'%.64s' is too "
						      "long",
						      o->name);
			if (pci)
				pci_busid(&o->parent->attr->pcidev, n->bus_id);
		}
	}
	return 0;
}

/* Reads path into a new buffer of at most TOPO_XML_MAX bytes. */
static char *read_xml(const char *path, size_t *len, struct herd_err *err)
{
	char *buf = file_read(path, TOPO_XML_MAX, len);

	if (buf)
		return buf;
	if (errno == EINVAL)
		herd_errprintf(err, "topology %s: not a regular file", path);
	else if (errno == EFBIG)
		herd_errprintf(err, "topology %s: larger than %d bytes", path,
			       TOPO_XML_MAX);
	else
		herd_errprintf(err, "cannot open topology %s: %s", path,
			       strerror(errno));
	return NULL;
}

struct topo *topo_load(const char *xml_path, unsigned flags,
		       struct herd_err *err)
{
	hwloc_topology_t topo = NULL;
	struct topo *t = NULL, *ret = NULL;
	char *xml = NULL;
	size_t len = 0;
	const char *what = xml_path ? xml_path : "this machine";
	struct herd_err sub;

	herd_err_clear(&sub);
	if (xml_path && !(xml = read_xml(xml_path, &len, err)))
		goto out;
	if (hwloc_topology_init(&topo) < 0) {
		herd_errprintf(err, "hwloc: cannot start: %s", strerror(errno));
		topo = NULL;
		goto out;
	}
	if (!(flags & TOPO_NO_IO))
		hwloc_topology_set_io_types_filter(
		    topo, (flags & TOPO_IO_ALL)
			      ? HWLOC_TYPE_FILTER_KEEP_ALL
			      : HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	/* Live discovery without three components: on Linux the "linux"
	 * component reads PCI devices from sysfs itself, and "pci"
	 * (libpciaccess) only repeats that while leaking about 1 KiB per
	 * load; "opencl" would start the GPU driver's OpenCL runtime and
	 * "gl" would query X displays, both slow and useless for binding. */
	if (!xml && !(flags & TOPO_NO_IO))
		for (size_t i = 0; i < sizeof(live_skip) / sizeof(*live_skip);
		     i++)
			hwloc_topology_set_components(
			    topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
			    live_skip[i]);
	/* hwloc does not take an empty buffer; neither do we. */
	if (xml && (len == 0 ||
		    hwloc_topology_set_xmlbuffer(topo, xml, (int)len) < 0)) {
		herd_errprintf(err, "topology %s: not an hwloc XML topology",
			       what);
		goto out;
	}
	if (hwloc_topology_load(topo) < 0) {
		herd_errprintf(err, "topology %s: %s", what,
			       xml ? "not an hwloc XML topology"
				   : strerror(errno));
		goto out;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	if (collect_cpus(topo, t, &sub) < 0 ||
	    collect_gpus(topo, t, &sub) < 0 || collect_net(topo, t, &sub) < 0) {
		herd_errprintf(err, "topology %s: %s", what, sub.text);
		goto out;
	}
	topo_sort(t);
	ret = t;
	t = NULL;
out:
	topo_free(t);
	if (topo)
		hwloc_topology_destroy(topo);
	free(xml);
	return ret;
}
