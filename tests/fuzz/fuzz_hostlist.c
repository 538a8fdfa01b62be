/* fuzz_hostlist.c — libFuzzer target: hostlist_expand() on arbitrary bytes
 * must give a list or an error naming a column, never crash or leak; an
 * accepted list must compress, and the compressed text must expand to the
 * same hosts in the same order. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "herd/hostlist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct herd_err err;
	struct hostlist *hl, *again;
	char *expr, *text;

	expr = malloc(size + 1);
	if (!expr)
		return 0;
	memcpy(expr, data, size);
	expr[size] = '\0';
	herd_err_clear(&err);
	hl = hostlist_expand(expr, &err);
	free(expr);
	if (!hl) {
		/* Every refusal says something (a column, or the cap). */
		if (!err.text[0])
			abort();
		return 0;
	}
	text = hostlist_compress(hl);
	if (!text)
		abort();
	again = hostlist_expand(text, &err);
	if (!again || hostlist_count(again) != hostlist_count(hl))
		abort();
	for (size_t i = 0; i < hostlist_count(hl); i++)
		if (strcmp(hostlist_nth(hl, i), hostlist_nth(again, i)))
			abort();
	hostlist_free(again);
	free(text);
	hostlist_free(hl);
	return 0;
}
