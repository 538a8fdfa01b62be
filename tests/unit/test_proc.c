/* test_proc.c — child processes: exit statuses and signals reach on_exit
 * from the loop, set-up failures come back with their errno, many
 * children at once, and a child nobody registered is reaped too. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "herd/proc.h"

struct seen {
	int exits;
	int want;
	struct proc_exit last;
};

static void on_exit_count(struct loop *loop, const struct proc_exit *e,
			  void *arg)
{
	struct seen *s = arg;

	s->exits++;
	s->last = *e;
	if (s->exits >= s->want)
		loop_stop(loop);
}

static void on_deadline(struct loop *loop, void *arg)
{
	int *fired = arg;

	*fired = 1;
	loop_stop(loop);
}

/* Runs the loop until s->want exits, within 20 s (a loaded machine
 * under ASan); fails the test at the deadline. */
static void run_until(struct loop *loop, struct seen *s)
{
	int fired = 0;
	long t = loop_timer_add(loop, 20000, on_deadline, &fired);

	while (s->exits < s->want && !fired)
		assert_int_equal(loop_run(loop), 0);
	loop_timer_del(loop, t);
	assert_false(fired);
}

static pid_t spawn_sh(struct loop *loop, const char *script,
		      struct proc_opts *o, struct seen *s)
{
	char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
	struct herd_err err = {{0}};
	pid_t pid = proc_spawn(loop, argv, o, on_exit_count, s, &err);

	if (pid < 0)
		fail_msg("proc_spawn: %s", err.text);
	return pid;
}

static void test_exit_status(void **state)
{
	struct loop *loop = loop_new();
	struct proc_opts o = {0};
	struct seen s = {.want = 1};
	pid_t pid;

	(void)state;
	pid = spawn_sh(loop, "exit 7", &o, &s);
	run_until(loop, &s);
	assert_int_equal(s.last.pid, pid);
	assert_true(WIFEXITED(s.last.status));
	assert_int_equal(WEXITSTATUS(s.last.status), 7);
	assert_int_equal(s.last.step, PROC_STEP_NONE);
	loop_free(loop);
}

static void test_signal(void **state)
{
	struct loop *loop = loop_new();
	struct proc_opts o = {0};
	struct seen s = {.want = 1};

	(void)state;
	spawn_sh(loop, "kill -USR1 $$", &o, &s);
	run_until(loop, &s);
	assert_true(WIFSIGNALED(s.last.status));
	assert_int_equal(WTERMSIG(s.last.status), SIGUSR1);
	loop_free(loop);
}

static void test_exec_failure(void **state)
{
	struct loop *loop = loop_new();
	struct proc_opts o = {0};
	struct seen s = {.want = 1};
	char *argv[] = {"/nonexistent/herd-test-program", NULL};
	struct herd_err err = {{0}};

	(void)state;
	assert_true(proc_spawn(loop, argv, &o, on_exit_count, &s, &err) > 0);
	run_until(loop, &s);
	assert_int_equal(s.last.step, PROC_STEP_EXEC);
	assert_int_equal(s.last.err, ENOENT);
	assert_int_equal(WEXITSTATUS(s.last.status), 127);

	/* wait_exec: the failure is proc_spawn's own error. */
	o.wait_exec = true;
	assert_int_equal(proc_spawn(loop, argv, &o, on_exit_count, &s, &err),
			 -1);
	assert_non_null(strstr(err.text, "cannot exec "
					 "/nonexistent/herd-test-program: "));
	assert_non_null(strstr(err.text, strerror(ENOENT)));
	loop_free(loop);
}

static void test_workdir_failure(void **state)
{
	struct loop *loop = loop_new();
	struct proc_opts o = {.workdir = "/nonexistent/herd-test-dir"};
	struct seen s = {.want = 1};

	(void)state;
	spawn_sh(loop, "exit 0", &o, &s);
	run_until(loop, &s);
	assert_int_equal(s.last.step, PROC_STEP_WORKDIR);
	assert_int_equal(s.last.err, ENOENT);
	assert_string_equal(proc_step_what(s.last.step),
			    "cannot enter the workdir");
	loop_free(loop);
}

static void test_pipes_and_group(void **state)
{
	struct loop *loop = loop_new();
	struct proc_opts o = {.io = {[1] = {.kind = PROC_FD_PIPE}}};
	struct seen s = {.want = 1};
	char buf[64] = "";
	int p = 0, g = 0;
	ssize_t n;
	pid_t pid;

	(void)state;
	pid = spawn_sh(loop, "echo $$ $(ps -o pgid= -p $$)", &o, &s);
	run_until(loop, &s);
	n = read(o.io[1].fd, buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_int_equal(sscanf(buf, "%d %d", &p, &g), 2);
	assert_int_equal(p, pid);
	assert_int_equal(g, pid);	/* leads its own group */
	close(o.io[1].fd);
	loop_free(loop);
}

/* An fd herd holds without close-on-exec does not reach the child: once
 * herd closes its write end, the pipe hangs up while the child runs. */
static void test_fds_closed(void **state)
{
	struct loop *loop = loop_new();
	struct proc_opts o = {0};
	struct seen s = {.want = 1};
	struct pollfd pfd;
	int p[2];
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(p), 0);
	pid = spawn_sh(loop, "sleep 30", &o, &s);
	close(p[1]);
	pfd = (struct pollfd){.fd = p[0], .events = POLLIN};
	assert_int_equal(poll(&pfd, 1, 20000), 1);
	assert_true(pfd.revents & POLLHUP);
	kill(pid, SIGKILL);
	run_until(loop, &s);
	assert_int_equal(WTERMSIG(s.last.status), SIGKILL);
	close(p[0]);
	loop_free(loop);
}

static void test_many_children(void **state)
{
	struct loop *loop = loop_new();
	struct seen s = {.want = 64};

	(void)state;
	for (int i = 0; i < 64; i++) {
		struct proc_opts o = {0};

		spawn_sh(loop, "exit 3", &o, &s);
	}
	run_until(loop, &s);
	assert_int_equal(s.exits, 64);
	assert_int_equal(proc_reap(loop), 0);
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
	loop_free(loop);
}

static void test_unregistered_reaped(void **state)
{
	struct loop *loop = loop_new();
	struct proc_opts o = {0};
	struct seen s = {.want = 1};
	pid_t stray;

	(void)state;
	assert_int_equal(proc_watch(loop), 0);
	stray = fork();
	if (stray == 0)
		_exit(0);
	assert_true(stray > 0);
	/* A registered child that exits after the stray: once its exit
	 * is seen, the stray must be gone too (no zombie). */
	spawn_sh(loop, "sleep 0.2", &o, &s);
	run_until(loop, &s);
	errno = 0;
	assert_int_equal(waitpid(stray, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
	loop_free(loop);
}

static void test_forget(void **state)
{
	struct loop *loop = loop_new();
	struct proc_opts o = {0};
	struct seen s = {.want = 1}, never = {.want = 1};
	pid_t pid;

	(void)state;
	pid = spawn_sh(loop, "exit 0", &o, &never);
	proc_forget(loop, pid);
	spawn_sh(loop, "sleep 0.2", &o, &s);
	run_until(loop, &s);
	assert_int_equal(never.exits, 0);
	loop_free(loop);
}

/* A keeper (keep_report): fd 3, the report pipe, is still open after
 * its exec and what it reports there reaches on_exit; its own failed
 * exec is PROC_STEP_KEEPER.  The keeper is this program again
 * (main: --report STEP ERR). */
static void test_keep_report(void **state)
{
	struct loop *loop = loop_new();
	struct proc_opts o = {.path = "/proc/self/exe", .keep_report = true};
	struct seen s = {.want = 1};
	char *argv[] = {"test_proc", "--report", "3", "28", NULL};
	char *missing[] = {"/nonexistent/herd-test-keeper", NULL};
	struct herd_err err = {{0}};

	(void)state;
	assert_true(proc_spawn(loop, argv, &o, on_exit_count, &s, &err) > 0);
	run_until(loop, &s);
	assert_int_equal(s.last.step, PROC_STEP_CPUS);
	assert_int_equal(s.last.err, 28);
	assert_int_equal(WEXITSTATUS(s.last.status), 127);

	o.path = NULL;
	s.exits = 0;
	assert_true(proc_spawn(loop, missing, &o, on_exit_count, &s, &err) >
		    0);
	run_until(loop, &s);
	assert_int_equal(s.last.step, PROC_STEP_KEEPER);
	assert_int_equal(s.last.err, ENOENT);
	assert_string_equal(proc_step_what(s.last.step),
			    "cannot exec its keeper");
	loop_free(loop);
}

/* The keeper of test_keep_report: reports STEP and ERR on fd 3, which
 * must be the report pipe (a FIFO), and exits 127; 9 if fd 3 is not
 * there. */
static int keeper_report(char **argv)
{
	struct stat st;

	if (fstat(3, &st) < 0 || !S_ISFIFO(st.st_mode))
		return 9;
	proc_report_write(3, (enum proc_step)strtol(argv[2], NULL, 10),
			  (int)strtol(argv[3], NULL, 10));
	return 127;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_status),
		cmocka_unit_test(test_signal),
		cmocka_unit_test(test_exec_failure),
		cmocka_unit_test(test_workdir_failure),
		cmocka_unit_test(test_pipes_and_group),
		cmocka_unit_test(test_fds_closed),
		cmocka_unit_test(test_many_children),
		cmocka_unit_test(test_unregistered_reaped),
		cmocka_unit_test(test_forget),
		cmocka_unit_test(test_keep_report),
	};

	if (argc == 4 && !strcmp(argv[1], "--report"))
		return keeper_report(argv);

	return cmocka_run_group_tests(tests, NULL, NULL);
}
