/* model/metric_prom.c — the metrics table in Prometheus's text format;
 * see metric_table.h. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/model/metric_table_int.h"

/* --- Prometheus ----------------------------------------------------------- */

/* A label value in the exposition format: \, " and newline escaped. */
static void put_label(FILE *f, const char *name, const char *value)
{
	fprintf(f, "%s=\"", name);
	for (const char *p = value; *p; p++) {
		if (*p == '\\' || *p == '"')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void family(FILE *f, const char *name, const char *type,
		   const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void value(FILE *f, double v)
{
	if (v == floor(v) && fabs(v) < 1e15)
		fprintf(f, " %.0f\n", v);
	else
		fprintf(f, " %.9g\n", v);
}

/* The nodes whose samples are current (an agent up: member or warm
 * spare). */
static bool exposed(const struct mnode *nd)
{
	return nd->cur &&
	       (nd->state == METRICS_UP || nd->state == METRICS_SPARE);
}

/* One family per call: key of each entry of array in every exposed node's
 * latest body, labelled node and dev_label=entry[dev_key] (and port). */
struct dev_family {
	const char *name, *type, *help;
	const char *array, *key;
	double scale;
};

static void dev_families(FILE *f, struct metrics *m,
			 const struct dev_family *fams, size_t n_fams,
			 bool rdma)
{
	for (size_t k = 0; k < n_fams; k++) {
		const struct dev_family *df = &fams[k];
		bool any = false;

		for (int i = 0; i < m->n; i++) {
			struct mnode *nd = &m->nodes[i];
			size_t j;
			json_t *d, *v;

			if (!exposed(nd))
				continue;
			json_array_foreach(json_object_get(nd->cur, df->array),
					   j, d)
			{
				if (!json_is_integer(
					v = json_object_get(d, df->key)))
					continue;
				if (!any)
					family(f, df->name, df->type, df->help);
				any = true;
				fputs(df->name, f);
				fputc('{', f);
				put_label(f, "node", nd->name);
				fputc(',', f);
				if (!strcmp(df->array, "gpus")) {
					fprintf(
					    f,
					    "gpu=\"%" JSON_INTEGER_FORMAT "\"",
					    json_integer_value(
						json_object_get(d, "index")));
				} else {
					put_label(
					    f, "device",
					    json_string_value(
						json_object_get(d, "dev")));
				}
				if (rdma)
					fprintf(
					    f,
					    ",port=\"%" JSON_INTEGER_FORMAT
					    "\"",
					    json_integer_value(
						json_object_get(d, "port")));
				fputc('}', f);
				value(f, (double)json_integer_value(v) *
					     df->scale);
			}
		}
	}
}

static const struct dev_family gpu_fams[] = {
    {"herd_gpu_utilization_ratio", "gauge", "GPU utilisation (NVML), 0 to 1.",
     "gpus", "util_pct", 0.01},
    {"herd_gpu_memory_used_bytes", "gauge", "GPU memory used.", "gpus",
     "mem_used", 1},
    {"herd_gpu_memory_total_bytes", "gauge", "GPU memory in all.", "gpus",
     "mem_total", 1},
    {"herd_gpu_temperature_celsius", "gauge", "GPU temperature.", "gpus",
     "temp_c", 1},
    {"herd_gpu_power_watts", "gauge", "GPU power draw.", "gpus", "power_mw",
     0.001},
    {"herd_gpu_sm_clock_hertz", "gauge", "GPU SM clock.", "gpus", "sm_mhz",
     1e6},
    {"herd_gpu_throttle_reasons", "gauge",
     "NVML clocks throttle reasons (bitmask; 0: none).", "gpus", "throttle", 1},
};

static const struct dev_family net_fams[] = {
    {"herd_network_receive_bytes_total", "counter",
     "Bytes received by the node's interface since its agent started.", "net",
     "rx_bytes", 1},
    {"herd_network_transmit_bytes_total", "counter",
     "Bytes sent by the node's interface since its agent started.", "net",
     "tx_bytes", 1},
    {"herd_network_receive_drops_total", "counter",
     "Received packets dropped since the node's agent started.", "net",
     "rx_drops", 1},
    {"herd_network_transmit_drops_total", "counter",
     "Packets to send dropped since the node's agent started.", "net",
     "tx_drops", 1},
    {"herd_network_receive_errors_total", "counter",
     "Receive errors since the node's agent started.", "net", "rx_errors", 1},
    {"herd_network_transmit_errors_total", "counter",
     "Transmit errors since the node's agent started.", "net", "tx_errors", 1},
};

static const struct dev_family rdma_fams[] = {
    {"herd_rdma_receive_bytes_total", "counter",
     "Bytes received by the RDMA port (port_rcv_data x 4).", "rdma", "rx_bytes",
     1},
    {"herd_rdma_transmit_bytes_total", "counter",
     "Bytes sent by the RDMA port (port_xmit_data x 4).", "rdma", "tx_bytes",
     1},
    {"herd_rdma_link_downed_total", "counter",
     "Times the RDMA port's link went down.", "rdma", "link_downed", 1},
    {"herd_rdma_symbol_errors_total", "counter", "RDMA port symbol errors.",
     "rdma", "symbol_error", 1},
    {"herd_rdma_receive_errors_total", "counter", "RDMA port receive errors.",
     "rdma", "rcv_errors", 1},
};

static void ecc_family(FILE *f, struct metrics *m)
{
	static const char *const keys[] = {"ecc_corrected", "ecc_uncorrected"};
	bool any = false;

	for (int i = 0; i < m->n; i++) {
		struct mnode *nd = &m->nodes[i];
		size_t j;
		json_t *g, *v;

		if (!exposed(nd))
			continue;
		json_array_foreach(json_object_get(nd->cur, "gpus"), j,
				   g) for (size_t k = 0; k < 2; k++)
		{
			if (!json_is_integer(v = json_object_get(g, keys[k])))
				continue;
			if (!any)
				family(f, "herd_gpu_ecc_errors_total",
				       "counter",
				       "GPU ECC errors (NVML, volatile).");
			any = true;
			fputs("herd_gpu_ecc_errors_total{", f);
			put_label(f, "node", nd->name);
			fprintf(
			    f, ",gpu=\"%" JSON_INTEGER_FORMAT "\",type=\"%s\"}",
			    json_integer_value(json_object_get(g, "index")),
			    k ? "uncorrected" : "corrected");
			value(f, (double)json_integer_value(v));
		}
	}
}

/* Per-node (and per-rank) values of exposed nodes. */
static void node_families(FILE *f, struct metrics *m)
{
	bool any;

	any = false;
	for (int i = 0; i < m->n; i++) {
		struct mnode *nd = &m->nodes[i];
		double v;

		if (!exposed(nd) || !mtab_num(nd->cur, "load1", &v))
			continue;
		if (!any)
			family(f, "herd_node_load1", "gauge",
			       "The node's 1-minute load average.");
		any = true;
		fputs("herd_node_load1{", f);
		put_label(f, "node", nd->name);
		fputc('}', f);
		value(f, v);
	}
	any = false;
	for (int i = 0; i < m->n; i++) {
		struct mnode *nd = &m->nodes[i];

		if (!exposed(nd) || !mtab_trains(m, nd) || !nd->has_step_rate)
			continue;
		if (!any)
			family(f, "herd_node_steps_per_second", "gauge",
			       "Training steps per second of the node's "
			       "slowest rank.");
		any = true;
		fputs("herd_node_steps_per_second{", f);
		put_label(f, "node", nd->name);
		fputc('}', f);
		value(f, nd->step_rate);
	}
	for (int pass = 0; pass < 2; pass++) {
		const char *name = pass ? "herd_rank_resident_memory_bytes"
					: "herd_rank_cpu_seconds_total";

		any = false;
		for (int i = 0; i < m->n; i++) {
			struct mnode *nd = &m->nodes[i];
			size_t j;
			json_t *r;

			if (!exposed(nd))
				continue;
			json_array_foreach(json_object_get(nd->cur, "ranks"), j,
					   r)
			{
				if (!any)
					family(f, name,
					       pass ? "gauge" : "counter",
					       pass ? "Resident memory of the "
						      "rank's processes."
						    : "CPU time of the rank's "
						      "processes.");
				any = true;
				fprintf(f, "%s{", name);
				put_label(f, "node", nd->name);
				fprintf(f,
					",rank=\"%" JSON_INTEGER_FORMAT "\"}",
					json_integer_value(
					    json_object_get(r, "rank")));
				value(f, pass ? (double)mtab_u64(r, "rss_kb") *
						    1024
					      : (double)mtab_u64(r, "cpu_ms") /
						    1000.0);
			}
		}
	}
}

char *metrics_prometheus(struct metrics *m, size_t *len)
{
	struct metrics_job j;
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		return NULL;
	metrics_job(m, &j);
	family(f, "herd_attempt", "gauge",
	       "The job's attempt (1 is the first; restarts count up).");
	fprintf(f, "herd_attempt %d\n", j.attempt);
	family(f, "herd_nodes", "gauge", "Nodes of the job by state.");
	fprintf(f, "herd_nodes{state=\"up\"} %d\n", j.nodes_up);
	fprintf(f, "herd_nodes{state=\"failed\"} %d\n", j.nodes_failed);
	fprintf(f, "herd_nodes{state=\"spare\"} %d\n", j.spares);
	if (j.has_step) {
		family(f, "herd_train_step", "gauge",
		       "The step every rank has reached.");
		fprintf(f, "herd_train_step %" PRId64 "\n", j.step);
	}
	if (j.has_loss) {
		family(f, "herd_train_loss", "gauge",
		       "The latest loss of the lowest rank reporting one.");
		fputs("herd_train_loss", f);
		value(f, j.loss);
	}
	family(f, "herd_train_tokens_total", "counter",
	       "Tokens the ranks reported since the job started.");
	fprintf(f, "herd_train_tokens_total %" PRIu64 "\n", j.tokens_total);
	if (j.has_tokens_rate) {
		family(f, "herd_train_tokens_per_second", "gauge",
		       "Tokens per second, summed over the ranks.");
		fputs("herd_train_tokens_per_second", f);
		value(f, j.tokens_per_s);
	}
	node_families(f, m);
	dev_families(f, m, gpu_fams, sizeof(gpu_fams) / sizeof(gpu_fams[0]),
		     false);
	ecc_family(f, m);
	dev_families(f, m, net_fams, sizeof(net_fams) / sizeof(net_fams[0]),
		     false);
	dev_families(f, m, rdma_fams, sizeof(rdma_fams) / sizeof(rdma_fams[0]),
		     true);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
