/* health.c — the agent's side of failure detection.
 *
 * herd and its agents heartbeat each other.  The agent sends a HEARTBEAT
 * every interval herd asked for, carrying its ranks' states, simple
 * counters and the ranks it found hung; and it watches herd: when nothing
 * has come from herd for the timeout (a partition, a dead controller that
 * left the TCP connection open), it stops its ranks and exits, so a
 * cut-off node never trains on its own or holds a GPU after the job moved
 * on.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"

static void on_tick(struct loop *loop, void *arg);

void health_heard(struct agent *a)
{
	a->last_rx_ms = loop_now_ms();
	if (a->hello_timer) {
		loop_timer_del(a->loop, a->hello_timer);
		a->hello_timer = 0;
	}
}

/* herd never spoke: it died or hung while connecting.  Without this an
 * agent whose herd was killed before the first HEARTBEAT (and whose
 * channel somehow stays open) would wait for ever, pinning the cached
 * binary. */
static void on_hello_timeout(struct loop *loop, void *arg)
{
	struct agent *a = arg;

	(void)loop;
	a->hello_timer = 0;
	if (a->state == AGENT_EXITING)
		return;
	fprintf(stderr,
		"herd-agent: no word from herd within %" PRId64
		" ms of starting; exiting\n",
		a->hello_timeout_ms);
	agent_post(a, AGENT_EV_HERD_SILENT, NULL);
}

void health_init(struct agent *a)
{
	rundir_make(a);
	a->last_rx_ms = loop_now_ms();
	if (a->hello_timeout_ms <= 0)
		a->hello_timeout_ms = AGENT_HELLO_TIMEOUT_MS;
	a->hello_timer =
		loop_timer_add(a->loop, a->hello_timeout_ms, on_hello_timeout, a);
	if (a->hello_timer < 0)
		a->hello_timer = 0;
}

void health_fini(struct agent *a)
{
	if (a->hb_timer)
		loop_timer_del(a->loop, a->hb_timer);
	a->hb_timer = 0;
	if (a->hello_timer)
		loop_timer_del(a->loop, a->hello_timer);
	a->hello_timer = 0;
	rundir_remove(a);
}

/* Sums of the non-loopback interfaces in /proc/net/dev. */
static json_t *net_counters(void)
{
	unsigned long long rx = 0, tx = 0, rxd = 0, txd = 0;
	char line[512];
	FILE *f = fopen("/proc/net/dev", "r");

	if (!f)
		return json_object();
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':'), *name = line;
		unsigned long long v[16] = {0};

		if (!colon)
			continue;
		*colon = '\0';
		while (*name == ' ')
			name++;
		if (!strcmp(name, "lo"))
			continue;
		if (sscanf(colon + 1,
			   "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu "
			   "%llu %llu",
			   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
			   &v[7], &v[8], &v[9], &v[10], &v[11]) < 12)
			continue;
		rx += v[0];
		rxd += v[3];
		tx += v[8];
		txd += v[11];
	}
	fclose(f);
	return json_pack("{s:I, s:I, s:I, s:I}", "rx_bytes", (json_int_t)rx,
			 "tx_bytes", (json_int_t)tx, "rx_drops", (json_int_t)rxd,
			 "tx_drops", (json_int_t)txd);
}

/* CPU milliseconds and RSS KiB of the rank under keeper pid (the rank is
 * the keeper's only child). */
static void rank_usage(pid_t keeper, json_int_t *cpu_ms, json_int_t *rss_kb)
{
	char path[128], buf[1024];
	FILE *f;
	long child = 0;

	*cpu_ms = *rss_kb = 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)keeper,
		 (int)keeper);
	f = fopen(path, "r");
	if (!f)
		return;
	if (fscanf(f, "%ld", &child) != 1)
		child = 0;
	fclose(f);
	if (child <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%ld/stat", child);
	f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(buf, sizeof(buf), f)) {
		/* Fields after the command name, which may hold spaces. */
		char *p = strrchr(buf, ')');
		unsigned long long ut = 0, st = 0;
		long long rss = 0;

		if (p && sscanf(p + 2,
				"%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
				"%llu %llu %*d %*d %*d %*d %*d %*d %*u %*u "
				"%lld",
				&ut, &st, &rss) == 3) {
			long hz = sysconf(_SC_CLK_TCK);
			long page = sysconf(_SC_PAGESIZE);

			*cpu_ms = (json_int_t)((ut + st) * 1000 /
					       (unsigned long long)(hz > 0 ? hz : 100));
			*rss_kb = (json_int_t)(rss * (page > 0 ? page : 4096) /
					       1024);
		}
	}
	fclose(f);
}

/* Wall-clock ms of the rank's last sign of life: output or a touch of
 * its progress file. */
static int64_t last_sign(const struct rank *r)
{
	struct stat st;
	int64_t last = r->last_output_ms;

	if (r->progress_file[0] && stat(r->progress_file, &st) == 0) {
		int64_t m = (int64_t)st.st_mtim.tv_sec * 1000 +
			    st.st_mtim.tv_nsec / 1000000;

		if (m > last)
			last = m;
	}
	return last;
}

static void send_heartbeat(struct agent *a)
{
	json_t *ranks = json_array(), *hung = json_array();
	int64_t now = loop_wall_ms();

	for (int i = 0; i < a->n_ranks; i++) {
		struct rank *r = &a->ranks[i];
		json_int_t cpu = 0, rss = 0;

		if (r->running)
			rank_usage(r->pid, &cpu, &rss);
		json_array_append_new(
			ranks, json_pack("{s:i, s:s, s:I, s:I}", "rank",
					 r->rank, "state",
					 r->running ? "running" : "exited",
					 "cpu_ms", cpu, "rss_kb", rss));
		if (r->running && !r->hung_reported &&
		    (a->state == AGENT_IDLE || a->state == AGENT_RUNNING) &&
		    a->progress_timeout_ms > 0 &&
		    now - last_sign(r) > a->progress_timeout_ms) {
			r->hung_reported = true;
			json_array_append_new(
				hung,
				json_pack("{s:i, s:I}", "rank", r->rank,
					  "silent_ms",
					  (json_int_t)(now - last_sign(r))));
		}
	}
	agent_send(a, PROTO_HEARTBEAT,
		   json_pack("{s:I, s:i, s:o, s:o, s:o}", "seq",
			     (json_int_t)++a->hb_seq, "attempt", a->attempt,
			     "ranks", ranks, "hung", hung, "net",
			     net_counters()),
		   NULL, 0);
}

static void on_tick(struct loop *loop, void *arg)
{
	struct agent *a = arg;
	int64_t silent = loop_now_ms() - a->last_rx_ms;

	a->hb_timer = 0;
	if (a->hb_timeout_ms > 0 && silent > a->hb_timeout_ms &&
	    a->state != AGENT_EXITING) {
		fprintf(stderr,
			"herd-agent: no word from herd for %" PRId64
			" ms (timeout %" PRId64 " ms); stopping the ranks\n",
			silent, a->hb_timeout_ms);
		agent_post(a, AGENT_EV_HERD_SILENT, NULL);
		return;
	}
	send_heartbeat(a);
	a->hb_timer = loop_timer_add(loop, a->hb_interval_ms, on_tick, a);
}

void health_on_heartbeat(struct agent *a, json_t *body)
{
	json_int_t iv = json_integer_value(json_object_get(body, "interval_ms"));
	json_int_t to = json_integer_value(json_object_get(body, "timeout_ms"));

	/* 10 ms .. 1 h: a peer cannot make us spin or go deaf. */
	if (iv < 10 || iv > 3600000 || to < iv || to > 3600000)
		return;
	a->hb_timeout_ms = to;
	if (a->hb_interval_ms == iv && a->hb_timer)
		return;
	a->hb_interval_ms = iv;
	if (a->hb_timer)
		loop_timer_del(a->loop, a->hb_timer);
	a->hb_timer = loop_timer_add(a->loop, 0, on_tick, a);
}
