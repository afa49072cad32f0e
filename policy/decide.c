/* The decision for one pod: the first matching rule, and the annotation
 * overrides bounded by it. */
#include "policy/policy.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/text.h"
#include "policy/loader.h"
#include "policy/match.h"
#include "policy/quantity.h"

/* ---- decisions ----------------------------------------------------- */

/* Adds a warning, cut on a UTF-8 boundary to the TEXT_WARNING_MAX bytes
 * the admission API shows whole. */
static void decision_warn(struct decision *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
decision_warn(struct decision *out, const char *fmt, ...)
{
    va_list ap;

    _Static_assert(sizeof(out->warnings[0]) > TEXT_WARNING_MAX,
                   "a decision's warning holds TEXT_WARNING_MAX bytes");

    if (out->n_warnings >= POLICY_MAX_WARNINGS)
        return;
    va_start(ap, fmt);
    text_vformat(out->warnings[out->n_warnings++], TEXT_WARNING_MAX + 1, NULL,
                 fmt, ap);
    va_end(ap);
}

/* A user-supplied value made safe and short for a warning. */
static void
shown_value(const char *v, char *buf, size_t n)
{
    size_t j = 0;

    for (size_t i = 0; v[i] != '\0' && j + 4 < n; i++) {
        unsigned char c = (unsigned char)v[i];

        buf[j++] = (c >= 0x20 && c < 0x7f && c != '"') ? (char)c : '?';
        if (i >= 15 && v[i + 1] != '\0') {
            memcpy(buf + j, "...", 3);
            j += 3;
            break;
        }
    }
    buf[j] = '\0';
}

static const char *
annotation(const json_t *annotations, const char *key)
{
    const json_t *v;

    if (annotations == NULL || !json_is_object(annotations))
        return NULL;
    v = json_object_get(annotations, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static void
decide_shm_size(const struct settings *s, const char *rule, const char *v,
                struct decision *out)
{
    struct quantity q;
    char shown[24], lim[32];

    shown_value(v, shown, sizeof(shown));
    if (!s->shm.enabled) {
        decision_warn(out,
                      "ncclguard: shm-size ignored: rule \"%.30s\" "
                      "does not manage /dev/shm; remove the annotation",
                      rule);
        return;
    }
    if (quantity_parse(v, strlen(v), &q, NULL) != 0 || q.negative ||
        q.value == 0 || !q.integer || q.saturated) {
        decision_warn(out,
                      "ncclguard: shm-size \"%s\" refused: not a whole "
                      "positive quantity such as 16Gi",
                      shown);
        return;
    }
    if (q.value > s->shm.max) {
        quantity_format_binary(s->shm.max, lim, sizeof(lim));
        decision_warn(out,
                      "ncclguard: shm-size %s refused: above the "
                      "policy maximum %s (rule \"%.30s\")",
                      shown, lim, rule);
        return;
    }
    if (q.value < s->shm.min) {
        quantity_format_binary(s->shm.min, lim, sizeof(lim));
        decision_warn(out,
                      "ncclguard: shm-size %s refused: below the "
                      "policy minimum %s (rule \"%.30s\")",
                      shown, lim, rule);
        return;
    }
    out->shm_override = q.value;
}

void
policy_decide(const struct policy *p, const char *ns, const json_t *labels,
              const json_t *annotations, int64_t gpus, struct decision *out)
{
    policy_decide_pod(p, ns, labels, annotations, NULL, gpus, out);
}

void
policy_decide_pod(const struct policy *p, const char *ns, const json_t *labels,
                  const json_t *annotations, const json_t *spec, int64_t gpus,
                  struct decision *out)
{
    const struct settings *s = &p->defaults;
    const char *v;
    char shown[24];

    memset(out, 0, sizeof(*out));
    out->rule = "default";
    out->shm_override = -1;
    for (size_t i = 0; i < p->n_rules; i++) {
        if (match_pod(&p->rules[i].match, ns, labels, annotations, gpus) &&
            match_pod_spec(&p->rules[i].match, spec)) {
            out->rule = p->rules[i].name;
            out->skip = p->rules[i].skip;
            s = &p->rules[i].settings;
            break;
        }
    }
    out->settings = s;
    out->ringcheck = s->ringcheck.enabled;
    if (out->skip)
        return;

    if ((v = annotation(annotations, "ncclguard.io/shm-size")) != NULL)
        decide_shm_size(s, out->rule, v, out);

    if ((v = annotation(annotations, "ncclguard.io/ring-check")) != NULL) {
        shown_value(v, shown, sizeof(shown));
        if (strcmp(v, "false") == 0) {
            if (!s->ringcheck.enabled)
                ; /* already off: nothing to refuse */
            else if (s->ringcheck.allow_opt_out)
                out->ringcheck = false;
            else
                decision_warn(out,
                              "ncclguard: ring-check opt-out refused: "
                              "rule \"%.30s\" does not allow it; remove "
                              "the annotation",
                              out->rule);
        } else if (strcmp(v, "true") == 0) {
            if (!s->ringcheck.enabled)
                decision_warn(out,
                              "ncclguard: ring-check \"true\" ignored: "
                              "rule \"%.30s\" turns it off; remove the "
                              "annotation",
                              out->rule);
        } else {
            decision_warn(out,
                          "ncclguard: ring-check \"%s\" ignored: "
                          "expected \"true\" or \"false\"",
                          shown);
        }
    }

    if ((v = annotation(annotations, "ncclguard.io/debug")) != NULL) {
        shown_value(v, shown, sizeof(shown));
        if (strcmp(v, "true") == 0) {
            if (s->debug.allow_annotation)
                out->debug = true;
            else
                decision_warn(out,
                              "ncclguard: debug refused: rule "
                              "\"%.30s\" allows no NCCL debug output; "
                              "remove the annotation",
                              out->rule);
        } else if (strcmp(v, "false") != 0) {
            decision_warn(out,
                          "ncclguard: debug \"%s\" ignored: expected "
                          "\"true\" or \"false\"",
                          shown);
        }
    }
}
