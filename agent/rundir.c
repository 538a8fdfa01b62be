/* rundir.c — the agent's private directory in $TMPDIR (progress files,
 * the PMIx server's rendezvous), and the clean-up of those that agents
 * killed with SIGKILL (a node "crash", the OOM killer) left behind.
 *
 * The directory is named herd-agent-PID-XXXXXX.  An agent that ends
 * normally removes its own (rundir_remove); one that was killed cannot,
 * so every agent that starts removes the directories of agents whose PID
 * no longer runs.  Only directories that this user owns are touched, and
 * only through descriptors opened with O_NOFOLLOW, so a name another
 * user plants in a shared /tmp (a symlink, a directory of theirs) is
 * never followed or emptied.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"

#define RUNDIR_PREFIX "herd-agent-"

/* The PID in "herd-agent-PID-XXXXXX", or -1 when name is not one. */
static pid_t rundir_pid(const char *name)
{
	const char *p = name + strlen(RUNDIR_PREFIX), *dash;
	char *end;
	long pid;

	if (strncmp(name, RUNDIR_PREFIX, strlen(RUNDIR_PREFIX)) ||
	    !(dash = strchr(p, '-')) || strlen(dash + 1) != 6)
		return -1;
	errno = 0;
	pid = strtol(p, &end, 10);
	if (errno || end != dash || pid <= 0 || pid > 0x3fffffff)
		return -1;
	return (pid_t)pid;
}

/* Empties and removes the directory name in dfd, when it is a directory
 * of ours (checked on the opened descriptor, not the name). */
static void remove_dir_at(int dfd, const char *name)
{
	int fd = openat(dfd, name,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	DIR *d;
	struct dirent *e;

	if (fd < 0)
		return;
	if (fstat(fd, &st) < 0 || st.st_uid != getuid() ||
	    !(d = fdopendir(fd))) {
		close(fd);
		return;
	}
	/* unlinkat() removes a link, never what it points to. */
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	unlinkat(dfd, name, AT_REMOVEDIR);
}

static void sweep(const char *tmp)
{
	int dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;
	struct dirent *e;

	if (dfd < 0)
		return;
	if (!(d = fdopendir(dfd))) {
		close(dfd);
		return;
	}
	while ((e = readdir(d))) {
		pid_t pid = rundir_pid(e->d_name);
		struct stat st;

		if (pid < 0 || pid == getpid() ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) || st.st_uid != getuid())
			continue;
		/* A PID that runs (or that we may not signal: another
		 * user's, which cannot own this directory) is left alone. */
		if (kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		remove_dir_at(dirfd(d), e->d_name);
	}
	closedir(d);
}

void rundir_make(struct agent *a)
{
	const char *tmp = getenv("TMPDIR");

	if (!tmp || tmp[0] != '/')
		tmp = "/tmp";
	sweep(tmp);
	if ((size_t)snprintf(a->run_dir, sizeof(a->run_dir),
			     "%s/" RUNDIR_PREFIX "%ld-XXXXXX", tmp,
			     (long)getpid()) >= sizeof(a->run_dir) ||
	    !mkdtemp(a->run_dir))
		a->run_dir[0] = '\0';
}

void rundir_remove(struct agent *a)
{
	char *slash;

	if (!a->run_dir[0] || !(slash = strrchr(a->run_dir, '/')))
		return;
	*slash = '\0';
	{
		int dfd = open(a->run_dir[0] ? a->run_dir : "/",
			       O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (dfd >= 0) {
			remove_dir_at(dfd, slash + 1);
			close(dfd);
		}
	}
	a->run_dir[0] = '\0';
}
