/* hostfile.h — read and write the hostfile formats people already have.
 *
 *   plain      one host a line (reading also takes a hostlist expression
 *              such as "node[01-04]" on a line)
 *   deepspeed  "host slots=8"
 *   openmpi    "host slots=8 max_slots=8"   (also reads "host",
 *              "host slots=8", "host max_slots=8 slots=8")
 *   mpich      "host:8"                     (also reads "host")
 *   slurm      compressed hostlist expressions; an expression may span
 *              lines (lines are joined with ','; a line break inside
 *              brackets or after ',' continues the expression)
 *
 * '#' starts a comment (whole line or trailing); blank lines are allowed.
 * A host listed twice is an error naming both lines.  Host names are
 * ASCII letters, digits, '.', '-' and '_', starting with a letter or a
 * digit (IPv6 literals are not supported: ':' is the MPICH slot
 * separator).  This one rule (hostfile_host_check) holds for every host
 * source: nodes.hosts and nodes.spares in the spec, hostfiles,
 * nodes.command's output, the inventory and SLURM_JOB_NODELIST.
 *
 * Errors read "name:line: what was expected".
 */
#ifndef HERD_HOSTFILE_H
#define HERD_HOSTFILE_H

#include <stddef.h>
#include <stdio.h>

#include "herd/err.h"

/* A line longer than this is refused: one host with its options fits in a
 * few hundred bytes; a compressed slurm expression of a large cluster in a
 * few KiB.  64 KiB leaves room for both without unbounded buffering. */
#define HOSTFILE_LINE_MAX (64 * 1024)

/* hostfile_load() refuses files larger than this before reading them. */
#define HOSTFILE_FILE_MAX (64 * 1024 * 1024)

/* More hosts than this in one file is an error: far above the largest
 * clusters (tens of thousands of nodes), low enough that a typo cannot
 * exhaust memory. */
#define HOSTFILE_HOSTS_MAX 200000

/* DNS names are at most 253 characters; 255 is the classic limit. */
#define HOSTFILE_HOST_MAX 255

/* No node has more ranks than this; larger values are typos. */
#define HOSTFILE_SLOTS_MAX 65536

enum hostfile_format {
	HOSTFILE_AUTO = 0, /* reading only: guess from the entries */
	HOSTFILE_PLAIN,
	HOSTFILE_DEEPSPEED,
	HOSTFILE_OPENMPI,
	HOSTFILE_MPICH,
	HOSTFILE_SLURM,
};

/* One node of a hostfile.  slots == 0 means the file did not say. */
struct hostfile_entry {
	char *host;
	int slots;
	size_t line; /* 1-based line it was read from; 0: not from text */
};

struct hostfile {
	struct hostfile_entry *entries;
	size_t count;
	size_t alloc;		     /* capacity of entries (internal) */
	enum hostfile_format format; /* format read (AUTO resolved) */
};

/* "plain", "slurm", ... -> format; -1 for an unknown name ("auto" is
 * accepted and gives HOSTFILE_AUTO). */
int hostfile_format_parse(const char *name);

/* The name of fmt ("auto" for HOSTFILE_AUTO); never NULL. */
const char *hostfile_format_name(enum hostfile_format fmt);

/* Guesses the format of text from its entries:
 *   an entry "host:N"                     mpich
 *   an entry with key=value options       openmpi when some entry has
 *                                         max_slots or no options, else
 *                                         deepspeed
 *   an entry with '[' or ','              slurm
 *   only bare host names                  plain
 * The first entry that is not a bare host name decides.  Never fails;
 * an empty text gives HOSTFILE_PLAIN. */
enum hostfile_format hostfile_detect(const char *text, size_t len);

/* Parses text (len bytes, need not be NUL-terminated).  name is used in
 * errors as "name:line: what was expected".  An empty file (no hosts) is
 * the error "no hosts in NAME".  Returns a new hostfile the caller frees
 * with hostfile_free(), or NULL with err filled. */
struct hostfile *hostfile_parse(const char *text, size_t len, const char *name,
				enum hostfile_format fmt, struct herd_err *err);

/* Reads and parses the regular file at path (refuses files over
 * HOSTFILE_FILE_MAX, and anything else: a FIFO, a device, a directory).
 * Errors name path. */
struct hostfile *hostfile_load(const char *path, enum hostfile_format fmt,
			       struct herd_err *err);

/* An empty hostfile (format HOSTFILE_PLAIN), or NULL when out of memory. */
struct hostfile *hostfile_new(void);

/* Appends a copy of host with slots and line.  No checks beyond
 * HOSTFILE_HOSTS_MAX.  Returns 0, or -1 with err. */
int hostfile_push(struct hostfile *hf, const char *host, int slots, size_t line,
		  struct herd_err *err);

/* Checks one host name (the rule above, for every host source); where
 * prefixes the message ("file:line", "nodes.hosts").  Returns 0, or -1
 * with err filled. */
int hostfile_host_check(const char *host, const char *where,
			struct herd_err *err);

/* Finds a host listed twice: returns 1 and sets *first and *second to the
 * indexes of the two entries (first < second, second the smallest such
 * index), or 0 when every host is unique, or -1 when out of memory. */
int hostfile_find_duplicate(const struct hostfile *hf, size_t *first,
			    size_t *second);

/* Frees hf and its names; NULL is fine. */
void hostfile_free(struct hostfile *hf);

/* Writes hf in fmt to out; entries with slots == 0 are written with
 * default_slots (1 when default_slots < 1) in formats that carry a count
 * (deepspeed, openmpi, mpich).  openmpi writes "host slots=N max_slots=N";
 * slurm writes one compressed expression and a newline (nothing for an
 * empty list).  Returns 0 or -1 with err. */
int hostfile_write(const struct hostfile *hf, enum hostfile_format fmt,
		   int default_slots, FILE *out, struct herd_err *err);

#endif
