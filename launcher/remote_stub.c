/* remote_stub.c — stand-ins for remote.h (the `remote` helper's module,
 * issue 13) so that the views build without it: weak, so that remote.c's
 * definitions replace them when it is linked. */
#include <stdio.h>
#include <stdlib.h>

#include "jobview.h"

__attribute__((weak)) bool remote_entry_is_remote(const struct jobreg_entry *e)
{
	return e->host && !getenv("HERD_PROXIED");
}

__attribute__((weak)) int remote_proxy(const struct jobreg_entry *e, int argc,
				       char **argv)
{
	(void)argc;
	fprintf(stderr,
		"herd: %s: job %s runs on %s; remote jobs: not built into "
		"this herd\n",
		argv[0], e->id, e->host);
	return 1;
}

__attribute__((weak)) int remote_query(const struct jobreg_entry *e, int argc,
				       char **argv, char **out, size_t max,
				       struct herd_err *err)
{
	(void)argc;
	(void)argv;
	(void)max;
	*out = NULL;
	return herd_errprintf(err,
			      "remote jobs: not built into this herd "
			      "(%s on %s)",
			      e->id, e->host);
}
