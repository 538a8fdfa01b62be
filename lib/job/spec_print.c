/* lib/job/spec_print.c — the resolved spec written back as YAML with libyaml's
 * emitter, so that quoting is always right and spec_parse() reads the
 * output back to the same struct. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "herd/spec.h"

/* Room for a number or a duration as text. */
#define WORD_MAX 32

struct out {
	yaml_emitter_t em;
	int failed;
};

/* Emits ev (the emitter owns it from here on); after the first failure
 * every later event is dropped and the failure reported at the end. */
static void emit(struct out *o, yaml_event_t *ev, int made)
{
	if (!made) {
		o->failed = 1;
		return;
	}
	if (o->failed) {
		yaml_event_delete(ev);
		return;
	}
	if (!yaml_emitter_emit(&o->em, ev))
		o->failed = 1;
}

/* Would a plain scalar with this text read back as something other than a
 * string (null, boolean, number) to a YAML reader? Then quote it. */
static int looks_typed(const char *s)
{
	static const char *const words[] = {
	    "",	     "~",     "null",  "Null", "NULL", "true", "True", "TRUE",
	    "false", "False", "FALSE", "yes",  "Yes",  "YES",  "no",   "No",
	    "NO",    "on",    "On",    "ON",   "off",  "Off",  "OFF",  "y",
	    "Y",     "n",     "N",     ".inf", ".nan", NULL};
	const char *p = s;

	for (size_t i = 0; words[i]; i++)
		if (!strcmp(s, words[i]))
			return 1;
	if (*p == '-' || *p == '+' || *p == '.')
		p++;
	return *p >= '0' && *p <= '9';
}

static void scalar(struct out *o, const char *text, int plain)
{
	yaml_event_t ev;
	int made;

	made = yaml_scalar_event_initialize(
	    &ev, NULL, NULL, (yaml_char_t *)text, -1, plain, 1,
	    plain ? YAML_PLAIN_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE);
	emit(o, &ev, made);
}

/* A string value: NULL ("not set") prints as ~. */
static void str(struct out *o, const char *key, const char *value)
{
	yaml_event_t ev;
	int made;

	scalar(o, key, 1);
	if (!value) {
		scalar(o, "~", 1);
		return;
	}
	made = yaml_scalar_event_initialize(
	    &ev, NULL, NULL, (yaml_char_t *)value, -1, !looks_typed(value), 1,
	    YAML_ANY_SCALAR_STYLE);
	emit(o, &ev, made);
}

static void word(struct out *o, const char *key, const char *value)
{
	scalar(o, key, 1);
	scalar(o, value, 1);
}

static void num(struct out *o, const char *key, long n, const char *zero)
{
	char buf[WORD_MAX];

	snprintf(buf, sizeof(buf), "%ld", n);
	word(o, key, n == 0 && zero ? zero : buf);
}

static void dur(struct out *o, const char *key, long ms, const char *never)
{
	char buf[WORD_MAX];

	if (ms < 0 && never) {
		word(o, key, never);
		return;
	}
	if (spec_duration_format(ms, buf, sizeof(buf)) < 0) {
		o->failed = 1;
		return;
	}
	word(o, key, buf);
}

static void map_start(struct out *o, const char *key, int flow)
{
	yaml_event_t ev;
	int made;

	if (key)
		scalar(o, key, 1);
	made = yaml_mapping_start_event_initialize(
	    &ev, NULL, NULL, 1,
	    flow ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE);
	emit(o, &ev, made);
}

static void map_end(struct out *o)
{
	yaml_event_t ev;

	emit(o, &ev, yaml_mapping_end_event_initialize(&ev));
}

static void list(struct out *o, const char *key, const struct spec_strv *v)
{
	yaml_event_t ev;
	int made;

	scalar(o, key, 1);
	made = yaml_sequence_start_event_initialize(
	    &ev, NULL, NULL, 1,
	    v->n ? YAML_BLOCK_SEQUENCE_STYLE : YAML_FLOW_SEQUENCE_STYLE);
	emit(o, &ev, made);
	for (size_t i = 0; i < v->n; i++) {
		made = yaml_scalar_event_initialize(
		    &ev, NULL, NULL, (yaml_char_t *)v->v[i], -1,
		    !looks_typed(v->v[i]), 1, YAML_ANY_SCALAR_STYLE);
		emit(o, &ev, made);
	}
	emit(o, &ev, yaml_sequence_end_event_initialize(&ev));
}

static void nodes(struct out *o, const struct spec *s)
{
	map_start(o, "nodes", 0);
	switch (s->nodes.source) {
	case SPEC_SOURCE_HOSTS:
		str(o, "hosts", s->nodes.hosts);
		break;
	case SPEC_SOURCE_HOSTFILE:
		str(o, "hostfile", s->nodes.hostfile);
		break;
	case SPEC_SOURCE_SLURM:
		word(o, "slurm", "true");
		break;
	case SPEC_SOURCE_INVENTORY:
		map_start(o, "inventory", 0);
		str(o, "url", s->nodes.inventory.url);
		str(o, "token_env", s->nodes.inventory.token_env);
		str(o, "filter", s->nodes.inventory.filter);
		map_end(o);
		break;
	case SPEC_SOURCE_COMMAND:
		str(o, "command", s->nodes.command);
		break;
	case SPEC_SOURCE_NONE:
		break;
	}
	dur(o, "command_timeout", s->nodes.command_timeout_ms, NULL);
	num(o, "count", s->nodes.count, "all");
	num(o, "slots", s->nodes.slots, "auto");
	num(o, "min", s->nodes.min, "all");
	str(o, "spares", s->nodes.spares);
	dur(o, "readmit_after", s->nodes.readmit_after_ms, "never");
	word(o, "transport", spec_transport_name(s->nodes.transport));
	map_end(o);
}

static void body(struct out *o, const struct spec *s)
{
	char mode[WORD_MAX], bytes[WORD_MAX];

	str(o, "name", s->name);
	nodes(o, s);

	map_start(o, "ssh", 0);
	str(o, "user", s->ssh.user);
	num(o, "port", s->ssh.port, NULL);
	str(o, "identity", s->ssh.identity);
	str(o, "known_hosts", s->ssh.known_hosts);
	word(o, "host_keys", spec_host_keys_name(s->ssh.host_keys));
	num(o, "fanout", s->ssh.fanout, NULL);
	dur(o, "connect_timeout", s->ssh.connect_timeout_ms, NULL);
	str(o, "agent_dir", s->ssh.agent_dir);
	map_end(o);

	map_start(o, "launch", 0);
	word(o, "mode", spec_mode_name(s->launch.mode));
	str(o, "command", s->launch.command);
	str(o, "workdir", s->launch.workdir);
	map_start(o, "env", s->launch.n_env == 0);
	for (size_t i = 0; i < s->launch.n_env; i++)
		str(o, s->launch.env[i].key, s->launch.env[i].value);
	map_end(o);
	list(o, "env_pass", &s->launch.env_pass);
	num(o, "master_port", s->launch.master_port, NULL);
	word(o, "warm", spec_warm_name(s->launch.warm));
	list(o, "preload", &s->launch.preload);
	map_end(o);

	map_start(o, "bind", 0);
	word(o, "gpu", spec_bind_gpu_name(s->bind.gpu));
	if (s->bind.nic == SPEC_BIND_NIC_LIST)
		list(o, "nic", &s->bind.nic_list);
	else
		word(o, "nic",
		     s->bind.nic == SPEC_BIND_NIC_NONE ? "none" : "auto");
	word(o, "cpu", spec_bind_cpu_name(s->bind.cpu));
	str(o, "topology_file", s->bind.topology_file);
	map_end(o);

	map_start(o, "health", 0);
	dur(o, "heartbeat", s->health.heartbeat_ms, NULL);
	dur(o, "timeout", s->health.timeout_ms, NULL);
	dur(o, "grace", s->health.grace_ms, NULL);
	dur(o, "progress_timeout", s->health.progress_timeout_ms, "off");
	dur(o, "fence_timeout", s->health.fence_timeout_ms, NULL);
	dur(o, "notify_grace", s->health.notify_grace_ms, NULL);
	str(o, "check_command", s->health.check_command);
	word(o, "preflight", s->health.preflight ? "true" : "false");
	if (spec_bytes_format(s->health.min_free, bytes, sizeof(bytes)) < 0)
		o->failed = 1;
	else
		word(o, "min_free", bytes);
	word(o, "straggler", spec_straggler_name(s->health.straggler));
	snprintf(bytes, sizeof(bytes), "%g", s->health.straggler_ratio);
	word(o, "straggler_ratio", bytes);
	dur(o, "straggler_window", s->health.straggler_window_ms, NULL);
	num(o, "quarantine_after", s->health.quarantine_after, NULL);
	dur(o, "quarantine_for", s->health.quarantine_for_ms, NULL);
	dur(o, "rejoin_timeout", s->health.rejoin_timeout_ms, NULL);
	map_end(o);

	map_start(o, "restart", 0);
	num(o, "max", s->restart.max, NULL);
	dur(o, "backoff", s->restart.backoff_ms, NULL);
	word(o, "survivors", spec_survivors_name(s->restart.survivors));
	map_end(o);

	map_start(o, "checkpoint", 0);
	str(o, "dir", s->checkpoint.dir);
	str(o, "latest_file", s->checkpoint.latest_file);
	str(o, "pattern", s->checkpoint.pattern);
	str(o, "complete_marker", s->checkpoint.complete_marker);
	str(o, "resume_args", s->checkpoint.resume_args);
	word(o, "memory", spec_memory_name(s->checkpoint.memory));
	str(o, "memory_dir", s->checkpoint.memory_dir ? s->checkpoint.memory_dir
						       : "/dev/shm");
	num(o, "replicas", s->checkpoint.replicas, NULL);
	if (spec_bytes_format(s->checkpoint.memory_max, bytes, sizeof(bytes)) < 0)
		o->failed = 1;
	else
		word(o, "memory_max", bytes);	/* 0: auto */
	dur(o, "persist_every", s->checkpoint.persist_every_ms, "never");
	word(o, "keep_memory", s->checkpoint.keep_memory ? "true" : "false");
	map_end(o);

	map_start(o, "log", 0);
	str(o, "dir", s->log.dir);
	snprintf(mode, sizeof(mode), "%04o", s->log.mode);
	word(o, "mode", mode);
	map_end(o);

	map_start(o, "metrics", 0);
	str(o, "listen", s->metrics.listen);
	dur(o, "interval", s->metrics.interval_ms, "auto");
	map_start(o, "patterns", s->metrics.n_patterns == 0);
	for (size_t i = 0; i < s->metrics.n_patterns; i++)
		str(o, s->metrics.patterns[i].name,
		    s->metrics.patterns[i].regex);
	map_end(o);
	map_end(o);

	if (!s->slurm.present)
		return;
	map_start(o, "slurm", 0);
	str(o, "partition", s->slurm.partition);
	str(o, "time", s->slurm.time);
	str(o, "account", s->slurm.account);
	str(o, "qos", s->slurm.qos);
	num(o, "nodes", s->slurm.nodes, "auto");
	num(o, "gpus_per_node", s->slurm.gpus_per_node, NULL);
	word(o, "exclusive", s->slurm.exclusive ? "true" : "false");
	word(o, "requeue", s->slurm.requeue ? "true" : "false");
	str(o, "output", s->slurm.output);
	list(o, "extra", &s->slurm.extra);
	map_end(o);
}

int spec_print(const struct spec *spec, FILE *out)
{
	struct out o = {.failed = 0};
	yaml_event_t ev;
	int rc = -1;

	if (!yaml_emitter_initialize(&o.em)) {
		errno = ENOMEM;
		return -1;
	}
	yaml_emitter_set_output_file(&o.em, out);
	yaml_emitter_set_unicode(&o.em, 1);
	/* Never fold long commands: one value, one line. */
	yaml_emitter_set_width(&o.em, -1);
	emit(&o, &ev,
	     yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING));
	emit(&o, &ev,
	     yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1));
	map_start(&o, NULL, 0);
	body(&o, spec);
	map_end(&o);
	emit(&o, &ev, yaml_document_end_event_initialize(&ev, 1));
	emit(&o, &ev, yaml_stream_end_event_initialize(&ev));
	if (!o.failed && yaml_emitter_flush(&o.em) && !ferror(out))
		rc = 0;
	else if (!errno)
		errno = EIO;
	yaml_emitter_delete(&o.em);
	return rc;
}
