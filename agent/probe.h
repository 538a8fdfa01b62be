/* probe.h — `herd-agent probe`, the rank program of `herd bench`: a TCP
 * ring all-reduce between the job's nodes, timed per size (probe.c). */
#ifndef HERD_AGENT_PROBE_H
#define HERD_AGENT_PROBE_H

/* Runs the probe as a rank (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
 * from the environment); argv[0] is "probe".  Returns the exit status. */
int probe_main(int argc, char **argv);

#endif
