/* bind.c — the binding policy and the platform file.  See herd/bind.h for
 * the rules; this file only implements them.
 *
 * hwloc bitmaps serve as the set type (union, intersection, cpu lists);
 * no hwloc topology is involved.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "herd/bind.h"
#include "herd/dstune.h"
#include "herd/file.h"

/* Device names and list entries quoted in errors are cut to this many
 * bytes so that a message always fits struct herd_err. */
#define QUOTE_MAX 64

/* NIC ports accepted in a platform file or a bind.nic list. */
#define PORT_MAX 255

/* NIC distance classes (see bind.h). */
enum { NEAR_SWITCH = 0, NEAR_HOST_BRIDGE, NEAR_NUMA, NEAR_PACKAGE, NEAR_ANY };

struct platform_gpu {
	char bus_id[TOPO_BUSID_MAX];
	char nic[TOPO_NAME_MAX];    /* "" when not given */
	int port;		    /* 0 when not given */
	char netdev[TOPO_NAME_MAX]; /* "" when not given */
	hwloc_bitmap_t cpus;	    /* NULL when not given */
};

struct bind_platform {
	char *name;
	struct platform_gpu *gpus;
	size_t n_gpus;
};

/* --- platform file ----------------------------------------------------- */

void bind_platform_free(struct bind_platform *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_gpus; i++)
		hwloc_bitmap_free(p->gpus[i].cpus);
	free(p->gpus);
	free(p->name);
	free(p);
}

/* Writes the canonical "dddd:bb:dd.f" of text ("bb:dd.f" means domain 0)
 * into out; -1 when text is not a PCI bus id. */
static int busid_canon(const char *text, char *out)
{
	unsigned dom = 0, bus, dev, fn;
	int end = -1;

	if (sscanf(text, "%4x:%2x:%2x.%1x%n", &dom, &bus, &dev, &fn, &end) !=
		4 ||
	    (size_t)end != strlen(text)) {
		dom = 0;
		end = -1;
		if (sscanf(text, "%2x:%2x.%1x%n", &bus, &dev, &fn, &end) != 3 ||
		    (size_t)end != strlen(text))
			return -1;
	}
	for (const char *c = text; *c; c++)
		if (!isxdigit((unsigned char)*c) && *c != ':' && *c != '.')
			return -1;
	if (dev > 0x1f || fn > 7)
		return -1;
	snprintf(out, TOPO_BUSID_MAX, "%04x:%02x:%02x.%01x", dom, bus, dev, fn);
	return 0;
}

static int platform_entry(const char *name, size_t i, json_t *o,
			  struct platform_gpu *g, struct herd_err *err)
{
	const char *key;
	json_t *v;

	if (!json_is_object(o))
		return herd_errprintf(err, "%s: gpus[%zu]: expected an object",
				      name, i);
	json_object_foreach(o, key, v)
	{
		const char *s = json_string_value(v);

		if (!strcmp(key, "bus_id")) {
			if (!s || busid_canon(s, g->bus_id) < 0)
				return herd_errprintf(
				    err,
				    "%s: gpus[%zu].bus_id: expected a PCI bus "
				    "id like \"0000:03:00.0\"",
				    name, i);
		} else if (!strcmp(key, "nic") || !strcmp(key, "netdev")) {
			char *dst = key[1] == 'i' ? g->nic : g->netdev;

			if (!s || !s[0] || strlen(s) >= TOPO_NAME_MAX)
				return herd_errprintf(
				    err,
				    "%s: gpus[%zu].%s: expected a device name "
				    "of 1 to %d characters",
				    name, i, key, TOPO_NAME_MAX - 1);
			memcpy(dst, s, strlen(s) + 1);
		} else if (!strcmp(key, "port")) {
			if (!json_is_integer(v) || json_integer_value(v) < 1 ||
			    json_integer_value(v) > PORT_MAX)
				return herd_errprintf(
				    err,
				    "%s: gpus[%zu].port: expected an integer "
				    "from 1 to %d",
				    name, i, PORT_MAX);
			g->port = (int)json_integer_value(v);
		} else if (!strcmp(key, "cpus")) {
			g->cpus = hwloc_bitmap_alloc();
			if (!g->cpus)
				return herd_errprintf(err, "out of memory");
			if (!s || !s[0] ||
			    hwloc_bitmap_list_sscanf(g->cpus, s) < 0 ||
			    hwloc_bitmap_iszero(g->cpus) ||
			    hwloc_bitmap_last(g->cpus) < 0 ||
			    hwloc_bitmap_last(g->cpus) >= TOPO_CPUS_MAX)
				return herd_errprintf(
				    err,
				    "%s: gpus[%zu].cpus: expected a cpu list "
				    "like \"48-63,176-191\"",
				    name, i);
		} else {
			return herd_errprintf(err,
					      "%s: gpus[%zu]: unknown key "
					      "'%.*s' (expected bus_id, nic, "
					      "port, netdev, cpus)",
					      name, i, QUOTE_MAX, key);
		}
	}
	if (!g->bus_id[0])
		return herd_errprintf(err, "%s: gpus[%zu]: bus_id is missing",
				      name, i);
	return 0;
}

struct bind_platform *bind_platform_parse(const char *text, size_t len,
					  const char *name,
					  struct herd_err *err)
{
	struct bind_platform *p = NULL, *ret = NULL;
	json_error_t jerr;
	json_t *root = NULL, *gpus, *o, *empty = NULL;
	const char *key;
	json_t *v;
	size_t i;

	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		herd_errprintf(err, "%s:%d:%d: %s", name, jerr.line,
			       jerr.column, jerr.text);
		goto out;
	}
	if (!json_is_object(root)) {
		herd_errprintf(err, "%s: expected an object {\"gpus\": [...]}",
			       name);
		goto out;
	}
	json_object_foreach(root, key, v)
	{
		/* "network" is the section `herd render --tune` reads
		 * (herd/dstune.h), checked there. */
		if (strcmp(key, "gpus") && strcmp(key, "network")) {
			herd_errprintf(err,
				       "%s: unknown key '%.*s' (expected gpus, "
				       "network)",
				       name, QUOTE_MAX, key);
			goto out;
		}
	}
	if (json_object_get(root, "network")) {
		struct ds_platform_net net;

		if (ds_platform_net_parse(text, len, name, &net, err) < 0)
			goto out;
	}
	gpus = json_object_get(root, "gpus");
	if (!gpus)
		gpus = empty = json_array();
	if (!json_is_array(gpus) || json_array_size(gpus) > TOPO_DEVICES_MAX) {
		herd_errprintf(err,
			       "%s: gpus: expected an array of at most %d "
			       "entries",
			       name, TOPO_DEVICES_MAX);
		goto out;
	}
	p = calloc(1, sizeof(*p));
	if (!p || !(p->name = strdup(name)) ||
	    !(p->gpus = calloc(json_array_size(gpus) + 1, sizeof(*p->gpus)))) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	json_array_foreach(gpus, i, o)
	{
		p->n_gpus = i + 1;
		if (platform_entry(name, i, o, &p->gpus[i], err) < 0)
			goto out;
		for (size_t k = 0; k < i; k++)
			if (!strcmp(p->gpus[k].bus_id, p->gpus[i].bus_id)) {
				herd_errprintf(err,
					       "%s: gpus[%zu]: GPU %s is "
					       "already listed as gpus[%zu]",
					       name, i, p->gpus[i].bus_id, k);
				goto out;
			}
	}
	ret = p;
	p = NULL;
out:
	bind_platform_free(p);
	json_decref(empty);
	json_decref(root);
	return ret;
}

struct bind_platform *bind_platform_load(const char *path, struct herd_err *err)
{
	struct bind_platform *p;
	size_t len = 0;
	char *buf = file_read(path, BIND_PLATFORM_FILE_MAX, &len);

	if (!buf) {
		if (errno == EINVAL || errno == EFBIG)
			herd_errprintf(err,
				       "topology file %s: not a regular file of "
				       "at most %d bytes",
				       path, BIND_PLATFORM_FILE_MAX);
		else
			herd_errprintf(err, "cannot open topology file %s: %s",
				       path, strerror(errno));
		return NULL;
	}
	p = bind_platform_parse(buf, len, path, err);
	free(buf);
	return p;
}

/* --- options ----------------------------------------------------------- */

void bind_opts_from_spec(struct bind_opts *o, const struct spec *spec,
			 const struct bind_platform *platform)
{
	memset(o, 0, sizeof(*o));
	o->gpu = spec->bind.gpu;
	o->nic = spec->bind.nic;
	o->cpu = spec->bind.cpu;
	o->nic_list = (const char *const *)spec->bind.nic_list.v;
	o->n_nic_list = spec->bind.nic_list.n;
	o->platform = platform;
}

int bind_default_slots(const struct topo *t)
{
	return t->n_gpus > 0 ? (int)t->n_gpus : 1;
}

void bind_ranks_release(struct bind_rank *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(out[i].cpus);
		out[i].cpus = NULL;
	}
}

/* --- the plan ---------------------------------------------------------- */

static int find_nic(const struct topo *t, const char *name)
{
	for (size_t i = 0; i < t->n_nics; i++)
		if (!strcmp(t->nics[i].name, name))
			return (int)i;
	return -1;
}

static bool has_netdev(const struct topo *t, const char *name)
{
	for (size_t i = 0; i < t->n_nics; i++)
		if (!strcmp(t->nics[i].netdev, name))
			return true;
	for (size_t i = 0; i < t->n_netdevs; i++)
		if (!strcmp(t->netdevs[i].name, name))
			return true;
	return false;
}

/* Checks the platform file against t; fills by_gpu[g] with the entry for
 * GPU g (or NULL). */
static int check_platform(const struct topo *t, const struct bind_platform *p,
			  const struct platform_gpu **by_gpu,
			  struct herd_err *err)
{
	for (size_t i = 0; p && i < p->n_gpus; i++) {
		const struct platform_gpu *pg = &p->gpus[i];
		size_t g;

		for (g = 0; g < t->n_gpus; g++)
			if (!strcmp(t->gpus[g].bus_id, pg->bus_id))
				break;
		if (g == t->n_gpus)
			return herd_errprintf(err,
					      "%s: gpus[%zu]: GPU %s is not on "
					      "this node (it has %zu GPUs%s%s)",
					      p->name, i, pg->bus_id, t->n_gpus,
					      t->n_gpus ? ", first " : "",
					      t->n_gpus ? t->gpus[0].bus_id
							: "");
		if (pg->nic[0] && find_nic(t, pg->nic) < 0)
			return herd_errprintf(err,
					      "%s: gpus[%zu]: NIC %s is not on "
					      "this node (it has %zu RDMA "
					      "NICs%s%s)",
					      p->name, i, pg->nic, t->n_nics,
					      t->n_nics ? ", first " : "",
					      t->n_nics ? t->nics[0].name : "");
		if (pg->netdev[0] && !has_netdev(t, pg->netdev))
			return herd_errprintf(err,
					      "%s: gpus[%zu]: netdev %s is not "
					      "on this node",
					      p->name, i, pg->netdev);
		if (pg->cpus && !hwloc_bitmap_isincluded(pg->cpus, t->pus)) {
			char *l = topo_cpulist(t->pus);

			herd_errprintf(err,
				       "%s: gpus[%zu]: cpus name CPUs this "
				       "node does not have (it has %.256s)",
				       p->name, i, l ? l : "?");
			free(l);
			return -1;
		}
		by_gpu[g] = pg;
	}
	return 0;
}

/* Parses bind.nic list entry "name" or "name:port" against t. */
static int list_nic(const struct topo *t, const char *entry, int *nic,
		    int *port, struct herd_err *err)
{
	char name[TOPO_NAME_MAX];
	const char *colon = strrchr(entry, ':');
	size_t n = colon ? (size_t)(colon - entry) : strlen(entry);

	*port = 0;
	if (n == 0 || n >= sizeof(name))
		return herd_errprintf(err, "bind.nic: '%.*s' is not a NIC name",
				      QUOTE_MAX, entry);
	memcpy(name, entry, n);
	name[n] = '\0';
	if (colon) {
		char *end;
		long v;

		errno = 0;
		v = strtol(colon + 1, &end, 10);
		if (errno || end == colon + 1 || *end || v < 1 || v > PORT_MAX)
			return herd_errprintf(err,
					      "bind.nic: '%.*s': expected "
					      "NAME or NAME:PORT (port 1 to "
					      "%d)",
					      QUOTE_MAX, entry, PORT_MAX);
		*port = (int)v;
	}
	*nic = find_nic(t, name);
	if (*nic < 0)
		return herd_errprintf(err,
				      "bind.nic: NIC %s is not on this node "
				      "(it has %zu RDMA NICs%s%s)",
				      name, t->n_nics,
				      t->n_nics ? ", first " : "",
				      t->n_nics ? t->nics[0].name : "");
	return 0;
}

/* How near b is to a: the classes of bind.h. */
static int nearness(const struct topo_loc *a, const struct topo_loc *b)
{
	int common = 0;

	while (common < a->n_path && common < b->n_path &&
	       !strcmp(a->path[common], b->path[common]))
		common++;
	if (common >= 2)
		return NEAR_SWITCH;
	if (common == 1)
		return NEAR_HOST_BRIDGE;
	if (hwloc_bitmap_weight(a->nodeset) == 1 &&
	    hwloc_bitmap_isequal(a->nodeset, b->nodeset))
		return NEAR_NUMA;
	if (a->package >= 0 && a->package == b->package)
		return NEAR_PACKAGE;
	return NEAR_ANY;
}

/* The CPU domain of a GPU at loc: the PUs of its NUMA nodes, else of its
 * ancestor, else of its package, else every PU.  New bitmap or NULL. */
static hwloc_bitmap_t gpu_domain(const struct topo *t,
				 const struct topo_loc *loc)
{
	hwloc_bitmap_t d = hwloc_bitmap_alloc();

	if (!d)
		return NULL;
	for (size_t i = 0; i < t->n_numa; i++)
		if (hwloc_bitmap_isset(loc->nodeset, t->numa[i].os_index))
			hwloc_bitmap_or(d, d, t->numa[i].cpuset);
	hwloc_bitmap_and(d, d, t->pus);
	if (hwloc_bitmap_iszero(d))
		hwloc_bitmap_and(d, loc->cpuset, t->pus);
	for (size_t i = 0; hwloc_bitmap_iszero(d) && i < t->n_packages; i++)
		if ((int)t->packages[i].os_index == loc->package)
			hwloc_bitmap_and(d, t->packages[i].cpuset, t->pus);
	if (hwloc_bitmap_iszero(d))
		hwloc_bitmap_copy(d, t->pus);
	return d;
}

/* Per-rank working state while planning. */
struct work {
	hwloc_bitmap_t domain; /* owned */
	struct topo_loc loc;   /* CPU-only ranks: where their NUMA node is;
				* its bitmaps are owned */
	const struct topo_loc *near; /* what the NIC should be near */
	int group;		     /* index of the distinct domain */
};

static void work_free(struct work *w, size_t n)
{
	for (size_t i = 0; w && i < n; i++) {
		hwloc_bitmap_free(w[i].domain);
		hwloc_bitmap_free(w[i].loc.cpuset);
		hwloc_bitmap_free(w[i].loc.nodeset);
	}
	free(w);
}

/* CPU-only rank i of slots: a NUMA node with PUs, by blocks. */
static int cpu_only_domain(const struct topo *t, int i, int slots,
			   struct work *w)
{
	size_t with_pus = 0, k, seen = 0;

	for (size_t n = 0; n < t->n_numa; n++)
		if (hwloc_bitmap_intersects(t->numa[n].cpuset, t->pus))
			with_pus++;
	w->loc.nodeset = hwloc_bitmap_alloc();
	w->loc.cpuset = hwloc_bitmap_alloc();
	w->domain = hwloc_bitmap_alloc();
	if (!w->loc.nodeset || !w->loc.cpuset || !w->domain)
		return -1;
	w->loc.package = -1;
	w->near = &w->loc;
	if (with_pus == 0) {
		hwloc_bitmap_copy(w->domain, t->pus);
		return 0;
	}
	k = (size_t)((long long)i * (long long)with_pus / slots);
	for (size_t n = 0; n < t->n_numa; n++) {
		if (!hwloc_bitmap_intersects(t->numa[n].cpuset, t->pus))
			continue;
		if (seen++ != k)
			continue;
		hwloc_bitmap_and(w->domain, t->numa[n].cpuset, t->pus);
		hwloc_bitmap_only(w->loc.nodeset, t->numa[n].os_index);
		hwloc_bitmap_copy(w->loc.cpuset, w->domain);
		w->loc.package = t->numa[n].package;
		break;
	}
	return 0;
}

/* The j-th of k shares of domain d, whole cores first; *threads gets the
 * number of cores in it.  New bitmap or NULL. */
static hwloc_bitmap_t share_of(const struct topo *t, hwloc_const_bitmap_t d,
			       int j, int k, int *threads)
{
	hwloc_bitmap_t s = hwloc_bitmap_alloc(), c = hwloc_bitmap_alloc();
	hwloc_bitmap_t ret = NULL;
	size_t n_cores = 0, pos = 0;
	int *pus = NULL, n_pus = 0;

	if (!s || !c)
		goto out;
	for (size_t i = 0; i < t->n_cores; i++)
		if (hwloc_bitmap_intersects(t->cores[i], d))
			n_cores++;
	if (n_cores >= (size_t)k) {
		size_t lo = (size_t)((long long)j * (long long)n_cores / k);
		size_t hi =
		    (size_t)((long long)(j + 1) * (long long)n_cores / k);

		for (size_t i = 0; i < t->n_cores; i++) {
			if (!hwloc_bitmap_intersects(t->cores[i], d))
				continue;
			if (pos >= lo && pos < hi) {
				hwloc_bitmap_and(c, t->cores[i], d);
				hwloc_bitmap_or(s, s, c);
			}
			pos++;
		}
		*threads = (int)(hi - lo);
	} else {
		/* More ranks than cores: split the PUs, core by core. */
		int w = hwloc_bitmap_weight(d), lo, hi, id;

		pus = calloc((size_t)(w > 0 ? w : 1), sizeof(*pus));
		if (!pus)
			goto out;
		hwloc_bitmap_copy(c, d);
		for (size_t i = 0; i < t->n_cores; i++)
			hwloc_bitmap_foreach_begin(id, t->cores[i])
			{
				if (hwloc_bitmap_isset(c, (unsigned)id) &&
				    n_pus < w) {
					pus[n_pus++] = id;
					hwloc_bitmap_clr(c, (unsigned)id);
				}
			}
		hwloc_bitmap_foreach_end();
		hwloc_bitmap_foreach_begin(id, c)
		{
			if (n_pus < w)
				pus[n_pus++] = id; /* PUs outside any core */
		}
		hwloc_bitmap_foreach_end();
		if (n_pus == 0)
			goto out;
		lo = (int)((long long)j * n_pus / k);
		hi = (int)((long long)(j + 1) * n_pus / k);
		if (hi <= lo)
			hi = lo + 1;
		for (int p = lo; p < hi && p < n_pus; p++)
			hwloc_bitmap_set(s, (unsigned)pus[p]);
		*threads = 1;
	}
	ret = s;
	s = NULL;
out:
	free(pus);
	hwloc_bitmap_free(s);
	hwloc_bitmap_free(c);
	return ret;
}

/* Picks the NIC for rank r (auto mode): nearest, then least used, then
 * first by name; -1 when the node has none. */
static int nearest_nic(const struct topo *t, const struct topo_loc *near,
		       const int *used)
{
	int best = -1, best_class = NEAR_ANY + 1;

	for (size_t n = 0; n < t->n_nics; n++) {
		int cl = nearness(near, &t->nics[n].loc);

		if (cl < best_class ||
		    (cl == best_class && used[n] < used[best])) {
			best = (int)n;
			best_class = cl;
		}
	}
	return best;
}

static void set_nic(struct bind_rank *r, const struct topo_nic *n, int port)
{
	memcpy(r->nic, n->name, sizeof(r->nic));
	memcpy(r->netdev, n->netdev, sizeof(r->netdev));
	r->nic_port = port > 0 ? port : n->port;
}

/* Fills the GPU, the domain and the NIC of every rank. */
static int place_ranks(const struct topo *t, int slots,
		       const struct bind_opts *o,
		       const struct platform_gpu *const *by_gpu, struct work *w,
		       struct bind_rank *out, struct herd_err *err)
{
	int *used = calloc(t->n_nics + 1, sizeof(*used));
	int rc = -1;

	if (!used)
		return herd_errprintf(err, "out of memory");
	for (int i = 0; i < slots; i++) {
		struct bind_rank *r = &out[i];
		const struct platform_gpu *pg = NULL;
		int nic = -1, port = 0;

		if (o->gpu == SPEC_BIND_GPU_AUTO && t->n_gpus > 0) {
			int g =
			    (int)((long long)i * (long long)t->n_gpus / slots);

			r->gpu = g;
			memcpy(r->gpu_bus_id, t->gpus[g].bus_id,
			       sizeof(r->gpu_bus_id));
			pg = by_gpu[g];
			w[i].near = &t->gpus[g].loc;
			w[i].domain = pg && pg->cpus
					  ? hwloc_bitmap_dup(pg->cpus)
					  : gpu_domain(t, &t->gpus[g].loc);
			if (!w[i].domain) {
				herd_errprintf(err, "out of memory");
				goto out;
			}
		} else if (cpu_only_domain(t, i, slots, &w[i]) < 0) {
			herd_errprintf(err, "out of memory");
			goto out;
		}
		if (o->nic == SPEC_BIND_NIC_LIST && o->n_nic_list > 0) {
			if (list_nic(t, o->nic_list[(size_t)i % o->n_nic_list],
				     &nic, &port, err) < 0)
				goto out;
		} else if (o->nic == SPEC_BIND_NIC_AUTO) {
			if (pg && pg->nic[0])
				nic = find_nic(t, pg->nic);
			else
				nic = nearest_nic(t, w[i].near, used);
			if (pg)
				port = pg->port;
		}
		if (nic >= 0) {
			used[nic]++;
			set_nic(r, &t->nics[nic], port);
			if (pg && pg->netdev[0] && o->nic == SPEC_BIND_NIC_AUTO)
				memcpy(r->netdev, pg->netdev,
				       sizeof(r->netdev));
		}
	}
	rc = 0;
out:
	free(used);
	return rc;
}

/* Gives every rank its cpuset from its domain and the other ranks of it. */
static int split_domains(const struct topo *t, int slots,
			 const struct bind_opts *o, struct work *w,
			 struct bind_rank *out, struct herd_err *err)
{
	int *size = calloc((size_t)slots, sizeof(*size));
	int *seen = calloc((size_t)slots, sizeof(*seen));
	int *first = calloc((size_t)slots, sizeof(*first));
	int rc = -1, n_groups = 0;

	if (!size || !seen || !first) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	/* Distinct domains are few (one per NUMA node or GPU): a scan of
	 * the groups found so far is cheap.  first[g] is group g's first
	 * rank. */
	for (int i = 0; i < slots; i++) {
		int g;

		for (g = 0; g < n_groups; g++)
			if (hwloc_bitmap_isequal(w[first[g]].domain,
						 w[i].domain))
				break;
		if (g == n_groups)
			first[n_groups++] = i;
		w[i].group = g;
		size[g]++;
	}
	for (int i = 0; i < slots; i++) {
		struct bind_rank *r = &out[i];
		int g = w[i].group, threads = 0;
		hwloc_bitmap_t share;

		share = share_of(t, w[i].domain, seen[g]++, size[g], &threads);
		if (!share) {
			herd_errprintf(err, "out of memory");
			goto out;
		}
		r->threads = threads;
		r->cpus = topo_cpulist(
		    o->cpu == SPEC_BIND_CPU_CORES ? share : w[i].domain);
		r->n_cpus = hwloc_bitmap_weight(
		    o->cpu == SPEC_BIND_CPU_CORES ? share : w[i].domain);
		hwloc_bitmap_free(share);
		if (!r->cpus) {
			herd_errprintf(err, "out of memory");
			goto out;
		}
	}
	rc = 0;
out:
	free(size);
	free(seen);
	free(first);
	return rc;
}

/* The NUMA node whose PUs hold all of each rank's cpus: its memory is
 * the rank's local memory. */
static int home_numa(const struct topo *t, int slots, struct bind_rank *out)
{
	hwloc_bitmap_t b = hwloc_bitmap_alloc();

	if (!b)
		return -1;
	for (int i = 0; i < slots; i++) {
		if (!out[i].cpus || !out[i].cpus[0] ||
		    hwloc_bitmap_list_sscanf(b, out[i].cpus) < 0)
			continue;
		for (size_t k = 0; k < t->n_numa; k++) {
			if (!hwloc_bitmap_iszero(t->numa[k].cpuset) &&
			    hwloc_bitmap_isincluded(b, t->numa[k].cpuset)) {
				out[i].numa = (int)t->numa[k].os_index;
				break;
			}
		}
	}
	hwloc_bitmap_free(b);
	return 0;
}

int bind_plan(const struct topo *t, int slots, const struct bind_opts *o,
	      struct bind_rank *out, struct herd_err *err)
{
	const struct platform_gpu **by_gpu = NULL;
	struct work *w = NULL;
	int rc = -1;

	if (slots < 1 || slots > BIND_SLOTS_MAX)
		return herd_errprintf(err, "slots: %d is not between 1 and %d",
				      slots, BIND_SLOTS_MAX);
	memset(out, 0, (size_t)slots * sizeof(*out));
	for (int i = 0; i < slots; i++) {
		out[i].local_rank = i;
		out[i].gpu = -1;
		out[i].nic_port = -1;
		out[i].numa = -1;
	}
	by_gpu = calloc(t->n_gpus + 1, sizeof(*by_gpu));
	w = calloc((size_t)slots, sizeof(*w));
	if (!by_gpu || !w) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	if (o->nic == SPEC_BIND_NIC_LIST && o->n_nic_list == 0) {
		herd_errprintf(err, "bind.nic: the list is empty");
		goto out;
	}
	if (check_platform(t, o->platform, by_gpu, err) < 0 ||
	    place_ranks(t, slots, o, by_gpu, w, out, err) < 0)
		goto out;
	if (o->cpu != SPEC_BIND_CPU_NONE &&
	    split_domains(t, slots, o, w, out, err) < 0)
		goto out;
	if (o->cpu != SPEC_BIND_CPU_NONE && home_numa(t, slots, out) < 0) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	rc = 0;
out:
	if (rc < 0)
		bind_ranks_release(out, (size_t)slots);
	work_free(w, w ? (size_t)slots : 0);
	free(by_gpu);
	return rc;
}

/* --- applying ---------------------------------------------------------- */

size_t bind_env(const struct bind_rank *r, struct bind_env_var *out)
{
	size_t n = 0;

	if (r->gpu >= 0) {
		out[n].key = "CUDA_VISIBLE_DEVICES";
		snprintf(out[n++].value, BIND_ENV_VALUE_MAX, "%d", r->gpu);
		out[n].key = "CUDA_DEVICE_ORDER";
		snprintf(out[n++].value, BIND_ENV_VALUE_MAX, "PCI_BUS_ID");
	}
	if (r->nic[0]) {
		out[n].key = "NCCL_IB_HCA";
		snprintf(out[n++].value, BIND_ENV_VALUE_MAX, "=%s:%d", r->nic,
			 r->nic_port);
	}
	if (r->threads > 0) {
		out[n].key = "OMP_NUM_THREADS";
		snprintf(out[n++].value, BIND_ENV_VALUE_MAX, "%d", r->threads);
	}
	return n;
}

int bind_rank_cpu_set(const struct bind_rank *r, cpu_set_t *set)
{
	hwloc_bitmap_t b;
	int id, rc = 0;

	CPU_ZERO(set);
	if (!r->cpus || !r->cpus[0])
		return -1;
	b = hwloc_bitmap_alloc();
	if (!b)
		return -1;
	if (hwloc_bitmap_list_sscanf(b, r->cpus) < 0) {
		hwloc_bitmap_free(b);
		return -1;
	}
	hwloc_bitmap_foreach_begin(id, b)
	{
		if (id >= CPU_SETSIZE)
			rc = -1;
		else
			CPU_SET(id, set);
	}
	hwloc_bitmap_foreach_end();
	hwloc_bitmap_free(b);
	return rc;
}
