/* Unit tests for admission/review.c: AdmissionReview decode and encode. */
#include "admission/review.h"

#include "harness.h"
#include "server_fixtures.h"

static struct policy *pol;
static const struct mutate_options opt = {.own_namespace = "ncclguard"};

static const char *const gpu_pod =
    "{'apiVersion':'v1','kind':'Pod','metadata':{'generateName':'train-',"
    "'namespace':'ml'},'spec':{'containers':[{'name':'c','image':'x',"
    "'resources':{'limits':{'nvidia.com/gpu':'2','memory':'4Gi'}}}]}}";
static const char *const cpu_pod =
    "{'apiVersion':'v1','kind':'Pod','metadata':{'name':'web'},'spec':{"
    "'containers':[{'name':'c','image':'nginx'}]}}";

/* A review as text: api version, operation, kind, subresource, pod. */
static char *
review_text(const char *api, const char *op, const char *group,
            const char *kind, const char *sub, const char *pod)
{
    char buf[4096];
    size_t n;
    char *out;

    snprintf(buf, sizeof(buf),
             "{'apiVersion':'%s','kind':'AdmissionReview','request':{"
             "'uid':'0e6d2c8a-1111-4a6e-9d1b-42010a800002','kind':{'group':"
             "'%s','version':'v1','kind':'%s'},'resource':{'group':'',"
             "'version':'v1','resource':'pods'},%s'namespace':'ml',"
             "'operation':'%s','userInfo':{'username':'u'},'object':%s,"
             "'oldObject':null,'dryRun':false}}",
             api, group, kind, sub, op, pod);
    n = strlen(buf);
    out = malloc(n + 1);
    for (size_t i = 0; i <= n; i++)
        out[i] = buf[i] == '\'' ? '"' : buf[i];
    return out;
}

static json_t *
handle(const char *body, struct review_outcome *out)
{
    json_t *resp;

    CHECK_INT(review_handle(body, strlen(body), pol, &opt, out), 0);
    if (out->http_status != 200)
        return NULL;
    CHECK_STR(out->content_type, "application/json");
    resp = json_loadb(out->body, out->body_len, 0, NULL);
    CHECK(resp != NULL);
    CHECK(out->log != NULL);
    return resp;
}

static int
b64val(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Decodes standard padded base64; NULL on any bad character or length. */
static char *
b64decode(const char *s)
{
    size_t n = strlen(s), o = 0;
    char *out;

    if (n % 4 != 0)
        return NULL;
    out = malloc(n / 4 * 3 + 1);
    for (size_t i = 0; i < n; i += 4) {
        int v[4];

        for (int k = 0; k < 4; k++) {
            v[k] = s[i + k] == '=' ? 0 : b64val(s[i + k]);
            if (v[k] < 0 || (s[i + k] == '=' && i + 4 != n)) {
                free(out);
                return NULL;
            }
        }
        out[o++] = (char)(v[0] << 2 | v[1] >> 4);
        if (s[i + 2] != '=')
            out[o++] = (char)((v[1] & 15) << 4 | v[2] >> 2);
        if (s[i + 3] != '=')
            out[o++] = (char)((v[2] & 3) << 6 | v[3]);
    }
    out[o] = '\0';
    return out;
}

static void
test_patched(void)
{
    static const char *const apis[] = {"admission.k8s.io/v1",
                                       "admission.k8s.io/v1beta1"};

    for (size_t a = 0; a < 2; a++) {
        char *body = review_text(apis[a], "CREATE", "", "Pod", "", gpu_pod);
        struct review_outcome out;
        json_t *resp = handle(body, &out), *r, *patch, *pod;
        struct mutate_result mres;
        char *decoded;

        CHECK_INT(out.http_status, 200);
        CHECK_INT(out.result, REVIEW_PATCHED);
        CHECK_STR(json_string_value(json_object_get(resp, "apiVersion")),
                  apis[a]);
        CHECK_STR(json_string_value(json_object_get(resp, "kind")),
                  "AdmissionReview");
        r = json_object_get(resp, "response");
        CHECK_STR(json_string_value(json_object_get(r, "uid")),
                  "0e6d2c8a-1111-4a6e-9d1b-42010a800002");
        CHECK(json_is_true(json_object_get(r, "allowed")));
        CHECK_STR(json_string_value(json_object_get(r, "patchType")),
                  "JSONPatch");
        decoded = b64decode(json_string_value(json_object_get(r, "patch")));
        CHECK(decoded != NULL);
        patch = decoded ? json_loads(decoded, 0, NULL) : NULL;
        CHECK(json_is_array(patch));
        CHECK_INT(json_array_size(patch), out.patch_ops);
        /* The very patch mutate_pod() computes for the same pod. */
        pod = J(gpu_pod);
        CHECK_INT(mutate_pod(pod, "ml", pol, &opt, &mres), 0);
        CHECK(json_equal(patch, mres.patch));
        /* The memory warning for 8Gi of shm over a 4Gi limit. */
        CHECK_INT(json_array_size(json_object_get(r, "warnings")), 1);
        CHECK_INT(out.warnings, 1);
        check_warnings_form(json_object_get(r, "warnings"));
        CHECK_STR(str_at(r, "/auditAnnotations/rule"), "default");
        /* The log line's fields. */
        CHECK_STR(str_at(out.log, "/uid"),
                  "0e6d2c8a-1111-4a6e-9d1b-42010a800002");
        CHECK_STR(str_at(out.log, "/namespace"), "ml");
        CHECK_STR(str_at(out.log, "/name"), "train-");
        CHECK_STR(str_at(out.log, "/result"), "patched");
        CHECK_INT(json_integer_value(json_object_get(out.log, "gpus")), 2);
        CHECK(json_array_size(json_object_get(out.log, "injected")) > 0);
        mutate_result_release(&mres);
        json_decref(pod);
        json_decref(patch);
        free(decoded);
        json_decref(resp);
        review_outcome_release(&out);
        free(body);
    }
}

static void
test_no_patch(void)
{
    static const struct {
        const char *what, *op, *group, *kind, *sub, *pod;
        enum review_result result;
    } cases[] = {
        {"non-GPU pod", "CREATE", "", "Pod", "", NULL, REVIEW_NOT_GPU},
        {"update", "UPDATE", "", "Pod", "", "gpu", REVIEW_IGNORED},
        {"delete", "DELETE", "", "Pod", "", "gpu", REVIEW_IGNORED},
        {"connect", "CONNECT", "", "Pod", "", "gpu", REVIEW_IGNORED},
        {"deployment", "CREATE", "apps", "Deployment", "", "gpu",
         REVIEW_IGNORED},
        {"pod in another group", "CREATE", "example.com", "Pod", "", "gpu",
         REVIEW_IGNORED},
        {"subresource", "CREATE", "", "Pod", "'subResource':'binding',", "gpu",
         REVIEW_IGNORED},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *body = review_text("admission.k8s.io/v1", cases[i].op,
                                 cases[i].group, cases[i].kind, cases[i].sub,
                                 cases[i].pod ? gpu_pod : cpu_pod);
        struct review_outcome out;
        json_t *resp = handle(body, &out), *r;

        CHECK_INT(out.http_status, 200);
        if (out.result != cases[i].result)
            fprintf(stderr, "case %s: result %s\n", cases[i].what,
                    review_result_name(out.result));
        CHECK_INT(out.result, cases[i].result);
        r = json_object_get(resp, "response");
        CHECK(json_is_true(json_object_get(r, "allowed")));
        CHECK(json_object_get(r, "patch") == NULL);
        CHECK(json_object_get(r, "patchType") == NULL);
        CHECK_STR(json_string_value(json_object_get(r, "uid")),
                  "0e6d2c8a-1111-4a6e-9d1b-42010a800002");
        CHECK_INT(out.patch_ops, 0);
        json_decref(resp);
        review_outcome_release(&out);
        free(body);
    }
}

static void
test_bad_requests(void)
{
    static const struct {
        const char *body, *reason;
    } cases[] = {
        {"", "not JSON"},
        {"{", "not JSON"},
        {"[1]", "not a JSON object"},
        {"{\"apiVersion\":\"v1\",\"kind\":\"AdmissionReview\"}",
         "apiVersion v1"},
        {"{\"kind\":\"AdmissionReview\"}", "apiVersion missing"},
        {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"Pod\"}",
         "kind Pod"},
        {"{\"apiVersion\":\"admission.k8s.io/"
         "v1\",\"kind\":\"AdmissionReview\"}",
         "no request"},
        {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
         "\"request\":{\"operation\":\"CREATE\"}}",
         "no uid"},
        {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
         "\"request\":{\"uid\":\"u\",\"kind\":{\"group\":\"\",\"kind\":\"Pod\"}"
         ","
         "\"operation\":\"CREATE\"}}",
         "no object"},
        {"{\"apiVersion\":\"x\\ny\",\"kind\":\"AdmissionReview\"}",
         "apiVersion x y"},
        /* The same key twice is ambiguous (which uid to echo?): rejected. */
        {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
         "\"AdmissionReview\",\"request\":{\"uid\":\"a\",\"uid\":\"b\"}}",
         "duplicate object key"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct review_outcome out;
        const char *body = cases[i].body;

        CHECK_INT(review_handle(body, strlen(body), pol, &opt, &out), 0);
        CHECK_INT(out.http_status, 400);
        CHECK_INT(out.result, REVIEW_BAD_REQUEST);
        CHECK(out.body != NULL && out.body_len > 1);
        if (out.body != NULL) {
            /* One line, ending in '\n'. */
            CHECK(out.body[out.body_len - 1] == '\n');
            CHECK(memchr(out.body, '\n', out.body_len - 1) == NULL);
            if (strstr(out.body, cases[i].reason) == NULL) {
                fprintf(stderr, "reason '%s' lacks '%s'\n", out.body,
                        cases[i].reason);
                CHECK(0);
            }
        }
        CHECK_STR(str_at(out.log, "/result"), "bad_request");
        review_outcome_release(&out);
    }
}

static void
test_error_answer(void)
{
    /* A pod whose patch would exceed the operation cap: the webhook still
     * allows it, with no patch and a warning. */
    json_t *pod = J("{'metadata':{'name':'big'},'spec':{'containers':[]}}");
    json_t *review, *resp, *r;
    struct review_outcome out;
    struct policy *many =
        fixture_policy(POLICY_HEAD "defaults:\n  extraEnv:\n"
                                   "    - {name: EXTRA_A, value: '1'}\n"
                                   "    - {name: EXTRA_B, value: '1'}\n"
                                   "    - {name: EXTRA_C, value: '1'}\n"
                                   "    - {name: EXTRA_D, value: '1'}\n"
                                   "    - {name: EXTRA_E, value: '1'}\n"
                                   "    - {name: EXTRA_F, value: '1'}\n"
                                   "    - {name: EXTRA_G, value: '1'}\n"
                                   "    - {name: EXTRA_H, value: '1'}\n");
    char *body;

    for (int i = 0; i < 120; i++) {
        char buf[200];

        snprintf(buf, sizeof(buf),
                 "{'name':'c%d','env':[],'volumeMounts':[],'resources':{"
                 "'limits':{'nvidia.com/gpu':1}}}",
                 i);
        json_array_append_new(patch_pointer_get(pod, "/spec/containers"),
                              J(buf));
    }
    review = J("{'apiVersion':'admission.k8s.io/v1','kind':'AdmissionReview',"
               "'request':{'uid':'e','kind':{'group':'','version':'v1',"
               "'kind':'Pod'},'operation':'CREATE','namespace':'ml'}}");
    json_object_set_new(json_object_get(review, "request"), "object", pod);
    body = json_dumps(review, JSON_COMPACT);
    CHECK_INT(review_handle(body, strlen(body), many, &opt, &out), 0);
    CHECK_INT(out.http_status, 200);
    CHECK_INT(out.result, REVIEW_ERROR);
    resp = json_loadb(out.body, out.body_len, 0, NULL);
    r = json_object_get(resp, "response");
    CHECK(json_is_true(json_object_get(r, "allowed")));
    CHECK(json_object_get(r, "patch") == NULL);
    CHECK(json_object_get(r, "patchType") == NULL);
    CHECK(warnings_have(json_object_get(r, "warnings"), "pod left unchanged"));
    CHECK_STR(str_at(out.log, "/result"), "error");
    CHECK(str_at(out.log, "/reason") != NULL);
    json_decref(resp);
    review_outcome_release(&out);
    free(body);
    json_decref(review);
    policy_free(many);
}

static void
test_names(void)
{
    CHECK_STR(review_result_name(REVIEW_PATCHED), "patched");
    CHECK_STR(review_result_name(REVIEW_BAD_REQUEST), "bad_request");
    CHECK_STR(review_result_name(REVIEW_IGNORED), "ignored");
    CHECK_STR(review_result_name(REVIEW_RESULT_COUNT), "unknown");
    {
        struct review_outcome zero;

        memset(&zero, 0, sizeof(zero));
        review_outcome_release(&zero);
        CHECK(zero.body == NULL);
    }
}

int
main(void)
{
    pol = fixture_policy(POLICY_HEAD);
    test_patched();
    test_no_patch();
    test_bad_requests();
    test_error_answer();
    test_names();
    policy_free(pol);
    return harness_finish();
}
