/* The node loop of the node agent (`ncclguard-watchdog node-loop`): watches
 * the pods of its own node through the API server, classifies the
 * ring-check verdicts, and keeps the Node's NCCLHealthy condition, Events,
 * state annotation, taint and re-validation (docs/nodeloop.md). */
#ifndef NCCLGUARD_WD_NODELOOP_H
#define NCCLGUARD_WD_NODELOOP_H

/*
 * Runs the node-loop subcommand; argv[0] is "node-loop". Returns the exit
 * status: 0 after --run-for or a --classify that printed, 2 on bad usage,
 * 1 when it cannot start (no node name, no API server). Calls
 * curl_global_init itself. One thread runs the loop; a second serves
 * /metrics when asked.
 */
int nodeloop_main(int argc, char **argv);

#endif
