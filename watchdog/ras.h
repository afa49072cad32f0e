/* A client of NCCL's RAS service (NCCL 2.24+): asks a job's RAS thread for
 * its job-wide view and returns the ranks that are missing or behind. The
 * protocol is the one NCCL's own client speaks (NVIDIA/nccl,
 * src/ras/client.cc and client_support.cc): "CLIENT PROTOCOL 2", answered
 * "SERVER PROTOCOL N"; "TIMEOUT S" and "SET FORMAT json", each answered
 * "OK"; then "STATUS", answered with a JSON document until EOF. */
#ifndef NCCLGUARD_WD_RAS_H
#define NCCLGUARD_WD_RAS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#define WD_RAS_MAX_RANKS 8
#define WD_RAS_ANSWER_MAX (1 << 20)

/* A rank RAS names: missing (no data from it) or behind (fewer completed
 * collectives than its communicator's other ranks). */
struct wd_ras_rank {
    int rank;
    char host[64];
    int pid;
    bool unresponsive;        /* missing: RAS got no answer from it */
    bool dead;                /* missing: RAS considers it dead */
    unsigned long done, most; /* behind: its collectives, the most done */
};

struct wd_ras_result {
    int communicators;
    int n_missing, n_behind; /* totals; the arrays keep the first few */
    struct wd_ras_rank missing[WD_RAS_MAX_RANKS];
    struct wd_ras_rank behind[WD_RAS_MAX_RANKS];
};

/*
 * Connects to the RAS service at addr and asks for STATUS in JSON, with
 * RAS's own collective timeout set to ras_timeout_s. Non-blocking
 * throughout: returns by deadline_ms (CLOCK_MONOTONIC) whatever the peer
 * does, with the answer capped at WD_RAS_ANSWER_MAX. Returns 0 with *out
 * filled, or -1 with why filled (refused, timed out, not JSON: NCCL before
 * the JSON format). Thread-safe.
 */
int wd_ras_query(const struct sockaddr *addr, socklen_t len,
                 long long deadline_ms, int ras_timeout_s,
                 struct wd_ras_result *out, char *why, size_t wn)
    __attribute__((warn_unused_result));

/*
 * Parses a RAS STATUS document in JSON (buf, len) into *out: the missing
 * ranks of every communicator, and the ranks whose completed collectives
 * (the sum of collective_counts) trail the most any rank of their
 * communicator completed. Returns 0, or -1 when it is not such a document.
 * Thread-safe.
 */
int wd_ras_parse(const char *buf, size_t len, struct wd_ras_result *out)
    __attribute__((warn_unused_result));

#endif
