/* main.c — bin/herd-agent: the per-node agent started by herd.
 *
 * It speaks proto.h frames with herd over its stdin/stdout (the SSH
 * channel, or the pipes of the local transport) or, with --connect, over
 * a TCP connection to herd (the slurm transport), says HELLO, starts the
 * ranks herd asks for, streams their output and exits, and stops them
 * when herd asks or goes away.  Everything runs on one loop; signal
 * handlers only write to a pipe.
 */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/check.h"
#include "agent/probe.h"
#include "herd/auth.h"
#include "herd/hostfile.h"
#include "herd/topo.h"
#include "herd/version.h"

void agent_send(struct agent *a, enum proto_type type, json_t *body,
		const void *data, size_t len)
{
	if (a->conn && !conn_is_dead(a->conn))
		conn_send(a->conn, type, body, data, len, NULL);
	json_decref(body);
}

/* SIGTERM/SIGINT/SIGHUP to the agent: stop the ranks and go, saying why
 * (on the agent's stderr, which herd passes on: a node lost for this
 * reason is told apart from a crash). */
static void on_sigstop(struct loop *loop, int sig, void *arg)
{
	struct agent *a = arg;

	if (a->state != AGENT_EXITING) {
		char why[128];

		fprintf(stderr,
			"herd-agent: %s (signal %d): stopping the ranks "
			"and exiting\n",
			strsignal(sig), sig);
		/* herd hears it first, so that the node's loss is not
		 * taken for a crash (ERROR, stage "signal"). */
		snprintf(why, sizeof(why), "herd-agent: %s (signal %d)",
			 strsignal(sig), sig);
		agent_send(a, PROTO_ERROR,
			   json_pack("{s:s, s:s}", "message", why, "stage",
				     "signal"),
			   NULL, 0);
	}
	agent_post(a, AGENT_EV_HERD_GONE, NULL);
	proc_reap(loop);	/* ranks already gone are reaped now */
}

/* IPv4 addresses of the node's up, non-loopback interfaces. */
static json_t *node_addresses(void)
{
	struct ifaddrs *ifs = NULL;
	json_t *arr = json_array();

	if (getifaddrs(&ifs) < 0)
		return arr;
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		char addr[INET_ADDRSTRLEN], mask[INET_ADDRSTRLEN];

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
			continue;
		inet_ntop(AF_INET,
			  &((struct sockaddr_in *)i->ifa_addr)->sin_addr, addr,
			  sizeof(addr));
		inet_ntop(AF_INET,
			  &((struct sockaddr_in *)i->ifa_netmask)->sin_addr,
			  mask, sizeof(mask));
		json_array_append_new(arr, json_pack("{s:s, s:s, s:s}", "ifname",
						     i->ifa_name, "addr", addr,
						     "netmask", mask));
	}
	freeifaddrs(ifs);
	return arr;
}

/* The node's topology (hwloc), read once at start: GPUs, NICs, NUMA
 * nodes and cores for the controller's binding plan.  A node whose
 * topology cannot be read still runs ranks, unbound; HELLO says why. */
static json_t *node_topology(struct agent *a, const char *xml, char *why,
			     size_t whylen)
{
	struct herd_err err;
	struct topo *t;
	json_t *summary;

	/* Discovery (no file given) is kept for the next start. */
	if (!xml && (summary = rundir_topo_get(a)))
		return summary;
	herd_err_clear(&err);
	t = topo_load(xml, 0, &err);
	if (!t) {
		snprintf(why, whylen, "%s", err.text);
		return NULL;
	}
	summary = topo_summary(t);
	topo_free(t);
	if (summary && !xml)
		rundir_topo_put(a, summary);
	return summary;
}

/* node_name: --node NAME (herd's local transport names each simulated
 * node), else NULL: this machine's hostname. */
static void send_hello(struct agent *a, const char *topology_xml,
		       const char *node_name)
{
	char host[256] = "", why[HERD_ERR_MAX] = "";
	json_t *topo = node_topology(a, topology_xml, why, sizeof(why));
	json_t *body;

	if (node_name)
		snprintf(host, sizeof(host), "%s", node_name);
	else
		gethostname(host, sizeof(host) - 1);
	body = json_pack("{s:s, s:s, s:o, s:I, s:i}", "version", HERD_VERSION,
			 "hostname", host, "addrs", node_addresses(), "cores",
			 (json_int_t)sysconf(_SC_NPROCESSORS_ONLN), "pid",
			 (int)getpid());
	if (topo)
		a->n_gpus = (int)json_array_size(json_object_get(topo, "gpus"));
	if (topo)
		json_object_set_new(body, "topo", topo);
	else
		json_object_set_new(body, "topo_error", json_string(why));
	agent_send(a, PROTO_HELLO, body, NULL, 0);
}

/* One TCP connection to herd within deadline_ms (monotonic): the socket,
 * or -1 with errno. */
static int connect_once(const struct addrinfo *ai, int64_t deadline_ms)
{
	int fd = socket(ai->ai_family,
			SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int64_t left = deadline_ms - loop_now_ms();

	if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		socklen_t len;
		int why = errno, rc = 0;

		/* A controller that does not answer within the handshake's
		 * own bound is not there. */
		if (why == EINPROGRESS &&
		    poll(&p, 1, left > 0 ? (int)left : 0) != 1)
			why = ETIMEDOUT;
		else if (why == EINPROGRESS) {
			len = sizeof(rc);
			why =
			    getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc, &len) < 0
				? errno
				: rc;
		}
		if (why) {
			close(fd);
			fd = -1;
			errno = why;
		}
	}
	return fd;
}

/* --connect HOST:PORT (the slurm transport): connects to herd over TCP
 * and proves the job secret that herd put in our environment, which is
 * then wiped so that no rank ever sees it.  herd drops the oldest
 * unauthenticated connections when strangers crowd its listener (its
 * address is on srun's command line), so a connection that fails is
 * tried again, with a short growing pause, until AUTH_TIMEOUT_MS from
 * the first try.  Returns the socket, or -1 after saying why on stderr. */
static int connect_back(const char *target)
{
	const char *colon = strrchr(target, ':');
	const char *secret_hex = getenv(AUTH_SECRET_ENV);
	const char *slurm_name = getenv("SLURMD_NODENAME");
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	int64_t deadline = loop_now_ms() + AUTH_TIMEOUT_MS;
	struct auth_secret secret;
	struct herd_err err;
	char host[256], name[256] = "";
	int fd = -1, rc, ok = 0, tries = 0;
	int64_t pause_ms = 50;

	herd_err_clear(&err);
	if (auth_secret_from_hex(&secret, secret_hex, &err) < 0) {
		fprintf(stderr, "herd-agent: %s: %s\n", AUTH_SECRET_ENV,
			err.text);
		goto out;
	}
	if (!colon || colon == target ||
	    (size_t)(colon - target) >= sizeof(host)) {
		fprintf(stderr, "herd-agent: --connect wants HOST:PORT\n");
		goto out;
	}
	snprintf(host, sizeof(host), "%.*s", (int)(colon - target), target);
	rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc != 0) {
		fprintf(stderr, "herd-agent: --connect %s: %s\n", target,
			gai_strerror(rc));
		goto out;
	}
	if (slurm_name && *slurm_name)
		snprintf(name, sizeof(name), "%s", slurm_name);
	else
		gethostname(name, sizeof(name) - 1);
	for (;;) {
		int64_t left;

		tries++;
		herd_err_clear(&err);
		fd = connect_once(ai, deadline);
		if (fd < 0)
			herd_errprintf(&err, "%s", strerror(errno));
		left = deadline - loop_now_ms();
		if (fd >= 0 &&
		    auth_agent_handshake(fd, &secret, name,
					 left > 0 ? (int)left : 0, &err) == 0)
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
		left = deadline - loop_now_ms();
		if (left <= pause_ms) {
			fprintf(stderr,
				"herd-agent: --connect %s: %s (%d tr%s in "
				"%d s)\n",
				target, err.text, tries,
				tries == 1 ? "y" : "ies",
				AUTH_TIMEOUT_MS / 1000);
			goto out;
		}
		poll(NULL, 0, (int)pause_ms);
		if (pause_ms < 1000)
			pause_ms *= 2;
	}
	ok = 1;
out:
	/* The secret leaves the environment (and /proc/PID/environ)
	 * whatever happened. */
	if (secret_hex) {
		auth_wipe((char *)secret_hex, strlen(secret_hex));
		unsetenv(AUTH_SECRET_ENV);
	}
	auth_wipe(&secret, sizeof(secret));
	if (ai)
		freeaddrinfo(ai);
	if (!ok && fd >= 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: herd-agent [--stdio | --connect HOST:PORT] "
		"[--topology FILE.xml] [--hello-timeout MS] [--node NAME] "
		"[--local-herd] [--pmix] [--warm MODULES [--warm-python PATH] "
		"[--warm-slots N] [--warm-once]] | --version | --help\n\n"
		"herd-agent runs on every node of a job, started by herd. It\n"
		"speaks herd's framed protocol on stdin/stdout (--stdio, the\n"
		"default), or over TCP to HOST:PORT after proving the job\n"
		"secret in $" AUTH_SECRET_ENV " (--connect), starts the ranks herd asks for and stops them all\n"
		"when herd asks or goes away. It exits when herd has not said a\n"
		"word within --hello-timeout MS of its start (default %d).\n"
		"--node NAME: report NAME as this node's hostname (herd's\n"
		"local transport runs one agent per named node on one machine).\n"
		"--local-herd: herd runs on this machine (its local transport):\n"
		"a silent herd is taken as stalled, never as cut off, and the\n"
		"ranks go on; herd's exit closes stdin, which stops them.\n"
		"--pmix: the job is launch.mode pmix; start the PMIx server\n"
		"right after HELLO instead of at the first LAUNCH.\n"
		"--warm MODULES: keep a warm Python interpreter per slot that\n"
		"has imported MODULES (comma-separated; launch.preload), run by\n"
		"--warm-python PATH (/usr/bin/python3), N of them (--warm-slots;\n"
		"default: the node's GPUs, else 1, then as many as a launch\n"
		"placed here); ranks that run a Python script start from them.\n"
		"--warm-once: the job never launches twice (restart.max 0):\n"
		"what the first launch takes is not refilled.\n"
		"It is not meant to be run by hand.\n",
		AGENT_HELLO_TIMEOUT_MS);
}

int main(int argc, char **argv)
{
	struct agent a = {0};
	int in_fd, out_fd, devnull;
	/* --topology FILE.xml: plan with an exported topology (tests,
	 * planning); HERD_AGENT_TOPOLOGY does the same for agents started
	 * by a transport. */
	const char *topology_xml = getenv("HERD_AGENT_TOPOLOGY");
	const char *connect_to = NULL, *node_name = NULL;
	const char *warm = NULL, *warm_python = NULL;
	bool warm_once = false;
	int warm_slots = 0;
	bool pmix_early = false;

	if (argc > 1 && !strcmp(argv[1], "probe"))
		return probe_main(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "netprobe"))
		return netprobe_main(argc - 1, argv + 1);
	/* A rank's keeper: the agent execs its own image (keeper.c). */
	if (argc > 1 && !strcmp(argv[1], KEEPER_ARG))
		return keeper_main(argc, argv);
	if (readlink("/proc/self/exe", a.self_path,
		     sizeof(a.self_path) - 1) < 0)
		a.self_path[0] = '\0';
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-V")) {
			printf("herd-agent %s\n", HERD_VERSION);
			return 0;
		}
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--topology") && i + 1 < argc) {
			topology_xml = argv[++i];
			continue;
		}
		if (!strcmp(argv[i], "--hello-timeout") && i + 1 < argc) {
			char *end = NULL;
			long ms;

			errno = 0;
			ms = strtol(argv[++i], &end, 10);
			/* 100 ms .. 1 h, as herd's own health bounds. */
			if (errno || end == argv[i] || *end || ms < 100 ||
			    ms > 3600000) {
				fprintf(stderr,
					"herd-agent: --hello-timeout wants "
					"milliseconds, 100 to 3600000\n");
				return 2;
			}
			a.hello_timeout_ms = ms;
			continue;
		}
		if (!strcmp(argv[i], "--node") && i + 1 < argc) {
			struct herd_err err;

			node_name = argv[++i];
			if (hostfile_host_check(node_name, "--node", &err) < 0) {
				fprintf(stderr, "herd-agent: %s\n", err.text);
				return 2;
			}
			continue;
		}
		if (!strcmp(argv[i], "--local-herd")) {
			a.herd_local = true;
			continue;
		}
		if (!strcmp(argv[i], "--pmix")) {
			pmix_early = true;
			continue;
		}
		if (!strcmp(argv[i], "--warm") && i + 1 < argc) {
			warm = argv[++i];
			continue;
		}
		if (!strcmp(argv[i], "--warm-once")) {
			warm_once = true;
			continue;
		}
		if (!strcmp(argv[i], "--warm-python") && i + 1 < argc) {
			warm_python = argv[++i];
			continue;
		}
		if (!strcmp(argv[i], "--warm-slots") && i + 1 < argc) {
			char *end = NULL;
			long n;

			errno = 0;
			n = strtol(argv[++i], &end, 10);
			if (errno || end == argv[i] || *end || n < 0 ||
			    n > 4096) {
				fprintf(stderr, "herd-agent: --warm-slots "
						"wants 0 to 4096\n");
				return 2;
			}
			warm_slots = (int)n;
			continue;
		}
		if (!strcmp(argv[i], "--connect") && i + 1 < argc) {
			connect_to = argv[++i];
			continue;
		}
		if (strcmp(argv[i], "--stdio")) {
			fprintf(stderr, "herd-agent: unknown option '%s'\n",
				argv[i]);
			usage(stderr);
			return 2;
		}
	}

	/* The protocol gets private copies of stdin/stdout (or the socket
	 * of --connect); fds 0 and 1 become /dev/null so nothing stray can
	 * corrupt the stream. */
	if (connect_to) {
		in_fd = connect_back(connect_to);
		if (in_fd < 0)
			return 1;
		out_fd = in_fd;
	} else {
		in_fd = fcntl(0, F_DUPFD_CLOEXEC, 3);
		out_fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
	}
	devnull = open("/dev/null", O_RDWR);
	if (in_fd < 0 || out_fd < 0 || devnull < 0) {
		perror("herd-agent: setup");
		return 1;
	}
	dup2(devnull, 0);
	dup2(devnull, 1);
	close(devnull);

	a.grace_ms = 10000;
	a.herd_fd = in_fd;	/* stays owned by the conn */
	a.loop = loop_new();
	/* Ranks' keepers are reaped by proc.h (rank_on_exit). */
	if (!a.loop || proc_watch(a.loop) < 0 ||
	    loop_on_signal(a.loop, SIGTERM, on_sigstop, &a) < 0 ||
	    loop_on_signal(a.loop, SIGINT, on_sigstop, &a) < 0 ||
	    loop_on_signal_unless_ignored(a.loop, SIGHUP, on_sigstop, &a) <
		    0) {
		perror("herd-agent: setup");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);

	a.conn = conn_new(a.loop, in_fd, out_fd, PROTO_FRAME_MAX,
			  agent_on_frame, agent_on_close, &a);
	if (!a.conn) {
		perror("herd-agent: setup");
		return 1;
	}
	health_init(&a);
	metrics_init(&a);
	send_hello(&a, topology_xml, node_name);
	if (pmix_early)
		psrv_warm(&a);
	warm_init(&a, warm, warm_python, warm_slots, warm_once);
	loop_run(a.loop);

	/* Everything is reaped; make sure no group member outlives us. */
	rank_signal_all(&a, SIGKILL);
	warm_fini(&a);
	rank_free_all(&a);
	/* The tier goes before herd hears us hang up: a job that ended
	 * leaves nothing in memory once herd has exited. */
	ckpt_mem_fini(&a);
	/* Everything is sent (the loop stops only then): hang up before
	 * PMIx's own teardown, which takes about half a second and which
	 * the controller need not wait for. */
	conn_free(a.conn);
	a.conn = NULL;
	psrv_fini(&a);
	check_fini(&a);
	netprobe_fini(&a);
	metrics_fini(&a);
	touch_fini(&a);
	health_fini(&a);
	agent_queue_clear(&a);	/* what the teardown posted */
	loop_free(a.loop);
	return 0;
}
