/* sbatch_slurm.c — herd sbatch's job through libslurm: submitted,
 * refused in Slurm's words, followed to its end; see sbatch.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "launcher/transport/slurm/sbatch_int.h"

/* Only what <slurm/slurm.h> declares is used: libslurm's private
 * helpers (its time parser, its state names, its log options) have no
 * stable layout, and a declaration of our own would compile against a
 * libslurm that lays them out otherwise and corrupt memory there. */

/* Slurm's words for the base job states (what squeue prints), indexed by
 * the header's enum job_states. */
static const char *const job_state_names[JOB_END] = {
    [JOB_PENDING] = "PENDING",	   [JOB_RUNNING] = "RUNNING",
    [JOB_SUSPENDED] = "SUSPENDED", [JOB_COMPLETE] = "COMPLETED",
    [JOB_CANCELLED] = "CANCELLED", [JOB_FAILED] = "FAILED",
    [JOB_TIMEOUT] = "TIMEOUT",	   [JOB_NODE_FAIL] = "NODE_FAIL",
    [JOB_PREEMPTED] = "PREEMPTED", [JOB_BOOT_FAIL] = "BOOT_FAIL",
    [JOB_DEADLINE] = "DEADLINE",   [JOB_OOM] = "OUT_OF_MEMORY",
};

static const char *job_state_name(uint32_t state)
{
	uint32_t base = state & JOB_STATE_BASE;

	return base < JOB_END && job_state_names[base] ? job_state_names[base]
						       : "UNKNOWN";
}

/* libslurm prints its own messages ("error: ...") on stderr, at a level
 * only its private log options change.  herd reports each failure once,
 * in its own words, so each libslurm call that may log runs between
 * quiet_begin() and quiet_end(), with fd 2 on /dev/null (herd sbatch has
 * one thread: nothing of herd's is written meanwhile).  Returns the saved
 * stderr, or -1 (then nothing was changed). */
static int quiet_begin(void)
{
	int saved, null;

	fflush(stderr);
	null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null < 0)
		return -1;
	saved = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
	if (saved >= 0 && dup2(null, STDERR_FILENO) < 0) {
		close(saved);
		saved = -1;
	}
	close(null);
	return saved;
}

/* Puts stderr back (saved: quiet_begin's); keeps errno, which holds
 * libslurm's answer. */
static void quiet_end(int saved)
{
	int e = errno;

	if (saved >= 0) {
		fflush(stderr);
		dup2(saved, STDERR_FILENO);
		close(saved);
	}
	errno = e;
}

#ifdef __SANITIZE_ADDRESS__
/* libslurm 22.05 leaks the answer to a refused submission
 * (slurm_submit_batch_job drops RESPONSE_SLURM_RC's data without freeing
 * it): not ours to free, so LeakSanitizer, which reads this hook in
 * sanitizer builds, is told to let it be. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:slurm_submit_batch_job\n";
}

/* Without this, a suppressed leak adds a table to herd's one-line
 * refusal on stderr. */
const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
	return "print_suppressions=0";
}
#endif

void sbatch_slurm_init(void)
{
	int q = quiet_begin();

	slurm_init(NULL);
	quiet_end(q);
}

void sbatch_slurm_fini(void)
{
	int q = quiet_begin();

	slurm_fini();
	quiet_end(q);
}

/* slurm_load_job() of job_id, quietly.  Returns its result (errno: its
 * error); *msg is the caller's to free on success. */
static int load_job(uint32_t job_id, job_info_msg_t **msg)
{
	int q = quiet_begin();
	int rc = slurm_load_job(msg, job_id, SHOW_ALL);

	quiet_end(q);
	return rc;
}

/* What a refusal was about, in the spec's terms ("" when Slurm's words
 * say it all). */
static void refusal_subject(const struct sbatch *sb, int e, char *buf,
			    size_t size)
{
	const char *part = sb->partition ? sb->partition : "";

	buf[0] = '\0';
	switch (e) {
	case ESLURM_INVALID_PARTITION_NAME:
	case ESLURM_PARTITION_NOT_AVAIL:
		snprintf(buf, size, "partition \"%s\"", part);
		break;
	case ESLURM_INVALID_NODE_COUNT:
	case ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE:
	case ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE:
	case ESLURM_TOO_MANY_REQUESTED_CPUS:
		snprintf(buf, size, "nodes %u in %s%s%s", sb->nodes,
			 *part ? "partition \"" : "the default partition", part,
			 *part ? "\"" : "");
		break;
	case ESLURM_INVALID_ACCOUNT:
		snprintf(buf, size, "account \"%s\"",
			 sb->account ? sb->account : "");
		break;
	case ESLURM_INVALID_QOS:
		snprintf(buf, size, "qos \"%s\"", sb->qos ? sb->qos : "");
		break;
	case ESLURM_INVALID_TIME_LIMIT:
		snprintf(buf, size, "time \"%s\"", sb->time ? sb->time : "");
		break;
	case ESLURM_INVALID_FEATURE:
		snprintf(buf, size, "constraint \"%s\"",
			 sb->features ? sb->features : "");
		break;
	case ESLURM_INVALID_GRES:
		snprintf(buf, size, "gres \"%s\"",
			 sb->tres_per_node ? sb->tres_per_node : "");
		break;
	case ESLURM_INVALID_NODE_NAME:
		snprintf(buf, size, "nodelist \"%s\", exclude \"%s\"",
			 sb->req_nodes ? sb->req_nodes : "",
			 sb->exc_nodes ? sb->exc_nodes : "");
		break;
	default:
		break;
	}
}

/* The Slurm error behind a pending reason that no time will clear: with
 * EnforcePartLimits=NO slurmctld takes a job its partition can never run
 * (more nodes than it has, over its MaxNodes or MaxTime) and leaves it
 * pending for good; it decides that while taking the job.  0: none. */
static int never_starts(uint32_t job_id)
{
	job_info_msg_t *msg = NULL;
	int e = 0;

	if (load_job(job_id, &msg) != SLURM_SUCCESS)
		return 0;
	if (msg->record_count >= 1 &&
	    (msg->job_array[0].job_state & JOB_STATE_BASE) == JOB_PENDING) {
		switch (msg->job_array[0].state_reason) {
		case WAIT_PART_CONFIG:
			e = ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE;
			break;
		case WAIT_PART_NODE_LIMIT:
			e = ESLURM_INVALID_NODE_COUNT;
			break;
		case WAIT_PART_TIME_LIMIT:
			e = ESLURM_INVALID_TIME_LIMIT;
			break;
		default:
			break;
		}
	}
	slurm_free_job_info_msg(msg);
	return e;
}

int sbatch_submit(const struct sbatch *sb, const char *script, char *const *env,
		  uint32_t *job_id, struct herd_err *err)
{
	job_desc_msg_t desc;
	submit_response_msg_t *resp = NULL;
	char subject[512];
	uint32_t n_env = 0;
	int e, q, rc;

	while (env[n_env])
		n_env++;
	slurm_init_job_desc_msg(&desc);
	/* libslurm only reads these; the casts drop const for its API. */
	desc.script = (char *)script;
	desc.name = sb->name;
	desc.work_dir = sb->workdir;
	desc.environment = (char **)env;
	desc.env_size = n_env;
	desc.user_id = getuid();
	desc.group_id = getgid();
	desc.partition = (char *)sb->partition;
	desc.account = (char *)sb->account;
	desc.qos = (char *)sb->qos;
	desc.time_limit = sb->time_limit;
	desc.min_nodes = sb->nodes;
	desc.max_nodes = sb->nodes;
	desc.tres_per_node = sb->tres_per_node;
	if (sb->exclusive)
		desc.shared = JOB_SHARED_NONE;
	if (sb->requeue)
		desc.requeue = 1;
	desc.std_out = sb->output;
	desc.features = sb->features;
	desc.exc_nodes = sb->exc_nodes;
	desc.req_nodes = sb->req_nodes;
	desc.reservation = sb->reservation;
	desc.pn_min_memory = sb->memory;
	desc.cpus_per_task = sb->cpus_per_task;
	q = quiet_begin();
	rc = slurm_submit_batch_job(&desc, &resp);
	quiet_end(q);
	if (rc != SLURM_SUCCESS) {
		e = slurm_get_errno();
		/* Below 2000: system and communication errors; 5000s: socket
		 * errors.  The rest is slurmctld saying no. */
		if (e < ESLURM_INVALID_PARTITION_NAME ||
		    (e >= SLURM_PROTOCOL_SOCKET_IMPL_ZERO_RECV_LENGTH &&
		     e < SLURM_PROTOCOL_SOCKET_IMPL_ZERO_RECV_LENGTH + 1000))
			return herd_errprintf(err, "cannot submit the job: %s",
					      slurm_strerror(e));
		refusal_subject(sb, e, subject, sizeof(subject));
		return herd_errprintf(err, "Slurm refused the job: %s%s%s%s",
				      slurm_strerror(e), *subject ? " (" : "",
				      subject, *subject ? ")" : "");
	}
	*job_id = resp->job_id;
	slurm_free_submit_response_response_msg(resp);
	e = never_starts(*job_id);
	if (e) {
		refusal_subject(sb, e, subject, sizeof(subject));
		q = quiet_begin();
		slurm_kill_job(*job_id, SIGKILL, 0);
		quiet_end(q);
		return herd_errprintf(err,
				      "Slurm refused the job: %s (%s%sit could "
				      "never start: job %u cancelled)",
				      slurm_strerror(e), subject,
				      *subject ? "; " : "", *job_id);
	}
	return 0;
}

/* Sleeps ms milliseconds, whole even when a signal interrupts. */
static void pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Base states after SUSPENDED are ends; a job still completing, or being
 * requeued, has not ended yet. */
static bool job_ended(uint32_t state)
{
	if ((state & JOB_STATE_BASE) <= JOB_SUSPENDED)
		return false;
	return !(state & (JOB_COMPLETING | JOB_REQUEUE | JOB_REQUEUE_FED));
}

/* Tells seen about job when its state differs from the last one told
 * (last: the caller's, "" at first).  Returns 1 when it told. */
static int tell_seen(uint32_t job_id, const slurm_job_info_t *job,
		     sbatch_seen_fn seen, void *arg, char *last, size_t size)
{
	const char *state = job_state_name(job->job_state);
	char output[PATH_MAX];
	struct sbatch_seen s;

	if (!strcmp(state, last))
		return 0;
	output[0] = '\0';
	/* Slurm's own filling of %j, %x, %u, ... (its header takes no
	 * const job). */
	slurm_get_job_stdout(output, (int)sizeof(output),
			     (slurm_job_info_t *)job);
	s = (struct sbatch_seen){
	    .state = state,
	    .nodes = job->nodes && job->nodes[0] ? job->nodes : NULL,
	    .output = output,
	    .first = !last[0],
	};
	snprintf(last, size, "%s", state);
	if (seen)
		seen(job_id, &s, arg);
	return 1;
}

int sbatch_wait(uint32_t job_id, sbatch_seen_fn seen, void *arg,
		struct sbatch_end *end, struct herd_err *err)
{
	char last[128] = "";
	long delay = 500;
	int errors = 0;

	for (;;) {
		job_info_msg_t *msg = NULL;

		if (load_job(job_id, &msg) != SLURM_SUCCESS) {
			int e = slurm_get_errno();

			if (e == ESLURM_INVALID_JOB_ID)
				return herd_errprintf(
				    err,
				    "job %u: slurmctld no longer knows it "
				    "(ended and purged between two polls?)",
				    job_id);
			if (++errors >= SBATCH_WAIT_ERRORS_MAX)
				return herd_errprintf(
				    err, "job %u: cannot follow it: %s", job_id,
				    slurm_strerror(e));
		} else if (msg->record_count < 1) {
			slurm_free_job_info_msg(msg);
			return herd_errprintf(
			    err, "job %u: slurmctld answered without it",
			    job_id);
		} else {
			const slurm_job_info_t *job = &msg->job_array[0];
			uint32_t base = job->job_state & JOB_STATE_BASE;
			int code = (int)job->exit_code;

			errors = 0;
			if (tell_seen(job_id, job, seen, arg, last,
				      sizeof(last)))
				delay = 500;
			if (job_ended(job->job_state)) {
				snprintf(end->state, sizeof(end->state), "%s",
					 job_state_name(base));
				end->completed = base == JOB_COMPLETE;
				if (WIFSIGNALED(code))
					end->status = 128 + WTERMSIG(code);
				else
					end->status = WEXITSTATUS(code);
				if (!end->completed && !end->status)
					end->status = 1;
				slurm_free_job_info_msg(msg);
				return 0;
			}
			slurm_free_job_info_msg(msg);
		}
		pause_ms(delay);
		if (delay < 2000)
			delay = delay * 2 > 2000 ? 2000 : delay * 2;
	}
}
