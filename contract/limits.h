/* Bounds on ncclguard-ringcheck's arguments, shared by the binary's parser
 * and the webhook that writes its arguments, so that the webhook never
 * injects a check the binary would refuse. */
#ifndef NCCLGUARD_CONTRACT_LIMITS_H
#define NCCLGUARD_CONTRACT_LIMITS_H

/* --expect-gpus: GPUs on one pod (one NCCL rank each). */
#define RINGCHECK_MIN_GPUS 1
#define RINGCHECK_MAX_GPUS 32

/* --bw-bytes: size of the bandwidth phase's AllReduce. */
#define RINGCHECK_MAX_BW_BYTES ((size_t)64 << 30)

/* The cross-node phase (--multi-node auto). */
#define RINGCHECK_MIN_PORT 1
#define RINGCHECK_MAX_PORT 65535
#define RINGCHECK_MIN_MN_TIMEOUT_S 1
#define RINGCHECK_MAX_MN_TIMEOUT_S 3600
#define RINGCHECK_DEFAULT_MN_TIMEOUT_S 120
/* Pods (nodes) in one job's check. */
#define RINGCHECK_MAX_NODES 64
/* Ranks in one cross-node communicator: every node at its most GPUs. A
 * node's claim of its GPU count is checked against RINGCHECK_MIN_GPUS and
 * RINGCHECK_MAX_GPUS, so the sum never overflows. */
#define RINGCHECK_MAX_WORLD (RINGCHECK_MAX_NODES * RINGCHECK_MAX_GPUS)
/* --min-busbw and --min-busbw-net: GB/s. */
#define RINGCHECK_MAX_BUSBW_GBPS 1000000

#endif
