/* topo_json.c — a node's topology as the JSON summary an agent sends in
 * its HELLO (topo_summary()), and back (topo_from_summary(), which trusts
 * nothing in it: every list, name and index is checked).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd/topo.h"
#include "topo_int.h"

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

	if (!s || topo_copy_name(dst, size, s) < 0)
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

		if (!s || topo_copy_name(loc->path[i], TOPO_BUSID_MAX, s) < 0)
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
