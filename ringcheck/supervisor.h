/* The ring check's supervisor: forks workers, owns every deadline, and
 * stops stuck workers (abort request, SIGTERM, SIGKILL). Makes no CUDA or
 * NCCL call. */
#ifndef NCCLGUARD_RINGCHECK_SUPERVISOR_H
#define NCCLGUARD_RINGCHECK_SUPERVISOR_H

#include <stddef.h>

#include "report.h"
#include "worker.h"

/* How long a worker gets to abort its communicators, then to die after
 * SIGTERM, before the next step. Together well under one second. */
#define SV_ABORT_GRACE_S 0.4
#define SV_TERM_GRACE_S 0.25

enum sv_kind { SV_PREFLIGHT, SV_DEVICES, SV_RING };

struct sv_spec {
    enum sv_kind kind;
    int group; /* ring: one process drives all ranks */
    int ndev;  /* devices (ranks) */
    int dev[WORKER_MAX_GPUS];
    size_t bw_bytes;      /* ring: 0 skips the bandwidth phase */
    const char *env_name; /* an override for the workers, or NULL */
    const char *env_value;
    double phase_timeout_s;
    double deadline;   /* absolute, on sv_now()'s clock */
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

/* Process-wide set-up, once, before any sv_run: ignores SIGPIPE and blocks
 * SIGUSR1 (workers unblock it once their handler is in place). */
void sv_init(void);

/*
 * Runs the workers *s describes until they finish, fail, or a deadline
 * passes, and fills *out (cleared first). Returns out->code (0 when every
 * worker finished). Never leaves a child behind. Not thread-safe.
 */
int sv_run(const struct sv_spec *s, struct rc_run *out);

#endif
