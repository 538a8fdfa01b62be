/* pmix/guard.c — is another user connected to the agent's PMIx server?
 *
 * libpmix 4.2 serves its clients over TCP on loopback, where any local
 * user can connect, and its "native" security believes the uid the
 * client itself writes into the handshake.  A process of another user
 * that fakes getuid() (an LD_PRELOAD is enough) was taken for rank 0 of
 * the job and could PMIx_Spawn a command as the job's user.
 * The 4.2 library never calls a host `listener`, so the agent cannot
 * vet each connection before the library reads it; it asks the kernel
 * instead: /proc/net/tcp{,6} give the uid that created each socket,
 * which no client can fake.  The listening sockets are the agent's own
 * (/proc/self/fd), and a connection to one of them whose client end
 * belongs to another uid is a stranger.  A client connection is refused
 * while a stranger is connected, and so is a spawn (a tool, which the
 * library takes without the client upcall, can ask for one).  A
 * stranger can thus make the job's PMIx connections fail (it could
 * flood the port anyway), never act as the job.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "agent/pmix/pmix_int.h"

#define GUARD_LISTEN_MAX 16
#define GUARD_READ_BUF (64 * 1024)

struct endpoint {
	char addr[64]; /* as /proc/net/tcp* print it: "0100007F:9C1F" */
};

/* The inodes of this process's sockets, sorted; *n of them. */
static unsigned long *socket_inodes(size_t *n)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned long *v = NULL, *nv, ino;
	size_t cap = 0;
	struct dirent *e;
	char path[300], link[64];
	ssize_t len;

	*n = 0;
	if (!d)
		return NULL;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = '\0';
		if (sscanf(link, "socket:[%lu]", &ino) != 1)
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 64;
			if (!(nv = realloc(v, cap * sizeof(*v))))
				break;
			v = nv;
		}
		v[(*n)++] = ino;
	}
	closedir(d);
	return v;
}

static bool has_inode(const unsigned long *v, size_t n, unsigned long ino)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == ino)
			return true;
	return false;
}

static char guard_buf[GUARD_READ_BUF];

/* One pass over a /proc/net/tcp* file: collect our listening endpoints
 * (listen), or (listen == NULL) find an established socket of another
 * uid whose remote end is one of them. */
static long scan(const char *file, const unsigned long *inodes, size_t n_inodes,
		 struct endpoint *eps, size_t *n_eps, bool collect)
{
	char line[512], l[64], r[64];
	unsigned long uid, ino;
	unsigned st;
	long stranger = -1;
	FILE *f = fopen(file, "re");

	if (!f)
		return -1;
	/* Every read() of these files walks the kernel's socket hash
	 * (about 0.5 ms here, shared by all namespaces), and stdio's
	 * default buffer for them is 1 KiB: read in large chunks (glibc
	 * takes a size only with a buffer; callers hold guard_lock). */
	setvbuf(f, guard_buf, _IOFBF, sizeof(guard_buf));
	while (stranger < 0 && fgets(line, sizeof(line), f)) {
		if (sscanf(line,
			   " %*u: %63[0-9A-Fa-f:] %63[0-9A-Fa-f:] %x %*x:%*x "
			   "%*x:%*x %*x %lu %*d %lu",
			   l, r, &st, &uid, &ino) != 5)
			continue;
		if (collect) {
			/* 0x0A: LISTEN */
			if (st == 0x0A && has_inode(inodes, n_inodes, ino) &&
			    *n_eps < GUARD_LISTEN_MAX)
				snprintf(eps[(*n_eps)++].addr,
					 sizeof(eps[0].addr), "%s", l);
			continue;
		}
		/* 0x01: ESTABLISHED, the only state in which the kernel
		 * still shows the owner (TIME_WAIT and orphans read uid 0) */
		if (st != 0x01 || uid == (unsigned long)geteuid())
			continue;
		for (size_t i = 0; i < *n_eps; i++)
			if (!strcasecmp(r, eps[i].addr))
				stranger = (long)uid;
	}
	fclose(f);
	return stranger;
}

/* The server's listening endpoints, per file, found once: libpmix opens
 * its listeners in PMIx_server_init and keeps them until its finalize,
 * so only the established connections need a new look each time (one
 * pass over the file that holds a listener, instead of walking
 * /proc/self/fd and reading both files twice on every connection).
 * Until a listener is found, every call looks again.  The callers are
 * the library's progress thread (the upcalls) and the agent's loop
 * (spawn), hence the lock. */
static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static struct endpoint guard_eps[2][GUARD_LISTEN_MAX];
static size_t guard_n_eps[2];
static bool guard_known;

long psrv_guard_stranger(void)
{
	static const char *const files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	long uid = -1;

	pthread_mutex_lock(&guard_lock);
	if (!guard_known) {
		size_t n_inodes;
		unsigned long *inodes = socket_inodes(&n_inodes);

		for (int i = 0; i < 2; i++) {
			guard_n_eps[i] = 0;
			scan(files[i], inodes, n_inodes, guard_eps[i],
			     &guard_n_eps[i], true);
		}
		free(inodes);
		guard_known = guard_n_eps[0] + guard_n_eps[1] > 0;
	}
	/* A connection to a listener is in the listener's own file. */
	for (int i = 0; i < 2 && uid < 0; i++)
		if (guard_n_eps[i])
			uid = scan(files[i], NULL, 0, guard_eps[i],
				   &guard_n_eps[i], false);
	pthread_mutex_unlock(&guard_lock);
	return uid;
}

void psrv_guard_say(long uid, const char *what)
{
	fprintf(stderr,
		"herd-agent: %s refused: a process of uid %ld (not this "
		"job's user) is connected to the PMIx server\n",
		what, uid);
}
