/* hostfile.h — read and write the hostfile formats people already have.
 *
 *   plain      one host a line
 *   deepspeed  "host slots=8"
 *   openmpi    "host slots=8 max_slots=8"   (also reads "host", "host slots=8")
 *   mpich      "host:8"
 *   slurm      one compressed hostlist expression (may span lines)
 *
 * '#' starts a comment (whole line or trailing); blank lines are allowed.
 * A host listed twice is an error naming both lines.
 */
#ifndef HERD_HOSTFILE_H
#define HERD_HOSTFILE_H

#include <stdio.h>

#include "herd/err.h"

enum hostfile_format {
	HOSTFILE_AUTO = 0,	/* reading only: guess from the first entry */
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
};

struct hostfile {
	struct hostfile_entry *entries;
	size_t count;
};

/* "plain", "slurm", ... -> format; -1 for an unknown name. */
int hostfile_format_parse(const char *name);
const char *hostfile_format_name(enum hostfile_format fmt);

/* Parses text (len bytes, need not be NUL-terminated).  name is used in
 * errors as "name:line: what was expected".  Returns a new hostfile the
 * caller frees with hostfile_free(), or NULL with err filled. */
struct hostfile *hostfile_parse(const char *text, size_t len, const char *name,
				enum hostfile_format fmt, struct herd_err *err);

/* Reads and parses the file at path (refuses files over 64 MiB). */
struct hostfile *hostfile_load(const char *path, enum hostfile_format fmt,
			       struct herd_err *err);

void hostfile_free(struct hostfile *hf);

/* Writes hf in fmt to out; entries with slots == 0 are written with
 * default_slots (formats that need a count).  Returns 0 or -1 with err. */
int hostfile_write(const struct hostfile *hf, enum hostfile_format fmt,
		   int default_slots, FILE *out, struct herd_err *err);

#endif
