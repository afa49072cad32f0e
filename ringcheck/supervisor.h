/* The ring check's supervisor: forks workers, owns every deadline, and
 * stops stuck workers (abort request, SIGTERM, SIGKILL). Makes no CUDA or
 * NCCL call. */
#ifndef NCCLGUARD_RINGCHECK_SUPERVISOR_H
#define NCCLGUARD_RINGCHECK_SUPERVISOR_H

#include <stddef.h>

#include "ringcheck/report.h"
#include "ringcheck/worker.h"

/*
 * Stopping a run: the workers are asked to abort (SIGUSR1) and get
 * sv_abort_grace() for it, then SIGTERM and SV_TERM_GRACE_S, then SIGKILL
 * and SV_KILL_WAIT_S to be reaped. A worker still not reaped then is given
 * up on (a process in D state cannot be reaped until the kernel lets it
 * go): the run ends without it.
 *
 * ncclCommAbort syncs the streams, stops the proxy thread and frees the
 * memory of each communicator, one after the other, so the grace grows with
 * the communicators one process owns. The numbers are a generous bound, not
 * a measurement (see docs/ringcheck.md).
 */
#define SV_ABORT_BASE_S 0.5
#define SV_ABORT_PER_COMM_S 0.5
#define SV_TERM_GRACE_S 0.25
#define SV_KILL_WAIT_S 0.25
/* The last stop step ends this long after the check's deadline at the
 * latest, which leaves the rest of a second for the verdict. */
#define SV_OVERRUN_S 0.8

enum sv_kind { SV_PREFLIGHT, SV_DEVICES, SV_RING };

struct sv_spec {
    enum sv_kind kind;
    int group; /* ring: one process drives all ranks */
    int ndev;  /* devices (ranks) */
    int dev[WORKER_MAX_GPUS];
    size_t bw_bytes;        /* ring: 0 skips the bandwidth phase */
    size_t check_max_bytes; /* ring: largest correctness AllReduce */
    const char *env_name;   /* an override for the workers, or NULL */
    const char *env_value;
    double phase_timeout_s;
    double deadline;   /* the check's, absolute, on sv_now()'s clock */
    const char *label; /* prefix of forwarded worker output */
    /* A communicator that spans pods (the cross-node phase); all zero or
     * NULL for one pod. Ranks are global: this pod drives ranks
     * rank_offset .. rank_offset + ndev - 1 of world. */
    int world;       /* 0: ndev */
    int rank_offset; /* 0 on node rank 0 */
    /* The "U HEX" line of the unique id, when it comes from another pod:
     * written to every worker at its start. */
    const char *id_line;
    /* Called with the "U HEX" line when this pod's rank 0 made the id, to
     * pass it to the other pods. Borrowed. */
    void (*on_id)(void *ctx, const char *line);
    void *on_id_ctx;
};

/* Seconds on the monotonic clock. */
double sv_now(void);

/* The abort grace for a worker that owns ncomms communicators. */
double sv_abort_grace(int ncomms);

/* Process-wide set-up, once, before any sv_run: ignores SIGPIPE, blocks
 * SIGUSR1 (workers unblock it once their handler is in place), and catches
 * SIGTERM and SIGINT, which then stop the running workers (as PID 1 of a
 * container a signal without a handler would be ignored). */
void sv_init(void);

/* Whether SIGTERM or SIGINT arrived. Async-signal-safe. */
int sv_interrupted(void);

/*
 * Runs the workers *s describes until they finish, fail, or a deadline
 * passes, and fills *out (cleared first). Returns out->code (0 when every
 * worker finished). Returns by s->deadline + SV_OVERRUN_S at the latest,
 * even when a worker cannot be reaped (out->unreaped counts those; they
 * are named in out->what). Also reaps any other child (orphans that a
 * container's PID 1 inherits). Not thread-safe.
 */
int sv_run(const struct sv_spec *s, struct rc_run *out);

#endif
