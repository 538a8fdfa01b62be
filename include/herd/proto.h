/* proto.h — the wire between herd and herd-agent.
 *
 * The agent speaks over a byte stream: the SSH channel's stdin/stdout, a
 * pipe pair (local transport) or a TCP socket (slurm transport).  The
 * stream carries frames:
 *
 *   u32 len        bytes that follow this field, big-endian
 *   u8  version    PROTO_VERSION; any other value is an error
 *   u8  type       enum proto_type
 *   u16 reserved   zero
 *   u32 json_len   length of the JSON header that follows
 *   json_len bytes a JSON object (UTF-8), the message's fields
 *   len-8-json_len bytes of data: opaque payload (rank output bytes, PMIx
 *                  blobs); binary-safe, so output is never re-encoded
 *
 * Every frame has a stated maximum (the reader's max_frame, at most
 * PROTO_FRAME_MAX): a peer that announces more is rejected before a byte
 * is buffered.  A decoder error is fatal for the stream.
 *
 * What each frame says: every decoded frame passes proto_frame_check()
 * before its receiver acts on it, against one table in proto_rules.c (a
 * strict json_unpack_ex() format per type and direction, value ranges,
 * data limits).  An unknown key, a missing or mistyped one, a value out of
 * range, data where none belongs or a frame sent the wrong way is a
 * protocol error: herd fails the node, an agent sends ERROR and exits as
 * on a broken stream.  The table, in words ("?" marks an optional key;
 * I: a JSON integer; ranges inclusive; no key other than those listed):
 *
 *  HELLO       agent -> herd, no data; the agent's first frame.
 *              {version: string (HERD_VERSION), hostname: string,
 *               addrs: [{ifname: string, addr: string, netmask: string}],
 *               cores: I 1.., pid: I 1..,
 *               topo?: object (topo_summary(); topo_json.c parses it),
 *               topo_error?: string (why there is no topo)}
 *              exactly one of topo and topo_error.  A HELLO whose version
 *              is another string is checked no further, so that herd can
 *              name both versions.
 *  LAUNCH      herd -> agent, no data: start the ranks of an attempt.
 *              {attempt: I 1.., command: string, grace_ms: I 0..,
 *               env: {NAME: string...} (job-wide),
 *               ranks: [{rank: I 0.., env: {NAME: string...},
 *                        cpus?: string (cpu list), mem_node?: I 0..}]
 *                      (at most PROTO_LAUNCH_RANKS_MAX),
 *               workdir?: string,
 *               pmix?: {job: string, nodes: string, ppn: string,
 *                       job_size: I 1.., num_nodes: I 1.., node_id: I 0..,
 *                       hostname: string, local: [I 0..]},
 *               progress_timeout_ms?: I 1..,
 *               metrics_interval_ms?: I 100.. (METRICS period; herd
 *                      always sends it, an agent takes 1000 without),
 *               patterns?: [{name: string, regex: string}]
 *                      (metrics.patterns: at most PROTO_PATTERNS_MAX; name
 *                      as in METRICS' values, regex 1..PROTO_PATTERN_REGEX_MAX
 *                      bytes, an ERE the agent compiles),
 *               survivors?: true (restart.survivors: keep: ranks that
 *                      all speak the elastic protocol are not restarted
 *                      when a node fails, so their node holds the refill
 *                      of its warm slots)}
 *              NAME: not empty, no '='; at most 65,536 per map.
 *  OUTPUT      agent -> herd, data: 1..PROTO_OUTPUT_CHUNK bytes of output
 *              {rank: I 0.., fd: I 1..2 (stdout, stderr), attempt: I 0..}
 *  EXIT        agent -> herd, no data: a rank ended.
 *              {rank: I 0.., attempt: I 0.., code: I 0..255 or null,
 *               signal: I 1..NSIG-1 or null (exactly one is null),
 *               error?: string, errno?: I 0.. (together: the rank never
 *               ran), pmix_connected?: bool (PMIx jobs)}
 *  SIGNAL      herd -> agent, no data: {signal: I 1..NSIG-1, ranks?:
 *              [I 0..] (1..PROTO_JCTRL_RANKS_MAX)}: without ranks, to every
 *              rank (herd's own signals); with ranks, a PMIx_Job_control
 *              signal to those of the node's job ranks, delivered as on
 *              the asker's node (agent/pmix/api.c).
 *              agent -> herd, no data: a PMIx_Job_control signal for
 *              ranks of other nodes: {attempt: I 0.., signal: I
 *              1..NSIG-1, ranks: [I 0..] (1..PROTO_JCTRL_RANKS_MAX)}; herd
 *              passes it on to each node hosting some of them.
 *  STOP        herd -> agent, no data: stop the ranks (signal, SIGKILL
 *              after grace_ms); exit after STOPPED when exit is true.
 *              {grace_ms: I 0.., exit: bool, signal: I 1..NSIG-1}
 *  HEARTBEAT   herd -> agent, no data, every 2 x interval_ms
 *              (spec_herd_beat_ms); the agent answers at once:
 *              {interval_ms: I 1.., timeout_ms: I interval_ms..}
 *              agent -> herd, no data: liveness only (what is measured
 *              travels in METRICS):
 *              {seq: I 1.., attempt: I 0.. (0 before any LAUNCH),
 *               hung: [{rank: I 0.., silent_ms: I 0..}]}
 *  ERROR       agent -> herd, no data: {message: string, stage?: string}
 *              before the stream closes.  A transport that fails for a
 *              node writes one in the agent's place, with the stage
 *              ("connect", "auth", "host key", "agent", "srun").  An
 *              agent sent SIGTERM, SIGINT or SIGHUP by someone else
 *              sends one with stage "signal" as it stops its ranks: herd
 *              takes the node out without holding it against the node.
 *  STOPPED     agent -> herd, no data: {attempt: I 0..}: every rank is gone
 *  FENCE       agent -> herd, data: the node's PMIx fence contribution
 *              (0..PROTO_FRAME_MAX bytes).  {attempt: I 0.., seq: I 1..
 *              (the agent's own number for it, unique per attempt),
 *              procs?: string (the fence's processes, the same on every
 *              node: "*" every rank of the job, or sorted rank ranges
 *              "0-3,6"; absent: "*"), count?: I 1.. (how many fences over
 *              these procs this agent has joined in the attempt, this one
 *              included; absent: seq)}.  (procs, count) names the fence
 *              everywhere; herd gathers from exactly the nodes hosting
 *              procs.
 *  FENCE_DONE  herd -> agent, data: the contributions of the fence's
 *              nodes in node order.  {attempt: I 1.., seq: I 1.. (that
 *              agent's own seq), status: I (0: done)}
 *  ABORT       agent -> herd, no data: a rank called PMIx_Abort.
 *              {attempt: I 0.., rank: I 0.., status: I, message: string}
 *  PMIX_LOG    agent -> herd, no data: a rank called PMIx_Log; what it
 *              logged as text.  {attempt: I 0.., rank: I 0..,
 *               entries: [{key: string (1..PMIX_MAX_KEYLEN bytes),
 *                          value: string (..PROTO_PMIX_LOG_VALUE_MAX
 *                          bytes)}] (1..PROTO_PMIX_LOG_ENTRIES_MAX)}
 *  METRICS     agent -> herd, no data, every metrics interval once ranks
 *              were launched: the node's sample; counters are cumulative
 *              since the agent started (herd computes rates).
 *              {t: I 0.. (agent wall clock ms), attempt: I 0..,
 *               load1: number >= 0, cpus: I 1..,
 *               ranks: [{rank: I 0.., cpu_ms: I 0.., rss_kb: I 0..,
 *                        touches?: I 0.. (touches of its
 *                        HERD_PROGRESS_FILE since the rank started,
 *                        every one counted; absent: not watched)}],
 *               net: [{dev: string, rx_bytes, tx_bytes, rx_packets,
 *                      tx_packets, rx_drops, tx_drops, rx_errors,
 *                      tx_errors: I 0..}] (non-loopback interfaces),
 *               rdma: [{dev: string, port: I 1.., rx_bytes, tx_bytes
 *                       (bytes: the port counters' 4-byte words x 4),
 *                       link_downed, symbol_error, rcv_errors: I 0..}],
 *               gpus: [{index: I 0.., util_pct?: I 0..100, mem_used?,
 *                       mem_total? (bytes), temp_c?: I, power_mw?,
 *                       sm_mhz?, ecc_corrected?, ecc_uncorrected?,
 *                       throttle? (NVML throttle reason bits),
 *                       xid? (the last Xid event): I 0..}]
 *                      (a value NVML cannot give is left out),
 *               gpu_error?: string (why there are no GPU values),
 *               train: [{rank: I 0.., records: I 0..,
 *                        values: {NAME: number}}]}
 *              net, rdma and gpus hold at most PROTO_METRICS_DEVS_MAX
 *              entries; values at most PROTO_TRAIN_VALUES_MAX, NAME as
 *              in metrics.patterns.  values are each rank's latest, but
 *              "tokens" and "samples" are sums over its records.
 *  STACKS      herd -> agent, no data: a rank hangs; send the stacks of
 *              every running rank (agent/stacks.c).  {attempt: I 1..}
 *              agent -> herd, no data: the answer, once every rank's
 *              stack is in or the agent's own bound passed:
 *              {attempt: I 0..,
 *               ranks: [{rank: I 0.., method: "python" | "gdb" | "none",
 *                        frame?: string (innermost frame of the main
 *                               thread, "FUNC (file:line)"),
 *                        in_collective: bool, last_sign_ms: I 0.. (wall
 *                        clock ms of its last output or progress touch),
 *                        error?: string (why there is no frame)}]}
 *              (at most PROTO_LAUNCH_RANKS_MAX ranks)
 *  CTL_REQ     client -> herd (control socket), no data:
 *              {op: "attach" | "stop" | "info"}
 *  CTL_MSG     herd -> client (control socket), data: 0..PROTO_CTL_DATA_MAX
 *              bytes.  {kind: "out" | "err" | "status" | "info" | "end",
 *               missed?: I 0.. (err: a notice of this many bytes of output
 *                      the client missed),
 *               id?, name?, state?: string, attempt?: I 0..,
 *               nodes?: I 0.., pid?: I 1.., message?: string (info: all of
 *                      id, name, state, attempt, nodes and pid),
 *               status?: I 0..255 (end: the job's exit status, only then)}
 *              out and err carry one tagged output line (the bytes the
 *              terminal would get), status the status line's text (no
 *              escape codes); info and end carry no data.
 *  CHECK       herd -> agent, no data (the health gate): run the
 *              node's checks.  {workdir?, checkpoint_dir?: string
 *              (directories that must exist, be writable and hold
 *              min_free bytes), min_free: I 0.., gpus: I -1..64 (GPUs
 *              expected; -1: none asked for), master_addr?: string (the
 *              interface on its network must be up), check_command?:
 *              string (run as sh -c; non-zero is unhealthy),
 *              check_timeout_ms: I 1.., t_ms: I 0.. (herd's wall clock)}
 *              agent -> herd, no data: the answer.
 *              {t_ms: I 0.. (the agent's wall clock when CHECK came),
 *               held_ms: I 0.. (how long it kept CHECK before answering:
 *               herd takes it out of the round trip for the clock offset),
 *               checks: [{name: string (not empty), status: "ok" |
 *                         "fail" | "skipped", reason?: string,
 *                         value?: string, port?: string (rdma: "dev/N"),
 *                         rate?: number >= 0 (rdma: Gb/s)}]
 *                       (at most PROTO_CHECKS_MAX)}
 *  NETPROBE    herd -> agent, no data: one transfer of the gate's network
 *              probe.  {round: I 1.., op: "listen" | "connect",
 *               addr: string (listen: the address to bind; connect: the
 *               peer's), port?: I 1..65535 (connect only),
 *               bytes: I 1..PROTO_NETPROBE_BYTES_MAX (sent each way),
 *               timeout_ms: I 1..PROTO_NETPROBE_TIMEOUT_MAX,
 *               peer?: string (listen only: the IPv4 address the transfer
 *               must come from; a connection from any other is closed
 *               and not counted)}
 *              agent -> herd, no data: {round: I 1.., op: "listening" |
 *               "result", port?: I 1..65535 (listening only),
 *               rx_bytes?, rx_us?: I 0.. (result: bytes received from the
 *               peer and how long they took, in microseconds), error?:
 *               string (result:
 *               instead of rx_bytes and rx_us)}
 *  DMODEX      agent -> herd, no data: a PMIx direct modex request, the
 *              data a remote rank committed.  {attempt: I 0.., seq: I 1..
 *              (the agent's request number), rank: I 0..}
 *              herd -> agent, no data: the same request, for the agent
 *              hosting rank, from node `from`.  {attempt: I 1.., seq: I
 *              1.., rank: I 0.., from: I 0.. (herd's node index)}
 *  DMODEX_DATA agent -> herd, data: the answer (0..PROTO_FRAME_MAX bytes,
 *              PMIx_server_dmodex_request's blob).  {attempt: I 0.., seq:
 *              I 1.., rank: I 0.., from: I 0.., status: I (0: done;
 *              < 0: the PMIx status of the failure)}
 *              herd -> agent, data: the same, relayed to the node that
 *              asked.  {attempt: I 1.., seq: I 1.., rank: I 0.., status: I
 *              (0: done; PROTO_DMODEX_NOT_FOUND: no such rank;
 *              PROTO_DMODEX_UNREACH: its node is gone; < 0: PMIx status)}
 *  PUBLISH     agent -> herd, data: each key's value packed by PMIx
 *              (PMIx_Data_pack of one pmix_value_t), in key order, sizes
 *              in keys[].size; at most PROTO_PUBSUB_DATA_MAX bytes.
 *              {attempt: I 0.., id: I 1.., rank: I 0.., nspace: string,
 *               range: "local" | "namespace" | "session" | "global" |
 *               "custom" | "proc_local", persist: "indef" | "first_read" |
 *               "proc" | "app" | "session",
 *               keys: [{key: string, size: I 0..PROTO_PUBSUB_VALUE_MAX}]}
 *              (1..PROTO_PUBSUB_KEYS_MAX keys of 1..PROTO_PUBSUB_KEY_MAX
 *              bytes; nspace at most PROTO_PUBSUB_NSPACE_MAX)
 *  LOOKUP      agent -> herd, no data: {attempt, id, rank, nspace, range
 *              (as PUBLISH), keys: [{key: string}], wait: I -1..
 *              PROTO_PUBSUB_KEYS_MAX (-1: answer at once; 0: wait for
 *              every key; N: for N of them), timeout_ms: I 0.. (0: until
 *              the attempt ends)}
 *  UNPUBLISH   agent -> herd, no data: {attempt, id, rank, nspace, range,
 *              keys: [{key: string}] (0 keys: every key of the rank)}
 *  PUBSUB_DONE herd -> agent, data: the values found, packed as sent, in
 *              found[] order.  {attempt: I 1.., id: I 1.., status: "ok" |
 *              "partial" | "not_found" | "duplicate" | "timeout" |
 *              "limit" | "ended", found?: [{key, nspace: string, rank: I
 *              0.., size: I 0..PROTO_PUBSUB_VALUE_MAX}] (LOOKUP only)}
 *  EVENT       agent -> herd, data: the event's pmix_info_t array packed
 *              by PMIx (at most PROTO_EVENT_DATA_MAX bytes): a rank's
 *              PMIx_Notify_event for ranks elsewhere.  {attempt: I 0..,
 *              code: I, rank: I 0.. (the source), nspace: string, range:
 *              (as PUBLISH), procs: [I 0..] (custom range: the ranks it
 *              is for; empty: every rank; at most
 *              PROTO_LAUNCH_RANKS_MAX)}
 *              herd -> agent, data as sent: deliver to the node's ranks.
 *              {attempt: I 1.., code: I, rank: I 0.., nspace: string,
 *               range: string (as PUBLISH)}
 *  PROC_FAILED herd -> agent, no data: ranks of the attempt failed; the
 *              agent notifies its ranks (PMIx event) before herd stops
 *              them.  {attempt: I 1.., kind: "exit" | "signal" | "node",
 *               status: I 0..255, host: string,
 *               ranks: [I 0..] (1..PROTO_LAUNCH_RANKS_MAX)}
 *              Each of the four may carry ns?: I 0.. (the rank is of
 *              spawn ns's namespace; absent or 0: the job's),
 *              relayed as it came.
 *  SPAWN       agent -> herd, no data: a process called PMIx_Spawn.
 *              {attempt: I 0.., seq: I 1.., ns: I 0.. (the asker's
 *               namespace: 0 the job's, N spawn N), rank: I 0..,
 *               apps: [{cmd: string, argv: [string], env: [string]
 *                       ("NAME=VALUE"), cwd?: string,
 *                       np: I 1..PROTO_SPAWN_PROCS_MAX,
 *                       hosts?: [string] (PMIX_HOST, PMIX_ADD_HOST)}]
 *                      (argv: the arguments after argv[0]; cmd is looked
 *                      up in PATH)
 *                      (1..PROTO_SPAWN_APPS_MAX; argv and env at most
 *                      PROTO_SPAWN_ARGS_MAX each)}
 *  SPAWN_LAUNCH herd -> agent, no data: spawn N's namespace, to every
 *              member node (register it; start the local processes):
 *              {attempt: I 1.., spawn: I 1.., parent_ns: I 0..,
 *               parent_rank: I 0.., size: I 1..PROTO_SPAWN_PROCS_MAX,
 *               nodes: string, ppn: string (its node and process maps,
 *               nodes with processes only), num_nodes: I 1..,
 *               node_id: I 0.., hostname: string,
 *               apps: [as SPAWN's, without hosts],
 *               local: [{rank: I 0.. (in the namespace), id: I 0..
 *                        (its number on the wire: OUTPUT, EXIT),
 *                        app: I 0.., cpus?: string}]}
 *  SPAWN_UP    agent -> herd, no data: {attempt: I 0.., spawn: I 1..,
 *               error?: string (the namespace or a process could not
 *               be set up)}
 *  SPAWN_DONE  herd -> agent, no data: the answer to SPAWN.
 *              {attempt: I 1.., seq: I 1.., status: I (0 or a PMIx
 *               status), spawn?: I 1.. (status 0), error?: string}
 *  CONNECT     agent -> herd: PMIx_Connect (op "connect") or
 *              PMIx_Disconnect ("disconnect") by the node's processes, or
 *              a PMIx fence over processes of a spawned namespace
 *              ("fence"; data: the node's contribution,
 *              0..PROTO_FRAME_MAX bytes; no data with the other ops).
 *              {attempt: I 0.., seq: I 1.., op: string,
 *               procs: [{ns: I 0.., rank: I -1.. (-1: all)}]
 *                      (1..PROTO_CONNECT_PROCS_MAX)}
 *  RANK_CTL    both ways, no data: one message of a rank's control
 *              channel (HERD_CONTROL, agent/control.c), the rank's own
 *              JSON object carried as msg.  agent -> herd: {attempt: I 0..,
 *              rank: I 0.., conn: I 1.. (the rank's connection that
 *              sent it), msg: {op: "hello"|"stepping"|"store", ...}};
 *              herd -> agent: {attempt: I 1.., rank: I 0.., to: I 0..
 *              (0: every connection of the rank that said hello),
 *              msg: {op: string, ...}}.
 *  CONNECT_DONE herd -> agent: every node hosting the procs sent the
 *              same CONNECT (op and procs, in any order); data: a fence's
 *              contributions in node order.  {attempt: I 1.., seq: I 1..,
 *               status: I (0 or a PMIx status)}
 *  STARTED     agent -> herd, no data: a rank of the attempt started
 *              (before its EXIT).  {attempt: I 0.., rank: I 0..,
 *               warm: bool (from a warm interpreter, agent/warm.c)}
 *
 *  Checkpoints in memory (the memory tier, agent/ckpt/mem.c):
 *  CKPT_CONF   herd -> agent, no data, after HELLO: the node's tier.
 *              {dir: string (checkpoint.memory_dir), job: string (a
 *              plain name: the job's key in the tier), max: I 0..
 *              (memory_max bytes; 0: half of dir's filesystem), keep:
 *              bool (keep_memory)}
 *  CKPT_INV    agent -> herd, no data: the node's tier, whole, after
 *              CKPT_CONF and on every change.  {dir: string (the job's
 *              directory in the tier; "" none), steps: [{rank: I 0..,
 *              step: I 0.., bytes: I 0.., peer: bool (a copy of another
 *              node's rank)}] (complete steps only, at most
 *              PROTO_CKPT_STEPS_MAX), error?: string (why there is no
 *              tier), full?: bool (memory_max is reached)}
 *  CKPT_PUSH   herd -> agent, no data: send rank's step (own or peer
 *              copy) to herd's node `node`, as CKPT_DATA under id.
 *              {id: I 1.., rank, step, peer: bool, node: I 0..}
 *  CKPT_DATA   both ways, data: 0..PROTO_CKPT_CHUNK bytes of one file of
 *              the step at offset; total: the whole step's bytes, the
 *              same in every chunk; last: the step's final chunk.  To
 *              herd: {id, to: I 0.. (herd's index of the destination),
 *              rank, step, file: string (a plain name), offset: I
 *              0..total (bytes of the step before this chunk), total: I
 *              0.., last: bool}; to an agent the same with from: I 0..
 *              (the source) instead of to.
 *  CKPT_ACK    agent -> herd, no data: transfer id is whole at the
 *              destination (ok) or failed there or at the source (error),
 *              or a CKPT_PERSIST is done (path).  {id, ok: bool, bytes?:
 *              I 0.., error?: string, path?: string}
 *  CKPT_PERSIST herd -> agent, no data: write rank's step to dir as
 *              dir/step_%08d, whole or not at all.  {id, rank, step,
 *              peer: bool, dir: string}
 *
 * Integers named "I 0.." without an upper bound fit in an int when they
 * count ranks, attempts or fences (rank, attempt, seq, ...); durations,
 * byte and time counters may use all of a JSON integer.
 */
#ifndef HERD_PROTO_H
#define HERD_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "herd/err.h"

#define PROTO_VERSION 1

/* 64 MiB: the largest frame is a PMIx fence reply carrying every node's
 * blob (a few KiB per node at 1,000+ nodes); output is sent in chunks of
 * at most PROTO_OUTPUT_CHUNK. */
#define PROTO_FRAME_MAX (64u * 1024 * 1024)
/* 1 MiB: JSON headers are small; this bounds what jansson parses. */
#define PROTO_JSON_MAX (1024u * 1024)
/* 64 KiB: rank output is forwarded in chunks of whole lines up to this. */
#define PROTO_OUTPUT_CHUNK (64u * 1024)
#define PROTO_HEADER_SIZE  12

enum proto_type {
	PROTO_HELLO = 1,
	PROTO_LAUNCH,
	PROTO_OUTPUT,
	PROTO_EXIT,
	PROTO_SIGNAL,
	PROTO_STOP,
	PROTO_HEARTBEAT,
	PROTO_ERROR,
	PROTO_STOPPED,
	PROTO_FENCE,
	PROTO_FENCE_DONE,
	PROTO_ABORT,
	PROTO_METRICS,
	PROTO_CTL_REQ,
	PROTO_CTL_MSG,
	PROTO_STACKS,	/* stacks of hung ranks */
	PROTO_CHECK,	/* the health gate's checks */
	PROTO_NETPROBE,	/* the gate's pairwise network probe */
	PROTO_DMODEX,	   /* PMIx direct modex request */
	PROTO_DMODEX_DATA, /* its answer */
	PROTO_PUBLISH,	/* PMIx publish / lookup / unpublish */
	PROTO_LOOKUP,
	PROTO_UNPUBLISH,
	PROTO_PUBSUB_DONE,
	PROTO_EVENT,	/* PMIx events between ranks */
	PROTO_PROC_FAILED, /* herd's failures as PMIx events */
	PROTO_PMIX_LOG,	/* PMIx_Log to herd's event log */
	PROTO_SPAWN,	    /* PMIx_Spawn asked by a rank */
	PROTO_SPAWN_LAUNCH, /* start a spawn's processes */
	PROTO_SPAWN_UP,	    /* a node's part of a spawn started */
	PROTO_SPAWN_DONE,   /* the spawn's answer to its asker */
	PROTO_CONNECT,	    /* PMIx_Connect/Disconnect */
	PROTO_CONNECT_DONE, /* every node hosting them is in */
	/* survivors keep training: a rank's control channel */
	PROTO_RANK_CTL,
	/* checkpoints in memory (agent/ckpt/mem.c, launcher/ctl/ckpt.c) */
	PROTO_CKPT_CONF,    /* the node's memory tier: where, how big */
	PROTO_CKPT_INV,	    /* a node's tier: which steps are complete */
	PROTO_CKPT_PUSH,    /* copy a step to another node */
	PROTO_CKPT_DATA,    /* a chunk of that copy, relayed by herd */
	PROTO_CKPT_ACK,	    /* a copy or a persist is over */
	PROTO_CKPT_PERSIST, /* write a step to checkpoint.dir */
	/* warm interpreters */
	PROTO_STARTED,	    /* a rank started, warm or cold */
	PROTO_TYPE_MAX_ = PROTO_STARTED,
};

/* DMODEX_DATA's status from herd itself (the rank's node could not be
 * asked). */
#define PROTO_DMODEX_NOT_FOUND 1 /* the rank is not in the attempt */
#define PROTO_DMODEX_UNREACH   2 /* its node is not up */

/* Which way a frame travels, named by its receiver.  The control socket
 * of a job (launcher/ctl/sock.c) carries CTL_REQ and CTL_MSG only; the
 * agent's stream never does. */
enum proto_dir {
	PROTO_TO_AGENT = 1,   /* herd -> agent */
	PROTO_TO_HERD = 2,    /* agent -> herd */
	PROTO_TO_CONTROL = 3, /* attach/stop client -> herd's control socket */
	PROTO_TO_CLIENT = 4,  /* herd's control socket -> client */
};

/* 128 KiB: a CTL_MSG's data is one tagged output line as the terminal
 * gets it (a tag of at most a few hundred bytes and a line cut at
 * PROTO_OUTPUT_CHUNK), a status line or a notice. */
#define PROTO_CTL_DATA_MAX (2 * PROTO_OUTPUT_CHUNK)

/* 4,096: ranks of one node in a LAUNCH (and in an agent's METRICS);
 * far more than any node has cores. */
#define PROTO_LAUNCH_RANKS_MAX 4096
/* The ranks one job-control signal names (SIGNAL with ranks). */
#define PROTO_JCTRL_RANKS_MAX 65536

/* 64: network devices, RDMA ports and GPUs of one node in a METRICS. */
#define PROTO_METRICS_DEVS_MAX 64
/* 64: training values of one rank in a METRICS. */
#define PROTO_TRAIN_VALUES_MAX 64
/* 256: the checks of one node in a CHECK answer (a few per RDMA port). */
#define PROTO_CHECKS_MAX 256
/* PMIX_LOG: entries of one PMIx_Log, and each value's bytes. */
#define PROTO_PMIX_LOG_ENTRIES_MAX 16
#define PROTO_PMIX_LOG_VALUE_MAX   1024
/* 1 GiB and 10 minutes: the most a NETPROBE transfer may move and take. */
#define PROTO_NETPROBE_BYTES_MAX (1LL << 30)
#define PROTO_NETPROBE_TIMEOUT_MAX 600000

/* publish/lookup: at most 64 keys per call, a key of at most
 * 511 bytes (PMIX_MAX_KEYLEN), a namespace of 255 (PMIX_MAX_NSLEN), a
 * value of 64 KiB packed, 1 MiB in one PUBLISH.  An event's packed info
 * is at most 64 KiB. */
#define PROTO_PUBSUB_KEYS_MAX	 64
#define PROTO_PUBSUB_KEY_MAX	 511
#define PROTO_PUBSUB_NSPACE_MAX	 255
#define PROTO_PUBSUB_VALUE_MAX	 (64 * 1024)
#define PROTO_PUBSUB_DATA_MAX	 (1024u * 1024)
#define PROTO_EVENT_DATA_MAX	 (64u * 1024)
/* PMIx_Spawn: apps of one spawn, processes of one spawn (and
 * of all spawns of an attempt together: ctl/pmix/spawn.c), argv or env
 * entries of one app; processes named in one PMIx_Connect. */
#define PROTO_SPAWN_APPS_MAX	16
#define PROTO_SPAWN_PROCS_MAX	256
#define PROTO_SPAWN_ARGS_MAX	4096
#define PROTO_CONNECT_PROCS_MAX 65536

/* 64 patterns of at most 1,024 bytes in a LAUNCH: spec.h's
 * SPEC_PATTERNS_MAX and SPEC_PATTERN_MAX. */
#define PROTO_PATTERNS_MAX	64
#define PROTO_PATTERN_REGEX_MAX 1024

/* Checkpoints in memory: 4 MiB chunks of a copy (well under
 * PROTO_FRAME_MAX, so other frames interleave); 4 x 4,096 steps in one
 * inventory (two steps of own and peer copies per rank); names of files
 * in a step directory and of job keys at most 255 bytes (NAME_MAX). */
#define PROTO_CKPT_CHUNK     (4u * 1024 * 1024)
#define PROTO_CKPT_STEPS_MAX (4 * PROTO_LAUNCH_RANKS_MAX)
#define PROTO_CKPT_NAME_MAX  255

/* A metric name (metrics.patterns, METRICS' values, $HERD_METRICS keys):
 * letters, digits and '_', 1 to 64 bytes, not a digit first. */
bool proto_metric_name_ok(const char *name);

/* FENCE's procs: "*" (returns 1) or ascending, disjoint rank ranges
 * "0-3,6,9-12" (returns 0 after calling fn, when not NULL, for each
 * range, lo <= hi); -1 when malformed or when fn returns < 0. */
int proto_procs_walk(const char *s, int (*fn)(void *arg, int lo, int hi),
		     void *arg);

/* "HELLO", "LAUNCH", ...; "?" for unknown values. */
const char *proto_type_name(int type);

/* Encodes one frame.  body may be NULL (sent as {}), else must be an
 * object; it is dumped compact (JSON_COMPACT).  data may be NULL when
 * data_len is 0.  Returns a malloc'd buffer of *out_len bytes the caller
 * frees, or NULL with err (unknown type, body not an object, JSON over
 * PROTO_JSON_MAX, frame over PROTO_FRAME_MAX, a string holding NUL or
 * invalid UTF-8, which no reader would accept). */
char *proto_encode(enum proto_type type, const json_t *body, const void *data,
		   size_t data_len, size_t *out_len, struct herd_err *err);

/* One decoded frame.  The caller owns it; proto_frame_free() releases it. */
struct proto_frame {
	enum proto_type type;
	json_t *body;	     /* always an object */
	unsigned char *data; /* NULL when data_len is 0 */
	size_t data_len;
};

void proto_frame_free(struct proto_frame *frame);

/* The wire contract (the table above): may a frame of this type, body and
 * data travel to `to`?  Returns 0, or -1 with err "protocol error: TYPE
 * frame from herd|agent: what is wrong" (a type that does not travel that
 * way, a body that does not match, a value out of range, data where none
 * belongs).  Both dispatchers call it before they act on a frame. */
int proto_frame_check(const struct proto_frame *f, enum proto_dir to,
		      struct herd_err *err);

/* Incremental decoder for one stream. */
struct proto_reader;

/* max_frame: the largest len accepted (clamped to [8, PROTO_FRAME_MAX]).
 * The reader never buffers more than max_frame + PROTO_HEADER_SIZE bytes.
 * Returns NULL (errno ENOMEM) when out of memory; free with
 * proto_reader_free() (NULL is accepted). */
struct proto_reader *proto_reader_new(size_t max_frame);
void proto_reader_free(struct proto_reader *r);

/* Appends bytes read from the stream.  Returns 0, or -1 with err when
 * buffering them would exceed one frame plus a header (the peer is
 * misbehaving) or when the pending frame's header is already malformed
 * (its length over max_frame, a wrong version, type or reserved bytes):
 * a bad length is refused before its body is buffered.  Callers read at
 * most max_frame + PROTO_HEADER_SIZE bytes and drain proto_reader_next()
 * until it returns 0 before the next feed. */
int proto_reader_feed(struct proto_reader *r, const void *buf, size_t len,
		      struct herd_err *err);

/* Takes the next complete frame out of the buffer.  Returns 1 and fills
 * *frame (caller owns it), 0 when more bytes are needed (*frame NULL), -1
 * with err on a malformed or oversized frame: the stream is then unusable
 * and every later feed or next repeats the error.  Rejected: len < 8 or
 * over max_frame, version != PROTO_VERSION, type 0 or over PROTO_TYPE_MAX_,
 * reserved != 0, json_len over len - 8 or PROTO_JSON_MAX, JSON that is not
 * one object of valid UTF-8 (duplicate keys and escaped NULs are refused). */
int proto_reader_next(struct proto_reader *r, struct proto_frame **frame,
		      struct herd_err *err);

#endif
