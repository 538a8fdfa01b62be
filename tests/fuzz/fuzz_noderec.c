/* fuzz_noderec.c — libFuzzer target: noderec_parse() on arbitrary bytes
 * (a node record is the user's own file, but a half-written or edited one
 * must be refused with words, never crash or leak); an accepted record
 * must print (noderec_json()) and parse again to the same record, and the
 * quarantine rule must run on it. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "herd/noderec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct herd_err err;
	struct noderec *r = NULL, *again = NULL;
	char *text;

	herd_err_clear(&err);
	if (noderec_parse((const char *)data, size, &r, &err) < 0) {
		if (!err.text[0] || r)
			abort();
		return 0;
	}
	if (!(text = noderec_json(r)))
		abort();
	if (noderec_parse(text, strlen(text), &again, &err) < 0)
		abort();
	if (again->n != r->n || again->quarantine_after != r->quarantine_after ||
	    again->quarantine_for_ms != r->quarantine_for_ms)
		abort();
	for (size_t i = 0; i < r->n; i++) {
		const struct noderec_host *h = &r->hosts[i], *g = &again->hosts[i];

		if (strcmp(h->host, g->host) || h->n != g->n)
			abort();
		for (size_t k = 0; k < h->n; k++)
			if (h->f[k].t_ms != g->f[k].t_ms ||
			    !same(h->f[k].kind, g->f[k].kind) ||
			    !same(h->f[k].reason, g->f[k].reason) ||
			    !same(h->f[k].run, g->f[k].run))
				abort();
		(void)noderec_until(h, h->n ? h->f[h->n - 1].t_ms : 0,
				    r->quarantine_after, r->quarantine_for_ms);
	}
	noderec_prune(again, 1764585700000, r->quarantine_for_ms);
	free(text);
	noderec_free(again);
	noderec_free(r);
	return 0;
}
