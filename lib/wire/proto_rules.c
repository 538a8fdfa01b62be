/* proto_rules.c — the wire contract: one row per frame type and
 * direction, checked by proto_frame_check() (proto_check.c).  The checks
 * a format cannot say are the rows' `more` functions, in proto_rules_*.c
 * by family.
 *
 * proto.h's comment table says the same in words: change both together.
 * A type has a to_herd body exactly when herd's frame table has a handler
 * for it, and a to_agent body exactly when herd-agent's has (the unit
 * tests hold a valid body of every row and check both tables).
 */
#include <limits.h>
#include <signal.h>

#include "proto_int.h"

const struct proto_rule proto_rules[PROTO_TYPE_MAX_ + 1] = {
    [PROTO_HELLO] =
	{
	    .name = "HELLO",
	    .to_herd =
		{
		    .format = "{s:s, s:s, s:o, s:I, s:I, s?o, s?s}",
		    .keys = {"version", "hostname", "addrs", "cores", "pid",
			     "topo", "topo_error"},
		    .ranges = {{"cores", 1, INT_MAX}, {"pid", 1, INT_MAX}},
		    .more = proto_hello_more,
		},
	},
    [PROTO_LAUNCH] =
	{
	    .name = "LAUNCH",
	    .to_agent =
		{
		    .format = "{s:I, s:s, s:I, s:o, s:o, s?s, s?o, s?I, s?I, "
			      "s?o, s?b}",
		    .keys = {"attempt", "command", "grace_ms", "env", "ranks",
			     "workdir", "pmix", "progress_timeout_ms",
			     "metrics_interval_ms", "patterns", "survivors"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"grace_ms", 0, PROTO_INT_ANY},
			       {"progress_timeout_ms", 1, PROTO_INT_ANY},
			       {"metrics_interval_ms", 100, PROTO_INT_ANY}},
		    .more = proto_launch_more,
		},
	},
    [PROTO_OUTPUT] =
	{
	    .name = "OUTPUT",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I}",
		    .keys = {"rank", "fd", "attempt"},
		    .ranges = {{"rank", 0, INT_MAX},
			       {"fd", 1, 2},
			       {"attempt", 0, INT_MAX}},
		},
	    .data_min = 1,
	    .data_max = PROTO_OUTPUT_CHUNK,
	},
    [PROTO_EXIT] =
	{
	    .name = "EXIT",
	    .to_herd =
		{
		    .format = "{s:I, s:o, s:o, s:I, s?s, s?I, s?b}",
		    .keys = {"rank", "code", "signal", "attempt",
			     "error", "errno", "pmix_connected"},
		    .ranges = {{"rank", 0, INT_MAX},
			       {"attempt", 0, INT_MAX},
			       {"errno", 0, INT_MAX}},
		    .more = proto_exit_more,
		},
	},
    [PROTO_SIGNAL] =
	{
	    .name = "SIGNAL",
	    .to_agent =
		{
		    .format = "{s:I, s?o}",
		    .keys = {"signal", "ranks"},
		    .ranges = {{"signal", 1, NSIG - 1}},
		    .more = proto_signal_more,
		},
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:o}",
		    .keys = {"attempt", "signal", "ranks"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"signal", 1, NSIG - 1}},
		    .more = proto_signal_more,
		},
	},
    [PROTO_STOP] =
	{
	    .name = "STOP",
	    .to_agent =
		{
		    .format = "{s:I, s:b, s:I, s?b}",
		    .keys = {"grace_ms", "exit", "signal", "leave"},
		    .ranges = {{"grace_ms", 0, PROTO_INT_ANY},
			       {"signal", 1, NSIG - 1}},
		},
	},
    [PROTO_HEARTBEAT] =
	{
	    .name = "HEARTBEAT",
	    .to_agent =
		{
		    .format = "{s:I, s:I}",
		    .keys = {"interval_ms", "timeout_ms"},
		    .ranges = {{"interval_ms", 1, PROTO_INT_ANY},
			       {"timeout_ms", 1, PROTO_INT_ANY}},
		    .more = proto_hb_herd_more,
		},
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:o}",
		    .keys = {"seq", "attempt", "hung"},
		    .ranges = {{"seq", 1, PROTO_INT_ANY},
			       {"attempt", 0, INT_MAX}},
		    .more = proto_hb_agent_more,
		},
	},
    [PROTO_ERROR] =
	{
	    .name = "ERROR",
	    .to_herd =
		{
		    .format = "{s:s, s?s}",
		    .keys = {"message", "stage"},
		},
	},
    [PROTO_STOPPED] =
	{
	    .name = "STOPPED",
	    .to_herd =
		{
		    .format = "{s:I}",
		    .keys = {"attempt"},
		    .ranges = {{"attempt", 0, INT_MAX}},
		},
	},
    [PROTO_FENCE] =
	{
	    .name = "FENCE",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s?s, s?I}",
		    .keys = {"attempt", "seq", "procs", "count"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"count", 1, INT_MAX}},
		    .more = proto_fence_more,
		},
	    .data_max = PROTO_FRAME_MAX,
	},
    [PROTO_FENCE_DONE] =
	{
	    .name = "FENCE_DONE",
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I}",
		    .keys = {"attempt", "seq", "status"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"status", INT_MIN, INT_MAX}},
		},
	    .data_max = PROTO_FRAME_MAX,
	},
    [PROTO_DMODEX] =
	{
	    .name = "DMODEX",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s?I}",
		    .keys = {"attempt", "seq", "rank", "ns"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"ns", 0, INT_MAX}},
		},
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s:I, s?I}",
		    .keys = {"attempt", "seq", "rank", "from", "ns"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"from", 0, INT_MAX},
			       {"ns", 0, INT_MAX}},
		},
	},
    [PROTO_DMODEX_DATA] =
	{
	    .name = "DMODEX_DATA",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:I, s:I, s?I}",
		    .keys = {"attempt", "seq", "rank", "from", "status", "ns"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"from", 0, INT_MAX},
			       {"status", INT_MIN, 0},
			       {"ns", 0, INT_MAX}},
		},
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s:I, s?I}",
		    .keys = {"attempt", "seq", "rank", "status", "ns"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"status", INT_MIN, PROTO_DMODEX_UNREACH},
			       {"ns", 0, INT_MAX}},
		},
	    .data_max = PROTO_FRAME_MAX,
	},
    [PROTO_ABORT] =
	{
	    .name = "ABORT",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:s}",
		    .keys = {"attempt", "rank", "status", "message"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"status", INT_MIN, INT_MAX}},
		},
	},
    [PROTO_METRICS] =
	{
	    .name = "METRICS",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:F, s:I, s:o, s:o, s:o, s:o, s?s, "
			      "s:o}",
		    .keys = {"t", "attempt", "load1", "cpus", "ranks", "net",
			     "rdma", "gpus", "gpu_error", "train"},
		    .ranges = {{"t", 0, PROTO_INT_ANY},
			       {"attempt", 0, INT_MAX},
			       {"cpus", 1, INT_MAX}},
		    .more = proto_metrics_more,
		},
	},
    [PROTO_CTL_REQ] =
	{
	    .name = "CTL_REQ",
	    .to_control =
		{
		    .format = "{s:s}",
		    .keys = {"op"},
		    .more = proto_ctl_req_more,
		},
	},
    [PROTO_CTL_MSG] =
	{
	    .name = "CTL_MSG",
	    .to_client =
		{
		    .format = "{s:s, s?I, s?s, s?s, s?s, s?I, s?I, s?I, s?s, "
			      "s?I}",
		    .keys = {"kind", "missed", "id", "name", "state", "attempt",
			     "nodes", "pid", "message", "status"},
		    .ranges = {{"missed", 0, PROTO_INT_ANY},
			       {"attempt", 0, INT_MAX},
			       {"nodes", 0, INT_MAX},
			       {"pid", 1, INT_MAX},
			       {"status", 0, 255}},
		    .more = proto_ctl_msg_more,
		},
	    .data_max = PROTO_CTL_DATA_MAX,
	    .data_more = proto_ctl_msg_data,
	},
    [PROTO_STACKS] =
	{
	    .name = "STACKS",
	    .to_agent =
		{
		    .format = "{s:I}",
		    .keys = {"attempt"},
		    .ranges = {{"attempt", 1, INT_MAX}},
		},
	    .to_herd =
		{
		    .format = "{s:I, s:o}",
		    .keys = {"attempt", "ranks"},
		    .ranges = {{"attempt", 0, INT_MAX}},
		    .more = proto_stacks_agent_more,
		},
	},
    [PROTO_CHECK] =
	{
	    .name = "CHECK",
	    .to_agent =
		{
		    .format = "{s?s, s?s, s:I, s:I, s?s, s?s, s:I, s:I}",
		    .keys = {"workdir", "checkpoint_dir", "min_free", "gpus",
			     "master_addr", "check_command", "check_timeout_ms",
			     "t_ms"},
		    .ranges = {{"min_free", 0, PROTO_INT_ANY},
			       {"gpus", -1, PROTO_METRICS_DEVS_MAX},
			       {"check_timeout_ms", 1, PROTO_INT_ANY},
			       {"t_ms", 0, PROTO_INT_ANY}},
		},
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:o}",
		    .keys = {"t_ms", "held_ms", "checks"},
		    .ranges = {{"t_ms", 0, PROTO_INT_ANY},
			       {"held_ms", 0, PROTO_INT_ANY}},
		    .more = proto_check_more,
		},
	},
    [PROTO_NETPROBE] =
	{
	    .name = "NETPROBE",
	    .to_agent =
		{
		    .format = "{s:I, s:s, s:s, s?I, s:I, s:I, s?s}",
		    .keys = {"round", "op", "addr", "port", "bytes",
			     "timeout_ms", "peer"},
		    .ranges = {{"round", 1, INT_MAX},
			       {"port", 1, 65535},
			       {"bytes", 1, PROTO_NETPROBE_BYTES_MAX},
			       {"timeout_ms", 1, PROTO_NETPROBE_TIMEOUT_MAX}},
		    .more = proto_netprobe_agent_more,
		},
	    .to_herd =
		{
		    .format = "{s:I, s:s, s?I, s?I, s?I, s?s}",
		    .keys = {"round", "op", "port", "rx_bytes", "rx_us",
			     "error"},
		    .ranges = {{"round", 1, INT_MAX},
			       {"port", 1, 65535},
			       {"rx_bytes", 0, PROTO_INT_ANY},
			       {"rx_us", 0, PROTO_INT_ANY}},
		    .more = proto_netprobe_herd_more,
		},
	},
    [PROTO_SPAWN] =
	{
	    .name = "SPAWN",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:I, s:o}",
		    .keys = {"attempt", "seq", "ns", "rank", "apps"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"ns", 0, INT_MAX},
			       {"rank", 0, INT_MAX}},
		    .more = proto_spawn_apps,
		},
	},
    [PROTO_SPAWN_LAUNCH] =
	{
	    .name = "SPAWN_LAUNCH",
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:I, s:I, "
			      "s:s, s:o, s:o}",
		    .keys = {"attempt", "spawn", "parent_ns", "parent_rank",
			     "size", "nodes", "ppn", "num_nodes", "node_id",
			     "hostname", "apps", "local"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"spawn", 1, INT_MAX},
			       {"parent_ns", 0, INT_MAX},
			       {"parent_rank", 0, INT_MAX},
			       {"size", 1, PROTO_SPAWN_PROCS_MAX},
			       {"num_nodes", 1, INT_MAX},
			       {"node_id", 0, INT_MAX}},
		    .more = proto_spawn_launch_more,
		},
	},
    [PROTO_SPAWN_UP] =
	{
	    .name = "SPAWN_UP",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s?s}",
		    .keys = {"attempt", "spawn", "error"},
		    .ranges = {{"attempt", 0, INT_MAX}, {"spawn", 1, INT_MAX}},
		},
	},
    [PROTO_SPAWN_DONE] =
	{
	    .name = "SPAWN_DONE",
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s?I, s?s}",
		    .keys = {"attempt", "seq", "status", "spawn", "error"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"status", INT_MIN, INT_MAX},
			       {"spawn", 1, INT_MAX}},
		},
	},
    [PROTO_CONNECT] =
	{
	    .name = "CONNECT",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:s, s:o}",
		    .keys = {"attempt", "seq", "op", "procs"},
		    .ranges = {{"attempt", 0, INT_MAX}, {"seq", 1, INT_MAX}},
		    .more = proto_connect_more,
		},
	    .data_max = PROTO_FRAME_MAX,
	    .data_more = proto_connect_data,
	},
    [PROTO_CONNECT_DONE] =
	{
	    .name = "CONNECT_DONE",
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I}",
		    .keys = {"attempt", "seq", "status"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"status", INT_MIN, INT_MAX}},
		},
	    .data_max = PROTO_FRAME_MAX,
	},
    /* warm interpreters */
    [PROTO_STARTED] =
	{
	    .name = "STARTED",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:b}",
		    .keys = {"attempt", "rank", "warm"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"rank", 0, INT_MAX}},
		},
	},
    [PROTO_PUBLISH] =
	{
	    .name = "PUBLISH",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:s, s:s, s:s, s:o}",
		    .keys = {"attempt", "id", "rank", "nspace", "range",
			     "persist", "keys"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"id", 1, INT_MAX},
			       {"rank", 0, INT_MAX}},
		    .more = proto_publish_more,
		},
	    .data_max = PROTO_PUBSUB_DATA_MAX,
	},
    [PROTO_LOOKUP] =
	{
	    .name = "LOOKUP",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:s, s:s, s:o, s:I, s:I}",
		    .keys = {"attempt", "id", "rank", "nspace", "range",
			     "keys", "wait", "timeout_ms"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"id", 1, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"wait", -1, PROTO_PUBSUB_KEYS_MAX},
			       {"timeout_ms", 0, PROTO_INT_ANY}},
		    .more = proto_lookup_more,
		},
	},
    [PROTO_UNPUBLISH] =
	{
	    .name = "UNPUBLISH",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:s, s:s, s:o}",
		    .keys = {"attempt", "id", "rank", "nspace", "range",
			     "keys"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"id", 1, INT_MAX},
			       {"rank", 0, INT_MAX}},
		    .more = proto_unpublish_more,
		},
	},
    [PROTO_PUBSUB_DONE] =
	{
	    .name = "PUBSUB_DONE",
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:s, s?o}",
		    .keys = {"attempt", "id", "status", "found"},
		    .ranges = {{"attempt", 1, INT_MAX}, {"id", 1, INT_MAX}},
		    .more = proto_pubsub_done_more,
		},
	    .data_max = PROTO_PUBSUB_KEYS_MAX * PROTO_PUBSUB_VALUE_MAX,
	},
    [PROTO_EVENT] =
	{
	    .name = "EVENT",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:s, s:s, s:o}",
		    .keys = {"attempt", "code", "rank", "nspace", "range",
			     "procs"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"code", INT_MIN, INT_MAX},
			       {"rank", 0, INT_MAX}},
		    .more = proto_event_more,
		},
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s:s, s:s}",
		    .keys = {"attempt", "code", "rank", "nspace", "range"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"code", INT_MIN, INT_MAX},
			       {"rank", 0, INT_MAX}},
		    .more = proto_event_more,
		},
	    .data_max = PROTO_EVENT_DATA_MAX,
	},
    [PROTO_PROC_FAILED] =
	{
	    .name = "PROC_FAILED",
	    .to_agent =
		{
		    .format = "{s:I, s:s, s:I, s:s, s:o}",
		    .keys = {"attempt", "kind", "status", "host", "ranks"},
		    .ranges = {{"attempt", 1, INT_MAX}, {"status", 0, 255}},
		    .more = proto_proc_failed_more,
		},
	},
    [PROTO_PMIX_LOG] =
	{
	    .name = "PMIX_LOG",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:o}",
		    .keys = {"attempt", "rank", "entries"},
		    .ranges = {{"attempt", 0, INT_MAX}, {"rank", 0, INT_MAX}},
		    .more = proto_pmix_log_more,
		},
	},
    /* survivors keep training: a rank's control channel */
    [PROTO_RANK_CTL] =
	{
	    .name = "RANK_CTL",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:o}",
		    .keys = {"attempt", "rank", "conn", "msg"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"conn", 1, INT_MAX}},
		    .more = proto_rank_ctl_more,
		},
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s:o}",
		    .keys = {"attempt", "rank", "to", "msg"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"to", 0, INT_MAX}},
		    .more = proto_rank_ctl_more,
		},
	},
    /* checkpoints in memory: the tier's inventory, copies between nodes
     * (relayed by herd), persisting a step to checkpoint.dir */
    [PROTO_CKPT_CONF] =
	{
	    .name = "CKPT_CONF",
	    .to_agent =
		{
		    .format = "{s:s, s:s, s:I, s:b}",
		    .keys = {"dir", "job", "max", "keep"},
		    .ranges = {{"max", 0, PROTO_INT_ANY}},
		    .more = proto_ckpt_mem_more,
		},
	},
    [PROTO_CKPT_INV] =
	{
	    .name = "CKPT_INV",
	    .to_herd =
		{
		    .format = "{s:s, s:o, s?s, s?b}",
		    .keys = {"dir", "steps", "error", "full"},
		    .more = proto_ckpt_inv_more,
		},
	},
    [PROTO_CKPT_PUSH] =
	{
	    .name = "CKPT_PUSH",
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s:b, s:I}",
		    .keys = {"id", "rank", "step", "peer", "node"},
		    .ranges = {{"id", 1, PROTO_INT_ANY},
			       {"rank", 0, INT_MAX},
			       {"step", 0, PROTO_INT_ANY},
			       {"node", 0, INT_MAX}},
		},
	},
    [PROTO_CKPT_DATA] =
	{
	    .name = "CKPT_DATA",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:b}",
		    .keys = {"id", "to", "rank", "step", "file", "offset",
			     "total", "last"},
		    .ranges = {{"id", 1, PROTO_INT_ANY},
			       {"to", 0, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"step", 0, PROTO_INT_ANY},
			       {"offset", 0, PROTO_INT_ANY},
			       {"total", 0, PROTO_INT_ANY}},
		    .more = proto_ckpt_data_more,
		},
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:b}",
		    .keys = {"id", "from", "rank", "step", "file", "offset",
			     "total", "last"},
		    .ranges = {{"id", 1, PROTO_INT_ANY},
			       {"from", 0, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"step", 0, PROTO_INT_ANY},
			       {"offset", 0, PROTO_INT_ANY},
			       {"total", 0, PROTO_INT_ANY}},
		    .more = proto_ckpt_data_more,
		},
	    .data_max = PROTO_CKPT_CHUNK,
	},
    [PROTO_CKPT_ACK] =
	{
	    .name = "CKPT_ACK",
	    .to_herd =
		{
		    .format = "{s:I, s:b, s?I, s?s, s?s}",
		    .keys = {"id", "ok", "bytes", "error", "path"},
		    .ranges = {{"id", 1, PROTO_INT_ANY},
			       {"bytes", 0, PROTO_INT_ANY}},
		},
	},
    [PROTO_CKPT_PERSIST] =
	{
	    .name = "CKPT_PERSIST",
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s:b, s:s}",
		    .keys = {"id", "rank", "step", "peer", "dir"},
		    .ranges = {{"id", 1, PROTO_INT_ANY},
			       {"rank", 0, INT_MAX},
			       {"step", 0, PROTO_INT_ANY}},
		},
	},
};
