/* keys.c — key pairs, authorized_keys and known_hosts (see keys.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "herd/file.h"
#include "launcher/transport/ssh/keys.h"
#include "launcher/transport/ssh/sshsess.h"

/* A password typed at the prompt longer than this is cut: no real
 * password is, and the buffer stays on the stack. */
#define KEYS_PASSWORD_MAX 1024

/* Reads a whole regular file of at most KEYS_FILE_MAX bytes into a
 * NUL-terminated buffer.  Returns 0, or -1 with errno set (ENOENT for
 * a missing file, EFBIG for a large one). */
static int read_file(const char *path, char **out, size_t *outlen)
{
	*out = file_read(path, KEYS_FILE_MAX, outlen);
	return *out ? 0 : -1;
}

int keys_write_atomic(const char *path, const void *buf, size_t len,
		      mode_t mode, struct herd_err *err)
{
	char *tmp = NULL;
	const char *p = buf;
	int fd = -1, rc = -1;

	if (asprintf(&tmp, "%s.herd-tmp.XXXXXX", path) < 0) {
		tmp = NULL;
		return herd_errprintf(err, "out of memory");
	}
	fd = mkstemp(tmp); /* 0600 from the start */
	if (fd < 0) {
		herd_errprintf(err, "cannot create %s: %s", tmp,
			       strerror(errno));
		free(tmp);
		return -1;
	}
	if (fchmod(fd, mode) < 0) {
		herd_errprintf(err, "%s: chmod: %s", tmp, strerror(errno));
		goto out;
	}
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, p + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			herd_errprintf(err, "cannot write %s: %s", tmp,
				       strerror(errno));
			goto out;
		}
		off += (size_t)n;
	}
	if (fsync(fd) < 0 || close(fd) < 0) {
		fd = -1;
		herd_errprintf(err, "cannot write %s: %s", tmp,
			       strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		herd_errprintf(err, "cannot rename %s to %s: %s", tmp, path,
			       strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		unlink(tmp);
	free(tmp);
	return rc;
}

/* Makes the directory holding path with mode 0700 when it is missing
 * (only the last level: a missing home is not ours to make). */
static int make_parent_dir(const char *path, struct herd_err *err)
{
	char *dir = strdup(path);
	char *slash;
	int rc = 0;

	if (!dir)
		return herd_errprintf(err, "out of memory");
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			rc = herd_errprintf(err, "cannot create %s: %s", dir,
					    strerror(errno));
	}
	free(dir);
	return rc;
}

/* Makes a new ed25519 pair: the private file first, then the public. */
static int pair_create(struct keys_pair *kp, const char *comment,
		       struct herd_err *err)
{
	ssh_key key = NULL;
	char *priv = NULL, *pub = NULL, *line = NULL;
	int rc = -1;

	if (make_parent_dir(kp->private_path, err) < 0)
		return -1;
	if (ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &key) != SSH_OK) {
		herd_errprintf(err, "cannot generate an ed25519 key");
		goto out;
	}
	if (ssh_pki_export_privkey_base64(key, NULL, NULL, NULL, &priv) !=
		SSH_OK ||
	    ssh_pki_export_pubkey_base64(key, &pub) != SSH_OK) {
		herd_errprintf(err, "cannot export the new key");
		goto out;
	}
	if (asprintf(&line, "%s %s %s\n",
		     ssh_key_type_to_char(ssh_key_type(key)), pub,
		     comment) < 0) {
		line = NULL;
		herd_errprintf(err, "out of memory");
		goto out;
	}
	if (keys_write_atomic(kp->private_path, priv, strlen(priv), 0600, err) <
		0 ||
	    keys_write_atomic(kp->public_path, line, strlen(line), 0644, err) <
		0)
		goto out;
	kp->created = true;
	rc = 0;
out:
	if (priv) {
		explicit_bzero(priv, strlen(priv));
		ssh_string_free_char(priv);
	}
	ssh_string_free_char(pub);
	free(line);
	ssh_key_free(key);
	return rc;
}

int keys_pair_load(const char *private_path, const char *comment,
		   struct keys_pair *kp, struct herd_err *err)
{
	ssh_key key = NULL;
	char *pub = NULL, *line = NULL;
	struct stat st;
	int rc = -1;

	memset(kp, 0, sizeof(*kp));
	kp->private_path = sshsess_expand_home(private_path);
	if (!kp->private_path ||
	    asprintf(&kp->public_path, "%s.pub", kp->private_path) < 0) {
		kp->public_path = NULL;
		herd_errprintf(err, "out of memory");
		goto out;
	}
	if (stat(kp->private_path, &st) < 0) {
		if (errno != ENOENT) {
			herd_errprintf(err, "%s: %s", kp->private_path,
				       strerror(errno));
			goto out;
		}
		if (pair_create(kp, comment, err) < 0)
			goto out;
	}
	if (read_file(kp->private_path, &kp->private_text, &kp->private_len) <
	    0) {
		herd_errprintf(err, "cannot read %s: %s", kp->private_path,
			       strerror(errno));
		goto out;
	}
	if (ssh_pki_import_privkey_base64(kp->private_text, NULL, NULL, NULL,
					  &key) != SSH_OK) {
		herd_errprintf(
		    err,
		    "%s: not a private key herd can read without a "
		    "passphrase (herd keys needs an unencrypted key: "
		    "set ssh.identity to another path to make a new "
		    "one)",
		    kp->private_path);
		goto out;
	}
	if (ssh_pki_export_pubkey_base64(key, &pub) != SSH_OK ||
	    !(kp->type = strdup(ssh_key_type_to_char(ssh_key_type(key)))) ||
	    !(kp->base64 = strdup(pub))) {
		herd_errprintf(err, "%s: cannot export its public key",
			       kp->private_path);
		goto out;
	}
	if (stat(kp->public_path, &st) < 0) {
		if (errno != ENOENT) {
			herd_errprintf(err, "%s: %s", kp->public_path,
				       strerror(errno));
			goto out;
		}
		if (asprintf(&line, "%s %s %s\n", kp->type, kp->base64,
			     comment) < 0) {
			line = NULL;
			herd_errprintf(err, "out of memory");
			goto out;
		}
		if (keys_write_atomic(kp->public_path, line, strlen(line), 0644,
				      err) < 0)
			goto out;
	}
	rc = 0;
out:
	ssh_string_free_char(pub);
	free(line);
	ssh_key_free(key);
	if (rc < 0)
		keys_pair_free(kp);
	return rc;
}

void keys_pair_free(struct keys_pair *kp)
{
	if (!kp)
		return;
	if (kp->private_text) {
		explicit_bzero(kp->private_text, kp->private_len);
		free(kp->private_text);
	}
	free(kp->private_path);
	free(kp->public_path);
	free(kp->type);
	free(kp->base64);
	memset(kp, 0, sizeof(*kp));
}

int keys_text_has_key(const char *text, size_t len, const char *type,
		      const char *base64)
{
	size_t tlen = strlen(type), blen = strlen(base64);
	const char *end = text + len, *p = text;

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *stop = eol ? eol : end;

		/* every word boundary: "type base64" with a blank or the
		 * end of the line after it */
		for (const char *w = p; w < stop; w++) {
			if (w != p && w[-1] != ' ' && w[-1] != '\t')
				continue;
			if ((size_t)(stop - w) < tlen + 1 + blen)
				break;
			if (memcmp(w, type, tlen) ||
			    (w[tlen] != ' ' && w[tlen] != '\t'))
				continue;
			const char *k = w + tlen;

			while (k < stop && (*k == ' ' || *k == '\t'))
				k++;
			if ((size_t)(stop - k) >= blen &&
			    !memcmp(k, base64, blen) &&
			    (k + blen == stop || k[blen] == ' ' ||
			     k[blen] == '\t' || k[blen] == '\r'))
				return 1;
		}
		p = stop + 1;
	}
	return 0;
}

int keys_known_hosts_match(const char *text, size_t len, const char *host,
			   const char *type, const char *base64)
{
	const char *end = text + len, *p = text;
	char line[8192]; /* known_hosts lines are far shorter */
	int no = 0, other = 0;

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *stop = eol ? eol : end;
		size_t n = (size_t)(stop - p);

		no++;
		if (n < sizeof(line)) {
			memcpy(line, p, n);
			line[n] = '\0';
			if (sshsess_names_host(line, host)) {
				if (keys_text_has_key(line, n, type, base64))
					return 1;
				if (!other)
					other = no;
			}
		}
		p = stop + 1;
	}
	return other ? -other : 0;
}

/* Appends the last part of a chunk of stderr to errbuf (keeps the end:
 * the last words of a failing command say why). */
static void keep_stderr(char *errbuf, size_t errlen, const char *chunk,
			size_t n)
{
	size_t have;

	if (!errbuf || errlen < 2)
		return;
	have = strlen(errbuf);
	if (n >= errlen - 1) {
		memcpy(errbuf, chunk + n - (errlen - 1), errlen - 1);
		errbuf[errlen - 1] = '\0';
		return;
	}
	if (have + n >= errlen) {
		size_t drop = have + n - (errlen - 1);

		memmove(errbuf, errbuf + drop, have - drop + 1);
		have -= drop;
	}
	memcpy(errbuf + have, chunk, n);
	errbuf[have + n] = '\0';
}

int keys_remote_run(ssh_session s, const char *cmd, const void *in,
		    size_t inlen, char **out, size_t *outlen, char *errbuf,
		    size_t errlen, struct herd_err *err)
{
	ssh_channel ch = ssh_channel_new(s);
	char chunk[16384];
	char *buf = NULL;
	size_t got = 0, cap = 0;
	bool toobig = false;
	int status = -1;

	if (errbuf && errlen)
		errbuf[0] = '\0';
	if (!ch || ssh_channel_open_session(ch) != SSH_OK ||
	    ssh_channel_request_exec(ch, cmd) != SSH_OK) {
		herd_errprintf(err, "cannot run a command: %s",
			       ssh_get_error(s));
		goto out;
	}
	for (size_t off = 0; in && off < inlen;) {
		size_t part =
		    inlen - off < sizeof(chunk) ? inlen - off : sizeof(chunk);
		int n = ssh_channel_write(ch, (const char *)in + off,
					  (uint32_t)part);

		if (n <= 0) {
			herd_errprintf(err, "cannot send data: %s",
				       ssh_get_error(s));
			goto out;
		}
		off += (size_t)n;
	}
	ssh_channel_send_eof(ch);
	for (;;) {
		int n = ssh_channel_read(ch, chunk, sizeof(chunk), 0);

		if (n == SSH_ERROR) {
			herd_errprintf(err, "reading the command's output: %s",
				       ssh_get_error(s));
			goto out;
		}
		if (n <= 0)
			break;
		if (!out || toobig)
			continue;
		if (got + (size_t)n > KEYS_FILE_MAX) {
			toobig = true;
			continue;
		}
		if (got + (size_t)n + 1 > cap) {
			size_t ncap = (got + (size_t)n + 1) * 2;
			char *nbuf = realloc(buf, ncap);

			if (!nbuf) {
				herd_errprintf(err, "out of memory");
				goto out;
			}
			buf = nbuf;
			cap = ncap;
		}
		memcpy(buf + got, chunk, (size_t)n);
		got += (size_t)n;
	}
	for (;;) {
		int n =
		    ssh_channel_read_nonblocking(ch, chunk, sizeof(chunk), 1);

		if (n <= 0)
			break;
		keep_stderr(errbuf, errlen, chunk, (size_t)n);
	}
	status = ssh_channel_get_exit_status(ch);
	if (status < 0) {
		herd_errprintf(err, "the command ended without a status");
		goto out;
	}
	if (toobig) {
		herd_errprintf(err, "the output is over %d bytes",
			       KEYS_FILE_MAX);
		status = -1;
		goto out;
	}
	if (out) {
		if (!buf && !(buf = malloc(1))) {
			herd_errprintf(err, "out of memory");
			status = -1;
			goto out;
		}
		buf[got] = '\0';
		*out = buf;
		*outlen = got;
		buf = NULL;
	}
out:
	free(buf);
	if (ch) {
		ssh_channel_close(ch);
		ssh_channel_free(ch);
	}
	return status;
}

/* Whether name is safe to put in a shell word unquoted. */
static bool plain_name(const char *name)
{
	if (!*name || name[0] == '.')
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' ||
		      *p == '-'))
			return false;
	return true;
}

/* Trims a trailing newline so stderr fits in one message line. */
static const char *one_line(char *text)
{
	size_t n = strlen(text);

	while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
		text[--n] = '\0';
	return text[0] ? text : "no message";
}

int keys_remote_read(ssh_session s, const char *name, char **out,
		     size_t *outlen, struct herd_err *err)
{
	char cmd[256], why[KEYS_STDERR_MAX];
	int status;

	if (!plain_name(name))
		return herd_errprintf(err, "bad file name '%s'", name);
	snprintf(cmd, sizeof(cmd),
		 "f=\"$HOME/.ssh/%s\"; if [ -e \"$f\" ]; then exec cat "
		 "\"$f\"; fi",
		 name);
	status = keys_remote_run(s, cmd, NULL, 0, out, outlen, why, sizeof(why),
				 err);
	if (status < 0)
		return -1;
	if (status != 0) {
		free(*out);
		*out = NULL;
		return herd_errprintf(err, "cannot read ~/.ssh/%s: %s", name,
				      one_line(why));
	}
	return 0;
}

int keys_remote_write(ssh_session s, const char *name, const void *buf,
		      size_t len, mode_t mode, struct herd_err *err)
{
	char cmd[640], why[KEYS_STDERR_MAX];
	unsigned char rnd[8];
	char suffix[sizeof(rnd) * 2 + 1];
	int status;

	if (!plain_name(name))
		return herd_errprintf(err, "bad file name '%s'", name);
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return herd_errprintf(err, "getrandom: %s", strerror(errno));
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(suffix + 2 * i, 3, "%02x", rnd[i]);
	/* umask 077: the temporary file is private from its first byte;
	 * chmod then gives it the final mode before it replaces the old. */
	snprintf(cmd, sizeof(cmd),
		 "umask 077; d=\"$HOME/.ssh\"; "
		 "mkdir -p -m 700 \"$d\" || exit 1; "
		 "t=\"$d/%s.herd-tmp.%s\"; "
		 "if cat >\"$t\" && chmod %o \"$t\" && mv -f \"$t\" \"$d/%s\"; "
		 "then exit 0; fi; rm -f \"$t\"; exit 1",
		 name, suffix, (unsigned int)mode, name);
	status = keys_remote_run(s, cmd, buf, len, NULL, NULL, why, sizeof(why),
				 err);
	if (status < 0)
		return -1;
	if (status != 0)
		return herd_errprintf(err, "cannot write ~/.ssh/%s: %s", name,
				      one_line(why));
	return 0;
}

char *keys_read_password(const char *prompt)
{
	struct termios old, quiet;
	char buf[KEYS_PASSWORD_MAX];
	size_t n = 0;
	char *pw = NULL;
	int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
	bool restore = false;

	if (fd < 0)
		return NULL;
	if (tcgetattr(fd, &old) < 0)
		goto out;
	quiet = old;
	quiet.c_lflag &= (tcflag_t) ~(ECHO | ECHONL);
	quiet.c_lflag |= ICANON;
	if (write(fd, prompt, strlen(prompt)) < 0 ||
	    tcsetattr(fd, TCSAFLUSH, &quiet) < 0)
		goto out;
	restore = true;
	while (n < sizeof(buf) - 1) {
		char c;
		ssize_t r = read(fd, &c, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || c == '\n' || c == '\r')
			break;
		buf[n++] = c;
	}
	buf[n] = '\0';
	pw = strdup(buf);
out:
	if (restore) {
		tcsetattr(fd, TCSAFLUSH, &old);
		if (write(fd, "\n", 1) < 0) {
			/* the password was read; a lost newline is harmless */
		}
	}
	explicit_bzero(buf, sizeof(buf));
	close(fd);
	return pw;
}
