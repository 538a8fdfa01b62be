/* spec_keys.c — the schema of job.yaml: one table of keys per section,
 * each key with its setter, range and default word, and the setters that
 * belong to one key alone (host sources, inventory, listen, patterns).
 * The man page generator (scripts/mkman.py) reads the keys from the name
 * entries of the tables in lib/job/spec*.c, in table order: a table stays
 * in a file of that name.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <regex.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd/hostlist.h"
#include "herd/inventory.h"
#include "herd/proto.h"
#include "spec_int.h"

/* ---- host sources, inventory, slurm and nic ---------------------------- */

/* Registers a host source; two of them at once are an error naming both. */
static int source(struct ctx *c, const struct field *f, yaml_node_t *key)
{
	if (c->source_key)
		return spec_perr(c, key->start_mark,
				 "two host sources: %s and %s "
				 "(at %zu:%zu); give only one",
				 f->name, c->source_name,
				 c->source_key->start_mark.line + 1,
				 c->source_key->start_mark.column + 1);
	c->source_key = key;
	c->source_name = f->name;
	c->spec->nodes.source = f->source;
	return 0;
}

static int set_source_str(struct ctx *c, const struct field *f,
			  yaml_node_t *key, yaml_node_t *val)
{
	if (spec_is_null(val))
		return spec_perr(c, val->start_mark,
				 "expected a string for %s, "
				 "got nothing",
				 f->name);
	if (spec_set_str(c, f, key, val) < 0)
		return -1;
	return source(c, f, key);
}

static int set_hosts(struct ctx *c, const struct field *f, yaml_node_t *key,
		     yaml_node_t *val)
{
	struct spec_strv list = {NULL, 0};
	char *joined = NULL;
	size_t len = 0;
	int rc = -1;

	if (val->type != YAML_SEQUENCE_NODE)
		return set_source_str(c, f, key, val);
	if (spec_strv_parse(c, f->name, val, &list) < 0)
		goto out;
	if (!list.n) {
		spec_perr(c, val->start_mark,
			  "expected at least one hostlist "
			  "expression in %s",
			  f->name);
		goto out;
	}
	for (size_t i = 0; i < list.n; i++)
		len += strlen(list.v[i]) + 1;
	if (!(joined = malloc(len))) {
		spec_perr(c, val->start_mark, "out of memory");
		goto out;
	}
	len = 0;
	for (size_t i = 0; i < list.n; i++) {
		size_t n = strlen(list.v[i]);

		memcpy(joined + len, list.v[i], n);
		len += n;
		joined[len++] = i + 1 < list.n ? ',' : '\0';
	}
	free(c->spec->nodes.hosts);
	c->spec->nodes.hosts = joined;
	joined = NULL;
	rc = source(c, f, key);
out:
	for (size_t i = 0; i < list.n; i++)
		free(list.v[i]);
	free(list.v);
	free(joined);
	return rc;
}

static int set_slurm_source(struct ctx *c, const struct field *f,
			    yaml_node_t *key, yaml_node_t *val)
{
	char buf[SHOW_MAX + 4];
	const char *v = spec_scalar(c, val, f->name, "true or false");

	if (!v)
		return -1;
	if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE"))
		return source(c, f, key);
	if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "FALSE"))
		return 0;
	return spec_perr(c, val->start_mark,
			 "expected true or false for %s, got "
			 "'%s'",
			 f->name, spec_show(v, buf));
}

static int set_section(struct ctx *c, const struct field *f, yaml_node_t *key,
		       yaml_node_t *val)
{
	(void)key;
	/* "slurm:" with nothing under it: the section with its defaults. */
	if (spec_is_null(val))
		return 0;
	return spec_walk(c, val, f->sub, f->name);
}

static int set_inventory(struct ctx *c, const struct field *f, yaml_node_t *key,
			 yaml_node_t *val)
{
	if (set_section(c, f, key, val) < 0)
		return -1;
	if (!c->spec->nodes.inventory.url)
		return spec_perr(c, val->start_mark,
				 "%s needs a url (the HTTP "
				 "JSON API to ask for hosts)",
				 f->name);
	return source(c, f, key);
}

static int set_inventory_url(struct ctx *c, const struct field *f,
			     yaml_node_t *key, yaml_node_t *val)
{
	const char *url;

	if (spec_set_str(c, f, key, val) < 0)
		return -1;
	url = c->spec->nodes.inventory.url;
	if (url && strncmp(url, "http://", 7) != 0 &&
	    strncmp(url, "https://", 8) != 0)
		return spec_perr(c, val->start_mark,
				 "expected an http:// or https:// URL for %s",
				 f->name);
	return 0;
}

static int set_inventory_token_env(struct ctx *c, const struct field *f,
				   yaml_node_t *key, yaml_node_t *val)
{
	const char *name;

	if (spec_set_str(c, f, key, val) < 0)
		return -1;
	name = c->spec->nodes.inventory.token_env;
	if (!name || spec_env_name_ok(name))
		return 0;
	return spec_perr(
	    c, val->start_mark,
	    "expected the name of an environment variable for %s "
	    "(the variable holds the token; the token itself never "
	    "goes into the job file)",
	    f->name);
}

static int set_inventory_filter(struct ctx *c, const struct field *f,
				yaml_node_t *key, yaml_node_t *val)
{
	struct herd_err e;

	if (spec_set_str(c, f, key, val) < 0)
		return -1;
	if (inventory_filter_check(c->spec->nodes.inventory.filter, &e) < 0)
		return spec_perr(c, val->start_mark, "%s: %s", f->name, e.text);
	return 0;
}

static int set_slurm_section(struct ctx *c, const struct field *f,
			     yaml_node_t *key, yaml_node_t *val)
{
	c->spec->slurm.present = true;
	return set_section(c, f, key, val);
}

static const char *const nic_words[] = {"auto", "none", NULL};

static int set_nic(struct ctx *c, const struct field *f, yaml_node_t *key,
		   yaml_node_t *val)
{
	struct spec *s = c->spec;
	int i;

	(void)key;
	if (val->type == YAML_SEQUENCE_NODE) {
		if (spec_strv_parse(c, f->name, val, &s->bind.nic_list) < 0)
			return -1;
		if (!s->bind.nic_list.n)
			return spec_perr(
			    c, val->start_mark,
			    "expected auto, none "
			    "or a non-empty list of NIC names for %s",
			    f->name);
		s->bind.nic = SPEC_BIND_NIC_LIST;
		return 0;
	}
	if (val->type != YAML_SCALAR_NODE)
		return spec_perr(c, val->start_mark,
				 "expected auto, none or a "
				 "list of NIC names for %s, got %s",
				 f->name, spec_kind_name(val));
	if ((i = spec_enum_index(c, f, val, ", or a list of NIC names")) < 0)
		return -1;
	s->bind.nic = i ? SPEC_BIND_NIC_NONE : SPEC_BIND_NIC_AUTO;
	return 0;
}

/* ---- tables ------------------------------------------------------------ */

#define OFF(m) offsetof(struct spec, m)

static const char *const mode_names[] = {"torch", "pmix", "plain", NULL};
static const char *const host_keys_names[] = {"strict", "accept-new", NULL};
static const char *const gpu_names[] = {"auto", "none", NULL};
static const char *const straggler_names[] = {"warn", "off", "evict", NULL};
static const char *const warm_names[] = {"auto", "off", NULL};
static const char *const survivors_names[] = {"keep", "restart", NULL};
static const char *const memory_names[] = {"auto", "off", NULL};
static const char *const cpu_names[] = {"numa", "cores", "none", NULL};
static const char *const transport_names[] = {"auto", "local", NULL};
static const char *const source_names[] = {
    "none", "hosts", "hostfile", "slurm", "inventory", "command", NULL};

static const struct field inventory_keys[] = {
    {.name = "nodes.inventory.url",
     .set = set_inventory_url,
     .off = OFF(nodes.inventory.url)},
    {.name = "nodes.inventory.token_env",
     .set = set_inventory_token_env,
     .off = OFF(nodes.inventory.token_env)},
    {.name = "nodes.inventory.filter",
     .set = set_inventory_filter,
     .off = OFF(nodes.inventory.filter)},
    {0},
};

static const struct field nodes_keys[] = {
    {.name = "nodes.hosts",
     .set = set_hosts,
     .off = OFF(nodes.hosts),
     .track = TR_HOSTS,
     .source = SPEC_SOURCE_HOSTS},
    {.name = "nodes.hostfile",
     .set = set_source_str,
     .off = OFF(nodes.hostfile),
     .source = SPEC_SOURCE_HOSTFILE},
    {.name = "nodes.slurm",
     .set = set_slurm_source,
     .source = SPEC_SOURCE_SLURM},
    {.name = "nodes.inventory",
     .set = set_inventory,
     .sub = inventory_keys,
     .track = TR_INVENTORY,
     .source = SPEC_SOURCE_INVENTORY},
    {.name = "nodes.command",
     .set = set_source_str,
     .off = OFF(nodes.command),
     .source = SPEC_SOURCE_COMMAND},
    {.name = "nodes.command_timeout",
     .set = spec_set_duration,
     .off = OFF(nodes.command_timeout_ms),
     .lo = 1},
    {.name = "nodes.count",
     .set = spec_set_long,
     .off = OFF(nodes.count),
     .lo = 1,
     .hi = HOSTLIST_MAX,
     .word = "all",
     .track = TR_COUNT},
    {.name = "nodes.slots",
     .set = spec_set_long,
     .off = OFF(nodes.slots),
     .lo = 1,
     .hi = 65536,
     .word = "auto"},
    {.name = "nodes.min",
     .set = spec_set_long,
     .off = OFF(nodes.min),
     .lo = 1,
     .hi = HOSTLIST_MAX,
     .word = "all",
     .track = TR_MIN},
    {.name = "nodes.spares",
     .set = spec_set_str,
     .off = OFF(nodes.spares),
     .track = TR_SPARES},
    {.name = "nodes.readmit_after",
     .set = spec_set_duration,
     .off = OFF(nodes.readmit_after_ms),
     .word = "never"},
    {.name = "nodes.transport",
     .set = spec_set_enum,
     .off = OFF(nodes.transport),
     .names = transport_names,
     .track = TR_TRANSPORT},
    {0},
};

static const struct field ssh_keys[] = {
    {.name = "ssh.user", .set = spec_set_str, .off = OFF(ssh.user)},
    {.name = "ssh.port",
     .set = spec_set_int,
     .off = OFF(ssh.port),
     .lo = 1,
     .hi = 65535},
    {.name = "ssh.identity", .set = spec_set_str, .off = OFF(ssh.identity)},
    {.name = "ssh.known_hosts",
     .set = spec_set_str,
     .off = OFF(ssh.known_hosts)},
    {.name = "ssh.host_keys",
     .set = spec_set_host_keys,
     .off = OFF(ssh.host_keys),
     .names = host_keys_names},
    {.name = "ssh.fanout",
     .set = spec_set_int,
     .off = OFF(ssh.fanout),
     .lo = 1,
     .hi = 65536},
    {.name = "ssh.connect_timeout",
     .set = spec_set_duration,
     .off = OFF(ssh.connect_timeout_ms),
     .lo = 1},
    {.name = "ssh.agent_dir",
     .set = spec_set_agent_dir,
     .off = OFF(ssh.agent_dir)},
    {0},
};

static const struct field launch_keys[] = {
    {.name = "launch.mode",
     .set = spec_set_enum,
     .off = OFF(launch.mode),
     .names = mode_names},
    {.name = "launch.command",
     .set = spec_set_str,
     .off = OFF(launch.command),
     .track = TR_COMMAND},
    {.name = "launch.workdir", .set = spec_set_str, .off = OFF(launch.workdir)},
    {.name = "launch.env", .set = spec_set_env},
    {.name = "launch.env_pass",
     .set = spec_set_strv,
     .off = OFF(launch.env_pass)},
    {.name = "launch.warm",
     .set = spec_set_enum,
     .off = OFF(launch.warm),
     .names = warm_names},
    {.name = "launch.preload",
     .set = spec_set_preload,
     .off = OFF(launch.preload)},
    {.name = "launch.master_port",
     .set = spec_set_int,
     .off = OFF(launch.master_port),
     .lo = 1,
     .hi = 65535},
    {0},
};

static const struct field bind_keys[] = {
    {.name = "bind.gpu",
     .set = spec_set_enum,
     .off = OFF(bind.gpu),
     .names = gpu_names},
    {.name = "bind.nic", .set = set_nic, .names = nic_words},
    {.name = "bind.cpu",
     .set = spec_set_enum,
     .off = OFF(bind.cpu),
     .names = cpu_names},
    {.name = "bind.topology_file",
     .set = spec_set_str,
     .off = OFF(bind.topology_file)},
    {0},
};

static const struct field health_keys[] = {
    {.name = "health.heartbeat",
     .set = spec_set_duration,
     .off = OFF(health.heartbeat_ms),
     .lo = 1,
     .track = TR_HEARTBEAT},
    {.name = "health.timeout",
     .set = spec_set_duration,
     .off = OFF(health.timeout_ms),
     .lo = 1,
     .track = TR_TIMEOUT},
    {.name = "health.grace",
     .set = spec_set_duration,
     .off = OFF(health.grace_ms)},
    {.name = "health.progress_timeout",
     .set = spec_set_duration,
     .off = OFF(health.progress_timeout_ms),
     .lo = 1,
     .word = "off"},
    {.name = "health.fence_timeout",
     .set = spec_set_duration,
     .off = OFF(health.fence_timeout_ms),
     .lo = 1},
    {.name = "health.notify_grace",
     .set = spec_set_duration,
     .off = OFF(health.notify_grace_ms)},
    {.name = "health.check_command",
     .set = spec_set_str,
     .off = OFF(health.check_command)},
    {.name = "health.preflight",
     .set = spec_set_bool,
     .off = OFF(health.preflight)},
    {.name = "health.min_free",
     .set = spec_set_bytes,
     .off = OFF(health.min_free)},
    {.name = "health.straggler",
     .set = spec_set_enum,
     .off = OFF(health.straggler),
     .names = straggler_names},
    {.name = "health.straggler_ratio",
     .set = spec_set_ratio,
     .off = OFF(health.straggler_ratio)},
    {.name = "health.straggler_window",
     .set = spec_set_duration,
     .off = OFF(health.straggler_window_ms),
     .lo = 1},
    {.name = "health.quarantine_after",
     .set = spec_set_int,
     .off = OFF(health.quarantine_after),
     .lo = 0,
     .hi = 32}, /* NODEREC_KEEP: the failures kept per host */
    {.name = "health.quarantine_for",
     .set = spec_set_duration,
     .off = OFF(health.quarantine_for_ms),
     .lo = 1},
    {.name = "health.rejoin_timeout",
     .set = spec_set_duration,
     .off = OFF(health.rejoin_timeout_ms),
     .lo = 1},
    {0},
};

static const struct field restart_keys[] = {
    {.name = "restart.max",
     .set = spec_set_int,
     .off = OFF(restart.max),
     .lo = 0,
     .hi = 1000000},
    {.name = "restart.backoff",
     .set = spec_set_duration,
     .off = OFF(restart.backoff_ms)},
    {.name = "restart.survivors",
     .set = spec_set_enum,
     .off = OFF(restart.survivors),
     .names = survivors_names},
    {0},
};

static const struct field checkpoint_keys[] = {
    {.name = "checkpoint.dir",
     .set = spec_set_str,
     .off = OFF(checkpoint.dir),
     .track = TR_CHECKPOINT},
    {.name = "checkpoint.latest_file",
     .set = spec_set_str,
     .off = OFF(checkpoint.latest_file),
     .track = TR_LATEST},
    {.name = "checkpoint.pattern",
     .set = spec_set_str,
     .off = OFF(checkpoint.pattern),
     .track = TR_PATTERN},
    {.name = "checkpoint.complete_marker",
     .set = spec_set_str,
     .off = OFF(checkpoint.complete_marker)},
    {.name = "checkpoint.resume_args",
     .set = spec_set_str,
     .off = OFF(checkpoint.resume_args),
     .track = TR_RESUME},
    {.name = "checkpoint.memory",
     .set = spec_set_enum,
     .off = OFF(checkpoint.memory),
     .names = memory_names},
    {.name = "checkpoint.memory_dir",
     .set = spec_set_str,
     .off = OFF(checkpoint.memory_dir)},
    {.name = "checkpoint.replicas",
     .set = spec_set_int,
     .off = OFF(checkpoint.replicas),
     .lo = 0,
     .hi = 8},
    {.name = "checkpoint.memory_max",
     .set = spec_set_bytes,
     .off = OFF(checkpoint.memory_max)},
    {.name = "checkpoint.persist_every",
     .set = spec_set_duration,
     .off = OFF(checkpoint.persist_every_ms),
     .lo = 1,
     .word = "never"},
    {.name = "checkpoint.keep_memory",
     .set = spec_set_bool,
     .off = OFF(checkpoint.keep_memory)},
    {0},
};

static const struct field log_keys[] = {
    {.name = "log.dir", .set = spec_set_str, .off = OFF(log.dir)},
    {.name = "log.mode", .set = spec_set_log_mode, .off = OFF(log.mode)},
    {0},
};

int spec_listen_parse(const char *text, char host[46], int *port,
		      struct herd_err *err)
{
	const char *colon, *h = text, *pend;
	size_t hlen;
	char *end;
	long n;
	unsigned char bin[16];

	if (text[0] == '[') {
		if (!(pend = strchr(text, ']')) || pend[1] != ':')
			return herd_errprintf(err, "expected [IPv6]:PORT");
		h = text + 1;
		hlen = (size_t)(pend - h);
		colon = pend + 1;
	} else if ((colon = strrchr(text, ':'))) {
		if (strchr(text, ':') != colon)
			return herd_errprintf(err, "an IPv6 address goes in "
						   "brackets: [::1]:PORT");
		hlen = (size_t)(colon - text);
	} else {
		colon = text - 1; /* a bare port */
		hlen = 0;
	}
	errno = 0;
	n = strtol(colon + 1, &end, 10);
	if (!colon[1] || *end || errno || n < 1 || n > 65535)
		return herd_errprintf(err, "expected a port from 1 to 65535 "
					   "after the last ':'");
	if (hlen == 0 || (hlen == 9 && !strncmp(h, "localhost", 9))) {
		snprintf(host, 46, "127.0.0.1");
	} else {
		if (hlen > 45)
			return herd_errprintf(err, "expected an IP address "
						   "before the port");
		memcpy(host, h, hlen);
		host[hlen] = '\0';
		if (inet_pton(AF_INET, host, bin) != 1 &&
		    inet_pton(AF_INET6, host, bin) != 1)
			return herd_errprintf(err, "expected an IP address "
						   "(such as 127.0.0.1) or "
						   "localhost before the port");
	}
	*port = (int)n;
	return 0;
}

static int set_listen(struct ctx *c, const struct field *f, yaml_node_t *key,
		      yaml_node_t *val)
{
	struct herd_err lerr;
	char buf[SHOW_MAX + 4], host[46];
	const char *v;
	int port;

	if (spec_is_null(val))
		return spec_set_str(c, f, key, val);
	if (!(v = spec_scalar(c, val, f->name,
			      "HOST:PORT such as 127.0.0.1:9464")))
		return -1;
	if (spec_listen_parse(v, host, &port, &lerr) < 0)
		return spec_perr(c, val->start_mark,
				 "bad address '%s' for %s: %s",
				 spec_show(v, buf), f->name, lerr.text);
	return spec_set_str(c, f, key, val);
}

static int pattern_name_ok(const char *s)
{
	return proto_metric_name_ok(s);
}

/* metrics.patterns: a mapping NAME: ERE, each with exactly one group. */
static int set_patterns(struct ctx *c, const struct field *f, yaml_node_t *key,
			yaml_node_t *val)
{
	struct spec *s = c->spec;
	char buf[SHOW_MAX + 4];
	yaml_node_pair_t *p;
	long n;
	size_t groups;

	(void)key;
	if ((n = spec_map_size(c, f, val, "metric names to regular expressions",
			       SPEC_PATTERNS_MAX)) <= 0)
		return (int)n;
	if (!(s->metrics.patterns =
		  calloc((size_t)n, sizeof(*s->metrics.patterns))))
		return spec_perr(c, val->start_mark, "out of memory");
	for (p = val->data.mapping.pairs.start; p < val->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = spec_node(c, p->key),
			    *v = spec_node(c, p->value);
		struct spec_pattern *e =
		    &s->metrics.patterns[s->metrics.n_patterns];
		const char *name, *text;
		char why[256];
		regex_t re;
		int rc;

		if (!(name = spec_scalar(c, k, f->name, "a metric name")))
			return -1;
		if (!pattern_name_ok(name))
			return spec_perr(
			    c, k->start_mark,
			    "expected a metric name (letters, digits, "
			    "'_', at most %d) in %s, got '%s'",
			    SPEC_PATTERN_NAME_MAX, f->name,
			    spec_show(name, buf));
		if (spec_dup_key(c, f, val, p, "metric", name) < 0)
			return -1;
		if (!(text = spec_scalar(c, v, name, "a regular expression")))
			return -1;
		if (!*text || strlen(text) > SPEC_PATTERN_MAX)
			return spec_perr(
			    c, v->start_mark,
			    "expected a regular expression of 1 to %d "
			    "bytes for %s.%s",
			    SPEC_PATTERN_MAX, f->name, name);
		rc = regcomp(&re, text, REG_EXTENDED);
		if (rc != 0) {
			regerror(rc, &re, why, sizeof(why));
			return spec_perr(c, v->start_mark,
					 "bad regular expression for %s.%s: %s",
					 f->name, name, why);
		}
		groups = re.re_nsub;
		regfree(&re);
		if (groups != 1)
			return spec_perr(
			    c, v->start_mark,
			    "the regular expression for %s.%s has %zu "
			    "groups; it needs exactly one, around the "
			    "number (use [...] or a second pattern "
			    "instead of more groups)",
			    f->name, name, groups);
		if (!(e->name = strdup(name)) || !(e->regex = strdup(text))) {
			free(e->name);
			e->name = NULL;
			return spec_perr(c, v->start_mark, "out of memory");
		}
		s->metrics.n_patterns++;
	}
	return 0;
}

static const struct field metrics_keys[] = {
    {.name = "metrics.listen", .set = set_listen, .off = OFF(metrics.listen)},
    {.name = "metrics.interval",
     .set = spec_set_duration,
     .off = OFF(metrics.interval_ms),
     .lo = 100,
     .word = "auto"},
    {.name = "metrics.patterns", .set = set_patterns},
    {0},
};

static const struct field slurm_keys[] = {
    {.name = "slurm.partition",
     .set = spec_set_str,
     .off = OFF(slurm.partition)},
    {.name = "slurm.time", .set = spec_set_str, .off = OFF(slurm.time)},
    {.name = "slurm.account", .set = spec_set_str, .off = OFF(slurm.account)},
    {.name = "slurm.qos", .set = spec_set_str, .off = OFF(slurm.qos)},
    {.name = "slurm.nodes",
     .set = spec_set_long,
     .off = OFF(slurm.nodes),
     .lo = 1,
     .hi = HOSTLIST_MAX,
     .word = "auto"},
    {.name = "slurm.gpus_per_node",
     .set = spec_set_long,
     .off = OFF(slurm.gpus_per_node),
     .lo = 0,
     .hi = 1024},
    {.name = "slurm.exclusive",
     .set = spec_set_bool,
     .off = OFF(slurm.exclusive)},
    {.name = "slurm.requeue", .set = spec_set_bool, .off = OFF(slurm.requeue)},
    {.name = "slurm.output", .set = spec_set_str, .off = OFF(slurm.output)},
    {.name = "slurm.extra", .set = spec_set_strv, .off = OFF(slurm.extra)},
    {0},
};

const struct field spec_top_keys[] = {
    {.name = "name", .set = spec_set_name, .off = OFF(name)},
    {.name = "nodes", .set = set_section, .sub = nodes_keys},
    {.name = "ssh", .set = set_section, .sub = ssh_keys},
    {.name = "launch",
     .set = set_section,
     .sub = launch_keys,
     .track = TR_LAUNCH},
    {.name = "bind", .set = set_section, .sub = bind_keys},
    {.name = "health", .set = set_section, .sub = health_keys},
    {.name = "restart", .set = set_section, .sub = restart_keys},
    {.name = "checkpoint", .set = set_section, .sub = checkpoint_keys},
    {.name = "log", .set = set_section, .sub = log_keys},
    {.name = "metrics", .set = set_section, .sub = metrics_keys},
    {.name = "slurm", .set = set_slurm_section, .sub = slurm_keys},
    {0},
};

static const char *name_at(const char *const *names, size_t n, int i)
{
	return i >= 0 && (size_t)i < n ? names[i] : "?";
}

#define NAMES(a) (sizeof(a) / sizeof(a[0]) - 1)

const char *spec_mode_name(enum spec_mode mode)
{
	return name_at(mode_names, NAMES(mode_names), (int)mode);
}

const char *spec_source_name(enum spec_source src)
{
	return name_at(source_names, NAMES(source_names), (int)src);
}

const char *spec_transport_name(enum spec_transport transport)
{
	return name_at(transport_names, NAMES(transport_names), (int)transport);
}

const char *spec_host_keys_name(enum spec_host_keys host_keys)
{
	return name_at(host_keys_names, NAMES(host_keys_names), (int)host_keys);
}

const char *spec_bind_gpu_name(enum spec_bind_gpu gpu)
{
	return name_at(gpu_names, NAMES(gpu_names), (int)gpu);
}

const char *spec_bind_cpu_name(enum spec_bind_cpu cpu)
{
	return name_at(cpu_names, NAMES(cpu_names), (int)cpu);
}

const char *spec_straggler_name(enum spec_straggler straggler)
{
	return name_at(straggler_names, NAMES(straggler_names), (int)straggler);
}

const char *spec_warm_name(enum spec_warm warm)
{
	return name_at(warm_names, NAMES(warm_names), (int)warm);
}

const char *spec_survivors_name(enum spec_survivors survivors)
{
	return name_at(survivors_names, NAMES(survivors_names), (int)survivors);
}

const char *spec_memory_name(enum spec_memory memory)
{
	return name_at(memory_names, NAMES(memory_names), (int)memory);
}
