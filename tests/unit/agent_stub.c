/* agent_stub.c — agent_send, recorded; see agent_stub.h. */
#include "tests/unit/agent_stub.h"

struct agent_stub agent_stub;

void agent_send(struct agent *a, enum proto_type type, json_t *body,
		const void *data, size_t len)
{
	(void)a;
	(void)data;
	(void)len;
	if (agent_stub.n < AGENT_STUB_SENT_MAX) {
		agent_stub.ms[agent_stub.n] = loop_now_ms();
		agent_stub.type[agent_stub.n++] = (int)type;
	}
	if ((unsigned)type <= PROTO_TYPE_MAX_) {
		json_decref(agent_stub.last[type]);
		agent_stub.last[type] = json_incref(body);
		agent_stub.count[type]++;
	}
	json_decref(body);
}

void agent_stub_reset(void)
{
	for (int i = 0; i <= PROTO_TYPE_MAX_; i++) {
		json_decref(agent_stub.last[i]);
		agent_stub.last[i] = NULL;
		agent_stub.count[i] = 0;
	}
	agent_stub.n = 0;
}

int agent_stub_count(int type)
{
	return (unsigned)type <= PROTO_TYPE_MAX_ ? agent_stub.count[type] : 0;
}

json_t *agent_stub_last(int type)
{
	return (unsigned)type <= PROTO_TYPE_MAX_ ? agent_stub.last[type] : NULL;
}
