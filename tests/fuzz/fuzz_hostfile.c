/* fuzz_hostfile.c — libFuzzer target for lib/hostfile: the input is parsed
 * with HOSTFILE_AUTO and with each format; whatever parses is written back
 * in every format to an in-memory stream and read again. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "herd/hostfile.h"

/* Round trips only for lists up to this size: a short input such as
 * "n[1-99999]" expands to a list whose ten re-parses under ASan would
 * exceed the fuzzer's per-input timeout without finding anything new. */
#define ROUND_TRIP_MAX 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void write_all_formats(const struct hostfile *hf)
{
	for (int f = HOSTFILE_PLAIN; f <= HOSTFILE_SLURM; f++) {
		struct herd_err err;
		struct hostfile *back;
		char *buf = NULL;
		size_t len = 0;
		FILE *out = open_memstream(&buf, &len);

		if (!out)
			abort();
		if (hostfile_write(hf, (enum hostfile_format)f, 1, out, &err) <
		    0)
			abort();
		if (fclose(out) != 0)
			abort();
		/* What herd writes, herd reads back with the same hosts. */
		back = hostfile_parse(buf, len, "fuzz-back",
				      (enum hostfile_format)f, &err);
		if (!back || back->count != hf->count)
			abort();
		hostfile_free(back);
		free(buf);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;

	(void)hostfile_detect(text, size);
	for (int f = HOSTFILE_AUTO; f <= HOSTFILE_SLURM; f++) {
		struct herd_err err;
		struct hostfile *hf;

		hf = hostfile_parse(text, size, "fuzz", (enum hostfile_format)f,
				    &err);
		if (hf && hf->count <= ROUND_TRIP_MAX)
			write_all_formats(hf);
		hostfile_free(hf);
	}
	return 0;
}
