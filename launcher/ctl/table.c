/* ctl/table.c — the job's lifecycle as data: every (state, event) ->
 * (next state, action) row, ordered by state, the names of states and
 * events, and what each state lets the agents' frames do.
 *
 * The table is the one place that says where the job goes; the actions
 * (ctl/run.c, ctl/recover.c, ctl/stop.c ...) only do what a row asks and
 * never assign c->state.  doc/design/states.dot is drawn from this table
 * (test_ctl regenerates it and fails on a difference).
 */
#include <stddef.h>

#include "launcher/ctl/actions.h"

/* Every transition of the job, grouped by state in the order a job goes
 * through them (flux-core broker/state_machine.c is the model).  Each
 * (state, event) has at most one row.  An event without a row in the
 * current state is dropped when it reports on a phase that may already
 * be over (ctl_events[].late), else it is a bug and said on stderr. */
/* clang-format off: one row a line, aligned by hand */
const struct ctl_row ctl_table[] = {
    /* Agents starting, HELLOs arriving; spares fill in for members that
     * never come up. */
    {CTL_CONNECT, CTL_EV_START, CTL_CONNECT, act_check_connected},
    {CTL_CONNECT, CTL_EV_NODE_UP, CTL_CONNECT, act_check_connected},
    {CTL_CONNECT, CTL_EV_NODE_FAILED, CTL_CONNECT, act_node_failed_connect},
    {CTL_CONNECT, CTL_EV_READMIT, CTL_CONNECT, act_readmit},
    {CTL_CONNECT, CTL_EV_PREFLIGHT, CTL_PREFLIGHT, act_preflight},
    {CTL_CONNECT, CTL_EV_LAUNCH, CTL_RUN, act_launch},
    {CTL_CONNECT, CTL_EV_FINISH, CTL_STOPPING, act_finish},
    {CTL_CONNECT, CTL_EV_INTERRUPT, CTL_STOPPING, act_finish},

    /* The health gate (health.preflight, herd check): every member up
     * is checked before an attempt; unhealthy ones are replaced. */
    {CTL_PREFLIGHT, CTL_EV_NODE_UP, CTL_PREFLIGHT, act_preflight_step},
    {CTL_PREFLIGHT, CTL_EV_CHECKED, CTL_PREFLIGHT, act_preflight_step},
    {CTL_PREFLIGHT, CTL_EV_PROBED, CTL_PREFLIGHT, act_preflight_step},
    {CTL_PREFLIGHT, CTL_EV_NODE_FAILED, CTL_PREFLIGHT,
     act_node_failed_preflight},
    {CTL_PREFLIGHT, CTL_EV_READMIT, CTL_PREFLIGHT, act_readmit},
    {CTL_PREFLIGHT, CTL_EV_RANK_FAILED, CTL_PREFLIGHT, act_rank_note},
    {CTL_PREFLIGHT, CTL_EV_LAUNCH, CTL_RUN, act_launch},
    {CTL_PREFLIGHT, CTL_EV_FINISH, CTL_STOPPING, act_finish},
    {CTL_PREFLIGHT, CTL_EV_INTERRUPT, CTL_STOPPING, act_finish},

    /* An attempt's ranks run.  A failure fails the attempt (through
     * NOTIFY in a PMIx job with health.notify_grace). */
    {CTL_RUN, CTL_EV_NODE_FAILED, CTL_RUN, act_node_failed_run},
    {CTL_RUN, CTL_EV_READMIT, CTL_RUN, act_readmit},
    {CTL_RUN, CTL_EV_RANK_FAILED, CTL_RUN, act_rank_failed},
    {CTL_RUN, CTL_EV_HUNG, CTL_STACKS, act_hung},
    {CTL_RUN, CTL_EV_ABORT, CTL_RUN, act_abort},
    {CTL_RUN, CTL_EV_STRAGGLER, CTL_RUN, act_straggler},
    {CTL_RUN, CTL_EV_NOTIFY, CTL_NOTIFY, act_notify},
    {CTL_RUN, CTL_EV_ATTEMPT_FAILED, CTL_RUN, act_attempt_failed},
    {CTL_RUN, CTL_EV_RECOVER, CTL_RECOVER, act_recover},
    {CTL_RUN, CTL_EV_RANKS_DONE, CTL_STOPPING, act_completed},
    {CTL_RUN, CTL_EV_FINISH, CTL_STOPPING, act_finish},
    {CTL_RUN, CTL_EV_INTERRUPT, CTL_STOPPING, act_interrupt},

    /* A rank hung: every rank's stack before the attempt fails
     * (ctl/hang.c); ranks that die of the SIGABRT that got Python's
     * traceback are only noted. */
    {CTL_STACKS, CTL_EV_HUNG, CTL_STACKS, act_hung_more},
    {CTL_STACKS, CTL_EV_STACKS, CTL_STACKS, act_stacks},
    {CTL_STACKS, CTL_EV_STACKS_DONE, CTL_RUN, act_stacks_done},
    {CTL_STACKS, CTL_EV_NODE_FAILED, CTL_STACKS, act_node_failed_stacks},
    {CTL_STACKS, CTL_EV_READMIT, CTL_STACKS, act_readmit},
    {CTL_STACKS, CTL_EV_RANK_FAILED, CTL_STACKS, act_rank_note},
    {CTL_STACKS, CTL_EV_ABORT, CTL_STACKS, act_abort_stacks},
    {CTL_STACKS, CTL_EV_FINISH, CTL_STOPPING, act_finish_stacks},
    {CTL_STACKS, CTL_EV_INTERRUPT, CTL_STOPPING, act_interrupt_stacks},

    /* Ranks failed in a PMIx job and the survivors were told (a PMIx
     * event): they have health.notify_grace to act before the attempt
     * is stopped; it ends sooner when every one of them exited.
     * Further failures are told too; an MPI_Abort now is a survivor's
     * reaction (Open MPI aborts on the event), not the program ending
     * the job. */
    {CTL_NOTIFY, CTL_EV_RANK_FAILED, CTL_NOTIFY, act_notify_rank},
    {CTL_NOTIFY, CTL_EV_NODE_FAILED, CTL_NOTIFY, act_notify_node},
    {CTL_NOTIFY, CTL_EV_RANK_EXITED, CTL_NOTIFY, act_notify_check},
    {CTL_NOTIFY, CTL_EV_RANKS_DONE, CTL_NOTIFY, act_notify_check},
    {CTL_NOTIFY, CTL_EV_ABORT, CTL_NOTIFY, NULL},
    {CTL_NOTIFY, CTL_EV_READMIT, CTL_NOTIFY, act_readmit},
    {CTL_NOTIFY, CTL_EV_NOTIFY_OVER, CTL_RUN, act_notify_over},
    {CTL_NOTIFY, CTL_EV_ATTEMPT_FAILED, CTL_RUN, act_notify_over},
    {CTL_NOTIFY, CTL_EV_FINISH, CTL_STOPPING, act_notify_finish},
    {CTL_NOTIFY, CTL_EV_INTERRUPT, CTL_STOPPING, act_notify_finish},

    /* The attempt failed: survivors stop their ranks and confirm,
     * failed nodes are evicted, spares join. */
    {CTL_RECOVER, CTL_EV_NODE_UP, CTL_RECOVER, act_check_recovered},
    {CTL_RECOVER, CTL_EV_STOPPED, CTL_RECOVER, act_check_recovered},
    {CTL_RECOVER, CTL_EV_NODE_FAILED, CTL_RECOVER, act_node_failed_recover},
    {CTL_RECOVER, CTL_EV_READMIT, CTL_RECOVER, act_readmit},
    {CTL_RECOVER, CTL_EV_RANK_FAILED, CTL_RECOVER, act_rank_note_recover},
    {CTL_RECOVER, CTL_EV_STOP_TIMER, CTL_RECOVER, act_recover_timeout},
    {CTL_RECOVER, CTL_EV_RECOVERED, CTL_BACKOFF, act_backoff},
    {CTL_RECOVER, CTL_EV_FINISH, CTL_STOPPING, act_finish},
    {CTL_RECOVER, CTL_EV_INTERRUPT, CTL_STOPPING, act_finish},

    /* restart.backoff before the next attempt. */
    {CTL_BACKOFF, CTL_EV_NODE_FAILED, CTL_BACKOFF, act_node_failed_backoff},
    {CTL_BACKOFF, CTL_EV_READMIT, CTL_BACKOFF, act_readmit},
    {CTL_BACKOFF, CTL_EV_RANK_FAILED, CTL_BACKOFF, act_rank_note},
    {CTL_BACKOFF, CTL_EV_BACKOFF_OVER, CTL_BACKOFF, act_backoff_over},
    {CTL_BACKOFF, CTL_EV_PREFLIGHT, CTL_PREFLIGHT, act_preflight},
    {CTL_BACKOFF, CTL_EV_LAUNCH, CTL_RUN, act_launch},
    {CTL_BACKOFF, CTL_EV_FINISH, CTL_STOPPING, act_finish},
    {CTL_BACKOFF, CTL_EV_INTERRUPT, CTL_STOPPING, act_finish},

    /* The end: ranks stopping, agents told to exit.  A second request
     * only shortens the grace. */
    {CTL_STOPPING, CTL_EV_NODE_FAILED, CTL_STOPPING, act_node_gone},
    {CTL_STOPPING, CTL_EV_RANK_FAILED, CTL_STOPPING, act_rank_note},
    {CTL_STOPPING, CTL_EV_FINISH, CTL_STOPPING, act_kill},
    {CTL_STOPPING, CTL_EV_INTERRUPT, CTL_STOPPING, act_kill},
    {CTL_STOPPING, CTL_EV_ALL_GONE, CTL_END, NULL},
    {CTL_STOPPING, CTL_EV_STOP_TIMER, CTL_END, act_hang_up},

    /* The loop is stopping: nothing is left to do. */
    {CTL_END, CTL_EV_ANY_, CTL_END, NULL},
};
/* clang-format on */
const size_t ctl_table_len = sizeof(ctl_table) / sizeof(ctl_table[0]);

/* Each state's name and what it lets the agents' frames do (enum
 * ctl_serve in ctl_int.h): the frame handlers ask ctl_serves() instead of
 * naming states, so what a state allows is said here, beside its rows. */
static const struct {
	const char *name;
	unsigned serves;
} ctl_states[CTL_STATE_COUNT_] = {
    [CTL_CONNECT] = {"connect", 0},
    [CTL_PREFLIGHT] = {"preflight", 0},
    [CTL_RUN] = {"run", CTL_SERVE_ATTEMPT | CTL_SERVE_RANKS},
    [CTL_STACKS] = {"stacks", CTL_SERVE_RANKS},
    [CTL_NOTIFY] = {"notify", CTL_SERVE_RANKS},
    [CTL_RECOVER] = {"recover", 0},
    [CTL_BACKOFF] = {"backoff", 0},
    [CTL_STOPPING] = {"stopping", CTL_SERVE_ENDING},
    [CTL_END] = {"end", CTL_SERVE_ENDING},
};

unsigned ctl_state_serves(enum ctl_state s)
{
	return s < CTL_STATE_COUNT_ ? ctl_states[s].serves : 0;
}

bool ctl_serves(const struct ctl *c, unsigned what)
{
	return (ctl_state_serves(c->state) & what) == what;
}

/* late: the event reports on an attempt or phase that may be over when it
 * is handled (a rank's exit after the attempt failed, a timer that was
 * already due); without a row in the current state it is dropped. */
static const struct {
	const char *name;
	bool late;
} ctl_events[CTL_EV_COUNT_] = {
    [CTL_EV_START] = {"start", false},
    [CTL_EV_NODE_UP] = {"node up", true},
    [CTL_EV_NODE_FAILED] = {"node failed", false},
    [CTL_EV_RANK_FAILED] = {"rank failed", true},
    [CTL_EV_RANKS_DONE] = {"ranks done", true},
    [CTL_EV_HUNG] = {"hung", true},
    [CTL_EV_ABORT] = {"abort", true},
    [CTL_EV_ATTEMPT_FAILED] = {"attempt failed", true},
    [CTL_EV_RECOVER] = {"recover", false},
    [CTL_EV_STOPPED] = {"stopped", true},
    [CTL_EV_RECOVERED] = {"recovered", false},
    [CTL_EV_BACKOFF_OVER] = {"backoff over", true},
    [CTL_EV_LAUNCH] = {"launch", false},
    [CTL_EV_STOP_TIMER] = {"stop timer", true},
    [CTL_EV_FINISH] = {"finish", false},
    [CTL_EV_INTERRUPT] = {"interrupt", false},
    [CTL_EV_ALL_GONE] = {"all gone", false},
    [CTL_EV_READMIT] = {"readmit", true},
    [CTL_EV_STACKS] = {"stacks", true},
    [CTL_EV_STACKS_DONE] = {"stacks done", true},
    [CTL_EV_PREFLIGHT] = {"preflight", false},
    [CTL_EV_CHECKED] = {"checked", true},
    [CTL_EV_PROBED] = {"probed", true},
    [CTL_EV_STRAGGLER] = {"straggler", true},
    [CTL_EV_NOTIFY] = {"notify", false},
    [CTL_EV_NOTIFY_OVER] = {"notify over", true},
    [CTL_EV_RANK_EXITED] = {"rank exited", true},
};

const char *ctl_state_name(enum ctl_state s)
{
	return s < CTL_STATE_COUNT_ ? ctl_states[s].name : "?";
}

const char *ctl_event_name(enum ctl_event e)
{
	return e < CTL_EV_COUNT_ ? ctl_events[e].name : "?";
}

const struct ctl_row *ctl_row_find(enum ctl_state state, enum ctl_event event)
{
	for (size_t i = 0; i < ctl_table_len; i++)
		if (ctl_table[i].state == state &&
		    (ctl_table[i].event == event ||
		     ctl_table[i].event == CTL_EV_ANY_))
			return &ctl_table[i];
	return NULL;
}

bool ctl_event_late(enum ctl_event e)
{
	return e < CTL_EV_COUNT_ && ctl_events[e].late;
}
