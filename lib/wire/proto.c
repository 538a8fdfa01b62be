/* proto.c — the frame codec of include/herd/proto.h: encoding, and the
 * reader that cuts a byte stream into frames.  What a frame's body must
 * say is the wire contract, proto_rules.c, applied by proto_check.c.
 *
 * The reader keeps one buffer: bytes before `off` are consumed frames,
 * bytes in [off, end) are pending.  Taking a frame only advances `off`, so
 * many small frames in one large feed cost O(total); pending bytes are
 * moved to the front only when a feed does not fit behind them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_int.h"

/* Bytes of a frame after its len field: version, type, reserved, json_len. */
#define PROTO_FIXED_SIZE (PROTO_HEADER_SIZE - 4)
/* 4 KiB: the first allocation; enough for a HELLO or a few heartbeats. */
#define PROTO_READER_MIN_CAP 4096u
/* 256 KiB: an emptied buffer larger than this is freed, so one big frame
 * (a fence reply) does not pin its memory for the life of the stream. */
#define PROTO_READER_KEEP_CAP (256u * 1024)

struct proto_reader {
	/* largest len accepted, in [PROTO_FIXED_SIZE, PROTO_FRAME_MAX] */
	size_t max_frame;
	/* most pending bytes: max_frame + PROTO_HEADER_SIZE */
	size_t limit;
	/* [0, off) consumed, [off, end) pending, [end, cap) free; cap is at
	 * most limit */
	unsigned char *buf;
	size_t cap;
	size_t off;
	size_t end;
	/* a decoder error happened: the stream is unusable, and every later
	 * call repeats the words kept in failure */
	int failed;
	struct herd_err failure;
};

static uint32_t proto_get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void proto_put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* A compact dump escapes a NUL inside a string as backslash-u0000, which
 * the reader refuses (no JSON_ALLOW_NUL).  Backslashes appear only inside
 * strings and start two-character escapes, so scanning escape by escape is
 * exact.  Returns 1 when the dump holds an escaped NUL. */
static int proto_json_has_nul(const char *json, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (json[i] != '\\')
			continue;
		if (i + 6 <= len && json[i + 1] == 'u' &&
		    memcmp(json + i + 2, "0000", 4) == 0)
			return 1;
		i++; /* skip the escaped character */
	}
	return 0;
}

char *proto_encode(enum proto_type type, const json_t *body, const void *data,
		   size_t data_len, size_t *out_len, struct herd_err *err)
{
	const size_t flags = JSON_COMPACT;
	unsigned char *frame = NULL;
	char *ret = NULL;
	size_t json_len, len;

	if ((int)type < PROTO_HELLO || (int)type > PROTO_TYPE_MAX_) {
		herd_errprintf(err, "cannot encode unknown frame type %d",
			       (int)type);
		goto out;
	}
	if (body && !json_is_object(body)) {
		herd_errprintf(err,
			       "cannot encode a %s frame: its body is %s, "
			       "expected an object",
			       proto_type_name(type), proto_json_kind(body));
		goto out;
	}
	if (!data && data_len > 0) {
		herd_errprintf(err,
			       "cannot encode a %s frame: %zu data bytes "
			       "given without a buffer",
			       proto_type_name(type), data_len);
		goto out;
	}
	json_len = body ? json_dumpb(body, NULL, 0, flags) : 2;
	if (json_len == 0) {
		herd_errprintf(err,
			       "cannot encode a %s frame: its body is not "
			       "encodable JSON (invalid UTF-8 or a "
			       "reference cycle)",
			       proto_type_name(type));
		goto out;
	}
	if (json_len > PROTO_JSON_MAX) {
		herd_errprintf(err,
			       "cannot encode a %s frame: its JSON header "
			       "of %zu bytes exceeds the limit of %u",
			       proto_type_name(type), json_len, PROTO_JSON_MAX);
		goto out;
	}
	if (data_len > PROTO_FRAME_MAX - PROTO_FIXED_SIZE - json_len) {
		herd_errprintf(err,
			       "cannot encode a %s frame: %zu data bytes "
			       "and %zu JSON bytes exceed the frame limit "
			       "of %u",
			       proto_type_name(type), data_len, json_len,
			       PROTO_FRAME_MAX);
		goto out;
	}
	len = PROTO_FIXED_SIZE + json_len + data_len;
	frame = malloc(4 + len);
	if (!frame) {
		herd_errprintf(err, "cannot encode a %s frame of %zu bytes: %s",
			       proto_type_name(type), len, strerror(errno));
		goto out;
	}
	if (!body)
		memcpy(frame + PROTO_HEADER_SIZE, "{}", 2);
	else if (json_dumpb(body, (char *)frame + PROTO_HEADER_SIZE, json_len,
			    flags) != json_len) {
		herd_errprintf(err,
			       "cannot encode a %s frame: its body changed "
			       "size while being encoded",
			       proto_type_name(type));
		goto out;
	}
	if (proto_json_has_nul((char *)frame + PROTO_HEADER_SIZE, json_len)) {
		herd_errprintf(err,
			       "cannot encode a %s frame: a string in its "
			       "body holds a NUL character",
			       proto_type_name(type));
		goto out;
	}
	proto_put_be32(frame, (uint32_t)len);
	frame[4] = PROTO_VERSION;
	frame[5] = (unsigned char)type;
	frame[6] = 0;
	frame[7] = 0;
	proto_put_be32(frame + 8, (uint32_t)json_len);
	if (data_len > 0)
		memcpy(frame + PROTO_HEADER_SIZE + json_len, data, data_len);
	*out_len = 4 + len;
	ret = (char *)frame;
	frame = NULL;
out:
	free(frame);
	return ret;
}

void proto_frame_free(struct proto_frame *frame)
{
	if (!frame)
		return;
	json_decref(frame->body);
	free(frame->data);
	free(frame);
}

struct proto_reader *proto_reader_new(size_t max_frame)
{
	struct proto_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	if (max_frame > PROTO_FRAME_MAX)
		max_frame = PROTO_FRAME_MAX;
	if (max_frame < PROTO_FIXED_SIZE)
		max_frame = PROTO_FIXED_SIZE;
	r->max_frame = max_frame;
	r->limit = max_frame + PROTO_HEADER_SIZE;
	return r;
}

void proto_reader_free(struct proto_reader *r)
{
	if (!r)
		return;
	free(r->buf);
	free(r);
}

/* Marks the stream failed; later calls repeat the same words. */
static int proto_reader_fail(struct proto_reader *r, struct herd_err *err,
			     const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int proto_reader_fail(struct proto_reader *r, struct herd_err *err,
			     const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	herd_verrprintf(&r->failure, fmt, ap);
	va_end(ap);
	r->failed = 1;
	return herd_errprintf(err, "%s", r->failure.text);
}

/* Checks the fixed header of the pending frame as far as it has arrived,
 * so that a bad length is refused before its body is buffered.  Returns 0
 * (valid so far) or -1 with err. */
static int proto_reader_check_header(struct proto_reader *r,
				     struct herd_err *err)
{
	size_t pending = r->end - r->off;
	const unsigned char *p;
	uint32_t len, json_len;

	if (pending < 4)
		return 0;
	p = r->buf + r->off;
	len = proto_get_be32(p);
	if (len < PROTO_FIXED_SIZE)
		return proto_reader_fail(r, err,
					 "frame of %u bytes is shorter "
					 "than its %d-byte header",
					 len, PROTO_FIXED_SIZE);
	if (len > r->max_frame)
		return proto_reader_fail(r, err,
					 "frame of %u bytes exceeds "
					 "the limit of %zu",
					 len, r->max_frame);
	if (pending >= 5 && p[4] != PROTO_VERSION)
		return proto_reader_fail(r, err,
					 "frame of protocol version "
					 "%u, expected %d",
					 (unsigned)p[4], PROTO_VERSION);
	if (pending >= 6 && (p[5] < PROTO_HELLO || p[5] > PROTO_TYPE_MAX_))
		return proto_reader_fail(r, err, "frame of unknown type %u",
					 (unsigned)p[5]);
	if (pending >= 8 && (p[6] != 0 || p[7] != 0))
		return proto_reader_fail(r, err,
					 "%s frame has reserved bytes "
					 "0x%02x%02x, expected zero",
					 proto_type_name(p[5]), (unsigned)p[6],
					 (unsigned)p[7]);
	if (pending < PROTO_HEADER_SIZE)
		return 0;
	json_len = proto_get_be32(p + 8);
	if (json_len > len - PROTO_FIXED_SIZE)
		return proto_reader_fail(r, err,
					 "%s frame's JSON header of %u "
					 "bytes exceeds the %u bytes "
					 "left in the frame",
					 proto_type_name(p[5]), json_len,
					 len - PROTO_FIXED_SIZE);
	if (json_len > PROTO_JSON_MAX)
		return proto_reader_fail(r, err,
					 "%s frame's JSON header of %u "
					 "bytes exceeds the limit of "
					 "%u",
					 proto_type_name(p[5]), json_len,
					 PROTO_JSON_MAX);
	return 0;
}

/* Makes room for n more pending bytes: moves pending bytes to the front
 * when the tail is short, then grows geometrically up to r->limit.  The
 * caller has checked that pending + n <= r->limit. */
static int proto_reader_reserve(struct proto_reader *r, size_t n,
				struct herd_err *err)
{
	size_t pending = r->end - r->off;
	size_t need = pending + n;
	size_t cap;
	unsigned char *buf;

	if (r->cap - r->end >= n)
		return 0;
	if (r->off > 0) {
		memmove(r->buf, r->buf + r->off, pending);
		r->off = 0;
		r->end = pending;
		if (r->cap - r->end >= n)
			return 0;
	}
	cap = r->cap < PROTO_READER_MIN_CAP ? PROTO_READER_MIN_CAP : r->cap;
	while (cap < need && cap <= r->limit / 2)
		cap *= 2;
	if (cap < need || cap > r->limit)
		cap = r->limit;
	buf = realloc(r->buf, cap);
	if (!buf)
		return herd_errprintf(err,
				      "cannot buffer a frame of %zu bytes: "
				      "%s",
				      need, strerror(errno));
	r->buf = buf;
	r->cap = cap;
	return 0;
}

int proto_reader_feed(struct proto_reader *r, const void *buf, size_t len,
		      struct herd_err *err)
{
	size_t pending;

	if (r->failed)
		return herd_errprintf(err, "%s", r->failure.text);
	if (len == 0)
		return 0;
	pending = r->end - r->off;
	if (len > r->limit - pending) {
		/* Name the frame when its announced length is the cause. */
		if (proto_reader_check_header(r, err) < 0)
			return -1;
		return proto_reader_fail(r, err,
					 "peer sent %zu bytes beyond "
					 "%zu pending; a reader holds "
					 "at most %zu (one frame and "
					 "a header)",
					 len, pending, r->limit);
	}
	if (proto_reader_reserve(r, len, err) < 0)
		return -1;
	memcpy(r->buf + r->end, buf, len);
	r->end += len;
	return proto_reader_check_header(r, err);
}

/* Drops consumed bytes; frees a large emptied buffer. */
static void proto_reader_consume(struct proto_reader *r, size_t n)
{
	r->off += n;
	if (r->off < r->end)
		return;
	r->off = 0;
	r->end = 0;
	if (r->cap > PROTO_READER_KEEP_CAP) {
		free(r->buf);
		r->buf = NULL;
		r->cap = 0;
	}
}

int proto_reader_next(struct proto_reader *r, struct proto_frame **frame,
		      struct herd_err *err)
{
	struct proto_frame *f = NULL;
	const unsigned char *p;
	json_error_t jerr;
	uint32_t len, json_len;
	size_t data_len;
	int ret = -1;

	*frame = NULL;
	if (r->failed)
		return herd_errprintf(err, "%s", r->failure.text);
	if (proto_reader_check_header(r, err) < 0)
		goto out;
	if (r->end - r->off < PROTO_HEADER_SIZE) {
		ret = 0;
		goto out;
	}
	p = r->buf + r->off;
	len = proto_get_be32(p);
	if (r->end - r->off - 4 < len) {
		ret = 0;
		goto out;
	}
	json_len = proto_get_be32(p + 8);
	data_len = len - PROTO_FIXED_SIZE - json_len;
	f = calloc(1, sizeof(*f));
	if (!f) {
		herd_errprintf(err, "cannot decode a frame: %s",
			       strerror(errno));
		goto out;
	}
	f->type = (enum proto_type)p[5];
	/* No JSON_DECODE_ANY (only objects and arrays), no JSON_ALLOW_NUL
	 * (a NUL in a string would truncate it for C callers), no
	 * JSON_DISABLE_EOF_CHECK (trailing bytes are an error).  jansson
	 * validates UTF-8 and bounds nesting depth. */
	f->body = json_loadb((const char *)p + PROTO_HEADER_SIZE, json_len,
			     JSON_REJECT_DUPLICATES, &jerr);
	if (!f->body) {
		proto_reader_fail(r, err,
				  "%s frame's JSON header is invalid "
				  "at byte %d: %s",
				  proto_type_name(f->type), jerr.position,
				  jerr.text);
		goto out;
	}
	if (!json_is_object(f->body)) {
		proto_reader_fail(r, err,
				  "%s frame's JSON header is %s, "
				  "expected an object",
				  proto_type_name(f->type),
				  proto_json_kind(f->body));
		goto out;
	}
	if (data_len > 0) {
		f->data = malloc(data_len);
		if (!f->data) {
			herd_errprintf(err, "cannot decode %zu data bytes: %s",
				       data_len, strerror(errno));
			goto out;
		}
		memcpy(f->data, p + PROTO_HEADER_SIZE + json_len, data_len);
		f->data_len = data_len;
	}
	proto_reader_consume(r, 4 + (size_t)len);
	*frame = f;
	f = NULL;
	ret = 1;
out:
	proto_frame_free(f);
	return ret;
}
