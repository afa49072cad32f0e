/* The node loop's Prometheus metrics: rendered after each step, served
 * from a copy on their own thread. */
#include "nodeloop/loop.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "nodeloop/nodeclass.h"
#include "nodeloop/nodestate.h"

/* --- metrics ------------------------------------------------------------ */

static void
metrics_render(struct nl *nl)
{
    char *b = nl->metrics;
    size_t n = sizeof(nl->metrics), k = 0;
    const char *node = nl->o->node;

#define ADD(...)                                                               \
    do {                                                                       \
        int w_ = snprintf(b + k, n - k, __VA_ARGS__);                          \
        if (w_ > 0 && (size_t)w_ < n - k)                                      \
            k += (size_t)w_;                                                   \
    } while (0)
    ADD("# HELP ncclguard_node_verdicts_total Ring-check and agent verdicts "
        "on this node, by verdict and class.\n"
        "# TYPE ncclguard_node_verdicts_total counter\n");
    for (int v = 0; v < 7; v++)
        for (int c = 0; c < 5; c++)
            if (nl->verdicts[v][c] > 0)
                ADD("ncclguard_node_verdicts_total{node=\"%s\",verdict=\"%s\","
                    "class=\"%s\"} %ld\n",
                    node, nc_verdict_name((enum nc_verdict)v),
                    nc_class_name((enum nc_class)c), nl->verdicts[v][c]);
    ADD("# HELP ncclguard_node_state 1 for the node's NCCL state.\n"
        "# TYPE ncclguard_node_state gauge\n");
    for (int s = NQ_HEALTHY; s <= NQ_QUARANTINED; s++)
        ADD("ncclguard_node_state{node=\"%s\",state=\"%s\"} %d\n", node,
            nq_kind_name((enum nq_kind)s), nl->st.kind == (enum nq_kind)s);
    ADD("# HELP ncclguard_node_evidence Counted verdicts in the window.\n"
        "# TYPE ncclguard_node_evidence gauge\n"
        "ncclguard_node_evidence{node=\"%s\"} %d\n",
        node, nl->st.nev);
    ADD("# HELP ncclguard_node_taints_total Taints applied, lifted, or "
        "withheld by the circuit breaker.\n"
        "# TYPE ncclguard_node_taints_total counter\n"
        "ncclguard_node_taints_total{node=\"%s\",action=\"applied\"} %ld\n"
        "ncclguard_node_taints_total{node=\"%s\",action=\"lifted\"} %ld\n"
        "ncclguard_node_taints_total{node=\"%s\",action=\"withheld\"} %ld\n",
        node, nl->taints_applied, node, nl->taints_lifted, node,
        nl->taints_withheld);
    ADD("# HELP ncclguard_node_breaker_open 1 while the breaker holds this "
        "node's taint.\n"
        "# TYPE ncclguard_node_breaker_open gauge\n"
        "ncclguard_node_breaker_open{node=\"%s\"} %d\n",
        node, nl->st.kind == NQ_WITHHELD);
    ADD("# TYPE ncclguard_node_validations_total counter\n"
        "ncclguard_node_validations_total{node=\"%s\",result=\"pass\"} %ld\n"
        "ncclguard_node_validations_total{node=\"%s\",result=\"fail\"} %ld\n",
        node, nl->validations_pass, node, nl->validations_fail);
    ADD("# TYPE ncclguard_node_watch_restarts_total counter\n"
        "ncclguard_node_watch_restarts_total{node=\"%s\",why=\"dropped\"} "
        "%ld\n"
        "ncclguard_node_watch_restarts_total{node=\"%s\",why=\"gone\"} %ld\n",
        node, nl->watch_dropped, node, nl->watch_gone);
    ADD("# TYPE ncclguard_node_api_errors_total counter\n"
        "ncclguard_node_api_errors_total{node=\"%s\"} %ld\n"
        "# TYPE ncclguard_node_events_total counter\n"
        "ncclguard_node_events_total{node=\"%s\"} %ld\n",
        node, nl->api_errors, node, nl->events_posted);
    ADD("# HELP ncclguard_node_quarantine_mode 1 for the quarantine mode in "
        "force (the policy's defaults.quarantine.mode, or --mode).\n"
        "# TYPE ncclguard_node_quarantine_mode gauge\n"
        "ncclguard_node_quarantine_mode{node=\"%s\",mode=\"observe\"} %d\n"
        "ncclguard_node_quarantine_mode{node=\"%s\",mode=\"quarantine\"} %d\n",
        node, nl->o->pol.mode == NQ_OBSERVE, node,
        nl->o->pol.mode == NQ_QUARANTINE);
    ADD("# HELP ncclguard_node_policy_reloads_total Reads of a changed "
        "policy file, by result.\n"
        "# TYPE ncclguard_node_policy_reloads_total counter\n"
        "ncclguard_node_policy_reloads_total{node=\"%s\",result=\"ok\"} %ld\n"
        "ncclguard_node_policy_reloads_total{node=\"%s\",result=\"error\"} "
        "%ld\n"
        "# HELP ncclguard_node_policy_reload_failing 1 while the policy file "
        "does not load (the last good one stays in force).\n"
        "# TYPE ncclguard_node_policy_reload_failing gauge\n"
        "ncclguard_node_policy_reload_failing{node=\"%s\"} %d\n",
        node, nl->pol_reloads, node, nl->pol_reload_errors, node,
        nl->pol_failing);
    ADD("# HELP ncclguard_node_peer_evidence_total Evidence carried by Node "
        "Events: pair verdicts sent to the other node, pair verdicts from "
        "another node counted here, lost GPUs from the watchdog counted.\n"
        "# TYPE ncclguard_node_peer_evidence_total counter\n"
        "ncclguard_node_peer_evidence_total{node=\"%s\",action=\"pair-sent\"} "
        "%ld\n"
        "ncclguard_node_peer_evidence_total{node=\"%s\",action=\"pair-"
        "counted\"} "
        "%ld\n"
        "ncclguard_node_peer_evidence_total{node=\"%s\",action=\"gpu-lost-"
        "counted\"} %ld\n",
        node, nl->pair_sent, node, nl->pair_counted, node,
        nl->gpu_lost_counted);
#undef ADD
}

/* Renders the metrics and, with --metrics-file, writes them through a
 * temporary file and rename (readers never see half a file). */
void
metrics_publish(struct nl *nl)
{
    char tmp[512];
    FILE *f;

    pthread_mutex_lock(&nl->mu);
    metrics_render(nl);
    pthread_mutex_unlock(&nl->mu);
    if (nl->o->metrics_file == NULL)
        return;
    snprintf(tmp, sizeof(tmp), "%s.tmp", nl->o->metrics_file);
    if ((f = fopen(tmp, "w")) == NULL)
        return;
    fputs(nl->metrics, f);
    if (fclose(f) == 0)
        rename(tmp, nl->o->metrics_file);
}

void *
metrics_serve(void *arg)
{
    struct nl *nl = arg;

    for (;;) {
        char req[1024], hdr[160];
        int c = accept(nl->o->metrics_fd, NULL, NULL);
        size_t len;

        struct timeval tv = {2, 0};

        if (c < 0) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        /* A client that sends nothing must not hold the only thread. */
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        (void)!read(c, req, sizeof(req));
        pthread_mutex_lock(&nl->mu);
        len = strlen(nl->metrics);
        snprintf(hdr, sizeof(hdr),
                 "HTTP/1.1 200 OK\r\nContent-Type: text/plain; "
                 "version=0.0.4\r\nContent-Length: %zu\r\nConnection: "
                 "close\r\n\r\n",
                 len);
        (void)!write(c, hdr, strlen(hdr));
        (void)!write(c, nl->metrics, len);
        pthread_mutex_unlock(&nl->mu);
        close(c);
    }
}
