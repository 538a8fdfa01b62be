/* keeper.h — the private contract between the agent's side of the rank
 * keeper (keeper.c) and the keeper itself (keeper_main.c). */
#ifndef HERD_AGENT_KEEPER_H
#define HERD_AGENT_KEEPER_H

#include <stddef.h>

#include "herd/proto.h"

/* The spec's first string; /2: the cpu list is keeper.c's own "A-B,C"
 * form, parsed without hwloc. */
#define KEEPER_MAGIC "herd-keeper/2"
/* The spec holds at most a LAUNCH frame's command and environment plus
 * the agent's own environment: twice a frame is far above it, and far
 * below what would hurt a node. */
#define KEEPER_SPEC_MAX (2 * (size_t)PROTO_FRAME_MAX)

#endif
