/* bind_platform.c — the platform file (herd/bind.h): what the operator
 * knows of a machine's GPUs (their NIC, port, netdev and CPUs), which
 * beats discovery.  Parsed strictly: every bus id, name and list is
 * checked.
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

#include "bind_int.h"
#include "herd/bind.h"
#include "herd/dstune.h"
#include "herd/file.h"

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
			herd_errprintf(
			    err,
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
