/* transport/ssh/sshsess.c — one SSH session to a node (see transport/ssh/sshsess.h). */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libssh/callbacks.h>

#include "herd/file.h"
#include "launcher/transport/ssh/keys.h"
#include "launcher/transport/ssh/sshsess.h"

/* A known_hosts file over 1 MiB is refused when herd reads it to name the
 * line of a refused key: real ones are a few KiB, and it is read whole. */
#define SSHSESS_KNOWN_HOSTS_MAX (1024 * 1024)

/* herd -v: libssh's own log reaches stderr; without -v it is dropped. */
static bool sshsess_verbose;

/* libssh's log, whatever level a ~/.ssh/config LogLevel set: nothing
 * without -v, one "herd: libssh: " line each with it. */
static void on_libssh_log(int priority, const char *function,
			  const char *buffer, void *userdata)
{
	(void)priority;
	(void)function;
	(void)userdata;
	if (sshsess_verbose)
		fprintf(stderr, "herd: libssh: %s\n", buffer);
}

/* libssh keeps its log callback and level per thread: set on every
 * thread that makes a session, before ~/.ssh/config is read. */
static void log_init(void)
{
	ssh_set_log_callback(on_libssh_log);
}

void sshsess_set_verbose(bool verbose)
{
	sshsess_verbose = verbose;
	log_init();
}

char *sshsess_expand_home(const char *path)
{
	const char *home = getenv("HOME");
	char *out = NULL;

	if (!path)
		return NULL;
	if (path[0] != '~' || (path[1] != '/' && path[1] != '\0'))
		return strdup(path);
	if (!home || !*home) {
		struct passwd *pw = getpwuid(getuid());

		home = pw ? pw->pw_dir : "/";
	}
	if (asprintf(&out, "%s%s", home, path + 1) < 0)
		return NULL;
	return out;
}

int sshsess_cfg_init(struct sshsess_cfg *cfg, const struct spec *spec,
		     const char *identity, struct herd_err *err)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->spec = spec;
	cfg->accept_new = spec->ssh.host_keys == SPEC_HOST_KEYS_ACCEPT_NEW;
	cfg->known_hosts = sshsess_expand_home(
	    spec->ssh.known_hosts ? spec->ssh.known_hosts
				  : SSHSESS_DEFAULT_KNOWN_HOSTS);
	cfg->ssh_dir = sshsess_expand_home("~/.ssh");
	cfg->identity = sshsess_expand_home(identity);
	pthread_mutex_init(&cfg->lock, NULL);
	if (!cfg->known_hosts || !cfg->ssh_dir || (identity && !cfg->identity)) {
		sshsess_cfg_free(cfg);
		return herd_errprintf(err, "out of memory");
	}
	return 0;
}

int sshsess_cfg_init_job(struct sshsess_cfg *cfg, const struct spec *spec,
			 struct herd_err *err)
{
	const char *identity = spec->ssh.identity;
	char *dflt = NULL;
	int rc;

	if (!identity) {
		dflt = sshsess_expand_home(KEYS_DEFAULT_IDENTITY);
		if (dflt && access(dflt, R_OK) == 0)
			identity = dflt;
	}
	rc = sshsess_cfg_init(cfg, spec, identity, err);
	/* A key the job names must be there: not "authentication failed"
	 * on every node for a typo. */
	if (rc == 0 && spec->ssh.identity && access(cfg->identity, R_OK) < 0) {
		rc = herd_errprintf(err,
				    "ssh.identity %s: %s (make a key with "
				    "`herd keys JOB.yaml`, or fix the path)",
				    cfg->identity,
				    errno == ENOENT ? "no such file"
						    : strerror(errno));
		sshsess_cfg_free(cfg);
	}
	free(dflt);
	return rc;
}

void sshsess_cfg_free(struct sshsess_cfg *cfg)
{
	if (!cfg || !cfg->spec)
		return;
	free(cfg->known_hosts);
	free(cfg->identity);
	free(cfg->ssh_dir);
	pthread_mutex_destroy(&cfg->lock);
	memset(cfg, 0, sizeof(*cfg));
}

/* The known_hosts file of session s: ssh.known_hosts when the job sets
 * one other than the default, else ~/.ssh/config's UserKnownHostsFile
 * (its first file, as libssh reads it; "~/" is $HOME, as everywhere in
 * herd), else the default.  Returns 0, or -1 when out of memory. */
static int set_known_hosts(const struct sshsess_cfg *cfg, ssh_session s)
{
	const char *job = cfg->spec->ssh.known_hosts;
	char *from_config = NULL, *path;
	int rc;

	if ((!job || !strcmp(job, SSHSESS_DEFAULT_KNOWN_HOSTS)) &&
	    ssh_options_get(s, SSH_OPTIONS_KNOWNHOSTS, &from_config) ==
		SSH_OK &&
	    from_config) {
		path = sshsess_expand_home(from_config);
		ssh_string_free_char(from_config);
		if (!path)
			return -1;
		rc = ssh_options_set(s, SSH_OPTIONS_KNOWNHOSTS, path);
		free(path);
		return rc == SSH_OK ? 0 : -1;
	}
	return ssh_options_set(s, SSH_OPTIONS_KNOWNHOSTS, cfg->known_hosts) ==
		       SSH_OK
		   ? 0
		   : -1;
}

ssh_session sshsess_new(const struct sshsess_cfg *cfg, const char *host,
			struct herd_err *err)
{
	const struct spec *spec = cfg->spec;
	long secs = spec->ssh.connect_timeout_ms / 1000;
	long usecs = (spec->ssh.connect_timeout_ms % 1000) * 1000;
	ssh_session s = ssh_new();

	if (!s) {
		herd_errprintf(err, "out of memory");
		return NULL;
	}
	ssh_options_set(s, SSH_OPTIONS_HOST, host);
	/* $HOME/.ssh, not the password database's home: the same place
	 * herd's own ~ paths mean (tests and wrappers set HOME). */
	ssh_options_set(s, SSH_OPTIONS_SSH_DIR, cfg->ssh_dir);
	log_init();
	/* ~/.ssh/config, then the system's: libssh's parser takes HostName,
	 * User, Port, IdentityFile, UserKnownHostsFile, ProxyJump, LogLevel
	 * and more. */
	ssh_options_parse_config(s, NULL);
	/* A LogLevel there is libssh's global level: without -v it is
	 * silenced (the callback drops it too; this spares the work). */
	{
		int level =
		    sshsess_verbose ? ssh_get_log_level() : SSH_LOG_NONE;

		if (sshsess_verbose && level < SSH_LOG_WARN)
			level = SSH_LOG_WARN;
		ssh_options_set(s, SSH_OPTIONS_LOG_VERBOSITY, &level);
	}
	/* The job's keys win over ~/.ssh/config. */
	if (spec->ssh.user)
		ssh_options_set(s, SSH_OPTIONS_USER, spec->ssh.user);
	if (spec->ssh.port != 22) {
		unsigned int port = (unsigned int)spec->ssh.port;

		ssh_options_set(s, SSH_OPTIONS_PORT, &port);
	}
	ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &secs);
	ssh_options_set(s, SSH_OPTIONS_TIMEOUT_USEC, &usecs);
	if (set_known_hosts(cfg, s) < 0) {
		ssh_free(s);
		herd_errprintf(err, "out of memory");
		return NULL;
	}
	if (cfg->identity)
		ssh_options_set(s, SSH_OPTIONS_ADD_IDENTITY, cfg->identity);
	return s;
}

int sshsess_connect(ssh_session s, struct herd_err *err)
{
	const char *why, *hint;

	if (ssh_connect(s) == SSH_OK)
		return 0;
	why = ssh_get_error(s);
	if (strstr(why, "refused")) {
		herd_errprintf(err,
			       "cannot connect: %s (is sshd running there? is "
			       "ssh.port right?)",
			       why);
		return SSHSESS_SETUP;
	}
	if (strstr(why, "resolve")) {
		herd_errprintf(err,
			       "cannot connect: %s (check the host name, and "
			       "HostName in ~/.ssh/config)",
			       why);
		return SSHSESS_SETUP;
	}
	hint = strstr(why, "imeout") || strstr(why, "imed out")
		   ? "is the node up and reachable? raise "
		     "ssh.connect_timeout if it is slow"
		   : "check the host name and the network";
	return herd_errprintf(err, "cannot connect: %s (%s)", why, hint);
}

char *sshsess_fingerprint(ssh_key key)
{
	unsigned char *hash = NULL;
	size_t hlen = 0;
	char *fp = NULL, *copy = NULL;

	if (!key || ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256,
					   &hash, &hlen) != 0)
		return NULL;
	fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen);
	ssh_clean_pubkey_hash(&hash);
	if (fp) {
		copy = strdup(fp);
		ssh_string_free_char(fp);
	}
	return copy;
}

bool sshsess_names_host(const char *line, const char *host)
{
	size_t hlen = strlen(host);
	const char *p = line;

	if (*p == '@') /* @cert-authority / @revoked marker */
		return false;
	while (*p && *p != ' ' && *p != '\t') {
		const char *q = p;

		if (*q == '[')
			q++;
		if (!strncmp(q, host, hlen) && q[hlen] != '\0' &&
		    strchr(",] \t", q[hlen]))
			return true;
		while (*p && *p != ',' && *p != ' ' && *p != '\t')
			p++;
		if (*p == ',')
			p++;
	}
	return false;
}

/* The line of file that pins host in plain text: the first whose key is
 * of type when there is one (*fp gets its fingerprint), else the first
 * naming host (*fp NULL).  Returns the 1-based line, or 0 (no such line,
 * hashed names, unreadable file).  libssh does not say which entry it
 * compared, so the file is read again here for the message. */
static int pinned_line(const char *file, const char *host,
		       enum ssh_keytypes_e type, char **fp)
{
	size_t len;
	char *text = file_read(file, SSHSESS_KNOWN_HOSTS_MAX, &len);
	char *line, *next;
	int no = 0, first = 0;

	*fp = NULL;
	if (!text)
		return 0;
	for (line = text; line && *line; line = next) {
		char ktype[64], b64[8192];
		ssh_key key = NULL;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		no++;
		if (!sshsess_names_host(line, host))
			continue;
		if (!first)
			first = no;
		/* names, key type, base64 key (widths: the buffers above) */
		if (sscanf(line, "%*s %63s %8191s", ktype, b64) == 2 &&
		    ssh_key_type_from_name(ktype) == type &&
		    ssh_pki_import_pubkey_base64(b64, type, &key) == SSH_OK) {
			*fp = sshsess_fingerprint(key);
			ssh_key_free(key);
			first = no;
			break;
		}
	}
	free(text);
	return first;
}

static int judge_key_in(struct sshsess_cfg *cfg, ssh_session s,
			const char *host, ssh_key key, const char *fp,
			const char *file, struct herd_err *err);

/* Under cfg->lock: the verdict on key, as sshsess_host_key() returns. */
static int judge_key(struct sshsess_cfg *cfg, ssh_session s,
		     const char *host, ssh_key key, const char *fp,
		     struct herd_err *err)
{
	char *sfile = NULL;
	const char *file = cfg->known_hosts;
	int rc;

	/* The session's file: ~/.ssh/config may name another. */
	if (ssh_options_get(s, SSH_OPTIONS_KNOWNHOSTS, &sfile) == SSH_OK &&
	    sfile)
		file = sfile;
	rc = judge_key_in(cfg, s, host, key, fp, file, err);
	ssh_string_free_char(sfile);
	return rc;
}

static int judge_key_in(struct sshsess_cfg *cfg, ssh_session s,
			const char *host, ssh_key key, const char *fp,
			const char *file, struct herd_err *err)
{
	char *old = NULL;
	int line, rc = -1;

	switch (ssh_session_is_known_server(s)) {
	case SSH_KNOWN_HOSTS_OK:
		return SSHSESS_KEY_KNOWN;
	case SSH_KNOWN_HOSTS_CHANGED:
		line = pinned_line(file, host, ssh_key_type(key), &old);
		if (line > 0)
			herd_errprintf(
			    err,
			    "HOST KEY CHANGED: the node now presents %s, but "
			    "%s line %d pins %s. If the node was reinstalled, "
			    "delete %s:%d (`ssh-keygen -R %s -f %s`) and pin "
			    "the new key with `herd keys JOB.yaml "
			    "--accept-new`; otherwise someone may be "
			    "impersonating it",
			    fp, file, line, old ? old : "(unknown)", file,
			    line, host, file);
		else
			herd_errprintf(
			    err,
			    "HOST KEY CHANGED: the node now presents %s, but "
			    "%s pins another key (a hashed entry). If the node "
			    "was reinstalled, remove it (`ssh-keygen -R %s -f "
			    "%s`) and pin the new key with `herd keys JOB.yaml "
			    "--accept-new`; otherwise someone may be "
			    "impersonating it",
			    fp, file, host, file);
		free(old);
		return -1;
	case SSH_KNOWN_HOSTS_OTHER:
		line = pinned_line(file, host, ssh_key_type(key), &old);
		free(old);
		return herd_errprintf(
		    err,
		    "the node presents a %s host key (%s) but %s line %d pins "
		    "a key of another type; remove that line if the node was "
		    "reinstalled",
		    ssh_key_type_to_char(ssh_key_type(key)), fp, file, line);
	case SSH_KNOWN_HOSTS_NOT_FOUND:
	case SSH_KNOWN_HOSTS_UNKNOWN:
		if (!cfg->accept_new)
			return herd_errprintf(
			    err,
			    "host key %s is not pinned in %s; check it and pin "
			    "it with `herd keys JOB.yaml --accept-new` (or set "
			    "ssh.host_keys: accept-new)",
			    fp, file);
		if (ssh_session_update_known_hosts(s) != SSH_OK)
			return herd_errprintf(err,
					      "cannot pin its host key in %s: "
					      "%s",
					      file, ssh_get_error(s));
		rc = SSHSESS_KEY_PINNED;
		break;
	default:
		return herd_errprintf(err,
				      "cannot check its host key against %s: "
				      "%s",
				      file, ssh_get_error(s));
	}
	return rc;
}

int sshsess_host_key(struct sshsess_cfg *cfg, ssh_session s,
		     const char *host, ssh_key *keyp, struct herd_err *err)
{
	ssh_key key = NULL;
	char *fp = NULL;
	int rc = -1;

	if (keyp)
		*keyp = NULL;
	if (ssh_get_server_publickey(s, &key) < 0)
		return herd_errprintf(err, "the server sent no host key: %s",
				      ssh_get_error(s));
	if (!(fp = sshsess_fingerprint(key))) {
		herd_errprintf(err, "cannot read its host key");
		goto out;
	}
	pthread_mutex_lock(&cfg->lock);
	rc = judge_key(cfg, s, host, key, fp, err);
	pthread_mutex_unlock(&cfg->lock);
out:
	free(fp);
	if (keyp)
		*keyp = key;
	else
		ssh_key_free(key);
	return rc;
}

int sshsess_auth(const struct sshsess_cfg *cfg, ssh_session s,
		 sshsess_password_fn password, void *arg,
		 struct herd_err *err)
{
	const char *ident = cfg->identity ? cfg->identity : "no identity";
	char *user = NULL;
	const char *pw;
	int rc = -1;

	if (ssh_userauth_publickey_auto(s, NULL, NULL) == SSH_AUTH_SUCCESS)
		return 0;
	ssh_options_get(s, SSH_OPTIONS_USER, &user);
	if (!password) {
		herd_errprintf(err,
			       "authentication failed for user %s (tried "
			       "ssh-agent, ~/.ssh/config, the default keys and "
			       "%s); install a key with `herd keys JOB.yaml`",
			       user ? user : "?", ident);
		goto out;
	}
	pw = password(arg, user ? user : "?");
	if (pw && ssh_userauth_password(s, NULL, pw) == SSH_AUTH_SUCCESS) {
		rc = 0;
		goto out;
	}
	herd_errprintf(err,
		       "authentication failed for user %s (tried ssh-agent, "
		       "~/.ssh/config, the default keys and %s, %s); load a "
		       "key the node accepts into ssh-agent, or give the "
		       "password in HERD_PASSWORD or at the prompt",
		       user ? user : "?", ident,
		       pw ? "and the password was refused"
			  : "and no password: HERD_PASSWORD is not set and "
			    "there is no terminal to ask");
out:
	ssh_string_free_char(user);
	return rc;
}

ssh_session sshsess_open(struct sshsess_cfg *cfg, const char *host,
			 bool *pinned, ssh_key *key, struct herd_err *err)
{
	ssh_session s = sshsess_new(cfg, host, err);
	int rc;

	if (!s)
		return NULL;
	if (sshsess_connect(s, err) < 0 ||
	    (rc = sshsess_host_key(cfg, s, host, key, err)) < 0) {
		ssh_disconnect(s);
		ssh_free(s);
		return NULL;
	}
	if (pinned)
		*pinned = rc == SSHSESS_KEY_PINNED;
	return s;
}
