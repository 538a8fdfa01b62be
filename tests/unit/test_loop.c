/* test_loop.c — the event loop: fds, timers, wake-ups, removal from
 * inside callbacks. */
#include <poll.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "herd/loop.h"

struct counts {
	int reads, timers, wakes;
	int fd;
};

static void on_read(struct loop *loop, int fd, short revents, void *arg)
{
	struct counts *c = arg;
	char buf[16];

	(void)revents;
	if (read(fd, buf, sizeof(buf)) > 0)
		c->reads++;
	loop_fd_del(loop, fd);
}

static void on_timer_stop(struct loop *loop, void *arg)
{
	struct counts *c = arg;

	c->timers++;
	loop_stop(loop);
}

static void on_timer_write(struct loop *loop, void *arg)
{
	struct counts *c = arg;

	(void)loop;
	c->timers++;
	assert_int_equal(write(c->fd, "x", 1), 1);
}

static void test_fd_and_timers(void **state)
{
	struct loop *loop = loop_new();
	struct counts c = {0};
	int p[2];
	int64_t t0 = loop_now_ms();

	(void)state;
	assert_non_null(loop);
	assert_int_equal(pipe(p), 0);
	c.fd = p[1];
	assert_int_equal(loop_fd_add(loop, p[0], POLLIN, on_read, &c), 0);
	assert_true(loop_timer_add(loop, 10, on_timer_write, &c) > 0);
	assert_true(loop_timer_add(loop, 50, on_timer_stop, &c) > 0);
	long gone = loop_timer_add(loop, 20, on_timer_stop, &c);
	loop_timer_del(loop, gone);
	assert_int_equal(loop_run(loop), 0);
	assert_int_equal(c.reads, 1);
	assert_int_equal(c.timers, 2);
	assert_true(loop_now_ms() - t0 >= 50);
	close(p[0]);
	close(p[1]);
	loop_free(loop);
}

static void on_wake(struct loop *loop, void *arg)
{
	struct counts *c = arg;

	c->wakes++;
	loop_stop(loop);
}

static void test_wake(void **state)
{
	struct loop *loop = loop_new();
	struct counts c = {0};

	(void)state;
	loop_on_wake(loop, on_wake, &c);
	loop_wake(loop);
	assert_int_equal(loop_run(loop), 0);
	assert_int_equal(c.wakes, 1);
	loop_free(loop);
}

static void on_usr1(struct loop *loop, int sig, void *arg)
{
	struct counts *c = arg;

	assert_int_equal(sig, SIGUSR1);
	c->wakes++;
	loop_stop(loop);
}

static void test_signal(void **state)
{
	struct loop *loop = loop_new();
	struct counts c = {0};

	(void)state;
	assert_int_equal(loop_on_signal(loop, SIGUSR1, on_usr1, &c), 0);
	assert_int_equal(raise(SIGUSR1), 0);
	assert_int_equal(loop_run(loop), 0);
	assert_int_equal(c.wakes, 1);
	assert_int_equal(loop_on_signal(loop, 0, on_usr1, &c), -1);
	loop_free(loop);	/* SIGUSR1 is back to its default */
	assert_true(signal(SIGUSR1, SIG_DFL) == SIG_DFL);
}

/* Issue 11 item 4: a loop_stop() before loop_run() (the agent's HELLO
 * failing with EPIPE) must not be lost, or the run never ends. */
static void test_stop_before_run(void **state)
{
	struct loop *loop = loop_new();
	struct counts c = {0};
	int64_t t0;

	(void)state;
	assert_non_null(loop);
	/* The backstop: a lost stop ends here after 2 s, with timers == 1. */
	assert_true(loop_timer_add(loop, 2000, on_timer_stop, &c) > 0);
	loop_stop(loop);
	t0 = loop_now_ms();
	assert_int_equal(loop_run(loop), 0);
	assert_int_equal(c.timers, 0);
	assert_true(loop_now_ms() - t0 < 1000);
	/* The stop is used up: the next run runs until the timer stops it. */
	assert_int_equal(loop_run(loop), 0);
	assert_int_equal(c.timers, 1);
	loop_free(loop);
}

/* nohup: an inherited SIG_IGN stays; otherwise the handler goes in. */
static void test_signal_unless_ignored(void **state)
{
	struct loop *loop = loop_new();
	struct counts c = {0};
	struct sigaction now;

	(void)state;
	signal(SIGUSR1, SIG_IGN);
	assert_int_equal(loop_on_signal_unless_ignored(loop, SIGUSR1, on_usr1,
						       &c),
			 1);
	assert_int_equal(sigaction(SIGUSR1, NULL, &now), 0);
	assert_true(now.sa_handler == SIG_IGN);
	assert_int_equal(raise(SIGUSR1), 0);	/* ignored: nothing happens */
	signal(SIGUSR1, SIG_DFL);
	assert_int_equal(loop_on_signal_unless_ignored(loop, SIGUSR1, on_usr1,
						       &c),
			 0);
	assert_int_equal(raise(SIGUSR1), 0);
	assert_int_equal(loop_run(loop), 0);
	assert_int_equal(c.wakes, 1);
	loop_free(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fd_and_timers),
		cmocka_unit_test(test_wake),
		cmocka_unit_test(test_stop_before_run),
		cmocka_unit_test(test_signal),
		cmocka_unit_test(test_signal_unless_ignored),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
