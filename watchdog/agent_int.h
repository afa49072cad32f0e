/* The watchdog agent's internals, shared by its files (agent.c the loop
 * and the process table, agent_judge.c a pod's period, agent_shm.c
 * /dev/shm, agent_act.c signals, writes and the restart sequence,
 * agent_event.c Events, the pod list and /metrics, agent_hang.c a hang
 * and its second signal). Not a public interface: agent.h is. Each
 * function is described where it is defined; none is thread-safe (the
 * decision loop's thread alone calls them). */
#ifndef NCCLGUARD_WD_AGENT_INT_H
#define NCCLGUARD_WD_AGENT_INT_H

#include "watchdog/agent.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "contract/nodeevent.h"
#include "contract/wdspec.h"
#include "watchdog/cgroup.h"
#include "watchdog/event.h"
#include "watchdog/mserver.h"
#include "watchdog/nvml.h"
#include "watchdog/procfs.h"
#include "watchdog/ras.h"
#include "watchdog/rule.h"

#define ENVIRON_MAX (256 * 1024)
#define MAX_SOCKETS 4096
#define MAX_TCP_ROWS 65536
#define TCP_TEXT_MAX (4 << 20)
/* A pod's work budget: processes watched per pod. A pod that forks more
 * gets its first POD_MAX_PROCS judged, and one line saying so. */
#define POD_MAX_PROCS 512
/* The node's: processes watched across the node before each pod is held
 * to its share (--max-procs; agent.c node_budget_ok). */
#define NODE_MAX_PROCS 4096
/* And open files looked at per pod per period (/proc/PID/fd entries of
 * every kind, not only sockets): twice the socket table, so that a rank
 * with a few thousand sockets is read whole, while a pod whose processes
 * hold a million files each costs no more than this. */
#define POD_MAX_FDS (2 * MAX_SOCKETS)
#define METRICS_MAX (1 << 17)

/* Where a pod stands after a hang. */
enum pod_state {
    POD_WATCH = 0, /* counting idle periods */
    POD_REPORTED,  /* hang reported; back to WATCH when it recovers */
    POD_GRACE,     /* checkpoint requested; SIGTERM at deadline */
    POD_TERM,      /* SIGTERM sent; SIGKILL at deadline */
    POD_DONE,      /* SIGKILL sent (or nothing left to signal) */
    POD_CONFIRM    /* hang found; asking RAS for a second signal */
};

extern const char *const wda_state_names[];

/* One watched process, identified by PID and start time. */
struct wproc {
    pid_t pid;
    uint64_t start;
    uint64_t prev_ticks;
    uint64_t prev_io; /* rchar + wchar at the last period */
    bool io_ok;       /* prev_io was read */
    size_t pod;
    char *fr_pipe; /* PyTorch's flight-recorder pipe, its dump; or NULL */
    char *fr_dump;
    char *fr_dump_alt; /* older PyTorch's default dump path, or NULL */
    unsigned gen;      /* the scan that last saw it */
    bool alive;        /* seen in the latest scan or sample */
};

/* What a pod keeps for its UID's lifetime rather than its processes':
 * the Event deduplication and token bucket, and the log's token bucket. A
 * pod whose processes all exit is forgotten, and a pod that comes back
 * under the same UID (its container restarted) starts from these, not
 * from an empty dedup table and full buckets. */
struct podkeep {
    char ev_key[24]; /* the last Event's cause, and when */
    long long ev_ms;
    double ev_tokens; /* the pod's Event bucket */
    long long ev_tokens_ms;
    unsigned long long ev_dups;
    double log_tokens; /* the pod's log bucket */
    long long log_tokens_ms;
    unsigned long long log_dropped; /* lines not written since log_said_ms */
    long long log_said_ms;
    bool ident_tried; /* this UID had a pod list of its own */
};

/* A forgotten pod's podkeep, by UID, until UID_KEEP_MS after it was
 * saved (past the Event dedup window); at most UID_KEEP_MAX, the oldest
 * dropped first. */
#define UID_KEEP_MAX 1024
#define UID_KEEP_MS (15 * 60 * 1000LL)
struct uidkeep {
    char uid[37];
    long long at;
    struct podkeep k;
};

/* A socket queue seen last period, to tell stuck from moving. */
struct sockq {
    uint64_t inode;
    uint32_t tx, rx;
};

struct wpod {
    char uid[37];
    char container[65];
    char name[254];
    char ns[64];
    struct wd_spec spec;
    char spec_text[512];
    long long watch_ms; /* when the first process was found */
    long long last_ms;  /* start of the current period */
    long long next_ms;  /* end of the current period */
    struct wd_rule rule;
    enum pod_state state;
    long long deadline_ms;
    struct wd_period last;
    enum wd_verdict last_v;
    enum wd_verdict hang_v; /* the cause of the latest hang: its Event key */
    /* The GPU signals behind the latest verdict, for the hang message. */
    unsigned spin_util, spin_power, spin_mem;
    char lost_gpus[64];
    /* NVML's counters at the start of the current period, per GPU. */
    bool base_set;
    bool base_ok[WD_NVML_MAX_GPUS];
    struct wd_gpu_counters base[WD_NVML_MAX_GPUS];
    /* Events and log lines: dedup and buckets, kept for the UID. */
    struct podkeep keep;
    char ras_addr[128]; /* NCCL_RAS_ADDR of the pod's first process */
    /* A flight-recorder dump was asked for: the Event (ev_msg) and the
     * SIGTERM wait for the dumps until fr_deadline_ms. */
    bool fr_pending;
    long long fr_deadline_ms;
    time_t fr_since; /* when it was asked, the realtime clock */
    char *ev_msg;
    char ip[64]; /* status.podIP, from the API */
    /* An Event waiting for the pod list (wda_post_event, wda_ident_due). */
    char *evw_msg;
    const char *evw_reason; /* a string literal */
    char evw_key[24];
    long long evw_until_ms;
    /* /dev/shm of the pod, at the last period. */
    bool shm_known;
    uint64_t shm_size, shm_used;
    bool shm_reported; /* the 90 % Event went out; re-armed below 80 % */
    int shm_orphans;
    uint64_t shm_orphan_ino[32]; /* orphans already logged */
    size_t n_orphan_ino;
    size_t n_procs;        /* live watched processes */
    bool budget_logged;    /* the work budget line was logged */
    bool fd_budget_logged; /* the open-file budget line was logged */
    int fds_read;          /* open files looked at in the latest period */
    struct sockq *q;
    size_t n_q;
    /* One of the pod's GPUs runs another pod's process or an MPS server's
     * clients (the latest period): its hangs are reported, never acted on. */
    bool shared;
    char shared_why[160];
    /* The second signal (POD_CONFIRM): two RAS answers a period apart.
     * ras_step 1: first query running; 2: waiting until ras_next_ms;
     * 3: second query running. */
    struct wd_ras_job *ras_job;
    int ras_step;
    long long ras_next_ms;
    struct wd_ras_result *ras1;
    char *hang_msg;
    bool used;
};

/* Processes that were looked at and are not opted in. */
/* A process looked at and left alone (not opted in, a bad spec, no pod),
 * by its PID, start time and command name: execve(2) keeps the first two
 * and changes the name, and a process is often first seen before it
 * execs its real program (a container's runtime forks, sets up, then
 * execs the entrypoint, whose environment only then carries the spec).
 * So a process that execs is looked at again. */
struct seen {
    pid_t pid;
    uint32_t comm;
    uint64_t start;
};

struct seenbuf {
    struct seen *v;
    size_t n, cap;
};

struct metrics {
    unsigned long long hangs;
    unsigned long long checkpoint_signal, checkpoint_file, sigterm, sigkill,
        pid_reused, events, event_errors, report_files, events_suppressed,
        log_dropped;
};

struct agent {
    const struct wd_options *o;
    long long t0_ms;
    struct wd_nvml *nvml;
    struct wd_gpus *gpus;
    bool nvml_logged_down;
    bool nvml_was_up;
    struct wproc *procs;
    size_t n_procs, cap_procs;
    uint32_t *pidx; /* open-addressing index of procs by PID: slot+1 */
    size_t pidx_cap;
    unsigned scan_gen;
    struct wpod *pods;
    size_t n_pods, cap_pods;
    struct seenbuf seen, seen_next;
    struct wd_tcp *tcp;
    uint64_t *inodes;
    char *envbuf;
    char *tcpbuf; /* TCP_TEXT_MAX bytes, for net/tcp and tcp6 */
    int listen_fd;
    struct wd_mserver *ms;
    char *mtext; /* METRICS_MAX bytes, rebuilt by the loop */
    struct metrics m;
    struct wd_event_cfg ev;
    double ev_tokens; /* the node's Event bucket */
    long long ev_tokens_ms;
    struct uidkeep *kept; /* forgotten pods' podkeep */
    size_t n_kept;
    long long ident_ms; /* the last pod list fetched from the API */
    long long clk_tck;
};

/* Constants more than one file uses. */

/* agent.c */
long long wda_now_ms(void);
void wda_logj(struct agent *a, const char *event, json_t *o);
json_t *wda_podj(const struct wpod *p, json_t *o);
struct wproc *wda_proc_find(struct agent *a, pid_t pid, uint64_t start);
void wda_procs_compact(struct agent *a);
ssize_t wda_pod_find(struct agent *a, const char *uid);
void wda_keep_save(struct agent *a, const struct wpod *pod, long long t);
bool wda_pod_log_ok(struct agent *a, struct wpod *pod);
int wda_proc_io(struct agent *a, pid_t pid, uint64_t *bytes);

/* agent_judge.c */
int wda_u64_cmp(const void *x, const void *y);
void wda_pod_base(struct agent *a, struct wpod *pod);
void wda_pod_sample(struct agent *a, size_t pi, long long t);

/* agent_shm.c */
void wda_pod_shm(struct agent *a, struct wpod *pod, size_t pi);

/* agent_act.c */
void wda_reap_children(void);
void wda_duration_text(long long ms, char *buf, size_t n);
struct wproc *wda_pod_first(struct agent *a, size_t pi);
void wda_fr_due(struct agent *a, long long t);
void wda_pod_finish(struct agent *a, struct wpod *pod, size_t pi, char *msg,
                    size_t n, bool act, const char *why_not);
void wda_actions_due(struct agent *a, long long t);

/* agent_event.c */
bool wda_bucket_take(double *tokens, long long *at, double burst,
                     long long refill, long long t);
bool wda_pods_identify(struct agent *a, struct wpod *pod, long long t);
void wda_post_event(struct agent *a, struct wpod *pod, const char *reason,
                    const char *msg, const char *key);
void wda_ident_due(struct agent *a, long long t);
void wda_node_gpu_lost_event(struct agent *a, struct wpod *pod);
bool wda_event_would_post(const struct agent *a, const struct wpod *pod,
                          const char *key, long long t);
size_t wda_metrics_text(struct agent *a, char *buf, size_t n);
int wda_metrics_listen(struct agent *a);

/* agent_hang.c */
void wda_pod_ras_drop(struct wpod *pod);
void wda_pod_hang(struct agent *a, struct wpod *pod, size_t pi);
void wda_ras_due(struct agent *a, long long t);

#endif
