/* lib/job/hostfile_list.c — the list a hostfile holds (herd/hostfile.h):
 * building it, finding a host given twice, and writing it out in any of
 * the formats hostfile.c reads.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* qsort_r, reallocarray */
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd/hostfile.h"
#include "herd/hostlist.h"

/* ---- the list --------------------------------------------------------- */

struct hostfile *hostfile_new(void)
{
	struct hostfile *hf = calloc(1, sizeof(*hf));

	if (hf)
		hf->format = HOSTFILE_PLAIN;
	return hf;
}

void hostfile_free(struct hostfile *hf)
{
	if (!hf)
		return;
	for (size_t i = 0; i < hf->count; i++)
		free(hf->entries[i].host);
	free(hf->entries);
	free(hf);
}

int hostfile_push(struct hostfile *hf, const char *host, int slots, size_t line,
		  struct herd_err *err)
{
	char *copy;

	if (hf->count >= HOSTFILE_HOSTS_MAX)
		return herd_errprintf(err, "more than %d hosts",
				      HOSTFILE_HOSTS_MAX);
	if (hf->count == hf->alloc) {
		size_t n = hf->alloc ? hf->alloc * 2 : 16;
		struct hostfile_entry *e;

		e = reallocarray(hf->entries, n, sizeof(*e));
		if (!e)
			return herd_errprintf(err, "out of memory");
		hf->entries = e;
		hf->alloc = n;
	}
	copy = strdup(host);
	if (!copy)
		return herd_errprintf(err, "out of memory");
	hf->entries[hf->count++] =
	    (struct hostfile_entry){.host = copy, .slots = slots, .line = line};
	return 0;
}

static int index_cmp(const void *a, const void *b, void *arg)
{
	const struct hostfile *hf = arg;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	int c = strcmp(hf->entries[i].host, hf->entries[j].host);

	if (c)
		return c;
	return i < j ? -1 : i > j;
}

int hostfile_find_duplicate(const struct hostfile *hf, size_t *first,
			    size_t *second)
{
	size_t *idx, best = SIZE_MAX, best_first = 0;

	if (hf->count < 2)
		return 0;
	idx = calloc(hf->count, sizeof(*idx));
	if (!idx)
		return -1;
	for (size_t i = 0; i < hf->count; i++)
		idx[i] = i;
	/* Sorting by (name, index) puts each host's occurrences together,
	 * earliest first: O(n log n) even for the largest clusters. */
	qsort_r(idx, hf->count, sizeof(*idx), index_cmp, (void *)hf);
	for (size_t i = 1; i < hf->count; i++) {
		if (strcmp(hf->entries[idx[i - 1]].host,
			   hf->entries[idx[i]].host))
			continue;
		/* idx[i-1] is the first of its group only when the one
		 * before it differs; the group's second is what we rank. */
		if (i >= 2 && !strcmp(hf->entries[idx[i - 2]].host,
				      hf->entries[idx[i]].host))
			continue;
		if (idx[i] < best) {
			best = idx[i];
			best_first = idx[i - 1];
		}
	}
	free(idx);
	if (best == SIZE_MAX)
		return 0;
	*first = best_first;
	*second = best;
	return 1;
}

/* ---- writing ---------------------------------------------------------- */

/* Lines of a written slurm hostfile are cut at a comma past this many
 * bytes: well under HOSTFILE_LINE_MAX, and readable. */
#define SLURM_WRAP 4000

static int write_slurm(const struct hostfile *hf, FILE *out,
		       struct herd_err *err)
{
	struct hostlist *hl = NULL;
	char *expr = NULL;
	int rc = -1;

	if (hf->count == 0)
		return 0;
	hl = hostlist_new();
	if (!hl) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < hf->count; i++)
		if (hostlist_push_host(hl, hf->entries[i].host, err) < 0)
			goto out;
	expr = hostlist_compress(hl);
	if (!expr) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	/* Names that compress badly (several bracket groups) can give an
	 * expression longer than a line may be: break it at commas, which
	 * the reader joins again (a comma between lines). */
	for (size_t start = 0, i = 0;; i++) {
		bool end = expr[i] == '\0';

		if (!end && !(expr[i] == ',' && i - start >= SLURM_WRAP))
			continue;
		if (fprintf(out, "%.*s\n", (int)(i - start), expr + start) <
		    0) {
			herd_errprintf(err, "write error: %s", strerror(errno));
			goto out;
		}
		if (end)
			break;
		start = i + 1;
	}
	rc = 0;
out:
	free(expr);
	hostlist_free(hl);
	return rc;
}

int hostfile_write(const struct hostfile *hf, enum hostfile_format fmt,
		   int default_slots, FILE *out, struct herd_err *err)
{
	if (default_slots < 1)
		default_slots = 1;
	if (fmt == HOSTFILE_SLURM) {
		if (write_slurm(hf, out, err) < 0)
			return -1;
	} else if (fmt > HOSTFILE_AUTO && fmt < HOSTFILE_SLURM) {
		for (size_t i = 0; i < hf->count; i++) {
			const char *h = hf->entries[i].host;
			int s = hf->entries[i].slots ? hf->entries[i].slots
						     : default_slots;
			int n;

			switch (fmt) {
			case HOSTFILE_DEEPSPEED:
				n = fprintf(out, "%s slots=%d\n", h, s);
				break;
			case HOSTFILE_OPENMPI:
				n = fprintf(out, "%s slots=%d max_slots=%d\n",
					    h, s, s);
				break;
			case HOSTFILE_MPICH:
				n = fprintf(out, "%s:%d\n", h, s);
				break;
			default:
				n = fprintf(out, "%s\n", h);
				break;
			}
			if (n < 0)
				return herd_errprintf(err, "write error: %s",
						      strerror(errno));
		}
	} else {
		return herd_errprintf(err, "cannot write hostfile format '%s'",
				      hostfile_format_name(fmt));
	}
	if (ferror(out))
		return herd_errprintf(err, "write error: %s", strerror(errno));
	return 0;
}
