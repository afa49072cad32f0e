/* AdmissionReview (admission.k8s.io/v1 and v1beta1): decode one request,
 * run the mutation for Pod CREATE, encode the response. */
#include "admission/review.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "admission/jsonmem.h"

static const char *const result_names[REVIEW_RESULT_COUNT] = {
    [REVIEW_PATCHED] = "patched",         [REVIEW_UNCHANGED] = "unchanged",
    [REVIEW_SKIPPED] = "skipped",         [REVIEW_NOT_GPU] = "not_gpu",
    [REVIEW_IGNORED] = "ignored",         [REVIEW_ERROR] = "error",
    [REVIEW_BAD_REQUEST] = "bad_request",
};

const char *
review_result_name(enum review_result r)
{
    if ((unsigned)r >= REVIEW_RESULT_COUNT)
        return "unknown";
    return result_names[r];
}

void
review_outcome_release(struct review_outcome *out)
{
    if (out == NULL)
        return;
    free(out->body);
    json_decref(out->log);
    free(out->patch);
    mutate_result_release(&out->mutation);
    out->body = NULL;
    out->log = NULL;
    out->patch = NULL;
}

/* ---- the response, written directly ---------------------------------- */

/* A growable output buffer; on allocation failure it stays failed and
 * every later write is dropped. */
struct buf {
    char *p;
    size_t len, cap;
    bool failed;
};

static bool
buf_grow(struct buf *b, size_t more)
{
    size_t cap;
    char *np;

    if (b->failed)
        return false;
    if (b->len + more <= b->cap)
        return true;
    cap = b->cap ? b->cap : 1024;
    while (cap < b->len + more)
        cap *= 2;
    np = realloc(b->p, cap);
    if (np == NULL) {
        b->failed = true;
        return false;
    }
    b->p = np;
    b->cap = cap;
    return true;
}

static void
buf_put(struct buf *b, const char *s, size_t n)
{
    if (!buf_grow(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

#define BUF_LIT(b, lit) buf_put((b), (lit), sizeof(lit) - 1)

/* json_dump_callback sink: appends straight into the response buffer. */
static int
buf_dump_cb(const char *chunk, size_t size, void *data)
{
    struct buf *b = data;

    buf_put(b, chunk, size);
    return b->failed ? -1 : 0;
}

/* Appends v as compact JSON, written by jansson into the buffer. */
static void
buf_put_json(struct buf *b, const json_t *v)
{
    if (json_dump_callback(v, buf_dump_cb, b,
                           JSON_COMPACT | JSON_ENCODE_ANY) != 0)
        b->failed = true;
}

/* Standard base64 with padding, as the API's []byte fields expect
 * (OpenSSL's encoder; it also writes a NUL, which is not kept). */
static void
buf_put_base64(struct buf *b, const unsigned char *in, size_t len)
{
    int n;

    if (len > INT_MAX / 2 || !buf_grow(b, 4 * ((len + 2) / 3) + 1))
        return;
    n = EVP_EncodeBlock((unsigned char *)b->p + b->len, in, (int)len);
    b->len += (size_t)n;
}

/*
 * The response body: {"apiVersion", "kind", "response": {"uid", "allowed",
 * "patchType", "patch", "warnings", "auditAnnotations"}}. api is one of the
 * two accepted versions, so it needs no escaping. Returns 0, or -1 when
 * out of memory.
 */
static int
response_encode(struct review_outcome *out, const char *api, const json_t *uid,
                const struct mutate_result *m)
{
    struct buf b = {0};

    BUF_LIT(&b, "{\"apiVersion\":\"");
    buf_put(&b, api, strlen(api));
    BUF_LIT(&b, "\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":");
    buf_put_json(&b, uid);
    BUF_LIT(&b, ",\"allowed\":true");
    if (m != NULL && json_array_size(m->patch) > 0) {
        char *text = json_dumps(m->patch, JSON_COMPACT);

        BUF_LIT(&b, ",\"patchType\":\"JSONPatch\",\"patch\":\"");
        if (text == NULL) {
            b.failed = true;
        } else {
            out->patch_len = strlen(text);
            out->patch = malloc(out->patch_len + 1);
            if (out->patch == NULL)
                b.failed = true;
            else
                memcpy(out->patch, text, out->patch_len + 1);
            buf_put_base64(&b, (const unsigned char *)text, out->patch_len);
        }
        BUF_LIT(&b, "\"");
        jsonmem_free(text);
    }
    if (m != NULL && json_array_size(m->warnings) > 0) {
        BUF_LIT(&b, ",\"warnings\":");
        buf_put_json(&b, m->warnings);
    }
    if (m != NULL && json_object_size(m->audit) > 0) {
        BUF_LIT(&b, ",\"auditAnnotations\":");
        buf_put_json(&b, m->audit);
    }
    BUF_LIT(&b, "}}");
    if (!buf_grow(&b, 1)) {
        free(b.p);
        return -1;
    }
    b.p[b.len] = '\0';
    out->body = b.p;
    out->body_len = b.len;
    return 0;
}

static json_t *jstr(const char *s);

/* Fills a 400 outcome whose body is the one-line reason. */
static int
bad_request(struct review_outcome *out, const char *fmt, const char *arg)
{
    char line[320];
    int n = snprintf(line, sizeof(line), fmt, arg != NULL ? arg : "");

    if (n < 0)
        return -1;
    if ((size_t)n >= sizeof(line) - 1)
        n = (int)sizeof(line) - 2;
    for (int i = 0; i < n; i++)
        if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
            line[i] = ' '; /* one line, whatever the request held */
    line[n] = '\n';
    line[n + 1] = '\0';
    out->http_status = 400;
    out->result = REVIEW_BAD_REQUEST;
    out->content_type = "text/plain; charset=utf-8";
    out->body = strdup(line);
    if (out->body == NULL)
        return -1;
    out->body_len = (size_t)n + 1;
    line[n] = '\0';
    out->log =
        json_pack("{s:s, s:o}", "result", "bad_request", "reason", jstr(line));
    return out->log != NULL ? 0 : -1;
}

/* A JSON string of s, or a placeholder when a cut left s invalid UTF-8. */
static json_t *
jstr(const char *s)
{
    json_t *v = json_string(s);

    return v != NULL ? v : json_string("(not valid UTF-8)");
}

static const char *
str_get(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static enum review_result
result_of(enum mutate_status s)
{
    switch (s) {
    case MUTATE_PATCHED:
        return REVIEW_PATCHED;
    case MUTATE_UNCHANGED:
        return REVIEW_UNCHANGED;
    case MUTATE_SKIPPED:
        return REVIEW_SKIPPED;
    case MUTATE_NOT_GPU:
        return REVIEW_NOT_GPU;
    case MUTATE_ERROR:
        break;
    }
    return REVIEW_ERROR;
}

/* Why a request is passed through untouched, or NULL for Pod CREATE. */
static const char *
ignore_reason(const json_t *req)
{
    const json_t *kind = json_object_get(req, "kind");
    const char *group = str_get(kind, "group");
    const char *k = str_get(kind, "kind");
    const char *op = str_get(req, "operation");
    const char *sub = str_get(req, "subResource");

    if (k == NULL || strcmp(k, "Pod") != 0 ||
        (group != NULL && group[0] != '\0'))
        return "not a Pod";
    if (sub != NULL && sub[0] != '\0')
        return "subresource";
    if (op == NULL || strcmp(op, "CREATE") != 0)
        return "not CREATE";
    return NULL;
}

int
review_handle(const char *body, size_t len, const struct policy *pol,
              const struct mutate_options *opt, struct review_outcome *out)
{
    json_error_t jerr;
    json_t *root = NULL, *req, *obj, *uid;
    const char *api, *reason, *ns, *name;
    struct mutate_result mres;
    int rc = -1;

    memset(out, 0, sizeof(*out));
    memset(&mres, 0, sizeof(mres));
    /* A key given twice is ambiguous (another reader may take the other
     * value), and the apiserver never sends one: jansson refuses it.
     * jansson also caps nesting (2048 levels) and rejects invalid UTF-8. */
    root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        char why[300];

        snprintf(why, sizeof(why), "%.200s at line %d column %d", jerr.text,
                 jerr.line, jerr.column);
        rc = bad_request(out, "body is not JSON: %s", why);
        goto done;
    }
    if (!json_is_object(root)) {
        rc = bad_request(out, "body is not an AdmissionReview: %s",
                         "not a JSON object");
        goto done;
    }
    api = str_get(root, "apiVersion");
    if (api == NULL || (strcmp(api, "admission.k8s.io/v1") != 0 &&
                        strcmp(api, "admission.k8s.io/v1beta1") != 0)) {
        rc = bad_request(out,
                         "not an AdmissionReview: apiVersion %s, expected "
                         "admission.k8s.io/v1 or v1beta1",
                         api != NULL ? api : "missing");
        goto done;
    }
    if (str_get(root, "kind") == NULL ||
        strcmp(str_get(root, "kind"), "AdmissionReview") != 0) {
        rc = bad_request(out, "not an AdmissionReview: kind %s",
                         str_get(root, "kind") ? str_get(root, "kind")
                                               : "missing");
        goto done;
    }
    req = json_object_get(root, "request");
    if (!json_is_object(req)) {
        rc = bad_request(out, "AdmissionReview has no request%s", "");
        goto done;
    }
    uid = json_object_get(req, "uid");
    if (!json_is_string(uid) || json_string_length(uid) == 0) {
        rc = bad_request(out, "AdmissionReview request has no uid%s", "");
        goto done;
    }
    ns = str_get(req, "namespace");
    obj = json_object_get(req, "object");
    reason = ignore_reason(req);
    if (reason == NULL && !json_is_object(obj)) {
        rc = bad_request(out, "Pod CREATE request has no object%s", "");
        goto done;
    }

    out->log = json_object();
    if (out->log == NULL)
        goto done;
    name = str_get(json_object_get(obj, "metadata"), "name");
    if (name == NULL || name[0] == '\0')
        name = str_get(json_object_get(obj, "metadata"), "generateName");
    if (name == NULL)
        name = str_get(req, "name");
    if (json_object_set(out->log, "uid", uid) ||
        json_object_set_new(out->log, "namespace", json_string(ns ? ns : "")) ||
        json_object_set_new(out->log, "name", json_string(name ? name : "")) ||
        json_object_set_new(out->log, "operation",
                            json_string(str_get(req, "operation")
                                            ? str_get(req, "operation")
                                            : "")))
        goto done;

    if (reason != NULL) {
        out->result = REVIEW_IGNORED;
        if (json_object_set_new(out->log, "reason", json_string(reason)) ||
            response_encode(out, api, uid, NULL) != 0)
            goto done;
    } else {
        if (mutate_pod(obj, ns, pol, opt, &mres) != 0)
            goto done;
        out->result = result_of(mres.status);
        out->patch_ops = json_array_size(mres.patch);
        out->warnings = json_array_size(mres.warnings);
        if (json_object_set_new(out->log, "gpus", json_integer(mres.gpus)) ||
            json_object_set_new(out->log, "rule", jstr(mres.rule)) ||
            json_object_set(out->log, "injected", mres.injected) ||
            json_object_set(out->log, "warnings", mres.warnings) ||
            (mres.reason[0] != '\0' &&
             json_object_set_new(out->log, "reason", jstr(mres.reason))))
            goto done;
        if (response_encode(out, api, uid, &mres) != 0)
            goto done;
    }
    if (json_object_set_new(out->log, "result",
                            json_string(review_result_name(out->result))))
        goto done;
    out->http_status = 200;
    out->content_type = "application/json";
    rc = 0;
done:
    if (rc == 0) {
        out->mutation = mres; /* the outcome owns it now */
        memset(&mres, 0, sizeof(mres));
    }
    if (rc != 0)
        review_outcome_release(out);
    mutate_result_release(&mres);
    json_decref(root);
    return rc;
}
