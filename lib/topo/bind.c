/* bind.c — the binding policy.  See herd/bind.h for the rules; this file
 * only implements them.  The platform file is bind_platform.c.
 *
 * hwloc bitmaps serve as the set type (union, intersection, cpu lists);
 * no hwloc topology is involved.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bind_int.h"
#include "herd/bind.h"

/* NIC distance classes (see bind.h). */
enum { NEAR_SWITCH = 0, NEAR_HOST_BRIDGE, NEAR_NUMA, NEAR_PACKAGE, NEAR_ANY };

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
