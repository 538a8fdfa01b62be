/* pquery.c — issue 16: PMIx_Query_info and PMIx_Log from every rank.
 * Prints, per query,
 *   rank R KEY: STATUS [VALUE]
 * with VALUE: the string, the number, or for the process tables
 * "N procs: r@host,r@host,..." (by rank); then
 *   rank R log: STATUS
 * after PMIx_Log of {"herd.test.log": "hello from rank R"}.  Each call
 * runs under a watchdog ("HANG", exit 3, after 60 s). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pmix.h>

static pmix_proc_t me;

static void on_alarm(int sig)
{
	(void)sig;
	if (write(1, "HANG\n", 5) < 0)
		_exit(4);
	_exit(3);
}

/* KEY's value among info (also inside data arrays of infos: some
 * servers wrap each query's results). */
static const pmix_value_t *find(const pmix_info_t *info, size_t n,
				const char *key)
{
	for (size_t i = 0; i < n; i++) {
		const pmix_value_t *v;

		if (PMIX_CHECK_KEY(&info[i], key))
			return &info[i].value;
		if (info[i].value.type == PMIX_DATA_ARRAY &&
		    info[i].value.data.darray &&
		    info[i].value.data.darray->type == PMIX_INFO &&
		    (v = find(info[i].value.data.darray->array,
			      info[i].value.data.darray->size, key)))
			return v;
	}
	return NULL;
}

static int by_rank(const void *a, const void *b)
{
	const pmix_proc_info_t *x = a, *y = b;

	return (x->proc.rank > y->proc.rank) - (x->proc.rank < y->proc.rank);
}

static void show(const char *key, const pmix_value_t *v)
{
	printf("rank %u %s: ", me.rank, key);
	if (!v) {
		printf("SUCCESS (no value)\n");
		return;
	}
	printf("SUCCESS ");
	switch (v->type) {
	case PMIX_STRING:
		printf("\"%s\"\n", v->data.string);
		break;
	case PMIX_UINT32:
		printf("%u\n", v->data.uint32);
		break;
	case PMIX_SIZE:
		printf("%zu\n", v->data.size);
		break;
	case PMIX_DATA_ARRAY: {
		pmix_data_array_t *d = v->data.darray;

		if (d->type == PMIX_PROC_INFO) {
			pmix_proc_info_t *pi = d->array;

			qsort(pi, d->size, sizeof(*pi), by_rank);
			printf("%zu procs:", d->size);
			for (size_t i = 0; i < d->size; i++)
				printf("%s%u@%s", i ? "," : " ",
				       pi[i].proc.rank, pi[i].hostname);
			printf("\n");
		} else {
			printf("array of %zu\n", d->size);
		}
		break;
	}
	default:
		printf("type %d\n", (int)v->type);
	}
}

static void query(const char *k1, const char *k2)
{
	pmix_info_t *res = NULL;
	pmix_query_t q;
	pmix_status_t rc;
	size_t nres = 0;

	PMIX_QUERY_CONSTRUCT(&q);
	PMIX_ARGV_APPEND(rc, q.keys, k1);
	if (k2)
		PMIX_ARGV_APPEND(rc, q.keys, k2);
	alarm(60);
	rc = PMIx_Query_info(&q, 1, &res, &nres);
	alarm(0);
	if (rc == PMIX_SUCCESS || rc == PMIX_QUERY_PARTIAL_SUCCESS) {
		if (k2)
			printf("rank %u %s+%s: %s\n", me.rank, k1, k2,
			       PMIx_Error_string(rc));
		show(k1, find(res, nres, k1));
	} else {
		printf("rank %u %s%s%s: %s\n", me.rank, k1, k2 ? "+" : "",
		       k2 ? k2 : "", PMIx_Error_string(rc));
	}
	if (res)
		PMIX_INFO_FREE(res, nres);
	PMIX_QUERY_DESTRUCT(&q);
}

int main(void)
{
	char msg[64];
	pmix_info_t li;
	pmix_status_t rc;

	signal(SIGALRM, on_alarm);
	alarm(60);
	if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
		printf("PMIx_Init: %s\n", PMIx_Error_string(rc));
		return 1;
	}
	alarm(0);
	query(PMIX_QUERY_NAMESPACES, NULL);
	query(PMIX_QUERY_NAMESPACE_INFO, NULL);
	query(PMIX_JOB_SIZE, NULL);
	query(PMIX_QUERY_PROC_TABLE, NULL);
	query(PMIX_QUERY_LOCAL_PROC_TABLE, NULL);
	query(PMIX_QUERY_NUM_PSETS, NULL);
	query(PMIX_QUERY_SPAWN_SUPPORT, NULL);
	query(PMIX_QUERY_DEBUG_SUPPORT, NULL);
	query("herd.no.such.key", NULL);
	query(PMIX_QUERY_NAMESPACES, "herd.no.such.key");

	snprintf(msg, sizeof(msg), "hello from rank %u", me.rank);
	PMIX_INFO_LOAD(&li, "herd.test.log", msg, PMIX_STRING);
	alarm(60);
	rc = PMIx_Log(&li, 1, NULL, 0);
	alarm(0);
	PMIX_INFO_DESTRUCT(&li);
	printf("rank %u log: %s\n", me.rank, PMIx_Error_string(rc));
	fflush(stdout);
	alarm(60);
	rc = PMIx_Finalize(NULL, 0);
	return rc == PMIX_SUCCESS ? 0 : 1;
}
