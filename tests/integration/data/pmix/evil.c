/* evil.c — what another local user tries against a job's PMIx server
 * (t0907): PMIx_Init as the rank named by PMIX_NAMESPACE / PMIX_RANK,
 * then PMIx_Spawn of "touch FILE".  Prints "init: STATUS" and, when in,
 * "spawn: STATUS". */
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	char *targv[] = {"touch", argc > 1 ? argv[1] : "pwned", NULL};
	char nsp[PMIX_MAX_NSLEN + 1];
	pmix_app_t app;
	pmix_proc_t me;
	pmix_status_t rc = PMIx_Init(&me, NULL, 0);

	printf("init: %s\n", PMIx_Error_string(rc));
	fflush(stdout);
	if (rc != PMIX_SUCCESS)
		return 1;
	PMIX_APP_CONSTRUCT(&app);
	app.cmd = strdup("/usr/bin/touch");
	app.argv = targv;
	app.maxprocs = 1;
	rc = PMIx_Spawn(NULL, 0, &app, 1, nsp);
	printf("spawn: %s\n", PMIx_Error_string(rc));
	fflush(stdout);
	app.argv = NULL;
	PMIX_APP_DESTRUCT(&app);
	PMIx_Finalize(NULL, 0);
	return 0;
}
