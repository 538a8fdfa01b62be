/* cmd/keys.c — `herd keys JOB.yaml [--accept-new] [--mesh]`: make or
 * reuse the job's key pair, install its public key on every node through
 * whatever authentication works now, and pin every node's host key.
 *
 * Nodes are handled by a pool of at most ssh.fanout threads; each thread
 * owns the libssh session of the node it works on, opened by transport/ssh/sshsess.c
 * as the SSH transport opens its own (one host-key policy).  One lock
 * guards what they share here: the password prompt and stdout.
 * --mesh runs a second pass, after every node's host key is known, that
 * copies the pair and all host keys to each node.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libssh/libssh.h>

#include "launcher/cli.h"
#include "herd/spec.h"
#include "launcher/transport/ssh/keys.h"
#include "launcher/transport/ssh/sshsess.h"
#include "launcher/hosts/resolve.h"

/* A node could not be reached, refused, or its files not written. */
#define EXIT_NODE 1

/* Worker threads need little stack (libssh plus 16 KiB buffers); small
 * stacks keep a fan-out of hundreds cheap. */
#define KEYS_THREAD_STACK (512 * 1024)

enum node_result {
	NODE_FAILED = 0,
	NODE_INSTALLED,
	NODE_PRESENT,
};

struct keys_node {
	const char *host; /* owned by the resolved lists */
	enum node_result result;
	bool mesh_ok;
	char *hostkey_type; /* the node's host key, for --mesh */
	char *hostkey_base64;
	struct herd_err why; /* set when the node failed */
};

enum keys_pass { PASS_INSTALL, PASS_MESH };

struct keys_job {
	const struct spec *spec;
	struct keys_pair pair;
	char *public_line;	/* "type base64 comment\n" */
	struct sshsess_cfg cfg; /* host keys, identity, options */
	struct keys_node *nodes;
	size_t n_nodes;
	enum keys_pass pass;
	size_t mesh_room; /* --mesh: bytes for every node's line */

	pthread_mutex_t lock; /* everything below, stdout */
	size_t next;	      /* next node a worker takes */
	char *password;	      /* typed once, used for every node */
	bool password_asked;
};

static void keys_usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: herd keys JOB.yaml [--accept-new] [--mesh]\n"
	    "\n"
	    "Makes the job's SSH key pair when it does not exist (ed25519,\n"
	    "at ssh.identity; " KEYS_DEFAULT_IDENTITY " when not set),\n"
	    "adds its public key to ~/.ssh/authorized_keys of ssh.user on\n"
	    "every node and spare (once: a key already there is not added\n"
	    "again; every other line is kept), and pins each node's host\n"
	    "key in ssh.known_hosts (" SSHSESS_DEFAULT_KNOWN_HOSTS " when not\n"
	    "set).\n"
	    "\n"
	    "To reach the nodes it uses whatever works now: ssh-agent,\n"
	    "~/.ssh/config, the default keys, the job's key, and then a\n"
	    "password: $HERD_PASSWORD, else one typed at a prompt on the\n"
	    "terminal (asked once, used for every node).\n"
	    "\n"
	    "  --accept-new  pin host keys not yet in known_hosts (as does\n"
	    "                ssh.host_keys: accept-new); without it an\n"
	    "                unknown host key is refused.  A host key that\n"
	    "                differs from the pinned one is always refused.\n"
	    "  --mesh        also copy the key pair to every node as\n"
	    "                ~/.ssh/" KEYS_MESH_NAME " (and .pub) and pin\n"
	    "                every node's host key in each node's\n"
	    "                ~/.ssh/known_hosts, so nodes reach each other\n"
	    "                by name (ssh -i ~/.ssh/" KEYS_MESH_NAME ")\n"
	    "  -h, --help    show this text\n"
	    "\n"
	    "Prints one line per node and a summary.  Exit status: 0 every\n"
	    "node has the key; 1 some node failed (each is named with the\n"
	    "likely fix); 2 a bad job spec or usage.\n");
}

/* Under job->lock: one line of progress, whole even with many threads. */
static void say(struct keys_job *job, FILE *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(struct keys_job *job, FILE *f, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&job->lock);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fflush(f);
	pthread_mutex_unlock(&job->lock);
}

/* The password for every node: $HERD_PASSWORD, else typed once.  The
 * string stays owned by the job. */
static const char *job_password(struct keys_job *job, const char *user)
{
	const char *env = getenv("HERD_PASSWORD");
	const char *pw;

	if (env)
		return env;
	pthread_mutex_lock(&job->lock);
	if (!job->password_asked) {
		char prompt[256];

		job->password_asked = true;
		snprintf(prompt, sizeof(prompt),
			 "herd: password of %s on the nodes: ", user);
		job->password = keys_read_password(prompt);
	}
	pw = job->password;
	pthread_mutex_unlock(&job->lock);
	return pw;
}

/* The password callback of sshsess_auth(). */
static const char *password_cb(void *arg, const char *user)
{
	return job_password(arg, user);
}

/* Connects to the node, checks its host key (transport/ssh/sshsess.h: the one
 * host-key policy), keeps it in n for --mesh and logs in.  Returns the
 * session, or NULL with n->why. */
static ssh_session node_open(struct keys_job *job, struct keys_node *n)
{
	ssh_key key = NULL;
	char *b64 = NULL, *fp = NULL;
	bool pinned = false;
	ssh_session s = sshsess_open(&job->cfg, n->host, &pinned, &key,
				     &n->why);

	if (!s)
		goto fail;
	if (ssh_pki_export_pubkey_base64(key, &b64) != SSH_OK) {
		herd_errprintf(&n->why, "cannot read its host key");
		goto fail;
	}
	free(n->hostkey_type);
	free(n->hostkey_base64);
	n->hostkey_type = strdup(ssh_key_type_to_char(ssh_key_type(key)));
	n->hostkey_base64 = strdup(b64);
	if (!n->hostkey_type || !n->hostkey_base64) {
		herd_errprintf(&n->why, "out of memory");
		goto fail;
	}
	if (pinned) {
		fp = sshsess_fingerprint(key);
		say(job, stdout, "%s: host key %s pinned in %s\n", n->host,
		    fp ? fp : "?", job->cfg.known_hosts);
	}
	if (sshsess_auth(&job->cfg, s, password_cb, job, &n->why) < 0)
		goto fail;
	goto out;
fail:
	if (s) {
		ssh_disconnect(s);
		ssh_free(s);
		s = NULL;
	}
out:
	ssh_string_free_char(b64);
	free(fp);
	ssh_key_free(key);
	return s;
}

/* text + (a newline when text does not end with one) + add.  Returns a
 * string the caller frees, or NULL when out of memory. */
static char *append_lines(const char *text, size_t len, const char *add,
			  size_t *outlen)
{
	bool nl = len > 0 && text[len - 1] != '\n';
	size_t alen = strlen(add);
	char *out = malloc(len + nl + alen + 1);

	if (!out)
		return NULL;
	memcpy(out, text, len);
	if (nl)
		out[len] = '\n';
	memcpy(out + len + nl, add, alen + 1);
	*outlen = len + nl + alen;
	return out;
}

/* Pass 1: the public key into the node's authorized_keys. */
static void node_install(struct keys_job *job, struct keys_node *n)
{
	ssh_session s = node_open(job, n);
	char *text = NULL, *next = NULL;
	size_t len = 0, nlen = 0;

	if (!s)
		return;
	if (keys_remote_read(s, "authorized_keys", &text, &len, &n->why) < 0)
		goto out;
	if (keys_text_has_key(text, len, job->pair.type, job->pair.base64)) {
		n->result = NODE_PRESENT;
		goto out;
	}
	next = append_lines(text, len, job->public_line, &nlen);
	if (!next) {
		herd_errprintf(&n->why, "out of memory");
		goto out;
	}
	if (keys_remote_write(s, "authorized_keys", next, nlen, 0600, &n->why) <
	    0)
		goto out;
	n->result = NODE_INSTALLED;
out:
	free(text);
	free(next);
	ssh_disconnect(s);
	ssh_free(s);
}

/* Adds to the node's known_hosts every node's host key it lacks.
 * Returns 0, or -1 with n->why (also when a line pins another key). */
static int mesh_known_hosts(struct keys_job *job, struct keys_node *n,
			    ssh_session s)
{
	char *text = NULL, *add = NULL, *next = NULL;
	size_t len = 0, alen = 0, nlen = 0;
	int rc = -1;

	if (keys_remote_read(s, "known_hosts", &text, &len, &n->why) < 0)
		return -1;
	add = calloc(1, job->mesh_room);
	if (!add) {
		herd_errprintf(&n->why, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < job->n_nodes; i++) {
		struct keys_node *m = &job->nodes[i];
		int match;
		int w;

		if (!m->hostkey_base64 || m->result == NODE_FAILED)
			continue;
		match = keys_known_hosts_match(
		    text, len, m->host, m->hostkey_type, m->hostkey_base64);
		if (match < 0) {
			herd_errprintf(&n->why,
				       "~/.ssh/known_hosts on the node pins "
				       "another key for %s at line %d; remove "
				       "that line if %s was reinstalled",
				       m->host, -match, m->host);
			goto out;
		}
		if (match > 0)
			continue;
		if (job->spec->ssh.port != 22)
			w = snprintf(add + alen, job->mesh_room - alen,
				     "[%s]:%d %s %s\n", m->host,
				     job->spec->ssh.port, m->hostkey_type,
				     m->hostkey_base64);
		else
			w = snprintf(add + alen, job->mesh_room - alen,
				     "%s %s %s\n", m->host, m->hostkey_type,
				     m->hostkey_base64);
		if (w < 0 || (size_t)w >= job->mesh_room - alen) {
			herd_errprintf(&n->why, "out of memory");
			goto out;
		}
		alen += (size_t)w;
	}
	if (alen == 0) {
		rc = 0;
		goto out;
	}
	next = append_lines(text, len, add, &nlen);
	if (!next) {
		herd_errprintf(&n->why, "out of memory");
		goto out;
	}
	rc = keys_remote_write(s, "known_hosts", next, nlen, 0644, &n->why);
out:
	free(text);
	free(add);
	free(next);
	return rc;
}

/* Pass 2 (--mesh): the key pair and every host key onto the node. */
static void node_mesh(struct keys_job *job, struct keys_node *n)
{
	ssh_session s;

	if (n->result == NODE_FAILED)
		return;
	s = node_open(job, n);
	if (!s)
		return;
	if (keys_remote_write(s, KEYS_MESH_NAME, job->pair.private_text,
			      job->pair.private_len, 0600, &n->why) < 0 ||
	    keys_remote_write(s, KEYS_MESH_NAME ".pub", job->public_line,
			      strlen(job->public_line), 0644, &n->why) < 0 ||
	    mesh_known_hosts(job, n, s) < 0)
		goto out;
	n->mesh_ok = true;
out:
	ssh_disconnect(s);
	ssh_free(s);
}

static void *worker(void *arg)
{
	struct keys_job *job = arg;

	for (;;) {
		struct keys_node *n;
		size_t i;

		pthread_mutex_lock(&job->lock);
		i = job->next++;
		pthread_mutex_unlock(&job->lock);
		if (i >= job->n_nodes)
			break;
		n = &job->nodes[i];
		if (job->pass == PASS_INSTALL) {
			node_install(job, n);
			if (n->result == NODE_INSTALLED)
				say(job, stdout, "%s: key installed\n",
				    n->host);
			else if (n->result == NODE_PRESENT)
				say(job, stdout, "%s: key already present\n",
				    n->host);
		} else {
			if (n->result == NODE_FAILED)
				continue;
			node_mesh(job, n);
			if (n->mesh_ok)
				say(job, stdout,
				    "%s: mesh key pair and host keys "
				    "installed\n",
				    n->host);
		}
		if (n->why.text[0])
			say(job, stderr, "herd: %s: %s\n", n->host,
			    n->why.text);
	}
	return NULL;
}

/* Runs one pass over every node with at most ssh.fanout threads; when
 * no thread can be started the calling thread does the work. */
static void run_pass(struct keys_job *job, enum keys_pass pass)
{
	size_t want =
	    job->spec->ssh.fanout > 0 ? (size_t)job->spec->ssh.fanout : 64;
	pthread_t *tids;
	pthread_attr_t attr;
	size_t started = 0;

	job->pass = pass;
	job->next = 0;
	if (want > job->n_nodes)
		want = job->n_nodes;
	tids = calloc(want ? want : 1, sizeof(*tids));
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, KEYS_THREAD_STACK);
	for (size_t i = 0; tids && i < want; i++) {
		if (pthread_create(&tids[i], &attr, worker, job) != 0)
			break;
		started++;
	}
	pthread_attr_destroy(&attr);
	if (started == 0)
		worker(job);
	for (size_t i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	free(tids);
}

/* Takes every node and spare of the resolved lists into job->nodes. */
static int job_nodes(struct keys_job *job, const struct resolved *res,
		     struct herd_err *err)
{
	size_t total = res->nodes->count + res->spares->count, k = 0;

	job->nodes = calloc(total, sizeof(*job->nodes));
	if (!job->nodes)
		return herd_errprintf(err, "out of memory");
	for (size_t i = 0; i < res->nodes->count; i++)
		job->nodes[k++].host = res->nodes->entries[i].host;
	for (size_t i = 0; i < res->spares->count; i++)
		job->nodes[k++].host = res->spares->entries[i].host;
	job->n_nodes = total;
	return 0;
}

/* Room for every node's "[host]:port type base64\n" line. */
static void job_mesh_room(struct keys_job *job)
{
	size_t room = 1;

	for (size_t i = 0; i < job->n_nodes; i++) {
		struct keys_node *m = &job->nodes[i];

		if (m->hostkey_base64)
			room += strlen(m->host) + strlen(m->hostkey_type) +
				strlen(m->hostkey_base64) + 16;
	}
	job->mesh_room = room;
}

/* The local key pair: made when missing, reported either way. */
static int job_pair(struct keys_job *job, struct herd_err *err)
{
	const char *identity = job->spec->ssh.identity ? job->spec->ssh.identity
						       : KEYS_DEFAULT_IDENTITY;
	char host[256] = "localhost", comment[320];
	ssh_key key = NULL;
	char *fp = NULL;

	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	snprintf(comment, sizeof(comment), "herd@%s", host);
	if (keys_pair_load(identity, comment, &job->pair, err) < 0)
		return -1;
	if (asprintf(&job->public_line, "%s %s %s\n", job->pair.type,
		     job->pair.base64, comment) < 0) {
		job->public_line = NULL;
		return herd_errprintf(err, "out of memory");
	}
	if (ssh_pki_import_pubkey_base64(job->pair.base64,
					 ssh_key_type_from_name(job->pair.type),
					 &key) == SSH_OK)
		fp = sshsess_fingerprint(key);
	printf("%s key pair %s (%s)\n", job->pair.created ? "created" : "using",
	       job->pair.private_path, fp ? fp : "?");
	fflush(stdout);
	free(fp);
	ssh_key_free(key);
	return 0;
}

/* Prints the summary; returns the exit status. */
static int job_summary(struct keys_job *job, bool mesh)
{
	size_t installed = 0, present = 0, failed = 0;

	for (size_t i = 0; i < job->n_nodes; i++) {
		struct keys_node *n = &job->nodes[i];

		if (n->result == NODE_INSTALLED)
			installed++;
		else if (n->result == NODE_PRESENT)
			present++;
		if (n->result == NODE_FAILED || (mesh && !n->mesh_ok))
			failed++;
	}
	printf("herd keys: %zu node%s: %zu key installed, %zu already "
	       "present, %zu failed\n",
	       job->n_nodes, job->n_nodes == 1 ? "" : "s", installed, present,
	       failed);
	fflush(stdout);
	if (failed == 0)
		return 0;
	fprintf(stderr, "herd: keys: %zu node%s failed:", failed,
		failed == 1 ? "" : "s");
	for (size_t i = 0; i < job->n_nodes; i++) {
		struct keys_node *n = &job->nodes[i];

		if (n->result == NODE_FAILED || (mesh && !n->mesh_ok))
			fprintf(stderr, " %s", n->host);
	}
	fprintf(stderr, " (reasons and fixes above)\n");
	return EXIT_NODE;
}

int cmd_keys(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"accept-new", no_argument, NULL, 'a'},
	    {"mesh", no_argument, NULL, 'm'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct keys_job job = {0};
	struct resolved res = {0};
	struct spec *spec = NULL;
	struct herd_err err;
	const char *file = NULL;
	bool accept_new = false, mesh = false;
	int status = EXIT_SPEC, c;

	herd_err_clear(&err);
	pthread_mutex_init(&job.lock, NULL);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			keys_usage(stdout);
			status = 0;
			goto out;
		case 'a':
			accept_new = true;
			break;
		case 'm':
			mesh = true;
			break;
		default:
			cli_bad_option("keys", cli_bad_word(argc, argv), keys_usage);
			goto out;
		}
	}
	if (argc - optind > 1) {
		cli_error("keys: one job file, not '%s' and '%s'", argv[optind],
			  argv[optind + 1]);
		goto out;
	}
	if (argc - optind < 1) {
		cli_usage("keys", "expected a job file (JOB.yaml)");
		goto out;
	}
	file = argv[optind];
	spec = spec_load(file, &err);
	if (!spec) {
		cli_error("%s", err.text);
		goto out;
	}
	if (resolve_nodes(spec, &res, &err) < 0) {
		cli_error("%s", err.text);
		status =
		    res.fail == RESOLVE_FAIL_RUNTIME ? EXIT_NODE : EXIT_SPEC;
		goto out;
	}
	status = EXIT_NODE;
	job.spec = spec;
	ssh_init();
	if (job_pair(&job, &err) < 0 || job_nodes(&job, &res, &err) < 0 ||
	    sshsess_cfg_init(&job.cfg, spec, job.pair.private_path, &err) <
		0) {
		cli_error("keys: %s", err.text);
		goto out;
	}
	job.cfg.accept_new = job.cfg.accept_new || accept_new;
	run_pass(&job, PASS_INSTALL);
	if (mesh) {
		job_mesh_room(&job);
		run_pass(&job, PASS_MESH);
	}
	status = job_summary(&job, mesh);
out:
	for (size_t i = 0; i < job.n_nodes; i++) {
		free(job.nodes[i].hostkey_type);
		free(job.nodes[i].hostkey_base64);
	}
	free(job.nodes);
	free(job.public_line);
	sshsess_cfg_free(&job.cfg);
	if (job.password) {
		explicit_bzero(job.password, strlen(job.password));
		free(job.password);
	}
	keys_pair_free(&job.pair);
	pthread_mutex_destroy(&job.lock);
	resolve_free(&res);
	spec_free(spec);
	return status;
}
