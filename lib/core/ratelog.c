/* lib/core/ratelog.c — a token bucket for log lines; see ratelog.h. */
#include "herd/ratelog.h"

void ratelog_init(struct ratelog *r, unsigned burst, int64_t interval_ms)
{
	r->interval_ms = interval_ms > 0 ? interval_ms : 1;
	r->burst = r->tokens = burst > 0 ? burst : 1;
	r->refill_ms = 0;
	r->suppressed = 0;
}

/* Tokens that came back since refill_ms, whole intervals only. */
static void refill(struct ratelog *r, int64_t now_ms)
{
	int64_t n;

	if (r->tokens >= r->burst || now_ms < r->refill_ms + r->interval_ms)
		return;
	n = (now_ms - r->refill_ms) / r->interval_ms;
	if (n >= (int64_t)(r->burst - r->tokens)) {
		r->tokens = r->burst;
		return;
	}
	r->tokens += (unsigned)n;
	r->refill_ms += n * r->interval_ms;
}

/* Takes a token; a full bucket starts its interval now. */
static int take(struct ratelog *r, int64_t now_ms)
{
	refill(r, now_ms);
	if (r->tokens == 0)
		return 0;
	if (r->tokens == r->burst)
		r->refill_ms = now_ms;
	r->tokens--;
	return 1;
}

int ratelog_hit(struct ratelog *r, int64_t now_ms, unsigned long *suppressed)
{
	if (!take(r, now_ms)) {
		r->suppressed++;
		return 0;
	}
	*suppressed = r->suppressed;
	r->suppressed = 0;
	return 1;
}

unsigned long ratelog_flush(struct ratelog *r, int64_t now_ms)
{
	unsigned long n = r->suppressed;

	if (n) {
		(void)take(r, now_ms);
		r->suppressed = 0;
	}
	return n;
}

int64_t ratelog_due(const struct ratelog *r)
{
	return r->refill_ms + r->interval_ms;
}
