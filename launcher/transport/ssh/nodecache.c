/* transport/ssh/nodecache.c — herd's programs in ssh.agent_dir on a node (see
 * transport/ssh/nodecache.h).  The transport (transport/ssh/ssh.c) starts the agent from
 * here; remote.c uploads and runs bin/herd the same way. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libssh/libssh.h>
#include <openssl/evp.h>

#include "herd/render.h"
#include "herd/version.h"
#include "launcher/transport/ssh/nodecache.h"

/* What herd reads of a failed remote command's stderr: the reason line,
 * plus whatever a login shell printed before it. */
#define NODECACHE_STDERR_MAX 8192
/* How long an upload may take once the data is sent (the node hashes
 * and renames the file). */
#define NODECACHE_UPLOAD_END_MS 60000
/* How many directories deep the cache may be on a node, as a string for
 * the scripts: its chain of directories is listed in one argument list,
 * which costs the node's shell O(depth^2) copying (1,500 levels took 39 s
 * of CPU before this bound).  Real caches are under 20. */
#define NODECACHE_DEPTH "64"
/* One read or write of an upload: one SSH channel packet. */
#define NODECACHE_CHUNK (32 * 1024)

/* A program in the cache is named by version and content (the first 48
 * bits of its SHA-256), so that a rebuilt one of the same version is never
 * confused with an old one; the whole digest is checked on the node before
 * every exec. */
int nodecache_bin_init(struct nodecache_bin *b, const char *path,
		       const char *prefix, struct herd_err *err)
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
		if (total > NODECACHE_BIN_MAX) {
			herd_errprintf(err,
				       "%s: larger than %ld MiB; not one of "
				       "herd's programs",
				       path, NODECACHE_BIN_MAX >> 20);
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
		b->sha256[2 * i] = hex[md[i] >> 4];
		b->sha256[2 * i + 1] = hex[md[i] & 15];
	}
	b->sha256[2 * mdlen] = '\0';
	b->size = total;
	b->path = path;
	snprintf(b->name, sizeof(b->name), "%s-%s-%.12s", prefix, HERD_VERSION,
		 b->sha256);
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	if (f)
		fclose(f);
	return rc;
}

/* ---- the cache on the node ----------------------------------------------
 *
 * Two small POSIX sh scripts run through the job user's login shell as
 *   exec /bin/sh -c 'SCRIPT' herd-agent 'AGENT_DIR' 'NAME' 'SHA256' ['SIZE']
 *   exec /bin/sh -c 'SCRIPT' herd-agent 'AGENT_DIR' 'NAME' 'SHA256' 'ENV'
 *	['ARG'...]
 * (upload, start) where every value is one single-quoted word
 * (render_shell_quote()), never text pasted into the script.  They need
 * sh, id, stat, sha256sum, tr, mktemp, head, chmod, mv and mkdir: GNU
 * coreutils, as on every Debian node.  "~" needs an absolute $HOME there:
 * an empty one would turn ~/.cache/herd into /.cache/herd.
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
 * next is what gets executed: the program P/NAME must be a regular file (not
 * a symlink) of the user's with mode 0700 whose SHA-256 is this herd's, and
 * the script then execs that very path.
 *
 * An unsafe directory is refused (exit NODECACHE_REFUSED with one line
 * naming it and the fix): replacing the agent there would not help, the
 * next one could be swapped as well.  A missing agent, or one that fails
 * the file check in a safe directory, is uploaded again (exit
 * NODECACHE_MISSING). */
#define CACHE_CHECK                                                            \
	"d=$1 n=$2 h=$3\n"                                                     \
	"unset CDPATH\n"                                                       \
	"nl='\n'\n"                                                            \
	"u=\n"                                                                 \
	"while read -r k v _; do [ \"$k\" = Uid: ] && u=$v && break; done "    \
	"</proc/self/status\n"                                                 \
	"[ -n \"$u\" ] || u=$(id -u) || exit 1\n"                              \
	/* One line, whatever the paths in it hold: a newline in a name must   \
	 * not start a line that herd would take for the reason. */            \
	"say() { printf \"" NODECACHE_REASON_TAG "%s\\n\" "                    \
	"\"$(printf %s \"$*\" | tr '\\n' '?')\" >&2; }\n"                      \
	"bad() { say \"$*\"; exit 98; }\n"                                     \
	"case $d in \"~\" | \"~/\"*) case $HOME in /*) ;; *) "                 \
	"bad \"ssh.agent_dir $d needs HOME, which is not an absolute path "    \
	"there; set ssh.agent_dir to an absolute path\" ;; esac ;; esac\n"     \
	"case $d in \"~\") d=$HOME ;; \"~/\"*) d=$HOME/${d#\"~/\"} ;; esac\n"  \
	"case $d in /*) ;; *) bad \"ssh.agent_dir $1 is not an absolute path " \
	"there (is HOME set?)\" ;; esac\n"                                     \
	"safe() {\n"                                                           \
	"l=$1 z=$2 g=${3:-$2} x=${4-}\n"                                       \
	"set --\n"                                                             \
	"for q in \"$z\" \"$g\"; do\n"                                         \
	"[ $# -gt 0 ] && [ \"$q\" = \"$z\" ] && break\n"                       \
	"i=0\n"                                                                \
	"while :; do\n"                                                        \
	"set -- \"$@\" \"$q\"\n"                                               \
	"[ \"$q\" = / ] && break\n"                                            \
	"i=$((i + 1)); [ $i -le " NODECACHE_DEPTH " ] || bad \"refusing the "  \
	"herd-agent cache $l: $q is more than " NODECACHE_DEPTH                \
	" directories "                                                        \
	"deep; set ssh.agent_dir to a shorter path\"\n"                        \
	"q=${q%/*}; q=${q:-/}\n"                                               \
	"done\n"                                                               \
	"done\n"                                                               \
	"r=$(LC_ALL=C stat -c \"%u %f\" -- \"$@\" ${x:+\"$x\"} 2>&1) || "      \
	"bad \"cannot check the herd-agent cache $l: ${r##*: }\"\n"            \
	/* X's line, the last, is the caller's (in $s), not a directory's. */  \
	"s=\n"                                                                 \
	"[ -z \"$x\" ] || { s=${r##*\"$nl\"}; r=${r%\"$nl\"*}; }\n"            \
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

/* Starts the cached agent, or exits NODECACHE_MISSING / _REFUSED. */
static const char start_script[] = CACHE_CHECK
    "[ -d \"$d\" ] || exit 97\n"
    "o=$PWD\n"
    "cd -P -- \"$d\" || bad \"cannot enter the herd-agent cache $d\"\n"
    "p=$PWD\n"
    "cd -- \"$o\" || exit 1\n"
    "a=$p/$n\n"
    /* The agent is stat'ed with the directories (one exec of stat, not
     * two: each costs the node about 1.5 ms at every start). */
    "[ -e \"$a\" ] || [ -h \"$a\" ] || exit 97\n"
    "safe \"$p\" \"$p\" \"$d\" \"$a\"\n"
    "f=$((0x${s#* }))\n"
    "[ \"${s% *}\" = \"$u\" ] && [ $((f & 61440)) -eq 32768 ] && "
    "[ $((f & 4095)) -eq 448 ] || "
    "{ say \"$a is not a regular file of uid $u with mode 0700\"; exit 97; }\n"
    "c=$(sha256sum <\"$a\") || exit 97\n"
    "[ \"${c%% *}\" = \"$h\" ] || "
    "{ say \"$a is not this herd-agent (sha256 ${c%% *})\"; exit 97; }\n"
    "e=$4\n"
    "shift 4\n"
    /* Without arguments: only the check. */
    "[ $# -gt 0 ] || exit 0\n"
    "[ -z \"$e\" ] || export \"$e\" || exit 1\n"
    "exec \"$a\" \"$@\"\n";

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

/* The remote command that runs script with the cache's arguments and
 * then extra (each one single-quoted word).  Returns a malloc'd string or
 * NULL. */
static char *remote_command(const char *script, const char *dir,
			    const struct nodecache_bin *b,
			    const char *const *extra, size_t n_extra)
{
	const char *words[] = {script, "herd-agent", dir, b->name, b->sha256};
	size_t n_words = sizeof(words) / sizeof(words[0]);
	char *cmd = NULL, *q;
	size_t len = 0;
	FILE *f = open_memstream(&cmd, &len);
	int rc = -1;

	if (!f)
		return NULL;
	fputs("exec /bin/sh -c", f);
	/* Each value one single-quoted word: the shell sees exactly these
	 * bytes as one argument, whatever they hold. */
	for (size_t i = 0; i < n_words + n_extra; i++) {
		if (!(q = render_shell_quote(i < n_words ? words[i]
							 : extra[i - n_words])))
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

char *nodecache_start_command(const char *dir, const struct nodecache_bin *b,
			      const char *env, const char *const *args,
			      size_t n_args)
{
	const char **extra = calloc(n_args + 1, sizeof(*extra));
	char *cmd;

	if (!extra)
		return NULL;
	extra[0] = env ? env : "";
	for (size_t i = 0; i < n_args; i++)
		extra[i + 1] = args[i];
	cmd = remote_command(start_script, dir, b, extra, n_args + 1);
	free(extra);
	return cmd;
}

void nodecache_reason(ssh_channel ch, char *out, size_t outlen)
{
	char buf[NODECACHE_STDERR_MAX + 1];
	const char *line = NULL, *p, *end;
	size_t len = 0, total = 0, i;
	int got;

	out[0] = '\0';
	/* The reason comes last: when a chatty login shell fills the
	 * buffer, its older half goes.  At most 64 buffers in all, in case
	 * the command is still running. */
	while (total < 64 * NODECACHE_STDERR_MAX &&
	       (got = ssh_channel_read_timeout(
		    ch, buf + len, (uint32_t)(NODECACHE_STDERR_MAX - len), 1,
		    1000)) > 0) {
		len += (size_t)got;
		total += (size_t)got;
		if (len == NODECACHE_STDERR_MAX) {
			memmove(buf, buf + NODECACHE_STDERR_MAX / 2,
				NODECACHE_STDERR_MAX / 2);
			len = NODECACHE_STDERR_MAX / 2;
		}
	}
	buf[len] = '\0';
	for (p = buf; (p = strstr(p, NODECACHE_REASON_TAG)); p++)
		if (p == buf || p[-1] == '\n')
			line = p + strlen(NODECACHE_REASON_TAG);
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

/* Uploads b into dir over an exec channel (upload_script): no SFTP
 * server is needed. */
int nodecache_upload(ssh_session s, const char *dir,
		     const struct nodecache_bin *b, char *why, size_t whylen)
{
	char buf[NODECACHE_CHUNK], num[32];
	const char *size[] = {num};
	ssh_channel ch = NULL;
	char *cmd = NULL;
	FILE *src = NULL;
	size_t len = 0, got;
	int status, rc = -1;
	bool ready = false;

	snprintf(num, sizeof(num), "%ld", b->size);
	if (!(cmd = remote_command(upload_script, dir, b, size, 1))) {
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	if (!(src = fopen(b->path, "rb"))) {
		snprintf(why, whylen, "cannot read %s: %s", b->path,
			 strerror(errno));
		goto out;
	}
	ch = ssh_channel_new(s);
	if (!ch || ssh_channel_open_session(ch) != SSH_OK ||
	    ssh_channel_request_exec(ch, cmd) != SSH_OK) {
		snprintf(why, whylen, "cannot start the upload of %s: %s",
			 b->name, ssh_get_error(s));
		goto out;
	}
	/* "ready" once the directory is checked and the temporary file
	 * made; anything a login shell prints before it is skipped. */
	while (!ready && len < sizeof(buf) - 1) {
		int r = ssh_channel_read_timeout(
		    ch, buf + len, (uint32_t)(sizeof(buf) - 1 - len), 0,
		    NODECACHE_FIRST_BYTES_MS);

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
					NODECACHE_UPLOAD_END_MS) > 0)
		;
	status = ssh_channel_get_exit_status(ch);
	if (status == 0 && ready) {
		rc = 0;
		goto out;
	}
	nodecache_reason(ch, why, whylen);
	if (!why[0])
		snprintf(why, whylen,
			 "the upload ended with status %d and no message",
			 status);
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

/* Runs the start command without arguments (the check alone).  Returns
 * its exit status, or -1 with why when it could not run. */
static int check_once(ssh_session s, const char *dir,
		      const struct nodecache_bin *b, char *why, size_t whylen)
{
	char buf[1024];
	ssh_channel ch = NULL;
	char *cmd = nodecache_start_command(dir, b, NULL, NULL, 0);
	int status = -1;

	why[0] = '\0';
	if (!cmd) {
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	ch = ssh_channel_new(s);
	if (!ch || ssh_channel_open_session(ch) != SSH_OK ||
	    ssh_channel_request_exec(ch, cmd) != SSH_OK) {
		snprintf(why, whylen, "cannot run a command there: %s",
			 ssh_get_error(s));
		goto out;
	}
	/* stdout holds at most what a login shell prints. */
	while (ssh_channel_read_timeout(ch, buf, sizeof(buf), 0,
					NODECACHE_FIRST_BYTES_MS) > 0)
		;
	status = ssh_channel_get_exit_status(ch);
	if (status != 0)
		nodecache_reason(ch, why, whylen);
out:
	if (ch) {
		ssh_channel_close(ch);
		ssh_channel_free(ch);
	}
	free(cmd);
	return status;
}

int nodecache_ensure(ssh_session s, const char *dir,
		     const struct nodecache_bin *b, char *why, size_t whylen)
{
	for (int tries = 0;; tries++) {
		int status = check_once(s, dir, b, why, whylen);

		if (status == 0)
			return 0;
		if (status < 0)
			return -1;
		if (status == NODECACHE_MISSING && tries == 0) {
			if (nodecache_upload(s, dir, b, why, whylen) < 0)
				return -1;
			continue;
		}
		if (status == NODECACHE_MISSING) {
			char again[512];

			snprintf(again, sizeof(again), "%s", why);
			snprintf(why, whylen,
				 "the uploaded %s does not pass its check: %s",
				 b->name, again[0] ? again : "(no reason)");
		} else if (!why[0] || status != NODECACHE_REFUSED) {
			char had[512];

			snprintf(had, sizeof(had), "%s", why);
			snprintf(why, whylen,
				 "checking %s in %s ended with status %d%s%s",
				 b->name, dir, status, had[0] ? ": " : "", had);
		}
		return -1;
	}
}
