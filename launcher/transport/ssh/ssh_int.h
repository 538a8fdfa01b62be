/* ssh_int.h — what the parts of the SSH transport share
 * (transport/ssh/ssh.c: the transport and its nodes; ssh_connect.c: the
 * connect workers; ssh_io.c: the I/O thread).  Private to
 * launcher/transport/ssh/.  Which thread owns what: see ssh.c. */
#ifndef HERD_LAUNCHER_SSH_INT_H
#define HERD_LAUNCHER_SSH_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <libssh/libssh.h>

#include "herd/loop.h"
#include "launcher/transport/ssh/nodecache.h"
#include "launcher/transport/ssh/sshsess.h"
#include "launcher/transport/transport.h"

/* 32 KiB: one SSH channel packet is at most 32 KiB of payload. */
#define SSH_PUMP_CHUNK (32 * 1024)

/* After herd hangs up (or the agent's output ends), how long the I/O
 * thread goes on flushing what herd sent last before it drops the
 * session: the agent then sees its input end either way. */
#define SSH_CLOSE_FLUSH_MS 2000
/* How long free() waits for the threads to end (see tssh_free_priv()). */
#define SSH_FREE_WAIT_MS 1000
/* How long herd waits for its ssh threads to end once they are done. */
#define SSH_JOIN_WAIT_MS 10000

/* A node, owned by the queue, then by one worker, then by the I/O
 * thread, which frees it. */
struct tssh_node {
	struct transport *t;
	char *host;
	int fd; /* our end of the socketpair */
	/* The session's socket while a worker connects, else -1: written
	 * under priv->lock and cleared before libssh closes it, so that
	 * tssh_free_priv() never shuts down a number reused by another
	 * file. */
	int sock;
	ssh_session s;
	ssh_channel ch; /* the agent's exec channel */
	/* Channel -> fd: the agent's bytes the controller has not taken
	 * yet (at most SSH_PUMP_CHUNK: the channel is not read while any
	 * are left, so SSH's window holds back the rest). */
	char *out;
	size_t out_off, out_len;
	/* fd -> channel: the controller's bytes the channel has not taken
	 * yet (its window was full); fd is not read while any are left. */
	char *in;
	size_t in_off, in_len;
	/* Set when either side ended: the node is flushed for at most
	 * SSH_CLOSE_FLUSH_MS from then, and freed. */
	bool closing;
	/* Serve it after the next poll() even without events: libssh may
	 * hold its bytes already (a node just handed over). */
	bool kick;
	/* libssh holds bytes for the session's socket (its own flag,
	 * ssh_get_poll_flags(), stays set after they are sent). */
	bool wpending;
	struct timespec close_by;
	struct tssh_node *next, *prev;
};

/* A list of nodes (doubly linked, so a node leaves it in O(1)). */
struct node_list {
	struct tssh_node *head, *tail;
	int count;
};

struct tssh_priv {
	struct sshsess_cfg cfg;
	int fanout;		     /* ssh.fanout: the most workers at once */
	pthread_mutex_t lock;	     /* everything below */
	pthread_cond_t cond;	     /* a worker or the I/O thread ended */
	struct node_list queue;	     /* waiting for a worker */
	struct node_list connecting; /* on a worker now */
	struct node_list ready; /* handed to the I/O thread, not taken yet */
	int workers;		/* worker threads running */
	bool io_running;	/* the I/O thread runs */
	bool aborting;		/* tssh_free_priv() has begun */
	/* eventfd: wakes the I/O thread's own poll() (a new ready node, the
	 * end).  Not loop_wake(): that wakes a struct loop, and the I/O
	 * thread runs none (its poll() set is libssh's sessions); the
	 * controller's loop needs no wake, it reads the socketpairs. */
	int wake;
	pthread_t io_tid;
	pthread_t *tids; /* workers not joined yet */
	int n_tids, cap_tids;
	/* agent-VERSION-HASH in ssh.agent_dir, checked on the node before
	 * every exec (transport/ssh/nodecache.h) */
	struct nodecache_bin agent;
	const char *agent_dir; /* the spec's ssh.agent_dir (borrowed) */
};

/* ssh.c: l's doubly linked list of nodes (callers hold priv->lock). */
void tssh_list_push(struct node_list *l, struct tssh_node *n);
void tssh_list_remove(struct node_list *l, struct tssh_node *n);
/* ssh.c: ends a node: its channel and session, then its end of the
 * socketpair (the controller sees EOF when it did not hang up first). */
void tssh_node_free(struct tssh_node *n);
/* ssh_connect.c: wakes the I/O thread's poll() (priv->wake). */
void tssh_wake_io(struct tssh_priv *priv);
/* ssh_connect.c: a worker thread (arg: the tssh_priv): takes queued
 * nodes until there are none, then ends. */
void *tssh_worker_main(void *arg);

/* ssh_io.c: the I/O thread (arg: the tssh_priv), from the first start()
 * to free(). */
void *tssh_io_main(void *arg);

#endif
