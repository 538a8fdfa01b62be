/* transport_ssh.c — one herd-agent per node over SSH, in process (libssh),
 * no ssh/pdsh children.
 *
 * Each node gets a thread: it waits for a fan-out slot, connects, checks
 * the host key against ssh.known_hosts (strict, or accept-new which pins
 * unknown keys and still refuses changed ones; there is no "off"),
 * authenticates (ssh-agent, ssh.identity, default keys, ~/.ssh/config),
 * makes sure ssh.agent_dir (~/.cache/herd) holds this herd's agent
 * (uploading it over the exec channel when missing), starts it and then
 * pumps bytes between the SSH channel and a socketpair whose other end the
 * controller reads like any other transport.  Only this thread touches its
 * libssh session.
 *
 * The agent cache is checked on the node, by the same shell that execs
 * the agent, right before the exec (see CACHE_CHECK below): whoever else
 * can write the cache could make herd run their program as the job user.
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
#include <openssl/evp.h>

#include "herd/render.h"
#include "herd/version.h"
#include "transport.h"

/* 32 KiB: one SSH channel packet is at most 32 KiB of payload. */
#define SSH_PUMP_CHUNK (32 * 1024)
/* The remote start command exits with this when no cached agent of
 * this build exists, or one that fails its check in a safe directory
 * (an unusual value, so a failing agent is not taken for a missing one). */
#define SSH_AGENT_MISSING 97
/* The remote scripts exit with this after one line on stderr, tagged
 * SSH_REASON_TAG, saying what is wrong (unsafe cache, full disk...). */
#define SSH_AGENT_REFUSED 98
#define SSH_REASON_TAG "herd-agent-error: "
/* What herd reads of a failed remote command's stderr: the reason line,
 * plus whatever a login shell printed before it. */
#define SSH_STDERR_MAX 8192
/* How long an upload may take once the data is sent (the node hashes
 * and renames the file). */
#define SSH_UPLOAD_END_MS 60000
/* How long to wait for the agent's first bytes before handing the
 * channel to the pump anyway (the controller has its own timeouts). */
#define SSH_FIRST_BYTES_MS 30000
/* How many directories deep the agent cache may be on a node, as a
 * string for the scripts: its chain of directories is listed in one
 * argument list, which costs the node's shell O(depth^2) copying (1,500
 * levels took 39 s of CPU before this bound).  Real caches are under 20. */
#define SSH_CACHE_DEPTH "64"
/* An agent binary over 256 MiB is not ours. */
#define SSH_AGENT_MAX (256L * 1024 * 1024)

struct ssh_priv {
	sem_t fanout;
	pthread_mutex_t known_hosts_lock;	/* accept-new writes the file */
	pthread_mutex_t live_lock;
	pthread_cond_t live_cond;
	int live;		/* node threads still running */
	/* Under live_lock: the node threads still running, and whether the
	 * transport is being freed.  ssh_free_priv() shuts down each one's
	 * session socket so that a thread blocked inside libssh (waiting for
	 * an agent's first bytes, an upload, authentication) returns at once
	 * instead of after its own timeout. */
	struct ssh_node *running;
	bool aborting;
	pthread_t *tids;	/* node threads not joined yet */
	int n_tids, cap_tids;
	char agent_name[96];	/* agent-VERSION-HASH in ssh.agent_dir */
	char agent_sha256[65];	/* of the whole file, hex: checked on
				 * the node before every exec */
	long agent_size;	/* bytes, <= SSH_AGENT_MAX */
	const char *agent_dir;	/* the spec's ssh.agent_dir (borrowed) */
	char *known_hosts;	/* ~ expanded */
	char *identity;		/* ~ expanded, or NULL */
	char *ssh_dir;		/* $HOME/.ssh */
};

struct ssh_node {
	struct transport *t;
	char *host;
	int fd;			/* our end of the socketpair */
	/* The session's socket once connected, else -1: written under
	 * live_lock, and cleared before libssh closes it, so that
	 * ssh_free_priv() never shuts down a number reused by another file. */
	int sock;
	struct ssh_node *next, *prev; /* priv->running, under live_lock */
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

/* The agent in the cache is named by version and content (the first 48
 * bits of its SHA-256), so that a rebuilt agent of the same version is
 * never confused with an old one; the whole digest is checked on the node
 * before every exec. */
static int agent_digest(const char *path, struct ssh_priv *priv,
			struct herd_err *err)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char buf[65536], md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = NULL;
	FILE *f = NULL;
	long total = 0;
	size_t n;
	int rc = -1;

	if (!(f = fopen(path, "rb"))) {
		herd_errprintf(err, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (!(ctx = EVP_MD_CTX_new()) ||
	    !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		herd_errprintf(err, "%s: cannot hash it (out of memory)", path);
		goto out;
	}
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
		total += (long)n;
		if (total > SSH_AGENT_MAX) {
			herd_errprintf(err,
				       "%s: larger than %ld MiB; not a "
				       "herd-agent",
				       path, SSH_AGENT_MAX >> 20);
			goto out;
		}
		if (!EVP_DigestUpdate(ctx, buf, n)) {
			herd_errprintf(err, "%s: cannot hash it", path);
			goto out;
		}
	}
	if (ferror(f)) {
		herd_errprintf(err, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (!EVP_DigestFinal_ex(ctx, md, &mdlen) || mdlen != 32) {
		herd_errprintf(err, "%s: cannot hash it", path);
		goto out;
	}
	for (unsigned int i = 0; i < mdlen; i++) {
		priv->agent_sha256[2 * i] = hex[md[i] >> 4];
		priv->agent_sha256[2 * i + 1] = hex[md[i] & 15];
	}
	priv->agent_sha256[2 * mdlen] = '\0';
	priv->agent_size = total;
	snprintf(priv->agent_name, sizeof(priv->agent_name), "agent-%s-%.12s",
		 HERD_VERSION, priv->agent_sha256);
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	if (f)
		fclose(f);
	return rc;
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

/* ---- the agent cache on the node ----------------------------------------
 *
 * Two small POSIX sh scripts run through the job user's login shell as
 *   exec /bin/sh -c 'SCRIPT' herd-agent 'AGENT_DIR' 'NAME' 'SHA256' ['SIZE']
 * where every value is one single-quoted word (render_shell_quote()),
 * never text pasted into the script.  They need sh, id, stat, sha256sum,
 * tr, mktemp, head, chmod, mv and mkdir: GNU coreutils, as on every Debian
 * node.  "~" needs an absolute $HOME there: an empty one would turn
 * ~/.cache/herd into /.cache/herd.
 *
 * CACHE_CHECK, shared by both: ssh.agent_dir ("~" is $HOME there) is
 * resolved to its physical path P (cd -P; pwd -P), and P and every
 * directory above it up to / must be a directory owned by root or by the
 * job user and not writable by group or other.  The one exception is a
 * directory above P that root owns and that has the sticky bit (/tmp):
 * there nobody else can rename or remove what the user owns, and the next
 * directory down is checked in turn.  This is OpenSSH's safe_path() rule
 * (auth.c), taken up to / and with the sticky exception.  The path as
 * written (~ expanded) is checked the same way when it is not P, its
 * symlinks too (by owner): a symlink that another user planted in a sticky
 * directory (fs.protected_symlinks off) must not steer the cache, and herd
 * with it, into a directory of its choice.  Once P passes,
 * only the user and root can change anything under it, so what is checked
 * next is what gets executed: the agent P/NAME must be a regular file (not
 * a symlink) of the user's with mode 0700 whose SHA-256 is this herd's, and
 * the script then execs that very path.
 *
 * An unsafe directory is refused (exit SSH_AGENT_REFUSED with one line
 * naming it and the fix): replacing the agent there would not help, the
 * next one could be swapped as well.  A missing agent, or one that fails
 * the file check in a safe directory, is uploaded again (exit
 * SSH_AGENT_MISSING). */
#define CACHE_CHECK                                                            \
	"d=$1 n=$2 h=$3\n"                                                     \
	"unset CDPATH\n"                                                       \
	"u=\n"                                                                 \
	"while read -r k v _; do [ \"$k\" = Uid: ] && u=$v && break; done "    \
	"</proc/self/status\n"                                                 \
	"[ -n \"$u\" ] || u=$(id -u) || exit 1\n"                              \
	/* One line, whatever the paths in it hold: a newline in a name must   \
	 * not start a line that herd would take for the reason. */            \
	"say() { printf \"" SSH_REASON_TAG "%s\\n\" "                          \
	"\"$(printf %s \"$*\" | tr '\\n' '?')\" >&2; }\n"                      \
	"bad() { say \"$*\"; exit 98; }\n"                                     \
	"case $d in \"~\" | \"~/\"*) case $HOME in /*) ;; *) "                 \
	"bad \"ssh.agent_dir $d needs HOME, which is not an absolute path "    \
	"there; set ssh.agent_dir to an absolute path\" ;; esac ;; esac\n"     \
	"case $d in \"~\") d=$HOME ;; \"~/\"*) d=$HOME/${d#\"~/\"} ;; esac\n"  \
	"case $d in /*) ;; *) bad \"ssh.agent_dir $1 is not an absolute path " \
	"there (is HOME set?)\" ;; esac\n"                                     \
	"safe() {\n"                                                           \
	"l=$1 z=$2 g=${3:-$2}\n"                                               \
	"set --\n"                                                             \
	"for q in \"$z\" \"$g\"; do\n"                                         \
	"[ $# -gt 0 ] && [ \"$q\" = \"$z\" ] && break\n"                       \
	"i=0\n"                                                                \
	"while :; do\n"                                                        \
	"set -- \"$@\" \"$q\"\n"                                               \
	"[ \"$q\" = / ] && break\n"                                            \
	"i=$((i + 1)); [ $i -le " SSH_CACHE_DEPTH " ] || bad \"refusing the "  \
	"herd-agent cache $l: $q is more than " SSH_CACHE_DEPTH " directories " \
	"deep; set ssh.agent_dir to a shorter path\"\n"                        \
	"q=${q%/*}; q=${q:-/}\n"                                               \
	"done\n"                                                               \
	"done\n"                                                               \
	"r=$(LC_ALL=C stat -c \"%u %f\" -- \"$@\" 2>&1) || "                   \
	"bad \"cannot check the herd-agent cache $l: ${r##*: }\"\n"            \
	"while read -r o f; do\n"                                              \
	"q=$1; shift; f=$((0x$f)); y=$((f & 61440))\n"                         \
	"[ $y -eq 16384 ] || [ $y -eq 40960 ] || "                             \
	"bad \"refusing the herd-agent cache $l: $q is not a directory\"\n"    \
	"[ \"$o\" = 0 ] || [ \"$o\" = \"$u\" ] || "                            \
	"bad \"refusing the herd-agent cache $l: $q belongs to uid $o, "       \
	"not to the job user (uid $u) or root; set ssh.agent_dir to a "        \
	"directory of the job user\"\n"                                        \
	"[ $y -eq 40960 ] || [ $((f & 18)) -eq 0 ] || "                        \
	"{ [ \"$q\" != \"$l\" ] && [ \"$o\" = 0 ] && [ $((f & 512)) -ne 0 ]; " \
	"} || "                                                                \
	"bad \"refusing the herd-agent cache $l: $q is writable by "           \
	"group/other (mode $(printf %04o $((f & 4095)))); "                    \
	"fix with chmod go-w $q or set ssh.agent_dir\"\n"                      \
	"done <<EOF\n"                                                         \
	"$r\n"                                                                 \
	"EOF\n"                                                                \
	"}\n"

/* Starts the cached agent, or exits SSH_AGENT_MISSING / _REFUSED. */
static const char start_script[] = CACHE_CHECK
    "[ -d \"$d\" ] || exit 97\n"
    "o=$PWD\n"
    "cd -P -- \"$d\" || bad \"cannot enter the herd-agent cache $d\"\n"
    "p=$PWD\n"
    "cd -- \"$o\" || exit 1\n"
    "safe \"$p\" \"$p\" \"$d\"\n"
    "a=$p/$n\n"
    "s=$(LC_ALL=C stat -c \"%u %f\" -- \"$a\" 2>/dev/null) || exit 97\n"
    "f=$((0x${s#* }))\n"
    "[ \"${s% *}\" = \"$u\" ] && [ $((f & 61440)) -eq 32768 ] && "
    "[ $((f & 4095)) -eq 448 ] || "
    "{ say \"$a is not a regular file of uid $u with mode 0700\"; exit 97; }\n"
    "c=$(sha256sum <\"$a\") || exit 97\n"
    "[ \"${c%% *}\" = \"$h\" ] || "
    "{ say \"$a is not this herd-agent (sha256 ${c%% *})\"; exit 97; }\n"
    "exec \"$a\" --stdio\n";

/* Reads exactly SIZE bytes of stdin into a new file (mktemp: O_EXCL, 0600)
 * in the checked directory, checks their SHA-256, makes the file 0700 and
 * renames it over NAME; any failure removes the file (EXIT trap) and says
 * why in one line.  "ready" on stdout: the checks passed, send the bytes. */
static const char upload_script[] = CACHE_CHECK
    "for c in stat sha256sum tr mktemp head chmod mv mkdir; do "
    "command -v $c >/dev/null || bad \"cannot upload herd-agent: $c is "
    "missing there (GNU coreutils)\"; done\n"
    "umask 077\n"
    "t=\n"
    "trap 'rm -f -- \"$t\"' EXIT\n"
    "trap 'exit 1' HUP INT TERM PIPE\n"
    "if [ -d \"$d\" ]; then\n"
    "cd -P -- \"$d\" || bad \"cannot enter the herd-agent cache $d\"\n"
    "else\n"
    /* The deepest directory that exists is checked, then entered, and
     * the rest is made from there: no path another user could re-point
     * is followed after the check. */
    "e=$d\n"
    "while [ ! -d \"$e\" ]; do e=${e%/*}; e=${e:-/}; done\n"
    "cd -P -- \"$e\" || bad \"cannot enter $e\"\n"
    "safe \"$d\" \"$PWD\" \"$e\"\n"
    /* One directory at a time, without -p: mkdir(2) never follows a
     * symlink, and a name that another user turned into one (in a
     * sticky directory) shows as a $PWD that is not the expected one. */
    "r=${d#\"$e\"}\n"
    "while [ -n \"$r\" ]; do\n"
    "r=${r#/}; c=${r%%/*}; r=${r#\"$c\"}\n"
    "case $c in \"\" | .) continue ;; ..) bad \"cannot upload herd-agent: "
    "ssh.agent_dir $d has .. below a missing directory\" ;; esac\n"
    "m=$(mkdir -- \"$c\" 2>&1) || [ -d \"$c\" ] || bad \"cannot upload "
    "herd-agent: cannot create $d: ${m##*: }; set ssh.agent_dir to a "
    "directory the job user can write\"\n"
    "o=${PWD%/}/$c\n"
    "cd -P -- \"./$c\" || bad \"cannot enter the herd-agent cache $d\"\n"
    "[ \"$PWD\" = \"$o\" ] || bad \"refusing the herd-agent cache $d: $o "
    "became a symlink while herd made it\"\n"
    "done\n"
    "fi\n"
    "p=$PWD\n"
    "safe \"$p\" \"$p\" \"$d\"\n"
    "r=$(mktemp -- \"$p/.$n.XXXXXX\" 2>&1) || bad \"cannot upload "
    "herd-agent to $p: ${r##*: }; set ssh.agent_dir to a directory "
    "the job user can write\"\n"
    "t=$r\n"
    "echo ready\n"
    "r=$(head -c \"$4\" 2>&1 >\"$t\") || bad \"cannot upload herd-agent to "
    "$p: ${r##*: }; make room there or set ssh.agent_dir\"\n"
    "c=$(sha256sum <\"$t\") || bad \"cannot read back $t\"\n"
    "[ \"${c%% *}\" = \"$h\" ] || bad \"the herd-agent upload to $p arrived "
    "cut short or damaged (sha256 ${c%% *}); try again\"\n"
    "r=$(chmod 700 -- \"$t\" 2>&1) || bad \"cannot chmod $t: ${r##*: }\"\n"
    "r=$(mv -f -T -- \"$t\" \"$p/$n\" 2>&1) || "
    "bad \"cannot install $p/$n: ${r##*: }\"\n"
    "t=\n";

/* The remote command that runs script with the cache's arguments and,
 * with size >= 0, the agent's size.  Returns a malloc'd string or NULL. */
static char *remote_command(const struct ssh_priv *priv, const char *script,
			    long size)
{
	char num[32];
	const char *words[] = {script,		    "herd-agent",
			       priv->agent_dir,	    priv->agent_name,
			       priv->agent_sha256, num};
	size_t n_words = sizeof(words) / sizeof(words[0]) - (size < 0);
	char *cmd = NULL, *q;
	size_t len = 0;
	FILE *f = open_memstream(&cmd, &len);
	int rc = -1;

	if (!f)
		return NULL;
	snprintf(num, sizeof(num), "%ld", size);
	fputs("exec /bin/sh -c", f);
	/* Each value one single-quoted word: the shell sees exactly these
	 * bytes as one argument, whatever they hold. */
	for (size_t i = 0; i < n_words; i++) {
		if (!(q = render_shell_quote(words[i])))
			goto out;
		fprintf(f, " %s", q);
		free(q);
	}
	rc = 0;
out:
	if (fclose(f) != 0 || rc < 0) {
		free(cmd);
		return NULL;
	}
	return cmd;
}

/* After a remote command ended: the line its script tagged with
 * SSH_REASON_TAG, else the last non-empty line of its stderr, into out
 * (control characters shown as '?'); "" when it printed nothing. */
static void remote_reason(ssh_channel ch, char *out, size_t outlen)
{
	char buf[SSH_STDERR_MAX + 1];
	const char *line = NULL, *p, *end;
	size_t len = 0, total = 0, i;
	int got;

	out[0] = '\0';
	/* The reason comes last: when a chatty login shell fills the
	 * buffer, its older half goes.  At most 64 buffers in all, in case
	 * the command is still running. */
	while (total < 64 * SSH_STDERR_MAX &&
	       (got = ssh_channel_read_timeout(ch, buf + len,
					       (uint32_t)(SSH_STDERR_MAX - len),
					       1, 1000)) > 0) {
		len += (size_t)got;
		total += (size_t)got;
		if (len == SSH_STDERR_MAX) {
			memmove(buf, buf + SSH_STDERR_MAX / 2,
				SSH_STDERR_MAX / 2);
			len = SSH_STDERR_MAX / 2;
		}
	}
	buf[len] = '\0';
	for (p = buf; (p = strstr(p, SSH_REASON_TAG)); p++)
		if (p == buf || p[-1] == '\n')
			line = p + strlen(SSH_REASON_TAG);
	if (!line) {
		/* The last non-empty line. */
		end = buf + len;
		while (end > buf && (end[-1] == '\n' || end[-1] == '\r'))
			end--;
		for (line = end; line > buf && line[-1] != '\n'; line--)
			;
	}
	end = strchr(line, '\n');
	if (!end)
		end = buf + len;
	for (i = 0; line + i < end && i + 1 < outlen; i++)
		out[i] = ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
			     ? '?'
			     : line[i];
	out[i] = '\0';
}

/* Uploads this herd's agent into ssh.agent_dir over an exec channel
 * (upload_script): no SFTP server is needed. */
static int upload_agent(struct ssh_node *n, ssh_session s)
{
	struct ssh_priv *priv = n->t->priv;
	char buf[SSH_PUMP_CHUNK], why[512];
	ssh_channel ch = NULL;
	char *cmd = NULL;
	FILE *src = NULL;
	size_t len = 0, got;
	int status, rc = -1;
	bool ready = false;

	if (!(cmd = remote_command(priv, upload_script, priv->agent_size))) {
		transport_report(n->fd, "agent", "%s: out of memory", n->host);
		goto out;
	}
	if (!(src = fopen(n->t->agent_path, "rb"))) {
		transport_report(n->fd, "agent", "%s: cannot read %s: %s",
				 n->host, n->t->agent_path, strerror(errno));
		goto out;
	}
	ch = ssh_channel_new(s);
	if (!ch || ssh_channel_open_session(ch) != SSH_OK ||
	    ssh_channel_request_exec(ch, cmd) != SSH_OK) {
		transport_report(n->fd, "agent",
				 "%s: cannot start the herd-agent upload: %s",
				 n->host, ssh_get_error(s));
		goto out;
	}
	/* "ready" once the directory is checked and the temporary file
	 * made; anything a login shell prints before it is skipped. */
	while (!ready && len < sizeof(buf) - 1) {
		int r = ssh_channel_read_timeout(
		    ch, buf + len, (uint32_t)(sizeof(buf) - 1 - len), 0,
		    SSH_FIRST_BYTES_MS);

		if (r <= 0)
			break;
		len += (size_t)r;
		buf[len] = '\0';
		ready = !strncmp(buf, "ready\n", 6) || strstr(buf, "\nready\n");
	}
	if (ready) {
		while ((got = fread(buf, 1, sizeof(buf), src)) > 0) {
			/* A write fails when the node gave up (disk full):
			 * its status and reason say why. */
			if (ssh_channel_write(ch, buf, (uint32_t)got) !=
			    (int)got)
				break;
		}
	}
	/* Without "ready", EOF ends a script still waiting for bytes. */
	ssh_channel_send_eof(ch);
	while (ssh_channel_read_timeout(ch, buf, sizeof(buf), 0,
					SSH_UPLOAD_END_MS) > 0)
		;
	status = ssh_channel_get_exit_status(ch);
	if (status == 0 && ready) {
		rc = 0;
		goto out;
	}
	remote_reason(ch, why, sizeof(why));
	if (!why[0])
		snprintf(why, sizeof(why),
			 "the upload ended with status %d and no message",
			 status);
	transport_report(n->fd, "agent", "%s: %s", n->host, why);
out:
	if (ch) {
		ssh_channel_close(ch);
		ssh_channel_free(ch);
	}
	if (src)
		fclose(src);
	free(cmd);
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
	char *cmd = NULL, first[SSH_PUMP_CHUNK];
	size_t n_first = 0;
	long secs = spec->ssh.connect_timeout_ms / 1000;
	long usecs = (spec->ssh.connect_timeout_ms % 1000) * 1000;
	bool have_slot = true;
	int status;

	sem_wait(&priv->fanout);
	pthread_mutex_lock(&priv->live_lock);
	if (priv->aborting) {
		pthread_mutex_unlock(&priv->live_lock);
		goto out;
	}
	pthread_mutex_unlock(&priv->live_lock);
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
	pthread_mutex_lock(&priv->live_lock);
	if (!priv->aborting)
		n->sock = ssh_get_fd(s);
	pthread_mutex_unlock(&priv->live_lock);
	if (n->sock < 0)
		goto out; /* herd is ending */
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
	 * login shell on the node): check the cache and start the agent, or
	 * exit 97 when it must be uploaded, then upload it and try once
	 * more. */
	if (!(cmd = remote_command(priv, start_script, -1))) {
		transport_report(n->fd, "agent", "%s: out of memory", n->host);
		goto out;
	}
	for (int tries = 0;; tries++) {
		char why[512];
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
		/* Not ssh_channel_is_eof(): it stays false while stderr
		 * holds unread bytes (the reason line). */
		if (got < 0 || ssh_channel_poll(ch, 0) != SSH_EOF)
			break;
		status = ssh_channel_get_exit_status(ch);
		remote_reason(ch, why, sizeof(why));
		ssh_channel_close(ch);
		ssh_channel_free(ch);
		ch = NULL;
		if (status == SSH_AGENT_REFUSED) {
			transport_report(n->fd, "agent", "%s: %s", n->host,
					 why[0] ? why
						: "refused to start "
						  "herd-agent");
			goto out;
		}
		if (status == SSH_AGENT_MISSING && tries > 0) {
			transport_report(n->fd, "agent",
					 "%s: the uploaded herd-agent does not "
					 "pass its check: %s",
					 n->host, why[0] ? why : "(no reason)");
			goto out;
		}
		if (status != SSH_AGENT_MISSING) {
			/* 126: the shell could not exec a checked file. */
			transport_report(
			    n->fd, "agent",
			    "%s: herd-agent exited at once "
			    "(status %d)%s%s%s",
			    n->host, status, why[0] ? ": " : "", why,
			    status == 126 ? " (is ssh.agent_dir on a noexec "
					    "file system?)"
					  : "");
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
	pthread_mutex_lock(&priv->live_lock);
	n->sock = -1; /* libssh closes it below */
	pthread_mutex_unlock(&priv->live_lock);
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
	free(cmd);
	pthread_mutex_lock(&priv->live_lock);
	if (n->prev)
		n->prev->next = n->next;
	else
		priv->running = n->next;
	if (n->next)
		n->next->prev = n->prev;
	priv->live--;
	pthread_cond_broadcast(&priv->live_cond);
	pthread_mutex_unlock(&priv->live_lock);
	free(n->host);
	free(n);
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
	n->sock = -1;
	pthread_mutex_lock(&priv->live_lock);
	priv->live++;
	n->next = priv->running;
	if (n->next)
		n->next->prev = n;
	priv->running = n;
	pthread_mutex_unlock(&priv->live_lock);
	pthread_attr_init(&attr);
	/* 256 KiB stacks: a thousand nodes stay cheap. */
	pthread_attr_setstacksize(&attr, 256 * 1024);
	if (pthread_create(&tid, &attr, node_thread, n) != 0) {
		pthread_mutex_lock(&priv->live_lock);
		priv->live--;
		priv->running = n->next;
		if (n->next)
			n->next->prev = NULL;
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
	/* The controller closed every socket: a thread in its pump hangs
	 * up at once; one blocked inside libssh is woken by shutting its
	 * session's socket down; one still inside a TCP connect may take
	 * up to ssh.connect_timeout.  Wait a little; a thread still running
	 * after that keeps the shared state, and herd leaves with _exit()
	 * (transport_threads_left()): exit()'s clean-up of OpenSSL under a
	 * thread that is using it crashed herd. */
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 1;
	pthread_mutex_lock(&priv->live_lock);
	priv->aborting = true;
	for (struct ssh_node *n = priv->running; n; n = n->next)
		if (n->sock >= 0)
			shutdown(n->sock, SHUT_RDWR);
	while (priv->live > 0 &&
	       pthread_cond_timedwait(&priv->live_cond, &priv->live_lock,
				      &deadline) == 0)
		;
	live = priv->live;
	pthread_mutex_unlock(&priv->live_lock);
	t->priv = NULL;
	if (live > 0) {
		transport_set_threads_left();
		return;
	}
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
	if (agent_digest(t->agent_path, priv, err) < 0) {
		free(priv);
		return -1;
	}
	priv->agent_dir = t->spec->ssh.agent_dir ? t->spec->ssh.agent_dir
						 : "~/.cache/herd";
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
