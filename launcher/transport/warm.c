/* transport/warm.c — what each agent is told about warm interpreters
 * when it is started (transport.h), so that members, spares and
 * replacement nodes have theirs ready before any LAUNCH. */
#include <stdio.h>
#include <string.h>

#include "launcher/transport/transport.h"

/* Python module names only: identifiers joined by dots (spec.c checks
 * launch.preload; this keeps the agent's argument a plain word). */
static bool module_name(const char *m)
{
	bool start = true;

	if (!*m)
		return false;
	for (; *m; m++) {
		bool alpha = (*m >= 'a' && *m <= 'z') ||
			     (*m >= 'A' && *m <= 'Z') || *m == '_';

		if (*m == '.' && !start) {
			start = true;
			continue;
		}
		if (!alpha && !(!start && *m >= '0' && *m <= '9'))
			return false;
		start = false;
	}
	return !start;
}

/* The command past blanks and a leading "exec" (the agent's parse takes
 * "exec python3 SCRIPT" as "python3 SCRIPT": a warm rank is the
 * interpreter itself). */
static const char *past_exec(const char *cmd)
{
	cmd += strspn(cmd, " \t");
	if (!strncmp(cmd, "exec", 4) && (cmd[4] == ' ' || cmd[4] == '\t'))
		cmd += 4 + strspn(cmd + 4, " \t");
	return cmd;
}

/* The command's interpreter when its first word is an absolute path
 * named python, python3 or python3.N; "" otherwise (the agent's
 * /usr/bin/python3, matched against the command on the node). */
static void command_python(const char *cmd, char *out, size_t len)
{
	size_t n;
	const char *base;

	out[0] = '\0';
	if (!cmd)
		return;
	cmd = past_exec(cmd);
	n = strcspn(cmd, " \t");
	if (cmd[0] != '/' || n >= len)
		return;
	memcpy(out, cmd, n);
	out[n] = '\0';
	base = strrchr(out, '/') + 1;
	if (strncmp(base, "python", 6) ||
	    strspn(base + 6, "0123456789.") != strlen(base + 6) ||
	    strcspn(out, "{}$`'\"\\;&|<>*?[]~") != n)
		out[0] = '\0';
}

/* Does the command start with an interpreter named python, python3 or
 * python3.N (quoted or not, a path or not)?  The agent decides for each
 * rank (agent/warm.c); this only spares nodes whose job runs no Python
 * script the cost of warm interpreters. */
static bool python_command(const char *cmd)
{
	char word[256];
	size_t n = 0;
	const char *base, *v;

	if (!cmd)
		return false;
	cmd = past_exec(cmd);
	for (; *cmd && *cmd != ' ' && *cmd != '\t' && n + 1 < sizeof(word);
	     cmd++)
		if (*cmd != '"' && *cmd != '\'')
			word[n++] = *cmd;
	word[n] = '\0';
	base = strrchr(word, '/') ? strrchr(word, '/') + 1 : word;
	if (strncmp(base, "python", 6))
		return false;
	v = base + 6;
	return !*v || !strcmp(v, "3") ||
	       (!strncmp(v, "3.", 2) && v[2] &&
		strspn(v + 2, "0123456789") == strlen(v + 2));
}

void transport_warm_args(const struct spec *s, struct transport_warm *w)
{
	size_t len = 0;

	memset(w, 0, sizeof(*w));
	if (s->launch.warm == SPEC_WARM_OFF ||
	    !python_command(s->launch.command))
		return;
	if (s->launch.preload.n > 0) {
		for (size_t i = 0; i < s->launch.preload.n; i++) {
			const char *m = s->launch.preload.v[i];
			int k;

			if (!module_name(m))
				continue;
			k = snprintf(w->preload + len, sizeof(w->preload) - len,
				     "%s%s", len ? "," : "", m);
			if (k < 0 || (size_t)k >= sizeof(w->preload) - len) {
				w->preload[len] = '\0';
				break;
			}
			len += (size_t)k;
		}
	} else if (s->launch.mode == SPEC_MODE_TORCH) {
		snprintf(w->preload, sizeof(w->preload),
			 "torch,torch.distributed");
	}
	if (!w->preload[0])
		return;
	w->argv[w->argc++] = "--warm";
	w->argv[w->argc++] = w->preload;
	command_python(s->launch.command, w->python, sizeof(w->python));
	if (w->python[0]) {
		w->argv[w->argc++] = "--warm-python";
		w->argv[w->argc++] = w->python;
	}
	if (s->nodes.slots > 0) {
		snprintf(w->slots, sizeof(w->slots), "%ld", s->nodes.slots);
		w->argv[w->argc++] = "--warm-slots";
		w->argv[w->argc++] = w->slots;
	}
	/* No attempt after the first: a member's slots, once its ranks
	 * took them, would be refilled for nothing (an import of torch
	 * and its memory per slot, beside the ranks' own start).  A
	 * spare's pool is untouched: a rejoin is no new attempt. */
	if (s->restart.max == 0)
		w->argv[w->argc++] = "--warm-once";
}
