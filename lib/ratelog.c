/* ratelog.c — one line per interval; see ratelog.h. */
#include "herd/ratelog.h"

void ratelog_init(struct ratelog *r, int64_t interval_ms)
{
	r->interval_ms = interval_ms > 0 ? interval_ms : 0;
	r->next_ms = 0;
	r->suppressed = 0;
	r->started = false;
}

bool ratelog_hit(struct ratelog *r, int64_t now_ms, unsigned long *suppressed)
{
	if (r->started && now_ms < r->next_ms) {
		r->suppressed++;
		return false;
	}
	*suppressed = r->suppressed;
	r->suppressed = 0;
	r->started = true;
	r->next_ms = now_ms + r->interval_ms;
	return true;
}

unsigned long ratelog_flush(struct ratelog *r, int64_t now_ms)
{
	unsigned long n = r->suppressed;

	if (n) {
		r->suppressed = 0;
		r->started = true;
		r->next_ms = now_ms + r->interval_ms;
	}
	return n;
}

int64_t ratelog_due(const struct ratelog *r)
{
	return r->next_ms;
}
