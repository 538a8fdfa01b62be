/* transport_ssh.c — one herd-agent per node over SSH, in process (libssh),
 * no ssh/pdsh children.
 *
 * Each node gets a thread: it waits for a fan-out slot, connects, checks
 * the host key against ssh.known_hosts (strict, or accept-new which pins
 * unknown keys and still refuses changed ones; there is no "off"),
 * authenticates (ssh-agent, ssh.identity, default keys, ~/.ssh/config),
 * makes sure ~/.cache/herd holds this herd's agent (uploading it over SFTP
 * when missing), starts it and then pumps bytes between the SSH channel
 * and a socketpair whose other end the controller reads like any other
 * transport.  Only this thread touches its libssh session.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libssh/libssh.h>
#include <libssh/sftp.h>

#include "herd/version.h"
#include "transport.h"

/* 32 KiB: one SSH channel packet is at most 32 KiB of payload. */
#define SSH_PUMP_CHUNK (32 * 1024)
/* The remote start command exits with this when no cached agent of
 * this build exists (an unusual value, so a failing agent is not taken
 * for a missing one). */
#define SSH_AGENT_MISSING 97
/* How long to wait for the agent's first bytes before handing the
 * channel to the pump anyway (the controller has its own timeouts). */
#define SSH_FIRST_BYTES_MS 30000
/* An agent binary over 256 MiB is not ours. */
#define SSH_AGENT_MAX (256L * 1024 * 1024)

struct ssh_priv {
	sem_t fanout;
	pthread_mutex_t known_hosts_lock;	/* accept-new writes the file */
	pthread_mutex_t live_lock;
	pthread_cond_t live_cond;
	int live;		/* node threads still running */
	pthread_t *tids;	/* node threads not joined yet */
	int n_tids, cap_tids;
	char agent_name[96];	/* agent-VERSION-HASH in ~/.cache/herd */
	char *known_hosts;	/* ~ expanded */
	char *identity;		/* ~ expanded, or NULL */
	char *ssh_dir;		/* $HOME/.ssh */
};

struct ssh_node {
	struct transport *t;
	char *host;
	int fd;			/* our end of the socketpair */
};

static char *expand_tilde(const char *path)
{
	const char *home = getenv("HOME");
	char *out;

	if (!path)
		return NULL;
	if (path[0] != '~' || path[1] != '/' || !home)
		return strdup(path);
	if (asprintf(&out, "%s%s", home, path + 1) < 0)
		return NULL;
	return out;
}

/* The agent in the cache is named by version and content, so that a
 * rebuilt agent of the same version is never confused with an old one. */
static int agent_cache_name(const char *path, char *out, size_t outlen,
			    struct herd_err *err)
{
	uint64_t h = 14695981039346656037ULL;	/* FNV-1a 64 */
	unsigned char buf[65536];
	size_t n;
	FILE *f = fopen(path, "rb");

	if (!f)
		return herd_errprintf(err, "%s: %s", path, strerror(errno));
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		for (size_t i = 0; i < n; i++)
			h = (h ^ buf[i]) * 1099511628211ULL;
	fclose(f);
	snprintf(out, outlen, "agent-%s-%012" PRIx64, HERD_VERSION,
		 (uint64_t)(h & 0xffffffffffffULL));
	return 0;
}

static char *key_fingerprint(ssh_key key)
{
	unsigned char *hash = NULL;
	size_t hlen = 0;
	char *fp = NULL;

	if (key && ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256,
					  &hash, &hlen) == 0) {
		fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash,
					      hlen);
		ssh_clean_pubkey_hash(&hash);
	}
	return fp ? fp : strdup("(unknown)");
}

/* Whether a known_hosts line names host in plain text in its first
 * field (comma-separated names, maybe [host]:port). */
static bool known_hosts_line_matches(const char *line, const char *host)
{
	size_t hlen = strlen(host);
	const char *p = line;

	while (*p && *p != ' ' && *p != '\t') {
		const char *q = p;

		if (*q == '[')
			q++;
		if (!strncmp(q, host, hlen) && strchr(",] \t", q[hlen]))
			return true;
		while (*p && *p != ',' && *p != ' ' && *p != '\t')
			p++;
		if (*p == ',')
			p++;
	}
	return false;
}

/* Line of known_hosts that pins host in plain text, or 0 (hashed). */
static int known_hosts_line(const char *file, const char *host)
{
	FILE *f = fopen(file, "r");
	char line[8192];
	int no = 0, found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		no++;
		if (known_hosts_line_matches(line, host))
			found = no;
	}
	fclose(f);
	return found;
}

/* Fingerprint of the key of type `type` that file pins for host in plain
 * text, or NULL (hashed entry, unreadable file).  libssh does not hand
 * back the entry it found for SSH_KNOWN_HOSTS_CHANGED, so it is read
 * here. */
static char *pinned_fingerprint(const char *file, const char *host,
				enum ssh_keytypes_e type)
{
	int line = known_hosts_line(file, host);
	FILE *f;
	char buf[8192], *fp = NULL;

	if (line <= 0 || !(f = fopen(file, "r")))
		return NULL;
	for (int no = 1; fgets(buf, sizeof(buf), f); no++) {
		char ktype[64], b64[8192];
		ssh_key key = NULL;

		if (no < line)
			continue;
		/* names, key type, base64 key (widths: the buffers above) */
		if (known_hosts_line_matches(buf, host) &&
		    sscanf(buf, "%*s %63s %8191s", ktype, b64) == 2 &&
		    ssh_key_type_from_name(ktype) == type &&
		    ssh_pki_import_pubkey_base64(b64, type, &key) == SSH_OK) {
			fp = key_fingerprint(key);
			ssh_key_free(key);
			break;
		}
	}
	fclose(f);
	return fp;
}

static int check_host_key(struct ssh_node *n, ssh_session s)
{
	struct ssh_priv *priv = n->t->priv;
	const struct spec *spec = n->t->spec;
	enum ssh_known_hosts_e state;
	ssh_key key = NULL;
	char *fp;
	int rc = -1;

	if (ssh_get_server_publickey(s, &key) < 0) {
		transport_report(n->fd, "host key",
				 "%s: the server sent no host key: %s", n->host,
				 ssh_get_error(s));
		return -1;
	}
	fp = key_fingerprint(key);
	pthread_mutex_lock(&priv->known_hosts_lock);
	state = ssh_session_is_known_server(s);
	switch (state) {
	case SSH_KNOWN_HOSTS_OK:
		rc = 0;
		break;
	case SSH_KNOWN_HOSTS_CHANGED: {
		char *old = pinned_fingerprint(priv->known_hosts, n->host,
					       ssh_key_type(key));
		int line = known_hosts_line(priv->known_hosts, n->host);

		transport_report(
			n->fd, "host key",
			"%s: HOST KEY CHANGED: the node now presents %s, but "
			"%s%s%d pins %s. If the node was reinstalled, remove "
			"the old key (line %d; `ssh-keygen -R %s -f %s`) and "
			"pin the new one with `herd keys JOB.yaml "
			"--accept-new`; otherwise someone may be "
			"impersonating it",
			n->host, fp, priv->known_hosts, line ? ":" : "",
			line, old ? old : "(unknown)", line, n->host,
			priv->known_hosts);
		free(old);
		break;
	}
	case SSH_KNOWN_HOSTS_OTHER:
		transport_report(n->fd, "host key",
				 "%s: the node presents a %s key (%s) but %s "
				 "pins a key of another type; refusing",
				 n->host, ssh_key_type_to_char(ssh_key_type(key)),
				 fp, priv->known_hosts);
		break;
	case SSH_KNOWN_HOSTS_NOT_FOUND:
	case SSH_KNOWN_HOSTS_UNKNOWN:
		if (spec->ssh.host_keys == SPEC_HOST_KEYS_ACCEPT_NEW) {
			if (ssh_session_update_known_hosts(s) == SSH_OK) {
				rc = 0;
				break;
			}
			transport_report(n->fd, "host key",
					 "%s: cannot pin its host key in %s: "
					 "%s",
					 n->host, priv->known_hosts,
					 ssh_get_error(s));
			break;
		}
		transport_report(n->fd, "host key",
				 "%s: host key %s is not pinned in %s; pin it "
				 "with `herd keys JOB.yaml --accept-new` or "
				 "set ssh.host_keys: accept-new",
				 n->host, fp, priv->known_hosts);
		break;
	default:
		transport_report(n->fd, "host key",
				 "%s: cannot check the host key against %s: %s",
				 n->host, priv->known_hosts, ssh_get_error(s));
		break;
	}
	pthread_mutex_unlock(&priv->known_hosts_lock);
	free(fp);
	ssh_key_free(key);
	return rc;
}

static int upload_agent(struct ssh_node *n, ssh_session s)
{
	struct ssh_priv *priv = n->t->priv;
	char tmp[160], final[160], buf[65536];
	sftp_session sftp = sftp_new(s);
	sftp_file file = NULL;
	FILE *src = NULL;
	size_t got;
	int rc = -1;

	if (!sftp || sftp_init(sftp) != SSH_OK) {
		transport_report(n->fd, "agent",
				 "%s: no herd-agent there and SFTP is not "
				 "available to upload it: %s",
				 n->host, ssh_get_error(s));
		goto out;
	}
	sftp_mkdir(sftp, ".cache", 0700);
	sftp_mkdir(sftp, ".cache/herd", 0700);
	snprintf(final, sizeof(final), ".cache/herd/%s", priv->agent_name);
	snprintf(tmp, sizeof(tmp), ".cache/herd/.%s.%ld.%lx", priv->agent_name,
		 (long)getpid(), (unsigned long)pthread_self());
	src = fopen(n->t->agent_path, "rb");
	file = sftp_open(sftp, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0700);
	if (!src || !file) {
		transport_report(n->fd, "agent", "%s: cannot upload herd-agent "
				 "to ~/%s: %s", n->host, tmp,
				 src ? ssh_get_error(s) : strerror(errno));
		goto out;
	}
	while ((got = fread(buf, 1, sizeof(buf), src)) > 0) {
		if (sftp_write(file, buf, got) != (ssize_t)got) {
			transport_report(n->fd, "agent",
					 "%s: upload of herd-agent failed: %s",
					 n->host, ssh_get_error(s));
			goto out;
		}
	}
	sftp_close(file);
	file = NULL;
	/* Another node on a shared home may have won the race: fine. */
	if (sftp_rename(sftp, tmp, final) < 0) {
		sftp_attributes st = sftp_stat(sftp, final);

		sftp_unlink(sftp, tmp);
		if (!st) {
			transport_report(n->fd, "agent",
					 "%s: cannot install ~/%s: %s", n->host,
					 final, ssh_get_error(s));
			goto out;
		}
		sftp_attributes_free(st);
	}
	rc = 0;
out:
	if (file)
		sftp_close(file);
	if (src)
		fclose(src);
	if (sftp)
		sftp_free(sftp);
	return rc;
}

/* Copies bytes both ways until either side ends. */
static void pump(struct ssh_node *n, ssh_session s, ssh_channel ch)
{
	char buf[SSH_PUMP_CHUNK];
	struct pollfd pfd[2] = {
		{.fd = ssh_get_fd(s), .events = POLLIN},
		{.fd = n->fd, .events = POLLIN},
	};

	for (;;) {
		int avail;

		/* What libssh already buffered first, then wait. */
		for (int is_err = 0; is_err < 2; is_err++) {
			while ((avail = ssh_channel_poll(ch, is_err)) > 0) {
				int got = ssh_channel_read(
					ch, buf,
					(uint32_t)(avail < (int)sizeof(buf)
							   ? avail
							   : (int)sizeof(buf)),
					is_err);

				if (got <= 0)
					return;
				if (is_err) {
					fprintf(stderr, "herd-agent@%s: %.*s",
						n->host, got, buf);
					continue;
				}
				for (int off = 0; off < got;) {
					ssize_t w = write(n->fd, buf + off,
							  (size_t)(got - off));

					if (w < 0 && errno == EINTR)
						continue;
					if (w <= 0)
						return;
					off += (int)w;
				}
			}
			if (avail == SSH_ERROR || avail == SSH_EOF)
				return;
		}
		if (ssh_channel_is_eof(ch) || ssh_channel_is_closed(ch))
			return;
		if (poll(pfd, 2, 1000) < 0 && errno != EINTR)
			return;
		if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t got = read(n->fd, buf, sizeof(buf));

			if (got <= 0 && !(got < 0 && errno == EINTR))
				return;	/* herd hung up */
			if (got > 0 &&
			    ssh_channel_write(ch, buf, (uint32_t)got) != got)
				return;
		}
	}
}

static void *node_thread(void *arg)
{
	struct ssh_node *n = arg;
	struct transport *t = n->t;
	struct ssh_priv *priv = t->priv;
	const struct spec *spec = t->spec;
	ssh_session s = NULL;
	ssh_channel ch = NULL;
	char cmd[512], first[SSH_PUMP_CHUNK];
	size_t n_first = 0;
	long secs = spec->ssh.connect_timeout_ms / 1000;
	long usecs = (spec->ssh.connect_timeout_ms % 1000) * 1000;
	bool have_slot = true;
	int status;

	sem_wait(&priv->fanout);
	s = ssh_new();
	if (!s) {
		transport_report(n->fd, "connect", "%s: out of memory", n->host);
		goto out;
	}
	ssh_options_set(s, SSH_OPTIONS_HOST, n->host);
	/* $HOME, not the password database: tests and wrappers set it. */
	if (priv->ssh_dir)
		ssh_options_set(s, SSH_OPTIONS_SSH_DIR, priv->ssh_dir);
	ssh_options_parse_config(s, NULL);	/* ~/.ssh/config, system */
	if (spec->ssh.user)
		ssh_options_set(s, SSH_OPTIONS_USER, spec->ssh.user);
	if (spec->ssh.port != 22) {
		unsigned int port = (unsigned int)spec->ssh.port;

		ssh_options_set(s, SSH_OPTIONS_PORT, &port);
	}
	ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &secs);
	ssh_options_set(s, SSH_OPTIONS_TIMEOUT_USEC, &usecs);
	ssh_options_set(s, SSH_OPTIONS_KNOWNHOSTS, priv->known_hosts);
	if (priv->identity)
		ssh_options_set(s, SSH_OPTIONS_ADD_IDENTITY, priv->identity);

	if (ssh_connect(s) != SSH_OK) {
		const char *why = ssh_get_error(s);
		const char *hint =
			strstr(why, "refused") ? "is sshd running there? is "
						 "ssh.port right?"
			: strstr(why, "imeout") || strstr(why, "imed out")
				? "is the node up and reachable? raise "
				  "ssh.connect_timeout if it is slow"
				: "check the host name and the network";

		transport_report(n->fd, "connect", "%s: cannot connect: %s (%s)",
				 n->host, why, hint);
		goto out;
	}
	if (check_host_key(n, s) < 0)
		goto out;
	if (ssh_userauth_publickey_auto(s, NULL, NULL) != SSH_AUTH_SUCCESS) {
		char *user = NULL;

		ssh_options_get(s, SSH_OPTIONS_USER, &user);
		transport_report(n->fd, "auth",
				 "%s: authentication failed for user %s "
				 "(tried ssh-agent, %s and the default keys); "
				 "install a key with `herd keys JOB.yaml`",
				 n->host, user ? user : "?",
				 priv->identity ? priv->identity : "no identity");
		ssh_string_free_char(user);
		goto out;
	}
	/* One remote command in the common case (every command costs a
	 * login shell on the node): start the cached agent, or exit 97 when
	 * there is none, then upload it and try once more. */
	snprintf(cmd, sizeof(cmd),
		 "a=\"$HOME/.cache/herd/%s\"; [ -x \"$a\" ] && exec \"$a\" "
		 "--stdio; exit %d",
		 priv->agent_name, SSH_AGENT_MISSING);
	for (int tries = 0;; tries++) {
		int got;

		ch = ssh_channel_new(s);
		if (!ch || ssh_channel_open_session(ch) != SSH_OK ||
		    ssh_channel_request_exec(ch, cmd) != SSH_OK) {
			transport_report(n->fd, "agent",
					 "%s: cannot start herd-agent: %s",
					 n->host, ssh_get_error(s));
			goto out;
		}
		/* The agent speaks first (HELLO); silence until the
		 * timeout is left to the controller to judge. */
		got = ssh_channel_read_timeout(ch, first, sizeof(first), 0,
					       SSH_FIRST_BYTES_MS);
		if (got > 0) {
			n_first = (size_t)got;
			break;
		}
		if (got < 0 || !ssh_channel_is_eof(ch))
			break;
		status = ssh_channel_get_exit_status(ch);
		ssh_channel_close(ch);
		ssh_channel_free(ch);
		ch = NULL;
		if (status != SSH_AGENT_MISSING || tries > 0) {
			transport_report(n->fd, "agent",
					 "%s: herd-agent exited at once "
					 "(status %d)",
					 n->host, status);
			goto out;
		}
		if (upload_agent(n, s) < 0)
			goto out;
	}
	for (size_t off = 0; off < n_first;) {
		ssize_t w = write(n->fd, first + off, n_first - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			goto out;
		off += (size_t)w;
	}
	sem_post(&priv->fanout);
	have_slot = false;
	pump(n, s, ch);
out:
	if (have_slot)
		sem_post(&priv->fanout);
	if (ch) {
		ssh_channel_send_eof(ch);
		ssh_channel_close(ch);
		ssh_channel_free(ch);
	}
	if (s) {
		ssh_disconnect(s);
		ssh_free(s);
	}
	close(n->fd);
	free(n->host);
	free(n);
	pthread_mutex_lock(&priv->live_lock);
	priv->live--;
	pthread_cond_broadcast(&priv->live_cond);
	pthread_mutex_unlock(&priv->live_lock);
	return NULL;
}

/* Node threads are joined, not detached: a thread's OpenSSL state (its
 * random generators) is freed only when it has ended, so herd must not
 * exit while one is still on its way out.  Threads that ended are joined
 * here, so a long job that reconnects keeps no dead stacks. */
static int keep_tid(struct ssh_priv *priv, pthread_t tid)
{
	int kept = 0;

	for (int i = 0; i < priv->n_tids; i++)
		if (pthread_tryjoin_np(priv->tids[i], NULL) != 0)
			priv->tids[kept++] = priv->tids[i];
	priv->n_tids = kept;
	if (priv->n_tids == priv->cap_tids) {
		int cap = priv->cap_tids ? 2 * priv->cap_tids : 64;
		pthread_t *tids = realloc(priv->tids, cap * sizeof(*tids));

		if (!tids)
			return -1;
		priv->tids = tids;
		priv->cap_tids = cap;
	}
	priv->tids[priv->n_tids++] = tid;
	return 0;
}

static int ssh_start(struct transport *t, const char *host,
		     struct herd_err *err)
{
	struct ssh_priv *priv = t->priv;
	struct ssh_node *n = calloc(1, sizeof(*n));
	pthread_attr_t attr;
	pthread_t tid;
	int sv[2];

	if (!n || !(n->host = strdup(host))) {
		free(n);
		return herd_errprintf(err, "out of memory");
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		free(n->host);
		free(n);
		return herd_errprintf(err, "socketpair: %s", strerror(errno));
	}
	n->t = t;
	n->fd = sv[1];
	pthread_mutex_lock(&priv->live_lock);
	priv->live++;
	pthread_mutex_unlock(&priv->live_lock);
	pthread_attr_init(&attr);
	/* 256 KiB stacks: a thousand nodes stay cheap. */
	pthread_attr_setstacksize(&attr, 256 * 1024);
	if (pthread_create(&tid, &attr, node_thread, n) != 0) {
		pthread_mutex_lock(&priv->live_lock);
		priv->live--;
		pthread_mutex_unlock(&priv->live_lock);
		pthread_attr_destroy(&attr);
		close(sv[0]);
		close(sv[1]);
		free(n->host);
		free(n);
		return herd_errprintf(err, "cannot start a thread for %s",
				      host);
	}
	pthread_attr_destroy(&attr);
	if (keep_tid(priv, tid) < 0)
		pthread_detach(tid);	/* out of memory: not worth failing */
	return sv[0];
}

static void ssh_free_priv(struct transport *t)
{
	struct ssh_priv *priv = t->priv;

	struct timespec deadline;
	int live;

	if (!priv)
		return;
	/* The controller closed every socket: threads hang up at once,
	 * except one still inside a connect, which may take up to
	 * ssh.connect_timeout.  Wait a little; a thread still running
	 * after that keeps the shared state (the process is exiting). */
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 3;
	pthread_mutex_lock(&priv->live_lock);
	while (priv->live > 0 &&
	       pthread_cond_timedwait(&priv->live_cond, &priv->live_lock,
				      &deadline) == 0)
		;
	live = priv->live;
	pthread_mutex_unlock(&priv->live_lock);
	t->priv = NULL;
	if (live > 0)
		return;
	/* Every thread is past its last use of the shared state; wait
	 * (bounded) until each has ended and freed its own. */
	for (int i = 0; i < priv->n_tids; i++)
		if (pthread_timedjoin_np(priv->tids[i], NULL, &deadline) != 0)
			return;
	free(priv->tids);
	sem_destroy(&priv->fanout);
	free(priv->known_hosts);
	free(priv->identity);
	free(priv->ssh_dir);
	free(priv);
}

static int ssh_init_priv(struct transport *t, struct herd_err *err)
{
	struct ssh_priv *priv = calloc(1, sizeof(*priv));
	int fanout = t->spec->ssh.fanout > 0 ? t->spec->ssh.fanout : 64;

	if (!priv)
		return herd_errprintf(err, "out of memory");
	if (agent_cache_name(t->agent_path, priv->agent_name,
			     sizeof(priv->agent_name), err) < 0) {
		free(priv);
		return -1;
	}
	priv->known_hosts = expand_tilde(t->spec->ssh.known_hosts
						 ? t->spec->ssh.known_hosts
						 : "~/.ssh/known_hosts");
	priv->identity = expand_tilde(t->spec->ssh.identity);
	priv->ssh_dir = expand_tilde("~/.ssh");
	/* Without ssh.identity, the key `herd keys` makes by default. */
	if (!priv->identity) {
		char *dflt = expand_tilde("~/.ssh/herd_ed25519");

		if (dflt && access(dflt, R_OK) == 0)
			priv->identity = dflt;
		else
			free(dflt);
	}
	sem_init(&priv->fanout, 0, (unsigned int)fanout);
	pthread_mutex_init(&priv->known_hosts_lock, NULL);
	pthread_mutex_init(&priv->live_lock, NULL);
	pthread_cond_init(&priv->live_cond, NULL);
	ssh_init();
	t->priv = priv;
	return 0;
}

static int ssh_start_first(struct transport *t, const char *host,
			   struct herd_err *err)
{
	if (!t->priv && ssh_init_priv(t, err) < 0)
		return -1;
	return ssh_start(t, host, err);
}

const struct transport_ops transport_ssh_ops = {
	.name = "ssh",
	.start = ssh_start_first,
	.free = ssh_free_priv,
};
