/* rundir.c — the agent's private directory (progress files, the PMIx
 * server's rendezvous), the clean-up of those that agents killed with
 * SIGKILL (a node "crash", the OOM killer) left behind, and the node's
 * topology kept from one agent start to the next.
 *
 * Every agent of a user on a node works under one directory of that
 * user, $TMPDIR/herd-agent-UID (0700, made when missing).  It is used
 * only when it is a directory this user owns that nobody else may write
 * (checked on the opened descriptor); else each agent falls back to its
 * own mkdtemp in $TMPDIR and keeps no topology.  Inside, each agent has
 * PID-XXXXXX.  An agent that ends normally removes its own
 * (rundir_remove); one that was killed cannot, so every agent that
 * starts removes the directories of agents whose PID no longer runs.
 * Only that small directory is read, not all of a shared /tmp (a /tmp of
 * 1,000 entries cost each start 10 ms), and only through descriptors
 * opened with O_NOFOLLOW.
 *
 * The topology: hwloc's discovery reads sysfs and costs an agent start
 * about 14 ms of CPU, the largest part of it.  Its summary (the JSON that
 * HELLO carries) is kept as topo-HOST-KEY.json, where KEY is a SHA-256
 * over what a change of hardware changes without a reboot too: the boot
 * id, the hostname, hwloc's version, the online CPUs and the names in
 * /sys/bus/pci/devices, /sys/class/infiniband and of the interfaces in
 * /sys/class/net that are devices (not veths or bridges).  A
 * summary whose key matches is used as is; any other is discovered again
 * and replaces the older ones of the host (and those of hosts not seen
 * for a week: a test cluster leaves one per node name in a shared /tmp).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hwloc.h>
#include <jansson.h>

#include "agent/agent.h"
#include "herd/version.h"

#define RUNDIR_PREFIX "herd-agent-"
/* A cached topology summary larger than this is not read. */
#define TOPO_CACHE_MAX (4 * 1024 * 1024)
/* Kept topologies of hosts that were not seen for this long go (test
 * clusters leave one per node name in a shared /tmp). */
#define TOPO_CACHE_AGE_S (7 * 24 * 3600)

/* The PID in "PID-XXXXXX", or -1 when name is not one. */
static pid_t rundir_pid(const char *name)
{
	const char *p = name, *dash;
	char *end;
	long pid;

	if (!(dash = strchr(p, '-')) || strlen(dash + 1) != 6)
		return -1;
	errno = 0;
	pid = strtol(p, &end, 10);
	if (errno || end != dash || pid <= 0 || pid > 0x3fffffff)
		return -1;
	return (pid_t)pid;
}

/* How deep remove_dir_at goes: an agent's directory holds files and
 * the herd Python package's python/herd/__pycache__/ (pypkg.c). */
#define RUNDIR_DEPTH_MAX 4

static void remove_tree_at(int dfd, const char *name, int depth);

/* Empties and removes the directory name in dfd, when it is a directory
 * of ours (checked on the opened descriptor, not the name). */
static void remove_dir_at(int dfd, const char *name)
{
	remove_tree_at(dfd, name, 0);
}

static void remove_tree_at(int dfd, const char *name, int depth)
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
	/* unlinkat() removes a link, never what it points to; a
	 * subdirectory is opened with O_NOFOLLOW and checked in turn. */
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) < 0 && errno == EISDIR &&
		    depth < RUNDIR_DEPTH_MAX)
			remove_tree_at(dirfd(d), e->d_name, depth + 1);
	}
	closedir(d);
	unlinkat(dfd, name, AT_REMOVEDIR);
}

/* parent: the user's directory (its descriptor stays open). */
static void sweep(int parent)
{
	int dfd = dup(parent);
	DIR *d;
	struct dirent *e;
	pid_t self = getpid();
	uid_t uid = getuid();

	if (dfd < 0)
		return;
	if (!(d = fdopendir(dfd))) {
		close(dfd);
		return;
	}
	rewinddir(d); /* a dup shares the offset */
	/* One system call for most entries (the directories of agents that
	 * run: a node's own few, but every node's in a test cluster whose
	 * nodes share /tmp). */
	while ((e = readdir(d))) {
		pid_t pid = rundir_pid(e->d_name);
		struct stat st;

		if (pid < 0 || pid == self ||
		    (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN))
			continue;
		/* A PID that runs (or that we may not signal: another
		 * user's, which cannot own this directory) is left alone. */
		if (kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) || st.st_uid != uid)
			continue;
		remove_dir_at(dirfd(d), e->d_name);
	}
	closedir(d);
}

/* Opens (making it when missing) $TMPDIR/herd-agent-UID into a->user_fd
 * and a->user_dir, or leaves a->user_fd -1 when it is not safe: not a
 * directory, not ours, or open to group/other. */
static void user_dir_open(struct agent *a, const char *tmp)
{
	struct stat st;
	int fd;

	a->user_ok = false;
	if ((size_t)snprintf(a->user_dir, sizeof(a->user_dir),
			     "%s/" RUNDIR_PREFIX "%ld", tmp,
			     (long)getuid()) >= sizeof(a->user_dir))
		goto bad;
	if (mkdir(a->user_dir, 0700) < 0 && errno != EEXIST)
		goto bad;
	fd = open(a->user_dir,
		  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		goto bad;
	if (fstat(fd, &st) < 0 || st.st_uid != getuid() ||
	    (st.st_mode & 077)) {
		close(fd);
		goto bad;
	}
	a->user_fd = fd;
	a->user_ok = true;
	return;
bad:
	a->user_dir[0] = '\0';
}

void rundir_make(struct agent *a)
{
	const char *tmp = getenv("TMPDIR");
	int n;

	if (!tmp || tmp[0] != '/')
		tmp = "/tmp";
	if (!a->user_ok)
		user_dir_open(a, tmp);
	if (a->user_ok) {
		sweep(a->user_fd);
		n = snprintf(a->run_dir, sizeof(a->run_dir), "%s/%ld-XXXXXX",
			     a->user_dir, (long)getpid());
	} else {
		/* Another user's or an open directory under that name: a
		 * directory of our own beside it, as mkdtemp makes it. */
		n = snprintf(a->run_dir, sizeof(a->run_dir),
			     "%s/" RUNDIR_PREFIX "%ld-XXXXXX", tmp,
			     (long)getpid());
	}
	if (n < 0 || (size_t)n >= sizeof(a->run_dir) || !mkdtemp(a->run_dir))
		a->run_dir[0] = '\0';
}

/* --- the topology kept between starts ----------------------------------- */

static int names_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir, sorted (strcmp), into *out; how many, or -1. */
static int names_of(const char *path, char ***out)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char **v = NULL;
	size_t n = 0, cap = 0;

	*out = NULL;
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		if (n == cap) {
			char **nv = realloc(v, (cap = cap ? 2 * cap : 64) *
						   sizeof(*v));

			if (!nv)
				break;
			v = nv;
		}
		if (!(v[n] = strdup(e->d_name)))
			break;
		n++;
	}
	closedir(d);
	if (e) {
		while (n > 0)
			free(v[--n]);
		free(v);
		return -1;
	}
	qsort(v, n, sizeof(*v), names_cmp);
	*out = v;
	return (int)n;
}

/* The kept topology's key: a checksum of what would change the topology
 * (not a secret and not an integrity check: the directory it names is the
 * user's own, checked 0700).  Two 64-bit FNV-1a lanes with different
 * offset bases, 128 bits in all, so that an unchanged node finds its file
 * and a changed one, in practice, never finds an old one.  No libcrypto:
 * loading it cost every agent start more than everything it would hash. */
struct keyhash {
	uint64_t a, b;
};

static void keyhash_update(struct keyhash *k, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++) {
		k->a = (k->a ^ p[i]) * 0x100000001b3ull;
		k->b = (k->b ^ p[i]) * 0x100000001b3ull;
	}
}

/* The names in path; with devices_only (/sys/class/net), only those that
 * are hardware, not in /sys/devices/virtual/net (those have no "device"
 * link: veths and bridges, which come and go with containers and which
 * hwloc does not see).  Directory reads, not a look-up per interface (a
 * test cluster's nodes see the host's sysfs: hundreds of them).  The
 * virtual ones are read before and after path, and a name in either
 * list is left out: a veth made or removed while path is read (another
 * cluster coming up) must not change the key. */
static bool virtual_name(char **v, int n, const char *name)
{
	return n > 0 && bsearch(&name, v, (size_t)n, sizeof(*v), names_cmp);
}

static void digest_dir(struct keyhash *md, const char *path, bool devices_only)
{
	char **before = NULL, **after = NULL, **names = NULL;
	int n_before = 0, n_after = 0, n;

	keyhash_update(md, path, strlen(path) + 1);
	if (devices_only &&
	    (n_before = names_of("/sys/devices/virtual/net", &before)) < 0)
		n_before = 0;
	n = names_of(path, &names);
	if (devices_only &&
	    (n_after = names_of("/sys/devices/virtual/net", &after)) < 0)
		n_after = 0;
	/* In name order: the same set hashes the same, whatever the
	 * directory's order. */
	for (int i = 0; i < n; i++) {
		const char *name = names[i];

		if (devices_only &&
		    (name[0] == '.' || virtual_name(before, n_before, name) ||
		     virtual_name(after, n_after, name)))
			continue;
		keyhash_update(md, name, strlen(name) + 1);
	}
	for (int i = 0; i < n_before; i++)
		free(before[i]);
	for (int i = 0; i < n_after; i++)
		free(after[i]);
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(before);
	free(after);
	free(names);
}

static void digest_file(struct keyhash *md, const char *path)
{
	char buf[512];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got;

	keyhash_update(md, path, strlen(path) + 1);
	if (fd < 0)
		return;
	while ((got = read(fd, buf, sizeof(buf))) > 0)
		keyhash_update(md, buf, (size_t)got);
	close(fd);
}

/* The lines of /proc/self/status that say where this process may run
 * (its cpu and memory affinity): the allowed sets hwloc records. */
static void digest_allowed(struct keyhash *md)
{
	char line[4096];
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Cpus_allowed_list:", 18) ||
		    !strncmp(line, "Mems_allowed_list:", 18))
			keyhash_update(md, line, strlen(line));
	fclose(f);
}

/* "topo-HOST-" into prefix and "topo-HOST-KEY." into base: the cache's
 * files of this host now are base + "json" (the summary) and base +
 * "xml" (the hwloc XML). */
static int topo_cache_name(char *prefix, size_t plen, char *base,
			   size_t blen)
{
	char host[256] = "", key[2 * 16 + 1];
	unsigned int v = hwloc_get_api_version();
	struct keyhash c = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
	struct keyhash *md = &c;

	gethostname(host, sizeof(host) - 1);
	for (char *h = host; *h; h++)
		if (!((*h >= 'a' && *h <= 'z') || (*h >= 'A' && *h <= 'Z') ||
		      (*h >= '0' && *h <= '9') || *h == '.' || *h == '-' ||
		      *h == '_'))
			*h = '_';
	keyhash_update(md, host, strlen(host) + 1);
	keyhash_update(md, &v, sizeof(v));
	keyhash_update(md, HERD_VERSION, sizeof(HERD_VERSION));
	digest_file(md, "/proc/sys/kernel/random/boot_id");
	digest_file(md, "/sys/devices/system/cpu/online");
	digest_file(md, "/proc/self/cpuset");
	digest_allowed(md);
	digest_dir(md, "/sys/bus/pci/devices", false);
	digest_dir(md, "/sys/class/net", true);
	digest_dir(md, "/sys/class/infiniband", false);
	snprintf(key, sizeof(key), "%016" PRIx64 "%016" PRIx64, c.a, c.b);
	if ((size_t)snprintf(prefix, plen, "topo-%.64s-", host) >= plen ||
	    (size_t)snprintf(base, blen, "%s%s.", prefix, key) >= blen)
		return -1;
	return 0;
}

/* The cache file base + ext in dfd, whole (*len bytes, NUL added), or
 * NULL: none, not ours, or larger than TOPO_CACHE_MAX. */
static char *cache_read(int dfd, const char *base, const char *ext,
			size_t *len)
{
	char name[192];
	struct stat st;
	char *buf = NULL;
	ssize_t got;
	int fd;

	snprintf(name, sizeof(name), "%s%s", base, ext);
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == getuid() && !(st.st_mode & 022) && st.st_size > 0 &&
	    st.st_size <= TOPO_CACHE_MAX &&
	    (buf = malloc((size_t)st.st_size + 1))) {
		got = read(fd, buf, (size_t)st.st_size);
		if (got != st.st_size) {
			free(buf);
			buf = NULL;
		} else {
			buf[got] = '\0';
			*len = (size_t)got;
		}
	}
	close(fd);
	return buf;
}

/* Writes base + ext in dfd (through a temporary name, renamed), then
 * removes this host's files of other keys, and every host's not seen
 * for TOPO_CACHE_AGE_S.  (Here, where a file is written, not at every
 * start: a test cluster's nodes share /tmp, each start would stat every
 * node's.) */
static void cache_write(int dfd, const char *prefix, const char *base,
			const char *ext, const char *text, size_t len)
{
	char name[192], tmp[224];
	DIR *d;
	struct dirent *e;
	int fd, ddup;
	bool ok;
	time_t now = time(NULL);

	snprintf(name, sizeof(name), "%s%s", base, ext);
	snprintf(tmp, sizeof(tmp), ".%s.%ld", name, (long)getpid());
	fd = openat(dfd, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	ok = write(fd, text, len) == (ssize_t)len;
	if (close(fd) < 0 || !ok || renameat(dfd, tmp, dfd, name) < 0) {
		unlinkat(dfd, tmp, 0);
		return;
	}
	if ((ddup = dup(dfd)) < 0)
		return;
	if (!(d = fdopendir(ddup))) {
		close(ddup);
		return;
	}
	/* A dup shares the offset, which the sweep left at the end. */
	rewinddir(d);
	while ((e = readdir(d))) {
		struct stat st;

		if (strncmp(e->d_name, "topo-", 5) ||
		    !strncmp(e->d_name, base, strlen(base)))
			continue;
		if (!strncmp(e->d_name, prefix, strlen(prefix)) ||
		    (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) ==
			     0 &&
		     now - st.st_mtime > TOPO_CACHE_AGE_S))
			unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}

json_t *rundir_topo_get(struct agent *a)
{
	char prefix[96], base[160];
	json_t *j;
	size_t len = 0;
	char *text;

	if (!a->user_ok ||
	    topo_cache_name(prefix, sizeof(prefix), base, sizeof(base)) < 0 ||
	    !(text = cache_read(a->user_fd, base, "json", &len)))
		return NULL;
	j = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	free(text);
	if (j && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

void rundir_topo_put(struct agent *a, const json_t *summary)
{
	char prefix[96], base[160];
	char *text;

	if (!a->user_ok ||
	    topo_cache_name(prefix, sizeof(prefix), base, sizeof(base)) < 0 ||
	    !(text = json_dumps(summary, JSON_COMPACT)))
		return;
	cache_write(a->user_fd, prefix, base, "json", text, strlen(text));
	free(text);
}

char *rundir_topo_xml_get(int dfd)
{
	char prefix[96], base[160];
	size_t len = 0;

	if (topo_cache_name(prefix, sizeof(prefix), base, sizeof(base)) < 0)
		return NULL;
	return cache_read(dfd, base, "xml", &len);
}

void rundir_topo_xml_put(int dfd, const char *xml)
{
	char prefix[96], base[160];

	if (topo_cache_name(prefix, sizeof(prefix), base, sizeof(base)) == 0)
		cache_write(dfd, prefix, base, "xml", xml, strlen(xml));
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

void rundir_close(struct agent *a)
{
	if (a->user_ok)
		close(a->user_fd);
	a->user_ok = false;
}
