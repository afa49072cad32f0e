/* A client of NCCL's RAS service (NCCL 2.24+): asks a job's RAS thread for
 * its job-wide view and returns the ranks that are missing or behind, and
 * each rank's count of issued collectives, so that two answers can be
 * compared. The protocol is the one NCCL's own client speaks (NVIDIA/nccl,
 * src/ras/client.cc and client_support.cc): "CLIENT PROTOCOL 2", answered
 * "SERVER PROTOCOL N"; "TIMEOUT S", answered "OK"; "SET FORMAT json",
 * answered "OK" from NCCL 2.28.7 and "ERROR: Unknown command ..." before
 * it (v2.24.3 to v2.28.3), which then answers STATUS in its text format;
 * then "STATUS", answered with the report until EOF. */
#ifndef NCCLGUARD_WD_RAS_H
#define NCCLGUARD_WD_RAS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define WD_RAS_MAX_RANKS 8
#define WD_RAS_MAX_COUNTS 256
#define WD_RAS_ANSWER_MAX (1 << 20)

/* RAS_COLLECTIVE_EXTRA_TIMEOUT_SEC (src/ras/ras_internal.h, 5 s at every
 * tag from v2.24.3 to v2.28.9): how long past the client's TIMEOUT a RAS
 * collective may still run before RAS gives up on it. */
#define WD_RAS_EXTRA_TIMEOUT_S 5

/* A rank RAS names: missing (no data from it) or behind (fewer issued
 * collectives than its communicator's other ranks). rank is -1 where the
 * text format names the process only ("Process P on node H ..."). host is
 * what RAS prints: an IP address (ncclSocketToHost, inet_ntop), not a
 * node name. */
struct wd_ras_rank {
    int rank;
    char host[64];
    int pid;
    bool unresponsive;        /* missing: RAS got no answer from it */
    bool dead;                /* missing: RAS considers it dead */
    unsigned long done, most; /* behind: its issued count, the most issued */
};

/* One count of issued collectives: in JSON, one rank's sum of
 * collective_counts; in text, one "launched up to operation M" line
 * (who = the rank, or -N for "N ranks have ..."). comm is the
 * communicator's hash. */
struct wd_ras_count {
    uint64_t comm;
    int64_t who;
    uint64_t value;
};

struct wd_ras_result {
    bool text;        /* the text format: NCCL before 2.28.7 */
    char version[32]; /* "2.24.3" as RAS printed it; "" unknown */
    int communicators;
    int n_missing, n_behind; /* totals; the arrays keep the first few */
    struct wd_ras_rank missing[WD_RAS_MAX_RANKS];
    struct wd_ras_rank behind[WD_RAS_MAX_RANKS];
    size_t n_counts; /* sorted by (comm, who); the first WD_RAS_MAX_COUNTS */
    struct wd_ras_count counts[WD_RAS_MAX_COUNTS];
};

/* What two answers, taken apart in time, say about the job's progress. */
enum wd_ras_progress {
    WD_RAS_MOVED = 0, /* a count differs: collectives were issued */
    WD_RAS_STILL,     /* every count the same, and there were some */
    WD_RAS_NO_COUNTS  /* nothing to compare (see wd_ras_compare) */
};

/*
 * Compares the counts of two answers, the earlier first. WD_RAS_STILL only
 * when both carry counts and they are the same set; WD_RAS_NO_COUNTS when
 * either carries none (the text format prints counts only where the ranks
 * of a communicator disagree, so a job whose ranks all issued the same
 * count shows none). Thread-safe.
 */
enum wd_ras_progress wd_ras_compare(const struct wd_ras_result *a,
                                    const struct wd_ras_result *b);

/*
 * Connects to the RAS service at addr and asks for STATUS, in JSON where
 * RAS has it and in text otherwise, with RAS's own collective timeout set
 * to ras_timeout_s. Non-blocking throughout: returns by deadline_ms
 * (CLOCK_MONOTONIC) whatever the peer does, or as soon as cancel_fd (-1:
 * none) becomes readable, with the answer capped at WD_RAS_ANSWER_MAX.
 * Returns 0 with *out filled, or -1 with why filled (refused, timed out,
 * not a STATUS report). Thread-safe.
 */
int wd_ras_query(const struct sockaddr *addr, socklen_t len,
                 long long deadline_ms, int ras_timeout_s, int cancel_fd,
                 struct wd_ras_result *out, char *why, size_t wn)
    __attribute__((warn_unused_result));

/*
 * Parses a RAS STATUS document in JSON (buf, len; NCCL 2.28.7 and later)
 * into *out: the missing ranks of every communicator, the ranks whose
 * issued collectives (the sum of collective_counts, seqNumber values that
 * NCCL raises when a collective is launched) trail the most any rank of
 * their communicator issued, and every rank's count. Returns 0, or -1 when
 * it is not such a document. Thread-safe.
 */
int wd_ras_parse(const char *buf, size_t len, struct wd_ras_result *out)
    __attribute__((warn_unused_result));

/*
 * Parses a RAS STATUS report in NCCL's text format (v2.24.3 to v2.28.x):
 * the processes listed as missing or considered dead ("Process P on node H
 * managing GPU..."), and each MISMATCH block's "launched up to operation M"
 * lines. Returns 0, or -1 when buf is not such a report (it must start
 * with "NCCL version "). Thread-safe.
 */
int wd_ras_parse_text(const char *buf, size_t len, struct wd_ras_result *out)
    __attribute__((warn_unused_result));

/* One query on a thread of its own, off the caller's loop. */
struct wd_ras_job;

/*
 * Starts wd_ras_query on a new thread with a deadline budget_ms from now.
 * Returns NULL when no thread could be started. Free with
 * wd_ras_job_free(). The job is owned by one caller thread.
 */
struct wd_ras_job *wd_ras_job_start(const struct sockaddr *addr, socklen_t len,
                                    int ras_timeout_s, long long budget_ms);

/* True once the query ended (answered, failed or timed out). */
bool wd_ras_job_done(struct wd_ras_job *j);

/* The ended query's result: 0 with *out, or -1 with why. Only after
 * wd_ras_job_done() said true. */
int wd_ras_job_result(struct wd_ras_job *j, struct wd_ras_result *out,
                      char *why, size_t wn) __attribute__((warn_unused_result));

/* Cancels the query if it still runs, waits for its thread, frees j.
 * NULL is a no-op. */
void wd_ras_job_free(struct wd_ras_job *j);

#endif
