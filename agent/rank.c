/* rank.c — starting, watching and stopping the ranks of one node.
 *
 * Each rank runs under a small "keeper" (keeper.c): the agent's own
 * image exec'd in keeper mode, which leads the rank's process group,
 * kills that group when the agent dies (so a `kill -9` of the agent
 * leaves no rank behind), waits for the rank and exits with its status.
 *
 * The keeper is started through proc.h (its own group, PDEATHSIG, fds,
 * the report pipe) and reaped by the loop's registry, which hands its
 * status to rank_keeper_exited.  The agent runs no code of its own between
 * fork() and exec() (PMIx threads may exist in this process): the rank's
 * environment and argv are built here and handed to the keeper.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"
#include "herd/bind.h"
#include "herd/proc.h"

extern char **environ;

/* Environment of a rank: the agent's, then the job's, then the rank's;
 * later entries replace earlier ones with the same name. */

int envv_set(struct envv *e, const char *key, const char *value)
{
	size_t klen = strlen(key);
	char *entry;

	if (asprintf(&entry, "%s=%s", key, value) < 0)
		return -1;
	for (size_t i = 0; i < e->n; i++) {
		if (!strncmp(e->v[i], key, klen) && e->v[i][klen] == '=') {
			free(e->v[i]);
			e->v[i] = entry;
			return 0;
		}
	}
	if (e->n + 2 > e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 64;
		char **n = realloc(e->v, cap * sizeof(*n));

		if (!n) {
			free(entry);
			return -1;
		}
		e->v = n;
		e->cap = cap;
	}
	e->v[e->n++] = entry;
	e->v[e->n] = NULL;
	return 0;
}

static void envv_free(struct envv *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->v[i]);
	free(e->v);
	e->v = NULL;
	e->n = e->cap = 0;
}

static int envv_from_environ(struct envv *e)
{
	for (char **p = environ; *p; p++) {
		const char *eq = strchr(*p, '=');
		char key[256];
		size_t klen;

		if (!eq || (klen = (size_t)(eq - *p)) >= sizeof(key))
			continue;
		memcpy(key, *p, klen);
		key[klen] = '\0';
		if (envv_set(e, key, eq + 1) < 0)
			return -1;
	}
	return 0;
}

static int envv_add_json(struct envv *e, json_t *obj)
{
	const char *key;
	json_t *val;

	if (!json_is_object(obj))
		return 0;
	json_object_foreach(obj, key, val)
	{
		if (!json_is_string(val))
			continue;
		if (envv_set(e, key, json_string_value(val)) < 0)
			return -1;
	}
	return 0;
}

static void send_output(struct agent *a, struct rank *r, int which,
			const char *data, size_t len)
{
	json_t *body = json_pack("{s:i, s:i, s:i}", "rank", r->rank, "fd",
				 which, "attempt", a->attempt);

	agent_send(a, PROTO_OUTPUT, body, data, len);
}

/* Sends the complete lines in s->buf (or all of it when flush or full). */
static void stream_emit(struct agent *a, struct rank *r,
			struct rank_stream *s, int which, int flush)
{
	size_t cut = 0;

	if (s->len == 0)
		return;
	if (flush || s->len == sizeof(s->buf)) {
		cut = s->len;
	} else {
		for (size_t i = s->len; i > 0; i--) {
			if (s->buf[i - 1] == '\n') {
				cut = i;
				break;
			}
		}
	}
	if (cut == 0)
		return;
	if (metrics_has_patterns(a))
		metrics_output(a, r, s->buf, cut);
	send_output(a, r, which, s->buf, cut);
	if (which == 2 && a->stacks)
		stacks_rank_output(a, r, s->buf, cut);
	memmove(s->buf, s->buf + cut, s->len - cut);
	s->len -= cut;
}

static void stream_close(struct agent *a, struct rank *r,
			 struct rank_stream *s, int which)
{
	if (s->fd < 0)
		return;
	stream_emit(a, r, s, which, 1);
	loop_fd_del(a->loop, s->fd);
	close(s->fd);
	s->fd = -1;
	if (which == 2 && a->stacks)
		stacks_rank_closed(a, r);
}

/* Reads what the pipe holds; returns 0 at EOF, 1 otherwise. */
static int stream_read(struct agent *a, struct rank *r, struct rank_stream *s,
		       int which)
{
	for (;;) {
		ssize_t n = read(s->fd, s->buf + s->len, sizeof(s->buf) - s->len);

		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 1 : 0;
		if (n == 0)
			return 0;
		r->last_output_ms = loop_wall_ms();
		s->len += (size_t)n;
		stream_emit(a, r, s, which, 0);
	}
}

static void maybe_send_exit(struct agent *a, struct rank *r)
{
	json_t *body;

	if (r->running || r->exit_sent || r->out.fd >= 0 || r->err.fd >= 0)
		return;
	if (a->pmix_mode && !r->pmix_connected)
		psrv_drain(a);
	rank_started(a, r->rank, a->attempt, false);
	r->exit_sent = true;
	if (WIFSIGNALED(r->status))
		body = json_pack("{s:i, s:n, s:i}", "rank", r->rank, "code",
				 "signal", WTERMSIG(r->status));
	else
		body = json_pack("{s:i, s:i, s:n}", "rank", r->rank, "code",
				 WEXITSTATUS(r->status), "signal");
	json_object_set_new(body, "attempt", json_integer(a->attempt));
	if (r->start.step != PROC_STEP_NONE) {
		char why[256];

		/* E2BIG: only the exec knows the total of arguments and
		 * environment (ARG_MAX depends on the node's stack limit). */
		snprintf(why, sizeof(why), "%s%s: %s%s",
			 proc_step_what(r->start.step),
			 r->start.step == PROC_STEP_EXEC ? " /bin/sh" : "",
			 strerror(r->start.err),
			 r->start.err == E2BIG
				 ? " (the command, its placeholders filled "
				   "in, and the environment of the rank are "
				   "over the kernel's limit: shorten "
				   "launch.command, launch.env or the "
				   "variables of env_pass)"
				 : "");
		json_object_set_new(body, "error", json_string(why));
		json_object_set_new(body, "errno",
				    json_integer(r->start.err));
	}
	if (a->pmix_mode)
		json_object_set_new(body, "pmix_connected",
				    json_boolean(r->pmix_connected));
	agent_send(a, PROTO_EXIT, body, NULL, 0);
	if (rank_alive_count(a) == 0)
		agent_ranks_gone(a);
}

static struct rank *rank_by_fd(struct agent *a, int fd, int *which)
{
	for (int i = 0; i < a->n_ranks; i++) {
		if (a->ranks[i].out.fd == fd) {
			*which = 1;
			return &a->ranks[i];
		}
		if (a->ranks[i].err.fd == fd) {
			*which = 2;
			return &a->ranks[i];
		}
	}
	return NULL;
}

static void on_output(struct loop *loop, int fd, short revents, void *arg)
{
	struct agent *a = arg;
	int which = 0;
	struct rank *r = rank_by_fd(a, fd, &which);
	struct rank_stream *s;

	(void)loop;
	(void)revents;
	if (!r)
		return;
	s = which == 1 ? &r->out : &r->err;
	if (stream_read(a, r, s, which) == 0) {
		stream_close(a, r, s, which);
		maybe_send_exit(a, r);
	}
}

int rank_alive_count(const struct agent *a)
{
	int n = 0;

	for (int i = 0; i < a->n_ranks; i++)
		if (!a->ranks[i].exit_sent)
			n++;
	return n;
}

void rank_started(struct agent *a, int rank, int attempt, bool warm)
{
	if (attempt != a->attempt)
		return;
	for (int i = 0; i < a->n_ranks; i++) {
		struct rank *r = &a->ranks[i];

		if (r->rank != rank || r->spawn || r->started_sent)
			continue;
		r->started_sent = true;
		r->warm = warm;
		/* Its silence counts from here: a rank handed to a warm
		 * interpreter still importing has not begun. */
		r->last_output_ms = loop_wall_ms();
		agent_send(a, PROTO_STARTED,
			   json_pack("{s:i, s:i, s:b}", "attempt", attempt,
				     "rank", rank, "warm", warm),
			   NULL, 0);
		return;
	}
}

/* A keeper has exited (proc.h, from the loop): its rank is over. */
void rank_keeper_exited(struct loop *loop, const struct proc_exit *e,
			void *arg)
{
	struct agent *a = arg;

	(void)loop;
	for (int i = 0; i < a->n_ranks; i++) {
		struct rank *r = &a->ranks[i];

		if (r->pid != e->pid || !r->running)
			continue;
		r->running = false;
		r->status = e->status;
		r->start = *e;
		warm_rank_ended(a);
		/* The rank is over: whatever it left in its group (a
		 * background child ignoring SIGINT, a daemon) goes with it,
		 * as Slurm ends a step's leftovers. */
		kill(-r->pid, SIGKILL);
		/* Whatever the rank wrote is in the pipes now. */
		if (r->out.fd >= 0)
			stream_read(a, r, &r->out, 1);
		if (r->err.fd >= 0)
			stream_read(a, r, &r->err, 2);
		stream_close(a, r, &r->out, 1);
		stream_close(a, r, &r->err, 2);
		maybe_send_exit(a, r);
		break;
	}
	agent_child_exited(a);
}

void rank_signal_all(struct agent *a, int sig)
{
	for (int i = 0; i < a->n_ranks; i++)
		if (a->ranks[i].running)
			kill(-a->ranks[i].pid, sig);
}

static void on_grace_expired(struct loop *loop, void *arg)
{
	struct agent *a = arg;

	(void)loop;
	a->kill_timer = 0;
	rank_signal_all(a, SIGKILL);
}

void rank_stop_all(struct agent *a)
{
	rank_signal_all(a, a->stop_signal > 0 ? a->stop_signal : SIGTERM);
	/* Paused ranks (SIGTSTP on herd) must run to act on the signal. */
	if (a->paused) {
		rank_signal_all(a, SIGCONT);
		a->paused = false;
	}
	if (!a->kill_timer && rank_alive_count(a) > 0)
		a->kill_timer = loop_timer_add(a->loop, a->grace_ms,
					       on_grace_expired, a);
}

void rank_free_all(struct agent *a)
{
	stacks_fini(a);
	control_fini(a);
	for (int i = 0; i < a->n_ranks; i++) {
		struct rank *r = &a->ranks[i];

		if (r->out.fd >= 0) {
			loop_fd_del(a->loop, r->out.fd);
			close(r->out.fd);
		}
		if (r->err.fd >= 0) {
			loop_fd_del(a->loop, r->err.fd);
			close(r->err.fd);
		}
	}
	free(a->ranks);
	a->ranks = NULL;
	a->n_ranks = 0;
	a->ranks_cap = 0;
	json_decref(a->launch);
	a->launch = NULL;
}

/* $HERD_AGENT for a rank: this program as it is now.  When the cached
 * file was replaced after this agent started (another job on the node
 * uploaded the same build: rename over the same name) or removed, the
 * kernel's link reads "PATH (deleted)", which no exec finds; then the
 * agent's own /proc/PID/exe stands in, valid while the agent lives, and
 * the agent outlives its ranks. */
void agent_self_refresh(struct agent *a)
{
	static const char gone[] = " (deleted)";
	char buf[sizeof(a->self_path)];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	size_t g = sizeof(gone) - 1;

	if (n < 0)
		return; /* keep what main() read */
	buf[n] = '\0';
	/* Only a file that is gone changes the path: it never comes back. */
	if ((size_t)n > g && !strcmp(buf + n - g, gone))
		snprintf(a->self_path, sizeof(a->self_path), "/proc/%ld/exe",
			 (long)getpid());
}

/* command: the job's, for the warm path (warm.c); NULL: always cold. */
static int spawn_one(struct agent *a, struct rank *r, char *const *argv,
		     const char *command, const char *workdir,
		     const cpu_set_t *cpus, int mem_node, struct envv *env,
		     struct herd_err *err)
{
	bool cold = false;

	struct keeper_rank k = {
		.rank = r->rank,
		.self = a->self_path,
		.path = "/bin/sh",
		.argv = argv,
		.envp = env->v,
		.workdir = workdir,
		.cpus = cpus,
		.mem_node = mem_node,
		.image_fd = -1,
	};
	int out[2];
	pid_t pid;

	if (!a->keeper_tried) {
		a->keeper_fd = keeper_image_open();
		a->keeper_tried = true;
	}
	k.image_fd = a->keeper_fd;
	for (char *const *e = env->v; e && *e; e++)
		if (!strncmp(*e, "PYTHONFAULTHANDLER=", 19))
			r->faulthandler = (*e)[19] != '\0';
	pid = command ? warm_launch(a, &k, command, a->attempt, out) : 0;
	if (pid == 0) {
		pid = keeper_spawn(a->loop, &k, rank_keeper_exited, a, out,
				   err);
		cold = true;
	}
	if (pid < 0)
		return -1;
	r->pid = pid;
	r->running = true;
	r->out.fd = out[0];
	r->err.fd = out[1];
	fcntl(r->out.fd, F_SETFL, O_NONBLOCK);
	fcntl(r->err.fd, F_SETFL, O_NONBLOCK);
	loop_fd_add(a->loop, r->out.fd, POLLIN, on_output, a);
	loop_fd_add(a->loop, r->err.fd, POLLIN, on_output, a);
	if (cold)
		rank_started(a, r->rank, a->attempt, false);
	return 0;
}

int rank_launch(struct agent *a, json_t *launch, struct herd_err *err)
{
	json_t *ranks = json_object_get(launch, "ranks");
	const char *command =
		json_string_value(json_object_get(launch, "command"));
	const char *workdir =
		json_string_value(json_object_get(launch, "workdir"));
	json_t *grace = json_object_get(launch, "grace_ms");
	size_t n;

	if (a->n_ranks > 0 && rank_alive_count(a) > 0)
		return herd_errprintf(err, "ranks of attempt %d still run",
				      a->attempt);
	rank_free_all(a);
	if (!command || !json_is_array(ranks))
		return herd_errprintf(err, "LAUNCH needs command and ranks");
	a->launch = json_incref(launch);
	n = json_array_size(ranks);
	if (n > 4096)
		return herd_errprintf(err, "LAUNCH asks for %zu ranks on one "
				      "node (at most 4096)", n);
	a->attempt = (int)json_integer_value(json_object_get(launch, "attempt"));
	a->pmix_mode = json_is_object(json_object_get(launch, "pmix"));
	a->survivors_kept =
	    json_is_true(json_object_get(launch, "survivors"));
	if (psrv_prepare(a, launch, err) < 0)
		return -1;
	a->progress_timeout_ms = json_integer_value(
		json_object_get(launch, "progress_timeout_ms"));
	if (json_is_integer(grace))
		a->grace_ms = json_integer_value(grace);
	/* Room for the processes PMIx_Spawn may add (pmix mode): entries
	 * never move while the attempt runs.  calloc's pages are not
	 * touched until used. */
	a->ranks_cap = (int)n + (a->pmix_mode ? AGENT_SPAWN_LOCAL_MAX : 0);
	a->ranks = calloc(a->ranks_cap ? (size_t)a->ranks_cap : 1,
			  sizeof(*a->ranks));
	if (!a->ranks)
		return herd_errprintf(err, "out of memory");
	touch_launch(a);
	for (size_t i = 0; i < n; i++) {
		json_t *jr = json_array_get(ranks, i);
		struct rank *r = &a->ranks[i];
		struct envv env = {0};
		const char *cpus;
		cpu_set_t set;
		json_t *mem;
		int rc, mem_node = -1;

		r->rank = (int)json_integer_value(json_object_get(jr, "rank"));
		r->local_rank = (int)i;
		r->out.fd = r->err.fd = -1;
		a->n_ranks = (int)i + 1;
		/* HERD_PROGRESS_FILE: node-local, in the agent's private
		 * directory; launch.env may name another file, which is
		 * then the one watched. */
		r->last_output_ms = loop_wall_ms();
		r->progress_file[0] = '\0';
		if (a->run_dir[0])
			snprintf(r->progress_file, sizeof(r->progress_file),
				 "%s/rank-%d.progress", a->run_dir, r->rank);
		{
			json_t *je = json_object_get(launch, "env");
			const char *user = json_string_value(
				json_object_get(je, "HERD_PROGRESS_FILE"));

			if (user)
				snprintf(r->progress_file,
					 sizeof(r->progress_file), "%s", user);
		}
		/* HERD_METRICS: the same, for training values (measure.c
		 * tails it); a file of an earlier attempt is removed, so
		 * its lines are not read again. */
		r->metrics_file[0] = '\0';
		if (a->run_dir[0]) {
			snprintf(r->metrics_file, sizeof(r->metrics_file),
				 "%s/rank-%d.metrics", a->run_dir, r->rank);
			unlink(r->metrics_file);
		}
		{
			const char *user = json_string_value(json_object_get(
				json_object_get(launch, "env"),
				"HERD_METRICS"));

			if (user)
				snprintf(r->metrics_file,
					 sizeof(r->metrics_file), "%s", user);
		}
		agent_self_refresh(a);
		if (envv_from_environ(&env) < 0 ||
		    (a->self_path[0] &&
		     envv_set(&env, "HERD_AGENT", a->self_path) < 0) ||
		    (r->progress_file[0] &&
		     envv_set(&env, "HERD_PROGRESS_FILE", r->progress_file) <
			     0) ||
		    (r->metrics_file[0] &&
		     envv_set(&env, "HERD_METRICS", r->metrics_file) < 0) ||
		    /* Python prints every thread's traceback on SIGABRT,
		     * the agent's way to see where a hung rank is
		     * (stacks.c); the node's environment or launch.env may
		     * say otherwise. */
		    (!getenv("PYTHONFAULTHANDLER") &&
		     envv_set(&env, "PYTHONFAULTHANDLER", "1") < 0) ||
		    (a->pmix_mode && psrv_setup_rank(a, r, &env, err) < 0) ||
		    control_rank_env(a, r->rank, &env) < 0 ||
		    ckpt_mem_rank_env(a, r->rank, &env) < 0 ||
		    envv_add_json(&env, json_object_get(launch, "env")) < 0 ||
		    envv_add_json(&env, json_object_get(jr, "env")) < 0 ||
		    pypkg_env(a, &env) < 0) {
			envv_free(&env);
			r->exit_sent = true;
			rank_stop_all(a);
			return herd_errprintf(err, "out of memory");
		}
		cpus = json_string_value(json_object_get(jr, "cpus"));
		if (cpus) {
			struct bind_rank br = {.cpus = (char *)cpus};

			if (bind_rank_cpu_set(&br, &set) < 0) {
				envv_free(&env);
				r->exit_sent = true;
				rank_stop_all(a);
				return herd_errprintf(err, "rank %d: bad cpu "
						      "list '%s'", r->rank,
						      cpus);
			}
		}
		/* A node past the keeper's mask prefers none. */
		mem = json_object_get(jr, "mem_node");
		if (json_is_integer(mem) && json_integer_value(mem) >= 0 &&
		    json_integer_value(mem) < KEEPER_MEM_NODES)
			mem_node = (int)json_integer_value(mem);
		touch_watch(a, r);
		{
			char *argv[] = {"sh", "-c", (char *)command, NULL};

			rc = spawn_one(a, r, argv, command, workdir,
				       cpus ? &set : NULL, mem_node, &env, err);
		}
		envv_free(&env);
		if (rc < 0) {
			r->exit_sent = true;
			rank_stop_all(a);
			return -1;
		}
	}
	warm_after_launch(a, (int)n);
	return 0;
}

/* A spawned process: as a rank, exec'd through sh so that cmd is looked
 * up in PATH and every argument stays a literal word. */
int rank_spawn_proc(struct agent *a, const struct rank_proc *p,
		    struct herd_err *err)
{
	const char *workdir = p->cwd;
	struct envv env = {0};
	struct rank *r = NULL;
	cpu_set_t set;
	char **argv;
	size_t n = 0;
	bool reuse = false;
	int rc;

	/* The bound is on processes alive at once: the entry of
	 * a spawned process that is over (reaped, output drained, EXIT
	 * sent) is taken again once the room is used up. */
	if (a->ranks && a->n_ranks >= a->ranks_cap) {
		for (int i = 0; i < a->n_ranks && !reuse; i++) {
			struct rank *o = &a->ranks[i];

			reuse = o->spawn && o->exit_sent && !o->running &&
				o->out.fd < 0 && o->err.fd < 0;
			r = &a->ranks[i];
		}
	}
	if (!a->ranks || (a->n_ranks >= a->ranks_cap && !reuse))
		return herd_errprintf(err, "this node already runs %d spawned "
				      "processes (at most %d alive at once)",
				      AGENT_SPAWN_LOCAL_MAX,
				      AGENT_SPAWN_LOCAL_MAX);
	if (!workdir && a->launch)
		workdir = json_string_value(json_object_get(a->launch,
							    "workdir"));
	if (p->cpus) {
		struct bind_rank br = {.cpus = (char *)p->cpus};

		if (bind_rank_cpu_set(&br, &set) < 0)
			return herd_errprintf(err, "bad cpu list '%s'",
					      p->cpus);
	}
	while (p->argv && p->argv[n])
		n++;
	argv = calloc(n + 5, sizeof(*argv));
	if (!argv)
		return herd_errprintf(err, "out of memory");
	argv[0] = "sh";
	argv[1] = "-c";
	argv[2] = "exec \"$0\" \"$@\"";
	argv[3] = (char *)p->cmd;
	for (size_t i = 0; i < n; i++)
		argv[4 + i] = p->argv[i];
	if (!reuse)
		r = &a->ranks[a->n_ranks];
	memset(r, 0, sizeof(*r));
	/* Not alive (not counted, no EXIT owed) until it is started. */
	r->exit_sent = reuse;
	r->rank = p->id;
	r->spawn = p->spawn;
	r->srank = p->srank;
	r->local_rank = (int)(r - a->ranks);
	r->out.fd = r->err.fd = -1;
	r->touch_wd = -1;
	/* Not watched for hangs: herd's hang evidence is about the job's
	 * ranks. */
	r->hung_reported = true;
	r->last_output_ms = loop_wall_ms();
	rc = -1;
	agent_self_refresh(a);
	if (envv_from_environ(&env) < 0 ||
	    (a->self_path[0] && envv_set(&env, "HERD_AGENT", a->self_path) < 0) ||
	    (!getenv("PYTHONFAULTHANDLER") &&
	     envv_set(&env, "PYTHONFAULTHANDLER", "1") < 0) ||
	    envv_add_json(&env, a->launch ? json_object_get(a->launch, "env")
					  : NULL) < 0) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	for (char *const *e = p->env; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		char key[256];

		if (!eq || eq == *e || (size_t)(eq - *e) >= sizeof(key))
			continue;
		memcpy(key, *e, (size_t)(eq - *e));
		key[eq - *e] = '\0';
		if (envv_set(&env, key, eq + 1) < 0) {
			herd_errprintf(err, "out of memory");
			goto out;
		}
	}
	if (pypkg_env(a, &env) < 0) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	/* After the app's environment: the PMIx server's variables are the
	 * ones the process must see. */
	if (psrv_setup_proc(a, p->nspace, (uint32_t)p->srank, &env, err) < 0)
		goto out;
	if (!reuse)
		a->n_ranks++;
	r->exit_sent = false;
	r->started_sent = true; /* herd announces only the job's ranks */
	rc = spawn_one(a, r, argv, NULL, workdir, p->cpus ? &set : NULL, -1,
		       &env, err);
	if (rc < 0) {
		/* Never ran: its EXIT says so, herd fails the spawn. */
		r->exit_sent = true;
	}
out:
	envv_free(&env);
	free(argv);
	return rc;
}
