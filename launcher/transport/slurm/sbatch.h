/* sbatch.h — `herd sbatch`: a job spec's slurm: section turned into a
 * batch script (templates/sbatch.sh.tmpl) and into the Slurm job
 * description that libslurm submits.
 *
 * libslurm hands the script to slurmctld as it is: the #SBATCH lines in
 * it are read only by the sbatch program, never by slurmctld.  So every
 * option herd writes as an #SBATCH line is also set here, field by field,
 * in the job description; slurm.extra lines herd cannot map to a field
 * are refused (sbatch_new) rather than silently written and ignored.
 *
 * The script's body runs `herd run` on the same job file inside the
 * allocation.  Errors come back in a caller-owned struct herd_err;
 * nothing here prints or exits.
 */
#ifndef HERD_LAUNCHER_SBATCH_H
#define HERD_LAUNCHER_SBATCH_H

#include <stdint.h>

#include "herd/err.h"
#include "herd/spec.h"

/* The template's file name in herd's templates directory (template.h). */
#define SBATCH_TEMPLATE "sbatch.sh.tmpl"

/* Slurm's own default MaxScriptSize (4 MiB): a bigger script would only
 * be refused by slurmctld, after a round trip. */
#define SBATCH_SCRIPT_MAX (4u * 1024 * 1024)

/* A batch job ready to render and submit; built by sbatch_new(), owns
 * every string it points to, freed by sbatch_free(). */
struct sbatch;

/* How a job ended, as sbatch_wait() saw it. */
struct sbatch_end {
	char state[32]; /* Slurm's word: COMPLETED, FAILED, TIMEOUT, ... */
	int completed;	/* 1: the state is COMPLETED */
	int status;	/* exit status for herd: the script's, 128+signal,
			 * or 1 when the job ended without one */
};

/* Builds the batch job of spec.  herd and job_file are absolute paths
 * (bin/herd and the spec: the script names them), workdir the job's
 * working directory (absolute; a relative slurm.output is relative to
 * it, as with sbatch).  Checks what Slurm would only find later: the time
 * limit's syntax, slurm.extra lines herd can map, values that cannot be
 * written on one #SBATCH line.  Returns NULL with err (every error is a
 * spec or usage error). */
struct sbatch *sbatch_new(const struct spec *spec, const char *herd,
			  const char *job_file, const char *workdir,
			  struct herd_err *err);

void sbatch_free(struct sbatch *sb);

/* The directory slurm.output's file goes in, when it has one Slurm would
 * not create (no '%' pattern in it); NULL otherwise.  Owned by sb. */
const char *sbatch_output_dir(const struct sbatch *sb);

/* Reads the template from the templates directory of the program at self
 * (the path of bin/herd).  Returns its malloc'd text, or NULL with err. */
char *sbatch_template_load(const char *self, struct herd_err *err);

/* Renders tmpl (strict: an unknown {{placeholder}} is an error) into a
 * malloc'd script that starts with "#!".  Placeholders: name, job_file,
 * herd, workdir, sbatch_options (the #SBATCH lines, one per option).
 * Returns NULL with err. */
char *sbatch_script(const struct sbatch *sb, const char *tmpl,
		    struct herd_err *err);

/* Initializes libslurm (slurm_init(NULL): SLURM_CONF or the default
 * slurm.conf) and quiets its own messages on stderr: herd reports each
 * failure once, in one line.  Pair with sbatch_slurm_fini(). */
void sbatch_slurm_init(void);

/* Releases what sbatch_slurm_init() set up, as quietly. */
void sbatch_slurm_fini(void);

/* Submits script through libslurm (sbatch_slurm_init() has run) with env,
 * a NULL-terminated "NAME=value" array the job starts with.  Stores the
 * job id.  Returns 0, or -1 with err: "Slurm refused the job: REASON
 * (what it was about)" for a refusal, REASON being Slurm's own words.
 * A job slurmctld took but left pending for a reason no time clears (its
 * partition can never run it: EnforcePartLimits=NO) is cancelled and
 * reported as refused. */
int sbatch_submit(const struct sbatch *sb, const char *script, char *const *env,
		  uint32_t *job_id, struct herd_err *err);

/* What sbatch_wait() saw of the job at a poll whose state was new. */
struct sbatch_seen {
	const char *state;  /* Slurm's word: PENDING, RUNNING, ... */
	const char *nodes;  /* its nodes; NULL while it has none */
	const char *output; /* its stdout file, Slurm's %j, %x, ... filled */
	int first;	    /* 1: the first poll that saw the job */
};

/* Called by sbatch_wait() at the first poll that finds the job and at
 * each later one where its state changed, the last
 * time with the state it ended in; arg is the caller's. */
typedef void (*sbatch_seen_fn)(uint32_t job_id, const struct sbatch_seen *seen,
			       void *arg);

/* Polls slurmctld until job_id has ended (a requeued job is followed into
 * its next run), backing off from 0.5 s to 2 s between polls (back to
 * 0.5 s after a change), calling seen (may be NULL) as said above.
 * Returns 0 with end filled, or -1 with err when slurmctld stops
 * answering for SBATCH_WAIT_ERRORS_MAX polls in a row or forgets the
 * job. */
int sbatch_wait(uint32_t job_id, sbatch_seen_fn seen, void *arg,
		struct sbatch_end *end, struct herd_err *err);

/* Failed polls in a row that sbatch_wait() bears (about a minute at the
 * 2 s backoff): slurmctld restarting is normal, gone for good is not. */
#define SBATCH_WAIT_ERRORS_MAX 30

#endif
