/* What one ring check found, and how it is told: timestamped lines, the
 * nccl-tests table, the JSON summary, the termination message and the
 * fallback file. */
#ifndef NCCLGUARD_RINGCHECK_REPORT_H
#define NCCLGUARD_RINGCHECK_REPORT_H

#include <stddef.h>

#include "ringcheck/nccllog.h"
#include "ringcheck/opts.h"
#include "ringcheck/worker.h"

#define RC_MAX_ROWS 16

struct rc_gpu {
    int index;
    char busid[32];
    char uuid[40];
    char name[64];
    unsigned long total_mib;
    unsigned long free_mib; /* 0 until the device phase ran */
    int cc_major, cc_minor; /* compute capability; 0 unknown */
};

/* One line of the nccl-tests table. */
struct rc_row {
    char op[16];
    char type[8]; /* "int32", "float" */
    size_t bytes;
    size_t count;
    int root;
    double time_us;                 /* averaged over the ranks, as
                                       nccl-tests reports it */
    double time_sum;                /* of the ranks' times */
    int ntimes;                     /* ranks that reported one */
    long wrong;                     /* all ranks together */
    unsigned long long wrong_ranks; /* bit r: rank r saw wrong values */
    int bad_rank;      /* the lowest rank with wrong values; -1 none */
    long long bad_off; /* byte offset of its first wrong value */
    int timed;         /* a bandwidth row (counts for the average) */
};

/* What one run of workers produced. Filled by the supervisor. */
struct rc_run {
    int code;            /* RC_EXIT_*; 0 when the workers all finished */
    int phase;           /* where it failed; -1 none */
    char what[1024];     /* what went wrong, one line */
    char ranks[160];     /* ranks concerned, "0,1" */
    char warn[400];      /* first NCCL WARN line */
    int overall_timeout; /* the whole check's deadline passed */
    int interrupted;     /* the supervisor got SIGTERM or SIGINT */
    int unreaped;        /* workers sent SIGKILL and never reaped */
    /* preflight */
    int nccl_version, cuda_runtime, cuda_driver;
    int ngpus;
    struct rc_gpu gpu[WORKER_MAX_GPUS];
    /* devices and topology, by device index */
    int topo_done;
    signed char access[WORKER_MAX_GPUS][WORKER_MAX_GPUS];
    signed char perf[WORKER_MAX_GPUS][WORKER_MAX_GPUS];
    signed char atomics[WORKER_MAX_GPUS][WORKER_MAX_GPUS]; /* native peer
                                                             atomics */
    /* ring */
    struct rc_row rows[RC_MAX_ROWS];
    int nrows;
    /* how long each phase took, seconds (phases that ended; 0 others) */
    double phase_s[8];
    /* what NCCL chose, from its INFO log (ring runs) */
    struct nccllog nl;
    int nl_read;       /* the log files were read */
    char id_addr[72];  /* the address the unique id carries, or "" */
    char nl_note[160]; /* why not, when they were not */
};

/* The whole check. */
struct rc_report {
    const struct rc_opts *opts;
    struct rc_run pre;  /* preflight, devices and topology */
    struct rc_run ring; /* the first full ring run */
    int ndev;           /* GPUs the ring used */
    int dev[WORKER_MAX_GPUS];
    size_t bw_bytes;        /* after any cut for memory */
    size_t check_max_bytes; /* largest correctness AllReduce */
    /* link per device pair: "NV", "PIX", "PXB", "PHB", "NODE", "SYS", or
     * "" unknown (then the matrix shows P2P access) */
    char link[WORKER_MAX_GPUS][WORKER_MAX_GPUS][6];
    double shm_free_mib, shm_need_mib;
    int nwarnings; /* preflight warnings */
    /* the failure that decides the exit code (code 0: none) */
    int code;
    int phase;
    char what[1024];
    char ranks[160];
    char warn[400];
    char gpus[160]; /* "GPU 0 (bus id) and GPU 1 (...)" or a list */
    char fix[400];
    /* diagnosis */
    int diag_ran;
    int diag_incomplete;
    char cure[48];      /* "NCCL_P2P_DISABLE=1" or "" */
    char transport[24]; /* what the cure names, or "" */
    int pair[2];        /* failing pair by device index; -1 unknown */
    char diag_note[400];
    /* outcome */
    const char *result; /* "pass", "fail", "warn", "fallback",
                           "cannot-run" */
    int exit_code;
    int fallback_written;
    double busbw, algbw; /* bandwidth phase, GB/s; < 0 not measured */
    long wrong_total;
    double elapsed_s;
    /* the cross-node phase (multinode.c); empty when it did not run */
    char mn_json[4096]; /* one JSON object, or "" */
    char mn_text[1536]; /* lines for the verdict, or "" */
    int mn_warn;        /* --on-missing warn fired: the result is "warn" */
    /* "the check cannot run here" (no driver, a driver older than the
     * runtime, CUDA and NCCL that do not match, a GPU of another vendor),
     * as opposed to "the node is bad": why, or "" */
    char cannot_run[400];
    /* the GPUs are shared: "mig" or "time-slicing" (fewer devices than
     * requested, as such GPUs enumerate), or "" */
    char sharing[16];
    int no_cure_warn; /* --on-no-cure warn let a fallback without cure
                         start the pod */
};

/* Name of phase p ("preflight", ..., "teardown"). Never NULL. */
const char *report_phase_name(int p);

/* Meaning of an exit code ("wrong results"). Never NULL. */
const char *report_code_name(int code);

/* Prints one timestamped human line (UTC, milliseconds) to stdout and
 * flushes it. For one thread: the supervisor's. */
void report_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints the peer matrix of r->dev like `nvidia-smi topo -m`: per pair
 * the link (r->link, see check.c) or, without one, P2P access. Reads r. */
void report_topology(const struct rc_report *r);

/* Prints the nccl-tests style table of r->ring's rows and its footer
 * (`# Out of bounds values`, `# Avg bus bandwidth`). Reads r. */
void report_table(const struct rc_report *r);

/*
 * Writes the one-line JSON summary into buf (NUL-terminated). Returns 0, or
 * -1 when buf is too small (buf then holds a truncated, invalid line).
 */
int report_json(const struct rc_report *r, char *buf, size_t len)
    __attribute__((warn_unused_result));

/* Writes the verdict for the termination log into buf: at most
 * min(len, 4096) bytes with its NUL, cut short if longer. Reads r. */
void report_verdict(const struct rc_report *r, char *buf, size_t len);

/*
 * Writes the NCCL config file with the settings that passed (r->cure, may
 * be empty) to path, through a temporary file and rename. Returns 0 or -1
 * with errno set.
 */
int report_fallback_write(const struct rc_report *r, const char *path)
    __attribute__((warn_unused_result));

/* Writes text to path, replacing its content. Returns 0 or -1 (errno). */
int report_file_write(const char *path, const char *text)
    __attribute__((warn_unused_result));

#endif
