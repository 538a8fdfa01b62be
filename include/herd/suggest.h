/* suggest.h — "did you mean": the nearest of a few known words to a
 * mistyped one, by edit distance (an unknown command, option, --set
 * name). */
#ifndef HERD_SUGGEST_H
#define HERD_SUGGEST_H

#include <stddef.h>

/* Words longer than this are not compared (suggest_distance returns
 * SIZE_MAX): the table is on the stack, and nobody mistypes a 64-letter
 * option. */
#define SUGGEST_WORD_MAX 64

/* The optimal-string-alignment (restricted Damerau-Levenshtein) distance
 * between a and b: insertions, deletions, substitutions and swaps of two
 * neighbouring characters each count 1 ("stauts" is 1 from "status").
 * Returns SIZE_MAX when either is longer than SUGGEST_WORD_MAX. */
size_t suggest_distance(const char *a, const char *b);

/* The word of words[0..n) nearest to typed, or NULL when none is near
 * enough to be what was meant: at most 1 edit for words of up to 4
 * characters, 2 up to 8, 3 beyond, and under half the word's length
 * ("-x" is no "-v").
 * Ties go to the first.  A NULL entry of words is skipped.  The result
 * points into words. */
const char *suggest_nearest(const char *typed, const char *const *words,
			    size_t n);

#endif
