/* suggest.c — "did you mean" by edit distance (suggest.h). */
#include <stdint.h>
#include <string.h>

#include "herd/suggest.h"

static size_t min3(size_t a, size_t b, size_t c)
{
	size_t m = a < b ? a : b;

	return m < c ? m : c;
}

size_t suggest_distance(const char *a, const char *b)
{
	size_t d[SUGGEST_WORD_MAX + 1][SUGGEST_WORD_MAX + 1];
	size_t la = strlen(a), lb = strlen(b);

	if (la > SUGGEST_WORD_MAX || lb > SUGGEST_WORD_MAX)
		return SIZE_MAX;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			size_t cost = a[i - 1] != b[j - 1];

			d[i][j] = min3(d[i - 1][j] + 1, d[i][j - 1] + 1,
				       d[i - 1][j - 1] + cost);
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < d[i][j])
				d[i][j] = d[i - 2][j - 2] + 1;
		}
	return d[la][lb];
}

/* How many edits still read as a typo of a word of len characters. */
static size_t allowed(size_t len)
{
	return len <= 4 ? 1 : len <= 8 ? 2 : 3;
}

const char *suggest_nearest(const char *typed, const char *const *words,
			    size_t n)
{
	const char *best = NULL;
	size_t best_d = SIZE_MAX;

	for (size_t i = 0; i < n; i++) {
		size_t d, len;

		if (!words[i])
			continue;
		d = suggest_distance(typed, words[i]);
		len = strlen(words[i]);
		if (d == SIZE_MAX || d > allowed(len) || 2 * d >= len)
			continue;
		if (d < best_d) {
			best = words[i];
			best_d = d;
		}
	}
	return best;
}
