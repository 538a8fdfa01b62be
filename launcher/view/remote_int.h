/* remote_int.h — the SSH session and the pump of view/remote.c, which
 * view/remote_run.c (`herd run --detach --on HOST`) uses too.  Private to
 * launcher/view/remote*.c. */
#ifndef HERD_LAUNCHER_REMOTE_INT_H
#define HERD_LAUNCHER_REMOTE_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include <libssh/libssh.h>

#include "herd/spec.h"
#include "launcher/transport/ssh/nodecache.h"
#include "launcher/transport/ssh/sshsess.h"
#include "launcher/view/remote.h"

/* What `herd run --detach --json` prints on HOST is one small object;
 * more than 64 KiB is not that. */
#define REMOTE_RUN_OUT_MAX (64u << 10)
/* The last line of a queried command's stderr that err gets. */
#define REMOTE_ERR_TAIL 512

/* A session to HOST with herd (and maybe herd-agent) checked there. */
struct remote_conn {
	const char *host;
	struct sshsess_cfg cfg;
	ssh_session s;
	char self[PATH_MAX];		/* this herd */
	char agent_path[PATH_MAX + 16]; /* its herd-agent */
	struct nodecache_bin herd, agent;
	char *dir;	   /* ssh.agent_dir/herd-VERSION-HASH on HOST */
	char *remote_herd; /* dir/herd */
	/* HERD_PROXIED=TOKEN, the remote herd's environment: TOKEN (random)
	 * finds that process again for a Ctrl-C (remote_interrupt()). */
	char env[64];
};

/* Where each stream of the remote command goes. */
struct remote_pump {
	ssh_session s;
	ssh_channel ch;
	/* stdin: the bytes in mem, else in_fd (-1: none at all) */
	const char *mem;
	size_t mem_len;
	int in_fd;
	/* stdout: out_fd, or captured into cap (at most cap_max) */
	int out_fd;
	char *cap;
	size_t cap_len, cap_max;
	bool cap_over;
	/* stderr: err_fd, or its last line kept in tail */
	int err_fd;
	char tail[REMOTE_ERR_TAIL];
	size_t tail_len;
	int sig_fd;	 /* self-pipe of SIGINT/SIGTERM/SIGHUP, or -1 */
	const char *env; /* HERD_PROXIED=TOKEN of the remote command */
	bool ch_ran;	 /* the remote command was started */
};

/* What remote_pump() ended with, besides an exit status. */
enum pump_end {
	PUMP_EXITED,	 /* the command ended: *status is its exit status */
	PUMP_BROKEN,	 /* the session broke (HOST gone) */
	PUMP_LOCAL,	 /* our stdout went away, or the capture overflowed */
	PUMP_INTERRUPTED /* Ctrl-C and the remote did not end in time */
};

/* Connects to host with spec's ssh.* settings, logs in and makes sure
 * the cache there holds this herd (and with agent, its herd-agent).
 * Returns 0, or -1 with err ("HOST: why"). */
int remote_connect(struct remote_conn *c, const struct spec *spec,
		   const char *host, bool agent, struct herd_err *err);
/* Ends c's session and frees what c holds (c itself is the caller's). */
void remote_conn_close(struct remote_conn *c);
/* Runs HERD args[0..n_args) on c's host.  Returns an exec channel, or
 * NULL with err. */
ssh_channel remote_start(struct remote_conn *c, char *const *args,
			 size_t n_args, struct herd_err *err);
/* Closes and frees an exec channel (NULL: nothing). */
void remote_channel_close(ssh_channel ch);
/* Serves p's channel until the remote command ends (see remote.c). */
enum pump_end remote_pump(struct remote_pump *p, int *status);

#endif
