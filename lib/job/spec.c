/* spec.c — job.yaml parsed with libyaml into a validated struct spec.
 *
 * Two passes over the text: the event parser first refuses what the
 * document loader would silently accept (aliases, which also rules out
 * alias bombs, and a second document), then the loaded document is walked
 * with one table of keys per section.  Every error carries the libyaml
 * mark of the node it is about.
 *
 * This file holds the public calls and the defaults; the first pass is
 * spec_yaml.c, the walk spec_walk.c, the key tables spec_keys.c with the
 * setters they share in spec_set.c, and the checks across keys
 * spec_check.c.  Their shared types are spec_int.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "spec_int.h"

/* ---- defaults and the public calls ------------------------------------- */

static int dup_default(char **dst, const char *value)
{
	if (*dst)
		return 0;
	return (*dst = strdup(value)) ? 0 : -1;
}

static char *name_from_path(const char *path)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	n = strlen(base);
	if (n > 5 && !strcmp(base + n - 5, ".yaml"))
		n -= 5;
	else if (n > 4 && !strcmp(base + n - 4, ".yml"))
		n -= 4;
	if (!n)
		return strdup("job");
	return strndup(base, n);
}

struct spec *spec_parse(const char *buf, size_t len, const char *path,
			struct herd_err *err)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	int have_parser = 0, have_doc = 0;
	struct spec *spec = NULL, *ret = NULL;
	struct ctx c = {0};
	yaml_node_t *root;
	yaml_mark_t top = {0, 0, 0};

	c.path = path ? path : "-";
	c.err = err;
	c.doc = &doc;
	if (len > SPEC_FILE_MAX) {
		spec_perr(&c, top,
			  "job file is %zu bytes; at most %d are allowed "
			  "(a job file is a few KiB)",
			  len, SPEC_FILE_MAX);
		goto out;
	}
	if (!(spec = calloc(1, sizeof(*spec))) ||
	    !(spec->path = strdup(c.path))) {
		herd_errprintf(err, "%s: out of memory", c.path);
		goto out;
	}
	spec->nodes.command_timeout_ms = 30 * 1000;
	spec->nodes.readmit_after_ms = -1;
	spec->ssh.port = 22;
	spec->ssh.fanout = 64;
	spec->ssh.connect_timeout_ms = 10 * 1000;
	spec->launch.master_port = 29500;
	spec->health.heartbeat_ms = 500;
	spec->health.timeout_ms = 3000;
	spec->health.grace_ms = 10 * 1000;
	spec->health.progress_timeout_ms = -1;
	spec->health.fence_timeout_ms = 5 * 60 * 1000;
	spec->health.notify_grace_ms = 1000;
	spec->health.min_free = 1LL << 30;
	spec->health.straggler = SPEC_STRAGGLER_WARN;
	spec->health.straggler_ratio = 1.3;
	spec->health.straggler_window_ms = 2 * 60 * 1000;
	spec->health.quarantine_after = 3;
	spec->health.quarantine_for_ms = 24L * 3600 * 1000;
	spec->restart.max = 3;
	spec->restart.backoff_ms = 2000;
	spec->restart.survivors = SPEC_SURVIVORS_KEEP;
	spec->health.rejoin_timeout_ms = 30 * 1000;
	spec->checkpoint.replicas = 1;
	spec->checkpoint.persist_every_ms = 10 * 60 * 1000;
	spec->log.mode = SPEC_LOG_MODE_DEFAULT;
	spec->metrics.interval_ms = -1; /* auto */
	c.spec = spec;

	/* A UTF-8 byte order mark (some editors write one) is not YAML
	 * text: skipped, so positions count from what the editor shows.
	 * One of UTF-16 or UTF-32 is named. */
	if (len >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3)) {
		buf += 3;
		len -= 3;
	} else if (len >= 2 && (!memcmp(buf, "\xff\xfe", 2) ||
				!memcmp(buf, "\xfe\xff", 2))) {
		spec_perr(
		    &c, top,
		    "starts with a UTF-16 or UTF-32 byte order mark; a job "
		    "file must be UTF-8 (iconv -f UTF-16 -t UTF-8)");
		goto out;
	}
	if (spec_prescan(&c, buf, len) < 0)
		goto out;
	if (!yaml_parser_initialize(&parser)) {
		herd_errprintf(err, "%s: out of memory", c.path);
		goto out;
	}
	have_parser = 1;
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);
	if (!yaml_parser_load(&parser, &doc)) {
		spec_yaml_fail(&c, &parser, buf, len);
		goto out;
	}
	have_doc = 1;
	if (!(root = yaml_document_get_root_node(&doc))) {
		spec_perr(&c, top,
			  "empty job file: expected a mapping of job keys");
		goto out;
	}
	if (root->type != YAML_MAPPING_NODE) {
		spec_perr(&c, root->start_mark,
			  "expected a mapping of job keys "
			  "(name, nodes, launch, ...) at the top, got %s",
			  spec_kind_name(root));
		goto out;
	}
	if (spec_walk(&c, root, spec_top_keys, NULL) < 0 ||
	    spec_check_across(&c, root) < 0)
		goto out;
	if ((!spec->name && !(spec->name = name_from_path(c.path))) ||
	    dup_default(&spec->ssh.known_hosts, "~/.ssh/known_hosts") < 0 ||
	    dup_default(&spec->ssh.agent_dir, "~/.cache/herd") < 0 ||
	    dup_default(&spec->log.dir, "runs/{{name}}") < 0) {
		herd_errprintf(err, "%s: out of memory", c.path);
		goto out;
	}
	ret = spec;
	spec = NULL;
out:
	if (have_doc)
		yaml_document_delete(&doc);
	if (have_parser)
		yaml_parser_delete(&parser);
	spec_free(spec);
	return ret;
}

struct spec *spec_load(const char *path, struct herd_err *err)
{
	struct spec *spec = NULL;
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int fd = -1;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		herd_errprintf(err, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		herd_errprintf(err, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		herd_errprintf(err, "%s: is a directory, expected a job file",
			       path);
		goto out;
	}
	if (S_ISREG(st.st_mode) && st.st_size > SPEC_FILE_MAX) {
		herd_errprintf(err,
			       "%s:1:1: job file is %lld bytes; at most %d "
			       "are allowed (a job file is a few KiB)",
			       path, (long long)st.st_size, SPEC_FILE_MAX);
		goto out;
	}
	/* One byte more than allowed tells an oversized pipe apart. */
	if (!(buf = malloc(SPEC_FILE_MAX + 1))) {
		herd_errprintf(err, "%s: out of memory", path);
		goto out;
	}
	while (len < SPEC_FILE_MAX + 1) {
		ssize_t n = read(fd, buf + len, SPEC_FILE_MAX + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			herd_errprintf(err, "%s: %s", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > SPEC_FILE_MAX) {
		herd_errprintf(err,
			       "%s:1:1: job file is larger than %d bytes "
			       "(a job file is a few KiB)",
			       path, SPEC_FILE_MAX);
		goto out;
	}
	spec = spec_parse(buf, len, path, err);
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return spec;
}

static void strv_free(struct spec_strv *v)
{
	for (size_t i = 0; i < v->n; i++)
		free(v->v[i]);
	free(v->v);
}

void spec_free(struct spec *spec)
{
	int saved = errno;

	if (!spec)
		return;
	free(spec->path);
	free(spec->name);
	free(spec->nodes.hosts);
	free(spec->nodes.hostfile);
	free(spec->nodes.command);
	free(spec->nodes.inventory.url);
	free(spec->nodes.inventory.token_env);
	free(spec->nodes.inventory.filter);
	free(spec->nodes.spares);
	free(spec->ssh.user);
	free(spec->ssh.identity);
	free(spec->ssh.known_hosts);
	free(spec->ssh.agent_dir);
	free(spec->launch.command);
	free(spec->launch.workdir);
	free(spec->health.check_command);
	for (size_t i = 0; i < spec->launch.n_env; i++) {
		free(spec->launch.env[i].key);
		free(spec->launch.env[i].value);
	}
	free(spec->launch.env);
	strv_free(&spec->launch.env_pass);
	strv_free(&spec->bind.nic_list);
	free(spec->bind.topology_file);
	free(spec->checkpoint.dir);
	free(spec->checkpoint.latest_file);
	free(spec->checkpoint.pattern);
	free(spec->checkpoint.complete_marker);
	free(spec->checkpoint.resume_args);
	free(spec->checkpoint.memory_dir);
	strv_free(&spec->launch.preload);
	free(spec->log.dir);
	free(spec->metrics.listen);
	for (size_t i = 0; i < spec->metrics.n_patterns; i++) {
		free(spec->metrics.patterns[i].name);
		free(spec->metrics.patterns[i].regex);
	}
	free(spec->metrics.patterns);
	free(spec->slurm.partition);
	free(spec->slurm.time);
	free(spec->slurm.account);
	free(spec->slurm.qos);
	free(spec->slurm.output);
	strv_free(&spec->slurm.extra);
	free(spec);
	errno = saved;
}
