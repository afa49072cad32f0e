/* The cross-node phase of the ring check: membership from the job
 * operator's variables, the rendezvous with node rank 0, one NCCL
 * communicator over every pod's GPUs, diagnosis across nodes, and the
 * job-wide verdict. */
#ifndef NCCLGUARD_RINGCHECK_MULTINODE_H
#define NCCLGUARD_RINGCHECK_MULTINODE_H

#include <stddef.h>

#include "contract/multinode_env.h"
#include "ringcheck/report.h"

/* This pod's place in its job, from the environment. */
struct mn_member {
    enum mn_kind kind;
    const char *operator_name; /* static */
    char leader[256];          /* node rank 0's address */
    int nnodes;
    int node_rank;
    char job[129];  /* the job's identity */
    char token[65]; /* NCCLGUARD_JOB_TOKEN, or "" */
};

/*
 * Reads the membership from the variables in multinode_env.h, first
 * operator first. Returns 1 and fills *m; 0 when no operator's variables
 * are set (a single pod), with the reason in why; -1 when they are set but
 * wrong (rank out of range, a count that is not a number), with a message
 * in why (also when NCCLGUARD_JOB_TOKEN is set but not 64 hex digits).
 * Thread-safe as getenv is.
 */
int mn_membership(struct mn_member *m, char *why, size_t whylen)
    __attribute__((warn_unused_result));

/*
 * The interface NCCL picks for its sockets in this network namespace, as
 * netcheck_pick() does (running interfaces, IPv4 or IPv6, as
 * NCCL_SOCKET_IFNAME and NCCL_SOCKET_FAMILY say). Returns 1 with its name
 * and address, or 0; have gets every interface's name ("lo, eth0") either
 * way. Not thread-safe (a static table).
 */
int mn_pick_interface(char *name, size_t namelen, char *addr, size_t addrlen,
                      char *have, size_t havelen);

/* ifname is a container or overlay bridge (docker0, cni0, flannel.1,
 * cilium_*, ...), which NCCL should not use between nodes. */
int mn_is_bridge(const char *ifname);

/*
 * Runs the cross-node phase when r->opts asks for it and the environment
 * names a multi-node job, after the single-pod phases (whose result is in
 * r->code). Fills r's cross-node fields and, for a job-wide failure, its
 * failure fields (code, phase 7, what, fix, cure). Never runs past
 * --multi-node-timeout from its start by more than the supervisor's stop
 * grace. Call once, from check_run; not thread-safe.
 */
void mn_check(struct rc_report *r);

#endif
