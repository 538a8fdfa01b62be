/* fuzz_jobreg.c — libFuzzer target: jobreg_entry_parse() on arbitrary
 * bytes (a registry file is the user's own, but a half-written or edited
 * one must be refused, never crash or leak); an accepted entry must print
 * (jobreg_entry_json()) and the printed text must parse again to the same
 * entry. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "herd/jobreg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct herd_err err;
	struct jobreg_entry e, again;
	char *text;

	herd_err_clear(&err);
	if (jobreg_entry_parse((const char *)data, size, &e, &err) < 0) {
		if (!err.text[0])
			abort();
		return 0;
	}
	if (!(text = jobreg_entry_json(&e)))
		abort();
	if (jobreg_entry_parse(text, strlen(text), &again, &err) < 0)
		abort();
	if (!same(e.id, again.id) || !same(e.run_dir, again.run_dir) ||
	    !same(e.name, again.name) || !same(e.host, again.host) ||
	    !same(e.sock, again.sock) || !same(e.machine, again.machine) ||
	    e.pid != again.pid || e.started_ms != again.started_ms ||
	    e.detached != again.detached)
		abort();
	free(text);
	jobreg_entry_clear(&again);
	jobreg_entry_clear(&e);
	return 0;
}
