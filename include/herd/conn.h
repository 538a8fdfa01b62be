/* conn.h — one framed connection (proto.h) on an event loop.
 *
 * Wraps a read fd and a write fd (the same fd for sockets): incoming bytes
 * are decoded into frames and handed to on_frame; outgoing frames are
 * queued and written when the fd is writable, so a slow peer never blocks
 * the loop.  On EOF, a read/write error or a malformed frame, on_close is
 * called once with a reason; the conn is then dead (further sends are
 * dropped) and the owner frees it with conn_free() — not from inside a
 * callback of that conn.  The conn closes its fds in conn_free().
 *
 * on_close is only ever called from the loop, never inside conn_send():
 * a send that finds the peer gone (EPIPE, a full queue) marks the conn
 * dead, returns -1 and posts on_close to the loop's next turn, so a
 * sender walking its nodes never sees its own state change under it.
 * conn_free() before that turn cancels the pending on_close.
 */
#ifndef HERD_CONN_H
#define HERD_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "herd/loop.h"
#include "herd/proto.h"

/* 256 MiB: a peer that stops reading must not let us queue without
 * bound; past this the conn is closed as stuck. */
#define CONN_QUEUE_MAX (256u * 1024 * 1024)

struct conn;

/* frame is owned by the callee (free it with proto_frame_free). */
typedef void (*conn_frame_fn)(struct conn *c, struct proto_frame *frame,
			      void *arg);
/* reason: "end of stream", "read: Connection reset by peer", decoder
 * text...; clean is nonzero for an orderly EOF. */
typedef void (*conn_close_fn)(struct conn *c, const char *reason, int clean,
			      void *arg);

/* Takes ownership of rfd and wfd (may be equal) and makes them
 * non-blocking.  Returns NULL on allocation failure (fds are then closed). */
struct conn *conn_new(struct loop *loop, int rfd, int wfd, size_t max_frame,
		      conn_frame_fn on_frame, conn_close_fn on_close,
		      void *arg);
void conn_free(struct conn *c);

/* Queues a frame and writes what it can.  Returns 0, or -1 when the conn
 * is dead, the frame cannot be encoded, or the write found the peer gone
 * (err filled when given; on_close follows from the loop, see above). */
int conn_send(struct conn *c, enum proto_type type, const json_t *body,
	      const void *data, size_t data_len, struct herd_err *err);

/* The same for a frame proto_encode() made already (the caller keeps
 * it): one frame sent to many peers is encoded once. */
int conn_send_encoded(struct conn *c, const char *frame, size_t len,
		      struct herd_err *err);

/* loop_now_ms() when the last bytes came in, whole frame or not (0: none
 * yet, or c NULL).  A peer in the middle of a large frame is alive: its
 * frames that follow (heartbeats) wait behind that one. */
int64_t conn_rx_ms(const struct conn *c);

/* Bytes queued but not yet written (for flushing before exit). */
size_t conn_pending(const struct conn *c);

/* Writes what is queued, waiting up to timeout_ms for a slow peer (a
 * blocking wait, for the end of a program after its loop stopped).
 * Returns 0 when everything was written, -1 when the conn is dead or the
 * time ran out. */
int conn_flush(struct conn *c, int timeout_ms);

/* Stops reading (writes continue); used while shutting down. */
void conn_pause_reading(struct conn *c);

int conn_is_dead(const struct conn *c);

#endif
