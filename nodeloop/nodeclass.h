/* What one piece of node evidence means: a ring-check init container's
 * terminated state, or the node agent's own hang verdict or lost GPU,
 * classified into node / pair / job / unknown (docs/nodeloop.md). */
#ifndef NCCLGUARD_NL_NODECLASS_H
#define NCCLGUARD_NL_NODECLASS_H

#include <stddef.h>

/* Whom the evidence blames. Only NC_CLASS_NODE and NC_CLASS_PAIR count
 * against a node. */
enum nc_class {
    NC_CLASS_NONE,    /* a pass: nothing to blame */
    NC_CLASS_NODE,    /* this node's GPUs, links, shm or driver */
    NC_CLASS_PAIR,    /* a cross-node failure narrowed to two nodes */
    NC_CLASS_JOB,     /* the workload's settings, peers or policy */
    NC_CLASS_UNKNOWN, /* not enough to tell */
};

/* What the check itself said about the pod. */
enum nc_verdict {
    NC_VERDICT_PASS,
    NC_VERDICT_FALLBACK,   /* exit 0, the pod starts with a cure */
    NC_VERDICT_WARN,       /* exit 0, --on-failure warn */
    NC_VERDICT_FAIL,       /* the init container failed */
    NC_VERDICT_CANNOT_RUN, /* no verdict at all (killed, usage, no image) */
    NC_VERDICT_HANG,       /* the node agent's hang report */
    NC_VERDICT_LOST_GPU,   /* the node agent saw GPU_IS_LOST */
};

struct nc_result {
    enum nc_class cls;
    enum nc_verdict verdict;
    int code;          /* the check's failure code (report_code_name), or 0 */
    int phase;         /* the failing phase, -1 none */
    char cure[48];     /* "NCCL_P2P_DISABLE=1" or "" */
    char reason[48];   /* a CamelCase rule name, "P2PBroken" */
    char summary[320]; /* one line for Events and the condition */
};

/*
 * Classifies the terminated state of a ring-check init container:
 * exit_code as the kubelet reports it, msg (len bytes, need not be
 * NUL-terminated, may be NULL) the termination message the check wrote
 * (report_verdict in ringcheck/report.c). Fills *out completely. Pure: no
 * I/O, no global state, safe from any thread.
 */
void nc_classify_ringcheck(int exit_code, const char *msg, size_t len,
                           struct nc_result *out);

/*
 * Classifies a main container's termination message that the node agent
 * wrote on a hang ("ncclguard-watchdog: NCCLHang: ..."). Returns 0 and
 * fills *out when msg is such a report, -1 (out untouched) otherwise.
 * Pure, thread-safe.
 */
int nc_classify_hang_report(const char *msg, size_t len, struct nc_result *out)
    __attribute__((warn_unused_result));

/* The agent's own lost-GPU finding (NVML GPU_IS_LOST), as its NCCLGPULost
 * Event on the Node says it: gpus is the list it names ("0,3"; borrowed,
 * cut at 40 bytes). Always node class. Pure, thread-safe. */
void nc_classify_lost_gpu(const char *gpus, struct nc_result *out);

#define NC_HOST_MAX 64 /* a pod's hostname: at most 63 bytes */
#define NC_PAIR_HOSTS 16

/*
 * The hosts (the pods' hostnames, as the cross-node check's leader lists
 * them: "node K: HOST, ...") on either side of the failing node pairs in
 * a cross-node verdict ("cross-node diagnosis: ...; failing pairs: node 0
 * - node 2, node 0 - node 3"). Writes at most max distinct hosts into
 * hosts and returns how many; 0 when the message names no failing pair.
 * A node index without a host line is left out. Pure, thread-safe.
 */
int nc_pair_hosts(const char *msg, size_t len, char hosts[][NC_HOST_MAX],
                  int max);

/* "node", "pair", "job", "unknown", "none". Never NULL. */
const char *nc_class_name(enum nc_class c);

/* "pass", "fallback", "warn", "fail", "cannot-run", "hang", "lost-gpu".
 * Never NULL. */
const char *nc_verdict_name(enum nc_verdict v);

#endif
