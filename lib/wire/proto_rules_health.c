/* proto_rules_health.c — the checks of what an agent measures: METRICS,
 * and the health gate's CHECK and NETPROBE.  Their rows are in
 * proto_rules.c.
 */
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "proto_int.h"

/* --- METRICS ------------------------------------------------------------ */

/* Every integer of the object is 0 or more (counters), except the key
 * named by skip (NULL: none). */
static int proto_nonneg(const json_t *body, const char *skip,
			struct herd_err *err)
{
	const char *key;
	const json_t *v;

	json_object_foreach((json_t *)body, key, v)
	{
		if (json_is_integer(v) && json_integer_value(v) < 0 &&
		    (!skip || strcmp(key, skip)))
			return herd_errprintf(
			    err,
			    "key \"%s\": %" JSON_INTEGER_FORMAT " is below 0",
			    key, json_integer_value(v));
	}
	return 0;
}

static int proto_counters_more(const json_t *body, struct herd_err *err)
{
	return proto_nonneg(body, NULL, err);
}

static int proto_gpu_more(const json_t *body, struct herd_err *err)
{
	return proto_nonneg(body, "temp_c", err);
}

static const struct proto_body proto_m_rank_body = {
    .format = "{s:I, s:I, s:I, s?I}",
    .keys = {"rank", "cpu_ms", "rss_kb", "touches"},
    .ranges = {{"rank", 0, INT_MAX},
	       {"cpu_ms", 0, PROTO_INT_ANY},
	       {"rss_kb", 0, PROTO_INT_ANY},
	       {"touches", 0, PROTO_INT_ANY}},
};

static const struct proto_body proto_m_net_body = {
    .format = "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
    .keys = {"dev", "rx_bytes", "tx_bytes", "rx_packets", "tx_packets",
	     "rx_drops", "tx_drops", "rx_errors", "tx_errors"},
    .more = proto_counters_more,
};

static const struct proto_body proto_m_rdma_body = {
    .format = "{s:s, s:I, s:I, s:I, s:I, s:I, s:I}",
    .keys = {"dev", "port", "rx_bytes", "tx_bytes", "link_downed",
	     "symbol_error", "rcv_errors"},
    .ranges = {{"port", 1, INT_MAX}},
    .more = proto_counters_more,
};

static const struct proto_body proto_m_gpu_body = {
    .format = "{s:I, s?I, s?I, s?I, s?I, s?I, s?I, s?I, s?I, s?I, s?I}",
    .keys = {"index", "util_pct", "mem_used", "mem_total", "temp_c", "power_mw",
	     "sm_mhz", "ecc_corrected", "ecc_uncorrected", "throttle", "xid"},
    .ranges = {{"index", 0, INT_MAX},
	       {"util_pct", 0, 100},
	       {"temp_c", -300, 10000}},
    .more = proto_gpu_more,
};

static int proto_m_train_more(const json_t *body, struct herd_err *err)
{
	const json_t *values = json_object_get(body, "values"), *v;
	const char *name;

	if (!json_is_object(values))
		return herd_errprintf(err,
				      "key \"values\": expected an "
				      "object, got %s",
				      proto_json_kind(values));
	if (json_object_size(values) > PROTO_TRAIN_VALUES_MAX)
		return herd_errprintf(err,
				      "key \"values\": %zu entries, at most "
				      "%d",
				      json_object_size(values),
				      PROTO_TRAIN_VALUES_MAX);
	json_object_foreach((json_t *)values, name, v)
	{
		if (!proto_metric_name_ok(name))
			return herd_errprintf(err,
					      "key \"values\": a metric name "
					      "must be letters, digits and "
					      "'_' (at most 64), not a "
					      "digit first");
		if (!json_is_number(v))
			return herd_errprintf(err,
					      "key \"values.%s\": expected a "
					      "number, got %s",
					      name, proto_json_kind(v));
	}
	return 0;
}

static const struct proto_body proto_m_train_body = {
    .format = "{s:I, s:I, s:o}",
    .keys = {"rank", "records", "values"},
    .ranges = {{"rank", 0, INT_MAX}, {"records", 0, PROTO_INT_ANY}},
    .more = proto_m_train_more,
};

int proto_metrics_more(const json_t *body, struct herd_err *err)
{
	if (json_number_value(json_object_get(body, "load1")) < 0)
		return herd_errprintf(err, "key \"load1\": below 0");
	if (proto_check_array(body, "ranks", &proto_m_rank_body,
			      PROTO_LAUNCH_RANKS_MAX, err) < 0 ||
	    proto_check_array(body, "net", &proto_m_net_body,
			      PROTO_METRICS_DEVS_MAX, err) < 0 ||
	    proto_check_array(body, "rdma", &proto_m_rdma_body,
			      PROTO_METRICS_DEVS_MAX, err) < 0 ||
	    proto_check_array(body, "gpus", &proto_m_gpu_body,
			      PROTO_METRICS_DEVS_MAX, err) < 0 ||
	    proto_check_array(body, "train", &proto_m_train_body,
			      PROTO_LAUNCH_RANKS_MAX, err) < 0)
		return -1;
	return 0;
}

/* --- CHECK and NETPROBE: the health gate -------------------------------- */

static int proto_check_entry_more(const json_t *body, struct herd_err *err)
{
	const char *st = json_string_value(json_object_get(body, "status"));
	const json_t *rate = json_object_get(body, "rate");

	if (strcmp(st, "ok") && strcmp(st, "fail") && strcmp(st, "skipped"))
		return herd_errprintf(err,
				      "key \"status\": \"%s\" is not ok, fail "
				      "or skipped",
				      st);
	if (!*json_string_value(json_object_get(body, "name")))
		return herd_errprintf(err, "key \"name\": empty");
	if (rate && json_number_value(rate) < 0)
		return herd_errprintf(err, "key \"rate\": below 0");
	return 0;
}

static const struct proto_body proto_check_entry_body = {
    .format = "{s:s, s:s, s?s, s?s, s?s, s?F}",
    .keys = {"name", "status", "reason", "value", "port", "rate"},
    .more = proto_check_entry_more,
};

int proto_check_more(const json_t *body, struct herd_err *err)
{
	return proto_check_array(body, "checks", &proto_check_entry_body,
				 PROTO_CHECKS_MAX, err);
}

int proto_netprobe_agent_more(const json_t *body, struct herd_err *err)
{
	const char *op = json_string_value(json_object_get(body, "op"));
	bool port = json_object_get(body, "port") != NULL;

	if (strcmp(op, "listen") && strcmp(op, "connect"))
		return herd_errprintf(err,
				      "key \"op\": \"%s\" is not listen or "
				      "connect",
				      op);
	if (port != !strcmp(op, "connect"))
		return herd_errprintf(err, "key \"port\" goes with op "
					   "connect, and only with it");
	if (json_object_get(body, "peer") && strcmp(op, "listen"))
		return herd_errprintf(err, "key \"peer\" goes with op "
					   "listen only");
	return 0;
}

int proto_netprobe_herd_more(const json_t *body, struct herd_err *err)
{
	const char *op = json_string_value(json_object_get(body, "op"));
	bool port = json_object_get(body, "port") != NULL;
	bool rx = json_object_get(body, "rx_bytes") != NULL;
	bool ms = json_object_get(body, "rx_us") != NULL;
	bool error = json_object_get(body, "error") != NULL;

	if (!strcmp(op, "listening")) {
		if (!port || rx || ms || error)
			return herd_errprintf(err, "op listening carries "
						   "\"port\" only");
	} else if (!strcmp(op, "result")) {
		if (port || rx != ms || rx == error)
			return herd_errprintf(err,
					      "op result carries \"rx_bytes\" "
					      "and \"rx_us\", or \"error\"");
	} else {
		return herd_errprintf(err,
				      "key \"op\": \"%s\" is not listening or "
				      "result",
				      op);
	}
	return 0;
}
