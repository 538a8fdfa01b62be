/* fuzz_proto.c — libFuzzer target for the frame decoder and the wire
 * contract, the gate both dispatchers share.
 *
 * Input: one split byte s, then stream bytes.  The stream is fed to a
 * reader (max_frame 1 MiB) in two pieces, cut after min(s, rest) bytes,
 * draining every complete frame after each feed.  Each decoded frame is
 * encoded again and decoded by a fresh reader: it must come back equal,
 * and encoding that copy must give the same bytes (the encoding is
 * canonical after one pass).  Each frame is then checked by every receiver
 * (herd, an agent, the control socket and its client: proto_frame_check): no
 * frame passes two ways, a refusal says "protocol error: ", and the re-decoded
 * copy gets the same verdict.  Any mismatch aborts.  The seed corpus holds a
 * valid frame of every type and direction (written by tests/unit/test_proto.c),
 * so the fuzzer starts inside the accepted bodies and mutates out of them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "herd/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* 1 MiB: big enough for any input libFuzzer is given by tests/fuzz/run
 * (-max_len 65536), small enough to reach the limit checks. */
#define FUZZ_MAX_FRAME (1024u * 1024)

static struct proto_frame *fuzz_decode_one(const char *buf, size_t len)
{
	struct proto_reader *r = proto_reader_new(PROTO_FRAME_MAX);
	struct proto_frame *f = NULL, *extra = NULL;
	struct herd_err err;

	if (!r)
		abort();
	if (proto_reader_feed(r, buf, len, &err) < 0 ||
	    proto_reader_next(r, &f, &err) != 1 ||
	    proto_reader_next(r, &extra, &err) != 0)
		abort();
	proto_reader_free(r);
	return f;
}

/* The verdict of the dispatch gate for one direction: 0 or -1. */
static int fuzz_gate(const struct proto_frame *f, enum proto_dir to)
{
	struct herd_err err;
	int rc;

	err.text[0] = '\0';
	rc = proto_frame_check(f, to, &err);
	if (rc != 0 && (rc != -1 || strncmp(err.text, "protocol error: ", 16)))
		abort();
	if (rc == 0 && err.text[0])
		abort();
	return rc;
}

/* Every receiver's gate (agent, herd, control socket, control client);
 * returns which directions accept the frame. */
static int fuzz_dispatch(const struct proto_frame *f)
{
	int to_herd = fuzz_gate(f, PROTO_TO_HERD) == 0;
	int to_agent = fuzz_gate(f, PROTO_TO_AGENT) == 0;
	int to_control = fuzz_gate(f, PROTO_TO_CONTROL) == 0;
	int to_client = fuzz_gate(f, PROTO_TO_CLIENT) == 0;

	/* No frame passes two ways: HEARTBEAT, the one type that travels
	 * both ways, has a different body each way, and the control
	 * socket's frames are its own. */
	if (to_herd + to_agent + to_control + to_client > 1)
		abort();
	return to_herd | to_agent << 1 | to_control << 2 | to_client << 3;
}

static void fuzz_round_trip(const struct proto_frame *f)
{
	struct proto_frame *again = NULL;
	struct herd_err err;
	char *enc = NULL, *enc2 = NULL;
	size_t len = 0, len2 = 0;

	enc = proto_encode(f->type, f->body, f->data, f->data_len, &len, &err);
	if (!enc) {
		/* Re-encoding may lengthen numbers ("1e9" becomes
		 * "1000000000.0"); only that may push it over a limit. */
		if (json_dumpb(f->body, NULL, 0, JSON_COMPACT) > PROTO_JSON_MAX)
			return;
		abort();
	}
	again = fuzz_decode_one(enc, len);
	if (again->type != f->type || !json_equal(again->body, f->body) ||
	    again->data_len != f->data_len ||
	    (f->data_len && memcmp(again->data, f->data, f->data_len) != 0))
		abort();
	/* The verdict depends on what a frame says, not on its bytes. */
	if (fuzz_dispatch(again) != fuzz_dispatch(f))
		abort();
	enc2 = proto_encode(again->type, again->body, again->data,
			    again->data_len, &len2, &err);
	if (!enc2 || len2 != len || memcmp(enc, enc2, len) != 0)
		abort();
	free(enc2);
	free(enc);
	proto_frame_free(again);
}

/* Drains every complete frame.  Returns -1 once the stream failed. */
static int fuzz_drain(struct proto_reader *r)
{
	struct proto_frame *f = NULL;
	struct herd_err err;
	int rc;

	while ((rc = proto_reader_next(r, &f, &err)) == 1) {
		if (!json_is_object(f->body) || (f->data_len == 0) != !f->data)
			abort();
		fuzz_dispatch(f);
		fuzz_round_trip(f);
		proto_frame_free(f);
	}
	if (f)
		abort();
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_reader *r;
	struct herd_err err;
	size_t cut;

	if (size < 1)
		return 0;
	cut = data[0];
	data++;
	size--;
	if (cut > size)
		cut = size;
	r = proto_reader_new(FUZZ_MAX_FRAME);
	if (!r)
		abort();
	if (proto_reader_feed(r, data, cut, &err) == 0 && fuzz_drain(r) == 0 &&
	    proto_reader_feed(r, data + cut, size - cut, &err) == 0)
		fuzz_drain(r);
	proto_reader_free(r);
	return 0;
}
