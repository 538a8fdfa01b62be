/* ctl/ckpt.h — the controller's memory-tier state, shared by ctl/ckpt.c
 * (inventories, transfers, frames) and ctl/ckpt_restore.c (the choice at
 * a restart, persisting, a replacement's checkpoint).  Only those two
 * include it. */
#ifndef HERD_LAUNCHER_CTL_CKPT_H
#define HERD_LAUNCHER_CTL_CKPT_H

#include "launcher/ctl/ctl_int.h"

/* What herd waits for fetches before LAUNCH; then every rank goes to
 * disk. */
#define CKPT_FETCH_WAIT_MS 60000

enum xfer_kind { XFER_REPLICA = 1, XFER_FETCH, XFER_PERSIST };

struct xfer {
	long id;
	enum xfer_kind kind;
	int src, dst;		/* node indexes (dst -1: persist) */
	int rank;
	long step;
	int64_t t0;
	void (*done)(struct ctl *c, void *arg, bool ok, const char *path,
		     int64_t ms);
	void *arg;
};

struct inv {
	char *dir;		/* the job's directory on that node */
	json_t *steps;		/* [{rank, step, bytes, peer}] */
	bool said_error, said_full;
};

enum tier { TIER_NONE, TIER_MEMORY, TIER_PEER, TIER_DISK };

struct resume {
	long step;
	enum tier tier;
	int holder;		/* node index holding it */
	char *path;		/* HERD_RESUME_FROM; NULL: the job's */
	bool waiting;
	int64_t ms;
};

struct ctl_ckpt {
	struct inv *inv;	/* [c->n_nodes] */
	struct xfer *x;
	size_t nx;
	long next_id;
	long persisted;		/* newest step persisted, -1 none */
	bool persisting;
	long persist_timer;
	/* The attempt being launched. */
	int attempt;
	struct resume *res;	/* [world_size] */
	int n_res;
	int waiting;		/* fetches before LAUNCH */
	char *command;
	long fetch_timer, launch_timer;
	bool said_fetch;
};

/* ctl/ckpt.c */
/* The state, made at the first use; NULL when out of memory. */
struct ctl_ckpt *ckpt_get(struct ctl *c);
/* A node that can take a frame. */
bool ckpt_live(const struct node *n);
/* Does live node i hold rank's step?  *peer: as a peer copy (own
 * first). */
bool ckpt_holds(struct ctl *c, int i, int rank, long step, bool *peer);
/* A live node other than `not` holding rank's step (own copy first), or
 * -1. */
int ckpt_holder_of(struct ctl *c, int rank, long step, int not, bool *peer);
struct xfer *ckpt_xfer_new(struct ctl *c, enum xfer_kind kind, int src,
			   int dst, int rank, long step);
void ckpt_xfer_drop(struct ctl *c, struct xfer *x);
/* Asks node src to send rank's step (its own, or its peer copy) to node
 * dst; NULL when it cannot be asked. */
struct xfer *ckpt_push(struct ctl *c, enum xfer_kind kind, int src,
		       bool peer, int dst, int rank, long step);

/* ctl/ckpt_restore.c */
void ckpt_free_res(struct ctl_ckpt *k);
/* The newest step above floor that every rank of the attempt holds on
 * some live node, or -1. */
long ckpt_newest_whole(struct ctl *c, long floor);
/* The step in a disk checkpoint's name (its last digits), or -1. */
long ckpt_disk_step(const char *path);

#endif
