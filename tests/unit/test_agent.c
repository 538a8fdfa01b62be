/* test_agent.c — the agent's lifecycle table (agent/lifecycle.c), linked
 * with the agent's own objects (all but main.o; agent_send is
 * tests/unit/agent_stub.c's recorder): every (state, event) row, and real
 * ranks through LAUNCH, STOP and their exits. */
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/agent.h"
#include "herd/spec.h"
#include "tests/unit/agent_stub.h"

/* The last STACKS body sent (borrowed), or NULL. */
static json_t *stacks_sent(void)
{
	return agent_stub_last(PROTO_STACKS);
}

/* Posts ev and handles the queue at once, as the loop's next turn
 * would: true when nothing was dropped. */
static bool post_now(struct agent *a, enum agent_event ev, json_t *body)
{
	agent_post(a, ev, body);
	return agent_drain(a) == 0;
}

static int setup(void **state)
{
	struct agent *a = calloc(1, sizeof(*a));

	assert_non_null(a);
	a->loop = loop_new();
	assert_non_null(a->loop);
	assert_int_equal(proc_watch(a->loop), 0);
	a->grace_ms = 10000;
	agent_stub_reset();
	*state = a;
	return 0;
}

static int teardown(void **state)
{
	struct agent *a = *state;

	rank_signal_all(a, SIGKILL);
	while (proc_reap(a->loop) > 0)
		poll(NULL, 0, 10);
	rank_free_all(a);
	if (a->kill_timer)
		loop_timer_del(a->loop, a->kill_timer);
	agent_queue_clear(a);
	if (a->conn)
		conn_free(a->conn);
	loop_free(a->loop);
	if (a->keeper_tried && a->keeper_fd >= 0)
		close(a->keeper_fd);
	free(a);
	return 0;
}

/* ---- the table, row by row (no ranks) ------------------------------------- */

struct row_case {
	enum agent_state from;
	enum agent_event ev;
	bool accepted;
	enum agent_state to;
	int stopped; /* STOPPED frames sent */
};

/* Every (state, event) but LAUNCH (which needs ranks; see below), on an
 * agent with no rank. */
static const struct row_case rows[] = {
	{AGENT_IDLE, AGENT_EV_STOP, true, AGENT_IDLE, 1},
	{AGENT_IDLE, AGENT_EV_STOP_EXIT, true, AGENT_EXITING, 1},
	{AGENT_IDLE, AGENT_EV_HERD_GONE, true, AGENT_EXITING, 0},
	{AGENT_IDLE, AGENT_EV_HERD_SILENT, true, AGENT_EXITING, 0},
	{AGENT_IDLE, AGENT_EV_RANKS_GONE, true, AGENT_IDLE, 0},
	{AGENT_RUNNING, AGENT_EV_STOP, true, AGENT_STOPPING, 1},
	{AGENT_RUNNING, AGENT_EV_STOP_EXIT, true, AGENT_EXITING, 1},
	{AGENT_RUNNING, AGENT_EV_HERD_GONE, true, AGENT_EXITING, 0},
	{AGENT_RUNNING, AGENT_EV_HERD_SILENT, true, AGENT_EXITING, 0},
	{AGENT_RUNNING, AGENT_EV_RANKS_GONE, true, AGENT_IDLE, 0},
	{AGENT_STOPPING, AGENT_EV_LAUNCH, false, AGENT_STOPPING, 0},
	{AGENT_STOPPING, AGENT_EV_STOP, true, AGENT_STOPPING, 1},
	{AGENT_STOPPING, AGENT_EV_STOP_EXIT, true, AGENT_EXITING, 1},
	{AGENT_STOPPING, AGENT_EV_HERD_GONE, true, AGENT_EXITING, 0},
	{AGENT_STOPPING, AGENT_EV_HERD_SILENT, true, AGENT_EXITING, 0},
	{AGENT_STOPPING, AGENT_EV_RANKS_GONE, true, AGENT_IDLE, 1},
	{AGENT_EXITING, AGENT_EV_LAUNCH, false, AGENT_EXITING, 0},
	{AGENT_EXITING, AGENT_EV_STOP, true, AGENT_EXITING, 1},
	{AGENT_EXITING, AGENT_EV_STOP_EXIT, true, AGENT_EXITING, 1},
	{AGENT_EXITING, AGENT_EV_HERD_GONE, true, AGENT_EXITING, 0},
	{AGENT_EXITING, AGENT_EV_HERD_SILENT, false, AGENT_EXITING, 0},
	{AGENT_EXITING, AGENT_EV_RANKS_GONE, true, AGENT_EXITING, 1},
};

static void test_rows(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct agent *a;
		bool got;

		setup((void **)&a);
		a->state = rows[i].from;
		agent_post(a, rows[i].ev, NULL);
		got = agent_drain(a) == 0;
		if (got != rows[i].accepted || a->state != rows[i].to ||
		    agent_stub_count(PROTO_STOPPED) != rows[i].stopped)
			fail_msg("row %zu: %s + event %d: accepted %d, now %s, "
				 "%d STOPPED",
				 i, agent_state_name(rows[i].from), rows[i].ev,
				 got, agent_state_name(a->state),
				 agent_stub_count(PROTO_STOPPED));
		teardown((void **)&a);
	}
}

/* ---- with real ranks -------------------------------------------------------- */

static void on_deadline(struct loop *loop, void *arg)
{
	*(int *)arg = 1;
	loop_stop(loop);
}

/* An action's post is handled after that action and before what was
 * queued already: LAUNCH with nothing to start posts RANKS_GONE (back
 * to IDLE), which comes before the STOP queued behind the LAUNCH, so
 * the STOP finds the agent IDLE (one STOPPED), not RUNNING (a second
 * STOPPED from STOPPING's RANKS_GONE). */
static void test_post_in_action_runs_after(void **state)
{
	struct agent *a = *state;
	json_t *body = json_pack("{s:i, s:[]}", "attempt", 1, "ranks");

	agent_post(a, AGENT_EV_LAUNCH, body);
	agent_post(a, AGENT_EV_STOP, NULL);
	json_decref(body);
	/* Queued, not handled: nothing sent, the state as it was. */
	assert_int_equal(a->state, AGENT_IDLE);
	assert_int_equal(agent_stub.n, 0);
	assert_int_equal(agent_drain(a), 0);
	assert_int_equal(a->state, AGENT_IDLE);
	assert_int_equal(agent_stub.n, 2);
	assert_int_equal(agent_stub.type[0], PROTO_ERROR);
	assert_int_equal(agent_stub.type[1], PROTO_STOPPED);
}

/* A posted event is handled from the loop by itself. */
static void test_post_drained_by_loop(void **state)
{
	struct agent *a = *state;

	int fired = 0;
	long t = loop_timer_add(a->loop, 20000, on_deadline, &fired);

	agent_post(a, AGENT_EV_HERD_GONE, NULL);
	assert_int_equal(a->state, AGENT_IDLE);
	/* EXITING with no rank: the drain stops the loop. */
	assert_int_equal(loop_run(a->loop), 0);
	loop_timer_del(a->loop, t);
	assert_false(fired);
	assert_int_equal(a->state, AGENT_EXITING);
	assert_int_equal(a->drain_timer, 0);
}

/* A frame outside the protocol: herd hears why, and the close it means
 * is handled after the frame handler returns, not inside it. */
static void test_close_in_frame_deferred(void **state)
{
	struct agent *a = *state;
	struct proto_frame *f = calloc(1, sizeof(*f));
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	a->conn = conn_new(a->loop, sv[0], sv[0], PROTO_FRAME_MAX,
			   agent_on_frame, agent_on_close, a);
	assert_non_null(a->conn);
	assert_non_null(f);
	f->type = PROTO_HELLO; /* agent -> herd only */
	f->body = json_object();
	agent_on_frame(a->conn, f, a);
	assert_int_equal(agent_stub_count(PROTO_ERROR), 1);
	assert_int_equal(a->state, AGENT_IDLE);
	assert_int_equal(agent_drain(a), 0);
	assert_int_equal(a->state, AGENT_EXITING);
	close(sv[1]);
}

struct wait_for {
	struct agent *a;
	enum agent_state want;
	int need_exits;
};

static void on_poll(struct loop *loop, void *arg)
{
	struct wait_for *w = arg;

	if (w->a->state == w->want &&
	    agent_stub_count(PROTO_EXIT) >= w->need_exits)
		loop_stop(loop);
	else
		loop_timer_add(loop, 10, on_poll, w);
}

/* Runs the agent's loop until it is in state want with need_exits EXIT
 * frames sent, within 20 s. */
static void run_until(struct agent *a, enum agent_state want, int need_exits)
{
	struct wait_for w = {a, want, need_exits};
	int fired = 0;
	long t = loop_timer_add(a->loop, 20000, on_deadline, &fired);

	loop_timer_add(a->loop, 0, on_poll, &w);
	assert_int_equal(loop_run(a->loop), 0);
	loop_timer_del(a->loop, t);
	assert_false(fired);
}

static json_t *launch_body(const char *command, int n)
{
	json_t *ranks = json_array();

	for (int i = 0; i < n; i++)
		json_array_append_new(ranks, json_pack("{s:i}", "rank", i));
	return json_pack("{s:i, s:s, s:o, s:i}", "attempt", 1, "command",
			 command, "ranks", ranks, "grace_ms", 5000);
}

static void test_launch_stop_relaunch(void **state)
{
	struct agent *a = *state;
	json_t *body = launch_body("exec sleep 30", 2);

	assert_true(post_now(a, AGENT_EV_LAUNCH, body));
	assert_int_equal(a->state, AGENT_RUNNING);
	assert_int_equal(rank_alive_count(a), 2);
	/* A second LAUNCH while ranks run: refused with an ERROR. */
	assert_true(post_now(a, AGENT_EV_LAUNCH, body));
	assert_int_equal(a->state, AGENT_RUNNING);
	assert_int_equal(agent_stub_count(PROTO_ERROR), 1);

	a->stop_signal = SIGTERM;
	assert_true(post_now(a, AGENT_EV_STOP, NULL));
	assert_int_equal(a->state, AGENT_STOPPING);
	assert_false(post_now(a, AGENT_EV_LAUNCH, body));
	run_until(a, AGENT_IDLE, 2);
	assert_int_equal(agent_stub_count(PROTO_EXIT), 2);
	assert_int_equal(agent_stub_count(PROTO_STOPPED), 1);
	assert_int_equal(a->kill_timer, 0);

	/* Welcome again after STOPPED. */
	assert_true(post_now(a, AGENT_EV_LAUNCH, body));
	assert_int_equal(a->state, AGENT_RUNNING);
	json_decref(body);
}

static void test_ranks_end_by_themselves(void **state)
{
	struct agent *a = *state;
	json_t *body = launch_body("exit 3", 3);

	assert_true(post_now(a, AGENT_EV_LAUNCH, body));
	run_until(a, AGENT_IDLE, 3);
	/* No STOP was asked: no STOPPED. */
	assert_int_equal(agent_stub_count(PROTO_STOPPED), 0);
	json_decref(body);
}

static void test_launch_nothing_started(void **state)
{
	struct agent *a = *state;
	json_t *body = json_pack("{s:i, s:[]}", "attempt", 1, "ranks");

	/* No command: an ERROR, and the agent stays IDLE. */
	assert_true(post_now(a, AGENT_EV_LAUNCH, body));
	assert_int_equal(a->state, AGENT_IDLE);
	assert_int_equal(agent_stub_count(PROTO_ERROR), 1);
	json_decref(body);
}

static void test_herd_gone_exits_after_ranks(void **state)
{
	struct agent *a = *state;
	json_t *body = launch_body("exec sleep 30", 1);

	assert_true(post_now(a, AGENT_EV_LAUNCH, body));
	assert_true(post_now(a, AGENT_EV_HERD_GONE, NULL));
	assert_int_equal(a->state, AGENT_EXITING);
	/* The loop stops by itself once the rank is gone. */
	run_until(a, AGENT_EXITING, 1);
	assert_int_equal(rank_alive_count(a), 0);
	json_decref(body);
}

/* Launches one rank and returns its keeper's /proc/PID/exe into exe,
 * after checking that the keeper is an exec, not a fork of the agent: its
 * cmdline is the keeper mode, argv[0] the agent's path. */
static void keeper_exe(struct agent *a, char *exe, size_t len)
{
	json_t *body = launch_body("exec sleep 30", 1);
	char path[64], cmd[256];
	const char expect[] = "--keeper\0--rank\0" "0";
	ssize_t n = 0;
	FILE *f;

	snprintf(a->self_path, sizeof(a->self_path), "test_agent");
	assert_true(post_now(a, AGENT_EV_LAUNCH, body));
	assert_int_equal(rank_alive_count(a), 1);
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)a->ranks[0].pid);
	/* Bounded: the exec follows the fork within milliseconds. */
	for (int i = 0; i < 2000; i++) {
		f = fopen(path, "r");
		assert_non_null(f);
		n = (ssize_t)fread(cmd, 1, sizeof(cmd), f);
		fclose(f);
		if (n > 11 && !memcmp(cmd, "test_agent", 11))
			break;
		poll(NULL, 0, 10);
	}
	assert_int_equal(n, 11 + (ssize_t)sizeof(expect));
	assert_memory_equal(cmd, "test_agent", 11);
	assert_memory_equal(cmd + 11, expect, sizeof(expect));
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)a->ranks[0].pid);
	memset(exe, 0, len);
	assert_true(readlink(path, exe, len - 1) > 0);
	json_decref(body);
}

/* The keeper is the small program embedded in the agent, exec'd from a
 * sealed memfd (agent/keeper.c). */
static void test_keeper_is_embedded_exec(void **state)
{
	struct agent *a = *state;
	char got[4096];

	keeper_exe(a, got, sizeof(got));
	assert_true(a->keeper_tried);
	assert_true(a->keeper_fd > 2);
	assert_int_equal(fcntl(a->keeper_fd, F_GET_SEALS),
			 F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE |
			     F_SEAL_SEAL);
	assert_string_equal(got, "/memfd:herd-keeper (deleted)");
}

/* Where no memfd could be made, the keeper is the agent's own image in
 * keeper mode (here: this test program, whose main hands --keeper to
 * keeper_main as herd-agent's does). */
static void test_keeper_fallback_is_self(void **state)
{
	struct agent *a = *state;
	char want[4096] = "", got[4096];

	a->keeper_tried = true;
	a->keeper_fd = -1;
	keeper_exe(a, got, sizeof(got));
	assert_true(readlink("/proc/self/exe", want, sizeof(want) - 1) > 0);
	assert_string_equal(got, want);
}

static void test_dispatch_default_is_error(void **state)
{
	struct agent *a = *state;
	struct proto_frame f = {.type = PROTO_HELLO, .body = json_object()};

	agent_dispatch(a, &f);
	assert_int_equal(agent_stub_count(PROTO_ERROR), 1);
	f.type = (enum proto_type)200;
	agent_dispatch(a, &f);
	assert_int_equal(agent_stub_count(PROTO_ERROR), 2);
	json_decref(f.body);
}

/* ---- heartbeats (health.c) -------------------------------------------- */

/* herd's HEARTBEAT, as agent/main.c's on_frame takes it. */
static void herd_says_heartbeat(struct agent *a, json_int_t iv, json_int_t to)
{
	json_t *b = json_pack("{s:I, s:I}", "interval_ms", iv, "timeout_ms", to);

	health_heard(a);
	health_on_heartbeat(a, b);
	json_decref(b);
}

/* The agent's HEARTBEATs: how many, and the longest gap between two. */
static int heartbeats(int64_t *max_gap)
{
	int64_t last = -1;
	int n = 0;

	*max_gap = 0;
	for (int i = 0; i < agent_stub.n; i++) {
		if (agent_stub.type[i] != PROTO_HEARTBEAT)
			continue;
		if (last >= 0 && agent_stub.ms[i] - last > *max_gap)
			*max_gap = agent_stub.ms[i] - last;
		last = agent_stub.ms[i];
		n++;
	}
	return n;
}

struct fake_herd {
	struct agent *a;
	json_int_t iv, to;
	int64_t every;
	int left, beats, answered;
};

static void herd_beat(struct loop *loop, void *arg)
{
	struct fake_herd *h = arg;
	int64_t gap;
	int before = heartbeats(&gap);

	herd_says_heartbeat(h->a, h->iv, h->to);
	h->beats++;
	if (heartbeats(&gap) == before + 1)
		h->answered++;
	/* herd has a fresh one: the answer, or the agent's own timer's of
	 * less than half an interval ago. */
	assert_true(loop_now_ms() - h->a->hb_sent_ms <= h->iv / 2);
	if (--h->left > 0)
		loop_timer_add(loop, h->every, herd_beat, h);
	else
		loop_stop(loop);
}

/* The agent answers herd's beat at once and times its own from the
 * answer: one heartbeat per interval (none twice), the agent's timer
 * filling in between herd's beats (herd beats every SPEC_HERD_BEATS
 * intervals), no gap longer than the interval (plus a loaded machine's
 * lateness). */
static void test_heartbeat_answers_herd(void **state)
{
	struct agent *a = *state;
	struct fake_herd h = {a, 300, 10000, SPEC_HERD_BEATS * 300 - 10, 6,
			      0, 0};
	int64_t gap;
	int n;

	a->herd_fd = -1;
	unsetenv("SSH_CONNECTION");
	herd_says_heartbeat(a, h.iv, h.to);
	loop_timer_add(a->loop, h.every, herd_beat, &h);
	assert_int_equal(loop_run(a->loop), 0);
	n = heartbeats(&gap);
	assert_int_equal(h.beats, 6);
	/* Each beat is answered unless the agent's timer, due at the same
	 * moment, won the race (a loaded machine): then it was not needed. */
	assert_true(h.answered >= h.beats / 2);
	/* The first at once, then SPEC_HERD_BEATS per beat of herd's, not
	 * one per beat (answers only) nor more (answers on top). */
	assert_true(n >= SPEC_HERD_BEATS * h.beats - 1);
	assert_true(n <= SPEC_HERD_BEATS * h.beats + 2);
	assert_true(gap <= h.iv + 200);
	assert_int_equal(a->state, AGENT_IDLE);
}

/* herd falls silent: the agent's own timer goes on beating every
 * interval, and it gives up on herd (no connection to look at: the
 * silence decides) after spec_herd_silence_limit_ms, herd's rule with
 * herd's interval, not before. */
static void test_heartbeat_herd_silent(void **state)
{
	struct agent *a = *state;
	const json_int_t iv = 100, to = 300;
	int64_t t0, took, gap;
	long limit = spec_herd_silence_limit_ms(to, iv);

	a->herd_fd = -1;
	unsetenv("SSH_CONNECTION");
	assert_int_equal(limit, to + SPEC_HERD_BEATS * iv + SPEC_SILENCE_RTO_MS);
	t0 = loop_now_ms();
	herd_says_heartbeat(a, iv, to);
	run_until(a, AGENT_EXITING, 0);
	took = loop_now_ms() - t0;
	assert_true(took >= limit);
	assert_true(took <= limit + 2000);
	assert_true(heartbeats(&gap) >= 5);
	assert_true(gap <= iv + 200);
}

/* ---- stacks (issue 14) -------------------------------------------------------- */

static void parse_lines(struct stack_parse *p, const char *const *lines)
{
	for (; *lines; lines++)
		stack_parse_line(p, *lines);
	stack_parse_end(p);
}

/* faulthandler's dump: the main thread is the block whose outermost
 * frame is <module>, whichever thread took the signal; lines before
 * "Fatal Python error" (the rank's own traceback) are not read. */
static void test_parse_python(void **state)
{
	static const char *const stuck[] = {
	    "Traceback (most recent call last):",
	    "  File \"old.py\", line 3 in earlier",
	    "Fatal Python error: Aborted",
	    "",
	    "Thread 0x00007f0000000700 (most recent call first):",
	    "  File \"/usr/lib/python3.11/threading.py\", line 320 in wait",
	    "  File \"/usr/lib/python3.11/threading.py\", line 1002 in "
	    "_bootstrap",
	    "",
	    "Current thread 0x00007f2e61514040 (most recent call first):",
	    "  File \"/job/train.py\", line 41 in stuck_in_data_loader",
	    "  File \"/job/train.py\", line 67 in main",
	    "  File \"/job/train.py\", line 80 in <module>",
	    "",
	    "Extension modules: torch._C (total: 1)",
	    NULL};
	static const char *const coll[] = {
	    "Fatal Python error: Aborted",
	    "",
	    "Current thread 0x00007f2e61514040 [python3] (most recent call "
	    "first):",
	    "  File \"/usr/lib/python3/dist-packages/torch/distributed/"
	    "distributed_c10d.py\", line 1541 in all_reduce",
	    "  File \"/job/train.py\", line 80 in <module>",
	    NULL};
	static const char *const no_module[] = {
	    "Fatal Python error: Aborted",
	    "Stack (most recent call first):",
	    "  File \"/job/x.py\", line 9 in spin",
	    "  ...",
	    NULL};
	struct stack_parse p;

	(void)state;
	stack_parse_init(&p, STACK_PYTHON);
	parse_lines(&p, stuck);
	assert_true(p.found);
	assert_string_equal(p.frame, "stuck_in_data_loader (train.py:41)");
	assert_false(p.in_collective);
	stack_parse_init(&p, STACK_PYTHON);
	parse_lines(&p, coll);
	assert_string_equal(p.frame, "all_reduce (distributed_c10d.py:1541)");
	assert_true(p.in_collective);
	/* No <module> (a thread-only program): the first block. */
	stack_parse_init(&p, STACK_PYTHON);
	parse_lines(&p, no_module);
	assert_true(p.found);
	assert_string_equal(p.frame, "spin (x.py:9)");
	/* Nothing printed (the process died first). */
	stack_parse_init(&p, STACK_PYTHON);
	stack_parse_end(&p);
	assert_false(p.found);
}

/* A warm rank whose script raised (its peer died of its own SIGABRT a
 * moment earlier) is back in herd's bootstrap, printing the traceback:
 * outside its script, no frame to blame, not "in run (warm_boot.py)".
 * The same file name elsewhere is the user's own. */
static void test_parse_python_warm_boot(void **state)
{
	static const char *const raised[] = {
	    "Fatal Python error: Aborted",
	    "",
	    "Current thread 0x00007f2e61514040 (most recent call first):",
	    "  File \"/run/herd/a1/warm_boot.py\", line 319 in run",
	    "  File \"/run/herd/a1/warm_boot.py\", line 340 in main",
	    "  File \"/run/herd/a1/warm_boot.py\", line 352 in <module>",
	    NULL};
	static const char *const users[] = {
	    "Fatal Python error: Aborted",
	    "",
	    "Current thread 0x00007f2e61514040 (most recent call first):",
	    "  File \"/job/warm_boot.py\", line 7 in spin",
	    "  File \"/run/herd/a1/warm_boot.py\", line 311 in run",
	    "  File \"/run/herd/a1/warm_boot.py\", line 352 in <module>",
	    NULL};
	struct stack_parse p;

	(void)state;
	stack_parse_init(&p, STACK_PYTHON);
	p.boot = "/run/herd/a1/warm_boot.py";
	parse_lines(&p, raised);
	assert_true(p.found);
	assert_string_equal(p.frame, "");
	assert_int_equal(p.outside_line, 319);
	assert_false(p.in_collective);
	stack_parse_init(&p, STACK_PYTHON);
	p.boot = "/run/herd/a1/warm_boot.py";
	parse_lines(&p, users);
	assert_string_equal(p.frame, "spin (warm_boot.py:7)");
	assert_int_equal(p.outside_line, 0);
}

/* gdb's `thread apply all bt`: thread 1's innermost frame of the program
 * itself (not libc's, even with its debug information), collectives
 * anywhere in thread 1. */
static void test_parse_gdb(void **state)
{
	static const char *const native[] = {
	    "[Thread debugging using libthread_db enabled]",
	    "0x00007f8de6e42dd0 in __libc_pause () at "
	    "../sysdeps/unix/sysv/linux/pause.c:29",
	    "",
	    "Thread 2 (Thread 0x7f8de5d6b6c0 (LWP 23314) \"worker\"):",
	    "#0  0x00007f8de6e9e3bf in __GI___poll () from "
	    "/lib/x86_64-linux-gnu/libc.so.6",
	    "#1  0x000055adf45e9180 in io_thread (arg=0x0) at io.c:5",
	    "",
	    "Thread 1 (Thread 0x7f8de6d6c740 (LWP 23313) \"stuck\"):",
	    "#0  0x00007f8de6e42dd0 in __libc_pause () at "
	    "../sysdeps/unix/sysv/linux/pause.c:29",
	    "#1  0x000055adf45e9172 in stuck_in_native_loop () at "
	    "/job/stuck.c:10",
	    "#2  0x000055adf45e91a7 in main () at /job/stuck.c:17",
	    "[Inferior 1 (process 23313) detached]",
	    NULL};
	static const char *const mpi[] = {
	    "Thread 1 (Thread 0x7f0 (LWP 9) \"allreduce\"):",
	    "#0  0x00007f1 in poll () from /lib/x86_64-linux-gnu/libc.so.6",
	    "#1  0x00007f2 in opal_progress () from "
	    "/usr/lib/x86_64-linux-gnu/libopen-pal.so.40",
	    "#2  0x00007f3 in PMPI_Allreduce () from "
	    "/usr/lib/x86_64-linux-gnu/libmpi.so.40",
	    "#3  main (argc=1, argv=0x7ff) at allreduce.c:30",
	    NULL};
	static const char *const bare[] = {
	    "Thread 1 (process 77):",
	    "#0  0x00007f1 in pause () from /lib/x86_64-linux-gnu/libc.so.6",
	    "#1  0x0000401 in ?? ()",
	    NULL};
	struct stack_parse p;

	(void)state;
	stack_parse_init(&p, STACK_GDB);
	parse_lines(&p, native);
	assert_true(p.found);
	assert_string_equal(p.frame, "stuck_in_native_loop (stuck.c:10)");
	assert_false(p.in_collective);
	stack_parse_init(&p, STACK_GDB);
	parse_lines(&p, mpi);
	assert_string_equal(p.frame, "main (allreduce.c:30)");
	assert_true(p.in_collective);
	/* No debug information: the innermost frame, and its library. */
	stack_parse_init(&p, STACK_GDB);
	parse_lines(&p, bare);
	assert_string_equal(p.frame, "pause (libc.so.6)");
	assert_false(p.in_collective);
}

static void test_in_collective(void **state)
{
	(void)state;
	assert_true(stacks_in_collective("all_reduce", "/x/train.py"));
	assert_true(stacks_in_collective("barrier", NULL));
	assert_true(stacks_in_collective(
		"wrapper", "/usr/lib/python3/dist-packages/torch/distributed/"
			   "c10d_logger.py"));
	assert_true(stacks_in_collective(
		"backward", "/usr/lib/python3/dist-packages/torch/autograd/"
			    "__init__.py"));
	assert_true(stacks_in_collective("PMPI_Barrier", NULL));
	assert_true(stacks_in_collective("ompi_coll_base_allreduce_intra", ""));
	assert_true(stacks_in_collective(
		"gloo::transport::tcp::UnboundBuffer::waitRecv", ""));
	assert_false(stacks_in_collective("stuck_in_data_loader", "train.py"));
	assert_false(stacks_in_collective("all_reduce_fast_path", "x.py"));
	assert_false(stacks_in_collective("main", "allreduce.c"));
}

/* STACKS with no ranks running (every state but RUNNING, and RUNNING
 * after its ranks ended): answered at once with none, the state kept. */
static void test_stacks_rows(void **state)
{
	static const enum agent_state states[] = {
		AGENT_IDLE, AGENT_RUNNING, AGENT_STOPPING, AGENT_EXITING};
	json_t *body = json_pack("{s:i}", "attempt", 1);

	(void)state;
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
		struct agent *a;

		setup((void **)&a);
		a->state = states[i];
		assert_true(post_now(a, AGENT_EV_STACKS, body));
		assert_int_equal(a->state, states[i]);
		assert_int_equal(agent_stub_count(PROTO_STACKS), 1);
		assert_non_null(stacks_sent());
		assert_int_equal(
			json_array_size(json_object_get(stacks_sent(), "ranks")),
			0);
		teardown((void **)&a);
	}
	json_decref(body);
}

static void on_sent_poll(struct loop *loop, void *arg)
{
	int *want = arg;

	if (agent_stub_count(want[0]) >= want[1])
		loop_stop(loop);
	else
		loop_timer_add(loop, 10, on_sent_poll, want);
}

/* Runs the loop until n frames of type were sent, within 20 s. */
static void run_until_sent(struct agent *a, int type, int n)
{
	int want[2] = {type, n}, fired = 0;
	long t = loop_timer_add(a->loop, 20000, on_deadline, &fired);

	loop_timer_add(a->loop, 0, on_sent_poll, want);
	assert_int_equal(loop_run(a->loop), 0);
	loop_timer_del(a->loop, t);
	assert_false(fired);
}

/* The one rank's answer in the last STACKS. */
static json_t *stacks_of_rank0(void)
{
	json_t *r;

	assert_non_null(stacks_sent());
	assert_int_equal(
	    json_integer_value(json_object_get(stacks_sent(), "attempt")), 1);
	assert_int_equal(
	    json_array_size(json_object_get(stacks_sent(), "ranks")), 1);
	r = json_array_get(json_object_get(stacks_sent(), "ranks"), 0);
	assert_int_equal(json_integer_value(json_object_get(r, "rank")), 0);
	return r;
}

static void ask_stacks(struct agent *a)
{
	json_t *ask = json_pack("{s:i}", "attempt", 1);

	assert_true(post_now(a, AGENT_EV_STACKS, ask));
	json_decref(ask);
	run_until_sent(a, PROTO_STACKS, 1);
}

/* A Python rank under a shell that stays (not exec'd): the agent finds
 * the interpreter below the shell, sends SIGABRT, and reads the main
 * thread's innermost frame from faulthandler's traceback on stderr
 * (PYTHONFAULTHANDLER=1 comes from the agent). */
static void test_stacks_python(void **state)
{
	struct agent *a = *state;
	json_t *body = launch_body(
		"/usr/bin/python3 -c 'import sys, time\n"
		"def stuck_here():\n"
		"    print(\"ready\", flush=True)\n"
		"    time.sleep(60)\n"
		"stuck_here()\n'; echo after",
		1);
	json_t *r;

	assert_true(post_now(a, AGENT_EV_LAUNCH, body));
	run_until_sent(a, PROTO_OUTPUT, 1); /* "ready": Python runs */
	ask_stacks(a);
	r = stacks_of_rank0();
	assert_string_equal(json_string_value(json_object_get(r, "method")),
			    "python");
	assert_string_equal(json_string_value(json_object_get(r, "frame")),
			    "stuck_here (<string>:4)");
	assert_true(json_is_false(json_object_get(r, "in_collective")));
	assert_true(json_integer_value(json_object_get(r, "last_sign_ms")) >
		    0);
	json_decref(body);
}

/* The rank below keeper pid k once it is `exec sleep` (bounded: 5 s);
 * its /proc/PID/stat into stat. */
static pid_t sleeping_rank(pid_t k, char *stat, size_t size)
{
	for (int i = 0; i < 500; i++) {
		char path[64], buf[64] = "";
		FILE *f;
		long child = 0;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/children",
			 (int)k, (int)k);
		f = fopen(path, "r");
		if (f) {
			if (fscanf(f, "%ld", &child) != 1)
				child = 0;
			fclose(f);
		}
		if (child > 0) {
			snprintf(path, sizeof(path), "/proc/%ld/comm", child);
			f = fopen(path, "r");
			if (f) {
				if (!fgets(buf, sizeof(buf), f))
					buf[0] = '\0';
				fclose(f);
			}
			snprintf(path, sizeof(path), "/proc/%ld/stat", child);
			f = fopen(path, "r");
			stat[0] = '\0';
			if (f) {
				if (!fgets(stat, (int)size, f))
					stat[0] = '\0';
				fclose(f);
			}
			if (!strcmp(buf, "sleep\n"))
				return (pid_t)child;
		}
		poll(NULL, 0, 10);
	}
	fail_msg("no sleep below keeper %d", (int)k);
	return -1;
}

/* A native rank: gdb's backtrace goes to herd as the rank's stderr,
 * after herd's line naming it. */
static void test_stacks_gdb(void **state)
{
	struct agent *a = *state;
	json_t *body = launch_body("exec sleep 60", 1), *r;
	char stat[512];
	int outputs;

	assert_true(post_now(a, AGENT_EV_LAUNCH, body));
	sleeping_rank(a->ranks[0].pid, stat, sizeof(stat));
	outputs = agent_stub_count(PROTO_OUTPUT);
	ask_stacks(a);
	r = stacks_of_rank0();
	assert_string_equal(json_string_value(json_object_get(r, "method")),
			    "gdb");
	assert_non_null(json_string_value(json_object_get(r, "frame")));
	assert_true(agent_stub_count(PROTO_OUTPUT) > outputs + 1);
	json_decref(body);
}

/* A stopped rank can give no stack: said at once. */
static void test_stacks_stopped(void **state)
{
	struct agent *a = *state;
	json_t *body = launch_body("exec sleep 60", 1), *r;
	char stat[512] = "";
	pid_t pid;

	assert_true(post_now(a, AGENT_EV_LAUNCH, body));
	pid = sleeping_rank(a->ranks[0].pid, stat, sizeof(stat));
	kill(pid, SIGSTOP);
	/* Bounded: until it shows state T. */
	for (int i = 0; i < 500 && !strstr(stat, ") T "); i++) {
		char path[64];
		FILE *f;

		poll(NULL, 0, 10);
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(stat, sizeof(stat), f))
			stat[0] = '\0';
		fclose(f);
	}
	ask_stacks(a);
	r = stacks_of_rank0();
	assert_string_equal(json_string_value(json_object_get(r, "method")),
			    "none");
	assert_non_null(strstr(json_string_value(json_object_get(r, "error")),
			       "is stopped"));
	kill(pid, SIGCONT);
	json_decref(body);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rows),
		cmocka_unit_test_setup_teardown(test_post_in_action_runs_after,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_post_drained_by_loop,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_in_frame_deferred,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_launch_stop_relaunch,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_ranks_end_by_themselves,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_launch_nothing_started,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_herd_gone_exits_after_ranks,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_keeper_is_embedded_exec, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_keeper_fallback_is_self, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_dispatch_default_is_error,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_heartbeat_answers_herd,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_heartbeat_herd_silent,
						setup, teardown),
		cmocka_unit_test(test_parse_python),
		cmocka_unit_test(test_parse_python_warm_boot),
		cmocka_unit_test(test_parse_gdb),
		cmocka_unit_test(test_in_collective),
		cmocka_unit_test(test_stacks_rows),
		cmocka_unit_test_setup_teardown(test_stacks_python, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_stacks_gdb, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_stacks_stopped, setup,
						teardown),
	};

	/* The ranks' keepers exec this program (/proc/self/exe) in keeper
	 * mode, as they exec herd-agent. */
	if (argc > 1 && !strcmp(argv[1], KEEPER_ARG))
		return keeper_main(argc, argv);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
