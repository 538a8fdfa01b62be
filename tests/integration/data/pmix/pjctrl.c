/* pjctrl.c — issue 23 item 15 (OpenPMIx's jctrl example): PMIx_Job_control.
 * Usage (every rank runs the same; ranks 0 and 1 share a node, 2 is on
 * another):
 *
 *   pjctrl declare  every rank declares itself preemptible with its
 *                   checkpoint methods (SIGUSR2, event), as jctrl does:
 *                   "rank R declare: STATUS"
 *   pjctrl ckpt     every rank waits for PMIX_JCTRL_CHECKPOINT; rank 0
 *                   asks a checkpoint "ck1" of the job ("rank 0
 *                   checkpoint: STATUS"); each rank prints "rank R
 *                   checkpoint event: ID"
 *   pjctrl signal   rank 0 sends SIGUSR1 to rank 1 ("rank 0 signal:
 *                   STATUS"; rank 1 prints "rank 1 got SIGUSR1"), then
 *                   asks the same of rank 2, on the other node ("rank 0
 *                   remote signal:"; rank 2 prints "rank 2 got SIGUSR1"),
 *                   of a process of another namespace ("rank 0 foreign:")
 *                   and a pause of rank 1 ("rank 0 pause:")
 *   pjctrl kill     rank 0 kills rank 1 (PMIX_JOB_CTRL_KILL), which
 *                   sleeps: "rank 0 kill: STATUS"
 *   pjctrl term     rank 0 terminates rank 1 (PMIX_JOB_CTRL_TERMINATE):
 *                   rank 1 prints "rank 1 got SIGTERM" and exits 0
 *   pjctrl rterm    the same of rank 3, on the other node
 *
 * Each rank then prints "rank R done" and finalizes.  Every wait runs
 * under a watchdog ("HANG", exit 3, after 60 s). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pmix.h>

static pmix_proc_t me;
static volatile sig_atomic_t got_sig;
static volatile int ckpt_seen;
static char ckpt_id[64] = "?";

static void on_alarm(int sig)
{
	static const char m[] = "HANG\n";

	(void)sig;
	(void)!write(1, m, sizeof(m) - 1);
	_exit(3);
}

static void on_sig(int sig)
{
	got_sig = sig;
}

static void on_ckpt(size_t id, pmix_status_t status, const pmix_proc_t *src,
		    pmix_info_t info[], size_t ninfo, pmix_info_t results[],
		    size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc,
		    void *cbdata)
{
	(void)id;
	(void)status;
	(void)results;
	(void)nresults;
	for (size_t i = 0; i < ninfo; i++)
		if (PMIX_CHECK_KEY(&info[i], PMIX_JOB_CTRL_CHECKPOINT) &&
		    info[i].value.type == PMIX_STRING)
			snprintf(ckpt_id, sizeof(ckpt_id), "%s",
				 info[i].value.data.string);
	(void)src;
	__atomic_store_n(&ckpt_seen, 1, __ATOMIC_SEQ_CST);
	if (cbfunc)
		cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void say(const char *what, pmix_status_t rc)
{
	printf("rank %u %s: %s\n", me.rank, what, PMIx_Error_string(rc));
	fflush(stdout);
}

/* PMIx_Job_control of one directive to target (NULL: the job). */
static pmix_status_t jc(const pmix_proc_t *target, const char *key,
			const void *val, pmix_data_type_t type)
{
	pmix_info_t d;
	pmix_status_t rc;

	PMIX_INFO_LOAD(&d, key, val, type);
	alarm(60);
	rc = PMIx_Job_control(target, target ? 1 : 0, &d, 1, NULL, 0);
	alarm(0);
	PMIX_INFO_DESTRUCT(&d);
	return rc;
}

static void fence(void)
{
	alarm(60);
	PMIx_Fence(NULL, 0, NULL, 0);
	alarm(0);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	pmix_proc_t t;
	pmix_status_t rc;
	bool yes = true;

	signal(SIGALRM, on_alarm);
	alarm(60);
	if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
		fprintf(stderr, "PMIx_Init: %s\n", PMIx_Error_string(rc));
		return 1;
	}
	alarm(0);
	PMIX_PROC_LOAD(&t, me.nspace, 1);
	if (!strcmp(mode, "declare")) {
		pmix_info_t info[2], *m;
		pmix_data_array_t *d;
		int sig = SIGUSR2;
		pmix_status_t ev = PMIX_JCTRL_CHECKPOINT;

		PMIX_INFO_LOAD(&info[0], PMIX_JOB_CTRL_PREEMPTIBLE, &yes,
			       PMIX_BOOL);
		PMIX_DATA_ARRAY_CREATE(d, 2, PMIX_INFO);
		m = d->array;
		PMIX_INFO_LOAD(&m[0], PMIX_JOB_CTRL_CHECKPOINT_SIGNAL, &sig,
			       PMIX_INT);
		PMIX_INFO_LOAD(&m[1], PMIX_JOB_CTRL_CHECKPOINT_EVENT, &ev,
			       PMIX_STATUS);
		PMIX_INFO_LOAD(&info[1], PMIX_JOB_CTRL_CHECKPOINT_METHOD, d,
			       PMIX_DATA_ARRAY);
		PMIX_DATA_ARRAY_FREE(d);
		alarm(60);
		rc = PMIx_Job_control(NULL, 0, info, 2, NULL, 0);
		alarm(0);
		PMIX_INFO_DESTRUCT(&info[0]);
		PMIX_INFO_DESTRUCT(&info[1]);
		say("declare", rc);
	} else if (!strcmp(mode, "ckpt")) {
		pmix_status_t code = PMIX_JCTRL_CHECKPOINT;

		alarm(60);
		rc = PMIx_Register_event_handler(&code, 1, NULL, 0, on_ckpt,
						 NULL, NULL);
		alarm(0);
		fence();
		if (me.rank == 0)
			say("checkpoint", jc(NULL, PMIX_JOB_CTRL_CHECKPOINT,
					     "ck1", PMIX_STRING));
		alarm(60);
		while (!__atomic_load_n(&ckpt_seen, __ATOMIC_SEQ_CST))
			usleep(10000);
		alarm(0);
		printf("rank %u checkpoint event: %s\n", me.rank, ckpt_id);
		fflush(stdout);
		fence();
	} else if (!strcmp(mode, "signal")) {
		int sig = SIGUSR1;
		pmix_proc_t other;

		signal(SIGUSR1, on_sig);
		fence();
		if (me.rank == 0) {
			say("signal", jc(&t, PMIX_JOB_CTRL_SIGNAL, &sig, PMIX_INT));
			PMIX_PROC_LOAD(&other, me.nspace, 2);
			say("remote signal",
			    jc(&other, PMIX_JOB_CTRL_SIGNAL, &sig, PMIX_INT));
			PMIX_PROC_LOAD(&other, "herd.no.such.ns", 0);
			say("foreign",
			    jc(&other, PMIX_JOB_CTRL_SIGNAL, &sig, PMIX_INT));
			say("pause",
			    jc(&t, PMIX_JOB_CTRL_PAUSE, &yes, PMIX_BOOL));
		}
		if (me.rank == 1 || me.rank == 2) {
			alarm(60);
			while (!got_sig)
				usleep(10000);
			alarm(0);
			printf("rank %u got SIGUSR%d\n", me.rank,
			       got_sig == SIGUSR1 ? 1 : 2);
		}
		fence();
	} else if (!strcmp(mode, "kill") || !strcmp(mode, "term") ||
		   !strcmp(mode, "rterm")) {
		bool kill = !strcmp(mode, "kill");
		/* rterm: rank 3, on the other node. */
		pmix_rank_t target = !strcmp(mode, "rterm") ? 3 : 1;
		pmix_proc_t tp;

		PMIX_PROC_LOAD(&tp, me.nspace, target);
		signal(SIGTERM, on_sig);
		fence();
		if (me.rank == 0)
			say(mode, jc(&tp,
				     kill ? PMIX_JOB_CTRL_KILL
					  : PMIX_JOB_CTRL_TERMINATE,
				     &yes, PMIX_BOOL));
		if (me.rank == target) {
			alarm(60);
			while (!got_sig)
				usleep(10000);
			alarm(0);
			printf("rank %u got SIGTERM\n", me.rank);
			fflush(stdout);
			return 0;
		}
	}
	printf("rank %u done\n", me.rank);
	fflush(stdout);
	alarm(60);
	rc = PMIx_Finalize(NULL, 0);
	return rc == PMIX_SUCCESS ? 0 : 1;
}
