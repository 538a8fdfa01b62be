/* check.h — the agent's side of the health gate: the checks
 * herd's CHECK asks for (check.c) and the transfers of its network probe
 * (netprobe.c).  The pieces that read the file system take a root, so
 * the unit tests run them on a fake tree. */
#ifndef HERD_AGENT_CHECK_H
#define HERD_AGENT_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "herd/proto.h"

struct agent;

/* The sysfs root the checks read: $HERD_AGENT_SYSFS (a test hook: a fake
 * tree with class/infiniband and class/net), else "/sys". */
const char *check_sysfs(void);

/* One check's answer: {name, status, reason?, value?}. */
json_t *check_entry(const char *name, const char *status, const char *reason,
		    const char *value);

/* A directory the job writes to (name "workdir" or "checkpoint"): it
 * exists, is a directory, a file can be created in it with O_EXCL and
 * removed again, and it has at least min_free bytes free (statvfs).  A
 * checkpoint directory that does not exist yet (the job makes it) is
 * judged by its closest existing parent (missing_ok). */
json_t *check_dir(const char *name, const char *path, long long min_free,
		  bool missing_ok);

/* Every port under sysfs/class/infiniband/DEV/ports/N: "4: ACTIVE" is ok
 * (port "DEV/N", rate in Gb/s from the rate file); another state fails.
 * No RDMA device: one "skipped" entry.  Appends to checks. */
void check_rdma(const char *sysfs, json_t *checks);

/* The interface whose network holds master_addr (getifaddrs) is up and
 * running, and sysfs/class/net/IF/operstate (when readable) is not
 * "down".  No interface on that network: skipped. */
json_t *check_net(const char *sysfs, const char *master_addr);

/* The last non-empty line of out (whitespace trimmed) into line (at most
 * size - 1 bytes); "" when there is none. */
void check_last_line(const char *out, size_t len, char *line, size_t size);

/* The script's entry from how it ended: status as from waitpid, timed_out
 * after timeout_ms, its output (the last bytes of it). */
json_t *check_script_entry(int status, bool timed_out, long long timeout_ms,
			   const char *out, size_t len);

/* herd's CHECK: runs the checks and answers with CHECK (after the site
 * script, which runs as a child on the loop, never blocking it). */
void check_on_frame(struct agent *a, struct proto_frame *f);
void check_fini(struct agent *a);

/* herd's NETPROBE: listen (bind, answer "listening" with the port) or
 * connect, then a child (`herd-agent netprobe`) moves the bytes and the
 * agent answers "result". */
void netprobe_on_frame(struct agent *a, struct proto_frame *f);
void netprobe_fini(struct agent *a);
/* main() of `herd-agent netprobe listen|connect ...` (netprobe.c). */
int netprobe_main(int argc, char **argv);

#endif
