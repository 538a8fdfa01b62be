/* ckpt/ckpt_mem.h — the memory tier's private parts, shared by ckpt/mem.c
 * (the tier: checked directories, the inventory, the end) and
 * ckpt/copy.c (copies between nodes, persisting to checkpoint.dir).
 * Not a public header: only those two include it. */
#ifndef HERD_AGENT_CKPT_MEM_H
#define HERD_AGENT_CKPT_MEM_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "agent/agent.h"

/* How often the tier is looked at: a step is noticed within this. */
#define CKPT_SCAN_MS 200
/* A copy that sends nothing for this long is dropped (its source died). */
#define CKPT_XFER_IDLE_MS 30000
/* Copies arriving at once; sends are one at a time, in order. */
#define CKPT_XFERS_MAX 64
/* The chunks a copy is sent in, and what may wait in herd's connection
 * before the next chunk is read: the agent's other frames (heartbeats,
 * a rank's start, output) queue behind at most that much.  1 MiB, under
 * PROTO_CKPT_CHUNK (what a receiver takes); with 4 MiB chunks and 16 MiB
 * waiting, a slow link (3.5 MB/s, ASan and a loaded machine) held the
 * heartbeats for seconds. */
#define CKPT_SEND_CHUNK  (1024u * 1024)
#define CKPT_SEND_WINDOW (2 * CKPT_SEND_CHUNK)
/* Files of one step directory, and nesting when removing one. */
#define CKPT_FILES_MAX 4096
/* Files of a step a copy holds open (opened when the copy is asked for;
 * copies of a rank to a node are at most two at once, see
 * ckpt_mem_on_push). */
#define CKPT_OPEN_MAX 64
#define CKPT_RM_DEPTH  8

struct ckpt_in {
	long id;
	int rank;
	long step;
	int64_t total, got;
	int fd;			/* the file being written, -1 none */
	char file[PROTO_CKPT_NAME_MAX + 1];
	char tmp[64];		/* in peer/rank-R */
	int64_t last_ms;
	bool refused;		/* said no: later chunks are dropped */
};

struct ckpt_out {
	long id;
	int rank, node;
	long step;
	bool peer;
	char **files;		/* COMPLETE last */
	int64_t *sizes;
	size_t n, cur;
	int dfd, fd;		/* the step directory, the file being read */
	int *fds;		/* every file, opened when the copy was asked
				 * for: a step pruned meanwhile (a newer one
				 * came) is still sent whole */
	int64_t total, sent, foff;
	struct ckpt_out *next;
};

struct ckpt_mem {
	bool conf;
	char base[1024];	/* memory_dir */
	char job[PROTO_CKPT_NAME_MAX + 1];
	char jobdir[1400];	/* "" when the tier cannot be used */
	int64_t max;
	bool keep;
	bool said_error, said_full, said_refused;
	char error[512];
	bool full;
	int64_t used;		/* bytes in the job's directory, last scan */
	json_t *last;		/* the steps last sent */
	long timer;
	struct ckpt_in in[CKPT_XFERS_MAX];
	struct ckpt_out *out, *out_tail;
	long pump_timer;
};

/* ckpt/mem.c */
/* Opens (making it 0700 when make) directory name in dfd, checked on the
 * descriptor: a directory of this user that nobody else may use.
 * Returns the fd, or -1 with why. */
int ckpt_open_private(int dfd, const char *name, bool make, char *why,
		      size_t size);
/* Removes name in dfd and what is under it, never following a link. */
void ckpt_rm_tree_at(int dfd, const char *name, int depth);
/* The job's directory, checked level by level; -1 when the tier cannot
 * be used (said once). */
int ckpt_open_job(struct agent *a);
/* Looks at the tier; CKPT_INV when it changed (or force). */
void ckpt_scan(struct agent *a, bool force);

/* ckpt/copy.c */
/* Drops arriving copies silent since CKPT_XFER_IDLE_MS (their source is
 * gone), removing what they wrote. */
void ckpt_copy_idle(struct agent *a, int64_t now);
/* Drops every copy in flight, both ways. */
void ckpt_copy_fini(struct agent *a);

#endif
