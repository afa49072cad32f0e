/* Multi-node job membership: which operator made a pod, and the variables
 * the ring check needs to meet the job's other pods. */
#include "admission/jobmember.h"

#include <gnutls/crypto.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Template references one variable may hold (NCCLGUARD_T0..). */
#define JM_MAX_REFS 16

static const char *
str_get(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static const json_t *
meta_map(const json_t *pod, const char *key)
{
    return json_object_get(json_object_get(pod, "metadata"), key);
}

static const struct mn_vars *
vars_of(enum mn_kind k)
{
    for (size_t i = 0; i < MN_VARS_COUNT; i++)
        if (MN_VARS[i].kind == k)
            return &MN_VARS[i];
    return NULL;
}

static void
found(struct jobmember *out, enum mn_kind k, const char *fmt, const char *arg)
{
    const struct mn_vars *v = vars_of(k);

    out->kind = v != NULL ? k : MN_NONE;
    out->operator_name = v != NULL ? v->operator_name : NULL;
    snprintf(out->why, sizeof(out->why), fmt, arg);
}

/* The API group of an apiVersion ("jobset.x-k8s.io/v1alpha2"), compared
 * with want. */
static bool
group_is(const json_t *obj, const char *want)
{
    const char *av = str_get(obj, "apiVersion");
    size_t n = strlen(want);

    return av != NULL && strncmp(av, want, n) == 0 && av[n] == '/';
}

/* Whether a pod template asks for any of the policy's GPU resources. */
static bool
template_has_gpus(const json_t *tmpl, const struct settings *s)
{
    static const char *const lists[2] = {"containers", "initContainers"};
    const json_t *spec = json_object_get(tmpl, "spec");

    for (int l = 0; l < 2; l++) {
        size_t i;
        json_t *c;

        json_array_foreach(json_object_get(spec, lists[l]), i, c)
        {
            const json_t *res = json_object_get(c, "resources");

            for (size_t r = 0; r < s->n_gpu_resources; r++) {
                const char *name = s->gpu_resources[r];
                const json_t *v =
                    json_object_get(json_object_get(res, "limits"), name);

                if (v == NULL)
                    v = json_object_get(json_object_get(res, "requests"), name);
                if (v != NULL && !json_is_null(v) &&
                    !(json_is_integer(v) && json_integer_value(v) == 0) &&
                    !(json_is_string(v) &&
                      strcmp(json_string_value(v), "0") == 0))
                    return true;
            }
        }
    }
    return false;
}

/*
 * Why a PyTorchJob (training-operator v1) pod checks alone. The operator
 * makes one headless Service per replica, <job>-master-0 for MASTER_ADDR,
 * with ClusterIP None and no publishNotReadyAddresses (CreateNewService in
 * kubeflow/training-operator pkg/controller.v1/common/service.go), so the
 * name resolves only once the master pod is Ready: never while any init
 * container runs. A multi-node check would wait its whole deadline and
 * check nothing, so the pods get the single-pod check.
 */
#define JM_PYTORCHJOB_WHY                                                      \
    "PyTorchJob: MASTER_ADDR resolves only once the master is Ready (no "      \
    "publishNotReadyAddresses on its Service), never during init"

/*
 * The pods of a JobSet whose templates ask for GPUs: each replicatedJob
 * makes `replicas` Jobs (default 1) of `parallelism` pods each (default
 * 1). JobSet labels and annotates every pod with
 * jobset.sigs.k8s.io/global-replicas, the sum of the replicas
 * (labelAndAnnotateObject in kubernetes-sigs/jobset
 * pkg/controller/jobset_controller.go), but nothing on the pod says the
 * Jobs' parallelism, so only the whole JobSet gives the pod count. 0 when
 * a count is not a plain positive integer.
 */
static long long
jobset_pods(const json_t *spec, const struct settings *s)
{
    long long total = 0;
    size_t i;
    json_t *rj;

    json_array_foreach(json_object_get(spec, "replicatedJobs"), i, rj)
    {
        const json_t *job =
            json_object_get(json_object_get(rj, "template"), "spec");
        const json_t *rep = json_object_get(rj, "replicas");
        const json_t *par = json_object_get(job, "parallelism");
        long long r = 1, k = 1;

        if (!template_has_gpus(json_object_get(job, "template"), s))
            continue;
        if (rep != NULL)
            r = json_is_integer(rep) ? (long long)json_integer_value(rep) : 0;
        if (par != NULL)
            k = json_is_integer(par) ? (long long)json_integer_value(par) : 0;
        if (r <= 0 || k <= 0 || r > 100000 || k > 100000)
            return 0;
        total += r * k;
    }
    return total;
}

/* A PyTorchJob pod with a master: single-pod, and why. */
static void
pytorchjob_alone(struct jobmember *out)
{
    found(out, MN_NONE, "%s", JM_PYTORCHJOB_WHY);
}

/* The controlling owner's reference, or NULL. */
static const json_t *
owner_ref(const json_t *pod)
{
    size_t i;
    json_t *o;

    json_array_foreach(
        json_object_get(json_object_get(pod, "metadata"), "ownerReferences"), i,
        o)
    {
        if (json_is_true(json_object_get(o, "controller")))
            return o;
    }
    return NULL;
}

/* A name fit for a DNS label or an identity: 1 to 253 of [a-z0-9.-]. */
static bool
dns_ok(const char *s)
{
    size_t n = 0;

    if (s == NULL)
        return false;
    for (; s[n] != '\0'; n++)
        if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') ||
              s[n] == '-' || s[n] == '.'))
            return false;
    return n > 0 && n <= 253;
}

/*
 * Whether pod belongs to a gang, and which: into out->gang. Reads, in
 * order, the 1.36 schedulingGroup, the 1.35 workloadRef, Volcano's and
 * KAI's annotations. Returns the source's name for the note, or NULL.
 */
static const char *
gang_of(const json_t *pod, struct jobmember *out)
{
    const json_t *spec = json_object_get(pod, "spec");
    const json_t *ann = meta_map(pod, "annotations");
    const json_t *sg = json_object_get(spec, "schedulingGroup");
    const json_t *wr = json_object_get(spec, "workloadRef");
    const char *v;

    if (dns_ok(v = str_get(sg, "podGroupName"))) {
        snprintf(out->gang, sizeof(out->gang), "podgroup:%s", v);
        return "spec.schedulingGroup";
    }
    if (dns_ok(v = str_get(wr, "name"))) {
        const char *g = str_get(wr, "podGroup");
        const char *key = str_get(wr, "podGroupReplicaKey");

        /* Each replica key is a gang of its own. */
        snprintf(out->gang, sizeof(out->gang), "workload:%s/%.60s%s%.60s", v,
                 dns_ok(g) ? g : "", dns_ok(key) ? "/" : "",
                 dns_ok(key) ? key : "");
        return "spec.workloadRef";
    }
    if (dns_ok(v = str_get(ann, JM_VOLCANO_GROUP)) ||
        dns_ok(v = str_get(ann, JM_VOLCANO_GROUP2))) {
        snprintf(out->gang, sizeof(out->gang), "volcano:%s", v);
        return "Volcano PodGroup annotation";
    }
    if (dns_ok(v = str_get(ann, JM_KAI_GROUP))) {
        snprintf(out->gang, sizeof(out->gang), "kai:%s", v);
        return "KAI PodGroup annotation";
    }
    return NULL;
}

/*
 * A gang member: its node rank's label and node rank 0's name, from the
 * pod, or in a dry run from the workload (an Indexed Job, a StatefulSet)
 * that stands in for what its controller adds.
 */
static void
detect_gang(const json_t *pod, const json_t *workload, const char *src,
            struct jobmember *out)
{
    const json_t *labels = meta_map(pod, "labels");
    const json_t *wspec = json_object_get(workload, "spec");
    const char *wkind = str_get(workload, "kind");
    const char *owner = str_get(owner_ref(pod), "name");
    const char *sub = str_get(json_object_get(pod, "spec"), "subdomain");

    if (str_get(labels, JM_JOB_INDEX) != NULL)
        out->rank_label = JM_JOB_INDEX;
    else if (str_get(labels, JM_STS_INDEX) != NULL)
        out->rank_label = JM_STS_INDEX;
    else if (wkind != NULL && strcmp(wkind, "Job") == 0 &&
             group_is(workload, "batch") &&
             str_get(wspec, "completionMode") != NULL &&
             strcmp(str_get(wspec, "completionMode"), "Indexed") == 0)
        out->rank_label = JM_JOB_INDEX;
    else if (wkind != NULL && strcmp(wkind, "StatefulSet") == 0 &&
             group_is(workload, "apps"))
        out->rank_label = JM_STS_INDEX;
    if (out->rank_label == NULL) {
        found(out, MN_NONE,
              "gang (%s) without a node rank: only Indexed Job and "
              "StatefulSet pods carry an index label, so the check stays "
              "single-pod",
              src);
        out->gang[0] = '\0';
        return;
    }
    if (workload != NULL) {
        owner = str_get(json_object_get(workload, "metadata"), "name");
        if (strcmp(out->rank_label, JM_STS_INDEX) == 0)
            sub = str_get(wspec, "serviceName");
    }
    /* Indexed Job pods are named OWNER-INDEX and StatefulSet pods
     * OWNER-ORDINAL as hostnames under their subdomain (the headless
     * Service), so node rank 0 is OWNER-0.SUBDOMAIN. */
    if (dns_ok(owner) && dns_ok(sub))
        snprintf(out->leader, sizeof(out->leader), "%.120s-0.%.120s", owner,
                 sub);
    found(out, MN_GANG, "gang from %s", src);
}

/* A dry run sees a template, not the pod the operator creates: the
 * workload's kind stands in for the operator's labels. It also sees the
 * whole job, so it can tell when node rank 0's pod would run no check
 * (it asks for no GPU): the others would only wait for it. */
static void
detect_workload(const json_t *w, const struct settings *s,
                struct jobmember *out)
{
    const char *kind = str_get(w, "kind");
    const json_t *spec = json_object_get(w, "spec");

    if (kind == NULL)
        kind = "object";
    if (strcmp(kind, "LeaderWorkerSet") == 0 &&
        group_is(w, "leaderworkerset.x-k8s.io")) {
        const json_t *leader = json_object_get(
            json_object_get(spec, "leaderWorkerTemplate"), "leaderTemplate");

        if (leader != NULL && !template_has_gpus(leader, s))
            found(out, MN_NONE,
                  "%s leader asks for no GPU, so it runs no check for "
                  "the others to join",
                  kind);
        else
            found(out, MN_LWS,
                  "%s template; the operator's pod webhook adds LWS_* to "
                  "every container",
                  kind);
    } else if (strcmp(kind, "JobSet") == 0 && group_is(w, "jobset.x-k8s.io")) {
        found(out, MN_JOBSET,
              "%s template; leader and node count from the policy's "
              "templates",
              kind);
        out->nodes_hint = jobset_pods(spec, s);
    } else if (strcmp(kind, "PyTorchJob") == 0 && group_is(w, "kubeflow.org")) {
        const json_t *master = json_object_get(
            json_object_get(spec, "pytorchReplicaSpecs"), "Master");

        if (master != NULL &&
            !template_has_gpus(json_object_get(master, "template"), s))
            found(out, MN_NONE,
                  "%s Master asks for no GPU, so it runs no check for "
                  "the others to join",
                  kind);
        else if (master != NULL)
            pytorchjob_alone(out);
        else
            found(out, MN_NONE,
                  "%s without a Master replica: the operator sets no "
                  "MASTER_ADDR, so the check stays single-pod",
                  kind);
    } else if ((strcmp(kind, "TrainingRuntime") == 0 ||
                strcmp(kind, "ClusterTrainingRuntime") == 0) &&
               group_is(w, "trainer.kubeflow.org")) {
        /* Trainer's torch plugin always sets PET_NNODES and
         * PET_NODE_RANK, but PET_MASTER_ADDR only for torchrun, not for
         * torchtune's entrypoint, which the TrainJob chooses: node rank
         * 0's address is then JobSet's own naming, the policy's default
         * leader template. */
        if (json_object_get(json_object_get(spec, "mlPolicy"), "torch") !=
            NULL) {
            found(out, MN_JOBSET,
                  "%s template; the torch plugin sets PET_NNODES on the pods",
                  kind);
            out->nodes_from_pet = true;
        } else
            found(out, MN_NONE,
                  "%s without mlPolicy.torch sets no PET_* variables: "
                  "single-pod",
                  kind);
    } else if (strcmp(kind, "Job") == 0 && group_is(w, "batch.volcano.sh")) {
        found(out, MN_VOLCANO,
              "Volcano %s template; leader and node count from the policy's "
              "templates",
              kind);
    } else {
        found(out, MN_NONE, "%.60s pods stay single-pod", kind);
    }
}

void
jobmember_detect(const json_t *pod, const struct jobmember_env_seen *seen,
                 const json_t *workload, const struct settings *s,
                 struct jobmember *out)
{
    const struct jobmember_env_seen none = {0}, *env = seen ? seen : &none;
    const json_t *labels = meta_map(pod, "labels");
    const char *kf_op = str_get(labels, JM_KF_OPERATOR);
    const char *gang;

    memset(out, 0, sizeof(*out));
    if (str_get(labels, JM_LWS_NAME) != NULL) {
        found(out, MN_LWS, "label %s", JM_LWS_NAME);
    } else if (env->pet_master_addr) {
        found(out, MN_TORCHRUN, "variable %s", "PET_MASTER_ADDR");
    } else if (kf_op != NULL && strcmp(kf_op, "pytorchjob-controller") == 0) {
        if (env->master_addr)
            pytorchjob_alone(out);
        else
            found(out, MN_NONE,
                  "%s pod without MASTER_ADDR (no Master replica): "
                  "single-pod",
                  "PyTorchJob");
    } else if (kf_op != NULL) {
        found(out, MN_NONE, "%.60s pods stay single-pod", kf_op);
    } else if (str_get(labels, JM_JOBSET_NAME) != NULL && env->pet_nnodes) {
        found(out, MN_JOBSET, "label %s and PET_NNODES", JM_JOBSET_NAME);
        out->nodes_from_pet = true;
    } else if (str_get(labels, JM_JOBSET_NAME) != NULL && env->master_addr) {
        found(out, MN_JOBSET, "label %s and MASTER_ADDR", JM_JOBSET_NAME);
        out->leader_from_master = true;
    } else if (str_get(labels, JM_JOBSET_NAME) != NULL) {
        found(out, MN_JOBSET, "label %s", JM_JOBSET_NAME);
    } else if (str_get(labels, JM_VOLCANO_JOB) != NULL) {
        found(out, MN_VOLCANO, "label %s", JM_VOLCANO_JOB);
    } else if ((gang = gang_of(pod, out)) != NULL) {
        /* After the operators that say each pod's rank themselves. */
        detect_gang(pod, workload, gang, out);
    } else if (str_get(labels, "ray.io/cluster") != NULL) {
        found(out, MN_NONE, "%s pods stay single-pod", "RayCluster");
    } else if (workload != NULL) {
        detect_workload(workload, s, out);
        if (out->kind == MN_JOBSET && env->master_addr && !env->pet_nnodes)
            out->leader_from_master = true;
    } else {
        found(out, MN_NONE, "%s", "no job operator's labels or variables");
    }
}

/* ---- the init container's variables ----------------------------------- */

bool
jobmember_owns(const char *name)
{
    return strcmp(name, MN_ENV_POD_IP) == 0 ||
           strncmp(name, "NCCLGUARD_", 10) == 0;
}

static json_t *
field_ref(const char *path)
{
    return json_pack("{s:{s:s}}", "fieldRef", "fieldPath", path);
}

static int
add_value(json_t *env, const char *name, const char *value)
{
    return json_array_append_new(
        env, json_pack("{s:s, s:s}", "name", name, "value", value));
}

static int
add_field(json_t *env, const char *name, const char *path)
{
    json_t *ref = field_ref(path);

    if (ref == NULL)
        return -1;
    return json_array_append_new(
        env, json_pack("{s:s, s:o}", "name", name, "valueFrom", ref));
}

static int
add_label_ref(json_t *env, const char *name, const char *key)
{
    char path[400];

    snprintf(path, sizeof(path), "metadata.labels['%s']", key);
    return add_field(env, name, path);
}

/* The controlling owner's UID: every pod of one job has the same one. */
static const char *
owner_uid(const json_t *pod)
{
    return str_get(owner_ref(pod), "uid");
}

/*
 * NCCLGUARD_JOB_ID: the same value on every pod of one job and different
 * between jobs. The label each operator sets is read through the downward
 * API, so it also works on templates; where the operator sets none, the
 * owner's UID is written as it is when the pod is admitted.
 */
static int
add_job_id(const struct jobmember *m, const json_t *pod, json_t *env)
{
    const char *uid = owner_uid(pod);

    switch (m->kind) {
    case MN_LWS:
        /* One leader and its workers share the group key (the LWS pod
         * webhook sets it on the leader, the worker StatefulSet copies
         * it); the LWS name alone would join all replicas' groups. */
        return add_label_ref(env, MN_ENV_JOB_ID, JM_LWS_GROUP_KEY);
    case MN_TORCHRUN:
    case MN_JOBSET:
        return add_label_ref(env, MN_ENV_JOB_ID, JM_JOBSET_UID);
    case MN_PYTORCHJOB:
        if (uid != NULL)
            return add_value(env, MN_ENV_JOB_ID, uid);
        return add_label_ref(env, MN_ENV_JOB_ID, JM_KF_JOB_NAME);
    case MN_VOLCANO:
        if (uid != NULL)
            return add_value(env, MN_ENV_JOB_ID, uid);
        return add_label_ref(env, MN_ENV_JOB_ID, JM_VOLCANO_JOB);
    case MN_GANG:
        return add_value(env, MN_ENV_JOB_ID, m->gang);
    case MN_NONE:
        break;
    }
    return 0;
}

/*
 * The value NCCLGUARD_JOB_ID will have, when the webhook knows it now and
 * every pod of the job gets the same: a literal, or a label that the job's
 * controller sets when it creates the pods. NULL otherwise: LWS's group
 * key is set by LWS's own pod webhook, which may run after this one, so a
 * token over it would differ between the leader and its workers.
 */
static const char *
job_id_value(const struct jobmember *m, const json_t *pod)
{
    const json_t *labels = meta_map(pod, "labels");
    const char *uid = owner_uid(pod);

    switch (m->kind) {
    case MN_TORCHRUN:
    case MN_JOBSET:
        return str_get(labels, JM_JOBSET_UID);
    case MN_PYTORCHJOB:
        return uid != NULL ? uid : str_get(labels, JM_KF_JOB_NAME);
    case MN_VOLCANO:
        return uid != NULL ? uid : str_get(labels, JM_VOLCANO_JOB);
    case MN_GANG:
        return m->gang;
    case MN_LWS:
    case MN_NONE:
        break;
    }
    return NULL;
}

int
jobmember_token(const unsigned char *key, size_t keylen, const char *job,
                char *out)
{
    /* HMAC-SHA256 through GnuTLS (nettle), which the server already runs
     * for TLS: the review path never touches libcrypto, whose first EVP
     * call initialises OpenSSL and its providers (about 2 MiB of resident
     * pages in every server process; bench/RESULTS.md). */
    unsigned char mac[32];

    if (gnutls_hmac_get_len(GNUTLS_MAC_SHA256) != sizeof(mac) ||
        gnutls_hmac_fast(GNUTLS_MAC_SHA256, key, keylen, job, strlen(job),
                         mac) != 0)
        return -1;
    for (unsigned int i = 0; i < sizeof(mac); i++)
        snprintf(out + 2 * i, 3, "%02x", mac[i]);
    gnutls_memset(mac, 0, sizeof(mac));
    return 0;
}

/* NCCLGUARD_JOB_TOKEN when the webhook has a key and knows the job id.
 * Returns 0, -1 on allocation failure, 1 with why for a key too short. */
static int
add_job_token(const struct jobmember *m, const json_t *pod, json_t *env,
              char *why, size_t why_len)
{
    const char *key = getenv(JM_TOKEN_KEY_ENV);
    const char *job = job_id_value(m, pod);
    char tok[65];
    int rc;

    if (key == NULL || *key == '\0' || job == NULL || *job == '\0')
        return 0;
    if (strlen(key) < JM_TOKEN_KEY_MIN) {
        snprintf(why, why_len, "%s is shorter than %d bytes", JM_TOKEN_KEY_ENV,
                 JM_TOKEN_KEY_MIN);
        return 1;
    }
    if (jobmember_token((const unsigned char *)key, strlen(key), job, tok) != 0)
        return -1;
    rc = add_value(env, MN_ENV_JOB_TOKEN, tok);
    gnutls_memset(tok, 0, sizeof(tok));
    return rc != 0 ? -1 : 0;
}

struct render {
    json_t *env;
    long long nodes_hint; /* see struct jobmember */
    int refs;             /* NCCLGUARD_T<n> written so far */
    char out[1100];
    size_t len;
    bool full;
};

static void
render_put(struct render *r, const char *s, size_t n)
{
    if (r->len + n >= sizeof(r->out)) {
        r->full = true;
        return;
    }
    memcpy(r->out + r->len, s, n);
    r->len += n;
    r->out[r->len] = '\0';
}

/*
 * Why a pod checks alone when it lacks the ncclguard.io annotation key
 * that a template reads: for the node count, the exact annotation to add
 * to the pod template, with the count when the dry run knows it from the
 * whole JobSet.
 */
static void
nodes_missing(const struct render *r, const char *key, const char *what,
              char *why, size_t why_len)
{
    if (strcmp(key, JM_NODES_ANNOTATION) != 0)
        snprintf(why, why_len,
                 "no annotation %.60s (read by %s) on the pod template", key,
                 what);
    else if (r->nodes_hint > 0)
        snprintf(why, why_len,
                 "add the annotation %s: \"%lld\" (the job's pods) to the "
                 "pod template",
                 key, r->nodes_hint);
    else
        snprintf(why, why_len,
                 "add the annotation %s: \"<pods in the job>\" to the pod "
                 "template",
                 key);
}

/*
 * Renders tmpl into a value the kubelet expands: each label, annotation
 * or namespace reference becomes a downward-API variable NCCLGUARD_T<n>
 * defined before it, and the value reads it as $(NCCLGUARD_T<n>) (the
 * dependent-variable syntax of EnvVar.value). Returns 0, -1 on allocation
 * failure, 1 with why when the template cannot serve this pod.
 */
static int
render(struct render *r, const char *what, const char *tmpl, const json_t *pod,
       char *why, size_t why_len)
{
    const json_t *ann = meta_map(pod, "annotations");
    struct policy_template_piece piece;
    const char *cur = tmpl;
    char var[32], path[400], ref[48];
    int rc;

    r->len = 0;
    r->out[0] = '\0';
    while ((rc = policy_template_next(&cur, &piece, why, why_len)) > 0) {
        const char *fmt = NULL;

        switch (piece.kind) {
        case POLICY_TMPL_TEXT:
            render_put(r, piece.s, piece.len);
            continue;
        case POLICY_TMPL_ENV:
            render_put(r, "$(", 2);
            render_put(r, piece.s, piece.len);
            render_put(r, ")", 1);
            continue;
        case POLICY_TMPL_LABEL:
            fmt = "metadata.labels['%.*s']";
            break;
        case POLICY_TMPL_ANNOTATION:
            fmt = "metadata.annotations['%.*s']";
            /* Our own annotation is the user's to set on the template: a
             * pod without it cannot say how many nodes its job has. */
            if (piece.len > 13 && strncmp(piece.s, "ncclguard.io/", 13) == 0) {
                char key[320];

                snprintf(key, sizeof(key), "%.*s", (int)piece.len, piece.s);
                if (json_object_get(ann, key) == NULL) {
                    nodes_missing(r, key, what, why, why_len);
                    return 1;
                }
            }
            break;
        case POLICY_TMPL_NAMESPACE:
            fmt = NULL;
            break;
        }
        if (r->refs >= JM_MAX_REFS) {
            snprintf(why, why_len, "%s: more than %d references", what,
                     JM_MAX_REFS);
            return 1;
        }
        snprintf(var, sizeof(var), "NCCLGUARD_T%d", r->refs++);
        if (fmt != NULL)
            snprintf(path, sizeof(path), fmt, (int)piece.len, piece.s);
        else
            snprintf(path, sizeof(path), "metadata.namespace");
        if (add_field(r->env, var, path) != 0)
            return -1;
        snprintf(ref, sizeof(ref), "$(%s)", var);
        render_put(r, ref, strlen(ref));
    }
    if (rc < 0)
        return 1;
    if (r->full) {
        snprintf(why, why_len, "%s renders longer than %zu bytes", what,
                 sizeof(r->out) - 1);
        return 1;
    }
    return 0;
}

/* The leader of a plain JobSet or Volcano job when the policy names none:
 * node rank 0's stable DNS name. JobSet pods are <jobset>-<replicatedJob>-
 * <jobIndex>-<podIndex> under a headless Service named after the JobSet;
 * Volcano's svc plugin names pods <job>-<task>-<index> under a Service
 * named after the job. */
static const char *
leader_default(enum mn_kind k)
{
    if (k == MN_JOBSET)
        return "{label:" JM_JOBSET_NAME "}-{label:" JM_JOBSET_RJOB
               "}-0-0.{label:" JM_JOBSET_NAME "}";
    return "{label:" JM_VOLCANO_JOB "}-{annotation:" JM_VOLCANO_TASK
           "}-0.{label:" JM_VOLCANO_JOB "}";
}

int
jobmember_env(const struct jobmember *m, const json_t *pod,
              const struct settings *s, json_t *env, char *why, size_t why_len)
{
    struct render r;
    const char *leader, *nodes;
    int rc;

    if (m->kind == MN_NONE)
        return 0;
    if (add_field(env, MN_ENV_POD_IP, "status.podIP") != 0 ||
        add_job_id(m, pod, env) != 0)
        return -1;
    rc = add_job_token(m, pod, env, why, why_len);
    if (rc != 0)
        return rc;
    if (m->kind == MN_GANG &&
        add_label_ref(env, MN_ENV_NODE_RANK, m->rank_label) != 0)
        return -1;
    if (m->kind != MN_JOBSET && m->kind != MN_VOLCANO && m->kind != MN_GANG)
        return 0;
    memset(&r, 0, sizeof(r));
    r.env = env;
    r.nodes_hint = m->nodes_hint;
    if (s->ringcheck.leader_address != NULL)
        leader = s->ringcheck.leader_address;
    else if (m->kind == MN_GANG && m->leader[0] != '\0')
        leader = m->leader; /* a DNS name: no template braces */
    else if (m->kind == MN_GANG) {
        snprintf(why, why_len,
                 "the gang's pods have no spec.subdomain (a headless Service "
                 "naming node rank 0) and the policy sets no "
                 "ringCheck.leaderAddress");
        return 1;
    } else if (m->leader_from_master)
        leader = "{env:MASTER_ADDR}";
    else
        leader = leader_default(m->kind);
    rc = render(&r, "ringCheck.leaderAddress", leader, pod, why, why_len);
    if (rc != 0)
        return rc;
    if (add_value(env, MN_ENV_LEADER, r.out) != 0)
        return -1;
    nodes = s->ringcheck.nodes != NULL ? s->ringcheck.nodes : JM_NODES_DEFAULT;
    /* A Trainer pod says how many nodes its job has: the policy's own
     * template wins only when it is not the default. */
    if (m->nodes_from_pet && strcmp(nodes, JM_NODES_DEFAULT) == 0)
        nodes = "{env:PET_NNODES}";
    rc = render(&r, "ringCheck.nodes", nodes, pod, why, why_len);
    if (rc != 0)
        return rc;
    return add_value(env, MN_ENV_NNODES, r.out) != 0 ? -1 : 0;
}
