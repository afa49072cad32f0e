/* Whether a pod is one node of a multi-node job, which operator made it,
 * and the variables its ring-check init container needs to find the
 * job's other pods. */
#ifndef NCCLGUARD_JOBMEMBER_H
#define NCCLGUARD_JOBMEMBER_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "contract/multinode_env.h"
#include "policy/policy.h"

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
/* Gangs. Kubernetes 1.35 links a pod to a pod group of a Workload with
 * spec.workloadRef {name, podGroup, podGroupReplicaKey}; 1.36 replaced it
 * with spec.schedulingGroup.podGroupName, naming a PodGroup
 * (scheduling.k8s.io; kubernetes.io/docs/concepts/workloads/pods/
 * workload-reference and .../pods/scheduling-group). Volcano's scheduler
 * reads the PodGroup from an annotation (volcano-sh/apis,
 * pkg/apis/scheduling/v1beta1: KubeGroupNameAnnotationKey and
 * VolcanoGroupNameAnnotationKey); KAI's from "pod-group-name"
 * (NVIDIA/KAI-Scheduler, pkg/common/constants). A gang says who belongs
 * together, not each pod's rank: that comes from the index label of an
 * Indexed Job's pods (batch.kubernetes.io/job-completion-index) or a
 * StatefulSet's (apps.kubernetes.io/pod-index). */
#define JM_VOLCANO_GROUP "scheduling.k8s.io/group-name"
#define JM_VOLCANO_GROUP2 "scheduling.volcano.sh/group-name"
#define JM_KAI_GROUP "pod-group-name"
#define JM_JOB_INDEX "batch.kubernetes.io/job-completion-index"
#define JM_STS_INDEX "apps.kubernetes.io/pod-index"
/* The webhook's key for the job tokens (NCCLGUARD_JOB_TOKEN), in its own
 * environment, from a Secret; at least JM_TOKEN_KEY_MIN bytes. */
#define JM_TOKEN_KEY_ENV "NCCLGUARD_JOB_TOKEN_KEY"
#define JM_TOKEN_KEY_MIN 32
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
    /* MN_GANG: the gang's identity ("podgroup:NAME", ...), the label its
     * node rank comes from, and node rank 0's name when the pod says it
     * (OWNER-0.SUBDOMAIN), else "" */
    char gang[300];
    const char *rank_label;
    char leader[300];
};

/*
 * The job token the ring check proves in its rendezvous: HMAC-SHA256 of
 * job (the NCCLGUARD_JOB_ID value) under key, as 64 lower-case hex digits
 * into out (at least 65 bytes). Every pod of one job gets the same token,
 * and nobody without the key can make one. Returns 0, -1 when GnuTLS
 * fails. Thread-safe.
 */
int jobmember_token(const unsigned char *key, size_t keylen, const char *job,
                    char *out) __attribute__((warn_unused_result));

/* The job operators' variables that jobmember_detect() looks for in the
 * env of the container whose env the check copies. */
struct jobmember_env_seen {
    bool pet_master_addr; /* PET_MASTER_ADDR: torchrun's elastic rendezvous */
    bool master_addr;     /* MASTER_ADDR */
    bool pet_nnodes;      /* PET_NNODES */
};

/*
 * Decides whether pod (a Pod, or a pod template as the dry run sees it)
 * is one node of a job whose pods the ring check can join. seen says
 * which variables the container whose env the check copies sets (NULL:
 * none, or no such container). workload is the
 * object holding the template in a dry run (a LeaderWorkerSet, a JobSet,
 * ...), NULL on the server: it stands in for the labels and variables the
 * operator adds when it creates the pods; s names the GPU resources. All
 * borrowed. Never fails;
 * thread-safe.
 */
void jobmember_detect(const json_t *pod, const struct jobmember_env_seen *seen,
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
 * NCCLGUARD_T<n> downward-API variables the templates read; for a gang
 * also NCCLGUARD_NODE_RANK. When the webhook's environment holds a key
 * (JM_TOKEN_KEY_ENV) and the job id's value is known at admission, also
 * NCCLGUARD_JOB_TOKEN. On a return
 * other than 0, env may hold part of them: discard it. Returns 0; -1 on
 * allocation failure; 1 when the pod cannot join (a template names an
 * ncclguard.io annotation the pod lacks), with the reason in why.
 */
int jobmember_env(const struct jobmember *m, const json_t *pod,
                  const struct settings *s, json_t *env, char *why,
                  size_t why_len) __attribute__((warn_unused_result));

#endif
