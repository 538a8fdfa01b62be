/* remote.c — `herd run --detach --on HOST` and the proxy to a job whose
 * controller runs on HOST (see remote.h).
 *
 * One session, one exec channel at a time, served by one poll() loop
 * (remote_pump()): this process's stdin (or the job file's bytes) to the
 * channel, the channel's stdout and stderr to ours, a self-pipe for the
 * signals.  libssh runs non-blocking inside the loop; nothing else runs
 * in this process meanwhile.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <jansson.h>
#include <libssh/libssh.h>

#include "herd/file.h"
#include "herd/jobreg.h"
#include "herd/render.h"
#include "launcher/cli.h"
#include "launcher/view/remote_int.h"

/* One read or write of the pump: one SSH channel packet. */
#define REMOTE_CHUNK (32 * 1024)
/* After a Ctrl-C has been sent on to HOST, how long the remote command
 * may take to end before the session is dropped. */
#define REMOTE_INT_GRACE_MS 3000
/* A session whose peer went away (HOST down, route gone) is found by TCP
 * keepalive: idle 10 s, then 5 probes 3 s apart, about 25 s in all. */
#define REMOTE_KEEPIDLE_S  10
#define REMOTE_KEEPINTVL_S 3
#define REMOTE_KEEPCNT	   5

static int sig_pipe[2] = {-1, -1};

bool remote_entry_is_remote(const struct jobreg_entry *e)
{
	const char *here = getenv(REMOTE_PROXIED_ENV);

	return e && e->host && e->host[0] && !(here && here[0]);
}

void remote_conn_close(struct remote_conn *c)
{
	if (c->s) {
		ssh_disconnect(c->s);
		ssh_free(c->s);
		c->s = NULL;
	}
	sshsess_cfg_free(&c->cfg);
	free(c->dir);
	free(c->remote_herd);
	c->dir = c->remote_herd = NULL;
}

/* Connects to host with spec's ssh.* settings, logs in and makes sure
 * the cache there holds this herd (and with agent, its herd-agent).
 * Returns 0, or -1 with err ("HOST: why"). */
int remote_connect(struct remote_conn *c, const struct spec *spec,
		   const char *host, bool agent, struct herd_err *err)
{
	const char *cache =
	    spec->ssh.agent_dir ? spec->ssh.agent_dir : NODECACHE_DEFAULT_DIR;
	char why[512];
	ssize_t n;

	unsigned char rnd[8];

	c->host = host;
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return herd_errprintf(err, "getrandom: %s", strerror(errno));
	snprintf(c->env, sizeof(c->env),
		 REMOTE_PROXIED_ENV "=%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0],
		 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	n = readlink("/proc/self/exe", c->self, sizeof(c->self) - 1);
	if (n < 0)
		return herd_errprintf(err,
				      "cannot find this herd (/proc/self/exe): "
				      "%s",
				      strerror(errno));
	c->self[n] = '\0';
	if (nodecache_bin_init(&c->herd, c->self, "herd", err) < 0)
		return -1;
	/* Both in a directory named by this herd's build: the remote herd
	 * finds its agent next to itself, as here (cli_agent_path()). */
	if (asprintf(&c->dir, "%s/%s", cache, c->herd.name) < 0 ||
	    asprintf(&c->remote_herd, "%s/herd", c->dir) < 0) {
		c->dir = c->remote_herd = NULL;
		return herd_errprintf(err, "out of memory");
	}
	snprintf(c->herd.name, sizeof(c->herd.name), "herd");
	if (agent) {
		if (cli_agent_path(c->agent_path, sizeof(c->agent_path)) < 0)
			return herd_errprintf(err,
					      "cannot find herd-agent next to "
					      "herd (%s)",
					      c->agent_path);
		if (nodecache_bin_init(&c->agent, c->agent_path, "agent", err) <
		    0)
			return -1;
		snprintf(c->agent.name, sizeof(c->agent.name), "herd-agent");
	}
	if (sshsess_cfg_init_job(&c->cfg, spec, err) < 0)
		return -1;
	if (!(c->s = sshsess_open(&c->cfg, host, NULL, NULL, err)) ||
	    sshsess_auth(&c->cfg, c->s, NULL, NULL, err) < 0) {
		char had[sizeof(err->text)];

		snprintf(had, sizeof(had), "%s", err->text);
		return herd_errprintf(err, "%s: %s", host, had);
	}
	if (nodecache_ensure(c->s, c->dir, &c->herd, why, sizeof(why)) < 0 ||
	    (agent &&
	     nodecache_ensure(c->s, c->dir, &c->agent, why, sizeof(why)) < 0))
		return herd_errprintf(err,
				      "%s: cannot put herd in %s there: %s",
				      host, c->dir, why);
	return 0;
}

/* TCP keepalive on the session's socket: a HOST that went away ends the
 * pump with an error instead of a wait without end. */
static void remote_keepalive(ssh_session s)
{
	int fd = ssh_get_fd(s), on = 1, idle = REMOTE_KEEPIDLE_S,
	    intvl = REMOTE_KEEPINTVL_S, cnt = REMOTE_KEEPCNT;

	if (fd < 0)
		return;
	/* Best effort: without it a dead HOST is found later, by TCP. */
	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* Bytes of the remote stdout (is_err false) or stderr.  Returns -1 when
 * they cannot go on (our stdout closed, capture over its limit). */
static int pump_deliver(struct remote_pump *p, bool is_err, const char *buf,
			size_t len)
{
	if (is_err) {
		if (p->err_fd >= 0)
			return file_write_all(p->err_fd, buf, len) < 0 ? -1 : 0;
		for (size_t i = 0; i < len; i++) {
			if (buf[i] == '\n') {
				if (i + 1 < len)
					p->tail_len = 0; /* a new line */
				continue;
			}
			if (p->tail_len + 1 < sizeof(p->tail))
				p->tail[p->tail_len++] =
				    (unsigned char)buf[i] < 0x20 ? '?' : buf[i];
		}
		p->tail[p->tail_len] = '\0';
		return 0;
	}
	if (p->out_fd >= 0)
		return file_write_all(p->out_fd, buf, len);
	if (p->cap_len + len > p->cap_max) {
		p->cap_over = true;
		return -1;
	}
	memcpy(p->cap + p->cap_len, buf, len);
	p->cap_len += len;
	p->cap[p->cap_len] = '\0';
	return 0;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

/* Sends SIGINT to the remote command: as an SSH "signal" request, which
 * sshd refuses in some set-ups (root logins, no privilege separation),
 * and from a second command that finds the process by its HERD_PROXIED
 * token (its environment: readable only by the same user).  Blocks for
 * one round trip. */
static void remote_interrupt(struct remote_pump *p)
{
	static const char script[] =
	    "for f in $(grep -lzxF -e \"$1\" /proc/[0-9]*/environ "
	    "2>/dev/null); do f=${f#/proc/}; kill -INT \"${f%/environ}\" "
	    "2>/dev/null; done; exit 0";
	char *q_script = render_shell_quote(script),
	     *q_env = p->env ? render_shell_quote(p->env) : NULL, *cmd = NULL;
	char buf[256];
	ssh_channel ch = NULL;

	ssh_channel_request_send_signal(p->ch, "INT");
	if (!p->env || !q_script || !q_env ||
	    asprintf(&cmd, "exec /bin/sh -c %s herd-interrupt %s", q_script,
		     q_env) < 0) {
		cmd = NULL;
		goto out;
	}
	ssh_set_blocking(p->s, 1);
	ch = ssh_channel_new(p->s);
	if (ch && ssh_channel_open_session(ch) == SSH_OK &&
	    ssh_channel_request_exec(ch, cmd) == SSH_OK)
		while (ssh_channel_read_timeout(ch, buf, sizeof(buf), 0,
						REMOTE_INT_GRACE_MS) > 0)
			;
	remote_channel_close(ch);
	ssh_set_blocking(p->s, 0);
out:
	free(q_script);
	free(q_env);
	free(cmd);
}

/* Serves the channel until the remote command ends.  The loop: send what
 * stdin has (as the channel's window allows), take what the channel
 * holds, flush, poll.  libssh may read the socket inside any call and
 * keep the bytes, where poll() cannot see them: so each round drains the
 * channel before it waits, and waits at most a second. */
enum pump_end remote_pump(struct remote_pump *p, int *status)
{
	char buf[REMOTE_CHUNK], in[REMOTE_CHUNK];
	size_t in_off = 0, in_len = 0, mem_off = 0;
	bool in_done = p->in_fd < 0 && !p->mem;
	long int_at = -1;
	enum pump_end end = PUMP_EXITED;

	*status = -1;
	if (in_done)
		ssh_channel_send_eof(p->ch);
	ssh_set_blocking(p->s, 0);
	for (;;) {
		struct pollfd pfd[3];
		int got, nfd = 0, in_i = -1, sig_i = -1;

		/* stdin -> channel */
		if (!in_done && in_off == in_len && p->mem) {
			in_len = p->mem_len - mem_off < sizeof(in)
				     ? p->mem_len - mem_off
				     : sizeof(in);
			memcpy(in, p->mem + mem_off, in_len);
			mem_off += in_len;
			in_off = 0;
			if (in_len == 0) {
				ssh_channel_send_eof(p->ch);
				in_done = true;
			}
		}
		if (!in_done && in_off < in_len) {
			uint32_t room = ssh_channel_window_size(p->ch);
			size_t len = in_len - in_off;
			int w;

			if (len > room)
				len = room;
			if (len > 0) {
				w = ssh_channel_write(p->ch, in + in_off,
						      (uint32_t)len);
				if (w < 0) {
					end = PUMP_BROKEN;
					break;
				}
				in_off += (size_t)w;
			}
		}
		/* channel -> stdout, stderr */
		for (int is_err = 0; is_err < 2; is_err++) {
			while ((got = ssh_channel_read_nonblocking(
				    p->ch, buf, sizeof(buf), is_err)) > 0)
				if (pump_deliver(p, is_err, buf, (size_t)got) <
				    0) {
					end = PUMP_LOCAL;
					goto out;
				}
			if (got == SSH_ERROR) {
				end = PUMP_BROKEN;
				goto out;
			}
		}
		if (ssh_channel_is_eof(p->ch) || ssh_channel_is_closed(p->ch))
			break;
		if (ssh_blocking_flush(p->s, 0) == SSH_ERROR) {
			end = PUMP_BROKEN;
			break;
		}
		if (int_at >= 0 && now_ms() - int_at > REMOTE_INT_GRACE_MS) {
			end = PUMP_INTERRUPTED;
			break;
		}
		pfd[nfd++] =
		    (struct pollfd){.fd = ssh_get_fd(p->s), .events = POLLIN};
		if (!in_done && !p->mem && in_off == in_len) {
			in_i = nfd;
			pfd[nfd++] =
			    (struct pollfd){.fd = p->in_fd, .events = POLLIN};
		}
		if (p->sig_fd >= 0) {
			sig_i = nfd;
			pfd[nfd++] =
			    (struct pollfd){.fd = p->sig_fd, .events = POLLIN};
		}
		if (poll(pfd, (nfds_t)nfd, 1000) < 0 && errno != EINTR) {
			end = PUMP_BROKEN;
			break;
		}
		if (pfd[0].revents & (POLLERR | POLLNVAL)) {
			end = PUMP_BROKEN;
			break;
		}
		if (in_i >= 0 && pfd[in_i].revents) {
			ssize_t r = read(p->in_fd, in, sizeof(in));

			if (r > 0) {
				in_off = 0;
				in_len = (size_t)r;
			} else if (r == 0 ||
				   (errno != EINTR && errno != EAGAIN)) {
				ssh_channel_send_eof(p->ch);
				in_done = true;
			}
		}
		if (sig_i >= 0 && (pfd[sig_i].revents & POLLIN)) {
			char sig;

			if (read(p->sig_fd, &sig, 1) == 1) {
				if (int_at >= 0) {
					end = PUMP_INTERRUPTED;
					break; /* the second Ctrl-C */
				}
				/* The remote command decides (attach
				 * detaches); the session is dropped when
				 * it has not ended after the grace. */
				remote_interrupt(p);
				int_at = now_ms();
			}
		}
	}
out:
	if (end == PUMP_EXITED) {
		ssh_set_blocking(p->s, 1);
		*status = ssh_channel_get_exit_status(p->ch);
		if (*status < 0) /* killed by a signal there */
			*status = REMOTE_UNREACHABLE;
	}
	return end;
}

/* Runs HERD args... on c's host.  Returns an exec channel, or NULL with
 * err. */
ssh_channel remote_start(struct remote_conn *c, char *const *args,
			 size_t n_args, struct herd_err *err)
{
	char *cmd = nodecache_start_command(c->dir, &c->herd, c->env,
					    (const char *const *)args, n_args);
	ssh_channel ch = NULL;

	if (!cmd) {
		herd_errprintf(err, "out of memory");
		return NULL;
	}
	ch = ssh_channel_new(c->s);
	if (!ch || ssh_channel_open_session(ch) != SSH_OK ||
	    ssh_channel_request_exec(ch, cmd) != SSH_OK) {
		herd_errprintf(err, "%s: cannot run herd there: %s", c->host,
			       ssh_get_error(c->s));
		if (ch)
			ssh_channel_free(ch);
		ch = NULL;
	}
	free(cmd);
	if (ch)
		remote_keepalive(c->s);
	return ch;
}

void remote_channel_close(ssh_channel ch)
{
	if (!ch)
		return;
	ssh_channel_close(ch);
	ssh_channel_free(ch);
}

static void on_signal(int sig)
{
	char c = (char)sig;
	int saved = errno;

	if (write(sig_pipe[1], &c, 1) < 0) {
		/* the pipe is full: a Ctrl-C is pending already */
	}
	errno = saved;
}

/* The signals of an interactive proxy: to the self-pipe. */
static int remote_signals(void)
{
	struct sigaction sa = {0};

	if (sig_pipe[0] < 0 && pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	return sig_pipe[0];
}

/* The job's settings for a session to its host: RUNDIR/job.yaml (what
 * ran), else the job file, from the directory the job was started in
 * (relative ssh.identity, ssh.known_hosts).  NULL with err. */
static struct spec *entry_spec(const struct jobreg_entry *e,
			       struct herd_err *err)
{
	struct spec *spec = NULL;
	char *copy = NULL;
	char why[sizeof(err->text)];

	if (e->cwd && chdir(e->cwd) < 0) {
		/* The settings may not need it: go on from here. */
	}
	if (e->run_dir && asprintf(&copy, "%s/job.yaml", e->run_dir) >= 0 &&
	    access(copy, R_OK) == 0)
		spec = spec_load(copy, err);
	else if (e->job_file)
		spec = spec_load(e->job_file, err);
	else
		herd_errprintf(err, "no job file is known");
	free(copy);
	if (!spec) {
		snprintf(why, sizeof(why), "%s", err->text);
		herd_errprintf(err, "cannot read the job's ssh settings: %s",
			       why);
	}
	return spec;
}

/* One proxied command: connect, run, pump (p's streams are the
 * caller's).  Returns the exit status; REMOTE_UNREACHABLE with err when
 * it did not run to its end (*endp says why). */
static int proxy_run(const struct jobreg_entry *e, int argc, char **argv,
		     struct remote_pump *p, enum pump_end *endp,
		     struct herd_err *err)
{
	struct remote_conn c = {0};
	/* entry_spec() changes to the job's directory; back here after. */
	int here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct spec *spec = entry_spec(e, err);
	int status = REMOTE_UNREACHABLE;
	enum pump_end end = PUMP_BROKEN;

	if (!spec || remote_connect(&c, spec, e->host, false, err) < 0)
		goto out;
	if (!(p->ch = remote_start(&c, argv, (size_t)argc, err)))
		goto out;
	p->s = c.s;
	p->env = c.env;
	p->ch_ran = true;
	end = remote_pump(p, &status);
	switch (end) {
	case PUMP_EXITED:
		break;
	case PUMP_BROKEN:
		status = REMOTE_UNREACHABLE;
		herd_errprintf(err,
			       "%s stopped answering; the job goes on there "
			       "(try again once it is reachable)",
			       e->host);
		break;
	case PUMP_INTERRUPTED:
		status = 130;
		break;
	case PUMP_LOCAL:
		status = 1;
		herd_errprintf(err, "%s",
			       p->cap_over ? "too much output"
					   : "output closed");
		break;
	}
out:
	remote_channel_close(p->ch);
	p->ch = NULL;
	remote_conn_close(&c);
	spec_free(spec);
	if (here >= 0) {
		if (fchdir(here) < 0) {
			/* the directory went away: nothing else needs it */
		}
		close(here);
	}
	*endp = end;
	return status;
}

int remote_proxy(const struct jobreg_entry *e, int argc, char **argv)
{
	struct remote_pump p = {.in_fd = STDIN_FILENO,
				.out_fd = STDOUT_FILENO,
				.err_fd = STDERR_FILENO};
	struct herd_err err;
	enum pump_end end;
	int status;

	herd_err_clear(&err);
	if (!remote_entry_is_remote(e)) {
		cli_error("%s: already on its host %s (the proxy does not "
			  "go on from there)",
			  e->id, e->host ? e->host : "?");
		return 1;
	}
	p.sig_fd = remote_signals();
	status = proxy_run(e, argc, argv, &p, &end, &err);
	if (err.text[0] && end == PUMP_BROKEN && !p.ch_ran)
		cli_error("%s: %s; the job there is not affected (try again "
			  "once %s answers)",
			  e->id, err.text, e->host);
	else if (err.text[0] && end != PUMP_INTERRUPTED)
		cli_error("%s: %s", e->id, err.text);
	return status;
}

int remote_forward(int argc, char **argv)
{
	static const char *const forwarded[] = {"attach", "stop"};
	struct jobreg_entry e = {0};
	struct herd_err err;
	char **args = NULL;
	int i, status = -1;
	bool ours = false;

	for (size_t k = 0; k < sizeof(forwarded) / sizeof(forwarded[0]); k++)
		ours = ours || !strcmp(argv[0], forwarded[k]);
	if (!ours)
		return -1;
	/* Neither command has an option that takes a value. */
	for (i = 1; i < argc && argv[i][0] == '-'; i++)
		if (!strcmp(argv[i], "--"))
			return -1;
	herd_err_clear(&err);
	if (i == argc || jobreg_find(argv[i], &e, &err) < 0 ||
	    !remote_entry_is_remote(&e))
		goto out;
	if (!(args = calloc((size_t)argc + 1, sizeof(*args)))) {
		cli_error("out of memory");
		status = 1;
		goto out;
	}
	memcpy(args, argv, (size_t)argc * sizeof(*args));
	args[i] = e.id;
	status = remote_proxy(&e, argc, args);
out:
	free(args);
	jobreg_entry_clear(&e);
	return status;
}

int remote_query(const struct jobreg_entry *e, int argc, char **argv,
		 char **out, size_t max, struct herd_err *err)
{
	struct remote_pump p = {.in_fd = -1,
				.out_fd = -1,
				.err_fd = -1,
				.sig_fd = -1,
				.cap_max = max};
	enum pump_end end;
	int status;

	*out = NULL;
	if (!(p.cap = malloc(max + 1)))
		return herd_errprintf(err, "out of memory");
	p.cap[0] = '\0';
	status = proxy_run(e, argc, argv, &p, &end, err);
	if (end != PUMP_EXITED) {
		free(p.cap);
		return -1;
	}
	if (status != 0)
		herd_errprintf(err, "%s", p.tail);
	*out = p.cap;
	return status;
}

/* The current directory and path made absolute against it (as given:
 * not resolved). */
