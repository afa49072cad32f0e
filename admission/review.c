/* AdmissionReview (admission.k8s.io/v1 and v1beta1): decode one request,
 * run the mutation for Pod CREATE, encode the response. */
#include "admission/review.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission/fastjson.h"
#include "admission/jsonmem.h"
#include "admission/jsonwrite.h"
#include "base/buf.h"
#include "base/text.h"

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
    free(out->log);
    mutate_result_release(&out->mutation);
    out->body = NULL;
    out->log = NULL;
}

/* ---- the request, decoded into a view of what the plan reads ---------- */

/*
 * The parts of an AdmissionReview that review_handle() and the plan
 * (admission/mutate.c, admission/jobmember.c, policy matching) read; the
 * decoder builds these and only checks the rest (managedFields, args past
 * the first, command, probes, status, oldObject, ...). Arrays the patch
 * indexes into (containers, initContainers, volumes, envFrom kept whole,
 * and env and volumeMounts left on the tape as that many nulls) keep their
 * length and order, so every path and index in the patch is the same as on
 * the full pod; an element of
 * containers, initContainers, ephemeralContainers or volumes that is not an
 * object becomes null (the plan reads objects only there: a 4 MiB
 * "volumes": [0,0,...] builds no numbers). A plan change that
 * reads a new field must add it here: the differential checks in
 * tests/unit/test_review.c and tests/fuzz/fuzz_review.c compare the plan
 * on this view with the plan on the whole pod.
 */
static const struct fastjson_shape keep_first = {.keep = FASTJSON_FIRST};
/* A container's env may hold hundreds of entries, read by name, and
 * copied only from the ring check's model; its volumeMounts are read by
 * path: both left on the decoder's tape (the plan reads them through
 * pod_list_of(), admission/plan.h). */
static const struct fastjson_shape lazy_list = {.keep = FASTJSON_LAZY};

static const struct fastjson_field ctr_fields[] = {
    {"name", NULL},        {"restartPolicy", NULL},
    {"args", &keep_first}, /* the ring check's first argument marks it */
    {"env", &lazy_list},   /* read by name, copied into the ring check */
    {"envFrom", NULL},     {"volumeMounts", &lazy_list}, /* read by path */
    {"resources", NULL},   {"securityContext", NULL},
    {NULL, NULL},
};
static const struct fastjson_shape ctr = {
    .keep = FASTJSON_FIELDS, .fields = ctr_fields, .others_null = true};
static const struct fastjson_shape ctrs = {.keep = FASTJSON_EACH, .each = &ctr};

static const struct fastjson_field name_fields[] = {{"name", NULL},
                                                    {NULL, NULL}};
static const struct fastjson_shape named = {
    .keep = FASTJSON_FIELDS, .fields = name_fields, .others_null = true};
static const struct fastjson_shape names = {.keep = FASTJSON_EACH,
                                            .each = &named};

static const struct fastjson_field vol_fields[] = {
    {"name", NULL},
    {"emptyDir", NULL},
    {NULL, NULL},
};
static const struct fastjson_shape vol = {
    .keep = FASTJSON_FIELDS, .fields = vol_fields, .others_null = true};
static const struct fastjson_shape vols = {.keep = FASTJSON_EACH, .each = &vol};

/* Of spec.affinity, only the required node affinity (match.nodeSelector
 * reads its terms); pod (anti-)affinity, often long, is not built. */
static const struct fastjson_field node_affinity_fields[] = {
    {"requiredDuringSchedulingIgnoredDuringExecution", NULL},
    {NULL, NULL},
};
static const struct fastjson_shape node_affinity = {
    .keep = FASTJSON_FIELDS, .fields = node_affinity_fields};
static const struct fastjson_field affinity_fields[] = {
    {"nodeAffinity", &node_affinity},
    {NULL, NULL},
};
static const struct fastjson_shape affinity = {.keep = FASTJSON_FIELDS,
                                               .fields = affinity_fields};

static const struct fastjson_field spec_fields[] = {
    {"containers", &ctrs},
    {"initContainers", &ctrs},
    {"ephemeralContainers", &names},
    {"volumes", &vols},
    {"hostIPC", NULL},
    {"securityContext", NULL},
    {"resources", NULL},
    {"resourceClaims", NULL},
    {"os", NULL},
    {"terminationGracePeriodSeconds", NULL},
    /* what policy rules match node pools on (policy/match.h) */
    {"nodeSelector", NULL},
    {"affinity", &affinity},
    {"tolerations", NULL},
    {NULL, NULL},
};
static const struct fastjson_shape spec = {.keep = FASTJSON_FIELDS,
                                           .fields = spec_fields};

static const struct fastjson_field meta_fields[] = {
    {"name", NULL},   {"generateName", NULL}, {"namespace", NULL},
    {"labels", NULL}, {"annotations", NULL},  {"ownerReferences", NULL},
    {NULL, NULL},
};
static const struct fastjson_shape meta = {.keep = FASTJSON_FIELDS,
                                           .fields = meta_fields};

static const struct fastjson_field pod_fields[] = {
    {"apiVersion", NULL}, {"kind", NULL}, {"metadata", &meta},
    {"spec", &spec},      {NULL, NULL},
};
static const struct fastjson_shape pod = {.keep = FASTJSON_FIELDS,
                                          .fields = pod_fields};

static const struct fastjson_field request_fields[] = {
    {"uid", NULL},         {"kind", NULL},      {"operation", NULL},
    {"subResource", NULL}, {"namespace", NULL}, {"name", NULL},
    {"object", &pod},      {NULL, NULL},
};
static const struct fastjson_shape request = {.keep = FASTJSON_FIELDS,
                                              .fields = request_fields};

static const struct fastjson_field review_fields[] = {
    {"apiVersion", NULL},
    {"kind", NULL},
    {"request", &request},
    {NULL, NULL},
};

const struct fastjson_shape review_shape = {.keep = FASTJSON_FIELDS,
                                            .fields = review_fields};

/* ---- deep parts the view never reads ---------------------------------- */

/*
 * The decoder refuses a document nested deeper than FASTJSON_MAX_DEPTH
 * anywhere, which let a pod escape the webhook: managedFields nested 1,025
 * levels got a 400, and failurePolicy: Ignore admitted the pod unchanged.
 * The parts the view never reads are bounded by the body's size alone
 * (the server's body budget), not by their depth: on a depth refusal the
 * review is scanned once more, each object or array that review_shape
 * does not build (a member of a FIELDS object that it does not list, an
 * element after the first of a FIRST array) is replaced by null in a
 * copy, and the copy is decoded. The parts the view reads keep the depth
 * cap. A member whose key holds an escape is kept, since the decoder may
 * read it as a listed key.
 */
struct unread {
    const char *s;
    size_t len, i;
    struct buf out;
    size_t last; /* s[last..] is not copied to out yet */
    bool bad;
};

static void
unread_ws(struct unread *u)
{
    while (u->i < u->len && (u->s[u->i] == ' ' || u->s[u->i] == '\t' ||
                             u->s[u->i] == '\n' || u->s[u->i] == '\r'))
        u->i++;
}

/* At a '"': past the closing quote. Sets *escaped when it holds '\\'. */
static void
unread_string(struct unread *u, bool *escaped)
{
    for (u->i++; u->i < u->len; u->i++) {
        if (u->s[u->i] == '\\') {
            if (escaped != NULL)
                *escaped = true;
            u->i++;
        } else if (u->s[u->i] == '"') {
            u->i++;
            return;
        }
    }
    u->bad = true;
}

/* Past one value, whatever its depth: one bit per open container (an
 * object or an array, so that "[}" is refused), grown as needed. */
static void
unread_skip(struct unread *u)
{
    size_t depth = 0, cap = 0;
    unsigned char *is_obj = NULL;

    unread_ws(u);
    do {
        if (u->i >= u->len) {
            u->bad = true;
            break;
        }
        switch (u->s[u->i]) {
        case '"':
            unread_string(u, NULL);
            break;
        case '{':
        case '[':
            if (depth / 8 >= cap) {
                size_t ncap = cap ? 2 * cap : 64;
                unsigned char *n = realloc(is_obj, ncap);

                if (n == NULL) {
                    u->bad = true;
                    break;
                }
                is_obj = n;
                cap = ncap;
            }
            if (u->s[u->i] == '{')
                is_obj[depth / 8] |= (unsigned char)(1u << (depth % 8));
            else
                is_obj[depth / 8] &= (unsigned char)~(1u << (depth % 8));
            depth++;
            u->i++;
            break;
        case '}':
        case ']':
            if (depth == 0 || ((is_obj[(depth - 1) / 8] >> ((depth - 1) % 8)) &
                               1) != (u->s[u->i] == '}')) {
                u->bad = true;
                break;
            }
            depth--;
            u->i++;
            break;
        default:
            /* A scalar: up to the next delimiter. */
            while (u->i < u->len && !strchr(",:]}\" \t\n\r", u->s[u->i]))
                u->i++;
            if (depth == 0)
                break;
            if (u->i < u->len && (u->s[u->i] == ',' || u->s[u->i] == ':' ||
                                  u->s[u->i] == ' ' || u->s[u->i] == '\t' ||
                                  u->s[u->i] == '\n' || u->s[u->i] == '\r'))
                u->i++;
            break;
        }
    } while (depth > 0 && !u->bad);
    free(is_obj);
}

/* Past one value the view does not build: a container becomes null. */
static void
unread_drop(struct unread *u)
{
    size_t at;

    unread_ws(u);
    at = u->i;
    unread_skip(u);
    if (u->bad || (u->s[at] != '{' && u->s[at] != '['))
        return;
    if (buf_add(&u->out, u->s + u->last, at - u->last) != 0 ||
        buf_adds(&u->out, "null") != 0)
        u->bad = true;
    u->last = u->i;
}

static void
unread_value(struct unread *u, const struct fastjson_shape *sh)
{
    unread_ws(u);
    if (u->bad || u->i >= u->len) {
        u->bad = true;
        return;
    }
    if (sh == NULL || sh->keep == FASTJSON_ALL ||
        (sh->keep == FASTJSON_FIELDS && u->s[u->i] != '{') ||
        (sh->keep != FASTJSON_FIELDS && u->s[u->i] != '[')) {
        unread_skip(u);
        return;
    }
    u->i++; /* '{' or '[' */
    for (size_t k = 0; !u->bad; k++) {
        unread_ws(u);
        if (u->i < u->len && (u->s[u->i] == '}' || u->s[u->i] == ']')) {
            u->i++;
            return;
        }
        if (k > 0) {
            if (u->i >= u->len || u->s[u->i] != ',') {
                u->bad = true;
                return;
            }
            u->i++;
            unread_ws(u);
        }
        if (sh->keep == FASTJSON_FIELDS) {
            const struct fastjson_field *f = NULL;
            size_t k0;
            bool escaped = false;

            if (u->i >= u->len || u->s[u->i] != '"') {
                u->bad = true;
                return;
            }
            k0 = u->i + 1;
            unread_string(u, &escaped);
            for (const struct fastjson_field *g = sh->fields;
                 !u->bad && g->key != NULL && f == NULL; g++)
                if (strlen(g->key) == u->i - 1 - k0 &&
                    memcmp(g->key, u->s + k0, u->i - 1 - k0) == 0)
                    f = g;
            unread_ws(u);
            if (u->i >= u->len || u->s[u->i] != ':') {
                u->bad = true;
                return;
            }
            u->i++;
            if (f != NULL)
                unread_value(u, f->shape);
            else if (escaped)
                unread_skip(u);
            else
                unread_drop(u);
        } else if (sh->keep == FASTJSON_EACH) {
            unread_value(u, sh->each);
        } else if (k == 0) { /* FIRST: the first element, whole */
            unread_skip(u);
        } else {
            unread_drop(u);
        }
    }
}

/* The review with the unread containers as nulls, malloc'd into *out
 * (*out_len bytes); -1 when the text is not JSON the scan can follow. */
static int
unread_blank(const char *body, size_t len, char **out, size_t *out_len)
{
    struct unread u = {.s = body, .len = len};

    buf_init(&u.out, len + 1);
    unread_value(&u, &review_shape);
    if (!u.bad)
        unread_ws(&u);
    if (u.bad || u.i != len ||
        buf_add(&u.out, body + u.last, len - u.last) != 0) {
        buf_release(&u.out);
        return -1;
    }
    *out = buf_take(&u.out, out_len);
    return *out != NULL ? 0 : -1;
}

/* As fastjson_decode() with review_shape, but a depth refusal inside
 * parts the view never reads is retried on the copy unread_blank()
 * makes; the first error is kept when that fails too. */
static json_t *
review_decode(const char *body, size_t len, bool padded,
              struct fastjson_doc **doc, struct fastjson_error *err)
{
    json_t *root =
        padded ? fastjson_decode_doc_padded(body, len, &review_shape, doc, err)
               : fastjson_decode_doc(body, len, &review_shape, doc, err);
    struct fastjson_error again;
    char *copy = NULL;
    size_t clen = 0;

    if (root != NULL || !err->depth ||
        unread_blank(body, len, &copy, &clen) != 0)
        return root;
    root = fastjson_decode_doc(copy, clen, &review_shape, doc, &again);
    free(copy);
    if (root == NULL && again.oom)
        *err = again;
    return root;
}

/* ---- the response, written directly ---------------------------------- */

/* The response and the patch text may not grow past this (a patch copies
 * at most a few parts of a pod whose review is capped at a few MiB). */
#define REVIEW_OUT_MAX (64u * 1024u * 1024u)

/*
 * The response body: {"apiVersion", "kind", "response": {"uid", "allowed",
 * "patchType", "patch", "warnings", "auditAnnotations"}}, the patch being
 * m's text, base64'd. api is one of the two accepted versions, so it needs
 * no escaping. Returns 0, or -1 when out of memory.
 */
static int
response_encode(struct review_outcome *out, const char *api, const json_t *uid,
                const struct mutate_result *m)
{
    struct buf b;

    buf_init(&b, REVIEW_OUT_MAX);
    if (buf_reserve(&b, 1024) != 0 || BUF_LIT(&b, "{\"apiVersion\":\"") ||
        buf_adds(&b, api) ||
        BUF_LIT(&b, "\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":") ||
        jsonwrite_value(&b, uid) || BUF_LIT(&b, ",\"allowed\":true"))
        goto fail;
    if (m != NULL && m->patch_ops > 0 &&
        (BUF_LIT(&b, ",\"patchType\":\"JSONPatch\",\"patch\":\"") ||
         buf_add_base64(&b, m->patch_text, m->patch_len) || buf_addc(&b, '"')))
        goto fail;
    if (m != NULL && json_array_size(m->warnings) > 0 &&
        (BUF_LIT(&b, ",\"warnings\":") || jsonwrite_value(&b, m->warnings)))
        goto fail;
    if (m != NULL && json_object_size(m->audit) > 0 &&
        (BUF_LIT(&b, ",\"auditAnnotations\":") ||
         jsonwrite_value(&b, m->audit)))
        goto fail;
    if (BUF_LIT(&b, "}}"))
        goto fail;
    out->body = buf_take(&b, &out->body_len);
    if (out->body == NULL)
        goto fail;
    return 0;
fail:
    buf_release(&b);
    return -1;
}

/* ---- the log record, written directly -------------------------------- */

/* Every value of the record is capped (base/text.h), so a record stays
 * within some tens of KiB even when each string needs escapes; this cap
 * only stops a mistake. */
#define REVIEW_LOG_MAX (1024u * 1024u)

/*
 * s (n bytes, valid UTF-8) as a JSON string, cut as base/text.h says when
 * it is longer than TEXT_LOG_FIELD_MAX: the bytes json_dumps() wrote for
 * the capped value when the record was a jansson object.
 */
static int
log_text(struct buf *b, const char *s, size_t n)
{
    char cut[TEXT_LOG_FIELD_MAX];
    size_t keep;

    if (n <= TEXT_LOG_FIELD_MAX)
        return jsonwrite_string(b, s, n);
    keep = text_utf8_prefix(s, n, TEXT_LOG_FIELD_MAX - 3);
    memcpy(cut, s, keep);
    memcpy(cut + keep, "\xe2\x80\xa6", 3); /* U+2026 */
    return jsonwrite_string(b, cut, keep + 3);
}

/* A string of the request (decoded, so valid UTF-8), or "" when v is not
 * a string. */
static int
log_jstr(struct buf *b, const json_t *v)
{
    if (!json_is_string(v))
        return BUF_LIT(b, "\"\"");
    return log_text(b, json_string_value(v), json_string_length(v));
}

/* A string of ours that a cut may have left invalid UTF-8 (a reason, a
 * rule name): a placeholder then, as jansson refused such text. */
static int
log_cstr(struct buf *b, const char *s)
{
    if (!text_utf8_valid(s))
        s = "(not valid UTF-8)";
    return log_text(b, s, strlen(s));
}

/* Bodies up to this size get the line and column of a syntax error. */
#define REVIEW_WHERE_MAX (64u * 1024u)

/* simdjson does not say where a syntax error is; on this error path only,
 * and for bodies up to REVIEW_WHERE_MAX, jansson's decoder is asked, and
 * its line and column are added to the reason. */
static void
where_add(struct fastjson_error *e, const char *body, size_t len)
{
    size_t n = strlen(e->text);
    json_error_t je;
    json_t *j;

    if (!e->syntax || len > REVIEW_WHERE_MAX)
        return;
    j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (j == NULL && je.line > 0)
        snprintf(e->text + n, sizeof(e->text) - n, " near line %d column %d",
                 je.line, je.column);
    json_decref(j);
}

/* Fills a 400 outcome whose body is the one-line reason. */
static int
bad_request(struct review_outcome *out, const char *fmt, const char *arg)
{
    char line[320];
    int n = snprintf(line, sizeof(line), fmt, arg != NULL ? arg : "");
    struct buf lb;

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
    buf_init(&lb, REVIEW_LOG_MAX);
    if (BUF_LIT(&lb, "\"result\":\"bad_request\",\"reason\":") ||
        log_cstr(&lb, line))
        goto fail;
    out->log = buf_take(&lb, &out->log_len);
    return out->log != NULL ? 0 : -1;
fail:
    buf_release(&lb);
    return -1;
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

_Static_assert(REVIEW_BODY_PADDING >= FASTJSON_PADDING,
               "a padded body carries the decoder's padding");

/* review_handle(), for a body followed by REVIEW_BODY_PADDING zeros when
 * padded is set. */
static int
review_run(const char *body, size_t len, bool padded, const struct policy *pol,
           const struct mutate_options *opt, struct review_outcome *out)
{
    struct fastjson_error jerr;
    struct fastjson_doc *doc = NULL;
    json_t *root = NULL, *req, *obj, *uid, *md, *name;
    const char *api, *reason, *ns;
    struct mutate_result mres;
    struct buf lb;
    int rc = -1;

    memset(out, 0, sizeof(*out));
    memset(&mres, 0, sizeof(mres));
    buf_init(&lb, REVIEW_LOG_MAX);
    /* A key given twice is ambiguous (another reader may take the other
     * value), and the apiserver never sends one: the decoder refuses it
     * anywhere in the document, as it refuses invalid UTF-8, "\u0000",
     * numbers that do not fit and nesting past its cap. It builds only
     * what review_shape names. */
    root = review_decode(body, len, padded, &doc, &jerr);
    if (root == NULL) {
        if (jerr.oom)
            goto done;
        where_add(&jerr, body, len);
        rc = bad_request(out, "body is not JSON: %s", jerr.text);
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

    /* The log record: uid, namespace, name, operation, then what the
     * plan found or why the request was let through, then the result. */
    md = json_object_get(obj, "metadata");
    name = json_object_get(md, "name");
    if (!json_is_string(name) || json_string_length(name) == 0)
        name = json_object_get(md, "generateName");
    if (!json_is_string(name))
        name = json_object_get(req, "name");
    if (buf_reserve(&lb, 512) != 0 || BUF_LIT(&lb, "\"uid\":") ||
        log_jstr(&lb, uid) || BUF_LIT(&lb, ",\"namespace\":") ||
        log_jstr(&lb, json_object_get(req, "namespace")) ||
        BUF_LIT(&lb, ",\"name\":") || log_jstr(&lb, name) ||
        BUF_LIT(&lb, ",\"operation\":") ||
        log_jstr(&lb, json_object_get(req, "operation")))
        goto done;

    if (reason != NULL) {
        out->result = REVIEW_IGNORED;
        if (BUF_LIT(&lb, ",\"reason\":") || log_cstr(&lb, reason) ||
            response_encode(out, api, uid, NULL) != 0)
            goto done;
    } else {
        struct mutate_options mopt = {0};

        /* The body is the pod plus a small envelope: an upper bound of
         * the object's size for the check's size bound (mutate.h). */
        if (opt != NULL)
            mopt = *opt;
        if (mopt.object_bytes == 0)
            mopt.object_bytes = len;
        mopt.doc = doc;
        if (mutate_pod(obj, ns, pol, &mopt, &mres) != 0)
            goto done;
        out->result = result_of(mres.status);
        out->patch_ops = mres.patch_ops;
        out->warnings = json_array_size(mres.warnings);
        if (buf_addf(&lb, ",\"gpus\":%lld,\"rule\":", (long long)mres.gpus) ||
            log_cstr(&lb, mres.rule) || BUF_LIT(&lb, ",\"injected\":") ||
            jsonwrite_capped(&lb, mres.injected, TEXT_LOG_FIELD_MAX,
                             TEXT_LOG_ARRAY_MAX) ||
            BUF_LIT(&lb, ",\"warnings\":") ||
            jsonwrite_capped(&lb, mres.warnings, TEXT_LOG_FIELD_MAX,
                             TEXT_LOG_ARRAY_MAX) ||
            (mres.reason[0] != '\0' &&
             (BUF_LIT(&lb, ",\"reason\":") || log_cstr(&lb, mres.reason))))
            goto done;
        if (response_encode(out, api, uid, &mres) != 0)
            goto done;
    }
    if (BUF_LIT(&lb, ",\"result\":\"") ||
        buf_adds(&lb, review_result_name(out->result)) || buf_addc(&lb, '"'))
        goto done;
    out->log = buf_take(&lb, &out->log_len);
    if (out->log == NULL)
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
    buf_release(&lb);
    /* Inside the request arena the view is reclaimed whole by
     * jsonmem_end(); freeing a 90,000-volume view value by value there
     * costs a chunk search per value (quadratic), so it is left to the
     * arena. Outside one (the dry run, tests, NCCLGUARD_JSON_ARENA=0), it
     * is freed here. */
    if (jsonmem_used() == 0)
        json_decref(root);
    /* After the plan and the response, the last readers of its tape. */
    fastjson_doc_release(doc);
    return rc;
}

int
review_handle(const char *body, size_t len, const struct policy *pol,
              const struct mutate_options *opt, struct review_outcome *out)
{
    return review_run(body, len, false, pol, opt, out);
}

int
review_handle_padded(const char *body, size_t len, const struct policy *pol,
                     const struct mutate_options *opt,
                     struct review_outcome *out)
{
    return review_run(body, len, true, pol, opt, out);
}
