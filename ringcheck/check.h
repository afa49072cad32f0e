/* The ring check from start to verdict: phases, diagnosis, outcome. */
#ifndef NCCLGUARD_RINGCHECK_CHECK_H
#define NCCLGUARD_RINGCHECK_CHECK_H

#include "ringcheck/opts.h"

/*
 * Runs the whole check under the options *o and tells the result (stdout,
 * --report, termination log, fallback file). Returns the process exit code
 * (0 pass, 1 internal, 2 CUDA, 3 NCCL, 4 timeout, 7 wrong results,
 * 8 bandwidth, 9 environment). Call sv_init() first. Not thread-safe.
 */
int check_run(const struct rc_opts *o);

#endif
