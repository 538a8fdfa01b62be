/* lib/run/failcost.c — what each failure cost; see failcost.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd/failcost.h"

static int64_t get_i64(const json_t *o, const char *key, int64_t dflt)
{
	const json_t *j = json_object_get(o, key);

	if (json_is_integer(j))
		return (int64_t)json_integer_value(j);
	if (json_is_real(j))
		return (int64_t)json_real_value(j);
	return dflt;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void cost_clear(struct failcost *f)
{
	free(f->hosts);
	free(f->reason);
	free(f->restore_tier);
	memset(f, 0, sizeof(*f));
}

/* The newest failure, or NULL. */
static struct failcost *newest(struct failcosts *fc)
{
	return fc->n ? &fc->v[fc->n - 1] : NULL;
}

static struct failcost *cost_new(struct failcosts *fc, int64_t t, int attempt,
				 const char *reason)
{
	struct failcost *f;

	if (fc->n == FAILCOST_MAX) {
		cost_clear(&fc->v[0]);
		memmove(fc->v, fc->v + 1, (fc->n - 1) * sizeof(*fc->v));
		fc->n--;
		fc->dropped++;
	}
	if (!fc->v) {
		fc->v = calloc(FAILCOST_MAX, sizeof(*fc->v));
		if (!fc->v)
			return NULL;
	}
	f = &fc->v[fc->n++];
	memset(f, 0, sizeof(*f));
	f->t = t;
	f->attempt = attempt;
	f->reason = dup_or_null(reason);
	f->how = FAILCOST_OPEN;
	f->detect_ms = 0;
	f->recover_ms = f->restore_ms = -1;
	f->step_before = f->step_restored = f->steps_redone = -1;
	return f;
}

static void add_host(struct failcost *f, const char *host)
{
	char *h;

	if (!host)
		return;
	if (!f->hosts) {
		f->hosts = strdup(host);
		return;
	}
	if (asprintf(&h, "%s,%s", f->hosts, host) < 0)
		return;
	free(f->hosts);
	f->hosts = h;
}

/* The N of ".../step_N" (any name ending in digits), or -1. */
static int64_t step_of_path(const char *path)
{
	const char *end, *p;

	if (!path || !*path)
		return -1;
	end = path + strlen(path);
	while (end > path && end[-1] == '/')
		end--;
	p = end;
	while (p > path && p[-1] >= '0' && p[-1] <= '9')
		p--;
	if (p == end || end - p > 15)
		return -1;
	return strtoll(p, NULL, 10);
}

void failcost_event(struct failcosts *fc, const char *event, const json_t *o,
		    int64_t t)
{
	struct failcost *f = newest(fc);
	int attempt = (int)get_i64(o, "attempt", 0);

	if (!strcmp(event, "node_failed")) {
		/* Attempt 0: the node never joined; no training was hit. */
		if (attempt < 1)
			return;
		if (!f || f->how != FAILCOST_OPEN) {
			f = cost_new(
			    fc, t, attempt,
			    json_string_value(json_object_get(o, "reason")));
			if (!f)
				return;
			f->detect_ms = get_i64(o, "silent_ms", 0);
		}
		add_host(f, json_string_value(json_object_get(o, "host")));
	} else if (!strcmp(event, "attempt_end")) {
		/* A rank's failure: none of the attempt's nodes failed. */
		if (get_i64(o, "status", 0) == 0 ||
		    (f && f->how == FAILCOST_OPEN))
			return;
		f = cost_new(fc, t, attempt,
			     json_string_value(json_object_get(o, "reason")));
	} else if (!strcmp(event, "attempt_start")) {
		if (!f || f->how != FAILCOST_OPEN)
			return;
		f->how = FAILCOST_RESTART;
		f->recover_ms = t - f->t;
		f->step_restored = step_of_path(
		    json_string_value(json_object_get(o, "checkpoint")));
		if (f->step_restored < 0)
			f->step_restored = 0;
	} else if (!strcmp(event, "job_end")) {
		if (f && f->how == FAILCOST_OPEN)
			f->how = FAILCOST_ENDED;
	} else if (!strcmp(event, "rejoin")) {
		if (!f || f->how != FAILCOST_OPEN ||
		    json_is_true(json_object_get(o, "fell_back")))
			return;
		f->how = FAILCOST_REJOIN;
		f->recover_ms = get_i64(o, "ms", t - f->t);
	} else if (!strcmp(event, "checkpoint_restored")) {
		int64_t ms = get_i64(o, "ms", -1),
			step = get_i64(o, "step", -1);

		if (!f)
			return;
		if (ms >= 0 && ms > f->restore_ms) {
			f->restore_ms = ms;
			free(f->restore_tier);
			f->restore_tier = dup_or_null(
			    json_string_value(json_object_get(o, "tier")));
		}
		if (step >= 0 &&
		    (f->step_restored < 0 || f->how == FAILCOST_RESTART ||
		     step < f->step_restored))
			f->step_restored = step;
	}
}

void failcost_steps(struct failcosts *fc, const double *t, const double *v,
		    size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < fc->n; i++) {
		struct failcost *f = &fc->v[i];

		while (k < n && t[k] < (double)f->t)
			k++;
		if (k > 0)
			f->step_before = (int64_t)v[k - 1];
		/* The survivors kept their state: only the step in flight
		 * is redone, and it was never counted. */
		if (f->how == FAILCOST_REJOIN && f->step_restored < 0 &&
		    f->step_before >= 0)
			f->steps_redone = 0;
		else if (f->step_before >= 0 && f->step_restored >= 0)
			f->steps_redone =
			    f->step_before > f->step_restored
				? f->step_before - f->step_restored
				: 0;
	}
}

static void fmt_ms(char *b, size_t len, int64_t ms)
{
	if (ms < 0)
		snprintf(b, len, "?");
	else if (ms < 10000)
		snprintf(b, len, "%.2f s", (double)ms / 1000.0);
	else
		snprintf(b, len, "%.1f s", (double)ms / 1000.0);
}

char *failcost_format_total(const struct failcost_total *t, char *buf,
			    size_t len)
{
	char d[24], r[24], s[24], redone[48];

	fmt_ms(d, sizeof(d), t->detect_ms);
	fmt_ms(r, sizeof(r), t->recover_ms);
	fmt_ms(s, sizeof(s), t->restore_ms);
	if (t->steps_redone >= 0)
		snprintf(redone, sizeof(redone), "%lld",
			 (long long)t->steps_redone);
	else
		snprintf(redone, sizeof(redone), "?");
	snprintf(buf, len,
		 "detect %s, rejoin or restart %s, restore %s, %s steps redone",
		 d, r, t->restore_ms >= 0 ? s : "none reported", redone);
	return buf;
}

char *failcost_format(const struct failcost *f, char *buf, size_t len)
{
	char d[24], r[24], s[24], redone[48];

	fmt_ms(d, sizeof(d), f->detect_ms);
	fmt_ms(r, sizeof(r), f->recover_ms);
	fmt_ms(s, sizeof(s), f->restore_ms);
	if (f->steps_redone >= 0)
		snprintf(redone, sizeof(redone), "%lld step%s redone",
			 (long long)f->steps_redone,
			 f->steps_redone == 1 ? "" : "s");
	else
		snprintf(redone, sizeof(redone), "steps redone ?");
	if (f->how == FAILCOST_ENDED) {
		snprintf(buf, len, "detect %s; not restarted (the job ended)",
			 d);
		return buf;
	}
	snprintf(buf, len, "detect %s, %s %s, restore %s%s%s%s, %s", d,
		 f->how == FAILCOST_REJOIN ? "rejoin" : "restart",
		 f->how == FAILCOST_OPEN ? "under way" : r,
		 f->restore_ms >= 0 ? s : "none reported",
		 f->restore_tier ? " (" : "",
		 f->restore_tier ? f->restore_tier : "",
		 f->restore_tier ? ")" : "", redone);
	return buf;
}

struct failcost_total failcost_total(const struct failcosts *fc)
{
	struct failcost_total tot = {0, -1, -1, -1, -1};
	int64_t sum[4] = {0}, cnt[4] = {0};

	for (size_t i = 0; i < fc->n; i++) {
		const struct failcost *f = &fc->v[i];
		int64_t val[] = {f->detect_ms, f->recover_ms, f->restore_ms,
				 f->steps_redone};

		if (f->how == FAILCOST_OPEN || f->how == FAILCOST_ENDED)
			continue;
		tot.n++;
		for (int k = 0; k < 4; k++)
			if (val[k] >= 0) {
				sum[k] += val[k];
				cnt[k]++;
			}
	}
	{
		int64_t *mean[] = {&tot.detect_ms, &tot.recover_ms,
				   &tot.restore_ms, &tot.steps_redone};

		for (int k = 0; k < 4; k++)
			if (cnt[k])
				*mean[k] = sum[k] / cnt[k];
	}
	return tot;
}

json_t *failcost_json(const struct failcosts *fc)
{
	static const char *const how[] = {"open", "restart", "rejoin", "ended"};
	json_t *a = json_array();

	for (size_t i = 0; a && i < fc->n; i++) {
		const struct failcost *f = &fc->v[i];
		json_t *j =
		    json_pack("{s:I, s:i, s:s, s:I}", "t", (json_int_t)f->t,
			      "attempt", f->attempt, "how", how[f->how],
			      "detect_ms", (json_int_t)f->detect_ms);
		const char *keys[] = {"recover_ms", "restore_ms", "step_before",
				      "step_restored", "steps_redone"};
		int64_t vals[] = {f->recover_ms, f->restore_ms, f->step_before,
				  f->step_restored, f->steps_redone};

		if (!j) {
			json_decref(a);
			return NULL;
		}
		for (int k = 0; k < 5; k++)
			if (vals[k] >= 0)
				json_object_set_new(j, keys[k],
						    json_integer(vals[k]));
		if (f->hosts)
			json_object_set_new(j, "hosts", json_string(f->hosts));
		if (f->reason)
			json_object_set_new(j, "reason",
					    json_string(f->reason));
		if (f->restore_tier)
			json_object_set_new(j, "restore_tier",
					    json_string(f->restore_tier));
		json_array_append_new(a, j);
	}
	return a;
}

void failcost_free(struct failcosts *fc)
{
	for (size_t i = 0; i < fc->n; i++)
		cost_clear(&fc->v[i]);
	free(fc->v);
	memset(fc, 0, sizeof(*fc));
}
