/* The node loop's list and watch of this node's pods, the periodic step
 * on a timer, and the loop that runs them. */
#include "nodeloop/loop.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nodeloop/kube.h"
#include "nodeloop/nodestate.h"

/* --- the periodic step ------------------------------------------------ */

static void
tick(struct nl *nl)
{
    struct nodeview v;
    struct nq_cluster c = {0, 0};
    struct nq_actions a;

    nl->last_tick_ms = now_ms();
    /* A changed policy file (or SIGHUP) first: the step below decides
     * with the settings now in force. */
    policy_reload(nl, nl_hup != 0);
    nl_hup = 0;
    /* Before the Node is read: what the Events add is written first, and
     * the taint the step sees is the one now on the Node. */
    if (nl->st.kind != NQ_QUARANTINED &&
        now_ms() - nl->last_poll_ms >= nl->o->event_poll_ms)
        node_events_poll(nl);
    if (node_get(nl, &v) != 0)
        return;
    /* Only a withheld taint, or a node left unhealthy when the policy
     * turns quarantine on, needs the count again (the evidence cannot
     * grow here); an agent per node listing the GPU nodes every tick would
     * load the API server for nothing. */
    if (nl->o->pol.mode == NQ_QUARANTINE &&
        (nl->st.kind == NQ_WITHHELD || nl->st.kind == NQ_UNHEALTHY))
        cluster_count(nl, &c);
    if (nl->st.kind == NQ_QUARANTINED && !v.tainted && taint_restore(nl, &v))
        v.tainted = 1;
    nq_tick(&nl->st, &nl->o->pol, now_ms(), v.tainted, &c, &a);
    if (nl->st.kind == NQ_QUARANTINED && nl->st.validation[0] != '\0' &&
        validation_overdue(nl)) {
        /* Deleted by someone, stuck Pending, or its node never ran it: a
         * failure, so the cooldown grows and a new one follows. */
        char name[160];

        snprintf(name, sizeof(name), "%s", nl->st.validation);
        nq_validated(&nl->st, &nl->o->pol, 0,
                     "the validation pod did not finish in time", now_ms(), &a);
        pthread_mutex_lock(&nl->mu);
        nl->validations_fail++;
        pthread_mutex_unlock(&nl->mu);
        pod_delete(nl, nl->o->ns, name);
    }
    if (a.start_validation) {
        int used = gpus_in_use(nl);

        if (v.gpus > 0 && used == 0) {
            validation_start(nl, v.gpus);
            if (nl->st.validation[0] != '\0')
                a.changed = 1;
        }
    }
    if (a.changed || a.taint != 0 || a.event_reason[0] != '\0')
        apply(nl, &a);
    else if (now_ms() - nl->last_cond_ms >= nl->o->heartbeat_ms)
        condition_write(nl, &v);
    nodeview_release(&v);
}

/* --- list and watch ----------------------------------------------------- */

static void
selector_path(struct nl *nl, char *buf, size_t n, const char *extra)
{
    char *esc;
    char sel[300];

    snprintf(sel, sizeof(sel), "spec.nodeName=%s", nl->o->node);
    esc = curl_easy_escape(NULL, sel, 0);
    snprintf(buf, n, "/api/v1/pods?fieldSelector=%s%s", esc ? esc : "", extra);
    curl_free(esc);
}

/* Lists the node's pods (in pages) and processes each one; sets nl->rv to
 * the list's resourceVersion, where the watch starts. */
static int
list_pods(struct nl *nl)
{
    char path[1200], extra[700], cont[512] = "";

    nl->list_gen++;
    for (;;) {
        json_t *list, *items, *pod, *meta;
        const char *rv, *next;
        size_t i;

        if (cont[0] != '\0') {
            char *esc = curl_easy_escape(NULL, cont, 0);
            snprintf(extra, sizeof(extra), "&limit=500&continue=%s",
                     esc ? esc : "");
            curl_free(esc);
        } else if (!nl->rv_gone)
            /* From the watch cache, not etcd: no scan of every pod of the
             * cluster at each start (limit is not honoured with
             * resourceVersion=0 on every release; the node's pods are
             * few). */
            snprintf(extra, sizeof(extra), "&limit=500&resourceVersion=0");
        else
            snprintf(extra, sizeof(extra), "&limit=500");
        selector_path(nl, path, sizeof(path), extra);
        if ((list = nl_get_json(nl, path)) == NULL)
            return -1;
        items = json_object_get(list, "items");
        json_array_foreach(items, i, pod) pod_seen(nl, pod, 0);
        meta = json_object_get(list, "metadata");
        rv = json_string_value(json_object_get(meta, "resourceVersion"));
        next = json_string_value(json_object_get(meta, "continue"));
        if (rv != NULL)
            snprintf(nl->rv, sizeof(nl->rv), "%s", rv);
        if (next != NULL && next[0] != '\0')
            snprintf(cont, sizeof(cont), "%s", next);
        else
            cont[0] = '\0';
        json_decref(list);
        if (cont[0] == '\0')
            break;
    }
    cache_prune(nl);
    nl->rv_gone = 0;
    logj("listed",
         json_pack("{s:s,s:i}", "resourceVersion", nl->rv, "pods", nl->npods));
    return 0;
}

static int
on_event(const char *line, size_t len, void *ud)
{
    struct nl *nl = ud;
    json_t *ev = json_loadb(line, len, 0, NULL);
    const char *type = json_string_value(json_object_get(ev, "type"));
    json_t *obj = json_object_get(ev, "object");
    const char *rv = json_string_value(
        json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    int stop = 0;

    if (type == NULL) {
        json_decref(ev);
        return 0;
    }
    if (strcmp(type, "ERROR") == 0) {
        /* 410 Gone: our resourceVersion was compacted away; relist. Any
         * other error (an overloaded or restarting server): the caller
         * backs off before it watches again. */
        json_int_t code = json_integer_value(json_object_get(obj, "code"));

        if (code == 410) {
            nl->watch_gone++;
            nl->need_list = 1;
            nl->rv_gone = 1;
        } else
            nl->watch_error = code != 0 ? (long)code : 500;
        logj("watch-error", json_pack("{s:I}", "code", code));
        stop = 1;
    } else {
        pthread_mutex_lock(&nl->step_mu);
        if (strcmp(type, "BOOKMARK") != 0)
            pod_seen(nl, obj, strcmp(type, "DELETED") == 0);
        if (rv != NULL)
            snprintf(nl->rv, sizeof(nl->rv), "%s", rv);
        pthread_mutex_unlock(&nl->step_mu);
    }
    json_decref(ev);
    return stop;
}

/* Sleeps about ms (between half and one and a half times), so that the
 * node loops of many nodes that lost the API server together do not come
 * back in step. */
static void
nap(int64_t ms)
{
    static __thread unsigned seed;
    int64_t j;

    if (seed == 0)
        seed = (unsigned)now_ms() ^ (unsigned)getpid();
    j = ms / 2 + (int64_t)(rand_r(&seed) % (unsigned)(ms > 0 ? ms : 1));
    usleep((useconds_t)(j * 1000));
}

/* The periodic step, every tick_ms whatever the watch brings. */
static void *
ticker(void *arg)
{
    struct nl *nl = arg;

    for (;;) {
        int64_t due;

        pthread_mutex_lock(&nl->step_mu);
        due = nl->last_tick_ms + nl->o->tick_ms - now_ms();
        if (due <= 0)
            tick(nl);
        pthread_mutex_unlock(&nl->step_mu);
        due = due <= 0 ? nl->o->tick_ms : due;
        usleep((useconds_t)((due < 1000 ? due : 1000) * 1000));
    }
    return NULL;
}

int
run(struct nl *nl)
{
    int64_t end = nl->o->run_ms > 0 ? now_ms() + nl->o->run_ms : 0;
    struct nodeview v;
    struct ng_error e;
    int64_t backoff = 200;

    /* The state lives on the Node: a restarted agent reads it back. */
    while (node_get(nl, &v) != 0) {
        if (end > 0 && now_ms() >= end)
            return 1;
        sleep(1);
    }
    if (v.state_ann != NULL &&
        nq_decode(v.state_ann, strlen(v.state_ann), &nl->st, &e) != 0)
        logj("bad-state", json_pack("{s:s}", "why", e.msg));
    logj("start",
         json_pack("{s:s,s:s,s:s,s:i}", "node", nl->o->node, "mode",
                   nl->o->pol.mode == NQ_QUARANTINE ? "quarantine" : "observe",
                   "state", nq_kind_name(nl->st.kind), "evidence", nl->st.nev));
    condition_write(nl, &v);
    nodeview_release(&v);
    metrics_publish(nl);
    nl->need_list = 1;
    /* The first list, and the first step after it, before the timer. */
    nl->last_tick_ms = now_ms();
    {
        pthread_t th;

        if (pthread_create(&th, NULL, ticker, nl) == 0)
            pthread_detach(th);
        else
            logj("no-ticker", json_pack("{s:s}", "why", strerror(errno)));
    }
    while (end == 0 || now_ms() < end) {
        char path[1200], extra[300], why[300];
        long code, budget;

        if (nl->need_list) {
            int rc;

            pthread_mutex_lock(&nl->step_mu);
            rc = list_pods(nl);
            if (rc == 0)
                tick(nl);
            pthread_mutex_unlock(&nl->step_mu);
            if (rc != 0) {
                nap(backoff);
                backoff = backoff * 2 > 30000 ? 30000 : backoff * 2;
                continue;
            }
            nl->need_list = 0;
        }
        nl->watch_error = 0;
        snprintf(extra, sizeof(extra),
                 "&watch=1&allowWatchBookmarks=true&resourceVersion=%s"
                 "&timeoutSeconds=%ld",
                 nl->rv, nl->o->watch_s);
        selector_path(nl, path, sizeof(path), extra);
        budget = nl->o->watch_s * 1000 + 5000;
        if (end > 0 && end - now_ms() < budget)
            budget = (long)(end - now_ms()) > 0 ? (long)(end - now_ms()) : 1;
        code = kube_watch(&nl->o->kc, path, budget, on_event, nl, why,
                          sizeof(why));
        if (code == 410) {
            nl->watch_gone++;
            nl->need_list = 1;
            nl->rv_gone = 1;
        } else if (code < 0 && !(end > 0 && now_ms() >= end)) {
            /* A dropped stream: resume from the last resourceVersion seen
             * (events or bookmarks); nothing is relisted. */
            nl->watch_dropped++;
            logj("watch-dropped",
                 json_pack("{s:s,s:s}", "why", why, "resourceVersion", nl->rv));
            nap(backoff);
            backoff = backoff * 2 > 30000 ? 30000 : backoff * 2;
        } else if (code != 200 && code > 0) {
            /* 429 (too many requests), 5xx, 403: the server is busy or
             * says no; a relist would only add load. Back off and watch
             * again from where the stream was. */
            logj("watch-refused",
                 json_pack("{s:I,s:I}", "status", (json_int_t)code,
                           "backoff_ms", (json_int_t)backoff));
            nap(backoff);
            backoff = backoff * 2 > 30000 ? 30000 : backoff * 2;
        } else if (nl->watch_error != 0) {
            nap(backoff);
            backoff = backoff * 2 > 30000 ? 30000 : backoff * 2;
        } else
            backoff = 200;
        metrics_publish(nl);
    }
    return 0;
}
