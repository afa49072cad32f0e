/* The data the ring check's collectives carry, and the sums they must give:
 * small integers, so that every sum is exact for the largest world the
 * limits allow. */
#ifndef NCCLGUARD_RINGCHECK_PATTERN_H
#define NCCLGUARD_RINGCHECK_PATTERN_H

#include <stddef.h>
#include <stdint.h>

#include "contract/limits.h"

/* The largest communicator: every GPU of every node of one job. */
#define RC_PATTERN_MAX_RANKS (RINGCHECK_MAX_NODES * RINGCHECK_MAX_GPUS)

/*
 * The bandwidth phase (float32, as nccl-tests' default type): rank r holds
 * (r + 1) * (i % RC_BW_PERIOD + 1) at element i. The sum over n ranks is
 * n (n + 1) / 2 * (i % RC_BW_PERIOD + 1), and every partial sum is smaller,
 * so the sum is exact while it stays at or below 2^24, the largest range of
 * consecutive integers a float holds: 2048 x 2049 / 2 x 7 = 14,688,256.
 * The period is prime, so that a chunk misplaced by a power-of-two offset
 * shows.
 */
#define RC_BW_PERIOD 7

static inline float
rc_bw_value(int rank, size_t i)
{
    return (float)((rank + 1) * (int)(i % RC_BW_PERIOD + 1));
}

static inline float
rc_bw_sum(long long nranks, size_t i)
{
    return (float)(nranks * (nranks + 1) / 2 *
                   (long long)(i % RC_BW_PERIOD + 1));
}

/*
 * The correctness phase (int32): rank r holds (r + 1) * (i % 997 + 1); the
 * sum, at most 2048 x 2049 / 2 x 997 = 2,091,619,328, stays below 2^31.
 */
#define RC_CHECK_PERIOD 997

static inline int32_t
rc_check_value(int rank, size_t i)
{
    return (int32_t)((rank + 1) * (int)(i % RC_CHECK_PERIOD + 1));
}

static inline int32_t
rc_check_sum(long long nranks, size_t i)
{
    return (int32_t)(nranks * (nranks + 1) / 2 *
                     (long long)(i % RC_CHECK_PERIOD + 1));
}

#endif
