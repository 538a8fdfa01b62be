/* fuzz_spec.c — libFuzzer target: spec_parse() on arbitrary bytes must
 * return a spec or an error, never crash or leak; an accepted spec must
 * print, and the printed text must parse again. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct herd_err err;
	struct spec *spec, *again;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	spec = spec_parse((const char *)data, size, "fuzz.yaml", &err);
	if (!spec) {
		/* Every refusal says where and what. */
		if (!err.text[0])
			abort();
		return 0;
	}
	f = open_memstream(&text, &len);
	if (f) {
		if (spec_print(spec, f) < 0)
			abort();
		fclose(f);
		again = spec_parse(text, len, "printed.yaml", &err);
		if (!again)
			abort();
		spec_free(again);
		free(text);
	}
	spec_free(spec);
	return 0;
}
