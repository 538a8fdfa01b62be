/* proto.h — the wire between herd and herd-agent.
 *
 * The agent speaks over a byte stream: the SSH channel's stdin/stdout, a
 * pipe pair (local transport) or a TCP socket (slurm transport).  The
 * stream carries frames:
 *
 *   u32 len        bytes that follow this field, big-endian
 *   u8  version    PROTO_VERSION; any other value is an error
 *   u8  type       enum proto_type
 *   u16 reserved   zero
 *   u32 json_len   length of the JSON header that follows
 *   json_len bytes a JSON object (UTF-8), the message's fields
 *   len-8-json_len bytes of data: opaque payload (rank output bytes, PMIx
 *                  blobs); binary-safe, so output is never re-encoded
 *
 * Every frame has a stated maximum (the reader's max_frame, at most
 * PROTO_FRAME_MAX): a peer that announces more is rejected before a byte
 * is buffered.  A decoder error is fatal for the stream.
 */
#ifndef HERD_PROTO_H
#define HERD_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "herd/err.h"

#define PROTO_VERSION 1

/* 64 MiB: the largest frame is a PMIx fence reply carrying every node's
 * blob (a few KiB per node at 1,000+ nodes); output is sent in chunks of
 * at most PROTO_OUTPUT_CHUNK. */
#define PROTO_FRAME_MAX (64u * 1024 * 1024)
/* 1 MiB: JSON headers are small; this bounds what jansson parses. */
#define PROTO_JSON_MAX (1024u * 1024)
/* 64 KiB: rank output is forwarded in chunks of whole lines up to this. */
#define PROTO_OUTPUT_CHUNK (64u * 1024)
#define PROTO_HEADER_SIZE 12

enum proto_type {
	PROTO_HELLO = 1,   /* agent -> herd: version, hostname, addrs, topo */
	PROTO_LAUNCH,	   /* herd -> agent: attempt, ranks, env, command */
	PROTO_OUTPUT,	   /* agent -> herd: {rank, stream}, data = bytes */
	PROTO_EXIT,	   /* agent -> herd: {rank, status, signal} */
	PROTO_SIGNAL,	   /* herd -> agent: {signal} to every rank */
	PROTO_STOP,	   /* herd -> agent: {grace_ms} stop ranks, then exit */
	PROTO_HEARTBEAT,   /* both ways: {seq, ranks, counters} */
	PROTO_ERROR,	   /* either way: {message} before closing */
	PROTO_STOPPED,	   /* agent -> herd: every rank of the attempt is gone */
	PROTO_FENCE,	   /* agent -> herd: {attempt, seq}, data = the node's
			    * PMIx fence contribution */
	PROTO_FENCE_DONE,  /* herd -> agent: {attempt, seq, status}, data =
			    * every node's contribution, concatenated */
	PROTO_ABORT,	   /* agent -> herd: {attempt, rank, status, message}:
			    * a rank called PMIx_Abort (MPI_Abort) */
	PROTO_TYPE_MAX_ = PROTO_ABORT,
};

/* "HELLO", "LAUNCH", ...; "?" for unknown values. */
const char *proto_type_name(int type);

/* Encodes one frame.  body may be NULL (sent as {}), else must be an
 * object; it is dumped compact (JSON_COMPACT).  data may be NULL when
 * data_len is 0.  Returns a malloc'd buffer of *out_len bytes the caller
 * frees, or NULL with err (unknown type, body not an object, JSON over
 * PROTO_JSON_MAX, frame over PROTO_FRAME_MAX, a string holding NUL or
 * invalid UTF-8, which no reader would accept). */
char *proto_encode(enum proto_type type, const json_t *body, const void *data,
		   size_t data_len, size_t *out_len, struct herd_err *err);

/* One decoded frame.  The caller owns it; proto_frame_free() releases it. */
struct proto_frame {
	enum proto_type type;
	json_t *body;	/* always an object */
	unsigned char *data;	/* NULL when data_len is 0 */
	size_t data_len;
};

void proto_frame_free(struct proto_frame *frame);

/* Incremental decoder for one stream. */
struct proto_reader;

/* max_frame: the largest len accepted (clamped to [8, PROTO_FRAME_MAX]).
 * The reader never buffers more than max_frame + PROTO_HEADER_SIZE bytes.
 * Returns NULL (errno ENOMEM) when out of memory; free with
 * proto_reader_free() (NULL is accepted). */
struct proto_reader *proto_reader_new(size_t max_frame);
void proto_reader_free(struct proto_reader *r);

/* Appends bytes read from the stream.  Returns 0, or -1 with err when
 * buffering them would exceed one frame plus a header (the peer is
 * misbehaving) or when the pending frame's header is already malformed
 * (its length over max_frame, a wrong version, type or reserved bytes):
 * a bad length is refused before its body is buffered.  Callers read at
 * most max_frame + PROTO_HEADER_SIZE bytes and drain proto_reader_next()
 * until it returns 0 before the next feed. */
int proto_reader_feed(struct proto_reader *r, const void *buf, size_t len,
		      struct herd_err *err);

/* Takes the next complete frame out of the buffer.  Returns 1 and fills
 * *frame (caller owns it), 0 when more bytes are needed (*frame NULL), -1
 * with err on a malformed or oversized frame: the stream is then unusable
 * and every later feed or next repeats the error.  Rejected: len < 8 or
 * over max_frame, version != PROTO_VERSION, type 0 or over PROTO_TYPE_MAX_,
 * reserved != 0, json_len over len - 8 or PROTO_JSON_MAX, JSON that is not
 * one object of valid UTF-8 (duplicate keys and escaped NULs are refused). */
int proto_reader_next(struct proto_reader *r, struct proto_frame **frame,
		      struct herd_err *err);

#endif
