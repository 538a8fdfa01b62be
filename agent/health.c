/* health.c — the agent's side of failure detection.
 *
 * herd and its agents heartbeat each other.  The agent sends a HEARTBEAT
 * every interval herd asked for, carrying the ranks it found hung (what
 * is measured goes in METRICS, measure.c).  It answers herd's HEARTBEAT at
 * once and times its next one from that answer (health_on_heartbeat), so
 * the agents of a job beat in step with herd: herd sends to every node in
 * one tick, and their answers come back together and are read in a few
 * loop wakeups, not one wakeup per node spread over the interval (with
 * 1,000 nodes that was most of an idle herd's CPU).  The agent's own
 * timer still sends when herd's beat does not come, so no gap between
 * two of its heartbeats exceeds the interval either way.  herd beats
 * half as often as its agents (spec.h SPEC_HERD_BEATS): the agent's timer
 * sends the heartbeat in between, in step too.  It watches herd with the
 * rule herd applies to nodes, with herd's interval
 * (spec_herd_silence_limit_ms: health.timeout + 2 heartbeats + 400 ms,
 * so a short network blip stops nothing).  When herd
 * has been silent that long, the agent asks the kernel whether herd's
 * host still acknowledges what the agent sends (the TCP connection under
 * the SSH channel, or the --connect socket):
 *  - no (our data is being retransmitted): herd is cut off (a partition,
 *    a dead machine); the agent stops its ranks and exits, so a cut-off
 *    node never trains on its own or holds a GPU after the job moved on;
 *  - yes: herd's process is stopped or stalled (SIGSTOP, a debugger, a
 *    swapping machine); the ranks go on, and herd, which notices its own
 *    stall when it runs again, judges nobody for it;
 *  - herd on this machine (the local transport, --local-herd): as yes;
 *    herd's death is EOF on the socketpair at once, so a herd still
 *    silent is one that did not run (a loaded machine: a sanitized herd
 *    can be silent for seconds);
 *  - unknown (no TCP connection to look at): the silence alone decides,
 *    as before, unless herd paused the job.
 * A paused job (herd's SIGTSTP: SIGNAL {SIGSTOP}) is the same, except
 * that with no connection to look at the agent waits for herd.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"

/* How long a rank may wait for its warm interpreter's import before it
 * counts as silent (a loaded node imports torch in seconds). */
#define HEALTH_START_WAIT_MS (120 * 1000)
#include "herd/spec.h"

static void on_tick(struct loop *loop, void *arg);

void health_heard(struct agent *a)
{
	a->last_rx_ms = loop_now_ms();
	a->herd_stalled_said = false;
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
	pypkg_install(a);
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
	rundir_close(a);
}

/* Wall-clock ms of the rank's last sign of life: output or a touch of
 * its progress file. */
int64_t health_last_sign(const struct rank *r)
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
	json_t *hung = json_array();
	int64_t now = loop_wall_ms();

	for (int i = 0; i < a->n_ranks; i++) {
		struct rank *r = &a->ranks[i];

		/* A rank handed to a warm interpreter that is still
		 * importing has not begun (started_sent: STARTED went out,
		 * and its silence counts from then); it waits for the
		 * import at most HEALTH_START_WAIT_MS before its silence
		 * counts from its launch again. */
		int64_t limit = a->progress_timeout_ms;

		if (!r->started_sent && !r->spawn &&
		    limit < HEALTH_START_WAIT_MS)
			limit = HEALTH_START_WAIT_MS;
		if (r->running && !r->hung_reported &&
		    (a->state == AGENT_IDLE || a->state == AGENT_RUNNING) &&
		    a->progress_timeout_ms > 0 &&
		    now - health_last_sign(r) > limit) {
			r->hung_reported = true;
			json_array_append_new(
				hung,
				json_pack("{s:i, s:I}", "rank", r->rank,
					  "silent_ms",
					  (json_int_t)(now - health_last_sign(r))));
		}
	}
	agent_send(a, PROTO_HEARTBEAT,
		   json_pack("{s:I, s:i, s:o}", "seq", (json_int_t)++a->hb_seq,
			     "attempt", a->attempt, "hung", hung),
		   NULL, 0);
}

/* --- is herd cut off, or only silent? ----------------------------------- */

enum herd_link {
	LINK_UNKNOWN,	/* no TCP connection to look at */
	LINK_UP,	/* herd's host acknowledges what we send */
	LINK_DOWN,	/* our data to herd is being retransmitted */
	LINK_LOCAL,	/* --local-herd: herd started us on its own machine;
			 * no network can cut it off and its death closes
			 * our stdin (EOF): silent, it is stalled */
};

/* A TCP connection whose sent data is being retransmitted (at least one
 * retransmission timeout) or whose zero-window or keepalive probes went
 * unanswered twice gets no acknowledgement from its peer: the peer's
 * machine is unreachable.  A peer process that is stopped still has a
 * kernel that acknowledges (a full receive buffer answers probes). */
static enum herd_link link_from(unsigned retransmits, unsigned probes)
{
	return retransmits > 0 || probes > 1 ? LINK_DOWN : LINK_UP;
}

/* --connect: the agent's own socket to herd. */
static enum herd_link socket_link(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct tcp_info ti;
	socklen_t tlen = sizeof(ti);

	if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) < 0 ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
		return LINK_UNKNOWN;
	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tlen) < 0)
		return LINK_UNKNOWN;
	return link_from(ti.tcpi_retransmits, ti.tcpi_probes);
}

/* An address as 16 bytes (IPv4 as ::ffff:a.b.c.d), from text. */
static int addr16_text(const char *text, unsigned char out[16])
{
	struct in_addr v4;

	if (inet_pton(AF_INET6, text, out) == 1)
		return 0;
	if (inet_pton(AF_INET, text, &v4) != 1)
		return -1;
	memset(out, 0, 10);
	out[10] = out[11] = 0xff;
	memcpy(out + 12, &v4, 4);
	return 0;
}

/* An address of /proc/net/tcp (8 hex digits) or tcp6 (32): each group of
 * 8 is a 32-bit word in the kernel's byte order, as stored. */
static int addr16_proc(const char *hex, unsigned char out[16])
{
	size_t n = strlen(hex);
	unsigned char raw[16];

	if (n != 8 && n != 32)
		return -1;
	for (size_t w = 0; w < n / 8; w++) {
		char word[9];
		uint32_t v;

		memcpy(word, hex + 8 * w, 8);
		word[8] = '\0';
		v = (uint32_t)strtoul(word, NULL, 16);
		memcpy(raw + 4 * w, &v, 4);
	}
	if (n == 32) {
		memcpy(out, raw, 16);
		return 0;
	}
	memset(out, 0, 10);
	out[10] = out[11] = 0xff;
	memcpy(out + 12, raw, 4);
	return 0;
}

/* The SSH transport: the agent talks to sshd over pipes, and sshd to herd
 * over the TCP connection $SSH_CONNECTION names ("client port server
 * port"); the kernel's table of this network namespace says whether that
 * connection is retransmitting. */
static enum herd_link ssh_link(void)
{
	static const char *const tables[] = {"/proc/net/tcp",
					     "/proc/net/tcp6"};
	const char *env = getenv("SSH_CONNECTION");
	char cip[64], sip[64], line[512];
	unsigned cport, sport;
	unsigned char caddr[16], saddr[16];

	if (!env || sscanf(env, "%63s %u %63s %u", cip, &cport, sip, &sport) != 4 ||
	    addr16_text(cip, caddr) < 0 || addr16_text(sip, saddr) < 0)
		return LINK_UNKNOWN;
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
		FILE *f = fopen(tables[t], "r");

		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			char lhex[40], rhex[40];
			unsigned lport, rport, st, retr;
			int probes;
			unsigned char l[16], r[16];

			/* sl local rem st tx:rx tr:when retrnsmt uid
			 * timeout(probes) inode ... */
			if (sscanf(line,
				   " %*u: %39[0-9A-Fa-f]:%x %39[0-9A-Fa-f]:%x "
				   "%x %*x:%*x %*x:%*x %x %*u %d",
				   lhex, &lport, rhex, &rport, &st, &retr,
				   &probes) != 7 ||
			    st != 1 /* ESTABLISHED */ || lport != sport ||
			    rport != cport || addr16_proc(lhex, l) < 0 ||
			    addr16_proc(rhex, r) < 0 ||
			    memcmp(l, saddr, 16) || memcmp(r, caddr, 16))
				continue;
			fclose(f);
			return link_from(retr, probes < 0 ? 0 : (unsigned)probes);
		}
		fclose(f);
	}
	return LINK_UNKNOWN;
}

static enum herd_link herd_link(const struct agent *a)
{
	enum herd_link l;

	if (a->herd_local)
		return LINK_LOCAL;
	l = socket_link(a->herd_fd);

	return l != LINK_UNKNOWN ? l : ssh_link();
}

/* Stops the ranks and exits: herd is gone. */
static void give_up_on_herd(struct agent *a, int64_t silent, const char *why)
{
	fprintf(stderr,
		"herd-agent: no word from herd for %" PRId64
		" ms (limit %" PRId64 " ms: health.timeout %" PRId64
		" ms + herd's heartbeat interval + TCP's retransmission)%s; "
		"stopping the ranks\n",
		silent,
		(int64_t)spec_herd_silence_limit_ms(a->hb_timeout_ms,
						    a->hb_interval_ms),
		a->hb_timeout_ms, why);
	agent_post(a, AGENT_EV_HERD_SILENT, NULL);
}

/* The same floor as herd's (launcher/ctl/heartbeat.c CTL_STALL_MIN_MS): a tick
 * this late means the agent itself did not run (a paused node). */
#define HEALTH_STALL_MIN_MS 500

/* Our HEARTBEAT, now; the next one is due an interval later. */
static void beat(struct agent *a, int64_t now)
{
	send_heartbeat(a);
	a->hb_sent_ms = now;
	a->hb_next_ms = now + a->hb_interval_ms;
	/* A due sample goes with it, in the same burst herd reads. */
	metrics_beat(a, now);
}

/* When herd was last heard from: its last whole frame, or bytes of one
 * still coming in (a relayed checkpoint chunk on a slow link holds the
 * heartbeat behind it). */
static int64_t heard_ms(const struct agent *a)
{
	int64_t rx = conn_rx_ms(a->conn);

	return rx > a->last_rx_ms ? rx : a->last_rx_ms;
}

/* The tick's next turn: our next heartbeat, or the moment herd's silence
 * reaches the limit (so a cut-off herd is noticed then, not a tick
 * later), whichever comes first. */
static void arm_tick(struct agent *a, int64_t now)
{
	int64_t limit = spec_herd_silence_limit_ms(a->hb_timeout_ms,
						   a->hb_interval_ms);
	int64_t wait = a->hb_next_ms - now;

	if (a->hb_timer)
		loop_timer_del(a->loop, a->hb_timer);
	if (a->hb_timeout_ms > 0 && heard_ms(a) + limit > now &&
	    heard_ms(a) + limit - now < wait)
		wait = heard_ms(a) + limit - now;
	if (wait < 1)
		wait = 1;
	a->hb_due_ms = now + wait;
	a->hb_timer = loop_timer_add(a->loop, wait, on_tick, a);
	if (a->hb_timer < 0)
		a->hb_timer = 0;
}

static void on_tick(struct loop *loop, void *arg)
{
	struct agent *a = arg;
	int64_t now = loop_now_ms();
	int64_t limit = spec_herd_silence_limit_ms(a->hb_timeout_ms,
						   a->hb_interval_ms);
	int64_t late = now - a->hb_due_ms, silent;

	(void)loop;
	a->hb_timer = 0;
	/* The agent did not run (its machine was paused): herd's frames of
	 * that time wait unread; herd gets a fresh chance. */
	if (late >= HEALTH_STALL_MIN_MS && late >= 2 * a->hb_interval_ms)
		a->last_rx_ms = now;
	silent = now - heard_ms(a);
	if (a->hb_timeout_ms > 0 && silent >= limit && a->state != AGENT_EXITING) {
		enum herd_link l = herd_link(a);

		if (l == LINK_DOWN) {
			give_up_on_herd(a, silent,
					": herd's machine does not acknowledge "
					"what we send");
			return;
		}
		if (l == LINK_UNKNOWN && !a->paused) {
			give_up_on_herd(a, silent, "");
			return;
		}
		if (!a->herd_stalled_said) {
			fprintf(stderr,
				"herd-agent: no word from herd for %" PRId64
				" ms, %s; the ranks go on\n",
				silent,
				a->paused ? "but herd paused the job"
				: l == LINK_LOCAL
				    ? "but herd runs on this machine and its "
				      "socket is open (herd is stopped or "
				      "stalled, not gone)"
				    : "but its machine acknowledges what "
				      "we send (herd is stopped or "
				      "stalled, not cut off)");
			a->herd_stalled_said = true;
		}
	}
	if (now >= a->hb_next_ms)
		beat(a, now);
	arm_tick(a, now);
}

void health_on_heartbeat(struct agent *a, json_t *body)
{
	json_int_t iv = json_integer_value(json_object_get(body, "interval_ms"));
	json_int_t to = json_integer_value(json_object_get(body, "timeout_ms"));

	/* 10 ms .. 1 h: a peer cannot make us spin or go deaf. */
	if (iv < 10 || iv > 3600000 || to < iv || to > 3600000)
		return;
	a->hb_timeout_ms = to;
	if (a->hb_interval_ms == iv && a->hb_timer) {
		/* herd's beat: answered at once, and ours is timed from the
		 * answer (see the top of this file) -- unless ours went out
		 * less than half an interval ago (our timer came first, or
		 * herd's beat was late): then herd has a fresh one already,
		 * and one heartbeat per interval is all it needs. */
		int64_t now = loop_now_ms();

		if (now - a->hb_sent_ms >= iv / 2) {
			beat(a, now);
			arm_tick(a, now);
		}
		return;
	}
	a->hb_interval_ms = iv;
	if (a->hb_timer)
		loop_timer_del(a->loop, a->hb_timer);
	a->hb_next_ms = 0;	/* a heartbeat at once */
	a->hb_due_ms = loop_now_ms();
	a->hb_timer = loop_timer_add(a->loop, 0, on_tick, a);
}

/* herd's SIGTSTP: SIGSTOP to every rank's process group (a rank may catch
 * or ignore SIGTSTP; mpirun forwards it as SIGSTOP too), and a heartbeat
 * at once, which herd waits for before it stops itself.  SIGCONT: the
 * ranks go on; the time they stood still is not counted against their
 * progress (health.progress_timeout).  Ranks already stopping for good
 * are left alone (rank_stop_all continues paused ranks). */
void health_pause(struct agent *a, bool pause)
{
	if (pause) {
		if (a->state == AGENT_RUNNING && !a->paused) {
			rank_signal_all(a, SIGSTOP);
			a->paused = true;
		}
		if (a->hb_interval_ms > 0)
			send_heartbeat(a);
		return;
	}
	if (!a->paused)
		return;
	rank_signal_all(a, SIGCONT);
	a->paused = false;
	for (int i = 0; i < a->n_ranks; i++)
		a->ranks[i].last_output_ms = loop_wall_ms();
}
