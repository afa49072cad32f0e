/* The hang rule, as pure functions of one period's observations, so that
 * unit tests can drive it without processes, GPUs or clocks. Each GPU is
 * judged on its own (wd_rule_gpu), then the pod (wd_rule_judge). The
 * thresholds and their sources are in docs/watchdog.md. */
#ifndef NCCLGUARD_WD_RULE_H
#define NCCLGUARD_WD_RULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/wdspec.h"

/* A spinning GPU: mean utilisation at least this over the period. */
#define WD_UTIL_HIGH_PCT 80
/* Power near idle: mean power below this percent of the enforced limit. */
#define WD_POWER_IDLE_PCT 35
/* Memory idle: mean memory utilisation below this percent. */
#define WD_MEM_IDLE_PCT 5
/* Links still: NVLink + PCIe bytes, TX + RX, below this per second. */
#define WD_LINK_STILL_BPS (4LL << 20)
/* The processes' own I/O (read + written bytes, files and sockets alike)
 * at or above this per second is progress: a checkpoint being written,
 * data being loaded. */
#define WD_IO_MOVING_BPS (1LL << 20)

/* How one GPU answered NVML over the period. */
enum wd_gpu_answer {
    WD_ANSWER_OK = 0,
    WD_ANSWER_LOST,    /* NVML_ERROR_GPU_IS_LOST */
    WD_ANSWER_NO_UTIL, /* no utilisation: MIG mode (NOT_SUPPORTED) */
    WD_ANSWER_ERROR    /* any other error */
};

/* What one period showed for one GPU of a pod: differences of NVML's
 * cumulative counters over the period. */
struct wd_gpu_period {
    enum wd_gpu_answer answer;
    uint64_t util_n;       /* utilisation samples in the period */
    unsigned util_mean;    /* their mean, percent */
    uint64_t util_nonzero; /* of them, above 0 % */
    bool mem_known;
    unsigned mem_mean;  /* mean memory utilisation, percent */
    bool power_known;   /* energy counter and enforced limit answered */
    unsigned power_pct; /* mean power, percent of the enforced limit */
    bool links_known;
    int64_t link_bps; /* NVLink + PCIe bytes per second */
};

/* Each signal's own verdict, for the log line. */
struct wd_signals {
    const char *util;   /* "zero", "high", "some", "unknown" */
    const char *power;  /* "near-idle", "working", "unknown" */
    const char *memory; /* "idle", "working", "unknown" */
    const char *links;  /* "still", "moving", "unknown" */
};

enum wd_gpu_verdict {
    WD_GPU_WORKING = 0, /* the GPU does real work */
    WD_GPU_IDLE,        /* no kernel ran the whole period, links still */
    WD_GPU_SPINNING,    /* kernels "run" but nothing moves: util high,
                           power near idle, memory idle, links still */
    WD_GPU_GONE,        /* the GPU is lost */
    WD_GPU_UNJUDGED     /* MIG, an error, or no samples: cannot say */
};

/* "working", "idle", "spinning", "lost", "unjudged". */
const char *wd_gpu_verdict_name(enum wd_gpu_verdict v);

/* Judges one GPU over one period; fills *sig when not NULL. Pure. */
enum wd_gpu_verdict wd_rule_gpu(const struct wd_gpu_period *g,
                                struct wd_signals *sig);

/* What one period showed for one pod. */
struct wd_period {
    bool gpu_known;    /* NVML answered for this period */
    int gpus;          /* GPUs that run one of the pod's processes */
    int gpus_busy;     /* of those, working */
    int gpus_idle;     /* idle */
    int gpus_spinning; /* spinning */
    int gpus_lost;     /* lost */
    int gpus_unjudged; /* MIG, error, no samples */
    int64_t cpu_milli; /* the pod's processes, millicores over the period */
    int64_t io_bps;    /* the processes' read + written bytes per second */
    int sockets;       /* TCP sockets the processes hold */
    int close_wait;    /* of those, in CLOSE_WAIT */
    int stuck_queues;  /* established, non-empty queues that did not move */
};

enum wd_verdict {
    WD_BUSY = 0,       /* a GPU worked: not a hang */
    WD_UNKNOWN = 1,    /* NVML did not answer, no GPU is the pod's, or one
                          of its GPUs cannot be judged */
    WD_CPU_IDLE = 2,   /* GPUs idle but CPU below minCPU: a debugger,
                          a process waiting on something else */
    WD_SOCKETS_OK = 3, /* GPUs idle, CPU busy, but the sockets move */
    WD_IDLE = 4,       /* idle hang: GPUs idle, CPU busy, no I/O,
                          sockets stuck */
    WD_IO_MOVING = 5,  /* GPUs idle or spinning, but the processes read
                          or write: checkpoint writing, data loading */
    WD_SPINNING = 6,   /* spinning hang: GPUs spin without work, CPU
                          busy, no I/O */
    WD_GPU_LOST = 7    /* one of the pod's GPUs is lost (Xid-class) */
};

/* "busy", "unknown", "cpu-idle", "sockets-moving", "idle", "io-moving",
 * "spinning", "gpu-lost". */
const char *wd_verdict_name(enum wd_verdict v);

/* True for the verdicts that count towards a hang: idle, spinning,
 * gpu-lost. */
bool wd_verdict_stalled(enum wd_verdict v);

/* The verdict for one period under spec. Thread-safe, pure. */
enum wd_verdict wd_rule_judge(const struct wd_spec *spec,
                              const struct wd_period *p);

/* A pod's count of consecutive stalled periods. */
struct wd_rule {
    int idle; /* consecutive stalled periods so far, at most idle_periods */
};

/*
 * Feeds one period's verdict: a stalled verdict counts up, anything else
 * resets the count to 0. Returns true exactly once per hang: on the period
 * where the count reaches spec->idle_periods. Pure.
 */
bool wd_rule_step(struct wd_rule *r, const struct wd_spec *spec,
                  enum wd_verdict v);

#endif
