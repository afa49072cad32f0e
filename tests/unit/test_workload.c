/* Unit tests for cli/workload.c: pod templates inside workloads. */
#include "cli/workload.h"

#include <stdlib.h>
#include <string.h>

#include "admission/review.h"

#include "harness.h"
#include "server_fixtures.h"

static struct policy *pol;
static const struct mutate_options opt = {.own_namespace = "ncclguard"};

#define GPU_CONTAINER(n)                                                       \
    "{'name':'" n "','image':'x','resources':{'limits':{'nvidia.com/gpu':"     \
    "'8'}}}"
#define CPU_CONTAINER(n) "{'name':'" n "','image':'x'}"
#define TEMPLATE(c)                                                            \
    "{'metadata':{'labels':{'app':'a'}},'spec':{'containers':[" c "]}}"

static void
test_finds_templates(void)
{
    static const struct {
        const char *what, *object;
        size_t n_pods;
        const char *pointers[3];
        enum mutate_status status[3];
    } cases[] = {
        {"pod",
         "{'apiVersion':'v1','kind':'Pod','metadata':{'name':'p'},'spec':{"
         "'containers':[" GPU_CONTAINER("c") "]}}",
         1,
         {""},
         {MUTATE_PATCHED}},
        {"deployment",
         "{'kind':'Deployment','metadata':{'name':'d'},'spec':{'template'"
         ":" TEMPLATE(GPU_CONTAINER("c")) "}}",
         1,
         {"/spec/template"},
         {MUTATE_PATCHED}},
        {"cronjob",
         "{'kind':'CronJob','spec':{'jobTemplate':{'spec':{'template'"
         ":" TEMPLATE(GPU_CONTAINER("c")) "}}}}",
         1,
         {"/spec/jobTemplate/spec/template"},
         {MUTATE_PATCHED}},
        {"pytorchjob",
         "{'kind':'PyTorchJob','spec':{'pytorchReplicaSpecs':{'Master':{"
         "'template':" TEMPLATE(CPU_CONTAINER(
             "m")) "},'Worker':{'replicas':2,"
                   "'template':" TEMPLATE(GPU_CONTAINER("w")) "}}}}",
         2,
         {"/spec/pytorchReplicaSpecs/Master/template",
          "/spec/pytorchReplicaSpecs/Worker/template"},
         {MUTATE_NOT_GPU, MUTATE_PATCHED}},
        {"jobset",
         "{'kind':'JobSet','spec':{'replicatedJobs':[{'name':'a','template':{"
         "'spec':{'template':" TEMPLATE(GPU_CONTAINER("c")) "}}}]}}",
         1,
         {"/spec/replicatedJobs/0/template/spec/template"},
         {MUTATE_PATCHED}},
        {"bare pod spec (LLMInferenceService)",
         "{'kind':'LLMInferenceService','spec':{'template':{'containers':"
         "[" GPU_CONTAINER("main") "]},'worker':{'containers':[" GPU_CONTAINER(
             "main") "]}}}",
         2,
         {"/spec/template", "/spec/worker"},
         {MUTATE_PATCHED, MUTATE_PATCHED}},
        {"key with a slash",
         "{'kind':'X','spec':{'a/b':{'template':" TEMPLATE(
             GPU_CONTAINER("c")) "}}}",
         1,
         {"/spec/a~1b/template"},
         {MUTATE_PATCHED}},
        {"service",
         "{'kind':'Service','spec':{'ports':[{'port':80}]}}",
         0,
         {NULL},
         {0}},
        {"template patch without containers",
         "{'kind':'RoleBasedGroup','spec':{'roles':[{'leaderTemplatePatch':{"
         "'metadata':{'labels':{'role':'leader'}}}}]}}",
         0,
         {NULL},
         {0}},
        {"system namespace",
         "{'kind':'Deployment','metadata':{'namespace':'kube-system'},"
         "'spec':{'template':" TEMPLATE(GPU_CONTAINER("c")) "}}",
         1,
         {"/spec/template"},
         {MUTATE_SKIPPED}},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *obj = J(cases[i].object), *orig = json_deep_copy(obj);
        struct workload_report rep;
        struct workload_report again;

        CHECK_INT(workload_mutate(obj, NULL, pol, &opt, &rep), 0);
        if (rep.n_pods != cases[i].n_pods)
            fprintf(stderr, "case %s: %zu pods\n", cases[i].what, rep.n_pods);
        CHECK_INT(rep.n_pods, cases[i].n_pods);
        for (size_t p = 0; p < rep.n_pods && p < cases[i].n_pods; p++) {
            CHECK_STR(rep.pods[p].pointer, cases[i].pointers[p]);
            CHECK_INT(rep.pods[p].result.status, cases[i].status[p]);
            check_warnings_form(rep.pods[p].result.warnings);
        }
        /* Whatever was patched changed the object; nothing else did. */
        {
            int any = 0;

            for (size_t p = 0; p < rep.n_pods; p++)
                any |= rep.pods[p].result.status == MUTATE_PATCHED;
            CHECK(any == !json_equal(obj, orig));
        }
        /* A second pass finds nothing to do. */
        CHECK_INT(workload_mutate(obj, NULL, pol, &opt, &again), 0);
        for (size_t p = 0; p < again.n_pods; p++) {
            CHECK(again.pods[p].result.status != MUTATE_PATCHED);
            CHECK_INT(json_array_size(again.pods[p].result.patch), 0);
        }
        workload_report_release(&again);
        workload_report_release(&rep);
        json_decref(obj);
        json_decref(orig);
    }
}

static void
test_in_place(void)
{
    json_t *obj = J("{'kind':'Deployment','metadata':{'name':'d','namespace':"
                    "'ml'},'spec':{'template':{'metadata':null,'spec':{"
                    "'containers':[" GPU_CONTAINER("c") "]}}}}");
    struct workload_report rep;

    CHECK_INT(workload_mutate(obj, NULL, pol, &opt, &rep), 0);
    CHECK_STR(str_at(obj, "/spec/template/spec/containers/0/envFrom/0/"
                          "configMapRef/name"),
              "nccl-production-profile");
    CHECK_STR(str_at(obj, "/spec/template/metadata/annotations/"
                          "ncclguard.io~1gpus"),
              "8");
    CHECK_STR(str_at(obj, "/spec/template/spec/initContainers/0/name"),
              "ncclguard-ringcheck");
    /* The object's own metadata is not a pod's. */
    CHECK(patch_pointer_get(obj, "/metadata/annotations") == NULL);
    workload_report_release(&rep);
    json_decref(obj);

    /* A bare PodSpec gets its containers mutated and no metadata key. */
    obj = J("{'kind':'LLMInferenceService','spec':{'template':{'containers':"
            "[" GPU_CONTAINER("main") "]}}}");
    CHECK_INT(workload_mutate(obj, NULL, pol, &opt, &rep), 0);
    CHECK_STR(str_at(obj, "/spec/template/containers/0/envFrom/0/configMapRef/"
                          "name"),
              "nccl-production-profile");
    CHECK(patch_pointer_get(obj, "/spec/template/metadata") == NULL);
    CHECK(patch_pointer_get(obj, "/spec/metadata") == NULL);
    workload_report_release(&rep);
    json_decref(obj);
}

static void
test_namespaces_and_reviews(void)
{
    const char *dep =
        "{'kind':'Deployment','metadata':{'namespace':"
        "'kube-system'},'spec':{'template':" TEMPLATE(GPU_CONTAINER("c")) "}}";
    json_t *obj = J(dep);
    struct workload_report rep;

    /* The namespace argument overrides metadata.namespace. */
    CHECK_INT(workload_mutate(obj, "ml", pol, &opt, &rep), 0);
    CHECK_INT(rep.n_pods, 1);
    CHECK_INT(rep.pods[0].result.status, MUTATE_PATCHED);
    workload_report_release(&rep);
    json_decref(obj);

    /* An AdmissionReview is unwrapped; its request.namespace counts. */
    obj =
        J("{'apiVersion':'admission.k8s.io/v1','kind':'AdmissionReview',"
          "'request':{'uid':'u','namespace':'ncclguard','object':{'kind':"
          "'Pod','metadata':{'name':'p'},'spec':{'containers':[" GPU_CONTAINER(
              "c") "]}}}}");
    CHECK_INT(workload_mutate(obj, NULL, pol, &opt, &rep), 0);
    CHECK_INT(rep.n_pods, 1);
    CHECK_STR(rep.pods[0].pointer, "/request/object");
    CHECK_INT(rep.pods[0].result.status, MUTATE_SKIPPED);
    workload_report_release(&rep);
    CHECK_INT(workload_mutate(obj, "ml", pol, &opt, &rep), 0);
    CHECK_INT(rep.pods[0].result.status, MUTATE_PATCHED);
    CHECK_STR(str_at(obj, "/request/object/spec/containers/0/envFrom/0/"
                          "configMapRef/name"),
              "nccl-production-profile");
    workload_report_release(&rep);
    json_decref(obj);

    /* A List's items keep their own namespaces. */
    obj = J("{'apiVersion':'v1','kind':'List','items':["
            "{'kind':'Pod','metadata':{'name':'a','namespace':'kube-system'},"
            "'spec':{'containers':[" GPU_CONTAINER(
                "c") "]}},"
                     "{'kind':'Pod','metadata':{'name':'b','namespace':'ml'},"
                     "'spec':{'containers':[" GPU_CONTAINER("c") "]}}]}");
    CHECK_INT(workload_mutate(obj, NULL, pol, &opt, &rep), 0);
    CHECK_INT(rep.n_pods, 2);
    CHECK_STR(rep.pods[0].pointer, "/items/0");
    CHECK_INT(rep.pods[0].result.status, MUTATE_SKIPPED);
    CHECK_INT(rep.pods[1].result.status, MUTATE_PATCHED);
    workload_report_release(&rep);
    json_decref(obj);

    /* A review without an object has no pods. */
    obj = J("{'kind':'AdmissionReview','request':{'uid':'u'}}");
    CHECK_INT(workload_mutate(obj, NULL, pol, &opt, &rep), 0);
    CHECK_INT(rep.n_pods, 0);
    workload_report_release(&rep);
    json_decref(obj);
}

/* Every pod goes to the admission core as the review the apiserver would
 * send, and the patch text is the core's, byte for byte. */
static void
test_core_reviews(void)
{
    json_t *obj =
        J("{'kind':'Deployment','metadata':{'name':'d'},'spec':{"
          "'template':{'spec':{'containers':[" GPU_CONTAINER("c") "]}}}}");
    struct workload_report rep;
    struct review_outcome out = {0};
    struct workload_pod *wp;
    char *text, *dumped;

    CHECK_INT(workload_mutate_document(obj, 2, NULL, pol, &opt, &rep), 0);
    CHECK_INT(rep.n_pods, 1);
    wp = &rep.pods[0];
    CHECK_INT(wp->result.status, MUTATE_PATCHED);
    /* The pod as the apiserver sends it: named, in a namespace. */
    CHECK_STR(str_at(wp->review, "/apiVersion"), "admission.k8s.io/v1");
    CHECK_STR(str_at(wp->review, "/request/uid"),
              "00000000-0000-4000-8000-000000003000");
    CHECK_STR(str_at(wp->review, "/request/operation"), "CREATE");
    CHECK_STR(str_at(wp->review, "/request/kind/kind"), "Pod");
    CHECK_STR(str_at(wp->review, "/request/namespace"), "default");
    CHECK_STR(str_at(wp->review, "/request/object/kind"), "Pod");
    CHECK_STR(str_at(wp->review, "/request/object/metadata/name"), "d-0");
    CHECK_STR(str_at(wp->review, "/request/object/metadata/namespace"),
              "default");
    /* So the annotations go under the pod's metadata, and the template,
     * which had none, gets just them. */
    CHECK_STR(str_at(wp->result.patch, "/0/op"), "add");
    dumped = json_dumps(wp->result.patch, JSON_COMPACT);
    CHECK(dumped != NULL && wp->result.patch_text != NULL);
    if (dumped != NULL && wp->result.patch_text != NULL) {
        CHECK_STR(wp->result.patch_text, dumped);
        CHECK_INT(wp->result.patch_len, strlen(dumped));
        CHECK(strstr(wp->result.patch_text,
                     "\"path\":\"/metadata/annotations\"") != NULL);
    }
    free(dumped);
    CHECK_STR(
        str_at(obj, "/spec/template/metadata/annotations/ncclguard.io~1gpus"),
        "8");
    CHECK(patch_pointer_get(obj, "/spec/template/metadata/name") == NULL);
    /* The same review, handed to the core directly: the same bytes. */
    text = json_dumps(wp->review, JSON_COMPACT);
    CHECK(text != NULL);
    CHECK_INT(text != NULL ? review_handle(text, strlen(text), pol, &opt, &out)
                           : -1,
              0);
    CHECK(out.mutation.patch_text != NULL && wp->result.patch_text != NULL &&
          strcmp(out.mutation.patch_text, wp->result.patch_text) == 0);
    review_outcome_release(&out);
    free(text);
    workload_report_release(&rep);
    json_decref(obj);

    /* No patch: no text, and a template without metadata keeps none. */
    obj = J("{'kind':'Job','spec':{'template':{'spec':{'containers':["
            "" CPU_CONTAINER("c") "]}}}}");
    CHECK_INT(workload_mutate(obj, "ml", pol, &opt, &rep), 0);
    CHECK_INT(rep.n_pods, 1);
    CHECK_INT(rep.pods[0].result.status, MUTATE_NOT_GPU);
    CHECK(rep.pods[0].result.patch_text == NULL);
    CHECK_STR(str_at(rep.pods[0].review, "/request/namespace"), "ml");
    CHECK_STR(str_at(rep.pods[0].review, "/request/object/metadata/name"),
              "pod-0");
    CHECK(patch_pointer_get(obj, "/spec/template/metadata") == NULL);
    workload_report_release(&rep);
    json_decref(obj);
}

static void
test_depth_bound(void)
{
    /* A template nested deeper than the walk goes is not found, and the
     * walk does not recurse without end. */
    json_t *obj = J(TEMPLATE(GPU_CONTAINER("c")));
    struct workload_report rep;

    for (int i = 0; i < 60; i++) {
        json_t *wrap = json_object();

        json_object_set_new(wrap, "template", obj);
        obj = wrap;
    }
    CHECK_INT(workload_mutate(obj, NULL, pol, &opt, &rep), 0);
    CHECK_INT(rep.n_pods, 0);
    workload_report_release(&rep);
    json_decref(obj);
}

int
main(void)
{
    pol = fixture_policy(POLICY_HEAD);
    test_finds_templates();
    test_in_place();
    test_namespaces_and_reviews();
    test_core_reviews();
    test_depth_bound();
    policy_free(pol);
    return harness_finish();
}
