/* lib/job/hostname.c — the one rule for a host name, whatever its source
 * (hostfile, nodes.hosts, the agent's --node).  See herd/hostfile.h.
 *
 * Its own file so that the agent, which checks --node, links neither the
 * hostfile readers nor, through them, libslurm's hostlist: an agent needs
 * no Slurm library on a node outside Slurm.
 */
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "herd/hostfile.h"

/* Names quoted in error messages are cut to this many bytes so that a
 * message always fits struct herd_err (as in hostfile.c). */
#define QUOTE_MAX 64

/* The digits that end a name are a number to Slurm's hostlists, which
 * hold it in an unsigned long and saturate beyond: a name ending in a
 * larger number could not be written as a hostlist nor read back. */
static int number_check(const char *host, size_t n, const char *where,
			struct herd_err *err)
{
	size_t d = n;
	unsigned long v = 0;

	while (d > 0 && host[d - 1] >= '0' && host[d - 1] <= '9')
		d--;
	for (size_t i = d; i < n; i++) {
		unsigned dig = (unsigned)(host[i] - '0');

		if (v > (ULONG_MAX - 1 - dig) / 10)
			return herd_errprintf(
			    err,
			    "%s: bad host name '%.*s' (the "
			    "number it ends in is larger than "
			    "%lu, which Slurm cannot hold)",
			    where, QUOTE_MAX, host, ULONG_MAX - 1);
		v = v * 10 + dig;
	}
	return 0;
}

int hostfile_host_check(const char *host, const char *where,
			struct herd_err *err)
{
	size_t n = strlen(host);

	if (n == 0)
		return herd_errprintf(err, "%s: expected a host name", where);
	if (n > HOSTFILE_HOST_MAX)
		return herd_errprintf(err,
				      "%s: host name '%.*s...' is longer "
				      "than %d characters",
				      where, QUOTE_MAX, host,
				      HOSTFILE_HOST_MAX);
	if (host[0] == '-' || host[0] == '.' || host[0] == '_')
		return herd_errprintf(err,
				      "%s: bad host name '%.*s' (it must start "
				      "with a letter or digit)",
				      where, QUOTE_MAX, host);
	if (strchr(host, '='))
		return herd_errprintf(err,
				      "%s: expected a host name first, "
				      "found '%.*s'",
				      where, QUOTE_MAX, host);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)host[i];
		int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			    (c >= '0' && c <= '9');

		/* The first character: never '-' (it would read as an
		 * option of ssh, srun or a user's script) nor '.'/'_'. */
		if (alnum || c == '.' || c == '-' || c == '_')
			continue;
		/* Quote the name safely: control bytes as '?'. */
		char shown[QUOTE_MAX + 1];
		size_t k;

		for (k = 0; k < QUOTE_MAX && host[k]; k++)
			shown[k] =
			    ((unsigned char)host[k] < 0x20 || host[k] == 0x7f)
				? '?'
				: host[k];
		shown[k] = '\0';
		return herd_errprintf(err,
				      "%s: bad host name '%s' (character %zu: "
				      "expected letters, digits, '.', '-' or "
				      "'_'; ASCII only)",
				      where, shown, i + 1);
	}
	return number_check(host, n, where, err);
}
