/* usage.c — this process's CPU time and peak memory; see usage.h. */
#include <sys/resource.h>

#include "herd/usage.h"

static json_int_t cpu_ms(const struct rusage *ru)
{
	return (json_int_t)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000 +
	       (ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1000;
}

int usage_add_json(json_t *obj)
{
	struct rusage self, kids;

	if (getrusage(RUSAGE_SELF, &self) < 0 ||
	    getrusage(RUSAGE_CHILDREN, &kids) < 0)
		return -1;
	/* Linux gives ru_maxrss in KiB. */
	if (json_object_set_new(obj, "cpu_ms", json_integer(cpu_ms(&self))) <
		0 ||
	    json_object_set_new(obj, "children_cpu_ms",
				json_integer(cpu_ms(&kids))) < 0 ||
	    json_object_set_new(obj, "peak_rss_kib",
				json_integer((json_int_t)self.ru_maxrss)) < 0)
		return -1;
	return 0;
}
