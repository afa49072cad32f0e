/* Finds the pod templates inside Kubernetes objects (Pod, Deployment, Job,
 * CronJob, LeaderWorkerSet, PyTorchJob, MPIJob, JobSet, RayCluster, ...)
 * and mutates each one on the server's code path. */
#ifndef NCCLGUARD_WORKLOAD_H
#define NCCLGUARD_WORKLOAD_H

#include <stddef.h>

#include <jansson.h>

#include "mutate.h"
#include "policy.h"

/* One pod (template) found in an object and what the mutation did. */
struct workload_pod {
    char pointer[512]; /* JSON pointer of the pod (template), "" = the object */
    struct mutate_result result;
};

struct workload_report {
    struct workload_pod *pods;
    size_t n_pods;
};

/*
 * Mutates obj in place: every pod template gets exactly the patch the
 * server would send for that pod (a template's metadata/spec are treated as
 * a Pod's). An AdmissionReview is unwrapped to its request.object. namespace
 * overrides metadata.namespace when not NULL. Fills *rep (release with
 * workload_report_release()). Returns 0, or -1 on allocation failure.
 */
int workload_mutate(json_t *obj, const char *namespace,
                    const struct policy *pol, const struct mutate_options *opt,
                    struct workload_report *rep)
    __attribute__((warn_unused_result));

/* Frees what a report owns. Safe on a zeroed struct. */
void workload_report_release(struct workload_report *rep);

#endif
