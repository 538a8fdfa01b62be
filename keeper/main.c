/* keeper/main.c — the rank keeper as a program of its own: the agent
 * embeds it (agent/keeper_image.c) and runs it for each rank from a
 * sealed memfd (agent/keeper.c says why).  Linked with libc alone. */
#include "keeper/keeper.h"

int main(int argc, char **argv)
{
	return keeper_main(argc, argv);
}
