/* topo.c — a node's GPUs, NICs, netdevs, NUMA nodes and cores, read once
 * from hwloc and kept as plain data.  See herd/topo.h for the contract.
 *
 * hwloc answers every question here (what is a GPU's PCI parent, which
 * bridge is above it, which PUs a NUMA node has); nothing reads sysfs or
 * parses the XML by hand.  The hwloc topology lives only inside
 * topo_load().
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
static int copy_name(char *dst, size_t size, const char *src)
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
static void topo_sort(struct topo *t)
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
		if (!g->name[0] && copy_name(g->name, sizeof(g->name), o->name))
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
			if (copy_name(n->name, sizeof(n->name), o->name) ||
			    (nd &&
			     copy_name(n->netdev, sizeof(n->netdev), nd->name)))
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
			if (copy_name(n->name, sizeof(n->name), o->name))
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

/* --- JSON summary ------------------------------------------------------ */

/* Sets key to the cpu list of set; -1 when out of memory. */
static int set_list(json_t *obj, const char *key, hwloc_const_bitmap_t set)
{
	char *s = topo_cpulist(set);
	int rc;

	if (!s)
		return -1;
	rc = json_object_set_new(obj, key, json_string(s));
	free(s);
	return rc;
}

static int loc_to_json(json_t *obj, const struct topo_loc *loc)
{
	json_t *path = json_array();

	if (!path || json_object_set_new(obj, "pci_path", path) < 0)
		return -1;
	for (int i = 0; i < loc->n_path; i++)
		if (json_array_append_new(path, json_string(loc->path[i])) < 0)
			return -1;
	if (set_list(obj, "cpus", loc->cpuset) < 0 ||
	    set_list(obj, "numa", loc->nodeset) < 0 ||
	    json_object_set_new(obj, "package", json_integer(loc->package)) < 0)
		return -1;
	return 0;
}

/* Appends a new object to arr and returns it (borrowed), or NULL. */
static json_t *append_obj(json_t *arr)
{
	json_t *o = json_object();

	if (!o || json_array_append_new(arr, o) < 0)
		return NULL;
	return o;
}

json_t *topo_summary(const struct topo *t)
{
	json_t *s = json_object(), *ret = NULL;
	json_t *cores = json_array(), *numa = json_array(),
	       *pkgs = json_array(), *gpus = json_array(), *nics = json_array(),
	       *nds = json_array();

	if (!s || !cores || !numa || !pkgs || !gpus || !nics || !nds)
		goto out;
	if (set_list(s, "pus", t->pus) < 0)
		goto out;
	for (size_t i = 0; i < t->n_cores; i++) {
		char *l = topo_cpulist(t->cores[i]);

		if (!l || json_array_append_new(cores, json_string(l)) < 0) {
			free(l);
			goto out;
		}
		free(l);
	}
	for (size_t i = 0; i < t->n_numa; i++) {
		json_t *o = append_obj(numa);

		if (!o ||
		    json_object_set_new(o, "os_index",
					json_integer(t->numa[i].os_index)) ||
		    json_object_set_new(o, "package",
					json_integer(t->numa[i].package)) ||
		    set_list(o, "cpus", t->numa[i].cpuset) < 0)
			goto out;
	}
	for (size_t i = 0; i < t->n_packages; i++) {
		json_t *o = append_obj(pkgs);

		if (!o ||
		    json_object_set_new(
			o, "os_index", json_integer(t->packages[i].os_index)) ||
		    set_list(o, "cpus", t->packages[i].cpuset) < 0)
			goto out;
	}
	for (size_t i = 0; i < t->n_gpus; i++) {
		json_t *o = append_obj(gpus);

		if (!o ||
		    json_object_set_new(o, "bus_id",
					json_string(t->gpus[i].bus_id)) ||
		    json_object_set_new(o, "name",
					json_string(t->gpus[i].name)) ||
		    loc_to_json(o, &t->gpus[i].loc) < 0)
			goto out;
	}
	for (size_t i = 0; i < t->n_nics; i++) {
		const struct topo_nic *n = &t->nics[i];
		json_t *o = append_obj(nics);

		if (!o ||
		    json_object_set_new(o, "name", json_string(n->name)) ||
		    json_object_set_new(o, "port", json_integer(n->port)) ||
		    json_object_set_new(o, "netdev", json_string(n->netdev)) ||
		    json_object_set_new(o, "bus_id", json_string(n->bus_id)) ||
		    loc_to_json(o, &n->loc) < 0)
			goto out;
	}
	for (size_t i = 0; i < t->n_netdevs; i++) {
		const struct topo_netdev *n = &t->netdevs[i];
		json_t *o = append_obj(nds);

		if (!o ||
		    json_object_set_new(o, "name", json_string(n->name)) ||
		    json_object_set_new(o, "bus_id", json_string(n->bus_id)) ||
		    loc_to_json(o, &n->loc) < 0)
			goto out;
	}
	/* set_new steals the references even on failure: clear each local
	 * as it is handed over so out: frees only what is still ours. */
	if (json_object_set_new(s, "cores", cores) < 0) {
		cores = NULL;
		goto out;
	}
	cores = NULL;
	if (json_object_set_new(s, "numa", numa) < 0) {
		numa = NULL;
		goto out;
	}
	numa = NULL;
	if (json_object_set_new(s, "packages", pkgs) < 0) {
		pkgs = NULL;
		goto out;
	}
	pkgs = NULL;
	if (json_object_set_new(s, "gpus", gpus) < 0) {
		gpus = NULL;
		goto out;
	}
	gpus = NULL;
	if (json_object_set_new(s, "nics", nics) < 0) {
		nics = NULL;
		goto out;
	}
	nics = NULL;
	if (json_object_set_new(s, "netdevs", nds) < 0) {
		nds = NULL;
		goto out;
	}
	nds = NULL;
	ret = s;
	s = NULL;
out:
	json_decref(s);
	json_decref(cores);
	json_decref(numa);
	json_decref(pkgs);
	json_decref(gpus);
	json_decref(nics);
	json_decref(nds);
	return ret;
}

/* --- from the summary -------------------------------------------------- */

/* The field being read, for messages: "gpus[2].bus_id". */
struct where {
	const char *array;
	size_t index;
};

static int bad(struct herd_err *err, const struct where *w, const char *key,
	       const char *expected)
{
	if (w->array)
		return herd_errprintf(err,
				      "topology summary: %s[%zu].%s: expected "
				      "%s",
				      w->array, w->index, key, expected);
	return herd_errprintf(err, "topology summary: %s: expected %s", key,
			      expected);
}

/* A cpu list string -> new bitmap within TOPO_CPUS_MAX. */
static int parse_list(const char *s, const char *key, const struct where *w,
		      hwloc_bitmap_t *out, struct herd_err *err)
{
	hwloc_bitmap_t b;

	if (!s)
		return bad(err, w, key, "a cpu list string");
	b = hwloc_bitmap_alloc();
	if (!b)
		return herd_errprintf(err, "out of memory");
	if (s[0] &&
	    (hwloc_bitmap_list_sscanf(b, s) < 0 || hwloc_bitmap_last(b) < 0 ||
	     hwloc_bitmap_last(b) >= TOPO_CPUS_MAX)) {
		hwloc_bitmap_free(b);
		return bad(err, w, key,
			   "a cpu list like \"0-15,64-79\" "
			   "within the limit");
	}
	*out = b;
	return 0;
}

static int get_list(const json_t *obj, const char *key, const struct where *w,
		    hwloc_bitmap_t *out, struct herd_err *err)
{
	return parse_list(json_string_value(json_object_get(obj, key)), key, w,
			  out, err);
}

static int get_name(const json_t *obj, const char *key, const struct where *w,
		    char *dst, size_t size, struct herd_err *err)
{
	const char *s = json_string_value(json_object_get(obj, key));

	if (!s || copy_name(dst, size, s) < 0)
		return bad(err, w, key, "a string of a valid length");
	return 0;
}

static int get_int(const json_t *obj, const char *key, const struct where *w,
		   long lo, long hi, long *out, struct herd_err *err)
{
	json_t *v = json_object_get(obj, key);

	if (!json_is_integer(v) || json_integer_value(v) < lo ||
	    json_integer_value(v) > hi)
		return bad(err, w, key, "an integer in range");
	*out = (long)json_integer_value(v);
	return 0;
}

static int loc_from_json(const json_t *obj, const struct where *w,
			 struct topo_loc *loc, struct herd_err *err)
{
	json_t *path = json_object_get(obj, "pci_path"), *v;
	long pkg;
	size_t i;

	if (get_list(obj, "cpus", w, &loc->cpuset, err) < 0 ||
	    get_list(obj, "numa", w, &loc->nodeset, err) < 0 ||
	    get_int(obj, "package", w, -1, TOPO_CPUS_MAX, &pkg, err) < 0)
		return -1;
	loc->package = (int)pkg;
	if (!json_is_array(path) || json_array_size(path) > TOPO_PCI_DEPTH_MAX)
		return bad(err, w, "pci_path", "an array of bridge bus ids");
	json_array_foreach(path, i, v)
	{
		const char *s = json_string_value(v);

		if (!s || copy_name(loc->path[i], TOPO_BUSID_MAX, s) < 0)
			return bad(err, w, "pci_path", "bridge bus ids");
	}
	loc->n_path = (int)json_array_size(path);
	return 0;
}

/* Checks that key is an array of at most max entries; returns it. */
static json_t *get_array(const json_t *s, const char *key, size_t max,
			 struct herd_err *err)
{
	json_t *a = json_object_get(s, key);
	struct where top = {0};

	if (!json_is_array(a) || json_array_size(a) > max) {
		bad(err, &top, key, "an array within the limit");
		return NULL;
	}
	return a;
}

/* Allocates n zeroed elements (at least one, so that calloc(0) never
 * returns NULL for an empty array). */
static void *alloc_array(size_t n, size_t sz)
{
	return calloc(n ? n : 1, sz);
}

static int numa_pkgs_from_json(const json_t *s, struct topo *t,
			       struct herd_err *err)
{
	json_t *numa, *pkgs, *o;
	size_t i;

	if (!(numa = get_array(s, "numa", TOPO_CPUS_MAX, err)) ||
	    !(pkgs = get_array(s, "packages", TOPO_CPUS_MAX, err)))
		return -1;
	t->numa = alloc_array(json_array_size(numa), sizeof(*t->numa));
	t->packages = alloc_array(json_array_size(pkgs), sizeof(*t->packages));
	if (!t->numa || !t->packages)
		return herd_errprintf(err, "out of memory");
	json_array_foreach(numa, i, o)
	{
		struct where w = {"numa", i};
		long idx, pkg;

		t->n_numa = i + 1;
		if (get_int(o, "os_index", &w, 0, TOPO_CPUS_MAX, &idx, err) ||
		    get_int(o, "package", &w, -1, TOPO_CPUS_MAX, &pkg, err) ||
		    get_list(o, "cpus", &w, &t->numa[i].cpuset, err))
			return -1;
		t->numa[i].os_index = (unsigned)idx;
		t->numa[i].package = (int)pkg;
	}
	json_array_foreach(pkgs, i, o)
	{
		struct where w = {"packages", i};
		long idx;

		t->n_packages = i + 1;
		if (get_int(o, "os_index", &w, 0, TOPO_CPUS_MAX, &idx, err) ||
		    get_list(o, "cpus", &w, &t->packages[i].cpuset, err))
			return -1;
		t->packages[i].os_index = (unsigned)idx;
	}
	return 0;
}

static int devices_from_json(const json_t *s, struct topo *t,
			     struct herd_err *err)
{
	json_t *gpus, *nics, *nds, *o;
	size_t i;

	if (!(gpus = get_array(s, "gpus", TOPO_DEVICES_MAX, err)) ||
	    !(nics = get_array(s, "nics", TOPO_DEVICES_MAX, err)) ||
	    !(nds = get_array(s, "netdevs", TOPO_DEVICES_MAX, err)))
		return -1;
	t->gpus = alloc_array(json_array_size(gpus), sizeof(*t->gpus));
	t->nics = alloc_array(json_array_size(nics), sizeof(*t->nics));
	t->netdevs = alloc_array(json_array_size(nds), sizeof(*t->netdevs));
	if (!t->gpus || !t->nics || !t->netdevs)
		return herd_errprintf(err, "out of memory");
	json_array_foreach(gpus, i, o)
	{
		struct topo_gpu *g = &t->gpus[i];
		struct where w = {"gpus", i};

		t->n_gpus = i + 1;
		if (get_name(o, "bus_id", &w, g->bus_id, sizeof(g->bus_id),
			     err) ||
		    get_name(o, "name", &w, g->name, sizeof(g->name), err) ||
		    loc_from_json(o, &w, &g->loc, err))
			return -1;
	}
	json_array_foreach(nics, i, o)
	{
		struct topo_nic *n = &t->nics[i];
		struct where w = {"nics", i};
		long port;

		t->n_nics = i + 1;
		if (get_name(o, "name", &w, n->name, sizeof(n->name), err) ||
		    get_int(o, "port", &w, 1, 255, &port, err) ||
		    get_name(o, "netdev", &w, n->netdev, sizeof(n->netdev),
			     err) ||
		    get_name(o, "bus_id", &w, n->bus_id, sizeof(n->bus_id),
			     err) ||
		    loc_from_json(o, &w, &n->loc, err))
			return -1;
		n->port = (int)port;
	}
	json_array_foreach(nds, i, o)
	{
		struct topo_netdev *n = &t->netdevs[i];
		struct where w = {"netdevs", i};

		t->n_netdevs = i + 1;
		if (get_name(o, "name", &w, n->name, sizeof(n->name), err) ||
		    get_name(o, "bus_id", &w, n->bus_id, sizeof(n->bus_id),
			     err) ||
		    loc_from_json(o, &w, &n->loc, err))
			return -1;
	}
	return 0;
}

struct topo *topo_from_summary(const json_t *s, struct herd_err *err)
{
	struct topo *t = NULL, *ret = NULL;
	struct where top = {0};
	json_t *cores, *c;
	size_t i;

	if (!json_is_object(s)) {
		herd_errprintf(err, "topology summary: expected an object");
		goto out;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	if (get_list(s, "pus", &top, &t->pus, err) < 0)
		goto out;
	if (hwloc_bitmap_iszero(t->pus)) {
		bad(err, &top, "pus", "at least one PU");
		goto out;
	}
	if (!(cores = get_array(s, "cores", TOPO_CPUS_MAX, err)))
		goto out;
	t->cores = alloc_array(json_array_size(cores), sizeof(*t->cores));
	if (!t->cores) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	json_array_foreach(cores, i, c)
	{
		struct where w = {"cores", i};

		t->n_cores = i + 1;
		if (parse_list(json_string_value(c), "pus", &w, &t->cores[i],
			       err) < 0)
			goto out;
	}
	if (numa_pkgs_from_json(s, t, err) < 0 ||
	    devices_from_json(s, t, err) < 0)
		goto out;
	topo_sort(t);
	ret = t;
	t = NULL;
out:
	topo_free(t);
	return ret;
}
