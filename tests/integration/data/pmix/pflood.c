/* pflood.c — issue 23: every rank publishes CALLS calls of 64 keys each
 * ("k-R-C-K", session range), past the job's limit of 4,096 entries, and
 * goes on when refused; then prints
 *
 *   rank R published P refused F
 *
 * (calls that returned SUCCESS and those that did not).  herd must say
 * the refusals in a few lines, not one per call. */
#include <stdio.h>
#include <stdlib.h>

#include <pmix.h>

#define KEYS 64

int main(int argc, char **argv)
{
	int calls = argc > 1 ? atoi(argv[1]) : 24, published = 0, refused = 0;
	pmix_info_t info[KEYS];
	pmix_proc_t me;
	pmix_status_t rc;

	if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
		fprintf(stderr, "PMIx_Init: %s\n", PMIx_Error_string(rc));
		return 1;
	}
	for (int c = 0; c < calls; c++) {
		for (int k = 0; k < KEYS; k++) {
			char key[PMIX_MAX_KEYLEN + 1];
			int v = k;

			snprintf(key, sizeof(key), "k-%u-%d-%d", me.rank, c, k);
			PMIX_INFO_LOAD(&info[k], key, &v, PMIX_INT);
		}
		rc = PMIx_Publish(info, KEYS);
		if (rc == PMIX_SUCCESS)
			published++;
		else
			refused++;
		for (int k = 0; k < KEYS; k++)
			PMIX_INFO_DESTRUCT(&info[k]);
	}
	printf("rank %u published %d refused %d\n", me.rank, published,
	       refused);
	fflush(stdout);
	rc = PMIx_Finalize(NULL, 0);
	return rc == PMIX_SUCCESS ? 0 : 1;
}
