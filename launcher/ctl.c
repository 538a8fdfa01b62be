/* ctl.c — the job controller (DESIGN.md steps 3-8).
 *
 * One loop, one table of states.  Every node is a conn (conn.h) whose
 * frames arrive here no matter which transport started its agent.  The
 * controller owns the plan (which rank runs where, with which
 * environment), prints rank output, writes the event log and decides the
 * exit status.
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netdb.h>

#include "cli.h"
#include "ctl.h"
#include "herd/bind.h"
#include "herd/conn.h"
#include "herd/events.h"
#include "herd/loop.h"
#include "herd/render.h"
#include "herd/topo.h"
#include "herd/version.h"
#include "resolve.h"
#include "transport.h"

extern char **environ;

/* The job's lifecycle (STYLE.md rule 10). */
enum ctl_state {
	CTL_CONNECT,	/* agents starting, HELLOs arriving */
	CTL_RUN,	/* ranks launched and running */
	CTL_STOPPING,	/* ranks being stopped, agents told to exit */
	CTL_END,	/* every agent gone; exit status known */
};

static const struct {
	enum ctl_state from;
	enum ctl_state to;
} ctl_transitions[] = {
	{CTL_CONNECT, CTL_RUN},	     /* every node up (or nodes.min met) */
	{CTL_CONNECT, CTL_STOPPING}, /* too few nodes, or Ctrl-C */
	{CTL_RUN, CTL_STOPPING},     /* all ranks done, a failure, Ctrl-C */
	{CTL_STOPPING, CTL_END},     /* every agent gone, or grace over */
};

static const char *const ctl_state_names[] = {"connect", "run", "stopping",
					      "end"};

enum node_state { NODE_CONNECTING, NODE_UP, NODE_FAILED, NODE_GONE };

struct node {
	char *host;
	int index;
	struct conn *conn;
	enum node_state state;
	char *hostname;		/* from HELLO */
	json_t *addrs;		/* from HELLO: [{ifname, addr, netmask}] */
	int slots;		/* spec or hostfile; 0: from the topology */
	int first_rank;
	int n_ranks;
	const char *ifname;	/* carries MASTER_ADDR's network */
	json_t *topo;		/* from HELLO: topo_summary(), or NULL */
	struct bind_rank *bind;	/* n_ranks entries once planned */
};

struct rank_slot {
	int node;
	bool done;
	FILE *log;
	/* A partial line waiting for its end (prefixing needs lines). */
	char *partial[3];
	size_t partial_len[3];
};

struct ctl {
	struct spec *spec;
	const struct ctl_options *opt;
	struct loop *loop;
	struct transport *transport;
	struct events *ev;
	struct node *nodes;
	int n_nodes;
	int n_up, n_failed, n_closed;
	enum ctl_state state;
	int attempt;
	int world_size;
	struct rank_slot *ranks;
	int ranks_done;
	int status;		/* the job's exit status so far */
	bool failed;		/* the first failure was recorded */
	char *log_dir;
	char *master_addr;
	bool local;
	bool tty;
	int interrupts;
	long stop_timer;
	int sigpipe[2];
	struct bind_platform *platform;	/* bind.topology_file, or NULL */
};

static int sig_write_fd = -1;

static void on_signal(int sig)
{
	unsigned char b = (unsigned char)sig;
	int saved = errno;
	ssize_t n = write(sig_write_fd, &b, 1);

	(void)n;
	errno = saved;
}

static void ctl_set_state(struct ctl *c, enum ctl_state to)
{
	for (size_t i = 0;
	     i < sizeof(ctl_transitions) / sizeof(ctl_transitions[0]); i++) {
		if (ctl_transitions[i].from == c->state &&
		    ctl_transitions[i].to == to) {
			c->state = to;
			if (to == CTL_END)
				loop_stop(c->loop);
			return;
		}
	}
	/* Not a transition of the table: a bug, kept visible. */
	fprintf(stderr, "herd: internal: no transition %s -> %s\n",
		ctl_state_names[c->state], ctl_state_names[to]);
}

static void progress(struct ctl *c, bool final)
{
	if (!c->tty)
		return;
	fprintf(stderr, "\rherd: %d/%d nodes up%s", c->n_up, c->n_nodes,
		c->n_failed ? "" : "");
	if (c->n_failed)
		fprintf(stderr, ", %d failed", c->n_failed);
	fputs(final ? "\n" : "   ", stderr);
}

/* Records the first failure: it decides the exit status. */
static void record_failure(struct ctl *c, int status)
{
	if (c->failed)
		return;
	c->failed = true;
	c->status = status;
}

static void on_stop_timeout(struct loop *loop, void *arg)
{
	struct ctl *c = arg;

	(void)loop;
	c->stop_timer = 0;
	if (c->state != CTL_STOPPING)
		return;
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];

		if (n->state == NODE_UP || n->state == NODE_CONNECTING)
			fprintf(stderr,
				"herd: %s: agent did not confirm that its "
				"ranks stopped; hanging up\n",
				n->host);
	}
	ctl_set_state(c, CTL_END);
}

static void maybe_end(struct ctl *c)
{
	if (c->state == CTL_STOPPING && c->n_closed == c->n_nodes)
		ctl_set_state(c, CTL_END);
}

/* Tells every agent to stop its ranks (sig, SIGKILL after grace) and
 * exit. */
static void stop_all_with(struct ctl *c, long grace_ms, int sig)
{
	if (c->state == CTL_CONNECT || c->state == CTL_RUN)
		ctl_set_state(c, CTL_STOPPING);
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];
		json_t *body;

		if (!n->conn || conn_is_dead(n->conn))
			continue;
		body = json_pack("{s:I, s:b, s:i}", "grace_ms",
				 (json_int_t)grace_ms, "exit", 1, "signal", sig);
		conn_send(n->conn, PROTO_STOP, body, NULL, 0, NULL);
		json_decref(body);
	}
	if (c->stop_timer)
		loop_timer_del(c->loop, c->stop_timer);
	c->stop_timer =
		loop_timer_add(c->loop, grace_ms + 5000, on_stop_timeout, c);
	maybe_end(c);
}

static void stop_all(struct ctl *c, long grace_ms)
{
	stop_all_with(c, grace_ms, SIGTERM);
}

/* --- output ------------------------------------------------------------ */

static void print_lines(struct ctl *c, int rank, int fd, const char *data,
			size_t len, bool flush)
{
	struct rank_slot *r = &c->ranks[rank];
	FILE *out = fd == 2 ? stderr : stdout;
	char prefix[300];
	size_t start = 0;

	if (c->opt->verbose)
		snprintf(prefix, sizeof(prefix), "[%s:%d] ",
			 c->nodes[r->node].host, rank);
	else
		snprintf(prefix, sizeof(prefix), "[%d] ", rank);
	for (size_t i = 0; i < len; i++) {
		if (data[i] != '\n')
			continue;
		fputs(prefix, out);
		if (r->partial_len[fd]) {
			fwrite(r->partial[fd], 1, r->partial_len[fd], out);
			r->partial_len[fd] = 0;
		}
		fwrite(data + start, 1, i + 1 - start, out);
		start = i + 1;
	}
	if (start < len) {
		size_t rest = len - start;
		char *p = realloc(r->partial[fd], r->partial_len[fd] + rest);

		if (p) {
			memcpy(p + r->partial_len[fd], data + start, rest);
			r->partial[fd] = p;
			r->partial_len[fd] += rest;
		}
	}
	if (flush && r->partial_len[fd]) {
		fputs(prefix, out);
		fwrite(r->partial[fd], 1, r->partial_len[fd], out);
		fputc('\n', out);
		r->partial_len[fd] = 0;
	}
	fflush(out);
}

/* --- plan and launch --------------------------------------------------- */

static bool same_net(const char *a, const char *b, const char *mask)
{
	struct in_addr ia, ib, im;

	if (inet_pton(AF_INET, a, &ia) != 1 || inet_pton(AF_INET, b, &ib) != 1 ||
	    inet_pton(AF_INET, mask, &im) != 1)
		return false;
	return (ia.s_addr & im.s_addr) == (ib.s_addr & im.s_addr);
}

/* The interface of node n whose network holds addr, or NULL. */
static const char *iface_for(struct node *n, const char *addr)
{
	size_t i;
	json_t *a;

	json_array_foreach(n->addrs, i, a)
	{
		const char *ad = json_string_value(json_object_get(a, "addr"));
		const char *mk = json_string_value(json_object_get(a, "netmask"));

		if (ad && mk && same_net(ad, addr, mk))
			return json_string_value(json_object_get(a, "ifname"));
	}
	return NULL;
}

/* MASTER_ADDR: node 0's address on a network every node shares — not the
 * address its hostname resolves to (127.0.1.1 on stock Debian). */
static int pick_master(struct ctl *c, struct herd_err *err)
{
	struct node *first = NULL;
	size_t i;
	json_t *a;

	for (int k = 0; k < c->n_nodes; k++) {
		if (c->nodes[k].state == NODE_UP) {
			first = &c->nodes[k];
			break;
		}
	}
	if (!first)
		return herd_errprintf(err, "no node is up");
	if (c->local || c->n_up == 1) {
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

			if (n->state == NODE_UP && n != first &&
			    !iface_for(n, ad))
				shared = false;
		}
		if (ad && shared) {
			c->master_addr = strdup(ad);
			for (int k = 0; k < c->n_nodes; k++)
				if (c->nodes[k].state == NODE_UP)
					c->nodes[k].ifname =
						iface_for(&c->nodes[k], ad);
			first->ifname = json_string_value(
				json_object_get(a, "ifname"));
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
	set_str(env, "HERD_RESUME_FROM", "");
	/* launch.env always wins over what herd computes. */
	for (size_t i = 0; i < spec->launch.n_env; i++)
		set_str(env, spec->launch.env[i].key, spec->launch.env[i].value);
	return env;
}

static char *render_command(struct ctl *c, struct herd_err *err)
{
	const struct render_var vars[] = {
		{"name", c->spec->name},
		{"checkpoint", ""},
		{"resume_args", ""},
		{"attempt", NULL},
	};

	return render_text(c->spec->launch.command, vars,
			   sizeof(vars) / sizeof(vars[0]) - 1, 0, err);
}

static json_t *launch_body(struct ctl *c, struct node *n, const char *command)
{
	json_t *ranks = json_array();
	json_t *body;

	for (int l = 0; l < n->n_ranks; l++) {
		json_t *renv = json_object();
		int rank = n->first_rank + l;
		char progress[4096];

		set_int(renv, "RANK", rank);
		set_int(renv, "LOCAL_RANK", l);
		set_int(renv, "LOCAL_WORLD_SIZE", n->n_ranks);
		set_int(renv, "NODE_RANK", n->index);
		set_int(renv, "GROUP_RANK", n->index);
		snprintf(progress, sizeof(progress),
			 "%s/attempt-%d/rank-%d.progress", c->log_dir,
			 c->attempt, rank);
		set_str(renv, "HERD_PROGRESS_FILE", progress);
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
		json_array_append_new(ranks, jr);
	}
	body = json_pack("{s:i, s:s, s:I, s:o, s:o}", "attempt", c->attempt,
			 "command", command, "grace_ms",
			 (json_int_t)c->spec->health.grace_ms, "env", job_env(c),
			 "ranks", ranks);
	if (c->spec->launch.workdir)
		json_object_set_new(body, "workdir",
				    json_string(c->spec->launch.workdir));
	return body;
}

static int open_rank_logs(struct ctl *c, struct herd_err *err)
{
	char dir[4096];

	snprintf(dir, sizeof(dir), "%s/attempt-%d", c->log_dir, c->attempt);
	if (events_mkdirs(dir, 0755) < 0)
		return herd_errprintf(err, "cannot create %s: %s", dir,
				      strerror(errno));
	for (int r = 0; r < c->world_size; r++) {
		char path[4200];

		snprintf(path, sizeof(path), "%s/rank-%d.log", dir, r);
		c->ranks[r].log = fopen(path, "w");
		if (!c->ranks[r].log)
			return herd_errprintf(err, "cannot create %s: %s", path,
					      strerror(errno));
	}
	return 0;
}

/* Binds node n's ranks from the topology its agent reported: slots
 * default to its GPU count (else 1), each rank gets its GPU, nearest NIC
 * and cores (bind.h).  A node that reported no topology runs its ranks
 * unbound, with a warning. */
static int plan_node(struct ctl *c, struct node *n, struct herd_err *err)
{
	struct bind_opts opts;
	struct topo *t = NULL;
	struct herd_err e;
	int rc = -1;

	herd_err_clear(&e);
	bind_ranks_release(n->bind, n->bind ? (size_t)n->n_ranks : 0);
	free(n->bind);
	n->bind = NULL;
	if (n->topo && !(t = topo_from_summary(n->topo, &e)))
		fprintf(stderr, "herd: %s: %s; its ranks run unbound\n",
			n->host, e.text);
	n->n_ranks = n->slots > 0 ? n->slots : t ? bind_default_slots(t) : 1;
	if (!t) {
		rc = 0;
		goto out;
	}
	n->bind = calloc((size_t)n->n_ranks, sizeof(*n->bind));
	if (!n->bind) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	bind_opts_from_spec(&opts, c->spec, c->platform);
	if (bind_plan(t, n->n_ranks, &opts, n->bind, &e) < 0) {
		free(n->bind);
		n->bind = NULL;
		herd_errprintf(err, "%s: %s", n->host, e.text);
		goto out;
	}
	rc = 0;
out:
	topo_free(t);
	return rc;
}

static int plan(struct ctl *c, struct herd_err *err)
{
	int rank = 0, index = 0;

	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];

		if (n->state != NODE_UP)
			continue;
		n->index = index++;
		n->first_rank = rank;
		if (plan_node(c, n, err) < 0)
			return -1;
		rank += n->n_ranks;
	}
	c->world_size = rank;
	c->ranks = calloc((size_t)rank, sizeof(*c->ranks));
	if (!c->ranks)
		return herd_errprintf(err, "out of memory");
	for (int i = 0; i < c->n_nodes; i++)
		for (int l = 0; l < c->nodes[i].n_ranks; l++)
			c->ranks[c->nodes[i].first_rank + l].node = i;
	return pick_master(c, err);
}

static void launch(struct ctl *c)
{
	struct herd_err err;
	char *command = NULL;

	c->attempt = 1;
	if (plan(c, &err) < 0 || open_rank_logs(c, &err) < 0 ||
	    !(command = render_command(c, &err))) {
		fprintf(stderr, "herd: %s\n", err.text);
		record_failure(c, 1);
		stop_all(c, 0);
		return;
	}
	ctl_set_state(c, CTL_RUN);
	events_emit(c->ev, "attempt_start",
		    json_pack("{s:i, s:i, s:i, s:s}", "attempt", c->attempt,
			      "nodes", c->n_up, "world_size", c->world_size,
			      "master_addr", c->master_addr));
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];
		json_t *body;

		if (n->state != NODE_UP)
			continue;
		body = launch_body(c, n, command);
		conn_send(n->conn, PROTO_LAUNCH, body, NULL, 0, NULL);
		json_decref(body);
		for (int l = 0; l < n->n_ranks; l++)
			events_emit(c->ev, "rank_start",
				    json_pack("{s:i, s:i, s:s, s:i, s:i}",
					      "attempt", c->attempt, "rank",
					      n->first_rank + l, "host",
					      n->host, "local_rank", l,
					      "node_rank", n->index));
	}
	free(command);
}

/* --- frames from agents ------------------------------------------------ */

static void node_failed(struct ctl *c, struct node *n, const char *reason)
{
	if (n->state == NODE_FAILED || n->state == NODE_GONE)
		return;
	bool was_up = n->state == NODE_UP;

	n->state = NODE_FAILED;
	c->n_failed++;
	if (was_up)
		c->n_up--;
	events_emit(c->ev, "node_failed",
		    json_pack("{s:s, s:s, s:i}", "host", n->host, "reason",
			      reason, "attempt", c->attempt));
	if (c->state == CTL_CONNECT) {
		if (c->tty)
			fputc('\n', stderr);
		fprintf(stderr, "herd: %s\n", reason);
		progress(c, false);
	} else if (c->state == CTL_RUN) {
		fprintf(stderr, "herd: node %s failed: %s\n", n->host, reason);
		record_failure(c, 1);
		stop_all(c, c->spec->health.grace_ms);
	}
}

static void check_all_connected(struct ctl *c)
{
	int need;

	if (c->state != CTL_CONNECT || c->n_up + c->n_failed < c->n_nodes)
		return;
	progress(c, true);
	need = c->spec->nodes.min > 0 ? (int)c->spec->nodes.min : c->n_nodes;
	if (c->n_up < need) {
		fprintf(stderr,
			"herd: %d of %d nodes are up; the job needs %d%s\n",
			c->n_up, c->n_nodes, need,
			c->spec->nodes.min > 0 ? " (nodes.min)"
					       : " (set nodes.min to start "
						 "with fewer)");
		record_failure(c, 1);
		stop_all(c, 0);
		return;
	}
	launch(c);
}

static void on_hello(struct ctl *c, struct node *n, json_t *body)
{
	const char *version = json_string_value(json_object_get(body, "version"));
	const char *hostname =
		json_string_value(json_object_get(body, "hostname"));

	if (!version || strcmp(version, HERD_VERSION)) {
		char why[256];

		snprintf(why, sizeof(why),
			 "%s: herd-agent version %s does not match herd %s",
			 n->host, version ? version : "?", HERD_VERSION);
		node_failed(c, n, why);
		return;
	}
	free(n->hostname);
	n->hostname = strdup(hostname ? hostname : n->host);
	json_decref(n->addrs);
	n->addrs = json_incref(json_object_get(body, "addrs"));
	if (!json_is_array(n->addrs)) {
		json_decref(n->addrs);
		n->addrs = json_array();
	}
	json_decref(n->topo);
	n->topo = json_incref(json_object_get(body, "topo"));
	if (!n->topo) {
		const char *why = json_string_value(
			json_object_get(body, "topo_error"));

		fprintf(stderr, "herd: %s: no topology (%s); its ranks run "
				"unbound\n",
			n->host, why ? why : "not reported");
	}
	n->state = NODE_UP;
	c->n_up++;
	events_emit(c->ev, "node_up",
		    json_pack("{s:s, s:s}", "host", n->host, "hostname",
			      n->hostname));
	progress(c, false);
	check_all_connected(c);
}

static void on_rank_exit(struct ctl *c, struct node *n, json_t *body)
{
	int rank = (int)json_integer_value(json_object_get(body, "rank"));
	json_t *code = json_object_get(body, "code");
	json_t *sig = json_object_get(body, "signal");
	int status;
	struct rank_slot *r;

	if (rank < 0 || rank >= c->world_size || c->ranks[rank].node != n->index)
		return;
	r = &c->ranks[rank];
	if (r->done)
		return;
	r->done = true;
	c->ranks_done++;
	print_lines(c, rank, 1, "", 0, true);
	print_lines(c, rank, 2, "", 0, true);
	if (r->log) {
		fclose(r->log);
		r->log = NULL;
	}
	status = json_is_integer(sig) ? 128 + (int)json_integer_value(sig)
				       : (int)json_integer_value(code);
	events_emit(c->ev, "rank_exit",
		    json_pack("{s:i, s:i, s:s, s:i, s:o, s:o}", "attempt",
			      c->attempt, "rank", rank, "host", n->host,
			      "status", status, "code", json_incref(code),
			      "signal", json_incref(sig)));
	if (status != 0 && c->state == CTL_RUN) {
		if (json_is_integer(sig))
			fprintf(stderr,
				"herd: rank %d on %s was killed by signal %d "
				"(%s); stopping the job\n",
				rank, n->host, (int)json_integer_value(sig),
				strsignal((int)json_integer_value(sig)));
		else
			fprintf(stderr,
				"herd: rank %d on %s exited with status %d; "
				"stopping the job\n",
				rank, n->host, status);
		record_failure(c, status);
		stop_all(c, c->spec->health.grace_ms);
		return;
	}
	if (c->ranks_done == c->world_size && c->state == CTL_RUN)
		stop_all(c, c->spec->health.grace_ms);
}

static struct node *node_of(struct ctl *c, struct conn *conn)
{
	for (int i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].conn == conn)
			return &c->nodes[i];
	return NULL;
}

static void on_frame(struct conn *conn, struct proto_frame *f, void *arg)
{
	struct ctl *c = arg;
	struct node *n = node_of(c, conn);

	if (!n)
		goto out;
	switch (f->type) {
	case PROTO_HELLO:
		if (n->state == NODE_CONNECTING)
			on_hello(c, n, f->body);
		break;
	case PROTO_OUTPUT: {
		int rank = (int)json_integer_value(json_object_get(f->body, "rank"));
		int fd = (int)json_integer_value(json_object_get(f->body, "fd"));

		if (rank < 0 || rank >= c->world_size || (fd != 1 && fd != 2))
			break;
		if (c->ranks[rank].log)
			fwrite(f->data, 1, f->data_len, c->ranks[rank].log);
		print_lines(c, rank, fd, (const char *)f->data, f->data_len,
			    false);
		break;
	}
	case PROTO_EXIT:
		on_rank_exit(c, n, f->body);
		break;
	case PROTO_ERROR: {
		const char *msg =
			json_string_value(json_object_get(f->body, "message"));

		node_failed(c, n, msg ? msg : "agent reported an error");
		break;
	}
	case PROTO_STOPPED:
	case PROTO_HEARTBEAT:
		break;
	default:
		break;
	}
out:
	proto_frame_free(f);
}

static void on_close(struct conn *conn, const char *reason, int clean,
		     void *arg)
{
	struct ctl *c = arg;
	struct node *n = node_of(c, conn);
	char why[512];

	if (!n)
		return;
	c->n_closed++;
	if (c->state == CTL_STOPPING) {
		if (n->state == NODE_UP) {
			n->state = NODE_GONE;
			c->n_up--;
		}
		maybe_end(c);
		return;
	}
	snprintf(why, sizeof(why), "%s: connection to the agent lost (%s)",
		 n->host, clean ? "it exited" : reason);
	node_failed(c, n, why);
	check_all_connected(c);
	maybe_end(c);
}

/* --- signals ------------------------------------------------------------ */

static void on_sigpipe(struct loop *loop, int fd, short revents, void *arg)
{
	struct ctl *c = arg;
	unsigned char b[64];
	ssize_t n;

	(void)loop;
	(void)revents;
	while ((n = read(fd, b, sizeof(b))) > 0) {
		for (ssize_t i = 0; i < n; i++) {
			int sig = b[i];

			if (sig == SIGCHLD) {
				while (waitpid(-1, NULL, WNOHANG) > 0)
					;
				continue;
			}
			c->interrupts++;
			record_failure(c, 128 + sig);
			if (c->interrupts == 1 && c->state == CTL_RUN) {
				fprintf(stderr,
					"\nherd: %s: stopping all ranks "
					"(again to kill them at once)\n",
					strsignal(sig));
				/* The ranks get the signal itself (SIGINT
				 * for Ctrl-C), then SIGKILL after grace. */
				stop_all_with(c, c->spec->health.grace_ms,
					      sig);
			} else {
				fprintf(stderr, "\nherd: killing all ranks\n");
				stop_all(c, 0);
			}
		}
	}
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
static int dry_run(struct ctl *c, struct resolved *res)
{
	struct herd_err err;
	char *command = render_command(c, &err);
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
		c->nodes[i].state = NODE_UP;
		c->nodes[i].ifname = c->local ? "lo" : "(decided at launch)";
	}
	c->n_up = c->n_nodes;
	c->attempt = 1;
	if (plan(c, &err) < 0) {
		/* Without agents no address is known: use the name. */
		if (c->local) {
			fprintf(stderr, "herd: %s\n", err.text);
			goto out;
		}
	}
	for (int i = 0; i < c->n_nodes; i++)
		c->nodes[i].ifname = c->local || c->n_nodes == 1
					     ? "lo"
					     : "(decided at launch)";
	if (!c->local && c->n_nodes > 1) {
		char addr[INET_ADDRSTRLEN] = "";

		free(c->master_addr);
		if (getaddrinfo(c->nodes[0].host, NULL, &hints, &ai) == 0 && ai)
			inet_ntop(AF_INET,
				  &((struct sockaddr_in *)ai->ai_addr)->sin_addr,
				  addr, sizeof(addr));
		c->master_addr = strdup(addr[0] ? addr : c->nodes[0].host);
	}
	printf("job %s: %d node%s, %d rank%s, transport %s, log %s\n",
	       c->spec->name, c->n_nodes, c->n_nodes == 1 ? "" : "s",
	       c->world_size, c->world_size == 1 ? "" : "s",
	       c->local ? "local" : "ssh", c->log_dir);
	for (int i = 0; i < c->n_nodes; i++) {
		json_t *body = launch_body(c, &c->nodes[i], command);
		json_t *ranks = json_object_get(body, "ranks"), *r;
		size_t k;

		printf("\nnode %d: %s (%d rank%s)\n", i, c->nodes[i].host,
		       c->nodes[i].n_ranks, c->nodes[i].n_ranks == 1 ? "" : "s");
		printf("  command: %s\n", command);
		if (c->spec->launch.workdir)
			printf("  workdir: %s\n", c->spec->launch.workdir);
		printf("  environment of every rank:\n");
		print_env("    ", json_object_get(body, "env"));
		json_array_foreach(ranks, k, r)
		{
			printf("  rank %d:\n",
			       (int)json_integer_value(json_object_get(r, "rank")));
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
		printf("\n(slots not set: 1 rank per node unless the hostfile "
		       "says; GPU counts are used once binding lands)\n");
	status = 0;
out:
	if (ai)
		freeaddrinfo(ai);
	free(command);
	return status;
}

/* --- setup and teardown ------------------------------------------------- */

/* log.dir with {{name}} filled in, made absolute: ranks on other nodes
 * see the same path on a shared filesystem, whatever their workdir. */
static char *render_log_dir(const struct spec *spec, struct herd_err *err)
{
	const struct render_var vars[] = {{"name", spec->name}};
	char *dir = render_text(spec->log.dir, vars, 1, 0, err);
	char cwd[4096], *abs;

	if (!dir || dir[0] == '/')
		return dir;
	if (!getcwd(cwd, sizeof(cwd)) || asprintf(&abs, "%s/%s", cwd, dir) < 0) {
		herd_errprintf(err, "cannot make %s absolute", dir);
		free(dir);
		return NULL;
	}
	free(dir);
	return abs;
}

static void ctl_cleanup(struct ctl *c)
{
	for (int i = 0; i < c->n_nodes; i++) {
		conn_free(c->nodes[i].conn);
		free(c->nodes[i].host);
		free(c->nodes[i].hostname);
		json_decref(c->nodes[i].addrs);
		json_decref(c->nodes[i].topo);
		if (c->nodes[i].bind)
			bind_ranks_release(c->nodes[i].bind,
					   (size_t)c->nodes[i].n_ranks);
		free(c->nodes[i].bind);
	}
	free(c->nodes);
	bind_platform_free(c->platform);
	for (int r = 0; r < c->world_size && c->ranks; r++) {
		if (c->ranks[r].log)
			fclose(c->ranks[r].log);
		for (int k = 0; k < 3; k++)
			free(c->ranks[r].partial[k]);
	}
	free(c->ranks);
	transport_free(c->transport);
	events_close(c->ev);
	free(c->log_dir);
	free(c->master_addr);
	if (c->loop)
		loop_free(c->loop);
	if (c->sigpipe[0] >= 0) {
		close(c->sigpipe[0]);
		close(c->sigpipe[1]);
	}
}

int ctl_run(struct spec *spec, const struct ctl_options *opt)
{
	struct ctl c = {.spec = spec, .opt = opt, .sigpipe = {-1, -1}};
	struct resolved res = {0};
	struct herd_err err;
	struct sigaction sa;
	char path[4200];
	int status = 1;

	herd_err_clear(&err);
	if (resolve_nodes(spec, &res, &err) < 0) {
		fprintf(stderr, "herd: %s\n", err.text);
		return res.fail == RESOLVE_FAIL_INPUT ? EXIT_SPEC : 1;
	}
	c.local = res.nodes->count == 1 &&
		  !strcmp(res.nodes->entries[0].host, "localhost");
	c.log_dir = render_log_dir(spec, &err);
	if (!c.log_dir) {
		fprintf(stderr, "herd: log.dir: %s\n", err.text);
		resolve_free(&res);
		return EXIT_SPEC;
	}
	if (opt->dry_run) {
		status = dry_run(&c, &res);
		ctl_cleanup(&c);
		resolve_free(&res);
		return status;
	}

	c.tty = isatty(2);
	c.status = 0;
	c.loop = loop_new();
	snprintf(path, sizeof(path), "%s/events.jsonl", c.log_dir);
	c.ev = events_open(path, &err);
	if (!c.loop || !c.ev || pipe2(c.sigpipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		fprintf(stderr, "herd: %s\n",
			err.text[0] ? err.text : strerror(errno));
		goto out;
	}
	if (spec->bind.topology_file &&
	    !(c.platform = bind_platform_load(spec->bind.topology_file, &err))) {
		fprintf(stderr, "herd: bind.topology_file: %s\n", err.text);
		status = EXIT_SPEC;
		goto out;
	}
	c.transport = transport_new(transport_pick(spec, c.local), spec,
				    opt->agent_path, &err);
	if (!c.transport) {
		fprintf(stderr, "herd: %s\n", err.text);
		goto out;
	}
	sig_write_fd = c.sigpipe[1];
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGCHLD, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	loop_fd_add(c.loop, c.sigpipe[0], POLLIN, on_sigpipe, &c);

	c.n_nodes = (int)res.nodes->count;
	c.nodes = calloc((size_t)c.n_nodes, sizeof(*c.nodes));
	if (!c.nodes) {
		fprintf(stderr, "herd: out of memory\n");
		goto out;
	}
	events_emit(c.ev, "job_start",
		    json_pack("{s:s, s:i, s:s, s:s}", "job", spec->name,
			      "nodes", c.n_nodes, "mode",
			      spec_mode_name(spec->launch.mode), "transport",
			      c.transport->ops->name));
	for (int i = 0; i < c.n_nodes; i++) {
		struct node *n = &c.nodes[i];
		int fd;

		n->host = strdup(res.nodes->entries[i].host);
		n->slots = spec->nodes.slots > 0 ? (int)spec->nodes.slots
						 : res.nodes->entries[i].slots;
		n->state = NODE_CONNECTING;
		fd = transport_start(c.transport, n->host, &err);
		if (fd < 0) {
			n->state = NODE_FAILED;
			c.n_failed++;
			c.n_closed++;
			fprintf(stderr, "herd: %s: %s\n", n->host, err.text);
			continue;
		}
		n->conn = conn_new(c.loop, fd, fd, PROTO_FRAME_MAX, on_frame,
				   on_close, &c);
	}
	transport_commit(c.transport);
	progress(&c, false);
	check_all_connected(&c);
	if (c.state != CTL_END)
		loop_run(c.loop);
	status = c.status;
	events_emit(c.ev, "job_end",
		    json_pack("{s:i, s:i}", "status", status, "attempts",
			      c.attempt));
out:
	sigaction(SIGCHLD, &(struct sigaction){.sa_handler = SIG_DFL}, NULL);
	ctl_cleanup(&c);
	resolve_free(&res);
	return status;
}
