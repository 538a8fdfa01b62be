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
