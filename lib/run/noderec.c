/* lib/run/noderec.c — the node record of a job (noderec.h): failures per host,
 * in memory and as JSON.  noderec_file.c keeps the records on disk, next to
 * the job registry with jobreg.h's directory rules. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "noderec_int.h"

#define NODEREC_VERSION 1

struct noderec *noderec_new(void)
{
	struct noderec *r = calloc(1, sizeof(*r));

	if (r) {
		r->quarantine_after = -1;
		r->quarantine_for_ms = -1;
	}
	return r;
}

static void failure_clear(struct noderec_failure *f)
{
	free(f->kind);
	free(f->reason);
	free(f->run);
	memset(f, 0, sizeof(*f));
}

static void host_clear(struct noderec_host *h)
{
	for (size_t i = 0; i < h->n; i++)
		failure_clear(&h->f[i]);
	free(h->f);
	free(h->host);
	memset(h, 0, sizeof(*h));
}

void noderec_free(struct noderec *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		host_clear(&r->hosts[i]);
	free(r->hosts);
	free(r->job);
	free(r->job_file);
	free(r);
}

char *noderec_key(const char *name, const char *job_file)
{
	char *real = job_file ? realpath(job_file, NULL) : NULL;
	uint32_t h = 2166136261u; /* FNV-1a */
	char *key = NULL;

	if (!name)
		return NULL;
	if (!real)
		return strdup(name);
	for (const unsigned char *p = (const unsigned char *)real; *p; p++)
		h = (h ^ *p) * 16777619u;
	if (asprintf(&key, "%s@%08x", name, (unsigned)h) < 0)
		key = NULL;
	free(real);
	return key;
}

bool noderec_key_is(const char *key, const char *name)
{
	size_t n = strlen(name);

	return !strncmp(key, name, n) &&
	       (key[n] == '\0' ||
		(key[n] == '@' && strlen(key + n + 1) == 8 &&
		 strspn(key + n + 1, "0123456789abcdef") == 8));
}

bool noderec_name_ok(const char *name)
{
	return name && name[0] && name[0] != '.' && !strchr(name, '/') &&
	       strlen(name) <= NODEREC_KEY_MAX;
}

/* No control characters: every string ends up on one terminal line. */
bool noderec_text_ok(const char *s, size_t max)
{
	size_t len = strlen(s);

	if (!len || len > max)
		return false;
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < ' ' || *p == 0x7f)
			return false;
	return true;
}

bool noderec_kind_ok(const char *s)
{
	return !strcmp(s, "failed") || !strcmp(s, "unhealthy") ||
	       !strcmp(s, "straggler");
}

/* s cut to at most max bytes, not inside a UTF-8 character; control
 * characters become spaces.  malloc'd or NULL. */
static char *cut(const char *s, size_t max)
{
	size_t len = strlen(s);
	char *out;

	if (len > max) {
		len = max;
		while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
			len--;
	}
	if (!(out = strndup(s, len)))
		return NULL;
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < ' ' || *p == 0x7f)
			*p = ' ';
	return out;
}

struct noderec_host *noderec_find(const struct noderec *r, const char *host)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->hosts[i].host, host))
			return &r->hosts[i];
	return NULL;
}

/* A new empty host entry at the end; NULL when out of memory. */
static struct noderec_host *host_push(struct noderec *r, const char *host)
{
	struct noderec_host *v = realloc(r->hosts, (r->n + 1) * sizeof(*v));
	struct noderec_host *h;

	if (!v)
		return NULL;
	r->hosts = v;
	h = &v[r->n];
	memset(h, 0, sizeof(*h));
	if (!(h->host = strdup(host)))
		return NULL;
	r->n++;
	return h;
}

static void host_drop(struct noderec *r, size_t i)
{
	host_clear(&r->hosts[i]);
	memmove(&r->hosts[i], &r->hosts[i + 1],
		(r->n - i - 1) * sizeof(r->hosts[0]));
	r->n--;
}

static int64_t last_t(const struct noderec_host *h)
{
	return h->n ? h->f[h->n - 1].t_ms : INT64_MIN;
}

int noderec_add(struct noderec *r, const char *host, int64_t t_ms,
		const char *kind, const char *reason, const char *run)
{
	struct noderec_host *h;
	struct noderec_failure f = {.t_ms = t_ms};

	if (!host || !host[0] || !kind || !kind[0] || !reason)
		return -1;
	if (!(f.kind = strdup(kind)) ||
	    !(f.reason = cut(reason[0] ? reason : "-", NODEREC_REASON_MAX)) ||
	    (run && !(f.run = strdup(run)))) {
		failure_clear(&f);
		return -1;
	}
	if (!(h = noderec_find(r, host))) {
		if (r->n >= NODEREC_HOSTS_MAX) {
			size_t oldest = 0;

			for (size_t i = 1; i < r->n; i++)
				if (last_t(&r->hosts[i]) <
				    last_t(&r->hosts[oldest]))
					oldest = i;
			host_drop(r, oldest);
		}
		if (!(h = host_push(r, host))) {
			failure_clear(&f);
			return -1;
		}
	}
	if (h->n == NODEREC_KEEP) {
		failure_clear(&h->f[0]);
		memmove(&h->f[0], &h->f[1], (h->n - 1) * sizeof(h->f[0]));
		h->n--;
	} else {
		struct noderec_failure *v =
		    realloc(h->f, (h->n + 1) * sizeof(*v));

		if (!v) {
			failure_clear(&f);
			return -1;
		}
		h->f = v;
	}
	/* Oldest first, whatever order the clocks of concurrent runs gave
	 * them. */
	{
		size_t i = h->n;

		while (i > 0 && h->f[i - 1].t_ms > f.t_ms) {
			h->f[i] = h->f[i - 1];
			i--;
		}
		h->f[i] = f;
		h->n++;
	}
	return 0;
}

int noderec_remove(struct noderec *r, const char *host)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->hosts[i].host, host)) {
			host_drop(r, i);
			return 0;
		}
	return -1;
}

void noderec_prune(struct noderec *r, int64_t now_ms, long window_ms)
{
	int64_t from = now_ms - window_ms;

	for (size_t i = r->n; i-- > 0;) {
		struct noderec_host *h = &r->hosts[i];
		size_t k = 0;

		while (k < h->n && h->f[k].t_ms <= from)
			failure_clear(&h->f[k++]);
		if (k) {
			memmove(&h->f[0], &h->f[k],
				(h->n - k) * sizeof(h->f[0]));
			h->n -= k;
		}
		if (!h->n)
			host_drop(r, i);
	}
}

size_t noderec_recent(const struct noderec_host *h, int64_t now_ms,
		      long window_ms, const struct noderec_failure **last)
{
	size_t count = 0;

	if (last)
		*last = NULL;
	for (size_t i = 0; h && i < h->n; i++)
		if (h->f[i].t_ms > now_ms - window_ms) {
			count++;
			if (last)
				*last = &h->f[i];
		}
	return count;
}

int64_t noderec_until(const struct noderec_host *h, int64_t now_ms, int after,
		      long window_ms)
{
	size_t count;

	if (after <= 0 || !h)
		return 0;
	count = noderec_recent(h, now_ms, window_ms, NULL);
	if (count < (size_t)after)
		return 0;
	/* Oldest first: the last `after` failures start at n - after; the
	 * quarantine holds while that one is in the window. */
	return h->f[h->n - (size_t)after].t_ms + window_ms;
}

/* --- JSON --------------------------------------------------------------- */

/* "what: " in front of err's text. */
static int err_prefix(struct herd_err *err, const char *what)
{
	char was[HERD_ERR_MAX];

	if (!err)
		return -1;
	memcpy(was, err->text, sizeof(was));
	return herd_errprintf(err, "%s: %s", what, was);
}

static int parse_failure(json_t *o, struct noderec_failure *f,
			 struct herd_err *err)
{
	json_error_t jerr;
	json_int_t t;
	const char *kind, *reason, *run = NULL;
	json_t *runj = NULL;

	if (json_unpack_ex(o, &jerr, JSON_STRICT, "{s:I, s:s, s:s, s?o}", "t",
			   &t, "kind", &kind, "reason", &reason, "run",
			   &runj) < 0)
		return herd_errprintf(err,
				      "a failure is {t, kind, reason, run}: "
				      "%s",
				      jerr.text);
	if (runj && !json_is_null(runj) && !(run = json_string_value(runj)))
		return herd_errprintf(err, "a failure's run is a string or "
					   "null");
	if (t < 0 || t > NODEREC_T_MAX)
		return herd_errprintf(err, "failure time %lld out of range",
				      (long long)t);
	if (!noderec_kind_ok(kind))
		return herd_errprintf(err,
				      "failure kind '%.40s' is not failed, "
				      "unhealthy or straggler",
				      kind);
	if (!noderec_text_ok(reason, NODEREC_REASON_MAX))
		return herd_errprintf(err, "a failure's reason is empty, too "
					   "long or has control characters");
	if (run && !noderec_text_ok(run, NODEREC_WORD_MAX))
		return herd_errprintf(err, "a failure's run id is empty, too "
					   "long or has control characters");
	f->t_ms = (int64_t)t;
	if (!(f->kind = strdup(kind)) || !(f->reason = strdup(reason)) ||
	    (run && !(f->run = strdup(run))))
		return herd_errprintf(err, "out of memory");
	return 0;
}

static int parse_host(const char *host, json_t *o, struct noderec_host *h,
		      struct herd_err *err)
{
	json_error_t jerr;
	json_t *arr, *v;
	size_t i;

	if (!noderec_text_ok(host, NODEREC_HOST_MAX))
		return herd_errprintf(err,
				      "host name '%.40s' is empty, too "
				      "long or has control characters",
				      host);
	if (json_unpack_ex(o, &jerr, JSON_STRICT, "{s:o}", "failures", &arr) <
		0 ||
	    !json_is_array(arr))
		return herd_errprintf(err,
				      "host %s: expected {\"failures\": "
				      "[...]}",
				      host);
	if (json_array_size(arr) > NODEREC_KEEP)
		return herd_errprintf(err, "host %s: %zu failures, at most %d",
				      host, json_array_size(arr), NODEREC_KEEP);
	if (json_array_size(arr) &&
	    !(h->f = calloc(json_array_size(arr), sizeof(*h->f))))
		return herd_errprintf(err, "out of memory");
	json_array_foreach(arr, i, v)
	{
		if (parse_failure(v, &h->f[h->n++], err) < 0) {
			char what[NODEREC_HOST_MAX + 8];

			snprintf(what, sizeof(what), "host %s", host);
			return err_prefix(err, what);
		}
		if (i > 0 && h->f[i].t_ms < h->f[i - 1].t_ms)
			return herd_errprintf(err,
					      "host %s: failures out of "
					      "order",
					      host);
	}
	return 0;
}

int noderec_parse(const char *text, size_t len, struct noderec **out,
		  struct herd_err *err)
{
	json_error_t jerr;
	json_t *o = NULL, *hosts, *v;
	struct noderec *r = NULL;
	const char *host, *job = NULL, *job_file = NULL;
	int version, after;
	json_int_t window;
	int ret = -1;

	*out = NULL;
	if (len > NODEREC_FILE_MAX) {
		herd_errprintf(err, "%zu bytes, more than a record holds", len);
		goto out;
	}
	o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!o || !json_is_object(o)) {
		herd_errprintf(err, "not a JSON object (%s)",
			       o ? "other value" : jerr.text);
		goto out;
	}
	if (json_unpack_ex(o, &jerr, JSON_STRICT,
			   "{s:i, s:i, s:I, s:o, s?s, s?s}", "version",
			   &version, "quarantine_after", &after,
			   "quarantine_for_ms", &window, "hosts", &hosts, "job",
			   &job, "job_file", &job_file) < 0) {
		herd_errprintf(err,
			       "expected {version, quarantine_after, "
			       "quarantine_for_ms, hosts, job, job_file}: %s",
			       jerr.text);
		goto out;
	}
	if ((job && !noderec_text_ok(job, NODEREC_KEY_MAX)) ||
	    (job_file && !noderec_text_ok(job_file, PATH_MAX))) {
		herd_errprintf(err, "job or job_file is empty, too long or has "
				    "control characters");
		goto out;
	}
	if (version != NODEREC_VERSION) {
		herd_errprintf(err, "version %d, this herd reads %d", version,
			       NODEREC_VERSION);
		goto out;
	}
	if (after < 0 || window < 1 || window > NODEREC_WINDOW_MAX ||
	    !json_is_object(hosts)) {
		herd_errprintf(err, "quarantine_after, quarantine_for_ms or "
				    "hosts out of range");
		goto out;
	}
	if (json_object_size(hosts) > NODEREC_HOSTS_MAX) {
		herd_errprintf(err, "%zu hosts, at most %d",
			       json_object_size(hosts), NODEREC_HOSTS_MAX);
		goto out;
	}
	if (!(r = noderec_new()) ||
	    (json_object_size(hosts) &&
	     !(r->hosts =
		   calloc(json_object_size(hosts), sizeof(*r->hosts))))) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	r->quarantine_after = after;
	r->quarantine_for_ms = (long)window;
	if ((job && !(r->job = strdup(job))) ||
	    (job_file && !(r->job_file = strdup(job_file)))) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	json_object_foreach(hosts, host, v)
	{
		struct noderec_host *h = &r->hosts[r->n++];

		if (!(h->host = strdup(host))) {
			herd_errprintf(err, "out of memory");
			goto out;
		}
		if (parse_host(host, v, h, err) < 0)
			goto out;
	}
	*out = r;
	r = NULL;
	ret = 0;
out:
	noderec_free(r);
	json_decref(o);
	return ret;
}

char *noderec_json(const struct noderec *r)
{
	json_t *o = NULL, *hosts = json_object();
	char *s = NULL;

	if (!hosts)
		return NULL;
	for (size_t i = 0; i < r->n; i++) {
		const struct noderec_host *h = &r->hosts[i];
		json_t *arr = json_array();

		if (!arr || json_object_set_new(
				hosts, h->host,
				json_pack("{s:o}", "failures", arr)) < 0)
			goto out;
		for (size_t k = 0; k < h->n; k++)
			if (json_array_append_new(
				arr, json_pack("{s:I, s:s, s:s, s:s*}", "t",
					       (json_int_t)h->f[k].t_ms, "kind",
					       h->f[k].kind, "reason",
					       h->f[k].reason, "run",
					       h->f[k].run)) < 0)
				goto out;
	}
	o = json_pack("{s:i, s:i, s:I, s:O, s:s*, s:s*}", "version",
		      NODEREC_VERSION, "quarantine_after",
		      r->quarantine_after >= 0 ? r->quarantine_after : 3,
		      "quarantine_for_ms",
		      (json_int_t)(r->quarantine_for_ms > 0
				       ? r->quarantine_for_ms
				       : 24L * 3600 * 1000),
		      "hosts", hosts, "job", r->job, "job_file", r->job_file);
	if (o)
		s = json_dumps(o, JSON_INDENT(1));
out:
	json_decref(hosts);
	json_decref(o);
	return s;
}
