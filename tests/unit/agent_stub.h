/* agent_stub.h — the agent_send the unit tests link instead of
 * agent/main.c's: every frame the agent's objects send is recorded here
 * (type, time, and the last body of each type), none goes anywhere. */
#ifndef HERD_TEST_AGENT_STUB_H
#define HERD_TEST_AGENT_STUB_H

#include <stdint.h>

#include "agent/agent.h"

/* Frames recorded in order; later ones are only counted in last[]. */
#define AGENT_STUB_SENT_MAX 256

struct agent_stub {
	int n; /* frames in type[] and ms[] */
	int type[AGENT_STUB_SENT_MAX];
	int64_t ms[AGENT_STUB_SENT_MAX];   /* loop_now_ms() at the send */
	json_t *last[PROTO_TYPE_MAX_ + 1]; /* a reference, or NULL */
	int count[PROTO_TYPE_MAX_ + 1];    /* every frame, past the cap too */
};

extern struct agent_stub agent_stub;

/* Forgets everything recorded (drops the bodies). */
void agent_stub_reset(void);
/* How many frames of type were sent (all of them, not only the first
 * AGENT_STUB_SENT_MAX: a test that counts frames across a slow gdb must
 * not stop counting when heartbeats fill the record). */
int agent_stub_count(int type);
/* The last body of type sent (borrowed: valid until the next send of
 * that type or reset), or NULL. */
json_t *agent_stub_last(int type);

#endif
