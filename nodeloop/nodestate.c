/* The node's NCCL health: counted evidence, threshold, breaker, cooldown,
 * expiry and the annotation that keeps it in the API server. */
#include "nodeloop/nodestate.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void
nq_policy_defaults(struct nq_policy *p)
{
    p->mode = NQ_OBSERVE;
    p->threshold = 2;
    p->window_ms = 3600 * 1000LL;
    p->cooldown_ms = 1800 * 1000LL;
    p->cooldown_max_ms = 8 * 3600 * 1000LL;
    p->expiry_ms = 24 * 3600 * 1000LL;
    p->max_share_permille = 100;
}

void
nq_node_init(struct nq_node *n)
{
    memset(n, 0, sizeof(*n));
    n->kind = NQ_HEALTHY;
    n->cls = NC_CLASS_NONE;
}

const char *
nq_kind_name(enum nq_kind k)
{
    static const char *const names[] = {"healthy", "suspect", "unhealthy",
                                        "withheld", "quarantined"};

    return (unsigned)k < 5 ? names[k] : "healthy";
}

static void
actions_init(struct nq_actions *a)
{
    memset(a, 0, sizeof(*a));
}

static void event(struct nq_actions *a, int warning, const char *reason,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void
event(struct nq_actions *a, int warning, const char *reason, const char *fmt,
      ...)
{
    va_list ap;

    a->event_warning = warning;
    snprintf(a->event_reason, sizeof(a->event_reason), "%s", reason);
    va_start(ap, fmt);
    vsnprintf(a->event_msg, sizeof(a->event_msg), fmt, ap);
    va_end(ap);
}

int
nq_counts(enum nc_class c)
{
    return c == NC_CLASS_NODE || c == NC_CLASS_PAIR;
}

/* Drops evidence older than the window. */
static void
prune(struct nq_node *n, const struct nq_policy *p, int64_t now)
{
    int k = 0;

    for (int i = 0; i < n->nev; i++)
        if (now - n->ev[i].at_ms <= p->window_ms)
            n->ev[k++] = n->ev[i];
    n->nev = k;
}

/* The pod part of an evidence key (before the first '/'). */
static size_t
pod_len(const char *key)
{
    const char *s = strchr(key, '/');

    return s != NULL ? (size_t)(s - key) : strlen(key);
}

/* Counted verdicts in the window, and from how many distinct pods. The
 * evidence list is bounded (NQ_MAX_EVIDENCE), so the pairwise scan is
 * bounded too. */
static void
tally(const struct nq_node *n, int *verdicts, int *pods, enum nc_class *cls)
{
    int node = 0, pair = 0;

    *verdicts = 0;
    *pods = 0;
    for (int i = 0; i < n->nev; i++) {
        int seen = 0;
        size_t li = pod_len(n->ev[i].key);

        (*verdicts)++;
        if (n->ev[i].cls == NC_CLASS_NODE)
            node++;
        else
            pair++;
        for (int j = 0; j < i && !seen; j++)
            seen = pod_len(n->ev[j].key) == li &&
                   memcmp(n->ev[j].key, n->ev[i].key, li) == 0;
        if (!seen)
            (*pods)++;
    }
    *cls = node >= pair ? NC_CLASS_NODE : NC_CLASS_PAIR;
}

static void
enter(struct nq_node *n, enum nq_kind k, int64_t now)
{
    if (n->kind != k)
        n->since_ms = now;
    n->kind = k;
}

/* Whether one more tainted node keeps the share at or below the maximum. */
static int
breaker_allows(const struct nq_policy *p, const struct nq_cluster *c)
{
    if (c->gpu_nodes <= 0)
        return 0;
    return (long long)(c->tainted + 1) * 1000 <=
           (long long)p->max_share_permille * c->gpu_nodes;
}

static void
quarantine(struct nq_node *n, const struct nq_policy *p, int64_t now,
           enum nc_class cls, struct nq_actions *a)
{
    enter(n, NQ_QUARANTINED, now);
    n->cls = cls;
    n->quarantined_ms = now;
    n->next_check_ms = now + p->cooldown_ms;
    n->fails = 0;
    a->taint = 1;
    a->changed = 1;
}

/* Decides what the tally means now. */
static void
evaluate(struct nq_node *n, const struct nq_policy *p, int64_t now,
         const struct nq_cluster *c, struct nq_actions *a)
{
    int verdicts, pods;
    enum nc_class cls;
    enum nq_kind was = n->kind;

    if (n->kind == NQ_QUARANTINED)
        return;
    tally(n, &verdicts, &pods, &cls);
    if (verdicts == 0) {
        enter(n, NQ_HEALTHY, now);
        n->cls = NC_CLASS_NONE;
    } else if (verdicts < p->threshold || pods < 2) {
        enter(n, NQ_SUSPECT, now);
        n->cls = cls;
    } else if (p->mode == NQ_OBSERVE) {
        enter(n, NQ_UNHEALTHY, now);
        n->cls = cls;
        if (was != NQ_UNHEALTHY)
            event(a, 1, "NCCLNodeUnhealthy",
                  "%d %s-class verdicts from %d pods within the window; "
                  "observe mode: no taint",
                  verdicts, nc_class_name(cls), pods);
    } else if (!breaker_allows(p, c)) {
        enter(n, NQ_WITHHELD, now);
        n->cls = cls;
        a->withheld = 1;
        if (was != NQ_WITHHELD)
            event(a, 1, "NCCLQuarantineWithheld",
                  "%d %s-class verdicts from %d pods, but tainting this node "
                  "would put %d of %d GPU nodes under the taint, over the "
                  "%d.%d %% maximum: circuit breaker holds",
                  verdicts, nc_class_name(cls), pods, c->tainted + 1,
                  c->gpu_nodes, p->max_share_permille / 10,
                  p->max_share_permille % 10);
    } else {
        quarantine(n, p, now, cls, a);
        event(a, 1, "NCCLQuarantined",
              "%d %s-class verdicts from %d pods within the window: tainted "
              "ncclguard.io/nccl-unhealthy=%s:NoSchedule; validation after "
              "the cooldown",
              verdicts, nc_class_name(cls), pods, nc_class_name(cls));
    }
    if (n->kind != was)
        a->changed = 1;
}

void
nq_add(struct nq_node *n, const struct nq_policy *p,
       const struct nq_evidence *ev, int64_t now, const struct nq_cluster *c,
       struct nq_actions *a)
{
    actions_init(a);
    /* Evidence from before a lift was forgotten with it: an agent that
     * reads the same Events or pods again must not quarantine anew. */
    if (!nq_counts(ev->cls) || now - ev->at_ms > p->window_ms ||
        ev->at_ms <= n->cleared_ms)
        return;
    for (int i = 0; i < n->nev; i++)
        if (strcmp(n->ev[i].key, ev->key) == 0)
            return;
    prune(n, p, now);
    if (n->nev == NQ_MAX_EVIDENCE) {
        memmove(&n->ev[0], &n->ev[1], sizeof(n->ev[0]) * (NQ_MAX_EVIDENCE - 1));
        n->nev--;
    }
    n->ev[n->nev++] = *ev;
    a->counted = 1;
    a->changed = 1;
    evaluate(n, p, now, c, a);
}

int
nq_agrees(const struct nq_node *n, const struct nq_policy *p, int64_t now)
{
    if (n->cross_ms > 0 && now - n->cross_ms <= p->window_ms)
        return 1;
    for (int i = 0; i < n->nev; i++)
        if (n->ev[i].peer[0] == '\0' && now - n->ev[i].at_ms <= p->window_ms)
            return 1;
    return 0;
}

void
nq_add_peer(struct nq_node *n, const struct nq_policy *p,
            const struct nq_evidence *ev, int64_t now,
            const struct nq_cluster *c, struct nq_actions *a)
{
    actions_init(a);
    if (ev->cls != NC_CLASS_PAIR || ev->peer[0] == '\0' ||
        !nq_agrees(n, p, now))
        return;
    nq_add(n, p, ev, now, c, a);
}

static void
lift(struct nq_node *n, int64_t now, struct nq_actions *a)
{
    enter(n, NQ_HEALTHY, now);
    n->cls = NC_CLASS_NONE;
    n->nev = 0;
    n->fails = 0;
    n->quarantined_ms = 0;
    n->next_check_ms = 0;
    n->validation[0] = '\0';
    n->cross_ms = 0;
    n->cleared_ms = now;
    a->taint = -1;
    a->changed = 1;
}

void
nq_tick(struct nq_node *n, const struct nq_policy *p, int64_t now,
        int tainted_now, const struct nq_cluster *c, struct nq_actions *a)
{
    int before = n->nev;

    actions_init(a);
    if (n->kind == NQ_QUARANTINED && !tainted_now) {
        /* kubectl taint nodes NODE ncclguard.io/nccl-unhealthy- */
        lift(n, now, a);
        a->taint = 0;
        event(a, 0, "NCCLQuarantineLiftedByHand",
              "the taint was removed by hand; evidence forgotten");
        return;
    }
    if (n->kind == NQ_QUARANTINED && p->expiry_ms > 0 &&
        now - n->quarantined_ms >= p->expiry_ms) {
        lift(n, now, a);
        event(a, 0, "NCCLQuarantineExpired",
              "the quarantine expired before a validation passed; taint "
              "lifted");
        return;
    }
    if (n->kind == NQ_QUARANTINED) {
        if (n->validation[0] == '\0' && now >= n->next_check_ms)
            a->start_validation = 1;
        return;
    }
    prune(n, p, now);
    if (n->nev != before)
        a->changed = 1;
    evaluate(n, p, now, c, a);
}

void
nq_validated(struct nq_node *n, const struct nq_policy *p, int passed,
             const char *why, int64_t now, struct nq_actions *a)
{
    int64_t wait = p->cooldown_ms;

    actions_init(a);
    n->validation[0] = '\0';
    a->changed = 1;
    if (passed) {
        lift(n, now, a);
        event(a, 0, "NCCLValidationPassed",
              "the validation ring check passed on all GPUs: taint lifted%s%s",
              why[0] != '\0' ? ": " : "", why);
        return;
    }
    n->fails++;
    for (int i = 0; i < n->fails && wait < p->cooldown_max_ms; i++)
        wait *= 2;
    if (wait > p->cooldown_max_ms)
        wait = p->cooldown_max_ms;
    n->next_check_ms = now + wait;
    event(a, 1, "NCCLValidationFailed",
          "the validation ring check failed (%d in a row); taint kept, next "
          "try in %llds: %s",
          n->fails, (long long)(wait / 1000), why);
}

void
nq_condition(const struct nq_node *n, const struct nq_policy *p,
             const char **status, char *reason, size_t rn, char *msg, size_t mn)
{
    int verdicts, pods;
    enum nc_class cls;

    tally(n, &verdicts, &pods, &cls);
    switch (n->kind) {
    case NQ_HEALTHY:
        *status = "True";
        snprintf(reason, rn, "NCCLChecksPass");
        snprintf(msg, mn, "no node-class NCCL failure in the window");
        return;
    case NQ_SUSPECT:
        *status = "True";
        snprintf(reason, rn, "NCCLFailuresSeen");
        snprintf(msg, mn,
                 "%d %s-class verdict%s from %d pod%s in the window; %d "
                 "from 2 pods mark the node",
                 verdicts, nc_class_name(cls), verdicts == 1 ? "" : "s", pods,
                 pods == 1 ? "" : "s", p->threshold);
        return;
    case NQ_UNHEALTHY:
        *status = "False";
        snprintf(reason, rn, "NCCLNodeUnhealthy");
        snprintf(msg, mn,
                 "%d %s-class verdicts from %d pods; observe mode: not "
                 "tainted",
                 verdicts, nc_class_name(cls), pods);
        return;
    case NQ_WITHHELD:
        *status = "False";
        snprintf(reason, rn, "NCCLQuarantineWithheld");
        snprintf(msg, mn,
                 "%d %s-class verdicts from %d pods; the circuit breaker "
                 "withheld the taint",
                 verdicts, nc_class_name(cls), pods);
        return;
    case NQ_QUARANTINED:
        break;
    }
    *status = "False";
    snprintf(reason, rn, "NCCLQuarantined");
    snprintf(msg, mn,
             "tainted ncclguard.io/nccl-unhealthy=%s:NoSchedule; %d failed "
             "validation%s",
             nc_class_name(n->cls), n->fails, n->fails == 1 ? "" : "s");
}

static enum nc_class
class_from(const char *s)
{
    if (strcmp(s, "node") == 0)
        return NC_CLASS_NODE;
    if (strcmp(s, "pair") == 0)
        return NC_CLASS_PAIR;
    return NC_CLASS_NONE;
}

int
nq_encode(const struct nq_node *n, char *buf, size_t len)
{
    json_t *o = json_pack("{s:i,s:s,s:s,s:I,s:I,s:I,s:i,s:s}", "v", 1, "state",
                          nq_kind_name(n->kind), "class", nc_class_name(n->cls),
                          "since", (json_int_t)n->since_ms, "quarantinedAt",
                          (json_int_t)n->quarantined_ms, "nextCheck",
                          (json_int_t)n->next_check_ms, "fails", n->fails,
                          "validation", n->validation);
    json_t *arr = json_array();
    size_t need;
    int rc = -1;

    if (o == NULL || arr == NULL)
        goto done;
    for (int i = 0; i < n->nev; i++) {
        const struct nq_evidence *e = &n->ev[i];

        if (json_array_append_new(
                arr, json_pack("{s:s,s:s,s:s,s:s,s:I}", "key", e->key, "pod",
                               e->pod, "class", nc_class_name(e->cls), "reason",
                               e->reason, "at", (json_int_t)e->at_ms)) != 0)
            goto done;
        if (e->peer[0] != '\0' &&
            json_object_set_new(json_array_get(arr, json_array_size(arr) - 1),
                                "peer", json_string(e->peer)) != 0)
            goto done;
    }
    if (n->cross_ms > 0 &&
        json_object_set_new(o, "crossFailAt", json_integer(n->cross_ms)) != 0)
        goto done;
    if (n->cleared_ms > 0 &&
        json_object_set_new(o, "clearedAt", json_integer(n->cleared_ms)) != 0)
        goto done;
    if (json_object_set(o, "evidence", arr) != 0)
        goto done;
    need = json_dumpb(o, NULL, 0, JSON_COMPACT);
    if (need == 0 || need >= len)
        goto done;
    json_dumpb(o, buf, len, JSON_COMPACT);
    buf[need] = '\0';
    rc = 0;
done:
    json_decref(arr);
    json_decref(o);
    return rc;
}

static int
copy_str(json_t *o, const char *key, char *dst, size_t n, int required)
{
    json_t *v = json_object_get(o, key);

    if (v == NULL && !required) {
        dst[0] = '\0';
        return 0;
    }
    if (!json_is_string(v) || json_string_length(v) >= n)
        return -1;
    memcpy(dst, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

static int
get_ms(json_t *o, const char *key, int64_t *out)
{
    json_t *v = json_object_get(o, key);

    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (int64_t)json_integer_value(v);
    return 0;
}

int
nq_decode(const char *json, size_t len, struct nq_node *n, struct ng_error *err)
{
    json_error_t je;
    json_t *o = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je), *ev, *v;
    char s[32];
    int64_t fails;
    size_t i;

    nq_node_init(n);
    if (!json_is_object(o)) {
        ng_error_set(err, 0, 0, "state annotation is not a JSON object: %s",
                     je.text);
        goto fail;
    }
    if (copy_str(o, "state", s, sizeof(s), 1) != 0)
        goto bad;
    for (n->kind = NQ_HEALTHY; n->kind <= NQ_QUARANTINED; n->kind++)
        if (strcmp(nq_kind_name(n->kind), s) == 0)
            break;
    if (n->kind > NQ_QUARANTINED)
        goto bad;
    if (copy_str(o, "class", s, sizeof(s), 1) != 0)
        goto bad;
    n->cls = class_from(s);
    if (get_ms(o, "since", &n->since_ms) != 0 ||
        get_ms(o, "quarantinedAt", &n->quarantined_ms) != 0 ||
        get_ms(o, "nextCheck", &n->next_check_ms) != 0 ||
        get_ms(o, "fails", &fails) != 0 || fails > 1000 ||
        copy_str(o, "validation", n->validation, sizeof(n->validation), 0) != 0)
        goto bad;
    if ((json_object_get(o, "crossFailAt") != NULL &&
         get_ms(o, "crossFailAt", &n->cross_ms) != 0) ||
        (json_object_get(o, "clearedAt") != NULL &&
         get_ms(o, "clearedAt", &n->cleared_ms) != 0))
        goto bad;
    n->fails = (int)fails;
    ev = json_object_get(o, "evidence");
    if (!json_is_array(ev) || json_array_size(ev) > NQ_MAX_EVIDENCE)
        goto bad;
    json_array_foreach(ev, i, v)
    {
        struct nq_evidence *e = &n->ev[n->nev];

        if (copy_str(v, "key", e->key, sizeof(e->key), 1) != 0 ||
            copy_str(v, "pod", e->pod, sizeof(e->pod), 1) != 0 ||
            copy_str(v, "class", s, sizeof(s), 1) != 0 ||
            copy_str(v, "reason", e->reason, sizeof(e->reason), 1) != 0 ||
            get_ms(v, "at", &e->at_ms) != 0 ||
            copy_str(v, "peer", e->peer, sizeof(e->peer), 0) != 0)
            goto bad;
        e->cls = class_from(s);
        if (!nq_counts(e->cls))
            goto bad;
        n->nev++;
    }
    json_decref(o);
    return 0;
bad:
    ng_error_set(err, 0, 0, "state annotation has a missing or bad field");
fail:
    json_decref(o);
    nq_node_init(n);
    return -1;
}
