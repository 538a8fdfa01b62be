/* spec_check.c — the checks across keys, after the walk: what one key
 * alone cannot say (launch.command is required, health.timeout is longer
 * than health.heartbeat, host names of every source, ...).  Each error
 * points at the node the walk remembered for the key (enum track).
 */
#include <stdlib.h>
#include <string.h>

#include "herd/hostfile.h"
#include "herd/hostlist.h"
#include "herd/render.h"
#include "spec_int.h"

/* ---- checks across keys ------------------------------------------------ */

/* Every host of the expression(s) at n (a scalar, or a list for
 * nodes.hosts) follows the one host name rule of every source
 * (hostfile_host_check); the error points at the expression. */
static int check_host_names(struct ctx *c, yaml_node_t *n, const char *what)
{
	yaml_node_item_t *it;

	if (n->type == YAML_SEQUENCE_NODE) {
		for (it = n->data.sequence.items.start;
		     it < n->data.sequence.items.top; it++)
			if (check_host_names(c, spec_node(c, *it), what) < 0)
				return -1;
		return 0;
	}
	if (n->type != YAML_SCALAR_NODE)
		return 0;
	{
		struct herd_err herr;
		struct hostlist *hl =
		    hostlist_expand((const char *)n->data.scalar.value, &herr);
		int rc = 0;

		if (!hl)
			return spec_perr(
			    c, n->start_mark,
			    "expected a hostlist expression for %s: "
			    "%s",
			    what, herr.text);
		for (size_t i = 0; i < hostlist_count(hl) && !rc; i++)
			if (hostfile_host_check(hostlist_nth(hl, i), what,
						&herr) < 0)
				rc = spec_perr(c, n->start_mark, "%s",
					       herr.text);
		hostlist_free(hl);
		return rc;
	}
}

static int check_hosts(struct ctx *c)
{
	struct spec *s = c->spec;
	struct herd_err herr;
	struct hostlist *hl = NULL;
	yaml_node_t *n;
	size_t count = 0;
	int rc = -1;

	if ((n = c->tracked[TR_SPARES]) && s->nodes.spares) {
		if (!(hl = hostlist_expand(s->nodes.spares, &herr))) {
			spec_perr(c, n->start_mark,
				  "expected a hostlist "
				  "expression for nodes.spares: %s",
				  herr.text);
			goto out;
		}
		hostlist_free(hl);
		hl = NULL;
		if (check_host_names(c, n, "nodes.spares") < 0)
			goto out;
	}
	if (s->nodes.source == SPEC_SOURCE_HOSTS) {
		n = c->tracked[TR_HOSTS];
		if (check_host_names(c, n, "nodes.hosts") < 0)
			goto out;
		if (!(hl = hostlist_expand(s->nodes.hosts, &herr))) {
			spec_perr(c, n->start_mark,
				  "expected a hostlist "
				  "expression for nodes.hosts: %s",
				  herr.text);
			goto out;
		}
		count = hostlist_count(hl);
		if (s->nodes.count > 0 && (size_t)s->nodes.count > count) {
			spec_perr(
			    c, c->tracked[TR_COUNT]->start_mark,
			    "nodes.count (%ld) is more than the %zu hosts of "
			    "nodes.hosts",
			    s->nodes.count, count);
			goto out;
		}
	}
	if (s->nodes.count > 0)
		count = (size_t)s->nodes.count;
	if (s->nodes.min > 0 && count > 0 && (size_t)s->nodes.min > count) {
		spec_perr(
		    c, c->tracked[TR_MIN]->start_mark,
		    "nodes.min (%ld) is more than the %zu nodes of the job "
		    "(%s)",
		    s->nodes.min, count,
		    s->nodes.count > 0 ? "nodes.count" : "nodes.hosts");
		goto out;
	}
	rc = 0;
out:
	hostlist_free(hl);
	return rc;
}

/* launch.command runs as `sh -c COMMAND`: one execve() argument, and
 * herd fills its placeholders with quoted values (render_shell). */
static int check_command(struct ctx *c)
{
	struct spec *s = c->spec;
	/* Stand-ins: only the names matter to the checks. */
	const struct render_var vars[] = {{"name", "x"},
					  {"checkpoint", "x"},
					  {"resume_args", ""},
					  {"attempt", "1"}};
	struct herd_err e;
	size_t len = strlen(s->launch.command);

	if (len + 1 > SPEC_ARG_STRLEN_MAX)
		return spec_perr(
		    c, c->tracked[TR_COMMAND]->start_mark,
		    "launch.command is %zu bytes; Linux passes at "
		    "most %d bytes as one argument (MAX_ARG_STRLEN) "
		    "and every rank would fail to start: put the "
		    "command in a script",
		    len, SPEC_ARG_STRLEN_MAX - 1);
	if (render_shell_check(s->launch.command, vars, 4, "resume_args", 0,
			       &e) < 0)
		return spec_perr(c, c->tracked[TR_COMMAND]->start_mark,
				 "launch.command: %s", e.text);
	if (s->checkpoint.resume_args &&
	    render_shell_check(s->checkpoint.resume_args, vars, 4, NULL, 1,
			       &e) < 0)
		return spec_perr(c, c->tracked[TR_RESUME]->start_mark,
				 "checkpoint.resume_args: %s", e.text);
	return 0;
}

int spec_check_across(struct ctx *c, yaml_node_t *root)
{
	struct spec *s = c->spec;
	yaml_node_t *n;

	if (!s->launch.command) {
		n = c->tracked[TR_LAUNCH] ? c->tracked[TR_LAUNCH] : root;
		return spec_perr(c, n->start_mark,
				 "launch.command is required "
				 "(the command every rank runs)");
	}
	if (check_command(c) < 0)
		return -1;
	if (s->nodes.transport == SPEC_TRANSPORT_LOCAL &&
	    s->nodes.source == SPEC_SOURCE_SLURM)
		return spec_perr(
		    c, c->tracked[TR_TRANSPORT]->start_mark,
		    "nodes.transport: local starts every node's agent "
		    "on this machine, but nodes.slurm takes the nodes "
		    "of a Slurm allocation, where srun starts them: "
		    "use one or the other");
	if (s->health.timeout_ms <= s->health.heartbeat_ms) {
		char t[32], h[32];

		n = c->tracked[TR_TIMEOUT] ? c->tracked[TR_TIMEOUT]
					   : c->tracked[TR_HEARTBEAT];
		spec_duration_format(s->health.timeout_ms, t, sizeof(t));
		spec_duration_format(s->health.heartbeat_ms, h, sizeof(h));
		return spec_perr(c, n->start_mark,
				 "health.timeout (%s) must be "
				 "longer than health.heartbeat (%s)",
				 t, h);
	}
	n = s->checkpoint.pattern	? c->tracked[TR_PATTERN]
	    : s->checkpoint.latest_file ? c->tracked[TR_LATEST]
					: NULL;
	if (!s->checkpoint.dir && n)
		return spec_perr(c, n->start_mark,
				 "checkpoint.dir is required to "
				 "look for checkpoints");
	return check_hosts(c);
}
