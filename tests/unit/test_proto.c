/* test_proto.c — the frame codec: round trips, partial and batched feeds,
 * every rejection, the max_frame boundary.
 *
 * With HERD_PROTO_SEEDS=DIR set, the test also writes the fuzz seed corpus
 * (tests/fuzz/corpus/proto) into DIR: each seed is a split byte followed by
 * frames, the input format of tests/fuzz/fuzz_proto.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "herd/proto.h"
#include "herd/version.h"

/* Builds a raw frame header: for the rejection cases the encoder refuses
 * to produce. */
static void put_header(unsigned char *p, uint32_t len, unsigned version,
		       unsigned type, unsigned reserved, uint32_t json_len)
{
	p[0] = (unsigned char)(len >> 24);
	p[1] = (unsigned char)(len >> 16);
	p[2] = (unsigned char)(len >> 8);
	p[3] = (unsigned char)len;
	p[4] = (unsigned char)version;
	p[5] = (unsigned char)type;
	p[6] = (unsigned char)(reserved >> 8);
	p[7] = (unsigned char)reserved;
	p[8] = (unsigned char)(json_len >> 24);
	p[9] = (unsigned char)(json_len >> 16);
	p[10] = (unsigned char)(json_len >> 8);
	p[11] = (unsigned char)json_len;
}

/* A raw frame around the given JSON text and data; returns its size.  buf
 * holds at least PROTO_HEADER_SIZE + strlen(json) + data_len bytes. */
static size_t raw_frame(unsigned char *buf, unsigned type, const char *json,
			const char *data, size_t data_len)
{
	size_t json_len = strlen(json);

	put_header(buf, (uint32_t)(8 + json_len + data_len), PROTO_VERSION,
		   type, 0, (uint32_t)json_len);
	memcpy(buf + PROTO_HEADER_SIZE, json, json_len);
	if (data_len)
		memcpy(buf + PROTO_HEADER_SIZE + json_len, data, data_len);
	return PROTO_HEADER_SIZE + json_len + data_len;
}

/* Feeds buf in one piece and expects the reader to refuse it, either at
 * feed or at next, with an error text containing want. */
static void expect_reject(size_t max_frame, const void *buf, size_t len,
			  const char *want)
{
	struct proto_reader *r = proto_reader_new(max_frame);
	struct proto_frame *f = NULL;
	struct herd_err err;
	int rc;

	assert_non_null(r);
	herd_err_clear(&err);
	rc = proto_reader_feed(r, buf, len, &err);
	if (rc == 0)
		rc = proto_reader_next(r, &f, &err);
	assert_int_equal(rc, -1);
	assert_null(f);
	if (!strstr(err.text, want))
		fail_msg("error \"%s\" lacks \"%s\"", err.text, want);
	/* The stream stays failed, with the same words. */
	herd_err_clear(&err);
	assert_int_equal(proto_reader_next(r, &f, &err), -1);
	assert_non_null(strstr(err.text, want));
	herd_err_clear(&err);
	assert_int_equal(proto_reader_feed(r, "x", 1, &err), -1);
	assert_non_null(strstr(err.text, want));
	proto_reader_free(r);
}

static void test_type_names(void **state)
{
	(void)state;
	assert_string_equal(proto_type_name(PROTO_HELLO), "HELLO");
	assert_string_equal(proto_type_name(PROTO_STOPPED), "STOPPED");
	assert_string_equal(proto_type_name(PROTO_HEARTBEAT), "HEARTBEAT");
	assert_string_equal(proto_type_name(0), "?");
	assert_string_equal(proto_type_name(PROTO_TYPE_MAX_ + 1), "?");
	assert_string_equal(proto_type_name(-1), "?");
}

static void test_round_trip_each_type(void **state)
{
	static const char data[] = "line one\nline\0two\n";
	struct herd_err err;
	int type, with_data, with_body;

	(void)state;
	for (type = PROTO_HELLO; type <= PROTO_TYPE_MAX_; type++) {
		for (with_data = 0; with_data < 2; with_data++) {
			for (with_body = 0; with_body < 2; with_body++) {
				json_t *body =
				    with_body ? json_pack("{s:i, s:s, s:[i,f]}",
							  "rank", type, "host",
							  "n\xc3\xa9ud01", "v",
							  -7, 0.5)
					      : NULL;
				size_t dlen = with_data ? sizeof(data) : 0;
				struct proto_reader *r;
				struct proto_frame *f = NULL;
				size_t len = 0;
				char *buf;

				buf = proto_encode((enum proto_type)type, body,
						   with_data ? data : NULL,
						   dlen, &len, &err);
				assert_non_null(buf);
				assert_true(len >= PROTO_HEADER_SIZE + 2);
				r = proto_reader_new(PROTO_FRAME_MAX);
				assert_non_null(r);
				assert_int_equal(
				    proto_reader_feed(r, buf, len, &err), 0);
				assert_int_equal(proto_reader_next(r, &f, &err),
						 1);
				assert_int_equal(f->type, type);
				assert_true(json_is_object(f->body));
				if (body)
					assert_true(json_equal(f->body, body));
				else
					assert_int_equal(
					    json_object_size(f->body), 0);
				assert_int_equal(f->data_len, dlen);
				if (with_data)
					assert_memory_equal(f->data, data,
							    dlen);
				else
					assert_null(f->data);
				proto_frame_free(f);
				assert_int_equal(proto_reader_next(r, &f, &err),
						 0);
				assert_null(f);
				proto_reader_free(r);
				free(buf);
				json_decref(body);
			}
		}
	}
}

static void test_wire_layout(void **state)
{
	static const unsigned char want[] = {
	    0,	 0,   0,   20,	PROTO_VERSION, PROTO_EXIT, 0,	0,
	    0,	 0,   0,   10,	'{',	       '"',	   'r', 'a',
	    'n', 'k', '"', ':', '3',	       '}',	   'a', 'b'};
	json_t *body = json_pack("{s:i}", "rank", 3);
	struct herd_err err;
	size_t len = 0;
	char *buf;

	(void)state;
	buf = proto_encode(PROTO_EXIT, body, "ab", 2, &len, &err);
	assert_non_null(buf);
	assert_int_equal(len, sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));
	free(buf);
	json_decref(body);
}

/* Several frames, fed one byte at a time: no frame appears early. */
static void test_byte_at_a_time(void **state)
{
	unsigned char stream[4096];
	size_t total = 0, i;
	struct proto_reader *r = proto_reader_new(1024);
	struct proto_frame *f = NULL;
	struct herd_err err;
	int got = 0, n;

	(void)state;
	assert_non_null(r);
	for (n = 0; n < 5; n++) {
		json_t *body = json_pack("{s:i}", "seq", n);
		size_t len = 0;
		char *buf = proto_encode(PROTO_HEARTBEAT, body, "xyz",
					 (size_t)n % 4, &len, &err);

		assert_non_null(buf);
		assert_true(total + len <= sizeof(stream));
		memcpy(stream + total, buf, len);
		total += len;
		free(buf);
		json_decref(body);
	}
	for (i = 0; i < total; i++) {
		int rc;

		assert_int_equal(proto_reader_feed(r, stream + i, 1, &err), 0);
		while ((rc = proto_reader_next(r, &f, &err)) == 1) {
			json_t *seq = json_object_get(f->body, "seq");

			assert_int_equal(json_integer_value(seq), got);
			assert_int_equal(f->data_len, (size_t)got % 4);
			got++;
			proto_frame_free(f);
		}
		assert_int_equal(rc, 0);
	}
	assert_int_equal(got, 5);
	proto_reader_free(r);
}

/* 20,000 small frames in one feed, drained in order. */
static void test_many_frames_in_one_feed(void **state)
{
	enum { COUNT = 20000 };
	struct proto_reader *r = proto_reader_new(PROTO_FRAME_MAX);
	struct proto_frame *f = NULL;
	unsigned char *stream = malloc(COUNT * 32);
	struct herd_err err;
	size_t total = 0;
	int i, rc;

	(void)state;
	assert_non_null(r);
	assert_non_null(stream);
	for (i = 0; i < COUNT; i++) {
		char json[32];

		snprintf(json, sizeof(json), "{\"i\":%d}", i);
		total += raw_frame(stream + total, PROTO_OUTPUT, json,
				   i % 2 ? "d" : NULL, (size_t)(i % 2));
	}
	assert_int_equal(proto_reader_feed(r, stream, total, &err), 0);
	for (i = 0; (rc = proto_reader_next(r, &f, &err)) == 1; i++) {
		assert_int_equal(
		    json_integer_value(json_object_get(f->body, "i")), i);
		assert_int_equal(f->data_len, (size_t)(i % 2));
		proto_frame_free(f);
	}
	assert_int_equal(rc, 0);
	assert_int_equal(i, COUNT);
	/* The emptied reader takes new frames. */
	total = raw_frame(stream, PROTO_STOP, "{}", NULL, 0);
	assert_int_equal(proto_reader_feed(r, stream, total, &err), 0);
	assert_int_equal(proto_reader_next(r, &f, &err), 1);
	assert_int_equal(f->type, PROTO_STOP);
	proto_frame_free(f);
	proto_reader_free(r);
	free(stream);
}

/* A frame split across feeds at every point, with the next frame's head
 * arriving in the same feed as the first's tail. */
static void test_split_everywhere(void **state)
{
	unsigned char stream[256];
	size_t one =
	    raw_frame(stream, PROTO_LAUNCH, "{\"a\":[1,2]}", "DATA", 4);
	size_t total = one + raw_frame(stream + one, PROTO_SIGNAL,
				       "{\"signal\":15}", NULL, 0);
	struct herd_err err;
	size_t cut;

	(void)state;
	for (cut = 0; cut <= total; cut++) {
		struct proto_reader *r = proto_reader_new(64);
		struct proto_frame *f = NULL;
		int got = 0, rc;

		assert_non_null(r);
		assert_int_equal(proto_reader_feed(r, stream, cut, &err), 0);
		while ((rc = proto_reader_next(r, &f, &err)) == 1) {
			got++;
			proto_frame_free(f);
		}
		assert_int_equal(rc, 0);
		assert_int_equal(got, cut >= total ? 2 : cut >= one ? 1 : 0);
		assert_int_equal(
		    proto_reader_feed(r, stream + cut, total - cut, &err), 0);
		while ((rc = proto_reader_next(r, &f, &err)) == 1) {
			got++;
			if (got == 1) {
				assert_int_equal(f->type, PROTO_LAUNCH);
				assert_int_equal(f->data_len, 4);
				assert_memory_equal(f->data, "DATA", 4);
			} else {
				assert_int_equal(f->type, PROTO_SIGNAL);
				assert_null(f->data);
			}
			proto_frame_free(f);
		}
		assert_int_equal(rc, 0);
		assert_int_equal(got, 2);
		proto_reader_free(r);
	}
}

/* len == max_frame is accepted; max_frame + 1 is refused from its length
 * field alone. */
static void test_max_frame_boundary(void **state)
{
	enum { MAX = 4096 };
	unsigned char *buf = calloc(1, PROTO_HEADER_SIZE + MAX + 1);
	struct proto_reader *r = proto_reader_new(MAX);
	struct proto_frame *f = NULL;
	struct herd_err err;
	size_t len;

	(void)state;
	assert_non_null(buf);
	assert_non_null(r);
	raw_frame(buf, PROTO_OUTPUT, "{}", NULL, 0);
	put_header(buf, MAX, PROTO_VERSION, PROTO_OUTPUT, 0, 2);
	len = 4 + MAX;
	assert_int_equal(proto_reader_feed(r, buf, len, &err), 0);
	assert_int_equal(proto_reader_next(r, &f, &err), 1);
	assert_int_equal(f->data_len, MAX - 8 - 2);
	proto_frame_free(f);
	proto_reader_free(r);

	/* One over: refused as soon as the length field is in. */
	put_header(buf, MAX + 1, PROTO_VERSION, PROTO_OUTPUT, 0, 2);
	expect_reject(MAX, buf, 4,
		      "frame of 4097 bytes exceeds the limit of 4096");
	free(buf);

	/* The encoder's own limit. */
	{
		json_t *body = json_object();
		size_t out_len = 0;
		char *enc;

		enc = proto_encode(PROTO_OUTPUT, body, "x",
				   PROTO_FRAME_MAX - 8 - 2 + 1, &out_len, &err);
		assert_null(enc);
		assert_non_null(strstr(err.text, "exceed the frame limit"));
		json_decref(body);
	}
}

static void test_reject_header(void **state)
{
	unsigned char buf[64];

	(void)state;
	put_header(buf, 123456789, PROTO_VERSION, PROTO_HELLO, 0, 2);
	expect_reject(1048576, buf, PROTO_HEADER_SIZE,
		      "frame of 123456789 bytes exceeds the limit of 1048576");
	put_header(buf, 7, PROTO_VERSION, PROTO_HELLO, 0, 0);
	expect_reject(1024, buf, 4, "frame of 7 bytes is shorter than");
	put_header(buf, 0, PROTO_VERSION, PROTO_HELLO, 0, 0);
	expect_reject(1024, buf, 4, "frame of 0 bytes is shorter than");
	put_header(buf, 10, 2, PROTO_HELLO, 0, 2);
	expect_reject(1024, buf, 5, "protocol version 2, expected 1");
	put_header(buf, 10, 0, PROTO_HELLO, 0, 2);
	expect_reject(1024, buf, PROTO_HEADER_SIZE, "protocol version 0");
	put_header(buf, 10, PROTO_VERSION, 0, 0, 2);
	expect_reject(1024, buf, 6, "unknown type 0");
	put_header(buf, 10, PROTO_VERSION, PROTO_TYPE_MAX_ + 1, 0, 2);
	{
		char want[32];

		snprintf(want, sizeof(want), "unknown type %d",
			 PROTO_TYPE_MAX_ + 1);
		expect_reject(1024, buf, 6, want);
	}
	put_header(buf, 10, PROTO_VERSION, 255, 0, 2);
	expect_reject(1024, buf, 6, "unknown type 255");
	put_header(buf, 10, PROTO_VERSION, PROTO_EXIT, 0x0100, 2);
	expect_reject(1024, buf, 8, "EXIT frame has reserved bytes 0x0100");
	put_header(buf, 10, PROTO_VERSION, PROTO_EXIT, 1, 2);
	expect_reject(1024, buf, 8, "reserved bytes 0x0001, expected zero");
	put_header(buf, 10, PROTO_VERSION, PROTO_EXIT, 0, 3);
	expect_reject(1024, buf, PROTO_HEADER_SIZE,
		      "JSON header of 3 bytes exceeds the 2 bytes left");
	put_header(buf, 8, PROTO_VERSION, PROTO_EXIT, 0, 0xffffffffu);
	expect_reject(1024, buf, PROTO_HEADER_SIZE,
		      "JSON header of 4294967295 bytes exceeds the 0 bytes");
	put_header(buf, PROTO_JSON_MAX + 9, PROTO_VERSION, PROTO_LAUNCH, 0,
		   PROTO_JSON_MAX + 1);
	expect_reject(PROTO_FRAME_MAX, buf, PROTO_HEADER_SIZE,
		      "JSON header of 1048577 bytes exceeds the limit of "
		      "1048576");
}

static void test_reject_json(void **state)
{
	static const struct {
		const char *json;
		const char *want;
	} cases[] = {
	    {"", "JSON header is invalid"},
	    {"[1,2]", "JSON header is an array, expected an object"},
	    {"\"s\"", "JSON header is invalid"},
	    {"42", "JSON header is invalid"},
	    {"null", "JSON header is invalid"},
	    {"{\"a\":1", "JSON header is invalid"},
	    {"{\"a\":1} x", "JSON header is invalid"},
	    {"{\"a\":1}{}", "JSON header is invalid"},
	    {"{\"a\":1,\"a\":2}", "duplicate object key"},
	    {"{\"a\":\"x\\u0000y\"}", "JSON header is invalid"},
	    {"{\"a\":\"\xc3\x28\"}", "JSON header is invalid"},
	    {"{\"a\":\"\xff\"}", "JSON header is invalid"},
	    {"{\"a\":\"\xed\xa0\x80\"}", "JSON header is invalid"},
	    {"{'a':1}", "JSON header is invalid"},
	};
	unsigned char buf[128];
	size_t i, len;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		len = raw_frame(buf, PROTO_HELLO, cases[i].json, "zz", 2);
		expect_reject(1024, buf, len, cases[i].want);
	}
	/* A valid frame ahead of a bad one is still delivered. */
	{
		struct proto_reader *r = proto_reader_new(1024);
		struct proto_frame *f = NULL;
		struct herd_err err;

		assert_non_null(r);
		len = raw_frame(buf, PROTO_HELLO, "{}", NULL, 0);
		len += raw_frame(buf + len, PROTO_HELLO, "[]", NULL, 0);
		assert_int_equal(proto_reader_feed(r, buf, len, &err), 0);
		assert_int_equal(proto_reader_next(r, &f, &err), 1);
		proto_frame_free(f);
		assert_int_equal(proto_reader_next(r, &f, &err), -1);
		assert_null(f);
		assert_non_null(strstr(err.text, "HELLO frame's JSON header "
						 "is an array"));
		proto_reader_free(r);
	}
}

/* Feeding more than one frame plus a header without draining is refused,
 * and a reader never buffers beyond that. */
static void test_feed_overflow(void **state)
{
	unsigned char buf[200];
	struct proto_reader *r;
	struct proto_frame *f = NULL;
	struct herd_err err;
	size_t len;

	(void)state;
	memset(buf, 0, sizeof(buf));
	len = raw_frame(buf, PROTO_OUTPUT, "{}", NULL, 0);
	/* max_frame 50 holds at most 62 bytes. */
	r = proto_reader_new(50);
	assert_non_null(r);
	assert_int_equal(proto_reader_feed(r, buf, 62, &err), 0);
	assert_int_equal(proto_reader_next(r, &f, &err), 1);
	proto_frame_free(f);
	proto_reader_free(r);

	r = proto_reader_new(50);
	assert_non_null(r);
	assert_int_equal(proto_reader_feed(r, buf, 63, &err), -1);
	assert_non_null(strstr(err.text, "a reader holds at most 62"));
	proto_reader_free(r);

	/* In two feeds: pending bytes count. */
	r = proto_reader_new(50);
	assert_non_null(r);
	assert_int_equal(proto_reader_feed(r, buf, len, &err), 0);
	assert_int_equal(proto_reader_feed(r, buf, 62 - len, &err), 0);
	assert_int_equal(proto_reader_feed(r, buf, 1, &err), -1);
	proto_reader_free(r);

	/* max_frame is clamped: 0 means the smallest frame, 8 bytes, which
	 * cannot hold a JSON object. */
	put_header(buf, 9, PROTO_VERSION, PROTO_OUTPUT, 0, 1);
	expect_reject(0, buf, 4, "frame of 9 bytes exceeds the limit of 8");
	put_header(buf, 8, PROTO_VERSION, PROTO_OUTPUT, 0, 0);
	expect_reject(0, buf, PROTO_HEADER_SIZE, "JSON header is invalid");
}

/* A big frame, then small ones: the reader shrinks and keeps working. */
static void test_large_then_small(void **state)
{
	size_t big_len = 3 * 1024 * 1024, len = 0, off, chunk = 65536;
	unsigned char *big = malloc(big_len);
	struct proto_reader *r = proto_reader_new(PROTO_FRAME_MAX);
	struct proto_frame *f = NULL;
	json_t *body = json_pack("{s:s}", "kind", "fence");
	struct herd_err err;
	char *buf;
	size_t i;
	int rc;

	(void)state;
	assert_non_null(big);
	assert_non_null(r);
	for (i = 0; i < big_len; i++)
		big[i] = (unsigned char)(i * 7);
	buf = proto_encode(PROTO_OUTPUT, body, big, big_len, &len, &err);
	assert_non_null(buf);
	for (off = 0; off < len; off += chunk) {
		size_t n = len - off < chunk ? len - off : chunk;

		assert_int_equal(proto_reader_feed(r, buf + off, n, &err), 0);
		rc = proto_reader_next(r, &f, &err);
		assert_int_equal(rc, off + n == len ? 1 : 0);
	}
	assert_non_null(f);
	assert_int_equal(f->data_len, big_len);
	assert_memory_equal(f->data, big, big_len);
	assert_true(json_equal(f->body, body));
	proto_frame_free(f);
	free(buf);

	buf = proto_encode(PROTO_EXIT, NULL, NULL, 0, &len, &err);
	assert_non_null(buf);
	assert_int_equal(proto_reader_feed(r, buf, len, &err), 0);
	assert_int_equal(proto_reader_next(r, &f, &err), 1);
	assert_int_equal(f->type, PROTO_EXIT);
	proto_frame_free(f);
	free(buf);
	proto_reader_free(r);
	json_decref(body);
	free(big);
}

static void test_encode_refuses(void **state)
{
	json_t *arr = json_array();
	json_t *str = json_string("x");
	json_t *nul = json_pack("{s:s%}", "a", "x\0y", (size_t)3);
	json_t *nul_key = json_object();
	json_t *backslash = json_pack("{s:s}", "a", "\\u0000");
	json_t *huge = json_object();
	char *big = malloc(PROTO_JSON_MAX);
	struct herd_err err;
	size_t len = 0;
	char *buf;

	(void)state;
	assert_non_null(big);
	assert_non_null(nul);
	herd_err_clear(&err);
	assert_null(proto_encode(PROTO_HELLO, arr, NULL, 0, &len, &err));
	assert_non_null(strstr(err.text, "body is an array, expected an "
					 "object"));
	assert_null(proto_encode(PROTO_HELLO, str, NULL, 0, &len, &err));
	assert_non_null(strstr(err.text, "body is a string"));
	assert_null(proto_encode(0, NULL, NULL, 0, &len, &err));
	assert_non_null(strstr(err.text, "unknown frame type 0"));
	assert_null(
	    proto_encode(PROTO_TYPE_MAX_ + 1, NULL, NULL, 0, &len, &err));
	assert_null(proto_encode(PROTO_OUTPUT, NULL, NULL, 5, &len, &err));
	assert_non_null(strstr(err.text, "without a buffer"));
	assert_null(proto_encode(PROTO_HELLO, nul, NULL, 0, &len, &err));
	assert_non_null(strstr(err.text, "NUL character"));
	json_object_set_new(nul_key, "k", json_stringn("a\0", 2));
	assert_null(proto_encode(PROTO_HELLO, nul_key, NULL, 0, &len, &err));

	/* A literal backslash-u0000 text is not a NUL and round-trips. */
	buf = proto_encode(PROTO_HELLO, backslash, NULL, 0, &len, &err);
	assert_non_null(buf);
	{
		struct proto_reader *r = proto_reader_new(1024);
		struct proto_frame *f = NULL;

		assert_non_null(r);
		assert_int_equal(proto_reader_feed(r, buf, len, &err), 0);
		assert_int_equal(proto_reader_next(r, &f, &err), 1);
		assert_true(json_equal(f->body, backslash));
		proto_frame_free(f);
		proto_reader_free(r);
	}
	free(buf);

	/* JSON over PROTO_JSON_MAX. */
	memset(big, 'a', PROTO_JSON_MAX - 1);
	big[PROTO_JSON_MAX - 1] = '\0';
	json_object_set_new(huge, "x", json_string(big));
	assert_null(proto_encode(PROTO_LAUNCH, huge, NULL, 0, &len, &err));
	assert_non_null(strstr(err.text, "JSON header of 1048583 bytes "
					 "exceeds the limit of 1048576"));

	free(big);
	json_decref(huge);
	json_decref(backslash);
	json_decref(nul_key);
	json_decref(nul);
	json_decref(str);
	json_decref(arr);
}

/* --- the wire contract (proto_frame_check) ------------------------------ */

/* One valid body of every frame type and direction: what the senders put
 * on the wire today (agent/main.c, agent/rank.c, agent/health.c,
 * agent/pmix/server.c, launcher/ctl/ctl.c, launcher/ctl/launch.c,
 * launcher/transport/transport.c).  Also written as fuzz seeds. */
struct valid_frame {
	const char *name;	/* seed file name */
	int type;
	enum proto_dir to;
	const char *json;
	size_t data_len;
};

static const struct valid_frame valid_frames[] = {
    {"hello", PROTO_HELLO, PROTO_TO_HERD,
     "{\"version\":\"" HERD_VERSION "\",\"hostname\":\"node01\","
     "\"addrs\":[{\"ifname\":\"eth0\",\"addr\":\"10.0.0.1\","
     "\"netmask\":\"255.255.255.0\"}],\"cores\":8,\"pid\":4242,"
     "\"topo\":{\"pus\":\"0-7\",\"cores\":[\"0\",\"1\"],\"gpus\":[]}}",
     0},
    {"hello-notopo", PROTO_HELLO, PROTO_TO_HERD,
     "{\"version\":\"" HERD_VERSION "\",\"hostname\":\"node01\","
     "\"addrs\":[],\"cores\":1,\"pid\":1,"
     "\"topo_error\":\"cannot read topology\"}",
     0},
    {"launch", PROTO_LAUNCH, PROTO_TO_AGENT,
     "{\"attempt\":1,\"command\":\"python train.py\",\"grace_ms\":10000,"
     "\"env\":{\"MASTER_ADDR\":\"10.0.0.1\",\"WORLD_SIZE\":\"2\"},"
     "\"ranks\":[{\"rank\":0,\"env\":{\"RANK\":\"0\"}},"
     "{\"rank\":1,\"env\":{\"RANK\":\"1\"},\"cpus\":\"2-3\","
     "\"mem_node\":0}],\"metrics_interval_ms\":1000,"
     "\"patterns\":[{\"name\":\"loss\",\"regex\":"
     "\"loss[=: ]+([0-9.eE+-]+)\"}]}",
     0},
    {"launch-pmix", PROTO_LAUNCH, PROTO_TO_AGENT,
     "{\"attempt\":2,\"command\":\"./allreduce\",\"grace_ms\":0,"
     "\"env\":{},\"ranks\":[{\"rank\":4,\"env\":{}}],"
     "\"workdir\":\"/scratch/job\",\"progress_timeout_ms\":60000,"
     "\"pmix\":{\"job\":\"allreduce\",\"nodes\":\"n1,n2\","
     "\"ppn\":\"0-3;4\",\"job_size\":5,\"num_nodes\":2,\"node_id\":1,"
     "\"hostname\":\"n2\",\"local\":[4]},\"metrics_interval_ms\":100}",
     0},
    {"output", PROTO_OUTPUT, PROTO_TO_HERD,
     "{\"rank\":3,\"fd\":1,\"attempt\":1}", 16},
    {"output-stderr", PROTO_OUTPUT, PROTO_TO_HERD,
     "{\"rank\":0,\"fd\":2,\"attempt\":7}", PROTO_OUTPUT_CHUNK},
    {"exit", PROTO_EXIT, PROTO_TO_HERD,
     "{\"rank\":3,\"code\":0,\"signal\":null,\"attempt\":1}", 0},
    {"exit-signal", PROTO_EXIT, PROTO_TO_HERD,
     "{\"rank\":3,\"code\":null,\"signal\":9,\"attempt\":1,"
     "\"pmix_connected\":true}",
     0},
    {"exit-error", PROTO_EXIT, PROTO_TO_HERD,
     "{\"rank\":0,\"code\":127,\"signal\":null,\"attempt\":1,"
     "\"error\":\"exec: No such file or directory\",\"errno\":2}",
     0},
    {"signal", PROTO_SIGNAL, PROTO_TO_AGENT, "{\"signal\":10}", 0},
    {"signal-ranks", PROTO_SIGNAL, PROTO_TO_AGENT,
     "{\"signal\":10,\"ranks\":[2,3]}", 0},
    {"signal-jctrl", PROTO_SIGNAL, PROTO_TO_HERD,
     "{\"attempt\":1,\"signal\":15,\"ranks\":[5]}", 0},
    {"stop", PROTO_STOP, PROTO_TO_AGENT,
     "{\"grace_ms\":10000,\"exit\":true,\"signal\":15}", 0},
    {"heartbeat-herd", PROTO_HEARTBEAT, PROTO_TO_AGENT,
     "{\"interval_ms\":1000,\"timeout_ms\":3000}", 0},
    {"heartbeat-agent", PROTO_HEARTBEAT, PROTO_TO_HERD,
     "{\"seq\":12,\"attempt\":1,\"hung\":[{"
     "\"rank\":0,\"silent_ms\":61000}]}",
     0},
    {"heartbeat-idle", PROTO_HEARTBEAT, PROTO_TO_HERD,
     "{\"seq\":1,\"attempt\":0,\"hung\":[]}", 0},
    {"error", PROTO_ERROR, PROTO_TO_HERD,
     "{\"message\":\"ranks of attempt 1 still run\"}", 0},
    {"error-stage", PROTO_ERROR, PROTO_TO_HERD,
     "{\"stage\":\"host key\",\"message\":\"n1: host key changed\"}", 0},
    {"stopped", PROTO_STOPPED, PROTO_TO_HERD, "{\"attempt\":0}", 0},
    {"fence", PROTO_FENCE, PROTO_TO_HERD, "{\"attempt\":1,\"seq\":1}", 40},
    {"fence-empty", PROTO_FENCE, PROTO_TO_HERD, "{\"attempt\":1,\"seq\":2}",
     0},
    {"fence-done", PROTO_FENCE_DONE, PROTO_TO_AGENT,
     "{\"attempt\":1,\"seq\":1,\"status\":0}", 80},
    {"fence-subset", PROTO_FENCE, PROTO_TO_HERD,
     "{\"attempt\":1,\"seq\":3,\"procs\":\"0-3,6,9-12\",\"count\":2}",
     40},
    {"fence-all", PROTO_FENCE, PROTO_TO_HERD,
     "{\"attempt\":1,\"seq\":4,\"procs\":\"*\",\"count\":4}", 0},
    {"dmodex-agent", PROTO_DMODEX, PROTO_TO_HERD,
     "{\"attempt\":1,\"seq\":7,\"rank\":5}", 0},
    {"dmodex-herd", PROTO_DMODEX, PROTO_TO_AGENT,
     "{\"attempt\":1,\"seq\":7,\"rank\":5,\"from\":0}", 0},
    {"dmodex-data-agent", PROTO_DMODEX_DATA, PROTO_TO_HERD,
     "{\"attempt\":1,\"seq\":7,\"rank\":5,\"from\":0,\"status\":0}",
     120},
    {"dmodex-data-agent-err", PROTO_DMODEX_DATA, PROTO_TO_HERD,
     "{\"attempt\":1,\"seq\":7,\"rank\":5,\"from\":0,\"status\":-46}",
     0},
    {"dmodex-data-herd", PROTO_DMODEX_DATA, PROTO_TO_AGENT,
     "{\"attempt\":1,\"seq\":7,\"rank\":5,\"status\":2}", 0},
    {"dmodex-agent-ns", PROTO_DMODEX, PROTO_TO_HERD,
     "{\"attempt\":1,\"seq\":8,\"rank\":1,\"ns\":2}", 0},
    {"dmodex-herd-ns", PROTO_DMODEX, PROTO_TO_AGENT,
     "{\"attempt\":1,\"seq\":8,\"rank\":1,\"from\":0,\"ns\":2}", 0},
    {"dmodex-data-agent-ns", PROTO_DMODEX_DATA, PROTO_TO_HERD,
     "{\"attempt\":1,\"seq\":8,\"rank\":1,\"from\":0,\"status\":0,"
     "\"ns\":2}",
     60},
    {"dmodex-data-herd-ns", PROTO_DMODEX_DATA, PROTO_TO_AGENT,
     "{\"attempt\":1,\"seq\":8,\"rank\":1,\"status\":0,\"ns\":2}", 60},
    {"abort", PROTO_ABORT, PROTO_TO_HERD,
     "{\"attempt\":1,\"rank\":2,\"status\":3,\"message\":\"bad input\"}", 0},
    {"metrics", PROTO_METRICS, PROTO_TO_HERD,
     "{\"t\":1764550000000,\"attempt\":1,\"load1\":3.5,\"cpus\":16,"
     "\"ranks\":[{\"rank\":0,\"cpu_ms\":1200,\"rss_kb\":204800}],"
     "\"net\":[{\"dev\":\"eth0\",\"rx_bytes\":1,\"tx_bytes\":2,"
     "\"rx_packets\":3,\"tx_packets\":4,\"rx_drops\":0,\"tx_drops\":0,"
     "\"rx_errors\":0,\"tx_errors\":0}],"
     "\"rdma\":[{\"dev\":\"mlx5_0\",\"port\":1,\"rx_bytes\":400,"
     "\"tx_bytes\":800,\"link_downed\":0,\"symbol_error\":0,"
     "\"rcv_errors\":0}],"
     "\"gpus\":[{\"index\":0,\"util_pct\":91,\"mem_used\":1024,"
     "\"mem_total\":2048,\"temp_c\":61,\"power_mw\":300500,"
     "\"sm_mhz\":1980,\"ecc_corrected\":0,\"ecc_uncorrected\":0,"
     "\"throttle\":4,\"xid\":79},{\"index\":1}],"
     "\"train\":[{\"rank\":0,\"records\":12,\"values\":{\"step\":12,"
     "\"loss\":1.93,\"tokens\":786432}}]}",
     0},
    {"metrics-touches", PROTO_METRICS, PROTO_TO_HERD,
     "{\"t\":5,\"attempt\":1,\"load1\":0,\"cpus\":1,\"ranks\":["
     "{\"rank\":0,\"cpu_ms\":1,\"rss_kb\":2,\"touches\":0},"
     "{\"rank\":1,\"cpu_ms\":1,\"rss_kb\":2,\"touches\":9007199254}],"
     "\"net\":[],\"rdma\":[],\"gpus\":[],\"train\":[{\"rank\":0,"
     "\"records\":3,\"values\":{\"step\":3,\"step_time\":0.25}}]}",
     0},
    {"metrics-nogpu", PROTO_METRICS, PROTO_TO_HERD,
     "{\"t\":0,\"attempt\":0,\"load1\":0,\"cpus\":1,\"ranks\":[],"
     "\"net\":[],\"rdma\":[],\"gpus\":[],\"gpu_error\":\"no NVML\","
     "\"train\":[]}",
     0},
    {"stacks-herd", PROTO_STACKS, PROTO_TO_AGENT, "{\"attempt\":1}", 0},
    {"stacks-agent", PROTO_STACKS, PROTO_TO_HERD,
     "{\"attempt\":1,\"ranks\":[{\"rank\":2,\"method\":\"python\","
     "\"frame\":\"stuck_in_data_loader (train.py:41)\","
     "\"in_collective\":false,\"last_sign_ms\":1764550000000},"
     "{\"rank\":3,\"method\":\"gdb\",\"in_collective\":true,"
     "\"last_sign_ms\":0,\"error\":\"gdb gave no stack within 8 s\"},"
     "{\"rank\":4,\"method\":\"none\",\"in_collective\":false,"
     "\"last_sign_ms\":1,\"error\":\"no gdb on this node\"}]}",
     0},
    {"stacks-none", PROTO_STACKS, PROTO_TO_HERD,
     "{\"attempt\":0,\"ranks\":[]}", 0},
    {"ctl-attach", PROTO_CTL_REQ, PROTO_TO_CONTROL, "{\"op\":\"attach\"}", 0},
    {"ctl-stop", PROTO_CTL_REQ, PROTO_TO_CONTROL, "{\"op\":\"stop\"}", 0},
    {"ctl-info", PROTO_CTL_REQ, PROTO_TO_CONTROL, "{\"op\":\"info\"}", 0},
    {"ctl-out", PROTO_CTL_MSG, PROTO_TO_CLIENT, "{\"kind\":\"out\"}", 20},
    {"ctl-err-missed", PROTO_CTL_MSG, PROTO_TO_CLIENT,
     "{\"kind\":\"err\",\"missed\":1048576}", 70},
    {"ctl-status", PROTO_CTL_MSG, PROTO_TO_CLIENT, "{\"kind\":\"status\"}",
     60},
    {"ctl-info-reply", PROTO_CTL_MSG, PROTO_TO_CLIENT,
     "{\"kind\":\"info\",\"id\":\"20261201-053100.123-4f2a\","
     "\"name\":\"ddp\",\"state\":\"run\",\"attempt\":1,\"nodes\":4,"
     "\"pid\":4242,\"message\":\"stopping all ranks\"}",
     0},
    {"ctl-end", PROTO_CTL_MSG, PROTO_TO_CLIENT,
     "{\"kind\":\"end\",\"status\":143}", 0},
    {"check", PROTO_CHECK, PROTO_TO_AGENT,
     "{\"workdir\":\"/scratch/job\",\"checkpoint_dir\":\"/ckpt\","
     "\"min_free\":1073741824,\"gpus\":8,\"master_addr\":\"10.0.0.1\","
     "\"check_command\":\"test -e /dev/shm\",\"check_timeout_ms\":60000,"
     "\"t_ms\":1764550000000}",
     0},
    {"check-min", PROTO_CHECK, PROTO_TO_AGENT,
     "{\"min_free\":0,\"gpus\":-1,\"check_timeout_ms\":1,\"t_ms\":0}", 0},
    {"check-answer", PROTO_CHECK, PROTO_TO_HERD,
     "{\"t_ms\":1764550000012,\"held_ms\":3,\"checks\":[{\"name\":\"workdir\","
     "\"status\":\"ok\",\"value\":\"12 GiB free\"},{\"name\":\"gpus\","
     "\"status\":\"fail\",\"reason\":\"GPU 3: 2 uncorrectable ECC "
     "errors\"},{\"name\":\"rdma\",\"status\":\"ok\",\"port\":"
     "\"mlx5_0/1\",\"rate\":100},{\"name\":\"script\",\"status\":"
     "\"skipped\"}]}",
     0},
    {"netprobe-listen", PROTO_NETPROBE, PROTO_TO_AGENT,
     "{\"round\":1,\"op\":\"listen\",\"addr\":\"10.0.0.1\","
     "\"bytes\":4194304,\"timeout_ms\":2000}",
     0},
    {"netprobe-listen-peer", PROTO_NETPROBE, PROTO_TO_AGENT,
     "{\"round\":1,\"op\":\"listen\",\"addr\":\"10.0.0.1\","
     "\"bytes\":4194304,\"timeout_ms\":2000,\"peer\":\"10.0.0.2\"}",
     0},
    {"netprobe-connect", PROTO_NETPROBE, PROTO_TO_AGENT,
     "{\"round\":2,\"op\":\"connect\",\"addr\":\"10.0.0.1\","
     "\"port\":40000,\"bytes\":4194304,\"timeout_ms\":2000}",
     0},
    {"netprobe-listening", PROTO_NETPROBE, PROTO_TO_HERD,
     "{\"round\":1,\"op\":\"listening\",\"port\":40000}", 0},
    {"netprobe-result", PROTO_NETPROBE, PROTO_TO_HERD,
     "{\"round\":1,\"op\":\"result\",\"rx_bytes\":4194304,"
     "\"rx_us\":12}",
     0},
    {"netprobe-error", PROTO_NETPROBE, PROTO_TO_HERD,
     "{\"round\":1,\"op\":\"result\",\"error\":\"connect: refused\"}",
     0},
    {"spawn", PROTO_SPAWN, PROTO_TO_HERD,
     "{\"attempt\":1,\"seq\":1,\"ns\":0,\"rank\":0,\"apps\":[{"
     "\"cmd\":\"./child\",\"argv\":[\"./child\",\"-x\"],"
     "\"env\":[\"A=1\"],\"np\":2,\"hosts\":[\"n1\"]}]}",
     0},
    {"spawn-launch", PROTO_SPAWN_LAUNCH, PROTO_TO_AGENT,
     "{\"attempt\":1,\"spawn\":1,\"parent_ns\":0,\"parent_rank\":0,"
     "\"size\":2,\"nodes\":\"n1,n2\",\"ppn\":\"0;1\",\"num_nodes\":2,"
     "\"node_id\":0,\"hostname\":\"n1\",\"apps\":[{\"cmd\":\"./c\","
     "\"argv\":[],\"env\":[],\"cwd\":\"/tmp\",\"np\":2}],"
     "\"local\":[{\"rank\":0,\"id\":8,\"app\":0,\"cpus\":\"0-1\"}]}",
     0},
    {"spawn-up", PROTO_SPAWN_UP, PROTO_TO_HERD,
     "{\"attempt\":1,\"spawn\":1}", 0},
    {"spawn-up-error", PROTO_SPAWN_UP, PROTO_TO_HERD,
     "{\"attempt\":1,\"spawn\":1,\"error\":\"no memory\"}", 0},
    {"spawn-done", PROTO_SPAWN_DONE, PROTO_TO_AGENT,
     "{\"attempt\":1,\"seq\":1,\"status\":0,\"spawn\":1}", 0},
    {"spawn-done-error", PROTO_SPAWN_DONE, PROTO_TO_AGENT,
     "{\"attempt\":1,\"seq\":1,\"status\":-27,\"error\":\"no\"}", 0},
    {"connect", PROTO_CONNECT, PROTO_TO_HERD,
     "{\"attempt\":1,\"seq\":1,\"op\":\"connect\",\"procs\":["
     "{\"ns\":0,\"rank\":-1},{\"ns\":1,\"rank\":0}]}",
     0},
    {"rank-ctl", PROTO_RANK_CTL, PROTO_TO_HERD,
     "{\"attempt\":1,\"rank\":0,\"conn\":1,\"msg\":{\"op\":\"hello\"}}", 0},
    {"rank-ctl-to", PROTO_RANK_CTL, PROTO_TO_AGENT,
     "{\"attempt\":1,\"rank\":0,\"to\":0,\"msg\":{\"op\":\"membership\"}}",
     0},
    {"connect-done", PROTO_CONNECT_DONE, PROTO_TO_AGENT,
     "{\"attempt\":1,\"seq\":1,\"status\":0}", 0},
    {"connect-fence", PROTO_CONNECT, PROTO_TO_HERD,
     "{\"attempt\":1,\"seq\":2,\"op\":\"fence\",\"procs\":["
     "{\"ns\":1,\"rank\":-1}]}",
     40},
    {"connect-done-data", PROTO_CONNECT_DONE, PROTO_TO_AGENT,
     "{\"attempt\":1,\"seq\":2,\"status\":0}", 80},
    /* checkpoints in memory */
    {"ckpt-conf", PROTO_CKPT_CONF, PROTO_TO_AGENT,
     "{\"dir\":\"/dev/shm\",\"job\":\"j-20260101-n0\",\"max\":0,"
     "\"keep\":false}",
     0},
    {"ckpt-inv", PROTO_CKPT_INV, PROTO_TO_HERD,
     "{\"dir\":\"/dev/shm/herd-mem-0/j\",\"steps\":[{\"rank\":0,"
     "\"step\":10,\"bytes\":2000,\"peer\":false}],\"full\":true}",
     0},
    {"ckpt-inv-error", PROTO_CKPT_INV, PROTO_TO_HERD,
     "{\"dir\":\"\",\"steps\":[],\"error\":\"squatted\"}", 0},
    {"ckpt-push", PROTO_CKPT_PUSH, PROTO_TO_AGENT,
     "{\"id\":1,\"rank\":0,\"step\":10,\"peer\":false,\"node\":2}", 0},
    {"ckpt-data", PROTO_CKPT_DATA, PROTO_TO_HERD,
     "{\"id\":1,\"to\":2,\"rank\":0,\"step\":10,\"file\":\"state.pt\","
     "\"offset\":0,\"total\":100,\"last\":false}",
     64},
    {"ckpt-data-relayed", PROTO_CKPT_DATA, PROTO_TO_AGENT,
     "{\"id\":1,\"from\":0,\"rank\":0,\"step\":10,\"file\":\"COMPLETE\","
     "\"offset\":100,\"total\":100,\"last\":true}",
     0},
    {"ckpt-ack", PROTO_CKPT_ACK, PROTO_TO_HERD,
     "{\"id\":1,\"ok\":true,\"bytes\":100,\"path\":\"/dev/shm/x\"}", 0},
    {"ckpt-ack-error", PROTO_CKPT_ACK, PROTO_TO_HERD,
     "{\"id\":1,\"ok\":false,\"error\":\"memory_max\"}", 0},
    {"ckpt-persist", PROTO_CKPT_PERSIST, PROTO_TO_AGENT,
     "{\"id\":2,\"rank\":0,\"step\":10,\"peer\":true,\"dir\":\"/ck\"}",
     0},
    /* warm interpreters */
    {"started", PROTO_STARTED, PROTO_TO_HERD,
     "{\"attempt\":1,\"rank\":3,\"warm\":true}", 0},
    {"publish", PROTO_PUBLISH, PROTO_TO_HERD,
     "{\"attempt\":1,\"id\":1,\"rank\":3,\"nspace\":\"herd.j.1\","
     "\"range\":\"session\",\"persist\":\"first_read\",\"keys\":["
     "{\"key\":\"ompi-port\",\"size\":20},{\"key\":\"b\",\"size\":4}]}",
     24},
    {"lookup", PROTO_LOOKUP, PROTO_TO_HERD,
     "{\"attempt\":1,\"id\":2,\"rank\":0,\"nspace\":\"herd.j.1\","
     "\"range\":\"namespace\",\"keys\":[{\"key\":\"ompi-port\"}],"
     "\"wait\":0,\"timeout_ms\":10000}",
     0},
    {"unpublish-all", PROTO_UNPUBLISH, PROTO_TO_HERD,
     "{\"attempt\":1,\"id\":3,\"rank\":3,\"nspace\":\"herd.j.1\","
     "\"range\":\"session\",\"keys\":[]}",
     0},
    {"pubsub-done", PROTO_PUBSUB_DONE, PROTO_TO_AGENT,
     "{\"attempt\":1,\"id\":2,\"status\":\"ok\",\"found\":[{\"key\":"
     "\"ompi-port\",\"nspace\":\"herd.j.1\",\"rank\":3,\"size\":20}]}",
     20},
    {"pubsub-duplicate", PROTO_PUBSUB_DONE, PROTO_TO_AGENT,
     "{\"attempt\":1,\"id\":1,\"status\":\"duplicate\"}", 0},
    {"event-agent", PROTO_EVENT, PROTO_TO_HERD,
     "{\"attempt\":1,\"code\":-20001,\"rank\":2,\"nspace\":\"herd.j.1\","
     "\"range\":\"custom\",\"procs\":[0,5]}",
     40},
    {"event-herd", PROTO_EVENT, PROTO_TO_AGENT,
     "{\"attempt\":1,\"code\":-20001,\"rank\":2,\"nspace\":\"herd.j.1\","
     "\"range\":\"namespace\"}",
     40},
    {"proc-failed", PROTO_PROC_FAILED, PROTO_TO_AGENT,
     "{\"attempt\":1,\"kind\":\"node\",\"status\":1,\"host\":\"n2\","
     "\"ranks\":[2,3]}",
     0},
    {"pmix-log", PROTO_PMIX_LOG, PROTO_TO_HERD,
     "{\"attempt\":1,\"rank\":3,\"entries\":[{\"key\":\"pmix.log.msg\","
     "\"value\":\"checkpoint 7 written\"}]}",
     0},
};

#define N_VALID (sizeof(valid_frames) / sizeof(valid_frames[0]))

/* A decoded frame as a reader would return it. */
static struct proto_frame *make_frame(int type, json_t *body, size_t data_len)
{
	struct proto_frame *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_non_null(body);
	f->type = (enum proto_type)type;
	f->body = body;
	if (data_len) {
		f->data = malloc(data_len);
		assert_non_null(f->data);
		memset(f->data, 'x', data_len);
		f->data_len = data_len;
	}
	return f;
}

static json_t *valid_body(const struct valid_frame *v)
{
	json_error_t jerr;
	json_t *body = json_loads(v->json, JSON_REJECT_DUPLICATES, &jerr);

	if (!body)
		fail_msg("%s: %s", v->name, jerr.text);
	return body;
}

static enum proto_dir other_way(enum proto_dir to)
{
	switch (to) {
	case PROTO_TO_HERD:
		return PROTO_TO_AGENT;
	case PROTO_TO_AGENT:
		return PROTO_TO_HERD;
	case PROTO_TO_CONTROL:
		return PROTO_TO_CLIENT;
	case PROTO_TO_CLIENT:
	default:
		return PROTO_TO_CONTROL;
	}
}

/* Checks a frame of this type, body (taken) and data, and expects it
 * refused with a text that contains want (NULL: accepted). */
static void expect_frame(int type, enum proto_dir to, json_t *body,
			 size_t data_len, const char *want)
{
	struct proto_frame *f = make_frame(type, body, data_len);
	struct herd_err err;
	int rc;

	herd_err_clear(&err);
	rc = proto_frame_check(f, to, &err);
	if (!want && rc != 0)
		fail_msg("%s frame refused: %s", proto_type_name(type),
			 err.text);
	if (want && rc != -1)
		fail_msg("%s frame %s accepted, wanted \"%s\"",
			 proto_type_name(type),
			 json_dumps(f->body, JSON_COMPACT), want);
	if (want && (strncmp(err.text, "protocol error: ", 16) ||
		     !strstr(err.text, want)))
		fail_msg("error \"%s\" lacks \"%s\"", err.text, want);
	proto_frame_free(f);
}

static void test_check_valid(void **state)
{
	int seen[PROTO_TYPE_MAX_ + 1][PROTO_TO_CLIENT + 1] = {{0}};

	(void)state;
	for (size_t i = 0; i < N_VALID; i++) {
		const struct valid_frame *v = &valid_frames[i];

		expect_frame(v->type, v->to, valid_body(v), v->data_len, NULL);
		seen[v->type][v->to] = 1;
	}
	/* Every type is covered, HEARTBEAT both ways. */
	for (int t = PROTO_HELLO; t <= PROTO_TYPE_MAX_; t++)
		if (!seen[t][PROTO_TO_HERD] && !seen[t][PROTO_TO_AGENT] &&
		    !seen[t][PROTO_TO_CONTROL] && !seen[t][PROTO_TO_CLIENT])
			fail_msg("no valid %s frame", proto_type_name(t));
	assert_true(seen[PROTO_HEARTBEAT][PROTO_TO_HERD]);
	assert_true(seen[PROTO_HEARTBEAT][PROTO_TO_AGENT]);
	assert_true(seen[PROTO_STACKS][PROTO_TO_HERD]);
	assert_true(seen[PROTO_STACKS][PROTO_TO_AGENT]);
}

/* Every frame refused the other way: by its direction, or (HEARTBEAT,
 * CHECK, NETPROBE, DMODEX and DMODEX_DATA, whose bodies differ) by its
 * body. */
static void test_check_direction(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_VALID; i++) {
		const struct valid_frame *v = &valid_frames[i];
		const char *want =
		    v->to == PROTO_TO_HERD
			? " frame from herd: only an agent sends "
		    : v->to == PROTO_TO_AGENT
			? " frame from agent: only herd sends "
		    : v->to == PROTO_TO_CONTROL
			? " frame from herd: only a control client sends "
			: " frame from client: only herd sends ";

		expect_frame(v->type, other_way(v->to), valid_body(v),
			     v->data_len,
			     v->type == PROTO_HEARTBEAT ? "HEARTBEAT frame"
			     : v->type == PROTO_STACKS	? "STACKS frame"
			     : v->type == PROTO_CHECK	 ? "CHECK frame"
			     : v->type == PROTO_NETPROBE ? "NETPROBE frame"
			     : v->type == PROTO_DMODEX	 ? "DMODEX frame"
			     : v->type == PROTO_DMODEX_DATA
				 ? "DMODEX_DATA frame"
			     : v->type == PROTO_EVENT	 ? "EVENT frame"
			     : v->type == PROTO_RANK_CTL ? "RANK_CTL frame"
			     : v->type == PROTO_SIGNAL	 ? "SIGNAL frame"
			     : v->type == PROTO_CKPT_DATA ? "CKPT_DATA frame"
							 : want);
	}
	expect_frame(PROTO_LAUNCH, PROTO_TO_HERD, json_object(), 0,
		     "protocol error: LAUNCH frame from agent: only herd "
		     "sends LAUNCH");
	expect_frame(PROTO_OUTPUT, PROTO_TO_AGENT, json_object(), 1,
		     "protocol error: OUTPUT frame from herd: only an agent "
		     "sends OUTPUT");
	expect_frame(PROTO_HEARTBEAT, PROTO_TO_AGENT,
		     json_pack("{s:i, s:i, s:[]}", "seq", 1, "attempt", 0,
			       "hung"),
		     0, "HEARTBEAT frame from herd: missing key \"interval_ms\"");
	/* Types the reader would never return. */
	expect_frame(0, PROTO_TO_HERD, json_object(), 0,
		     "frame of unknown type 0 from agent");
	expect_frame(PROTO_TYPE_MAX_ + 1, PROTO_TO_AGENT, json_object(), 0,
		     "unknown type");
}

/* Each key taken away: an optional one may go; a required one is named. */
/* The control socket's frames (issue 13): never on an agent's stream,
 * each kind with its own keys, data only where a line travels. */
static void test_check_control(void **state)
{
	(void)state;
	expect_frame(PROTO_CTL_REQ, PROTO_TO_HERD,
		     json_pack("{s:s}", "op", "stop"), 0,
		     "CTL_REQ frame from agent: only a control client sends");
	expect_frame(PROTO_CTL_MSG, PROTO_TO_AGENT,
		     json_pack("{s:s}", "kind", "out"), 1,
		     "CTL_MSG frame from herd: only herd sends");
	expect_frame(PROTO_OUTPUT, PROTO_TO_CLIENT,
		     json_pack("{s:i, s:i, s:i}", "rank", 0, "fd", 1,
			       "attempt", 1),
		     1, "OUTPUT frame from herd: only an agent sends");
	expect_frame(PROTO_STOP, PROTO_TO_CONTROL,
		     json_pack("{s:i, s:b, s:i}", "grace_ms", 0, "exit", 1,
			       "signal", 15),
		     0, "STOP frame from client: only herd sends");
	expect_frame(PROTO_CTL_REQ, PROTO_TO_CONTROL,
		     json_pack("{s:s}", "op", "kill"), 0,
		     "CTL_REQ frame from client: key \"op\": \"kill\" is not "
		     "attach, stop or info");
	expect_frame(PROTO_CTL_REQ, PROTO_TO_CONTROL, json_object(), 0,
		     "missing key \"op\"");
	expect_frame(PROTO_CTL_REQ, PROTO_TO_CONTROL,
		     json_pack("{s:s}", "op", "info"), 3, "carries none");
	expect_frame(PROTO_CTL_MSG, PROTO_TO_CLIENT,
		     json_pack("{s:s}", "kind", "shout"), 0,
		     "\"shout\" is not out, err, status, info or end");
	expect_frame(PROTO_CTL_MSG, PROTO_TO_CLIENT,
		     json_pack("{s:s}", "kind", "end"), 0,
		     "key \"status\" goes with kind end");
	expect_frame(PROTO_CTL_MSG, PROTO_TO_CLIENT,
		     json_pack("{s:s, s:i}", "kind", "out", "status", 0), 1,
		     "key \"status\" goes with kind end");
	expect_frame(PROTO_CTL_MSG, PROTO_TO_CLIENT,
		     json_pack("{s:s, s:i}", "kind", "end", "status", 256), 0,
		     "256 is out of range 0..255");
	expect_frame(PROTO_CTL_MSG, PROTO_TO_CLIENT,
		     json_pack("{s:s, s:i}", "kind", "end", "status", 0), 5,
		     "5 data bytes, kind end carries none");
	expect_frame(PROTO_CTL_MSG, PROTO_TO_CLIENT,
		     json_pack("{s:s, s:s}", "kind", "info", "id", "x"), 0,
		     "key \"name\" goes with kind info");
	expect_frame(PROTO_CTL_MSG, PROTO_TO_CLIENT,
		     json_pack("{s:s, s:i}", "kind", "out", "missed", 3), 1,
		     "key \"missed\" goes with kind err only");
	expect_frame(PROTO_CTL_MSG, PROTO_TO_CLIENT,
		     json_pack("{s:s, s:s}", "kind", "status", "message", "x"),
		     1, "key \"message\" goes with kind info only");
	expect_frame(PROTO_CTL_MSG, PROTO_TO_CLIENT,
		     json_pack("{s:s}", "kind", "out"), PROTO_CTL_DATA_MAX + 1,
		     "expected 0 to");
	expect_frame(PROTO_CTL_MSG, PROTO_TO_CLIENT,
		     json_pack("{s:s}", "kind", "out"), PROTO_CTL_DATA_MAX,
		     NULL);
}

static void test_check_missing_key(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_VALID; i++) {
		const struct valid_frame *v = &valid_frames[i];
		json_t *body = valid_body(v), *val;
		const char *key;

		json_object_foreach(body, key, val)
		{
			json_t *less = json_deep_copy(body);
			struct proto_frame *f;
			struct herd_err err;
			char want[64];

			json_object_del(less, key);
			f = make_frame(v->type, less, v->data_len);
			if (proto_frame_check(f, v->to, &err) < 0) {
				snprintf(want, sizeof(want), "\"%s\"", key);
				if (!strstr(err.text, want))
					fail_msg("%s without %s: \"%s\"",
						 v->name, key, err.text);
			}
			proto_frame_free(f);
		}
		json_decref(body);
	}
	expect_frame(PROTO_OUTPUT, PROTO_TO_HERD,
		     json_pack("{s:i, s:i}", "rank", 0, "attempt", 1), 1,
		     "protocol error: OUTPUT frame from agent: missing key "
		     "\"fd\"");
	expect_frame(PROTO_STOPPED, PROTO_TO_HERD, json_object(), 0,
		     "STOPPED frame from agent: missing key \"attempt\"");
	expect_frame(PROTO_HELLO, PROTO_TO_HERD,
		     json_pack("{s:s, s:s, s:[], s:i, s:i}", "version",
			       HERD_VERSION, "hostname", "n", "addrs", "cores",
			       1, "pid", 1),
		     0, "exactly one of \"topo\" and \"topo_error\"");
	expect_frame(PROTO_LAUNCH, PROTO_TO_AGENT,
		     json_pack("{s:i, s:s, s:i, s:{}, s:[{s:{}}]}", "attempt",
			       1, "command", "x", "grace_ms", 0, "env",
			       "ranks", "env"),
		     0, "missing key \"ranks[0].rank\"");
	expect_frame(PROTO_EXIT, PROTO_TO_HERD,
		     json_pack("{s:i, s:i, s:n, s:i, s:s}", "rank", 0, "code",
			       1, "signal", "attempt", 1, "error", "x"),
		     0, "keys \"error\" and \"errno\" come together");
}

static void test_check_unknown_key(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_VALID; i++) {
		const struct valid_frame *v = &valid_frames[i];
		json_t *body = valid_body(v);

		json_object_set_new(body, "zzz", json_integer(1));
		expect_frame(v->type, v->to, body, v->data_len,
			     "unknown key zzz");
	}
	expect_frame(PROTO_STOP, PROTO_TO_AGENT,
		     json_pack("{s:i, s:b, s:i, s:i, s:i}", "grace_ms", 0,
			       "exit", 1, "signal", 15, "extra", 1, "more", 2),
		     0, "STOP frame from herd: unknown keys ");
	/* Inside nested objects too. */
	expect_frame(PROTO_LAUNCH, PROTO_TO_AGENT,
		     json_pack("{s:i, s:s, s:i, s:{}, s:[{s:i, s:{}, s:i}]}",
			       "attempt", 1, "command", "x", "grace_ms", 0,
			       "env", "ranks", "rank", 0, "env", "gpu", 1),
		     0, "unknown key ranks[0]: gpu");
	expect_frame(PROTO_HEARTBEAT, PROTO_TO_HERD,
		     json_pack("{s:i, s:i, s:[{s:i, s:i, s:i}]}", "seq", 1,
			       "attempt", 0, "hung", "rank", 0, "silent_ms",
			       1, "rx", 1),
		     0, "unknown key hung[0]: rx");
	/* What HEARTBEAT carried before METRICS is refused now. */
	expect_frame(PROTO_HEARTBEAT, PROTO_TO_HERD,
		     json_pack("{s:i, s:i, s:[], s:[], s:{}}", "seq", 1,
			       "attempt", 0, "ranks", "hung", "net"),
		     0, "HEARTBEAT frame from agent: unknown keys ");
}

/* Each value replaced by one of another type is refused, naming its key
 * (a value the format takes as any JSON is checked by the row). */
static void test_check_wrong_type(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_VALID; i++) {
		const struct valid_frame *v = &valid_frames[i];
		json_t *body = valid_body(v), *val;
		const char *key;

		json_object_foreach(body, key, val)
		{
			json_t *bad = json_deep_copy(body);
			struct proto_frame *f;
			struct herd_err err;
			char want[64];

			json_object_set_new(bad, key,
					    json_is_string(val)
						? json_integer(1)
						: json_string("1"));
			f = make_frame(v->type, bad, v->data_len);
			if (proto_frame_check(f, v->to, &err) == 0)
				fail_msg("%s with %s a wrong type: accepted",
					 v->name, key);
			snprintf(want, sizeof(want), "\"%s", key);
			if (!strstr(err.text, want))
				fail_msg("%s with %s a wrong type: \"%s\"",
					 v->name, key, err.text);
			proto_frame_free(f);
		}
		json_decref(body);
	}
	expect_frame(PROTO_OUTPUT, PROTO_TO_HERD,
		     json_pack("{s:s, s:i, s:i}", "rank", "3", "fd", 1,
			       "attempt", 1),
		     1,
		     "protocol error: OUTPUT frame from agent: key \"rank\": "
		     "expected integer, got string");
	expect_frame(PROTO_OUTPUT, PROTO_TO_HERD,
		     json_pack("{s:i, s:f, s:i}", "rank", 3, "fd", 1.0,
			       "attempt", 1),
		     1, "key \"fd\": expected integer, got real");
	expect_frame(PROTO_STOP, PROTO_TO_AGENT,
		     json_pack("{s:i, s:i, s:i}", "grace_ms", 0, "exit", 1,
			       "signal", 15),
		     0, "key \"exit\": expected true or false");
	expect_frame(PROTO_ERROR, PROTO_TO_HERD,
		     json_pack("{s:n}", "message"), 0,
		     "key \"message\": expected string, got null");
	expect_frame(PROTO_LAUNCH, PROTO_TO_AGENT,
		     json_pack("{s:i, s:s, s:i, s:{s:i}, s:[]}", "attempt", 1,
			       "command", "x", "grace_ms", 0, "env", "A", 1,
			       "ranks"),
		     0, "key \"env.A\": expected a string, got a number");
	expect_frame(PROTO_LAUNCH, PROTO_TO_AGENT,
		     json_pack("{s:i, s:s, s:i, s:{}, s:[i]}", "attempt", 1,
			       "command", "x", "grace_ms", 0, "env", "ranks",
			       0),
		     0, "key \"ranks[0]\": expected an object, got a number");
	expect_frame(PROTO_LAUNCH, PROTO_TO_AGENT,
		     json_pack("{s:i, s:s, s:i, s:{}, s:[], s:{s:s, s:s, s:s, "
			       "s:i, s:i, s:i, s:s, s:[s]}}",
			       "attempt", 1, "command", "x", "grace_ms", 0,
			       "env", "ranks", "pmix", "job", "j", "nodes",
			       "n", "ppn", "0", "job_size", 1, "num_nodes", 1,
			       "node_id", 0, "hostname", "h", "local", "0"),
		     0, "key \"local[0]\": expected an integer, got a string");
	expect_frame(PROTO_HEARTBEAT, PROTO_TO_HERD,
		     json_pack("{s:i, s:i, s:[{s:i, s:s}]}", "seq", 1,
			       "attempt", 0, "hung", "rank", 0, "silent_ms",
			       "x"),
		     0, "key \"hung[0].silent_ms\": expected integer");
}

static void test_check_range(void **state)
{
	static const struct {
		int type;
		enum proto_dir to;
		const char *json;
		size_t data_len;
		const char *want;
	} bad[] = {
	    /* Issue 16: publish / lookup and events. */
	    {PROTO_PUBLISH, PROTO_TO_HERD,
	     "{\"attempt\":1,\"id\":1,\"rank\":3,\"nspace\":\"n\","
	     "\"range\":\"everywhere\",\"persist\":\"indef\",\"keys\":["
	     "{\"key\":\"k\",\"size\":1}]}",
	     1, "key \"range\": \"everywhere\" is not a PMIx range"},
	    {PROTO_PUBLISH, PROTO_TO_HERD,
	     "{\"attempt\":1,\"id\":1,\"rank\":3,\"nspace\":\"n\","
	     "\"range\":\"local\",\"persist\":\"forever\",\"keys\":["
	     "{\"key\":\"k\",\"size\":1}]}",
	     1, "key \"persist\": \"forever\" is not a PMIx persistence"},
	    {PROTO_PUBLISH, PROTO_TO_HERD,
	     "{\"attempt\":1,\"id\":1,\"rank\":3,\"nspace\":\"n\","
	     "\"range\":\"local\",\"persist\":\"indef\",\"keys\":[]}",
	     0, "key \"keys\": at least 1 expected"},
	    {PROTO_PUBLISH, PROTO_TO_HERD,
	     "{\"attempt\":1,\"id\":1,\"rank\":3,\"nspace\":\"n\","
	     "\"range\":\"local\",\"persist\":\"indef\",\"keys\":["
	     "{\"key\":\"k\",\"size\":65537}]}",
	     1, "key \"keys[0].size\": 65537 is out of range"},
	    {PROTO_PUBLISH, PROTO_TO_HERD,
	     "{\"attempt\":1,\"id\":1,\"rank\":3,\"nspace\":\"n\","
	     "\"range\":\"local\",\"persist\":\"indef\",\"keys\":["
	     "{\"key\":\"\",\"size\":1}]}",
	     1, "1..511 bytes expected"},
	    {PROTO_LOOKUP, PROTO_TO_HERD,
	     "{\"attempt\":1,\"id\":1,\"rank\":3,\"nspace\":\"n\","
	     "\"range\":\"local\",\"keys\":[{\"key\":\"k\"}],\"wait\":65,"
	     "\"timeout_ms\":0}",
	     0, "key \"wait\": 65 is out of range"},
	    {PROTO_PUBSUB_DONE, PROTO_TO_AGENT,
	     "{\"attempt\":1,\"id\":1,\"status\":\"maybe\"}", 0,
	     "key \"status\": \"maybe\" unknown"},
	    {PROTO_EVENT, PROTO_TO_HERD,
	     "{\"attempt\":1,\"code\":1,\"rank\":2,\"nspace\":\"n\","
	     "\"range\":\"custom\",\"procs\":[-1]}",
	     0, "procs"},
	    {PROTO_PROC_FAILED, PROTO_TO_AGENT,
	     "{\"attempt\":1,\"kind\":\"crash\",\"status\":1,\"host\":"
	     "\"n\",\"ranks\":[2]}",
	     0, "key \"kind\": \"crash\" is not exit, signal or node"},
	    {PROTO_PROC_FAILED, PROTO_TO_AGENT,
	     "{\"attempt\":1,\"kind\":\"exit\",\"status\":1,\"host\":"
	     "\"n\",\"ranks\":[]}",
	     0, "key \"ranks\": empty"},
	    {PROTO_METRICS, PROTO_TO_HERD,
	     "{\"t\":0,\"attempt\":0,\"load1\":0,\"cpus\":1,\"ranks\":["
	     "{\"rank\":0,\"cpu_ms\":1,\"rss_kb\":2,\"touches\":-1}],"
	     "\"net\":[],\"rdma\":[],\"gpus\":[],\"train\":[]}",
	     0, "key \"ranks[0].touches\": -1 is out of range"},
	    {PROTO_METRICS, PROTO_TO_HERD,
	     "{\"t\":0,\"attempt\":0,\"load1\":0,\"cpus\":1,\"ranks\":["
	     "{\"rank\":0,\"cpu_ms\":1,\"rss_kb\":2,\"touches\":1.5}],"
	     "\"net\":[],\"rdma\":[],\"gpus\":[],\"train\":[]}",
	     0, "touches"},
	    {PROTO_METRICS, PROTO_TO_HERD,
	     "{\"t\":0,\"attempt\":0,\"load1\":0,\"cpus\":1,\"ranks\":["
	     "{\"rank\":0,\"cpu_ms\":1,\"rss_kb\":2,\"touch\":1}],"
	     "\"net\":[],\"rdma\":[],\"gpus\":[],\"train\":[]}",
	     0, "touch"},
	    {PROTO_METRICS, PROTO_TO_HERD,
	     "{\"t\":0,\"attempt\":0,\"load1\":0,\"cpus\":1,\"ranks\":[],"
	     "\"net\":[],\"rdma\":[],\"gpus\":[{\"index\":0,"
	     "\"util_pct\":101}],\"train\":[]}",
	     0, "key \"gpus[0].util_pct\": 101 is out of range 0..100"},
	    {PROTO_CHECK, PROTO_TO_AGENT,
	     "{\"min_free\":0,\"gpus\":-2,\"check_timeout_ms\":1,"
	     "\"t_ms\":0}",
	     0, "key \"gpus\": -2 is out of range -1..64"},
	    {PROTO_CHECK, PROTO_TO_AGENT,
	     "{\"min_free\":0,\"gpus\":0,\"check_timeout_ms\":0,"
	     "\"t_ms\":0}",
	     0, "key \"check_timeout_ms\": 0 is out of range"},
	    {PROTO_CHECK, PROTO_TO_AGENT,
	     "{\"min_free\":0,\"gpus\":0,\"check_timeout_ms\":1,"
	     "\"t_ms\":0,\"command\":\"x\"}",
	     0, "unknown key"},
	    {PROTO_CHECK, PROTO_TO_HERD,
	     "{\"t_ms\":0,\"held_ms\":0,\"checks\":[{\"name\":\"x\",\"status\":"
	     "\"bad\"}]}",
	     0, "key \"status\": \"bad\" is not ok, fail or skipped"},
	    {PROTO_CHECK, PROTO_TO_HERD,
	     "{\"t_ms\":0,\"held_ms\":0,\"checks\":[{\"name\":\"\",\"status\":\"ok\"}]}",
	     0, "key \"name\": empty"},
	    {PROTO_CHECK, PROTO_TO_HERD,
	     "{\"t_ms\":0,\"held_ms\":0,\"checks\":[{\"name\":\"rdma\",\"status\":"
	     "\"ok\",\"rate\":-1}]}",
	     0, "key \"rate\": below 0"},
	    {PROTO_CHECK, PROTO_TO_HERD, "{\"t_ms\":0,\"held_ms\":0,\"checks\":{}}", 0,
	     "key \"checks\": expected an array"},
	    {PROTO_CHECK, PROTO_TO_HERD, "{\"held_ms\":0,\"checks\":[]}", 0,
	     "missing key \"t_ms\""},
	    {PROTO_PMIX_LOG, PROTO_TO_HERD,
	     "{\"attempt\":1,\"rank\":0,\"entries\":[]}", 0,
	     "key \"entries\": none"},
	    {PROTO_PMIX_LOG, PROTO_TO_HERD,
	     "{\"attempt\":1,\"rank\":0,\"entries\":[{\"key\":\"\","
	     "\"value\":\"x\"}]}",
	     0, "key \"key\": 0 bytes"},
	    {PROTO_PMIX_LOG, PROTO_TO_HERD,
	     "{\"attempt\":1,\"rank\":-1,\"entries\":[{\"key\":\"k\","
	     "\"value\":\"x\"}]}",
	     0, "rank"},
	    {PROTO_NETPROBE, PROTO_TO_AGENT,
	     "{\"round\":1,\"op\":\"listen\",\"addr\":\"a\",\"port\":1,"
	     "\"bytes\":1,\"timeout_ms\":1}",
	     0, "key \"port\" goes with op connect"},
	    {PROTO_NETPROBE, PROTO_TO_AGENT,
	     "{\"round\":1,\"op\":\"send\",\"addr\":\"a\","
	     "\"bytes\":1,\"timeout_ms\":1}",
	     0, "is not listen or connect"},
	    {PROTO_NETPROBE, PROTO_TO_AGENT,
	     "{\"round\":1,\"op\":\"connect\",\"addr\":\"a\",\"port\":1,"
	     "\"bytes\":1,\"timeout_ms\":1,\"peer\":\"b\"}",
	     0, "key \"peer\" goes with op listen only"},
	    {PROTO_NETPROBE, PROTO_TO_AGENT,
	     "{\"round\":1,\"op\":\"listen\",\"addr\":\"a\","
	     "\"bytes\":2147483648,\"timeout_ms\":1}",
	     0, "key \"bytes\": 2147483648 is out of range"},
	    {PROTO_NETPROBE, PROTO_TO_HERD,
	     "{\"round\":1,\"op\":\"listening\"}", 0,
	     "op listening carries \"port\" only"},
	    {PROTO_NETPROBE, PROTO_TO_HERD,
	     "{\"round\":1,\"op\":\"result\",\"rx_bytes\":1}", 0,
	     "op result carries"},
	    {PROTO_NETPROBE, PROTO_TO_HERD,
	     "{\"round\":1,\"op\":\"result\",\"rx_bytes\":1,\"rx_us\":1,"
	     "\"error\":\"x\"}",
	     0, "op result carries"},
	    {PROTO_NETPROBE, PROTO_TO_HERD,
	     "{\"round\":0,\"op\":\"result\",\"error\":\"x\"}", 0,
	     "key \"round\": 0 is out of range"},
	    {PROTO_METRICS, PROTO_TO_HERD,
	     "{\"t\":0,\"attempt\":0,\"load1\":0,\"cpus\":1,\"ranks\":[],"
	     "\"net\":[{\"dev\":\"e\",\"rx_bytes\":-1,\"tx_bytes\":2,"
	     "\"rx_packets\":3,\"tx_packets\":4,\"rx_drops\":0,"
	     "\"tx_drops\":0,\"rx_errors\":0,\"tx_errors\":0}],"
	     "\"rdma\":[],\"gpus\":[],\"train\":[]}",
	     0, "key \"rx_bytes\": -1 is below 0"},
	    {PROTO_METRICS, PROTO_TO_HERD,
	     "{\"t\":0,\"attempt\":0,\"load1\":0,\"cpus\":1,\"ranks\":[],"
	     "\"net\":[],\"rdma\":[],\"gpus\":[],\"train\":[{\"rank\":0,"
	     "\"records\":1,\"values\":{\"loss\":\"high\"}}]}",
	     0, "key \"values.loss\": expected a number, got a string"},
	    {PROTO_METRICS, PROTO_TO_HERD,
	     "{\"t\":0,\"attempt\":0,\"load1\":0,\"cpus\":1,\"ranks\":[],"
	     "\"net\":[],\"rdma\":[],\"gpus\":[],\"train\":[{\"rank\":0,"
	     "\"records\":1,\"values\":{\"a b\":1}}]}",
	     0, "a metric name must be letters"},
	    {PROTO_OUTPUT, PROTO_TO_HERD,
	     "{\"rank\":-1,\"fd\":1,\"attempt\":1}", 1,
	     "protocol error: OUTPUT frame from agent: key \"rank\": -1 is "
	     "out of range 0..2147483647"},
	    {PROTO_OUTPUT, PROTO_TO_HERD,
	     "{\"rank\":2147483648,\"fd\":1,\"attempt\":1}", 1,
	     "key \"rank\": 2147483648 is out of range"},
	    {PROTO_OUTPUT, PROTO_TO_HERD, "{\"rank\":0,\"fd\":0,\"attempt\":1}",
	     1, "key \"fd\": 0 is out of range 1..2"},
	    {PROTO_OUTPUT, PROTO_TO_HERD, "{\"rank\":0,\"fd\":3,\"attempt\":1}",
	     1, "key \"fd\": 3 is out of range 1..2"},
	    {PROTO_OUTPUT, PROTO_TO_HERD,
	     "{\"rank\":0,\"fd\":1,\"attempt\":-2}", 1,
	     "key \"attempt\": -2 is out of range"},
	    {PROTO_SIGNAL, PROTO_TO_AGENT, "{\"signal\":10,\"ranks\":[]}", 0,
	     "key \"ranks\": empty"},
	    {PROTO_SIGNAL, PROTO_TO_HERD,
	     "{\"attempt\":1,\"signal\":10,\"ranks\":[-1]}", 0, "ranks"},
	    {PROTO_SIGNAL, PROTO_TO_AGENT, "{\"signal\":0}", 0,
	     "SIGNAL frame from herd: key \"signal\": 0 is out of range 1.."},
	    {PROTO_SIGNAL, PROTO_TO_AGENT, "{\"signal\":65}", 0,
	     "key \"signal\": 65 is out of range 1.."},
	    {PROTO_STOP, PROTO_TO_AGENT,
	     "{\"grace_ms\":-1,\"exit\":false,\"signal\":15}", 0,
	     "key \"grace_ms\": -1 is out of range"},
	    {PROTO_STOP, PROTO_TO_AGENT,
	     "{\"grace_ms\":0,\"exit\":false,\"signal\":-9}", 0,
	     "key \"signal\": -9 is out of range"},
	    {PROTO_EXIT, PROTO_TO_HERD,
	     "{\"rank\":0,\"code\":256,\"signal\":null,\"attempt\":1}", 0,
	     "key \"code\": 256 is out of range 0..255"},
	    {PROTO_EXIT, PROTO_TO_HERD,
	     "{\"rank\":0,\"code\":null,\"signal\":0,\"attempt\":1}", 0,
	     "key \"signal\": 0 is out of range 1.."},
	    {PROTO_EXIT, PROTO_TO_HERD,
	     "{\"rank\":0,\"code\":0,\"signal\":9,\"attempt\":1}", 0,
	     "keys \"code\" and \"signal\": one integer and one null"},
	    {PROTO_EXIT, PROTO_TO_HERD,
	     "{\"rank\":0,\"code\":null,\"signal\":null,\"attempt\":1}", 0,
	     "one integer and one null expected, got null and null"},
	    {PROTO_HEARTBEAT, PROTO_TO_AGENT,
	     "{\"interval_ms\":0,\"timeout_ms\":3000}", 0,
	     "key \"interval_ms\": 0 is out of range"},
	    {PROTO_HEARTBEAT, PROTO_TO_AGENT,
	     "{\"interval_ms\":1000,\"timeout_ms\":500}", 0,
	     "\"timeout_ms\" is shorter than \"interval_ms\""},
	    {PROTO_HEARTBEAT, PROTO_TO_HERD,
	     "{\"seq\":0,\"attempt\":0,\"hung\":[]}",
	     0, "key \"seq\": 0 is out of range"},
	    {PROTO_HEARTBEAT, PROTO_TO_HERD,
	     "{\"seq\":1,\"attempt\":0,\"hung\":[{\"rank\":0,"
	     "\"silent_ms\":-5}]}",
	     0, "key \"hung[0].silent_ms\": -5 is out of range"},
	    {PROTO_LAUNCH, PROTO_TO_AGENT,
	     "{\"attempt\":1,\"command\":\"x\",\"grace_ms\":0,\"env\":{},"
	     "\"ranks\":[],\"metrics_interval_ms\":99}",
	     0, "key \"metrics_interval_ms\": 99 is out of range"},
	    {PROTO_LAUNCH, PROTO_TO_AGENT,
	     "{\"attempt\":1,\"command\":\"x\",\"grace_ms\":0,\"env\":{},"
	     "\"ranks\":[],\"metrics_interval_ms\":1000,\"patterns\":"
	     "[{\"name\":\"9loss\",\"regex\":\"loss ([0-9.]+)\"}]}",
	     0, "key \"name\": a metric name"},
	    {PROTO_LAUNCH, PROTO_TO_AGENT,
	     "{\"attempt\":1,\"command\":\"x\",\"grace_ms\":0,\"env\":{},"
	     "\"ranks\":[],\"metrics_interval_ms\":1000,\"patterns\":"
	     "[{\"name\":\"loss\",\"regex\":\"\"}]}",
	     0, "key \"regex\": 0 bytes"},
	    {PROTO_LAUNCH, PROTO_TO_AGENT,
	     "{\"attempt\":1,\"command\":\"x\",\"grace_ms\":0,\"env\":{},"
	     "\"ranks\":[],\"metrics_interval_ms\":1000,\"patterns\":"
	     "[{\"name\":\"loss\"}]}",
	     0, "missing key \"patterns[0].regex\""},
	    {PROTO_HELLO, PROTO_TO_HERD,
	     "{\"version\":\"" HERD_VERSION "\",\"hostname\":\"n\",\"addrs\":"
	     "[],\"cores\":0,\"pid\":1,\"topo\":{}}",
	     0, "key \"cores\": 0 is out of range"},
	    {PROTO_HELLO, PROTO_TO_HERD,
	     "{\"version\":\"" HERD_VERSION "\",\"hostname\":\"n\",\"addrs\":"
	     "[],\"cores\":1,\"pid\":1,\"topo\":{},\"topo_error\":\"x\"}",
	     0, "got both"},
	    {PROTO_HELLO, PROTO_TO_HERD,
	     "{\"version\":\"" HERD_VERSION "\",\"hostname\":\"n\",\"addrs\":"
	     "[{\"ifname\":\"eth0\",\"addr\":\"10.0.0.1\"}],\"cores\":1,"
	     "\"pid\":1,\"topo\":{}}",
	     0, "missing key \"addrs[0].netmask\""},
	    {PROTO_LAUNCH, PROTO_TO_AGENT,
	     "{\"attempt\":0,\"command\":\"x\",\"grace_ms\":0,\"env\":{},"
	     "\"ranks\":[]}",
	     0, "key \"attempt\": 0 is out of range 1.."},
	    {PROTO_LAUNCH, PROTO_TO_AGENT,
	     "{\"attempt\":1,\"command\":\"x\",\"grace_ms\":0,\"env\":"
	     "{\"A=B\":\"c\"},\"ranks\":[]}",
	     0, "key \"env\": \"A=B\" is not a variable name"},
	    {PROTO_LAUNCH, PROTO_TO_AGENT,
	     "{\"attempt\":1,\"command\":\"x\",\"grace_ms\":0,\"env\":{},"
	     "\"ranks\":[{\"rank\":0,\"env\":{\"\":\"c\"}}]}",
	     0, "\"\" is not a variable name"},
	    {PROTO_LAUNCH, PROTO_TO_AGENT,
	     "{\"attempt\":1,\"command\":\"x\",\"grace_ms\":0,\"env\":{},"
	     "\"ranks\":[{\"rank\":0,\"env\":{},\"mem_node\":-1}]}",
	     0, "key \"ranks[0].mem_node\": -1 is out of range"},
	    {PROTO_LAUNCH, PROTO_TO_AGENT,
	     "{\"attempt\":1,\"command\":\"x\",\"grace_ms\":0,\"env\":{},"
	     "\"ranks\":[],\"progress_timeout_ms\":0}",
	     0, "key \"progress_timeout_ms\": 0 is out of range"},
	    {PROTO_LAUNCH, PROTO_TO_AGENT,
	     "{\"attempt\":1,\"command\":\"x\",\"grace_ms\":0,\"env\":{},"
	     "\"ranks\":[],\"pmix\":{\"job\":\"j\",\"nodes\":\"n\",\"ppn\":"
	     "\"0\",\"job_size\":0,\"num_nodes\":1,\"node_id\":0,\"hostname\":"
	     "\"h\",\"local\":[]}}",
	     0, "key \"pmix.job_size\": 0 is out of range"},
	    {PROTO_FENCE, PROTO_TO_HERD, "{\"attempt\":1,\"seq\":0}", 0,
	     "key \"seq\": 0 is out of range"},
	    {PROTO_FENCE, PROTO_TO_HERD,
	     "{\"attempt\":1,\"seq\":1,\"procs\":\"3,1\",\"count\":1}", 0,
	     "procs: \"*\" or ascending rank ranges"},
	    {PROTO_FENCE, PROTO_TO_HERD,
	     "{\"attempt\":1,\"seq\":1,\"procs\":\"0-3,x\",\"count\":1}",
	     0, "procs: \"*\" or ascending rank ranges"},
	    {PROTO_FENCE, PROTO_TO_HERD,
	     "{\"attempt\":1,\"seq\":1,\"procs\":\"*\",\"count\":0}", 0,
	     "key \"count\": 0 is out of range"},
	    {PROTO_DMODEX_DATA, PROTO_TO_HERD,
	     "{\"attempt\":1,\"seq\":1,\"rank\":0,\"from\":0,\"status\":1}",
	     0, "key \"status\": 1 is out of range"},
	    {PROTO_DMODEX_DATA, PROTO_TO_AGENT,
	     "{\"attempt\":1,\"seq\":1,\"rank\":0,\"status\":3}", 0,
	     "key \"status\": 3 is out of range"},
	    {PROTO_DMODEX, PROTO_TO_AGENT,
	     "{\"attempt\":1,\"seq\":1,\"rank\":-1,\"from\":0}", 0,
	     "key \"rank\": -1 is out of range"},
	    {PROTO_FENCE_DONE, PROTO_TO_AGENT,
	     "{\"attempt\":1,\"seq\":1,\"status\":4294967296}", 0,
	     "key \"status\": 4294967296 is out of range"},
	    {PROTO_ABORT, PROTO_TO_HERD,
	     "{\"attempt\":1,\"rank\":-3,\"status\":1,\"message\":\"\"}", 0,
	     "key \"rank\": -3 is out of range"},
	    {PROTO_STOPPED, PROTO_TO_HERD, "{\"attempt\":-1}", 0,
	     "key \"attempt\": -1 is out of range"},
	    {PROTO_STACKS, PROTO_TO_AGENT, "{\"attempt\":0}", 0,
	     "STACKS frame from herd: key \"attempt\": 0 is out of range"},
	    {PROTO_STACKS, PROTO_TO_HERD,
	     "{\"attempt\":1,\"ranks\":[{\"rank\":0,\"method\":\"lldb\","
	     "\"in_collective\":false,\"last_sign_ms\":0}]}",
	     0, "key \"method\": \"lldb\" is not python, gdb or none"},
	    {PROTO_STACKS, PROTO_TO_HERD,
	     "{\"attempt\":1,\"ranks\":[{\"rank\":-1,\"method\":\"gdb\","
	     "\"in_collective\":false,\"last_sign_ms\":0}]}",
	     0, "key \"ranks[0].rank\": -1 is out of range"},
	    {PROTO_STACKS, PROTO_TO_HERD,
	     "{\"attempt\":1,\"ranks\":[{\"rank\":0,\"method\":\"gdb\","
	     "\"last_sign_ms\":0}]}",
	     0, "missing key \"ranks[0].in_collective\""},
	    {PROTO_STACKS, PROTO_TO_HERD,
	     "{\"attempt\":1,\"ranks\":[{\"rank\":0,\"method\":\"gdb\","
	     "\"in_collective\":1,\"last_sign_ms\":0}]}",
	     0, "key \"ranks[0].in_collective\": expected"},
	    {PROTO_STACKS, PROTO_TO_HERD,
	     "{\"attempt\":1,\"ranks\":[{\"rank\":0,\"method\":\"gdb\","
	     "\"in_collective\":true,\"last_sign_ms\":0,\"pid\":7}]}",
	     0, "unknown key ranks[0]: pid"},
	    {PROTO_EXIT, PROTO_TO_HERD,
	     "{\"rank\":0,\"code\":1,\"signal\":null,\"attempt\":1,"
	     "\"error\":\"x\",\"errno\":-1}",
	     0, "key \"errno\": -1 is out of range 0.."},
	};
	json_t *ranks = json_array();

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_frame(bad[i].type, bad[i].to,
			     json_loads(bad[i].json, 0, NULL), bad[i].data_len,
			     bad[i].want);
	/* At most PROTO_LAUNCH_RANKS_MAX ranks on one node. */
	for (int r = 0; r <= PROTO_LAUNCH_RANKS_MAX; r++)
		json_array_append_new(ranks,
				      json_pack("{s:i, s:{}}", "rank", r, "env"));
	expect_frame(PROTO_LAUNCH, PROTO_TO_AGENT,
		     json_pack("{s:i, s:s, s:i, s:{}, s:O}", "attempt", 1,
			       "command", "x", "grace_ms", 0, "env", "ranks",
			       ranks),
		     0, "key \"ranks\": 4097 entries, at most 4096");
	json_array_remove(ranks, 0);
	expect_frame(PROTO_LAUNCH, PROTO_TO_AGENT,
		     json_pack("{s:i, s:s, s:i, s:{}, s:O}", "attempt", 1,
			       "command", "x", "grace_ms", 0, "env", "ranks",
			       ranks),
		     0, NULL);
	json_decref(ranks);
}

static void test_check_data(void **state)
{
	(void)state;
	expect_frame(PROTO_OUTPUT, PROTO_TO_HERD,
		     json_pack("{s:i, s:i, s:i}", "rank", 0, "fd", 1, "attempt",
			       1),
		     0,
		     "protocol error: OUTPUT frame from agent: 0 data bytes, "
		     "expected 1 to 65536");
	expect_frame(PROTO_OUTPUT, PROTO_TO_HERD,
		     json_pack("{s:i, s:i, s:i}", "rank", 0, "fd", 1, "attempt",
			       1),
		     PROTO_OUTPUT_CHUNK + 1, "65537 data bytes");
	expect_frame(PROTO_STOP, PROTO_TO_AGENT,
		     json_pack("{s:i, s:b, s:i}", "grace_ms", 0, "exit", 0,
			       "signal", 15),
		     1,
		     "protocol error: STOP frame from herd: 1 data bytes, it "
		     "carries none");
	expect_frame(PROTO_HELLO, PROTO_TO_HERD,
		     json_loads(valid_frames[0].json, 0, NULL), 3,
		     "HELLO frame from agent: 3 data bytes, it carries none");
}

/* An agent of another version: its HELLO passes on its version string
 * alone, so that herd can say which versions differ. */
static void test_check_other_version(void **state)
{
	(void)state;
	expect_frame(PROTO_HELLO, PROTO_TO_HERD,
		     json_pack("{s:s, s:s}", "version", "0.0.1-old", "whatever",
			       "new key"),
		     0, NULL);
	expect_frame(PROTO_HELLO, PROTO_TO_HERD,
		     json_pack("{s:i, s:s}", "version", 1, "hostname", "n"), 0,
		     "key \"version\": expected string, got integer");
	expect_frame(PROTO_HELLO, PROTO_TO_HERD, json_object(), 0,
		     "missing key \"version\"");
}

/* The valid frames survive the real codec and still pass. */
static void test_check_after_codec(void **state)
{
	static const char data[PROTO_OUTPUT_CHUNK] = "x";
	struct herd_err err;

	(void)state;
	for (size_t i = 0; i < N_VALID; i++) {
		const struct valid_frame *v = &valid_frames[i];
		json_t *body = valid_body(v);
		struct proto_reader *r = proto_reader_new(PROTO_FRAME_MAX);
		struct proto_frame *f = NULL;
		size_t len = 0;
		char *buf = proto_encode((enum proto_type)v->type, body,
					 v->data_len ? data : NULL,
					 v->data_len, &len, &err);

		assert_non_null(buf);
		assert_int_equal(proto_reader_feed(r, buf, len, &err), 0);
		assert_int_equal(proto_reader_next(r, &f, &err), 1);
		if (proto_frame_check(f, v->to, &err) < 0)
			fail_msg("%s: %s", v->name, err.text);
		proto_frame_free(f);
		proto_reader_free(r);
		free(buf);
		json_decref(body);
	}
}

/* Writes one seed file: the split byte, then the given bytes. */
static void write_seed(const char *dir, const char *name, unsigned split,
		       const void *buf, size_t len)
{
	char path[512];
	unsigned char s = (unsigned char)split;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fp = fopen(path, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(&s, 1, 1, fp), 1);
	if (len)
		assert_int_equal(fwrite(buf, 1, len, fp), len);
	assert_int_equal(fclose(fp), 0);
}

/* One seed per valid frame (valid-NAME), and all of them in one stream
 * (valid-all): the fuzzer starts from bodies the contract accepts. */
static void write_valid_seeds(const char *dir)
{
	static const char data[PROTO_OUTPUT_CHUNK] = "step 1 loss 2.5\n";
	/* Seeds stay small: libFuzzer runs with -max_len 65536. */
	const size_t seed_data_max = 64;
	char *all = NULL, name[64];
	size_t all_len = 0;

	for (size_t i = 0; i < N_VALID; i++) {
		const struct valid_frame *v = &valid_frames[i];
		json_t *body = valid_body(v);
		size_t dlen = v->data_len < seed_data_max ? v->data_len
							  : seed_data_max;
		struct herd_err err;
		size_t len = 0;
		char *enc;

		if (v->type == PROTO_OUTPUT && dlen == 0)
			dlen = 1;
		enc = proto_encode((enum proto_type)v->type, body,
				   dlen ? data : NULL, dlen, &len, &err);
		assert_non_null(enc);
		snprintf(name, sizeof(name), "valid-%s", v->name);
		write_seed(dir, name, (unsigned)(len / 2), enc, len);
		all = realloc(all, all_len + len);
		assert_non_null(all);
		memcpy(all + all_len, enc, len);
		all_len += len;
		free(enc);
		json_decref(body);
	}
	write_seed(dir, "valid-all", 100, all, all_len);
	free(all);
}

static void write_seeds(const char *dir)
{
	unsigned char buf[512];
	json_t *body = json_pack("{s:s, s:i, s:[s,s], s:{s:i}}", "hostname",
				 "node01", "version", 1, "addrs", "10.0.0.1",
				 "fe80::1", "topo", "gpus", 8);
	struct herd_err err;
	size_t len = 0, n;
	char *enc;

	enc = proto_encode(PROTO_HELLO, body, NULL, 0, &len, &err);
	assert_non_null(enc);
	write_seed(dir, "hello", 7, enc, len);
	free(enc);
	json_decref(body);

	n = raw_frame(buf, PROTO_OUTPUT, "{\"rank\":3,\"stream\":\"stdout\"}",
		      "step 1 loss 2.5\n", 16);
	n += raw_frame(buf + n, PROTO_HEARTBEAT, "{\"seq\":9,\"ranks\":8}",
		       NULL, 0);
	n += raw_frame(buf + n, PROTO_EXIT,
		       "{\"rank\":3,\"status\":0,\"signal\":0}", NULL, 0);
	write_seed(dir, "three", 30, buf, n);

	n = raw_frame(buf, PROTO_LAUNCH,
		      "{\"attempt\":1,\"env\":{\"A\":\"\xc3\xa9\"},"
		      "\"x\":[1.5e3,-0.0,true,null]}",
		      "\x00\x01\xff", 3);
	write_seed(dir, "launch", 200, buf, n);

	n = raw_frame(buf, PROTO_STOPPED, "{}", NULL, 0);
	write_seed(dir, "stopped", 0, buf, n);

	put_header(buf, 123456789, PROTO_VERSION, PROTO_OUTPUT, 0, 2);
	write_seed(dir, "oversize", 2, buf, PROTO_HEADER_SIZE);

	n = raw_frame(buf, PROTO_ERROR, "{\"message\":\"x\",\"message\":1}",
		      NULL, 0);
	write_seed(dir, "dupkey", 5, buf, n);

	write_valid_seeds(dir);
}

static int walk_sum(void *arg, int lo, int hi)
{
	int *acc = arg;

	acc[0] += hi - lo + 1;
	acc[1]++;
	return 0;
}

/* FENCE's procs: "*", ascending disjoint ranges, nothing else. */
static void test_procs_walk(void **state)
{
	int acc[2] = {0, 0};

	(void)state;
	assert_int_equal(proto_procs_walk("*", walk_sum, acc), 1);
	assert_int_equal(acc[1], 0);
	assert_int_equal(proto_procs_walk("0-3,6,9-12", walk_sum, acc), 0);
	assert_int_equal(acc[0], 9);
	assert_int_equal(acc[1], 3);
	assert_int_equal(proto_procs_walk("7", NULL, NULL), 0);
	assert_int_equal(proto_procs_walk("2147483647", NULL, NULL), 0);
	assert_int_equal(proto_procs_walk("2147483648", NULL, NULL), -1);
	assert_int_equal(proto_procs_walk("", NULL, NULL), -1);
	assert_int_equal(proto_procs_walk(NULL, NULL, NULL), -1);
	assert_int_equal(proto_procs_walk("1,1", NULL, NULL), -1);
	assert_int_equal(proto_procs_walk("0-3,2", NULL, NULL), -1);
	assert_int_equal(proto_procs_walk("3-1", NULL, NULL), -1);
	assert_int_equal(proto_procs_walk("-1", NULL, NULL), -1);
	assert_int_equal(proto_procs_walk("1,", NULL, NULL), -1);
	assert_int_equal(proto_procs_walk("1-", NULL, NULL), -1);
	assert_int_equal(proto_procs_walk("*,1", NULL, NULL), -1);
	assert_int_equal(proto_procs_walk(" 1", NULL, NULL), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_type_names),
	    cmocka_unit_test(test_round_trip_each_type),
	    cmocka_unit_test(test_wire_layout),
	    cmocka_unit_test(test_byte_at_a_time),
	    cmocka_unit_test(test_many_frames_in_one_feed),
	    cmocka_unit_test(test_split_everywhere),
	    cmocka_unit_test(test_max_frame_boundary),
	    cmocka_unit_test(test_reject_header),
	    cmocka_unit_test(test_reject_json),
	    cmocka_unit_test(test_feed_overflow),
	    cmocka_unit_test(test_large_then_small),
	    cmocka_unit_test(test_encode_refuses),
	    cmocka_unit_test(test_check_valid),
	    cmocka_unit_test(test_check_direction),
	    cmocka_unit_test(test_check_control),
	    cmocka_unit_test(test_check_missing_key),
	    cmocka_unit_test(test_check_unknown_key),
	    cmocka_unit_test(test_check_wrong_type),
	    cmocka_unit_test(test_check_range),
	    cmocka_unit_test(test_check_data),
	    cmocka_unit_test(test_check_other_version),
	    cmocka_unit_test(test_check_after_codec),
	    cmocka_unit_test(test_procs_walk),
	};
	const char *seeds = getenv("HERD_PROTO_SEEDS");

	if (seeds && *seeds)
		write_seeds(seeds);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
