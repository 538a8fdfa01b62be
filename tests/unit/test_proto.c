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
	expect_reject(1024, buf, 6, "unknown type 13");
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
	};
	const char *seeds = getenv("HERD_PROTO_SEEDS");

	if (seeds && *seeds)
		write_seeds(seeds);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
