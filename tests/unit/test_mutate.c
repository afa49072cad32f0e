/* Unit tests for server/mutate.c: the mutation of one pod. */
#include "mutate.h"

#include <inttypes.h>

#include "harness.h"
#include "server_fixtures.h"

static struct policy *pol_default;

/* Mutates pod; checks the form of every result, that the patch applies,
 * and that a second pass over the patched pod is empty. Returns the
 * patched pod (owned) or NULL. */
static json_t *
run(const struct policy *pol, const json_t *pod, const char *ns,
    struct mutate_result *res)
{
    struct mutate_options opt = {.own_namespace = "ncclguard"};
    json_t *patched;
    struct mutate_result again;

    CHECK_INT(mutate_pod(pod, ns, pol, &opt, res), 0);
    check_warnings_form(res->warnings);
    CHECK((res->status == MUTATE_PATCHED) == (json_array_size(res->patch) > 0));
    patched = patched_copy(pod, res);
    CHECK(patched != NULL);
    if (patched == NULL)
        return NULL;
    if (res->status == MUTATE_PATCHED) {
        CHECK_INT(mutate_pod(patched, ns, pol, &opt, &again), 0);
        if (json_array_size(again.patch) != 0) {
            char *t = json_dumps(again.patch, JSON_COMPACT);

            fprintf(stderr, "second pass not empty: %s\n", t);
            free(t);
        }
        CHECK_INT(json_array_size(again.patch), 0);
        CHECK_INT(again.status, MUTATE_UNCHANGED);
        mutate_result_release(&again);
    }
    return patched;
}

/* A one-container pod with the given resources JSON. */
static json_t *
pod_with(const char *resources)
{
    char buf[1024];

    snprintf(buf, sizeof(buf),
             "{'apiVersion':'v1','kind':'Pod','metadata':{'name':'p',"
             "'namespace':'ml'},'spec':{'containers':[{'name':'c',"
             "'image':'x','resources':%s}]}}",
             resources);
    return J(buf);
}

static void
test_gpu_count(void)
{
    static const struct {
        const char *what;
        const char *pod; /* full pod JSON, or NULL to use resources */
        const char *resources;
        enum mutate_status status;
        int64_t gpus;
        const char *warning; /* substring, or NULL for no warning */
    } cases[] = {
        {"number", NULL, "{'limits':{'nvidia.com/gpu':4}}", MUTATE_PATCHED, 4,
         NULL},
        {"string", NULL, "{'limits':{'nvidia.com/gpu':'4'}}", MUTATE_PATCHED, 4,
         NULL},
        {"requests only", NULL, "{'requests':{'nvidia.com/gpu':'2'}}",
         MUTATE_PATCHED, 2, NULL},
        {"limits win", NULL,
         "{'limits':{'nvidia.com/gpu':1},'requests':{'nvidia.com/gpu':3}}",
         MUTATE_PATCHED, 1, NULL},
        {"zero", NULL, "{'limits':{'nvidia.com/gpu':0}}", MUTATE_NOT_GPU, 0,
         NULL},
        {"fraction string", NULL, "{'limits':{'nvidia.com/gpu':'1.5'}}",
         MUTATE_NOT_GPU, 0, "not a whole number"},
        {"fraction number", NULL, "{'limits':{'nvidia.com/gpu':1.5}}",
         MUTATE_NOT_GPU, 0, "not a whole"},
        {"negative number", NULL, "{'limits':{'nvidia.com/gpu':-1}}",
         MUTATE_NOT_GPU, 0, "negative"},
        {"negative string", NULL, "{'limits':{'nvidia.com/gpu':'-2'}}",
         MUTATE_NOT_GPU, 0, "negative"},
        {"not a quantity", NULL, "{'limits':{'nvidia.com/gpu':'four'}}",
         MUTATE_NOT_GPU, 0, "not a quantity"},
        {"boolean", NULL, "{'limits':{'nvidia.com/gpu':true}}", MUTATE_NOT_GPU,
         0, "not a number"},
        {"milli", NULL, "{'limits':{'nvidia.com/gpu':'500m'}}", MUTATE_NOT_GPU,
         0, "not a whole number"},
        {"2.0 is whole", NULL, "{'limits':{'nvidia.com/gpu':2.0}}",
         MUTATE_PATCHED, 2, NULL},
        {"gpumem-percentage is not a GPU", NULL,
         "{'limits':{'nvidia.com/gpumem-percentage':30,"
         "'nvidia.com/gpucores':30}}",
         MUTATE_NOT_GPU, 0, NULL},
        {"amd only", NULL, "{'limits':{'amd.com/gpu':8}}", MUTATE_NOT_GPU, 0,
         NULL},
        {"no resources", NULL, "{}", MUTATE_NOT_GPU, 0, NULL},
        {"resources null", NULL, "null", MUTATE_NOT_GPU, 0, NULL},
        {"sum of containers",
         "{'metadata':{'name':'p'},'spec':{'containers':["
         "{'name':'a','resources':{'limits':{'nvidia.com/gpu':2}}},"
         "{'name':'b','resources':{'limits':{'nvidia.com/gpu':'2'}}}],"
         "'initContainers':[{'name':'i','resources':{'limits':"
         "{'nvidia.com/gpu':3}}}]}}",
         NULL, MUTATE_PATCHED, 4, NULL},
        {"init container larger",
         "{'metadata':{'name':'p'},'spec':{'containers':["
         "{'name':'a','resources':{'limits':{'nvidia.com/gpu':2}}}],"
         "'initContainers':[{'name':'i','resources':{'limits':"
         "{'nvidia.com/gpu':8}}}]}}",
         NULL, MUTATE_PATCHED, 8, NULL},
        {"sidecar adds to the app containers",
         "{'metadata':{'name':'p'},'spec':{'containers':["
         "{'name':'a','resources':{'limits':{'nvidia.com/gpu':2}}}],"
         "'initContainers':[{'name':'s','restartPolicy':'Always',"
         "'resources':{'limits':{'nvidia.com/gpu':1}}}]}}",
         NULL, MUTATE_PATCHED, 3, NULL},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *pod =
            cases[i].pod ? J(cases[i].pod) : pod_with(cases[i].resources);
        struct mutate_result r;
        json_t *patched = run(pol_default, pod, "ml", &r);
        int ok = r.status == cases[i].status && r.gpus == cases[i].gpus;

        if (cases[i].warning != NULL)
            ok = ok && warnings_have(r.warnings, cases[i].warning);
        else if (cases[i].status != MUTATE_PATCHED)
            ok = ok && json_array_size(r.warnings) == 0;
        if (!ok) {
            char *w = json_dumps(r.warnings, JSON_COMPACT);

            fprintf(stderr,
                    "gpu count case '%s': status %s gpus %" PRId64
                    " warnings %s\n",
                    cases[i].what, mutate_status_name(r.status), r.gpus, w);
            free(w);
        }
        CHECK(ok);
        /* No patch without GPUs, whatever the reason. */
        if (cases[i].status != MUTATE_PATCHED)
            CHECK_INT(json_array_size(r.patch), 0);
        json_decref(patched);
        json_decref(pod);
        mutate_result_release(&r);
    }
}

/* Regression: a container name cut in the middle of a UTF-8 character
 * used to make the warning invalid UTF-8, and jansson dropped it. */
static void
test_warning_utf8_cut(void)
{
    char name[128] = "a";
    char buf[512];
    json_t *pod;
    struct mutate_result r;

    for (int i = 0; i < 30; i++)
        memcpy(name + 1 + 2 * i, "\xc3\xa9", 3); /* e-acute */
    snprintf(buf, sizeof(buf),
             "{'metadata':{'name':'p'},'spec':{'containers':[{'name':'%s',"
             "'resources':{'limits':{'nvidia.com/gpu':'1.5'}}}]}}",
             name);
    pod = J(buf);
    CHECK_INT(mutate_pod(pod, "ml", pol_default, NULL, &r), 0);
    CHECK_INT(json_array_size(r.warnings), 1);
    check_warnings_form(r.warnings);
    CHECK(warnings_have(r.warnings, "not a whole number"));
    mutate_result_release(&r);
    json_decref(pod);
}

static void
test_skips(void)
{
    struct policy *pol =
        fixture_policy(POLICY_HEAD "rules:\n"
                                   "  - name: monitoring\n"
                                   "    match: {namespaces: [monitoring]}\n"
                                   "    skip: true\n");
    static const struct {
        const char *ns;
        const char *annotations;
        enum mutate_status status;
        const char *rule;
    } cases[] = {
        {"ml", "{}", MUTATE_PATCHED, "default"},
        {"kube-system", "{}", MUTATE_SKIPPED, NULL},
        {"kube-public", "{}", MUTATE_SKIPPED, NULL},
        {"kube-node-lease", "{}", MUTATE_SKIPPED, NULL},
        {"ncclguard", "{}", MUTATE_SKIPPED, NULL}, /* the webhook's own */
        {"monitoring", "{}", MUTATE_SKIPPED, "monitoring"},
        {"ml", "{'ncclguard.io/inject':'false'}", MUTATE_SKIPPED, NULL},
        {"ml", "{'ncclguard.io/inject':'true'}", MUTATE_PATCHED, "default"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[512];
        json_t *pod, *patched;
        struct mutate_result r;

        snprintf(buf, sizeof(buf),
                 "{'metadata':{'name':'p','annotations':%s},'spec':{"
                 "'containers':[{'name':'c','resources':{'limits':"
                 "{'nvidia.com/gpu':1}}}]}}",
                 cases[i].annotations);
        pod = J(buf);
        patched = run(pol, pod, cases[i].ns, &r);
        CHECK_INT(r.status, cases[i].status);
        if (r.status == MUTATE_SKIPPED) {
            CHECK_INT(json_array_size(r.patch), 0);
            CHECK(r.reason[0] != '\0');
        }
        if (cases[i].rule != NULL) {
            CHECK_STR(r.rule, cases[i].rule);
            CHECK_STR(json_string_value(json_object_get(r.audit, "rule")),
                      cases[i].rule);
        }
        json_decref(patched);
        json_decref(pod);
        mutate_result_release(&r);
    }
    /* The namespace argument wins; metadata.namespace is the fallback. */
    {
        json_t *pod = J("{'metadata':{'name':'p','namespace':'kube-system'},"
                        "'spec':{'containers':[{'name':'c','resources':"
                        "{'limits':{'nvidia.com/gpu':1}}}]}}");
        struct mutate_result r;
        json_t *patched = run(pol, pod, NULL, &r);

        CHECK_INT(r.status, MUTATE_SKIPPED);
        json_decref(patched);
        mutate_result_release(&r);
        patched = run(pol, pod, "ml", &r);
        CHECK_INT(r.status, MUTATE_PATCHED);
        json_decref(patched);
        mutate_result_release(&r);
        json_decref(pod);
    }
    policy_free(pol);
}

static void
test_envfrom(void)
{
    json_t *pod =
        J("{'metadata':{'name':'p'},'spec':{'containers':["
          "{'name':'gpu','envFrom':[{'configMapRef':{'name':'mine'}}],"
          "'resources':{'limits':{'nvidia.com/gpu':2}}},"
          "{'name':'side','image':'busybox'}]}}");
    struct mutate_result r;
    json_t *patched = run(pol_default, pod, "ml", &r);

    CHECK_INT(r.status, MUTATE_PATCHED);
    CHECK_STR(str_at(patched, "/spec/containers/0/envFrom/0/configMapRef/name"),
              "nccl-production-profile");
    CHECK(json_is_true(patch_pointer_get(
        patched, "/spec/containers/0/envFrom/0/configMapRef/optional")));
    CHECK_STR(str_at(patched, "/spec/containers/0/envFrom/1/configMapRef/name"),
              "mine");
    CHECK_INT(json_array_size(
                  patch_pointer_get(patched, "/spec/containers/0/envFrom")),
              2);
    /* The non-GPU sidecar is untouched. */
    CHECK(json_equal(patch_pointer_get(patched, "/spec/containers/1"),
                     patch_pointer_get(pod, "/spec/containers/1")));
    json_decref(patched);
    mutate_result_release(&r);
    json_decref(pod);

    /* Already present anywhere in envFrom: never added twice. */
    pod = J("{'metadata':{'name':'p'},'spec':{'containers':[{'name':'gpu',"
            "'envFrom':[{'configMapRef':{'name':'mine'}},{'configMapRef':"
            "{'name':'nccl-production-profile'}}],'resources':{'limits':"
            "{'nvidia.com/gpu':2}}}]}}");
    patched = run(pol_default, pod, "ml", &r);
    CHECK_INT(json_array_size(
                  patch_pointer_get(patched, "/spec/containers/0/envFrom")),
              2);
    json_decref(patched);
    mutate_result_release(&r);
    json_decref(pod);
}

/* Number of mounts at /dev/shm in a container of a patched pod. */
static int
shm_mounts(json_t *pod, const char *container_pointer)
{
    char p[128];
    json_t *mounts, *m;
    size_t i;
    int n = 0;

    snprintf(p, sizeof(p), "%s/volumeMounts", container_pointer);
    mounts = patch_pointer_get(pod, p);
    json_array_foreach(mounts, i, m)
    {
        const char *mp = json_string_value(json_object_get(m, "mountPath"));

        if (strcmp(mp, "/dev/shm") == 0)
            n++;
    }
    return n;
}

static void
test_shm(void)
{
    struct mutate_result r;
    json_t *pod, *patched;

    /* New volume: 4Gi per GPU x 4 = 16Gi, canonical form, unique name. */
    pod = J("{'metadata':{'name':'p'},'spec':{'volumes':[{'name':"
            "'ncclguard-shm','configMap':{'name':'x'}}],'containers':[{"
            "'name':'c','volumeMounts':[{'name':'ncclguard-shm','mountPath':"
            "'/etc/x'}],'resources':{'limits':{'nvidia.com/gpu':4}}}]}}");
    patched = run(pol_default, pod, "ml", &r);
    CHECK_STR(str_at(patched, "/spec/volumes/1/name"), "ncclguard-shm-2");
    CHECK_STR(str_at(patched, "/spec/volumes/1/emptyDir/medium"), "Memory");
    CHECK_STR(str_at(patched, "/spec/volumes/1/emptyDir/sizeLimit"), "16Gi");
    CHECK_INT(shm_mounts(patched, "/spec/containers/0"), 1);
    CHECK_STR(
        str_at(patched, "/metadata/annotations/ncclguard.io~1shm-size-applied"),
        "16Gi");
    CHECK_STR(json_string_value(json_object_get(r.audit, "shm-size")), "16Gi");
    json_decref(patched);
    mutate_result_release(&r);
    json_decref(pod);

    /* Clamped to min (1 GPU x 4Gi > 1Gi: 4Gi) and max (64 GPUs: 64Gi). */
    pod = pod_with("{'limits':{'nvidia.com/gpu':64}}");
    patched = run(pol_default, pod, "ml", &r);
    CHECK_STR(str_at(patched, "/spec/volumes/0/emptyDir/sizeLimit"), "64Gi");
    json_decref(patched);
    mutate_result_release(&r);
    json_decref(pod);

    /* Detected by mountPath, not by name: the volume called "shm" is not
     * /dev/shm; "data" is, and the second GPU container gets that one. */
    pod = J("{'metadata':{'name':'p'},'spec':{'volumes':["
            "{'name':'shm','emptyDir':{}},{'name':'data','emptyDir':{"
            "'medium':'Memory'}}],'containers':["
            "{'name':'a','volumeMounts':[{'name':'shm','mountPath':'/tmp/x'},"
            "{'name':'data','mountPath':'/dev/shm/'}],'resources':{'limits':"
            "{'nvidia.com/gpu':1}}},"
            "{'name':'b','resources':{'limits':{'nvidia.com/gpu':1}}}]}}");
    patched = run(pol_default, pod, "ml", &r);
    CHECK_INT(json_array_size(patch_pointer_get(patched, "/spec/volumes")),
              2 + 1 /* ncclguard-run for the ring check */);
    CHECK_INT(shm_mounts(patched, "/spec/containers/0"), 0); /* "/dev/shm/" */
    CHECK_INT(json_array_size(patch_pointer_get(
                  patched, "/spec/containers/0/volumeMounts")),
              3); /* never a second mount at /dev/shm: only /run/ncclguard */
    CHECK_INT(shm_mounts(patched, "/spec/containers/1"), 1);
    CHECK_STR(str_at(patched, "/spec/containers/1/volumeMounts/0/name"),
              "data");
    CHECK_INT(json_array_size(r.warnings), 0); /* no sizeLimit: fine */
    json_decref(patched);
    mutate_result_release(&r);
    json_decref(pod);

    /* Smaller memory emptyDir: kept with a warning (existing: keep). */
    pod = J("{'metadata':{'name':'p'},'spec':{'volumes':[{'name':'dshm',"
            "'emptyDir':{'medium':'Memory','sizeLimit':'2Gi'}}],'containers':"
            "[{'name':'c','volumeMounts':[{'name':'dshm','mountPath':"
            "'/dev/shm'}],'resources':{'limits':{'nvidia.com/gpu':8}}}]}}");
    patched = run(pol_default, pod, "ml", &r);
    CHECK_STR(str_at(patched, "/spec/volumes/0/emptyDir/sizeLimit"), "2Gi");
    CHECK(warnings_have(r.warnings, "\"dshm\" is 2Gi, below the 32Gi"));
    /* Every warning says how to fix it, within the 120 bytes kept. */
    CHECK(warnings_have(r.warnings, "kept: drop it or set shm.existing: grow"));
    CHECK_INT(shm_mounts(patched, "/spec/containers/0"), 1);
    json_decref(patched);
    mutate_result_release(&r);

    /* existing: grow raises it. */
    {
        struct policy *grow =
            fixture_policy(POLICY_HEAD "defaults:\n  shm: {existing: grow}\n");

        patched = run(grow, pod, "ml", &r);
        CHECK_STR(str_at(patched, "/spec/volumes/0/emptyDir/sizeLimit"),
                  "32Gi");
        CHECK(!warnings_have(r.warnings, "below"));
        json_decref(patched);
        mutate_result_release(&r);
        policy_free(grow);
    }
    json_decref(pod);

    /* The shm-size annotation, bounded by the policy's max. */
    pod = J("{'metadata':{'name':'p','annotations':{'ncclguard.io/shm-size':"
            "'48Gi'}},'spec':{'containers':[{'name':'c','resources':{"
            "'limits':{'nvidia.com/gpu':1}}}]}}");
    patched = run(pol_default, pod, "ml", &r);
    CHECK_STR(str_at(patched, "/spec/volumes/0/emptyDir/sizeLimit"), "48Gi");
    json_decref(patched);
    mutate_result_release(&r);
    json_decref(pod);
    pod = J("{'metadata':{'name':'p','annotations':{'ncclguard.io/shm-size':"
            "'100Gi'}},'spec':{'containers':[{'name':'c','resources':{"
            "'limits':{'nvidia.com/gpu':1}}}]}}");
    patched = run(pol_default, pod, "ml", &r);
    CHECK_STR(str_at(patched, "/spec/volumes/0/emptyDir/sizeLimit"), "4Gi");
    CHECK(json_array_size(r.warnings) >= 1);
    json_decref(patched);
    mutate_result_release(&r);
    json_decref(pod);
}

static void
test_memory(void)
{
    const char *res = "{'limits':{'nvidia.com/gpu':4,'memory':'8Gi'},"
                      "'requests':{'memory':'6Gi','cpu':'2'}}";
    json_t *pod = pod_with(res), *patched;
    struct mutate_result r;
    struct policy *raise;

    patched = run(pol_default, pod, "ml", &r);
    CHECK(warnings_have(r.warnings, "/dev/shm 16Gi exceeds the 8Gi memory "
                                    "limit of \"c\"; raise it or set "
                                    "shm.memoryLimit: raise"));
    CHECK_STR(str_at(patched, "/spec/containers/0/resources/limits/memory"),
              "8Gi");
    json_decref(patched);
    mutate_result_release(&r);

    raise =
        fixture_policy(POLICY_HEAD "defaults:\n  shm: {memoryLimit: raise}\n");
    patched = run(raise, pod, "ml", &r);
    CHECK_STR(str_at(patched, "/spec/containers/0/resources/limits/memory"),
              "24Gi");
    CHECK_STR(str_at(patched, "/spec/containers/0/resources/requests/memory"),
              "22Gi");
    CHECK(!warnings_have(r.warnings, "exceeds"));
    json_decref(patched);
    mutate_result_release(&r);
    json_decref(pod);

    /* Only where set: no memory limit, nothing raised. */
    pod = pod_with("{'limits':{'nvidia.com/gpu':1}}");
    patched = run(raise, pod, "ml", &r);
    CHECK(patch_pointer_get(patched, "/spec/containers/0/resources/limits/"
                                     "memory") == NULL);
    json_decref(patched);
    mutate_result_release(&r);
    json_decref(pod);
    policy_free(raise);
}

static void
test_ipc_env(void)
{
    struct policy *pol = fixture_policy(
        POLICY_HEAD "defaults:\n"
                    "  ipc: {capabilities: [IPC_LOCK], hostIPC: true}\n"
                    "  extraEnv:\n"
                    "    - {name: NCCL_SOCKET_IFNAME, value: eth0}\n"
                    "    - {name: NCCL_IB_HCA, value: mlx5}\n");
    json_t *pod, *patched;
    struct mutate_result r;

    pod = J("{'metadata':{'name':'p','annotations':{'ncclguard.io/debug':"
            "'true'}},'spec':{'securityContext':{'runAsNonRoot':true},"
            "'containers':[{'name':'a','env':[{'name':'NCCL_IB_HCA','value':"
            "'mine'}],'securityContext':{'capabilities':{'add':["
            "'CAP_IPC_LOCK']}},'resources':{'limits':{'nvidia.com/gpu':1}}},"
            "{'name':'b','resources':{'limits':{'nvidia.com/gpu':1}}}]}}");
    patched = run(pol, pod, "ml", &r);
    CHECK_INT(r.status, MUTATE_PATCHED);
    /* Never duplicated: CAP_IPC_LOCK is IPC_LOCK. */
    CHECK_INT(
        json_array_size(patch_pointer_get(
            patched, "/spec/containers/0/securityContext/capabilities/add")),
        1);
    CHECK_STR(str_at(patched,
                     "/spec/containers/1/securityContext/capabilities/add/0"),
              "IPC_LOCK");
    CHECK(json_is_true(patch_pointer_get(patched, "/spec/hostIPC")));
    CHECK(warnings_have(r.warnings, "IPC_LOCK in container \"b\" has no "
                                    "effect: it runs as non-root; run it as "
                                    "root or drop IPC_LOCK"));
    CHECK(!warnings_have(r.warnings, "container \"a\" has no"));
    /* extraEnv: the user's value wins; the rest is added. */
    {
        json_t *env = patch_pointer_get(patched, "/spec/containers/0/env");
        int hca = 0, ifname = 0, debug = 0, subsys = 0;
        size_t i;
        json_t *e;

        json_array_foreach(env, i, e)
        {
            const char *n = json_string_value(json_object_get(e, "name"));
            const char *v = json_string_value(json_object_get(e, "value"));

            if (strcmp(n, "NCCL_IB_HCA") == 0) {
                hca++;
                CHECK_STR(v, "mine");
            }
            if (strcmp(n, "NCCL_SOCKET_IFNAME") == 0) {
                ifname++;
                CHECK_STR(v, "eth0");
            }
            if (strcmp(n, "NCCL_DEBUG") == 0) {
                debug++;
                CHECK_STR(v, "INFO");
            }
            if (strcmp(n, "NCCL_DEBUG_SUBSYS") == 0) {
                subsys++;
                CHECK_STR(v, "INIT,COLL,ENV,NET");
            }
        }
        CHECK_INT(hca, 1);
        CHECK_INT(ifname, 1);
        CHECK_INT(debug, 1);
        CHECK_INT(subsys, 1);
    }
    json_decref(patched);
    mutate_result_release(&r);
    json_decref(pod);

    /* runAsUser != 0 at container level is non-root too; uid 0 is not. */
    pod = J("{'metadata':{'name':'p'},'spec':{'containers':[{'name':'u',"
            "'securityContext':{'runAsUser':1000},'resources':{'limits':{"
            "'nvidia.com/gpu':1}}},{'name':'r','securityContext':{"
            "'runAsUser':0},'resources':{'limits':{'nvidia.com/gpu':1}}}]}}");
    patched = run(pol, pod, "ml", &r);
    CHECK(warnings_have(r.warnings, "container \"u\" has no effect"));
    CHECK(!warnings_have(r.warnings, "container \"r\" has no effect"));
    json_decref(patched);
    mutate_result_release(&r);
    json_decref(pod);
    policy_free(pol);

    /* The default policy adds neither capabilities nor hostIPC. */
    pod = pod_with("{'limits':{'nvidia.com/gpu':1}}");
    patched = run(pol_default, pod, "ml", &r);
    CHECK(patch_pointer_get(patched, "/spec/hostIPC") == NULL);
    CHECK(patch_pointer_get(patched, "/spec/containers/0/securityContext") ==
          NULL);
    json_decref(patched);
    mutate_result_release(&r);
    json_decref(pod);
}

/* The ring-check init container of a patched pod, or NULL. */
static json_t *
ringcheck_of(json_t *pod, size_t *index)
{
    json_t *inits = patch_pointer_get(pod, "/spec/initContainers"), *c;
    size_t i;

    json_array_foreach(inits, i, c)
    {
        const char *name = json_string_value(json_object_get(c, "name"));

        if (strcmp(name, "ncclguard-ringcheck") != 0)
            continue;
        if (index != NULL)
            *index = i;
        return c;
    }
    return NULL;
}

static void
test_ringcheck(void)
{
    json_t *pod, *patched, *rc, *args;
    struct mutate_result r;
    size_t idx = 99;
    char *args_text;

    /* Last after a native sidecar; the pod requires non-root. */
    pod = J("{'metadata':{'name':'p'},'spec':{'securityContext':{"
            "'runAsNonRoot':true},'initContainers':[{'name':'proxy',"
            "'restartPolicy':'Always','image':'envoy'}],'containers':[{"
            "'name':'c','env':[{'name':'HF_TOKEN','value':'t'}],'resources':"
            "{'limits':{'nvidia.com/gpu':'8'}}}]}}");
    patched = run(pol_default, pod, "ml", &r);
    rc = ringcheck_of(patched, &idx);
    CHECK(rc != NULL);
    CHECK_INT(idx, 1);
    args = json_object_get(rc, "args");
    args_text = json_dumps(args, JSON_COMPACT);
    CHECK_STR(args_text,
              "[\"--expect-gpus\",\"8\",\"--timeout\",\"120\",\"--mode\","
              "\"process\",\"--bw-bytes\",\"268435456\",\"--on-failure\","
              "\"fallback\",\"--fallback-conf\",\"/run/ncclguard/nccl.conf\"]");
    free(args_text);
    CHECK_STR(json_string_value(json_object_get(rc, "image")),
              "ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0");
    CHECK_STR(
        json_string_value(json_object_get(rc, "terminationMessagePolicy")),
        "FallbackToLogsOnError");
    CHECK_STR(str_at(rc, "/resources/limits/nvidia.com~1gpu"), "8");
    CHECK_STR(str_at(rc, "/resources/requests/nvidia.com~1gpu"), "8");
    CHECK_STR(str_at(rc, "/resources/requests/cpu"), "100m");
    CHECK_STR(str_at(rc, "/resources/requests/memory"), "2Gi");
    CHECK(patch_pointer_get(rc, "/resources/limits/cpu") == NULL);
    CHECK(json_is_false(patch_pointer_get(rc, "/securityContext/"
                                              "allowPrivilegeEscalation")));
    CHECK_STR(str_at(rc, "/securityContext/capabilities/drop/0"), "ALL");
    CHECK(json_is_true(patch_pointer_get(rc, "/securityContext/runAsNonRoot")));
    CHECK_STR(str_at(rc, "/envFrom/0/configMapRef/name"),
              "nccl-production-profile");
    CHECK_STR(str_at(rc, "/env/0/name"), "HF_TOKEN"); /* the pod's own env */
    CHECK_STR(str_at(rc, "/volumeMounts/0/mountPath"), "/dev/shm");
    CHECK_STR(str_at(rc, "/volumeMounts/1/mountPath"), "/run/ncclguard");
    /* Fallback: the GPU container reads the file the check writes. */
    CHECK_STR(str_at(patched, "/spec/containers/0/env/1/name"),
              "NCCL_CONF_FILE");
    CHECK_STR(str_at(patched, "/spec/containers/0/env/1/value"),
              "/run/ncclguard/nccl.conf");
    CHECK_STR(str_at(patched, "/spec/containers/0/volumeMounts/1/mountPath"),
              "/run/ncclguard");
    CHECK(json_is_true(patch_pointer_get(
        patched, "/spec/containers/0/volumeMounts/1/readOnly")));
    json_decref(patched);
    mutate_result_release(&r);
    json_decref(pod);

    /* The user's NCCL_CONF_FILE wins; opt-out annotation removes the
     * check; Guaranteed pods keep their QoS class. */
    pod = J("{'metadata':{'name':'p'},'spec':{'containers':[{'name':'c',"
            "'env':[{'name':'NCCL_CONF_FILE','value':'/etc/mine.conf'}],"
            "'resources':{'limits':{'nvidia.com/gpu':2,'cpu':'4','memory':"
            "'64Gi'}}}]}}");
    patched = run(pol_default, pod, "ml", &r);
    CHECK_INT(
        json_array_size(patch_pointer_get(patched, "/spec/containers/0/env")),
        1);
    rc = ringcheck_of(patched, NULL);
    CHECK_STR(str_at(rc, "/resources/limits/cpu"), "100m");
    CHECK_STR(str_at(rc, "/resources/limits/memory"), "2Gi");
    CHECK(patch_pointer_get(rc, "/securityContext/runAsNonRoot") == NULL);
    json_decref(patched);
    mutate_result_release(&r);
    json_decref(pod);

    pod = J("{'metadata':{'name':'p','annotations':{'ncclguard.io/ring-check':"
            "'false'}},'spec':{'containers':[{'name':'c','resources':{"
            "'limits':{'nvidia.com/gpu':1}}}]}}");
    patched = run(pol_default, pod, "ml", &r);
    CHECK(ringcheck_of(patched, NULL) == NULL);
    CHECK(patch_pointer_get(patched, "/spec/containers/0/env") == NULL);
    json_decref(patched);
    mutate_result_release(&r);
    json_decref(pod);

    /* shm disabled: nothing added, but the check mounts the pod's own. */
    {
        struct policy *pol =
            fixture_policy(POLICY_HEAD "defaults:\n  shm: {enabled: false}\n");

        pod = J("{'metadata':{'name':'p'},'spec':{'volumes':[{'name':'mine',"
                "'emptyDir':{'medium':'Memory'}}],'containers':[{'name':'c',"
                "'volumeMounts':[{'name':'mine','mountPath':'/dev/shm'}],"
                "'resources':{'limits':{'nvidia.com/gpu':1}}},{'name':'d',"
                "'resources':{'limits':{'nvidia.com/gpu':1}}}]}}");
        patched = run(pol, pod, "ml", &r);
        rc = ringcheck_of(patched, NULL);
        CHECK_STR(str_at(rc, "/volumeMounts/0/mountPath"), "/dev/shm");
        CHECK_STR(str_at(rc, "/volumeMounts/0/name"), "mine");
        CHECK_INT(shm_mounts(patched, "/spec/containers/1"), 0);
        CHECK_INT(json_array_size(patch_pointer_get(patched, "/spec/volumes")),
                  2); /* mine, and ncclguard-run for the fallback */
        json_decref(patched);
        mutate_result_release(&r);
        json_decref(pod);
        policy_free(pol);
    }

    /* Other settings: group mode, warn, a bandwidth threshold, two GPU
     * resources counted separately. */
    {
        struct policy *pol = fixture_policy(
            POLICY_HEAD
            "defaults:\n"
            "  gpuResources: [nvidia.com/gpu, nvidia.com/mig-1g.5gb]\n"
            "  ringCheck: {mode: group, onFailure: warn,"
            " minBusBandwidthGBps: 12.5, timeoutSeconds: 60}\n");

        pod = J("{'metadata':{'name':'p'},'spec':{'containers':[{'name':'a',"
                "'resources':{'limits':{'nvidia.com/mig-1g.5gb':'1'}}},{"
                "'name':'b','resources':{'limits':{'nvidia.com/gpu':2}}}]}}");
        patched = run(pol, pod, "ml", &r);
        CHECK_INT(r.gpus, 3);
        rc = ringcheck_of(patched, NULL);
        args_text = json_dumps(json_object_get(rc, "args"), JSON_COMPACT);
        CHECK_STR(args_text,
                  "[\"--expect-gpus\",\"3\",\"--timeout\",\"60\",\"--mode\","
                  "\"group\",\"--bw-bytes\",\"268435456\",\"--on-failure\","
                  "\"warn\",\"--min-busbw\",\"12.5\"]");
        free(args_text);
        CHECK_STR(str_at(rc, "/resources/limits/nvidia.com~1gpu"), "2");
        CHECK_STR(str_at(rc, "/resources/limits/nvidia.com~1mig-1g.5gb"), "1");
        CHECK(patch_pointer_get(patched, "/spec/volumes/1") == NULL);
        CHECK_INT(json_array_size(patch_pointer_get(
                      patched, "/spec/containers/1/volumeMounts")),
                  1); /* only /dev/shm: no fallback directory */
        json_decref(patched);
        mutate_result_release(&r);
        json_decref(pod);
        policy_free(pol);
    }
}

static void
test_annotations_and_odd_shapes(void)
{
    json_t *pod, *patched;
    struct mutate_result r;
    size_t i;
    json_t *op;
    int escaped = 0;

    /* Existing annotations: one op per key, "/" escaped as "~1". */
    pod = J("{'metadata':{'name':'p','annotations':{'team':'a'}},'spec':{"
            "'containers':[{'name':'c','resources':{'limits':{"
            "'nvidia.com/gpu':1}}}]}}");
    patched = run(pol_default, pod, "ml", &r);
    json_array_foreach(r.patch, i, op)
    {
        const char *path = json_string_value(json_object_get(op, "path"));

        if (strcmp(path, "/metadata/annotations/ncclguard.io~1mutated") == 0)
            escaped++;
    }
    CHECK_INT(escaped, 1);
    CHECK_STR(str_at(patched, "/metadata/annotations/team"), "a");
    CHECK_STR(str_at(patched, "/metadata/annotations/ncclguard.io~1gpus"), "1");
    CHECK_STR(str_at(patched, "/metadata/annotations/ncclguard.io~1rule"),
              "default");
    CHECK(strstr(str_at(patched, "/metadata/annotations/ncclguard.io~1mutated"),
                 "envFrom") != NULL);
    CHECK(json_object_get(r.audit, "mutated") != NULL);
    json_decref(patched);
    mutate_result_release(&r);
    json_decref(pod);

    /* Null metadata, null resources.requests, null emptyDir elsewhere. */
    pod = J("{'metadata':null,'spec':{'volumes':[{'name':'v','emptyDir':null}],"
            "'containers':[{'name':'c','resources':{'requests':null,'limits':{"
            "'nvidia.com/gpu':'8'}}}]}}");
    patched = run(pol_default, pod, "ml", &r);
    CHECK_INT(r.status, MUTATE_PATCHED);
    CHECK_STR(str_at(patched, "/metadata/annotations/ncclguard.io~1gpus"), "8");
    json_decref(patched);
    mutate_result_release(&r);
    json_decref(pod);

    /* Not a pod at all. */
    pod = J("[1,2]");
    CHECK_INT(mutate_pod(pod, "ml", pol_default, NULL, &r), 0);
    CHECK_INT(r.status, MUTATE_NOT_GPU);
    CHECK_INT(json_array_size(r.patch), 0);
    mutate_result_release(&r);
    json_decref(pod);
    pod = J("{'spec':{'containers':['not an object']}}");
    CHECK_INT(mutate_pod(pod, "ml", pol_default, NULL, &r), 0);
    CHECK_INT(r.status, MUTATE_ERROR);
    CHECK_INT(json_array_size(r.patch), 0);
    CHECK(warnings_have(r.warnings, "not an object"));
    mutate_result_release(&r);
    json_decref(pod);
}

/* Builds a pod with n GPU containers, each with env already present. */
static json_t *
pod_many(int n)
{
    json_t *pod = J("{'metadata':{'name':'p'},'spec':{'containers':[]}}");
    json_t *list = patch_pointer_get(pod, "/spec/containers");

    for (int i = 0; i < n; i++) {
        char buf[256];

        snprintf(buf, sizeof(buf),
                 "{'name':'c%d','env':[{'name':'A','value':'1'}],"
                 "'volumeMounts':[],'resources':{'limits':"
                 "{'nvidia.com/gpu':1}}}",
                 i);
        json_array_append_new(list, J(buf));
    }
    return pod;
}

static void
test_bounds(void)
{
    struct policy *pol =
        fixture_policy(POLICY_HEAD "defaults:\n  extraEnv:\n"
                                   "    - {name: EXTRA_A, value: '1'}\n"
                                   "    - {name: EXTRA_B, value: '1'}\n"
                                   "    - {name: EXTRA_C, value: '1'}\n"
                                   "    - {name: EXTRA_D, value: '1'}\n"
                                   "    - {name: EXTRA_E, value: '1'}\n"
                                   "    - {name: EXTRA_F, value: '1'}\n");
    json_t *pod = pod_many(129);
    struct mutate_result r;

    /* Too many containers: no patch, a warning, an error status. */
    CHECK_INT(mutate_pod(pod, "ml", pol_default, NULL, &r), 0);
    CHECK_INT(r.status, MUTATE_ERROR);
    CHECK_INT(json_array_size(r.patch), 0);
    CHECK(warnings_have(r.warnings, "more than 128 containers"));
    check_warnings_form(r.warnings);
    mutate_result_release(&r);
    json_decref(pod);

    /* A patch that would exceed the operation cap fails its check:
     * allowed, no patch, a warning. */
    pod = pod_many(120);
    CHECK_INT(mutate_pod(pod, "ml", pol, NULL, &r), 0);
    CHECK_INT(r.status, MUTATE_ERROR);
    CHECK_INT(json_array_size(r.patch), 0);
    CHECK_INT(json_array_size(r.injected), 0);
    CHECK(warnings_have(r.warnings, "operations"));
    check_warnings_form(r.warnings);
    mutate_result_release(&r);
    json_decref(pod);

    /* Just under the cap, the same pod shape works. */
    pod = pod_many(60);
    CHECK_INT(mutate_pod(pod, "ml", pol, NULL, &r), 0);
    CHECK_INT(r.status, MUTATE_PATCHED);
    CHECK(json_array_size(r.patch) > 500);
    mutate_result_release(&r);
    json_decref(pod);
    policy_free(pol);
}

static void
test_status_names(void)
{
    CHECK_STR(mutate_status_name(MUTATE_PATCHED), "patched");
    CHECK_STR(mutate_status_name(MUTATE_NOT_GPU), "not_gpu");
    CHECK_STR(mutate_status_name(MUTATE_ERROR), "error");
    {
        struct mutate_result zero;

        memset(&zero, 0, sizeof(zero));
        mutate_result_release(&zero); /* safe on a zeroed struct */
        CHECK(zero.patch == NULL);
    }
}

int
main(void)
{
    pol_default = fixture_policy(POLICY_HEAD);
    test_gpu_count();
    test_warning_utf8_cut();
    test_skips();
    test_envfrom();
    test_shm();
    test_memory();
    test_ipc_env();
    test_ringcheck();
    test_annotations_and_odd_shapes();
    test_bounds();
    test_status_names();
    policy_free(pol_default);
    return harness_finish();
}
