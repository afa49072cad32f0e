/* Whether a pod is one node of a multi-node job, which operator made it,
 * and the variables its ring-check init container needs to find the
 * job's other pods. */
#ifndef NCCLGUARD_JOBMEMBER_H
#define NCCLGUARD_JOBMEMBER_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "policy/policy.h"
#include "ringcheck/multinode_env.h"

/* Label keys and the annotation the detection and the env read. */
#define JM_LWS_NAME "leaderworkerset.sigs.k8s.io/name"
#define JM_LWS_GROUP_KEY "leaderworkerset.sigs.k8s.io/group-key"
#define JM_JOBSET_NAME "jobset.sigs.k8s.io/jobset-name"
#define JM_JOBSET_UID "jobset.sigs.k8s.io/jobset-uid"
#define JM_JOBSET_RJOB "jobset.sigs.k8s.io/replicatedjob-name"
#define JM_KF_JOB_NAME "training.kubeflow.org/job-name"
#define JM_KF_OPERATOR "training.kubeflow.org/operator-name"
#define JM_VOLCANO_JOB "volcano.sh/job-name"
#define JM_VOLCANO_TASK "volcano.sh/task-spec"
#define JM_NODES_ANNOTATION "ncclguard.io/nodes"
#define JM_NODES_DEFAULT "{annotation:" JM_NODES_ANNOTATION "}"

struct jobmember {
    enum mn_kind kind;         /* MN_NONE: the check stays single-pod */
    const char *operator_name; /* MN_VARS' name; NULL for MN_NONE */
    char why[160];             /* how it was found, or why single-pod */
    bool nodes_from_pet;       /* plain JobSet whose pods carry PET_NNODES */
    /* Plain JobSet whose GPU container sets MASTER_ADDR (torchrun with
     * --master_addr): node rank 0's address is that variable, unless the
     * policy names another. */
    bool leader_from_master;
    /* The job's pods as a dry run counts them from the JobSet (the sum
     * of replicas x parallelism), for the warning that asks for
     * ncclguard.io/nodes; 0 when unknown (the server sees only the pod). */
    long long nodes_hint;
};

/*
 * Decides whether pod (a Pod, or a pod template as the dry run sees it)
 * is one node of a job whose pods the ring check can join. gpu_ctr is the
 * container whose env the check copies (may be NULL). workload is the
 * object holding the template in a dry run (a LeaderWorkerSet, a JobSet,
 * ...), NULL on the server: it stands in for the labels and variables the
 * operator adds when it creates the pods; s names the GPU resources. All
 * borrowed. Never fails;
 * thread-safe.
 */
void jobmember_detect(const json_t *pod, const json_t *gpu_ctr,
                      const json_t *workload, const struct settings *s,
                      struct jobmember *out);

/* Whether name is one of the variables jobmember_env() writes (POD_IP,
 * NCCLGUARD_*), which a copy of the workload's env must not repeat. */
bool jobmember_owns(const char *name);

/*
 * Appends to env (a JSON array, borrowed) the entries the ring-check init
 * container needs beyond the copied workload env: POD_IP, NCCLGUARD_JOB_ID
 * and, for plain JobSet and Volcano pods, NCCLGUARD_LEADER_ADDR and
 * NCCLGUARD_NNODES rendered from the policy's templates (s), after the
 * NCCLGUARD_T<n> downward-API variables the templates read. On a return
 * other than 0, env may hold part of them: discard it. Returns 0; -1 on
 * allocation failure; 1 when the pod cannot join (a template names an
 * ncclguard.io annotation the pod lacks), with the reason in why.
 */
int jobmember_env(const struct jobmember *m, const json_t *pod,
                  const struct settings *s, json_t *env, char *why,
                  size_t why_len) __attribute__((warn_unused_result));

#endif
