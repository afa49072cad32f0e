/* AdmissionReview (admission.k8s.io/v1 and v1beta1) decode and encode. */
#ifndef NCCLGUARD_REVIEW_H
#define NCCLGUARD_REVIEW_H

#include <stddef.h>

#include <jansson.h>

#include "admission/fastjson.h"
#include "admission/mutate.h"
#include "policy/policy.h"

enum review_result {
    REVIEW_PATCHED = 0,
    REVIEW_UNCHANGED,
    REVIEW_SKIPPED,
    REVIEW_NOT_GPU,
    REVIEW_IGNORED,     /* not Pod CREATE: allowed, no patch */
    REVIEW_ERROR,       /* internal failure: allowed, no patch, warning */
    REVIEW_BAD_REQUEST, /* 400: not JSON or not an AdmissionReview */
    REVIEW_RESULT_COUNT
};

/* The parts of a review the decoder builds, for review_handle() and the
 * plan: request.uid, kind, operation, ..., and of request.object the
 * fields the plan reads (see review.c). Exposed for tests and benchmarks. */
extern const struct fastjson_shape review_shape;

/* Label values for metrics and logs ("patched", "bad_request", ...). */
const char *review_result_name(enum review_result r);

struct review_outcome {
    int http_status; /* 200 or 400 */
    enum review_result result;
    char *body;               /* malloc'd response: JSON, or a one-line */
    size_t body_len;          /* reason ending in '\n' for 400 */
    const char *content_type; /* static string */
    /* The admission log record: the line's fields as JSON object members
     * with no braces around them, in a fixed order, "uid", "namespace",
     * "name", "operation", then "gpus", "rule", "injected", "warnings" and
     * "reason" as the review went, and "result" (a bad request has only
     * "result" and "reason"). Each value is already within the log caps
     * of base/text.h, so the text goes into the line as it is (see
     * log_members_write() in server/log.h). NUL-terminated, malloc'd,
     * log_len bytes; NULL only on a zeroed or released outcome. */
    char *log;
    size_t log_len;
    size_t patch_ops;
    size_t warnings;
    /* The plan's full result (status, warnings, rule, ring check) for the
     * dry run and the policy tests; zeroed when the review never reached
     * the plan (a bad or ignored request). Its patch_text is the JSON Patch
     * exactly as the response carries it before base64 (NULL when the
     * response has no patch): the dry run prints these bytes, so serve and
     * mutate cannot differ. */
    struct mutate_result mutation;
};

/*
 * Decodes body (len bytes, not NUL-terminated), runs the mutation for Pod
 * CREATE and encodes the response. Returns 0 and fills *out (release with
 * review_outcome_release()) for every input, good or bad; -1 only on
 * allocation failure. Thread-safe: pol is only read.
 */
int review_handle(const char *body, size_t len, const struct policy *pol,
                  const struct mutate_options *opt, struct review_outcome *out)
    __attribute__((warn_unused_result));

/* The zero bytes that must follow a body given to review_handle_padded()
 * (the JSON decoder's padding, admission/fastjson.h). */
#define REVIEW_BODY_PADDING 80

/*
 * As review_handle(), for a body followed by REVIEW_BODY_PADDING readable
 * zero bytes (not counted in len): the decoder parses it where it is
 * instead of copying it into a padded buffer first. The same outcome, byte
 * for byte. The server's connection buffers keep that room.
 */
int review_handle_padded(const char *body, size_t len, const struct policy *pol,
                         const struct mutate_options *opt,
                         struct review_outcome *out)
    __attribute__((warn_unused_result));

/* Frees what an outcome owns. Safe on a zeroed struct. */
void review_outcome_release(struct review_outcome *out);

#endif
