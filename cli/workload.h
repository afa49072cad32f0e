/* Finds the pod templates inside Kubernetes objects (Pod, Deployment, Job,
 * CronJob, LeaderWorkerSet, PyTorchJob, MPIJob, JobSet, RayCluster, ...)
 * and mutates each one on the server's code path: each pod becomes the
 * AdmissionReview the apiserver would send, and goes through the admission
 * core's one entry point, review_handle(). */
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
    /* The core's plan (outcome.mutation); its patch_text is the JSON Patch
     * exactly as the response carries it before base64, NULL when the
     * response has no patch. */
    struct mutate_result result;
    /* The AdmissionReview (admission.k8s.io/v1, Pod CREATE) the pod was
     * handed to the core as, compact-JSON text of it byte for byte; owned.
     * NULL only when the object held no pod here. */
    json_t *review;
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
 * server sends for that pod. Each pod (a template's metadata and spec, a
 * bare pod spec, a Pod, an AdmissionReview's request.object) is wrapped in
 * the AdmissionReview the apiserver would send for its creation: a v1 Pod
 * with metadata.name (the object's name and the pod's index when it has
 * none) and metadata.namespace, request namespace ns_given, else the
 * object's (or a List item's) metadata.namespace, else the pod's, else
 * "default". That review goes through review_handle() with pol and opt
 * unchanged, and the patch it answers is applied to the template. Fills
 * *rep (release with workload_report_release()): the pods mutated, or, for
 * an object without pod templates, the pods derived from it (left
 * unchanged) or the paths of its GPU requests. Returns 0, or -1 on
 * allocation failure.
 */
int workload_mutate(json_t *obj, const char *ns_given, const struct policy *pol,
                    const struct mutate_options *opt,
                    struct workload_report *rep)
    __attribute__((warn_unused_result));

/*
 * workload_mutate() for document number document (0-based) of a stream:
 * the reviews' uids then stay distinct across the stream
 * (00000000-0000-4000-8000-<(document + 1) * 4096 + pod index, hex>).
 */
int workload_mutate_document(json_t *obj, size_t document, const char *ns_given,
                             const struct policy *pol,
                             const struct mutate_options *opt,
                             struct workload_report *rep)
    __attribute__((warn_unused_result));

/* The object's name for messages and for its pods' reviews: metadata.name,
 * else metadata.generateName, else (an AdmissionReview) its object's; ""
 * when none. Borrowed from obj. */
const char *workload_object_name(const json_t *obj);

/* Frees what a report owns. Safe on a zeroed struct. */
void workload_report_release(struct workload_report *rep);

#endif
