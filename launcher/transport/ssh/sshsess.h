/* transport/ssh/sshsess.h — one SSH session to a node, as both `herd keys` and the SSH
 * transport open it: the options (ssh.user, ssh.port, ssh.identity,
 * ~/.ssh/config), the connect with ssh.connect_timeout, the host-key
 * policy and user authentication.  The host-key policy lives here and
 * nowhere else: strict (a key must be pinned in ssh.known_hosts) or
 * accept-new (an unknown key is pinned on first contact); a changed key,
 * or one of another type, is always refused.  There is no "off".
 *
 * Every function here blocks (each takes at most ssh.connect_timeout per
 * round trip) and may run on any thread; one session is used by one
 * thread at a time.  Errors go to a caller-owned struct herd_err as one
 * line without the node's name: the caller puts it in front.
 */
#ifndef HERD_LAUNCHER_SSHSESS_H
#define HERD_LAUNCHER_SSHSESS_H

#include <pthread.h>
#include <stdbool.h>

#include <libssh/libssh.h>

#include "herd/err.h"
#include "herd/spec.h"

/* The known_hosts file used when ssh.known_hosts is not set. */
#define SSHSESS_DEFAULT_KNOWN_HOSTS "~/.ssh/known_hosts"

/* What every session of a job shares.  Set up by sshsess_cfg_init(),
 * read-only after that but for lock. */
struct sshsess_cfg {
	const struct spec *spec; /* borrowed: ssh.* keys */
	char *known_hosts;	 /* ~ expanded */
	char *identity;		 /* ~ expanded, or NULL: libssh's defaults */
	char *ssh_dir;		 /* $HOME/.ssh: libssh's %d */
	bool accept_new;	 /* pin unknown host keys */
	/* Held while known_hosts is read or written: accept-new sessions on
	 * several threads append to the same file. */
	pthread_mutex_t lock;
};

/* What sshsess_host_key() found. */
enum sshsess_key {
	SSHSESS_KEY_KNOWN,  /* pinned already */
	SSHSESS_KEY_PINNED, /* unknown, and now pinned (accept-new) */
};

/* path with a leading "~/" (or a lone "~") replaced by $HOME (the
 * password database's home when HOME is not set or empty).  The one
 * place herd expands "~".  Returns a string the caller frees, or NULL
 * when out of memory or path is NULL. */
char *sshsess_expand_home(const char *path);

/* herd -v: libssh's own log (whatever LogLevel ~/.ssh/config sets)
 * reaches stderr as "herd: libssh: ..." lines; without it, none does.
 * Call before the first session. */
void sshsess_set_verbose(bool verbose);

/* Fills cfg for spec: known_hosts from ssh.known_hosts (default
 * ~/.ssh/known_hosts), identity from the argument ("~/" allowed; NULL:
 * none), accept_new from ssh.host_keys.  Returns 0, or -1 with err. */
int sshsess_cfg_init(struct sshsess_cfg *cfg, const struct spec *spec,
		     const char *identity, struct herd_err *err);
/* sshsess_cfg_init() for a job's sessions: identity from ssh.identity
 * (which must be a readable file: err names it as missing), else the key
 * `herd keys` makes by default when it is there.  Returns 0, or -1 with
 * err. */
int sshsess_cfg_init_job(struct sshsess_cfg *cfg, const struct spec *spec,
			 struct herd_err *err);
/* Frees what sshsess_cfg_init() made; cfg may be all zeros. */
void sshsess_cfg_free(struct sshsess_cfg *cfg);

/* A new session for host with every option set, not connected yet:
 * ~/.ssh/config (libssh's parser), then the job's ssh.user, ssh.port
 * (other than 22) and ssh.known_hosts (other than the default) over it.
 * Returns it (the caller frees it with ssh_free()), or NULL with err. */
ssh_session sshsess_new(const struct sshsess_cfg *cfg, const char *host,
			struct herd_err *err);

/* What sshsess_connect() returns when the failure is how herd is set up
 * (a refused connection: no sshd at ssh.port; a name that does not
 * resolve), not the node's health. */
#define SSHSESS_SETUP (-2)

/* Connects (TCP and key exchange, at most ssh.connect_timeout each).
 * Returns 0, or -1 (a timeout, an unreachable node, a broken key
 * exchange) or SSHSESS_SETUP with err saying why and what to check. */
int sshsess_connect(ssh_session s, struct herd_err *err);

/* Checks the host key of a connected session against cfg->known_hosts
 * (see the policy above).  Returns SSHSESS_KEY_KNOWN or
 * SSHSESS_KEY_PINNED, or -1 with err naming both fingerprints of a
 * changed key and the fix.  When key is not NULL it gets the server's
 * key (the caller frees it with ssh_key_free()), also on failure. */
int sshsess_host_key(struct sshsess_cfg *cfg, ssh_session s,
		     const char *host, ssh_key *key, struct herd_err *err);

/* Asks for the password of user, or NULL when there is none; the string
 * stays owned by whoever returns it. */
typedef const char *(*sshsess_password_fn)(void *arg, const char *user);

/* Logs in: ssh-agent, ~/.ssh/config's and libssh's default keys and
 * cfg->identity, then (when password is not NULL) the password it gives.
 * Returns 0, or -1 with err naming the user and the fix. */
int sshsess_auth(const struct sshsess_cfg *cfg, ssh_session s,
		 sshsess_password_fn password, void *arg,
		 struct herd_err *err);

/* sshsess_new(), sshsess_connect(), sshsess_host_key() in one; pinned
 * (may be NULL) says whether the key was pinned now.  Returns a session
 * ready for sshsess_auth(), or NULL with err. */
ssh_session sshsess_open(struct sshsess_cfg *cfg, const char *host,
			 bool *pinned, ssh_key *key, struct herd_err *err);

/* "SHA256:..." of key, as ssh-keygen -l prints it.  Returns a string the
 * caller frees with free(), or NULL when out of memory or key is NULL. */
char *sshsess_fingerprint(ssh_key key);

/* Whether the first field of a known_hosts line names host in plain
 * text (comma-separated names, maybe "[host]:port"); marker lines
 * (@cert-authority, @revoked) never do. */
bool sshsess_names_host(const char *line, const char *host);

#endif
