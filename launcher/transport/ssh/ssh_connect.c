/* transport/ssh/ssh_connect.c — the connect workers of the SSH transport:
 * each takes a queued node, connects, checks the host key, logs in,
 * makes sure the agent is cached there, starts it, and hands the node to
 * the I/O thread; see ssh.c. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libssh/libssh.h>

#include "launcher/transport/ssh/ssh_int.h"

/* ---- connect workers ----------------------------------------------------- */

/* On a worker: connects n, logs in, starts its agent and reads the
 * agent's first bytes into n->out.  Returns 0, or -1 after reporting the
 * failure on n->fd. */
static int node_connect(struct tssh_node *n)
{
	/* --pmix: the agent starts its PMIx server while herd waits for
	 * the other nodes' HELLOs, not after LAUNCH. */
	const char *agent_args[2 + sizeof(((struct transport_warm *)0)->argv) /
				       sizeof(char *)] = {"--stdio", "--pmix"};
	struct tssh_priv *priv = n->t->priv;
	int n_args = n->t->spec->launch.mode == SPEC_MODE_PMIX ? 2 : 1;
	struct transport_warm warm;
	struct herd_err err;
	char *cmd = NULL;
	bool stop;
	int status, rc = -1;

	herd_err_clear(&err);
	if (!(n->out = malloc(SSH_PUMP_CHUNK)) ||
	    !(n->s = sshsess_new(&priv->cfg, n->host, &err))) {
		transport_report(n->fd, "connect", "%s: out of memory",
				 n->host);
		goto out;
	}
	if ((rc = sshsess_connect(n->s, &err)) < 0) {
		/* "setup": herd's set-up (ssh.port, the host name), not the
		 * node's health; not held against the node. */
		transport_report(n->fd,
				 rc == SSHSESS_SETUP ? "setup" : "connect",
				 "%s: %s", n->host, err.text);
		rc = -1;
		goto out;
	}
	pthread_mutex_lock(&priv->lock);
	stop = priv->aborting;
	if (!stop)
		n->sock = ssh_get_fd(n->s);
	pthread_mutex_unlock(&priv->lock);
	if (stop)
		goto out; /* herd is ending */
	if (sshsess_host_key(&priv->cfg, n->s, n->host, NULL, &err) < 0) {
		transport_report(n->fd, "host key", "%s: %s", n->host,
				 err.text);
		goto out;
	}
	if (sshsess_auth(&priv->cfg, n->s, NULL, NULL, &err) < 0) {
		transport_report(n->fd, "auth", "%s: %s", n->host, err.text);
		goto out;
	}
	/* One remote command in the common case (every command costs a
	 * login shell on the node): check the cache and start the agent, or
	 * exit 97 when it must be uploaded, then upload it and try once
	 * more. */
	/* --warm...: the agent starts its warm interpreters at once. */
	transport_warm_args(n->t->spec, &warm);
	for (int i = 0; i < warm.argc; i++)
		agent_args[n_args++] = warm.argv[i];
	if (!(cmd = nodecache_start_command(priv->agent_dir, &priv->agent, NULL,
					    agent_args, (size_t)n_args))) {
		transport_report(n->fd, "agent", "%s: out of memory", n->host);
		goto out;
	}
	for (int tries = 0;; tries++) {
		char why[512];
		int got;

		n->ch = ssh_channel_new(n->s);
		if (!n->ch || ssh_channel_open_session(n->ch) != SSH_OK ||
		    ssh_channel_request_exec(n->ch, cmd) != SSH_OK) {
			transport_report(n->fd, "agent",
					 "%s: cannot start herd-agent: %s",
					 n->host, ssh_get_error(n->s));
			goto out;
		}
		/* The agent speaks first (HELLO); silence until the
		 * timeout is left to the controller to judge. */
		got = ssh_channel_read_timeout(n->ch, n->out, SSH_PUMP_CHUNK, 0,
					       NODECACHE_FIRST_BYTES_MS);
		if (got > 0) {
			n->out_len = (size_t)got;
			break;
		}
		/* Not ssh_channel_is_eof(): it stays false while stderr
		 * holds unread bytes (the reason line). */
		if (got < 0 || ssh_channel_poll(n->ch, 0) != SSH_EOF)
			break;
		status = ssh_channel_get_exit_status(n->ch);
		nodecache_reason(n->ch, why, sizeof(why));
		ssh_channel_close(n->ch);
		ssh_channel_free(n->ch);
		n->ch = NULL;
		if (status == NODECACHE_REFUSED) {
			transport_report(n->fd, "agent", "%s: %s", n->host,
					 why[0] ? why
						: "refused to start "
						  "herd-agent");
			goto out;
		}
		if (status == NODECACHE_MISSING && tries > 0) {
			transport_report(n->fd, "agent",
					 "%s: the uploaded herd-agent does not "
					 "pass its check: %s",
					 n->host, why[0] ? why : "(no reason)");
			goto out;
		}
		if (status != NODECACHE_MISSING) {
			/* 126: the shell could not exec a checked file. */
			transport_report(
			    n->fd, "agent",
			    "%s: herd-agent exited at once "
			    "(status %d)%s%s%s",
			    n->host, status, why[0] ? ": " : "", why,
			    status == 126 ? " (is ssh.agent_dir on a noexec "
					    "file system?)"
					  : "");
			goto out;
		}
		if (nodecache_upload(n->s, priv->agent_dir, &priv->agent, why,
				     sizeof(why)) < 0) {
			transport_report(n->fd, "agent", "%s: %s", n->host,
					 why);
			goto out;
		}
	}
	rc = 0;
out:
	free(cmd);
	return rc;
}

void tssh_wake_io(struct tssh_priv *priv)
{
	uint64_t one = 1;

	if (write(priv->wake, &one, sizeof(one)) < 0) {
		/* the counter is full: the I/O thread wakes anyway */
	}
}

/* A worker: takes queued nodes until there are none, then ends. */
void *tssh_worker_main(void *arg)
{
	struct tssh_priv *priv = arg;

	pthread_mutex_lock(&priv->lock);
	while (!priv->aborting && priv->queue.head) {
		struct tssh_node *n = priv->queue.head;
		int rc;

		tssh_list_remove(&priv->queue, n);
		tssh_list_push(&priv->connecting, n);
		pthread_mutex_unlock(&priv->lock);
		rc = node_connect(n);
		pthread_mutex_lock(&priv->lock);
		tssh_list_remove(&priv->connecting, n);
		n->sock = -1; /* libssh may close it from here on */
		if (rc == 0 && !priv->aborting) {
			tssh_list_push(&priv->ready, n);
			tssh_wake_io(priv);
			continue;
		}
		pthread_mutex_unlock(&priv->lock);
		tssh_node_free(n);
		pthread_mutex_lock(&priv->lock);
	}
	priv->workers--;
	pthread_cond_broadcast(&priv->cond);
	pthread_mutex_unlock(&priv->lock);
	return NULL;
}
