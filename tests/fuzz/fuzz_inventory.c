/* fuzz_inventory.c — libFuzzer target for lib/inventory: the input's first
 * line is a filter, the rest an inventory's answer.  Whatever parses must
 * hold only valid host names and slots in range. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "herd/inventory.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	const char *nl = memchr(text, '\n', size);
	size_t flen = nl ? (size_t)(nl - text) : 0;
	char *filter = strndup(text, flen);
	struct hostfile *hf;
	struct herd_err err;

	if (!filter)
		return 0;
	(void)inventory_filter_check(filter, &err);
	hf = inventory_parse(nl ? nl + 1 : text, nl ? size - flen - 1 : size,
			     filter, "fuzz", &err);
	for (size_t i = 0; hf && i < hf->count; i++) {
		if (hostfile_host_check(hf->entries[i].host, "fuzz", &err) < 0 ||
		    hf->entries[i].slots < 0 ||
		    hf->entries[i].slots > HOSTFILE_SLOTS_MAX)
			abort();
	}
	if (!hf && !err.text[0])
		abort(); /* a failure always says why */
	hostfile_free(hf);
	free(filter);
	return 0;
}
