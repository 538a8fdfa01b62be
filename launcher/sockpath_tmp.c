/* sockpath_tmp.c — see sockpath_tmp.h (temporary). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sockpath_tmp.h"

static int dir_ok(const char *dir, bool create, struct herd_err *err)
{
	struct stat st;

	if (create && mkdir(dir, 0700) < 0 && errno != EEXIST)
		return herd_errprintf(err, "%s: %s", dir, strerror(errno));
	if (lstat(dir, &st) < 0)
		return herd_errprintf(err, "%s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077))
		return herd_errprintf(err,
				      "%s: not a directory of yours with mode "
				      "0700; remove it",
				      dir);
	return 0;
}

int sockpath_tmp(const char *id, char *buf, size_t size, bool create,
		 struct herd_err *err)
{
	const char *rt = getenv("XDG_RUNTIME_DIR");
	char dir[256];
	struct stat st;

	if (rt && rt[0] == '/' && lstat(rt, &st) == 0 && S_ISDIR(st.st_mode) &&
	    st.st_uid == geteuid() && (st.st_mode & 0777) == 0700)
		snprintf(dir, sizeof(dir), "%s/herd", rt);
	else
		snprintf(dir, sizeof(dir), "/tmp/herd-%u", (unsigned)geteuid());
	if (dir_ok(dir, create, err) < 0)
		return -1;
	if ((size_t)snprintf(buf, size, "%s/%s.sock", dir, id) >= size ||
	    strlen(buf) >= 108)
		return herd_errprintf(err, "%s/%s.sock: path too long", dir,
				      id);
	return 0;
}
