/* Finds the pod templates inside Kubernetes objects (Pod, Deployment, Job,
 * CronJob, LeaderWorkerSet, PyTorchJob, MPIJob, JobSet, RayCluster, ...)
 * and mutates each one on the server's code path. */
#ifndef NCCLGUARD_WORKLOAD_H
#define NCCLGUARD_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "admission/mutate.h"
#include "policy/policy.h"

#define WORKLOAD_POINTER_MAX 512
/* At most this many GPU request paths are reported per object. */
#define WORKLOAD_MAX_GPU_PATHS 16

/* One pod (template) found in an object and what the mutation did. */
struct workload_pod {
    char pointer[WORKLOAD_POINTER_MAX]; /* JSON pointer of the pod
                                           (template), "" = the object */
    struct mutate_result result;
    /* NULL for a pod template that was mutated in place. Otherwise the
     * object holds no pod template but names the containers of the pods
     * its controller creates (a KServe InferenceService predictor, a
     * Kubeflow Trainer TrainJob's trainer): derived is the pod built from
     * them (owned), result is what the webhook would do to it, controller
     * names who creates it, and the object itself is left unchanged. */
    json_t *derived;
    const char *controller; /* static string, or NULL */
};

struct workload_report {
    struct workload_pod *pods;
    size_t n_pods;
    /* When no pod was found: JSON pointers of the GPU requests in the
     * object (keys naming a GPU under limits or requests, or a resource
     * name with "gpu" in it), so that the caller can say the webhook will
     * only see the pods this object's controller creates. */
    char (*gpu_paths)[WORKLOAD_POINTER_MAX];
    size_t n_gpu_paths;
    bool gpu_paths_truncated; /* more than WORKLOAD_MAX_GPU_PATHS */
};

/*
 * Mutates obj in place: every pod template gets exactly the patch the
 * server would send for that pod (a template's metadata/spec are treated as
 * a Pod's). An AdmissionReview is unwrapped to its request.object. pod_ns
 * overrides metadata.namespace when not NULL. Fills *rep (release with
 * workload_report_release()): the pods mutated, or, for an object without
 * pod templates, the pods derived from it (left unchanged) or the paths of
 * its GPU requests. Returns 0, or -1 on allocation failure.
 */
int workload_mutate(json_t *obj, const char *pod_ns, const struct policy *pol,
                    const struct mutate_options *opt,
                    struct workload_report *rep)
    __attribute__((warn_unused_result));

/* Frees what a report owns. Safe on a zeroed struct. */
void workload_report_release(struct workload_report *rep);

#endif
