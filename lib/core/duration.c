/* duration.c — the job spec's durations: "500ms", "3s", "2m", "1h". */
#include <stdio.h>
#include <string.h>

#include "herd/spec.h"

static const struct {
	const char *unit;
	long ms;
} units[] = {
    {"h", 3600L * 1000},
    {"m", 60L * 1000},
    {"s", 1000},
    {"ms", 1},
};

#define N_UNITS (sizeof(units) / sizeof(units[0]))

int spec_duration_parse(const char *text, long *ms, struct herd_err *err)
{
	const char *p = text;
	long value = 0;

	if (!text || !*text)
		return herd_errprintf(err, "expected a duration such as 3s "
					   "(units: ms, s, m, h)");
	if (*p < '0' || *p > '9')
		return herd_errprintf(err, "expected a duration: digits and "
					   "a unit (ms, s, m, h), e.g. 3s");
	for (; *p >= '0' && *p <= '9'; p++) {
		/* Stop before the multiplication can overflow; any value
		 * this long is refused below anyway. */
		if (value > SPEC_DURATION_MAX)
			return herd_errprintf(err, "duration too long (at "
						   "most 8760h)");
		value = value * 10 + (*p - '0');
	}
	if (!*p)
		return herd_errprintf(err,
				      "a duration needs a unit: write "
				      "%lds or %ldms (units: ms, s, m, h)",
				      value, value);
	for (size_t i = 0; i < N_UNITS; i++) {
		if (strcmp(p, units[i].unit))
			continue;
		if (value > SPEC_DURATION_MAX / units[i].ms)
			return herd_errprintf(err, "duration too long (at "
						   "most 8760h)");
		*ms = value * units[i].ms;
		return 0;
	}
	return herd_errprintf(err, "expected a duration unit ms, s, m or h "
				   "after the number");
}

int spec_duration_format(long ms, char *buf, size_t size)
{
	size_t i = 0;
	int n;

	if (ms < 0 || size == 0)
		return -1;
	if (ms == 0) {
		n = snprintf(buf, size, "0s");
		return n < 0 || (size_t)n >= size ? -1 : 0;
	}
	while (i < N_UNITS - 1 && ms % units[i].ms != 0)
		i++;
	n = snprintf(buf, size, "%ld%s", ms / units[i].ms, units[i].unit);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}

const char *spec_duration_text(long ms, char *buf, size_t size)
{
	if (spec_duration_format(ms, buf, size) < 0)
		snprintf(buf, size, "%ldms", ms);
	return buf;
}

/* --- byte counts: "512M", "10G" ----------------------------------------- */

static const struct {
	const char *unit;
	int shift;
} byte_units[] = {
    {"T", 40},	 {"TiB", 40}, {"G", 30},   {"GiB", 30}, {"M", 20},
    {"MiB", 20}, {"K", 10},   {"KiB", 10}, {"", 0},
};

#define N_BYTE_UNITS (sizeof(byte_units) / sizeof(byte_units[0]))

/* 1 PiB: more than any disk a check would ask for. */
#define BYTES_MAX (1LL << 50)

int spec_bytes_parse(const char *text, long long *bytes, struct herd_err *err)
{
	const char *p = text;
	long long value = 0;

	if (!text || *p < '0' || *p > '9')
		return herd_errprintf(err, "expected a size: digits and an "
					   "optional unit K, M, G or T, e.g. "
					   "10G");
	for (; *p >= '0' && *p <= '9'; p++) {
		if (value > BYTES_MAX)
			return herd_errprintf(err, "size too large (at most "
						   "1024T)");
		value = value * 10 + (*p - '0');
	}
	for (size_t i = 0; i < N_BYTE_UNITS; i++) {
		if (strcmp(p, byte_units[i].unit))
			continue;
		if (value > BYTES_MAX >> byte_units[i].shift)
			return herd_errprintf(err, "size too large (at most "
						   "1024T)");
		*bytes = value << byte_units[i].shift;
		return 0;
	}
	return herd_errprintf(err, "expected a size unit K, M, G or T after "
				   "the number");
}

int spec_bytes_format(long long bytes, char *buf, size_t size)
{
	static const char *const u[] = {"T", "G", "M", "K"};
	static const int shifts[] = {40, 30, 20, 10};
	int n;

	if (bytes < 0 || size == 0)
		return -1;
	for (size_t i = 0; i < 4; i++) {
		long long m = 1LL << shifts[i];

		if (bytes >= m && bytes % m == 0) {
			n = snprintf(buf, size, "%lld%s", bytes / m, u[i]);
			return n < 0 || (size_t)n >= size ? -1 : 0;
		}
	}
	n = snprintf(buf, size, "%lld", bytes);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}
