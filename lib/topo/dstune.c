/* lib/topo/dstune.c — DeepSpeed ZeRO-3 bucket sizes from the network.  The rule and
 * its reasons are in herd/dstune.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "herd/dstune.h"

/* Keys quoted in errors are cut to this many bytes. */
#define QUOTE_MAX 64

/* Bounds of a platform file's numbers. */
#define RATE_GBPS_MAX  100000.0
#define LATENCY_US_MAX 100000.0

static long clamp_l(double v, long lo, long hi)
{
	if (!(v >= (double)lo)) /* NaN too */
		return lo;
	if (v >= (double)hi)
		return hi;
	return (long)llround(v);
}

void ds_tune_rule(const struct ds_net *in, struct ds_tuned *out)
{
	double l = in->hop_latency_us > 0.1 ? in->hop_latency_us : 0.1;
	double r = in->bandwidth_Bps > 1 ? in->bandwidth_Bps : 1;
	double p = in->ranks >= 2 ? (double)in->ranks : 2;
	int e = in->elem_bytes == 4 ? 4 : 2;
	double elems;

	memset(out, 0, sizeof(*out));
	out->bucket_bytes = DS_TUNE_K * p * (l * 1e-6) * r;
	elems = out->bucket_bytes / e;
	out->clamped_low = !(elems >= (double)DS_BUCKET_MIN);
	out->clamped_high = elems > (double)DS_BUCKET_MAX;
	out->reduce_bucket_size = clamp_l(elems, DS_BUCKET_MIN, DS_BUCKET_MAX);
	out->allgather_bucket_size = out->reduce_bucket_size;
	out->prefetch_bucket_size =
	    clamp_l((double)out->reduce_bucket_size * DS_PREFETCH_BUCKETS,
		    DS_BUCKET_MIN, DS_BUCKET_MAX);
	out->param_persistence_threshold =
	    clamp_l((double)out->reduce_bucket_size / DS_TUNE_K, DS_PERSIST_MIN,
		    DS_PERSIST_MAX);
}

static double fabric_latency(const char *fabric)
{
	if (!strcmp(fabric, "ib"))
		return DS_LAT_IB_US;
	if (!strcmp(fabric, "roce"))
		return DS_LAT_ROCE_US;
	return DS_LAT_ETHERNET_US;
}

/* A number in (0, max]: an integer or a real. */
static int positive(json_t *v, double max, double *out)
{
	double x;

	if (!json_is_number(v))
		return -1;
	x = json_number_value(v);
	if (!(x > 0) || x > max)
		return -1;
	*out = x;
	return 0;
}

static int nic_entry(const char *name, size_t i, json_t *o,
		     struct ds_platform_net *out, const char **fabric,
		     struct herd_err *err)
{
	const char *key, *s;
	double rate = 0;
	json_t *v;

	if (!json_is_object(o))
		return herd_errprintf(err,
				      "%s: network.nics[%zu]: expected an "
				      "object {\"name\", \"rate_gbps\", "
				      "\"fabric\"}",
				      name, i);
	*fabric = NULL;
	json_object_foreach(o, key, v)
	{
		s = json_string_value(v);
		if (!strcmp(key, "name")) {
			if (!s || !s[0] || strlen(s) > QUOTE_MAX)
				return herd_errprintf(
				    err,
				    "%s: network.nics[%zu].name: expected a "
				    "device name of 1 to %d characters",
				    name, i, QUOTE_MAX);
		} else if (!strcmp(key, "rate_gbps")) {
			if (positive(v, RATE_GBPS_MAX, &rate) < 0)
				return herd_errprintf(
				    err,
				    "%s: network.nics[%zu].rate_gbps: expected "
				    "the link rate in Gb/s, a number above 0 "
				    "and at most %.0f",
				    name, i, RATE_GBPS_MAX);
		} else if (!strcmp(key, "fabric")) {
			if (!s || (strcmp(s, "ib") && strcmp(s, "roce") &&
				   strcmp(s, "ethernet")))
				return herd_errprintf(
				    err,
				    "%s: network.nics[%zu].fabric: expected "
				    "\"ib\", \"roce\" or \"ethernet\"",
				    name, i);
			*fabric = s;
		} else {
			return herd_errprintf(err,
					      "%s: network.nics[%zu]: unknown "
					      "key '%.*s' (expected name, "
					      "rate_gbps, fabric)",
					      name, i, QUOTE_MAX, key);
		}
	}
	if (rate == 0 || !*fabric)
		return herd_errprintf(err,
				      "%s: network.nics[%zu]: rate_gbps and "
				      "fabric are required",
				      name, i);
	out->rate_gbps_sum += rate;
	return 0;
}

int ds_platform_net_parse(const char *text, size_t len, const char *name,
			  struct ds_platform_net *out, struct herd_err *err)
{
	const char *key, *fabric = NULL;
	json_t *root, *net, *nics, *v;
	json_error_t jerr;
	double lat_max = 0;
	int rc = -1;
	size_t i;

	memset(out, 0, sizeof(*out));
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return herd_errprintf(err, "%s:%d:%d: %s", name, jerr.line,
				      jerr.column, jerr.text);
	if (!json_is_object(root)) {
		herd_errprintf(err, "%s: expected an object {\"network\": ...}",
			       name);
		goto out;
	}
	if (!(net = json_object_get(root, "network"))) {
		rc = 0;
		goto out;
	}
	if (!json_is_object(net)) {
		herd_errprintf(err,
			       "%s: network: expected an object {\"nics\": "
			       "[...], \"latency_us\": N}",
			       name);
		goto out;
	}
	json_object_foreach(net, key, v)
	{
		if (strcmp(key, "nics") && strcmp(key, "latency_us")) {
			herd_errprintf(err,
				       "%s: network: unknown key '%.*s' "
				       "(expected nics, latency_us)",
				       name, QUOTE_MAX, key);
			goto out;
		}
	}
	nics = json_object_get(net, "nics");
	if (!json_is_array(nics) || json_array_size(nics) == 0 ||
	    json_array_size(nics) > DS_NICS_MAX) {
		herd_errprintf(err,
			       "%s: network.nics: expected an array of 1 to "
			       "%d NICs",
			       name, DS_NICS_MAX);
		goto out;
	}
	json_array_foreach(nics, i, v)
	{
		const char *f = NULL;

		if (nic_entry(name, i, v, out, &f, err) < 0)
			goto out;
		if (fabric_latency(f) > lat_max)
			lat_max = fabric_latency(f);
		fabric = !fabric || !strcmp(fabric, f) ? f : "mixed";
	}
	out->n_nics = json_array_size(nics);
	out->fabric = !strcmp(fabric, "ib")	    ? "ib"
		      : !strcmp(fabric, "roce")	    ? "roce"
		      : !strcmp(fabric, "ethernet") ? "ethernet"
						    : "mixed";
	out->latency_us = lat_max;
	if ((v = json_object_get(net, "latency_us"))) {
		if (positive(v, LATENCY_US_MAX, &out->latency_us) < 0) {
			herd_errprintf(err,
				       "%s: network.latency_us: expected the "
				       "hop latency in µs, a number above 0 "
				       "and at most %.0f",
				       name, LATENCY_US_MAX);
			goto out;
		}
		out->latency_given = true;
	}
	rc = 1;
out:
	json_decref(root);
	return rc;
}

/* One table row: "bytes time_us algbw busbw check". */
static int bench_row(const char *line, size_t *bytes, double *t, double *busbw,
		     char *check)
{
	unsigned long long b;
	double alg;
	int end = -1;

	if (sscanf(line, " %llu %lf %lf %lf %7s%n", &b, t, &alg, busbw, check,
		   &end) != 5 ||
	    end < 0)
		return -1;
	*bytes = (size_t)b;
	return 0;
}

int ds_bench_parse(const char *text, struct ds_bench *out, struct herd_err *err)
{
	const char *p = text, *hit;
	bool any = false;

	memset(out, 0, sizeof(*out));
	hit = strstr(text, "ring all-reduce over ");
	if (!hit ||
	    sscanf(hit, "ring all-reduce over %d node", &out->nodes) != 1)
		return herd_errprintf(err, "herd bench printed no table");
	if (out->nodes < 2)
		return herd_errprintf(err,
				      "the job has one node: nothing crosses "
				      "the network to measure");
	while (p && *p) {
		const char *nl = strchr(p, '\n');
		char line[256], check[8];
		size_t n = nl ? (size_t)(nl - p) : strlen(p), bytes;
		double t, busbw;

		snprintf(line, sizeof(line), "%.*s",
			 (int)(n < sizeof(line) ? n : sizeof(line) - 1), p);
		p = nl ? nl + 1 : NULL;
		if (bench_row(line, &bytes, &t, &busbw, check) < 0)
			continue;
		if (strcmp(check, "ok"))
			return herd_errprintf(err,
					      "herd bench: the all-reduce of "
					      "%zu bytes gave wrong sums",
					      bytes);
		if (!any || bytes < out->small_bytes) {
			out->small_bytes = bytes;
			out->small_time_us = t;
		}
		if (!any || bytes > out->large_bytes) {
			out->large_bytes = bytes;
			out->large_time_us = t;
			out->large_busbw_GBps = busbw;
		}
		any = true;
	}
	if (!any)
		return herd_errprintf(err, "herd bench printed no sizes");
	if (!(out->large_busbw_GBps > 0) || !(out->small_time_us > 0))
		return herd_errprintf(err,
				      "herd bench measured no bandwidth (%zu "
				      "bytes at %.3f GB/s)",
				      out->large_bytes, out->large_busbw_GBps);
	out->hop_latency_us = out->small_time_us / (2.0 * (out->nodes - 1));
	out->bandwidth_Bps = out->large_busbw_GBps * 1e9;
	if (out->large_time_us > 2 * out->small_time_us)
		out->bandwidth_Bps *= out->large_time_us /
				      (out->large_time_us - out->small_time_us);
	return 0;
}
