/* test_conn.c — the framed connection: a send that finds the peer gone
 * never runs on_close inside itself; on_close comes from the loop. */
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "herd/conn.h"

struct seen {
	int closes, clean, in_send, timeouts;
	char reason[160];
};

static void on_frame(struct conn *c, struct proto_frame *f, void *arg)
{
	(void)c;
	(void)arg;
	proto_frame_free(f);
}

static void on_close(struct conn *c, const char *reason, int clean, void *arg)
{
	struct seen *s = arg;

	(void)c;
	/* Called inside conn_send(): the bug of issue 11 item 7. */
	assert_int_equal(s->in_send, 0);
	s->closes++;
	s->clean = clean;
	snprintf(s->reason, sizeof(s->reason), "%s", reason);
}

static void on_backstop(struct loop *loop, void *arg)
{
	struct seen *s = arg;

	s->timeouts++;
	loop_stop(loop);
}

/* Runs the loop until a 100 ms timer stops it: long enough for every
 * zero-delay event, short enough for a unit test. */
static void run_a_while(struct loop *loop, struct seen *s)
{
	assert_true(loop_timer_add(loop, 100, on_backstop, s) > 0);
	assert_int_equal(loop_run(loop), 0);
}

static struct conn *closed_peer(struct loop *loop, struct seen *s)
{
	int sv[2];
	struct conn *c;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	c = conn_new(loop, sv[0], sv[0], PROTO_FRAME_MAX, on_frame, on_close,
		     s);
	assert_non_null(c);
	close(sv[1]);	/* the peer is gone before we speak */
	return c;
}

static int send_hb(struct conn *c, struct seen *s, struct herd_err *err)
{
	json_t *body = json_pack("{s:i}", "seq", 1);
	int rc;

	s->in_send = 1;
	rc = conn_send(c, PROTO_HEARTBEAT, body, NULL, 0, err);
	s->in_send = 0;
	json_decref(body);
	return rc;
}

static void test_send_to_closed_peer(void **state)
{
	struct loop *loop = loop_new();
	struct seen s = {0};
	struct herd_err err;
	struct conn *c;

	(void)state;
	assert_non_null(loop);
	c = closed_peer(loop, &s);
	herd_err_clear(&err);
	/* The write fails (EPIPE): -1, the conn dead, on_close not yet. */
	assert_int_equal(send_hb(c, &s, &err), -1);
	assert_non_null(strstr(err.text, "write:"));
	assert_int_equal(s.closes, 0);
	assert_true(conn_is_dead(c));
	/* A second send, as launch() walking its nodes makes: refused,
	 * still no on_close. */
	assert_int_equal(send_hb(c, &s, NULL), -1);
	assert_int_equal(s.closes, 0);
	/* The loop tells the owner, once. */
	run_a_while(loop, &s);
	assert_int_equal(s.closes, 1);
	assert_int_equal(s.clean, 0);
	assert_non_null(strstr(s.reason, "write:"));
	conn_free(c);
	loop_free(loop);
}

/* The owner frees the conn before the loop's next turn: the pending
 * on_close is cancelled (no call on freed memory). */
static void test_free_cancels_pending_close(void **state)
{
	struct loop *loop = loop_new();
	struct seen s = {0};
	struct conn *c;

	(void)state;
	assert_non_null(loop);
	c = closed_peer(loop, &s);
	assert_int_equal(send_hb(c, &s, NULL), -1);
	conn_free(c);
	run_a_while(loop, &s);
	assert_int_equal(s.closes, 0);
	assert_int_equal(s.timeouts, 1);
	loop_free(loop);
}

/* A live peer: the send succeeds and the frame arrives whole. */
static void test_send_to_live_peer(void **state)
{
	struct loop *loop = loop_new();
	struct seen s = {0};
	struct proto_reader *r = proto_reader_new(PROTO_FRAME_MAX);
	struct proto_frame *f = NULL;
	struct herd_err err;
	char buf[4096];
	ssize_t n;
	int sv[2];
	struct conn *c;

	(void)state;
	assert_non_null(loop);
	assert_non_null(r);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	c = conn_new(loop, sv[0], sv[0], PROTO_FRAME_MAX, on_frame, on_close,
		     &s);
	assert_non_null(c);
	assert_int_equal(send_hb(c, &s, NULL), 0);
	assert_int_equal(conn_pending(c), 0);
	n = read(sv[1], buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(proto_reader_feed(r, buf, (size_t)n, &err), 0);
	assert_int_equal(proto_reader_next(r, &f, &err), 1);
	assert_int_equal(f->type, PROTO_HEARTBEAT);
	proto_frame_free(f);
	/* The peer hangs up: on_close from the loop, clean EOF. */
	close(sv[1]);
	run_a_while(loop, &s);
	assert_int_equal(s.closes, 1);
	assert_int_equal(s.clean, 1);
	proto_reader_free(r);
	conn_free(c);
	loop_free(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_send_to_closed_peer),
		cmocka_unit_test(test_free_cancels_pending_close),
		cmocka_unit_test(test_send_to_live_peer),
	};

	/* A write to a closed socket must fail with EPIPE, not kill us. */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
