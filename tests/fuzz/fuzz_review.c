/* Fuzz target: AdmissionReview decode, mutation and response encoding, the
 * whole server path behind POST /mutate (review_handle), checked against a
 * second path: jansson's full decode and the plan on the whole pod. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "admission/patch.h"
#include "admission/review.h"
#include "fuzz_common.h"

static struct policy *pol;
static const struct mutate_options opts = {.own_namespace = "ncclguard"};

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    pol = fuzz_policy_load();
    return 0;
}

/* Warnings are at most 120 characters of valid UTF-8. */
static void
check_warning(const char *w)
{
    size_t chars = 0;

    for (const unsigned char *c = (const unsigned char *)w; *c; c++)
        if ((*c & 0xc0) != 0x80)
            chars++;
    if (chars > 120) {
        fprintf(stderr, "warning longer than 120 characters: %s\n", w);
        abort();
    }
}

/* A 200 answer is an AdmissionReview that allows the pod. */
static void
check_response(const struct review_outcome *out)
{
    json_error_t jerr;
    json_t *doc, *resp, *patch, *ptype, *warnings, *w;
    size_t i;

    doc = json_loadb(out->body, out->body_len, 0, &jerr);
    if (doc == NULL) {
        fprintf(stderr, "response is not JSON: %s: %.*s\n", jerr.text,
                (int)(out->body_len > 400 ? 400 : out->body_len), out->body);
        abort();
    }
    FUZZ_ASSERT(json_is_string(json_object_get(doc, "apiVersion")));
    FUZZ_ASSERT(strcmp(json_string_value(json_object_get(doc, "kind")),
                       "AdmissionReview") == 0);
    resp = json_object_get(doc, "response");
    FUZZ_ASSERT(json_is_object(resp));
    FUZZ_ASSERT(json_is_string(json_object_get(resp, "uid")));
    FUZZ_ASSERT(json_is_true(json_object_get(resp, "allowed")));
    patch = json_object_get(resp, "patch");
    ptype = json_object_get(resp, "patchType");
    /* A patch goes with its patchType, and only with a PATCHED result. */
    FUZZ_ASSERT((patch == NULL) == (ptype == NULL));
    FUZZ_ASSERT((patch != NULL) == (out->result == REVIEW_PATCHED));
    if (patch != NULL) {
        FUZZ_ASSERT(json_is_string(patch) && json_string_length(patch) > 0);
        FUZZ_ASSERT(strcmp(json_string_value(ptype), "JSONPatch") == 0);
        FUZZ_ASSERT(out->patch_ops > 0);
    }
    warnings = json_object_get(resp, "warnings");
    FUZZ_ASSERT(warnings == NULL || json_is_array(warnings));
    FUZZ_ASSERT(json_array_size(warnings) == out->warnings);
    json_array_foreach(warnings, i, w)
    {
        FUZZ_ASSERT(json_is_string(w));
        check_warning(json_string_value(w));
    }
    json_decref(doc);
}

/*
 * mutate_pod on the request's object directly: it must leave the pod as it
 * was (its check applies the patch to copies only), and a patch it returns
 * must apply to a full copy too.
 */
static void
check_pod_untouched(const uint8_t *data, size_t size)
{
    json_t *root = json_loadb((const char *)data, size, 0, NULL);
    json_t *req = json_object_get(root, "request");
    json_t *pod = json_object_get(req, "object");
    json_t *before, *full;
    struct mutate_result res;
    struct ng_error err;

    if (!json_is_object(pod)) {
        json_decref(root);
        return;
    }
    before = json_deep_copy(pod);
    FUZZ_ASSERT(before != NULL);
    FUZZ_ASSERT(mutate_pod(pod,
                           json_string_value(json_object_get(req, "namespace")),
                           pol, &opts, &res) == 0);
    if (!json_equal(pod, before)) {
        fprintf(stderr, "mutate_pod changed the pod it was given\n");
        abort();
    }
    if (json_array_size(res.patch) > 0) {
        full = json_deep_copy(pod);
        ng_error_clear(&err);
        if (patch_apply(&full, res.patch, &err) != 0) {
            fprintf(stderr, "returned patch does not apply: %s\n", err.msg);
            abort();
        }
        json_decref(full);
    }
    mutate_result_release(&res);
    json_decref(before);
    json_decref(root);
}

/* The plan's result on the whole pod, or NULL result when the pod is
 * not one review_handle() plans (not JSON, not a Pod CREATE, ...). */
static const char *
ignore_of(const json_t *req)
{
    const json_t *kind = json_object_get(req, "kind");
    const char *g = json_string_value(json_object_get(kind, "group"));
    const char *k = json_string_value(json_object_get(kind, "kind"));
    const char *op = json_string_value(json_object_get(req, "operation"));
    const char *sub = json_string_value(json_object_get(req, "subResource"));

    if (k == NULL || strcmp(k, "Pod") != 0 || (g != NULL && g[0] != '\0'))
        return "not a Pod";
    if (sub != NULL && sub[0] != '\0')
        return "subresource";
    if (op == NULL || strcmp(op, "CREATE") != 0)
        return "not CREATE";
    return NULL;
}

/* Whether the decoder alone refuses the body for its depth cap, which
 * review_handle() then retries without the parts the view never reads. */
static bool
deep_unread(const uint8_t *data, size_t size)
{
    struct fastjson_error err;
    json_t *v = fastjson_decode((const char *)data, size, &review_shape, &err);

    if (v != NULL) {
        json_decref(v);
        return false;
    }
    return err.depth;
}

/*
 * The fast decoder against jansson's: both refuse the same documents (but
 * for the depth cap, 1024 here and 2048 in jansson), and the plan on the
 * decoder's pruned view gives the very patch, warnings and status that
 * the plan on the whole pod gives.
 */
static void
check_same_as_full(const uint8_t *data, size_t size,
                   const struct review_outcome *out)
{
    json_t *root =
        json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    json_t *req, *pod;
    struct mutate_result res;
    struct mutate_options full_opts = opts;
    char *text;

    if (root == NULL) {
        /* The decoder bounds the parts its view never reads by size, not
         * depth (review.c, unread_blank()): past its depth cap, what is
         * inside them does not matter. */
        if (out->http_status != 400 && !deep_unread(data, size)) {
            fprintf(stderr, "jansson refuses a body the decoder took\n");
            abort();
        }
        return;
    }
    if (out->http_status == 400 &&
        strncmp(out->body, "body is not JSON", 16) == 0 &&
        strstr(out->body, "nested deeper") == NULL) {
        fprintf(stderr, "the decoder refuses a body jansson takes: %s",
                out->body);
        abort();
    }
    req = json_object_get(root, "request");
    pod = json_object_get(req, "object");
    if (out->http_status != 200 || ignore_of(req) != NULL ||
        !json_is_object(pod)) {
        json_decref(root);
        return;
    }
    /* As review_handle() does: the body's size stands for the pod's. */
    full_opts.object_bytes = size;
    FUZZ_ASSERT(mutate_pod(pod,
                           json_string_value(json_object_get(req, "namespace")),
                           pol, &full_opts, &res) == 0);
    FUZZ_ASSERT(res.status == out->mutation.status);
    FUZZ_ASSERT(res.gpus == out->mutation.gpus);
    FUZZ_ASSERT(strcmp(res.rule, out->mutation.rule) == 0);
    FUZZ_ASSERT(strcmp(res.reason, out->mutation.reason) == 0);
    FUZZ_ASSERT(json_equal(res.warnings, out->mutation.warnings));
    if (json_array_size(res.patch) > 0) {
        text = json_dumps(res.patch, JSON_COMPACT);
        FUZZ_ASSERT(text != NULL && out->mutation.patch_text != NULL);
        if (strlen(text) != out->mutation.patch_len ||
            memcmp(text, out->mutation.patch_text, out->mutation.patch_len) !=
                0) {
            fprintf(stderr,
                    "the patch on the pruned view differs from the patch on "
                    "the whole pod:\n  view: %.*s\n  full: %s\n",
                    (int)out->mutation.patch_len, out->mutation.patch_text,
                    text);
            abort();
        }
        free(text);
    } else {
        FUZZ_ASSERT(out->mutation.patch_text == NULL);
    }
    mutate_result_release(&res);
    json_decref(root);
}

/*
 * The log record is object members in JSON text that the server's line
 * splices as they are: braces around it give one valid object, with no
 * key twice and none of the line's own (time, level, msg), that names its
 * result; each string value is within the log cap.
 */
static void
check_log_record(const struct review_outcome *out)
{
    char *text;
    json_t *rec;
    const char *key;
    json_t *v;

    FUZZ_ASSERT(out->log != NULL && out->log_len > 0);
    FUZZ_ASSERT(strlen(out->log) == out->log_len);
    text = malloc(out->log_len + 3);
    FUZZ_ASSERT(text != NULL);
    text[0] = '{';
    memcpy(text + 1, out->log, out->log_len);
    memcpy(text + 1 + out->log_len, "}", 2);
    rec = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    FUZZ_ASSERT(json_is_object(rec));
    FUZZ_ASSERT(json_object_get(rec, "time") == NULL &&
                json_object_get(rec, "level") == NULL &&
                json_object_get(rec, "msg") == NULL);
    FUZZ_ASSERT(json_is_string(json_object_get(rec, "result")) &&
                strcmp(json_string_value(json_object_get(rec, "result")),
                       review_result_name(out->result)) == 0);
    json_object_foreach(rec, key, v)
    {
        FUZZ_ASSERT(!json_is_string(v) || json_string_length(v) <= 1024);
    }
    json_decref(rec);
    free(text);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct review_outcome out;

    check_pod_untouched(data, size);

    memset(&out, 0, sizeof(out));
    FUZZ_ASSERT(review_handle((const char *)data, size, pol, &opts, &out) == 0);
    FUZZ_ASSERT(out.body != NULL && out.body_len > 0);
    FUZZ_ASSERT(out.content_type != NULL);
    FUZZ_ASSERT(out.result < REVIEW_RESULT_COUNT);
    FUZZ_ASSERT(review_result_name(out.result) != NULL);
    if (out.http_status == 200) {
        FUZZ_ASSERT(out.result != REVIEW_BAD_REQUEST);
        check_response(&out);
    } else {
        /* 400: a one-line reason ending in a newline. */
        FUZZ_ASSERT(out.http_status == 400);
        FUZZ_ASSERT(out.result == REVIEW_BAD_REQUEST);
        FUZZ_ASSERT(out.body[out.body_len - 1] == '\n');
        FUZZ_ASSERT(memchr(out.body, '\n', out.body_len) ==
                    out.body + out.body_len - 1);
    }
    check_log_record(&out);
    check_same_as_full(data, size, &out);
    review_outcome_release(&out);
    return 0;
}
