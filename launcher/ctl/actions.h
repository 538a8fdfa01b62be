/* ctl/actions.h — the actions of ctl_table[] (ctl/table.c), by the file
 * that holds them.  Each runs after its row's next state was entered;
 * an action that must choose where the job goes posts another event.
 * Only table.c and the files defining actions include this.
 */
#ifndef HERD_LAUNCHER_CTL_ACTIONS_H
#define HERD_LAUNCHER_CTL_ACTIONS_H

#include "launcher/ctl/ctl_int.h"

/* ctl/attempt.c */
void act_check_connected(struct ctl *c, struct ctl_ev *ev);
void act_launch(struct ctl *c, struct ctl_ev *ev);
/* ctl/preflight.c */
void act_preflight(struct ctl *c, struct ctl_ev *ev);
void act_preflight_step(struct ctl *c, struct ctl_ev *ev);
void act_node_failed_preflight(struct ctl *c, struct ctl_ev *ev);
/* ctl/run.c */
void act_rank_failed(struct ctl *c, struct ctl_ev *ev);
void act_rank_note(struct ctl *c, struct ctl_ev *ev);
void act_rank_note_recover(struct ctl *c, struct ctl_ev *ev);
void act_completed(struct ctl *c, struct ctl_ev *ev);
void act_abort(struct ctl *c, struct ctl_ev *ev);
void act_hung(struct ctl *c, struct ctl_ev *ev);
void act_hung_more(struct ctl *c, struct ctl_ev *ev);
void act_stacks(struct ctl *c, struct ctl_ev *ev);
void act_stacks_done(struct ctl *c, struct ctl_ev *ev);
void act_node_failed_stacks(struct ctl *c, struct ctl_ev *ev);
void act_abort_stacks(struct ctl *c, struct ctl_ev *ev);
void act_finish_stacks(struct ctl *c, struct ctl_ev *ev);
void act_interrupt_stacks(struct ctl *c, struct ctl_ev *ev);
/* ctl/notify.c */
void act_notify(struct ctl *c, struct ctl_ev *ev);
void act_notify_rank(struct ctl *c, struct ctl_ev *ev);
void act_notify_node(struct ctl *c, struct ctl_ev *ev);
void act_notify_check(struct ctl *c, struct ctl_ev *ev);
void act_notify_over(struct ctl *c, struct ctl_ev *ev);
void act_notify_finish(struct ctl *c, struct ctl_ev *ev);
/* ctl/recover.c */
void act_node_failed_connect(struct ctl *c, struct ctl_ev *ev);
void act_node_failed_run(struct ctl *c, struct ctl_ev *ev);
void act_node_failed_recover(struct ctl *c, struct ctl_ev *ev);
void act_node_failed_backoff(struct ctl *c, struct ctl_ev *ev);
void act_readmit(struct ctl *c, struct ctl_ev *ev);
void act_straggler(struct ctl *c, struct ctl_ev *ev);
void act_attempt_failed(struct ctl *c, struct ctl_ev *ev);
void act_recover(struct ctl *c, struct ctl_ev *ev);
void act_recover_timeout(struct ctl *c, struct ctl_ev *ev);
void act_check_recovered(struct ctl *c, struct ctl_ev *ev);
void act_backoff(struct ctl *c, struct ctl_ev *ev);
void act_backoff_over(struct ctl *c, struct ctl_ev *ev);
/* ctl/stop.c */
void act_finish(struct ctl *c, struct ctl_ev *ev);
void act_interrupt(struct ctl *c, struct ctl_ev *ev);
void act_kill(struct ctl *c, struct ctl_ev *ev);
void act_hang_up(struct ctl *c, struct ctl_ev *ev);
void act_node_gone(struct ctl *c, struct ctl_ev *ev);

#endif
