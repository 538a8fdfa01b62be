/* fuzz_runlog.c — libFuzzer target: arbitrary bytes as events.jsonl and
 * metrics.jsonl lines (the first byte picks which file each line goes to)
 * must never crash or leak the run directory model; every line is either
 * taken or counted as bad, and the series stay within their bound. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "herd/runlog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/herd-fuzz-runlog.XXXXXX";

static void cleanup(void)
{
	char path[64];

	snprintf(path, sizeof(path), "%s/events.jsonl", dir);
	unlink(path);
	rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int made;
	struct runlog *rl;
	const char *p = (const char *)data, *end = p + size;
	uint64_t lines = 0;

	if (!made) {
		char path[64];

		if (!mkdtemp(dir))
			abort();
		/* runlog_open wants a run directory. */
		snprintf(path, sizeof(path), "%s/events.jsonl", dir);
		if (close(creat(path, 0600)) < 0)
			abort();
		atexit(cleanup);
		made = 1;
	}
	rl = runlog_open(dir, NULL);
	if (!rl)
		abort();
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = (size_t)((nl ? nl : end) - p);

		if (len) {
			if (p[0] & 1)
				runlog_feed_metrics(rl, p + 1, len - 1);
			else
				runlog_feed_event(rl, p + 1, len - 1);
			lines++;
		}
		p += len + 1;
	}
	if (rl->ev.lines + rl->met.lines != lines)
		abort();
	for (int k = 0; k < RUNLOG_JOB_N_; k++)
		if (rl->job_s[k].n > RUNLOG_SERIES_MAX)
			abort();
	if (rl->n_marks > RUNLOG_MARKS_MAX)
		abort();
	runlog_free(rl);
	return 0;
}
