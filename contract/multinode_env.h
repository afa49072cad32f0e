/* Which environment variables tell a ring check that its pod is one node of
 * a multi-node job, operator by operator. The webhook copies these into the
 * ring-check init container and the binary reads them, so both sides use
 * this one table. */
#ifndef NCCLGUARD_CONTRACT_MULTINODE_ENV_H
#define NCCLGUARD_CONTRACT_MULTINODE_ENV_H

#include <stddef.h>

/* Set by the webhook on the init container. */
#define MN_ENV_JOB_ID "NCCLGUARD_JOB_ID"      /* the job's identity */
#define MN_ENV_POD_IP "POD_IP"                /* downward API status.podIP */
#define MN_ENV_LEADER "NCCLGUARD_LEADER_ADDR" /* policy-templated leader */
#define MN_ENV_NNODES "NCCLGUARD_NNODES"      /* policy-templated node count */
/* HMAC-SHA256 of the job id under the webhook's key, hex: the same on
 * every pod of the job, proven (not sent) in the rendezvous. Set on the
 * ring-check init container only. */
#define MN_ENV_JOB_TOKEN "NCCLGUARD_JOB_TOKEN"
/* A gang member's node rank, from the index label its controller sets. */
#define MN_ENV_NODE_RANK "NCCLGUARD_NODE_RANK"

/* Default rendezvous port of the cross-node check (TCP, on node rank 0). */
#define MN_DEFAULT_PORT 29450

enum mn_kind {
    MN_NONE = 0,
    MN_LWS,        /* LeaderWorkerSet */
    MN_TORCHRUN,   /* JobSet / Kubeflow Trainer TrainJob: PET_* */
    MN_PYTORCHJOB, /* training-operator v1 PyTorchJob */
    MN_JOBSET,     /* plain JobSet: completion index, policy-templated */
    MN_VOLCANO,    /* Volcano Job */
    MN_GANG,       /* a gang: Workload/PodGroup, Volcano or KAI PodGroup */
};

/* One operator's variables. A NULL name means the operator sets none; the
 * port then comes from --rendezvous-port. */
struct mn_vars {
    enum mn_kind kind;
    const char *operator_name;
    const char *leader; /* address of node rank 0 */
    const char *port;   /* the job's own rendezvous port (not ours) */
    const char *nnodes; /* pods in the job */
    const char *rank;   /* this pod's node rank */
};

static const struct mn_vars MN_VARS[] = {
    {MN_LWS, "LeaderWorkerSet", "LWS_LEADER_ADDRESS", NULL, "LWS_GROUP_SIZE",
     "LWS_WORKER_INDEX"},
    {MN_TORCHRUN, "JobSet/TrainJob (torchrun)", "PET_MASTER_ADDR",
     "PET_MASTER_PORT", "PET_NNODES", "PET_NODE_RANK"},
    /* WORLD_SIZE counts pods in older training-operator v1 releases and
     * processes (replicas x nprocPerNode) in later ones, which also set
     * PET_NNODES (pods) and PET_NODE_RANK: read those first when present
     * (docs/mutate.md, multi-node). */
    {MN_PYTORCHJOB, "PyTorchJob", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE",
     "RANK"},
    /* Before plain JobSet, whose variables it shares but for the rank: the
     * webhook writes NCCLGUARD_NODE_RANK only for gang members. */
    {MN_GANG, "gang (Workload/PodGroup)", MN_ENV_LEADER, NULL, MN_ENV_NNODES,
     MN_ENV_NODE_RANK},
    {MN_JOBSET, "JobSet", MN_ENV_LEADER, NULL, MN_ENV_NNODES,
     "JOB_COMPLETION_INDEX"},
    {MN_VOLCANO, "Volcano", MN_ENV_LEADER, NULL, MN_ENV_NNODES,
     "VC_TASK_INDEX"},
};

#define MN_VARS_COUNT (sizeof(MN_VARS) / sizeof(MN_VARS[0]))

#endif
