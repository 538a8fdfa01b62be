/* lib/wire/preauth.c — the pool of unauthenticated connections; see preauth.h.
 *
 * A flat array in arrival order: the pool holds a few hundred entries at
 * most and changes only when a connection is accepted or ends, so a scan
 * is cheaper than any index.  Finding the source that holds the most
 * uses a scratch hash table rebuilt per call (only when the pool is
 * full).
 */
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "herd/preauth.h"

struct preauth_entry {
	struct preauth_src src;
	void *owner;
	int64_t since_ms;
};

struct scratch {
	const struct preauth_src *src; /* NULL: free slot */
	size_t count;
	size_t first; /* index of its oldest entry */
};

struct preauth {
	size_t max, per_source, n;
	struct preauth_entry *e;
	struct scratch *tab; /* 2 * max rounded up to a power of two */
	size_t tab_size;
};

struct preauth *preauth_new(size_t max, size_t per_source)
{
	struct preauth *p;

	if (max == 0 || per_source == 0 || per_source > max || max > (1u << 20))
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->max = max;
	p->per_source = per_source;
	for (p->tab_size = 2; p->tab_size < 2 * max; p->tab_size *= 2)
		;
	p->e = calloc(max, sizeof(*p->e));
	p->tab = calloc(p->tab_size, sizeof(*p->tab));
	if (!p->e || !p->tab) {
		preauth_free(p);
		return NULL;
	}
	return p;
}

void preauth_free(struct preauth *p)
{
	if (!p)
		return;
	free(p->e);
	free(p->tab);
	free(p);
}

void preauth_src_of(struct preauth_src *src, const struct sockaddr *sa)
{
	memset(src, 0, sizeof(*src));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		src->addr[10] = src->addr[11] = 0xff;
		memcpy(src->addr + 12, &in->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 =
		    (const struct sockaddr_in6 *)sa;

		memcpy(src->addr, &in6->sin6_addr, 16);
	}
}

static bool same(const struct preauth_src *a, const struct preauth_src *b)
{
	return !memcmp(a->addr, b->addr, sizeof(a->addr));
}

size_t preauth_count(const struct preauth *p)
{
	return p->n;
}

size_t preauth_count_src(const struct preauth *p, const struct preauth_src *src)
{
	size_t k = 0;

	for (size_t i = 0; i < p->n; i++)
		k += same(&p->e[i].src, src);
	return k;
}

static size_t hash(const struct preauth_src *src)
{
	/* FNV-1a: the sources are not secret and the table is rebuilt on
	 * every call, so a crafted collision costs the attacker's own
	 * connections a few probes, nothing more. */
	size_t h = 2166136261u;

	for (size_t i = 0; i < sizeof(src->addr); i++)
		h = (h ^ src->addr[i]) * 16777619u;
	return h;
}

/* The index of the oldest entry of the source holding the most entries
 * (ties: the source whose oldest entry is older). */
static size_t busiest_oldest(struct preauth *p)
{
	size_t mask = p->tab_size - 1, best = 0, best_count = 0;

	memset(p->tab, 0, p->tab_size * sizeof(*p->tab));
	for (size_t i = 0; i < p->n; i++) {
		size_t h = hash(&p->e[i].src) & mask;

		while (p->tab[h].src && !same(p->tab[h].src, &p->e[i].src))
			h = (h + 1) & mask;
		if (!p->tab[h].src) {
			p->tab[h].src = &p->e[i].src;
			p->tab[h].first = i;
		}
		p->tab[h].count++;
		if (p->tab[h].count > best_count ||
		    (p->tab[h].count == best_count && p->tab[h].first < best)) {
			best_count = p->tab[h].count;
			best = p->tab[h].first;
		}
	}
	return best;
}

void *preauth_victim(struct preauth *p, const struct preauth_src *src)
{
	size_t k = 0, first = 0;

	for (size_t i = 0; i < p->n; i++) {
		if (!same(&p->e[i].src, src))
			continue;
		if (k++ == 0)
			first = i;
	}
	if (k >= p->per_source)
		return p->e[first].owner;
	if (p->n >= p->max)
		return p->e[busiest_oldest(p)].owner;
	return NULL;
}

int preauth_add(struct preauth *p, const struct preauth_src *src, void *owner,
		int64_t now_ms)
{
	if (!owner || p->n >= p->max ||
	    preauth_count_src(p, src) >= p->per_source)
		return -1;
	p->e[p->n].src = *src;
	p->e[p->n].owner = owner;
	p->e[p->n].since_ms = now_ms;
	p->n++;
	return 0;
}

void preauth_del(struct preauth *p, void *owner)
{
	for (size_t i = 0; i < p->n; i++) {
		if (p->e[i].owner != owner)
			continue;
		memmove(&p->e[i], &p->e[i + 1],
			(p->n - i - 1) * sizeof(p->e[0]));
		p->n--;
		return;
	}
}

void *preauth_oldest(const struct preauth *p, int64_t *since_ms)
{
	if (p->n == 0)
		return NULL;
	if (since_ms)
		*since_ms = p->e[0].since_ms;
	return p->e[0].owner;
}
