/* ctl/launch.c — what the controller sends: the plan of every attempt
 * (ranks on nodes, binding, MASTER_ADDR), each rank's environment, the
 * LAUNCH frames; and what it prints: rank output and the dry run. */
#include <arpa/inet.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "launcher/cli.h"
#include "launcher/ctl/ctl_int.h"
#include "herd/render.h"
#include "herd/topo.h"
#include "launcher/model/plan.h"

extern char **environ;

/* A member node whose agent is up: it takes part in the attempt. */
static bool in_job(const struct node *n)
{
	return n->member && n->state == NODE_UP;
}

static int members_up(const struct ctl *c)
{
	int k = 0;

	for (int i = 0; i < c->n_nodes; i++)
		k += in_job(&c->nodes[i]);
	return k;
}

/* --- output ------------------------------------------------------------ */

/* The terminal missed some rank output: one line on stderr (through its
 * buffer, so that it comes after the rank lines before it). */
static void say_missed(struct ctl *c, uint64_t missed)
{
	char line[256];
	struct iovec iov;

	snprintf(line, sizeof(line),
		 "herd: the terminal missed %" PRIu64
		 " bytes of rank output (%s)\n",
		 missed,
		 c->log_failed_files ? "the rank logs are incomplete too"
				     : "all of it is in the rank logs");
	iov.iov_base = line;
	iov.iov_len = strlen(line);
	if (!c->term[2] || outbuf_put(c->term[2], &iov, 1) != 0)
		c->term_missed += missed; /* said again at the end */
}

static void on_term_drained(struct outbuf *b, uint64_t missed, void *arg)
{
	(void)b;
	say_missed(arg, missed);
}

int ctl_term_open(struct ctl *c)
{
	/* Anything stdio holds goes first: rank output bypasses stdio. */
	fflush(stdout);
	fflush(stderr);
	if (c->opt->detach)
		return 0; /* rank output: rank logs and attach only */
	for (int fd = 1; fd <= 2; fd++) {
		c->term[fd] = outbuf_new(c->loop, fd, CTL_TERM_BUFFER_MAX);
		if (!c->term[fd])
			return -1;
		outbuf_on_drained(c->term[fd], on_term_drained, c);
	}
	return 0;
}

void ctl_term_close(struct ctl *c)
{
	uint64_t missed = c->term_missed;

	ctl_status_close(c); /* the terminal back to plain scrolling */
	if (!c->term[1] && !c->term[2])
		return;
	outbuf_flush(c->term[1]);
	outbuf_flush(c->term[2]);
	missed +=
	    outbuf_take_missed(c->term[1]) + outbuf_take_missed(c->term[2]);
	outbuf_free(c->term[1]);
	outbuf_free(c->term[2]);
	c->term[1] = c->term[2] = NULL;
	c->term_missed = 0;
	if (missed)
		fprintf(stderr,
			"herd: the terminal missed %" PRIu64
			" bytes of rank output (%s)\n",
			missed,
			c->log_failed_files ? "the rank logs are incomplete too"
					    : "all of it is in the rank logs");
}

/* One line (or a cut piece of one) for the terminal: prefix, a, b, then a
 * newline if nl.  A slow reader never blocks herd: the buffer drops what
 * it cannot hold and counts it (the rank log has it all). */
static void put_line(struct ctl *c, int fd, const char *prefix, const char *a,
		     size_t alen, const char *b, size_t blen, bool nl)
{
	struct iovec iov[4];

	iov[0].iov_base = (void *)(uintptr_t)prefix;
	iov[0].iov_len = strlen(prefix);
	iov[1].iov_base = (void *)(uintptr_t)a;
	iov[1].iov_len = alen;
	iov[2].iov_base = (void *)(uintptr_t)b;
	iov[2].iov_len = blen;
	iov[3].iov_base = (void *)(uintptr_t) "\n";
	iov[3].iov_len = nl;
	ctl_sock_output(c, fd, iov, 4); /* attached clients */
	if (c->term[fd])
		outbuf_put(c->term[fd], iov, 4);
}

void ctl_print(struct ctl *c, int rank, int fd, const char *data, size_t len,
	       bool flush)
{
	struct rank_slot *r = &c->ranks[rank];
	char prefix[300];
	size_t start = 0;
	bool cut_nl;

	if (c->opt->untagged)
		prefix[0] = '\0';
	else if (r->spawn)
		ctl_spawn_tag(c, rank, prefix, sizeof(prefix));
	else if (c->opt->verbose)
		snprintf(prefix, sizeof(prefix), "[%s:%d] ",
			 c->nodes[r->node].host, rank);
	else
		snprintf(prefix, sizeof(prefix), "[%d] ", rank);
	/* A line cut at CTL_PARTIAL_MAX ends with a newline so that the next
	 * piece starts with its tag; untagged output stays byte for byte. */
	cut_nl = prefix[0] != '\0';
	for (size_t i = 0; i < len; i++) {
		if (data[i] != '\n')
			continue;
		put_line(c, fd, prefix, r->partial[fd], r->partial_len[fd],
			 data + start, i + 1 - start, false);
		r->partial_len[fd] = 0;
		start = i + 1;
	}
	while (start < len) {
		size_t rest = len - start;
		size_t room = CTL_PARTIAL_MAX - r->partial_len[fd];
		size_t want = r->partial_len[fd] + rest;
		char *p = NULL;

		if (rest >= room) {
			/* The line reached the cap: out it goes, cut. */
			put_line(c, fd, prefix, r->partial[fd],
				 r->partial_len[fd], data + start, room,
				 cut_nl);
			r->partial_len[fd] = 0;
			start += room;
			continue;
		}
		p = realloc(r->partial[fd], want);
		if (!p) {
			/* No memory to hold it: print it now, cut, rather
			 * than lose it. */
			put_line(c, fd, prefix, r->partial[fd],
				 r->partial_len[fd], data + start, rest,
				 cut_nl);
			r->partial_len[fd] = 0;
			break;
		}
		memcpy(p + r->partial_len[fd], data + start, rest);
		r->partial[fd] = p;
		r->partial_len[fd] = want;
		break;
	}
	if (flush && r->partial_len[fd]) {
		put_line(c, fd, prefix, r->partial[fd], r->partial_len[fd], "",
			 0, true);
		r->partial_len[fd] = 0;
	}
}

/* --- plan and launch --------------------------------------------------- */

static bool same_net(const char *a, const char *b, const char *mask)
{
	struct in_addr ia, ib, im;

	if (inet_pton(AF_INET, a, &ia) != 1 ||
	    inet_pton(AF_INET, b, &ib) != 1 ||
	    inet_pton(AF_INET, mask, &im) != 1)
		return false;
	return (ia.s_addr & im.s_addr) == (ib.s_addr & im.s_addr);
}

json_t *ctl_node_addr_on(const struct node *n, const char *addr)
{
	size_t i;
	json_t *a;

	json_array_foreach(n->addrs, i, a)
	{
		const char *ad = json_string_value(json_object_get(a, "addr"));
		const char *mk =
		    json_string_value(json_object_get(a, "netmask"));

		if (ad && mk && same_net(ad, addr, mk))
			return a;
	}
	return NULL;
}

/* The interface of node n whose network holds addr, or NULL. */
static const char *iface_for(struct node *n, const char *addr)
{
	return json_string_value(
	    json_object_get(ctl_node_addr_on(n, addr), "ifname"));
}

/* MASTER_ADDR: node 0's address on a network every node shares — not the
 * address its hostname resolves to (127.0.1.1 on stock Debian). */
static int pick_master(struct ctl *c, struct herd_err *err)
{
	struct node *first = NULL;
	size_t i;
	json_t *a;

	for (int k = 0; k < c->n_nodes; k++) {
		if (in_job(&c->nodes[k])) {
			first = &c->nodes[k];
			break;
		}
	}
	if (!first)
		return herd_errprintf(err, "no node is up");
	free(c->master_addr);
	c->master_addr = NULL;
	if (c->local || members_up(c) == 1) {
		c->master_addr = strdup("127.0.0.1");
		for (int k = 0; k < c->n_nodes; k++)
			c->nodes[k].ifname = "lo";
		return 0;
	}
	json_array_foreach(first->addrs, i, a)
	{
		const char *ad = json_string_value(json_object_get(a, "addr"));
		bool shared = true;

		for (int k = 0; k < c->n_nodes && shared; k++) {
			struct node *n = &c->nodes[k];

			if (in_job(n) && n != first && !iface_for(n, ad))
				shared = false;
		}
		if (ad && shared) {
			c->master_addr = strdup(ad);
			for (int k = 0; k < c->n_nodes; k++)
				if (in_job(&c->nodes[k]))
					c->nodes[k].ifname =
					    iface_for(&c->nodes[k], ad);
			first->ifname =
			    json_string_value(json_object_get(a, "ifname"));
			return 0;
		}
	}
	return herd_errprintf(err,
			      "%s has no address on a network that every "
			      "node shares; ranks could not reach MASTER_ADDR",
			      first->host);
}

static bool env_set_by_user(const struct spec *spec, const char *key)
{
	for (size_t i = 0; i < spec->launch.n_env; i++)
		if (!strcmp(spec->launch.env[i].key, key))
			return true;
	return false;
}

static void set_str(json_t *obj, const char *key, const char *value)
{
	json_object_set_new(obj, key, json_string(value ? value : ""));
}

static void set_int(json_t *obj, const char *key, long value)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%ld", value);
	json_object_set_new(obj, key, json_string(buf));
}

/* Variables every rank of the attempt shares. */
static json_t *job_env(struct ctl *c)
{
	const struct spec *spec = c->spec;
	json_t *env = json_object();

	/* launch.env_pass: variables of herd's own environment, by glob. */
	for (char **e = environ; *e; e++) {
		const char *eq = strchr(*e, '=');
		char key[256];

		if (!eq || (size_t)(eq - *e) >= sizeof(key))
			continue;
		memcpy(key, *e, (size_t)(eq - *e));
		key[eq - *e] = '\0';
		for (size_t g = 0; g < spec->launch.env_pass.n; g++)
			if (!fnmatch(spec->launch.env_pass.v[g], key, 0))
				set_str(env, key, eq + 1);
	}
	set_str(env, "MASTER_ADDR", c->master_addr);
	set_int(env, "MASTER_PORT", spec->launch.master_port);
	set_int(env, "WORLD_SIZE", c->world_size);
	set_int(env, "TORCHELASTIC_RESTART_COUNT", c->attempt - 1);
	set_str(env, "HERD_JOB", spec->name);
	set_int(env, "HERD_ATTEMPT", c->attempt);
	set_int(env, "HERD_GENERATION", ctl_rejoin_generation(c));
	set_str(env, "HERD_RESUME_FROM", c->checkpoint ? c->checkpoint : "");
	/* launch.env always wins over what herd computes. */
	for (size_t i = 0; i < spec->launch.n_env; i++)
		set_str(env, spec->launch.env[i].key,
			spec->launch.env[i].value);
	return env;
}

/* {{checkpoint}} is the checkpoint this attempt resumes from (an empty
 * argument when there is none) and {{resume_args}} is
 * checkpoint.resume_args with it filled in (nothing when there is none).
 * Every value reaches the rank as one literal argument (render_shell):
 * the checkpoint's name is whatever a directory in checkpoint.dir or
 * DeepSpeed's `latest` file says, not shell text. */
char *ctl_render_command(struct ctl *c, struct herd_err *err)
{
	const char *ckpt = c->checkpoint ? c->checkpoint : "";
	char attempt[16];
	struct render_var vars[] = {
	    {"name", c->spec->name},
	    {"checkpoint", ckpt},
	    {"resume_args", ""},
	    {"attempt", attempt},
	};
	struct herd_err e;
	char *resume = NULL, *cmd;

	snprintf(attempt, sizeof(attempt), "%d", c->attempt);
	if (c->checkpoint && c->spec->checkpoint.resume_args) {
		resume = render_shell(c->spec->checkpoint.resume_args, vars, 4,
				      NULL, &e);
		if (!resume) {
			herd_errprintf(err, "checkpoint.resume_args: %s",
				       e.text);
			return NULL;
		}
		vars[2].value = resume;
	}
	cmd = render_shell(c->spec->launch.command, vars, 4, "resume_args", &e);
	if (!cmd)
		herd_errprintf(err, "launch.command: %s", e.text);
	free(resume);
	return cmd;
}

/* What node n's agent needs to be the PMIx server of its ranks: the job's
 * node and process maps in node order (for PMIx_generate_regex/ppn), its
 * own place in them, and its local ranks. */
static json_t *pmix_job(struct ctl *c, struct node *n)
{
	json_t *local = json_array();
	char *nodes = NULL, *ppn = NULL;
	size_t nl = 0, pl = 0;
	FILE *fn = open_memstream(&nodes, &nl), *fp = open_memstream(&ppn, &pl);
	json_t *pj;
	bool first = true;

	for (int i = 0; i < c->n_nodes && fn && fp; i++) {
		struct node *m = &c->nodes[i];

		if (!in_job(m) || m->n_ranks == 0)
			continue;
		fprintf(fn, "%s%s", first ? "" : ",",
			m->hostname ? m->hostname : m->host);
		fputs(first ? "" : ";", fp);
		for (int l = 0; l < m->n_ranks; l++)
			fprintf(fp, "%s%d", l ? "," : "", m->first_rank + l);
		first = false;
	}
	if (fn)
		fclose(fn);
	if (fp)
		fclose(fp);
	for (int l = 0; l < n->n_ranks; l++)
		json_array_append_new(local, json_integer(n->first_rank + l));
	pj = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:s, s:o}", "job",
		       c->spec->name, "nodes", nodes ? nodes : "", "ppn",
		       ppn ? ppn : "", "job_size", c->world_size, "num_nodes",
		       members_up(c), "node_id", n->index, "hostname",
		       n->hostname ? n->hostname : n->host, "local", local);
	free(nodes);
	free(ppn);
	return pj;
}

/* metrics.patterns as LAUNCH carries them; the agent compiles them. */
static json_t *launch_patterns(const struct spec *spec)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < spec->metrics.n_patterns; i++)
		json_array_append_new(
		    arr, json_pack("{s:s, s:s}", "name",
				   spec->metrics.patterns[i].name, "regex",
				   spec->metrics.patterns[i].regex));
	return arr;
}

json_t *ctl_launch_body(struct ctl *c, struct node *n, const char *command)
{
	json_t *ranks = json_array();
	json_t *body;

	for (int l = 0; l < n->n_ranks; l++) {
		json_t *renv = json_object();
		int rank = n->first_rank + l;

		set_int(renv, "RANK", rank);
		set_int(renv, "LOCAL_RANK", l);
		set_int(renv, "LOCAL_WORLD_SIZE", n->n_ranks);
		set_int(renv, "NODE_RANK", n->index);
		set_int(renv, "GROUP_RANK", n->index);
		/* gloo/NCCL would otherwise pick the address the hostname
		 * resolves to (127.0.1.1 on stock Debian). */
		if (n->ifname) {
			if (!env_set_by_user(c->spec, "GLOO_SOCKET_IFNAME"))
				set_str(renv, "GLOO_SOCKET_IFNAME", n->ifname);
			if (!env_set_by_user(c->spec, "NCCL_SOCKET_IFNAME"))
				set_str(renv, "NCCL_SOCKET_IFNAME", n->ifname);
		}
		/* Binding: GPU, NIC, OpenMP threads; launch.env still
		 * wins (below). */
		if (n->bind) {
			struct bind_env_var bv[BIND_ENV_MAX];
			size_t nb = bind_env(&n->bind[l], bv);

			for (size_t k = 0; k < nb; k++)
				set_str(renv, bv[k].key, bv[k].value);
		}
		/* Each rank's own checkpoint when one is chosen in the
		 * memory tiers (ctl/ckpt.c); else the job's. */
		if (ctl_ckpt_rank_path(c, rank))
			set_str(renv, "HERD_RESUME_FROM",
				ctl_ckpt_rank_path(c, rank));
		/* The agent applies these after the job's variables, so
		 * launch.env must win here too (RANK, LOCAL_WORLD_SIZE,
		 * HERD_PROGRESS_FILE...). */
		for (size_t e = 0; e < c->spec->launch.n_env; e++)
			json_object_del(renv, c->spec->launch.env[e].key);
		json_t *jr = json_pack("{s:i, s:o}", "rank", rank, "env", renv);

		if (n->bind && n->bind[l].cpus &&
		    c->spec->bind.cpu != SPEC_BIND_CPU_NONE)
			json_object_set_new(jr, "cpus",
					    json_string(n->bind[l].cpus));
		/* Memory from the NUMA node of those cpus, preferred. */
		if (n->bind && n->bind[l].numa >= 0 &&
		    c->spec->bind.cpu != SPEC_BIND_CPU_NONE)
			json_object_set_new(jr, "mem_node",
					    json_integer(n->bind[l].numa));
		json_array_append_new(ranks, jr);
	}
	body = json_pack("{s:i, s:s, s:I, s:o, s:o}", "attempt", c->attempt,
			 "command", command, "grace_ms",
			 (json_int_t)c->spec->health.grace_ms, "env",
			 job_env(c), "ranks", ranks);
	if (c->spec->launch.workdir)
		json_object_set_new(body, "workdir",
				    json_string(c->spec->launch.workdir));
	if (c->spec->launch.mode == SPEC_MODE_PMIX)
		json_object_set_new(body, "pmix", pmix_job(c, n));
	/* Ranks that speak the elastic protocol survive a failure here
	 * (rejoin.c): their node's warm slots need no refill (warm.c). */
	else if (c->spec->restart.survivors == SPEC_SURVIVORS_KEEP)
		json_object_set_new(body, "survivors", json_true());
	if (c->spec->health.progress_timeout_ms > 0)
		json_object_set_new(
		    body, "progress_timeout_ms",
		    json_integer(c->spec->health.progress_timeout_ms));
	json_object_set_new(
	    body, "metrics_interval_ms",
	    json_integer(spec_metrics_interval_ms(c->spec, c->n_nodes)));
	if (c->spec->metrics.n_patterns > 0)
		json_object_set_new(body, "patterns", launch_patterns(c->spec));
	return body;
}

int ctl_open_rank_logs(struct ctl *c, struct herd_err *err)
{
	char dir[32];

	if (!c->lt)
		return 0; /* herd plan leaves no trace */
	snprintf(dir, sizeof(dir), "attempt-%d", c->attempt);
	if (logtree_mkdir(c->lt, dir, err) < 0)
		return -1;
	for (int r = 0; r < c->world_size; r++) {
		char name[64], *path;
		int fd;

		snprintf(name, sizeof(name), "%s/rank-%d.log", dir, r);
		if ((fd = logtree_create(c->lt, name, err)) < 0)
			return -1;
		if (asprintf(&path, "%s/%s", logtree_run_dir(c->lt), name) <
		    0) {
			close(fd);
			return herd_errprintf(err, "out of memory");
		}
		c->ranks[r].log = logfile_new(fd, path, 0);
		free(path);
		if (!c->ranks[r].log)
			return herd_errprintf(err, "out of memory");
	}
	return 0;
}

void ctl_log_write(struct ctl *c, int rank, const void *data, size_t len)
{
	struct logfile *lf = c->ranks[rank].log;
	int e;

	if (!lf || logfile_write(lf, data, len) != LOGFILE_FIRST_FAILURE)
		return;
	e = logfile_error(lf);
	fprintf(stderr,
		"herd: cannot write %s: %s; rank %d's output still reaches "
		"the terminal and the job goes on\n",
		logfile_path(lf), strerror(e), rank);
	events_emit(c->ev, "log_write_failed",
		    json_pack("{s:s, s:s, s:i, s:i}", "path", logfile_path(lf),
			      "error", strerror(e), "rank", rank, "attempt",
			      c->attempt));
	ctl_check_events(c);
}

void ctl_close_rank_log(struct ctl *c, int rank)
{
	struct logfile *lf = c->ranks ? c->ranks[rank].log : NULL;

	if (!lf)
		return;
	c->log_lost += logfile_lost(lf);
	if (logfile_error(lf))
		c->log_failed_files++;
	logfile_free(lf);
	c->ranks[rank].log = NULL;
}

void ctl_check_events(struct ctl *c)
{
	int e = events_error(c->ev);

	if (!e || c->events_reported)
		return;
	c->events_reported = true;
	fprintf(stderr, "herd: cannot write %s: %s; the job goes on\n",
		events_path(c->ev), strerror(e));
}

/* Binds node n's ranks from the topology its agent reported: slots
 * default to its GPU count (else 1), each rank gets its GPU, nearest NIC
 * and cores (bind.h).  A node that reported no topology runs its ranks
 * unbound, with a warning. */
void ctl_node_unplan(struct node *n)
{
	if (n->bind)
		bind_ranks_release(n->bind, (size_t)n->n_ranks);
	free(n->bind);
	n->bind = NULL;
}

static int plan_node(struct ctl *c, struct node *n, struct herd_err *err)
{
	struct bind_opts opts;
	struct topo *t = NULL;
	struct herd_err e;
	int rc = -1;

	herd_err_clear(&e);
	ctl_node_unplan(n);
	if (n->topo && !(t = topo_from_summary(n->topo, &e)))
		fprintf(stderr, "herd: %s: %s; its ranks run unbound\n",
			n->host, e.text);
	if (!t) {
		n->n_ranks = n->slots > 0 ? n->slots : 1;
		rc = 0;
		goto out;
	}
	bind_opts_from_spec(&opts, c->spec, c->platform);
	if (plan_ranks(t, n->slots, &opts, &n->bind, &n->n_ranks, &e) < 0) {
		herd_errprintf(err, "%s: %s", n->host, e.text);
		goto out;
	}
	rc = 0;
out:
	topo_free(t);
	return rc;
}

int ctl_plan(struct ctl *c, struct herd_err *err)
{
	int rank = 0, index = 0;

	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];

		if (!in_job(n)) {
			ctl_node_unplan(n);
			n->n_ranks = 0;
			n->index = -1;
			continue;
		}
		n->index = index++;
		n->first_rank = rank;
		if (plan_node(c, n, err) < 0)
			return -1;
		rank += n->n_ranks;
	}
	ctl_free_ranks(c);
	c->world_size = rank;
	c->n_slots = rank;
	c->ranks = calloc((size_t)(rank ? rank : 1), sizeof(*c->ranks));
	if (!c->ranks)
		return herd_errprintf(err, "out of memory");
	for (int i = 0; i < c->n_nodes; i++)
		for (int l = 0; l < c->nodes[i].n_ranks; l++)
			c->ranks[c->nodes[i].first_rank + l].node = i;
	return pick_master(c, err);
}

int ctl_plan_replacement(struct ctl *c, struct node *n, int first_rank,
			 int n_ranks, struct herd_err *err)
{
	n->first_rank = first_rank;
	if (plan_node(c, n, err) < 0)
		return -1;
	if (n->n_ranks != n_ranks)
		return herd_errprintf(err,
				      "it has %d slot%s, the failed node had "
				      "%d",
				      n->n_ranks, n->n_ranks == 1 ? "" : "s",
				      n_ranks);
	if (c->local || !c->master_addr ||
	    !strcmp(c->master_addr, "127.0.0.1"))
		n->ifname = "lo";
	else
		n->ifname = iface_for(n, c->master_addr);
	for (int l = 0; l < n_ranks; l++)
		c->ranks[first_rank + l].node = (int)(n - c->nodes);
	return 0;
}

void ctl_free_ranks(struct ctl *c)
{
	for (int r = 0; r < c->n_slots && c->ranks; r++) {
		ctl_close_rank_log(c, r);
		for (int k = 0; k < 3; k++)
			free(c->ranks[r].partial[k]);
	}
	free(c->ranks);
	c->ranks = NULL;
	c->world_size = 0;
	c->n_slots = 0;
	c->ranks_done = 0;
}
/* --- dry run ------------------------------------------------------------ */

static void print_env(const char *indent, json_t *env)
{
	const char *key;
	json_t *val;

	json_object_foreach(env, key, val)
	    printf("%s%s=%s\n", indent, key, json_string_value(val));
}

/* Prints what `herd run` would send every node, touching no node: the
 * address of node 0 comes from name resolution here, interfaces are
 * decided by each agent at launch. */
int ctl_dry_run(struct ctl *c, struct resolved *res)
{
	struct herd_err err;
	char *command = ctl_render_command(c, &err);
	struct addrinfo hints = {.ai_family = AF_INET}, *ai = NULL;
	int status = EXIT_SPEC;

	if (!command) {
		fprintf(stderr, "herd: %s\n", err.text);
		return EXIT_SPEC;
	}
	c->n_nodes = (int)res->nodes->count;
	c->nodes = calloc((size_t)c->n_nodes, sizeof(*c->nodes));
	if (!c->nodes)
		goto out;
	for (int i = 0; i < c->n_nodes; i++) {
		c->nodes[i].host = strdup(res->nodes->entries[i].host);
		c->nodes[i].slots = c->spec->nodes.slots > 0
					? (int)c->spec->nodes.slots
					: res->nodes->entries[i].slots;
		ctl_node_set(c, &c->nodes[i], NODE_UP);
		c->nodes[i].member = true;
		c->nodes[i].ifname = c->local ? "lo" : "(decided at launch)";
	}
	c->attempt = 1;
	if (ctl_plan(c, &err) < 0) {
		/* Without agents no address is known: use the name. */
		if (c->local) {
			fprintf(stderr, "herd: %s\n", err.text);
			goto out;
		}
	}
	for (int i = 0; i < c->n_nodes; i++)
		c->nodes[i].ifname =
		    c->local || c->n_nodes == 1 ? "lo" : "(decided at launch)";
	if (!c->local && c->n_nodes > 1) {
		char addr[INET_ADDRSTRLEN] = "";

		free(c->master_addr);
		if (getaddrinfo(c->nodes[0].host, NULL, &hints, &ai) == 0 && ai)
			inet_ntop(
			    AF_INET,
			    &((struct sockaddr_in *)ai->ai_addr)->sin_addr,
			    addr, sizeof(addr));
		c->master_addr = strdup(addr[0] ? addr : c->nodes[0].host);
	}
	printf("job %s: %d node%s, %d rank%s, transport %s, log %s\n",
	       c->spec->name, c->n_nodes, c->n_nodes == 1 ? "" : "s",
	       c->world_size, c->world_size == 1 ? "" : "s",
	       transport_pick(c->spec, c->local), c->log_dir);
	for (int i = 0; i < c->n_nodes; i++) {
		json_t *body = ctl_launch_body(c, &c->nodes[i], command);
		json_t *ranks = json_object_get(body, "ranks"), *r;
		size_t k;

		printf("\nnode %d: %s (%d rank%s)\n", i, c->nodes[i].host,
		       c->nodes[i].n_ranks,
		       c->nodes[i].n_ranks == 1 ? "" : "s");
		printf("  command: %s\n", command);
		if (c->spec->launch.workdir)
			printf("  workdir: %s\n", c->spec->launch.workdir);
		printf("  environment of every rank:\n");
		print_env("    ", json_object_get(body, "env"));
		json_array_foreach(ranks, k, r)
		{
			printf("  rank %d:\n", (int)json_integer_value(
						   json_object_get(r, "rank")));
			print_env("    ", json_object_get(r, "env"));
		}
		json_decref(body);
	}
	if (res->spares->count) {
		printf("\nspares:");
		for (size_t i = 0; i < res->spares->count; i++)
			printf(" %s", res->spares->entries[i].host);
		printf("\n");
	}
	if (c->spec->nodes.slots <= 0)
		printf("\n(slots not set: each node runs one rank per GPU its "
		       "agent finds, else 1;\n here without agents: the "
		       "hostfile's slots, else 1)\n");
	status = 0;
out:
	if (ai)
		freeaddrinfo(ai);
	free(command);
	return status;
}
