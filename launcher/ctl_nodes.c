/* ctl_nodes.c — what a job remembers of its nodes between runs (issue 14):
 * failures with reason and time, and the quarantine that follows
 * health.quarantine_after of them.  (A stub until the node record lands.)
 */
#include "ctl_int.h"

void ctl_node_note(struct ctl *c, struct node *n, const char *kind,
		   const char *reason)
{
	(void)c;
	(void)n;
	(void)kind;
	(void)reason;
}
