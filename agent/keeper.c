/* keeper.c — the rank keeper: one process per rank between the agent and
 * the rank, run as its own program (`herd-agent --keeper --rank R`).
 *
 * The keeper leads the rank's process group, gets SIGUSR1 when the agent
 * dies (PR_SET_PDEATHSIG, set by proc_spawn and kept across exec) and
 * then kills the whole group, so a `kill -9` of the agent leaves no rank
 * behind.  It keeps the stop signals the agent sends to the group blocked
 * (they are for the rank), forks the rank, hands on those that came
 * before the rank existed, waits for it and exits with its status,
 * re-raising its signal.
 *
 * Why a program and not code run after fork: the agent may have threads
 * (PMIx's), so between its fork and exec only async-signal-safe calls are
 * allowed; proc_spawn does exactly its fixed set-up there and execs.  The
 * keeper is a fresh single-threaded image, free to fork its rank and
 * prepare it.
 *
 * Which image: the keeper is a small program of its own (keeper/run.c
 * and lib/core/proc.c's child half, linked with libc alone: keeper/main.c)
 * that the agent carries inside its own image (keeper_image.c).  The
 * agent copies it once into a sealed memfd and every keeper is an
 * fexecve() of that: no file on the node to check, nothing another
 * process can change, and always the agent's own version however the
 * cached binary (~/.cache/herd/agent-...) is replaced while it runs (the
 * spec below is a private contract between the two, keeper.h).  An exec
 * of it costs a node about a quarter of an exec of the agent, which loads
 * libcrypto, libpmix, hwloc... for every rank.  Where no memfd can be
 * made or executed (vm.memfd_noexec=2), the keeper is /proc/self/exe in
 * keeper mode, the agent's own image, as before: slower, never wrong.
 *
 * What the keeper gets (proc_spawn with keep_report):
 *   fd 0  the spec: a memfd the agent wrote (below); the keeper reads it
 *         and puts /dev/null in its place.  The rank's environment may
 *         hold secrets (PMIx's, the job's), so it never travels on the
 *         keeper's command line, which `ps` shows;
 *   fd 1, 2  the rank's output pipes;
 *   fd 3  the report pipe (proc.h), open across the keeper's exec; the
 *         rank's set-up failures are reported on it, and its exec closes
 *         it (close-on-exec from here on);
 *   every signal blocked (so nothing sent to the new group is lost
 *   before the rank exists), PDEATHSIG SIGUSR1.
 *
 * The spec: NUL-terminated strings, in this order:
 *   KEEPER_MAGIC, the agent's pid, the program to exec (/bin/sh), the
 *   workdir ("" none), the cpu list ("" none; "A-B,C", cpus_text()), the NUMA
 *   node to prefer ("" none), argc, argv[0..argc-1], then every
 *   environment entry of the rank to the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/agent.h"
#include "keeper/keeper.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

/* keeper_image.c: the keeper program, as built (keeper/main.c). */
extern const unsigned char herd_keeper_image[];
extern const unsigned char herd_keeper_image_end[];

static void put_str(FILE *f, const char *s)
{
	fputs(s ? s : "", f);
	fputc('\0', f);
}

/* Writes len bytes of buf to fd; 0 or -1 (errno). */
static int write_all(int fd, const void *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = write(fd, (const char *)buf + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

/* The set as "A-B,C" (keeper/run.c's cpus_parse); no NUL. */
static void cpus_text(FILE *f, const cpu_set_t *set)
{
	const char *sep = "";

	for (int c = 0; c < CPU_SETSIZE; c++) {
		int last = c;

		if (!CPU_ISSET(c, set))
			continue;
		while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
			last++;
		if (last > c)
			fprintf(f, "%s%d-%d", sep, c, last);
		else
			fprintf(f, "%s%d", sep, c);
		sep = ",";
		c = last;
	}
}

/* The spec in a memfd, offset 0; -1 with err. */
int keeper_spec_fd(const struct keeper_rank *k, struct herd_err *err)
{
	char *buf = NULL, num[32];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int fd = -1, argc = 0, ok;

	if (!f)
		return herd_errprintf(err, "out of memory");
	put_str(f, KEEPER_MAGIC);
	snprintf(num, sizeof(num), "%d", (int)getpid());
	put_str(f, num);
	put_str(f, k->path);
	put_str(f, k->workdir);
	if (k->cpus)
		cpus_text(f, k->cpus);
	put_str(f, NULL);
	num[0] = '\0';
	if (k->mem_node >= 0)
		snprintf(num, sizeof(num), "%d", k->mem_node);
	put_str(f, num);
	while (k->argv[argc])
		argc++;
	snprintf(num, sizeof(num), "%d", argc);
	put_str(f, num);
	for (int i = 0; i < argc; i++)
		put_str(f, k->argv[i]);
	for (char *const *e = k->envp; *e; e++)
		put_str(f, *e);
	ok = fclose(f) == 0;
	if (!ok || len > KEEPER_SPEC_MAX) {
		free(buf);
		return ok ? herd_errprintf(err,
					   "rank %d: its command and "
					   "environment are %zu bytes (at most "
					   "%zu)",
					   k->rank, len, KEEPER_SPEC_MAX)
			  : herd_errprintf(err, "out of memory");
	}
	fd = memfd_create("herd-keeper-spec", MFD_CLOEXEC);
	if (fd >= 0 && write_all(fd, buf, len) < 0) {
		close(fd);
		fd = -1;
	}
	if (fd < 0)
		herd_errprintf(err, "cannot hand rank %d to its keeper: %s",
			       k->rank, strerror(errno));
	free(buf);
	return fd;
}

int keeper_image_open(void)
{
	size_t len = (size_t)(herd_keeper_image_end - herd_keeper_image);
	int fd;

	if (len == 0)
		return -1;
	/* MFD_EXEC: where the kernel knows it (6.3 on), an executable
	 * memfd must say so; before that every memfd is. */
	fd = memfd_create("herd-keeper",
			  MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
	if (fd < 0 && errno == EINVAL)
		fd = memfd_create("herd-keeper",
				  MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -1;
	if (write_all(fd, herd_keeper_image, len) < 0 ||
	    fcntl(fd, F_ADD_SEALS,
		  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) <
		0) {
		close(fd);
		return -1;
	}
	return fd;
}

pid_t keeper_spawn(struct loop *loop, const struct keeper_rank *k,
		   proc_exit_fn on_exit, void *arg, int out[2],
		   struct herd_err *err)
{
	char rank[16];
	char *argv[] = {(char *)(k->self && *k->self ? k->self : "herd-agent"),
			KEEPER_ARG, "--rank", rank, NULL};
	/* Born with every signal blocked (see keeper_main); SIGUSR1 when
	 * the agent dies: the keeper then kills the group. */
	struct proc_opts opts = {.path = "/proc/self/exe",
				 .exec_fd = k->image_fd,
				 .pdeathsig = SIGUSR1,
				 .keep_report = true};
	sigset_t all;
	pid_t pid;
	int spec;

	snprintf(rank, sizeof(rank), "%d", k->rank);
	spec = keeper_spec_fd(k, err);
	if (spec < 0)
		return -1;
	sigfillset(&all);
	opts.sigmask = &all;
	opts.io[0] = (struct proc_fd){.kind = PROC_FD_DUP, .fd = spec};
	opts.io[1].kind = opts.io[2].kind = PROC_FD_PIPE;
	pid = proc_spawn(loop, argv, &opts, on_exit, arg, err);
	close(spec);
	if (pid < 0)
		return -1;
	out[0] = opts.io[1].fd;
	out[1] = opts.io[2].fd;
	return pid;
}
