/* The node loop's internals, shared by the files of nodeloop/: its options,
 * its state, and the functions one file calls in another. Not a public
 * interface: the program is ncclguard-nodeloop (docs/nodeloop.md). */
#ifndef NCCLGUARD_NL_LOOP_H
#define NCCLGUARD_NL_LOOP_H

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "nodeloop/kube.h"
#include "nodeloop/nodeclass.h"
#include "nodeloop/nodestate.h"

struct policy_quarantine;

#define NL_MAX_PODS 1024
#define NL_SEEN 2048
#define NL_TAINT_KEY "ncclguard.io/nccl-unhealthy"

/* The quarantine flags given on the command line: each overrides the
 * policy file's value (docs/nodeloop.md, "Policy"). */
enum {
    NLF_MODE = 1 << 0,
    NLF_THRESHOLD = 1 << 1,
    NLF_WINDOW = 1 << 2,
    NLF_COOLDOWN = 1 << 3,
    NLF_COOLDOWN_MAX = 1 << 4,
    NLF_EXPIRY = 1 << 5,
    NLF_SHARE = 1 << 6,
};

struct nl_opts {
    struct kube_client kc;
    const char *policy_path;   /* --policy, NULL: the flags and defaults */
    struct nq_policy flag_pol; /* what the flags said */
    unsigned flags_set;        /* NLF_*: which of them were given */
    const char *node, *ns, *image, *gpu_resource, *gpu_selector;
    const char *metrics_file;
    int metrics_port;
    int metrics_fd; /* the listening socket, -1 none */
    const char *port_file;
    struct nq_policy pol;
    long watch_s;
    int64_t run_ms, heartbeat_ms, tick_ms, event_poll_ms;
    int validation_timeout_s;
};

struct podrec {
    char uid[64];
    int gpus;
    int active;
    unsigned gen; /* the list (or watch) generation that last saw it */
};

struct nl {
    struct nl_opts *o;
    struct nq_node st;
    char rv[64];
    int need_list;
    long watch_error; /* the code of the last ERROR event, 0 none */
    /* After a 410 the next list is a consistent read (resourceVersion
     * unset); otherwise the watch cache serves it (resourceVersion=0), as
     * client-go's reflector chooses (relistResourceVersion in
     * tools/cache/reflector.go). */
    int rv_gone;
    struct podrec pods[NL_MAX_PODS];
    int npods;
    unsigned list_gen;
    /* The breaker's count, kept a while (cluster_count). */
    struct nq_cluster count;
    int64_t count_until_ms;
    /* The periodic step runs on a timer (ticker), not on watch traffic: a
     * real apiserver sends a bookmark about once a minute. step_mu keeps
     * the step and the watch's events apart. */
    pthread_mutex_t step_mu;
    char seen[NL_SEEN][96];
    int nseen, seen_next;
    int64_t last_tick_ms, last_cond_ms, last_poll_ms;
    char *pol_seen; /* the policy file's bytes last read, good or bad */
    size_t pol_seen_len;
    int pol_failing;
    /* metrics, under mu */
    pthread_mutex_t mu;
    long verdicts[7][5];
    long taints_applied, taints_lifted, taints_withheld;
    long validations_pass, validations_fail;
    long watch_dropped, watch_gone, api_errors, events_posted;
    long pair_sent, pair_counted, gpu_lost_counted;
    long pol_reloads, pol_reload_errors;
    char metrics[16384];
};

/* A GPU count: 0 .. NL_GPUS_MAX - 1, else 0 (the same bound for a JSON
 * number as for a string). */
#define NL_GPUS_MAX 100000

/* The Node as one step reads it; the strings point into obj. */
struct nodeview {
    json_t *obj; /* the Node, owned */
    const char *rv;
    const char *uid;
    const char *state_ann; /* or NULL */
    int tainted;
    int gpus; /* allocatable */
    const char *cond_status, *cond_ltt;
};

/* Set by SIGHUP (on_hup); the next step rereads the policy. */
extern volatile sig_atomic_t nl_hup;

/* nodeloop/loop.c: the clock (ms since the epoch, RFC 3339 both ways), one
 * JSON log line on stdout (logj consumes fields, which may be NULL), and the
 * policy in force. policy_reload returns 0 when a policy is in force and -1
 * when none ever loaded; it takes nl->mu itself. on_hup is the SIGHUP
 * handler: it only sets nl_hup, which the next step reads. */
int64_t now_ms(void);
void rfc3339(int64_t ms, char *buf, size_t n);
int64_t parse_time(const char *s);
void logj(const char *what, json_t *fields);
void on_hup(int sig);
void policy_apply(struct nl_opts *o, const struct policy_quarantine *q);
int policy_reload(struct nl *nl, int force);

/* nodeloop/metrics.c: metrics_publish renders the counters (under nl->mu)
 * into nl->metrics and, with --metrics-file, writes them there;
 * metrics_serve is the /metrics thread's body (arg: the struct nl). */
void metrics_publish(struct nl *nl);
void *metrics_serve(void *arg);

/* nodeloop/node.c: the Node read into a nodeview (node_get: 0, or -1 with
 * nothing to release; nodeview_release frees what it holds), GETs of JSON
 * (nl_get_json: a new reference or NULL), the NCCLHealthy condition, Events
 * (post_event consumes related and ann), the breaker's count, applying a
 * step's actions, and a dropped taint put back (taint_restore: 1 when it
 * put it back). The step calls them under step_mu; run calls node_get and
 * condition_write once before the ticker starts. */
void nodeview_release(struct nodeview *v);
int quantity_int(json_t *q);
json_t *nl_get_json(struct nl *nl, const char *path);
int node_get(struct nl *nl, struct nodeview *v);
int condition_write(struct nl *nl, const struct nodeview *v);
void post_event(struct nl *nl, const char *ns, const char *name,
                const char *kind, const char *obj_name, const char *obj_ns,
                const char *uid, int warning, const char *reason,
                const char *msg, json_t *related, json_t *ann);
void cluster_count(struct nl *nl, struct nq_cluster *c);
void apply(struct nl *nl, const struct nq_actions *a);
int taint_restore(struct nl *nl, const struct nodeview *v);

/* nodeloop/pods.c: the pod cache (pod_seen for each pod listed or watched,
 * gone when it was deleted; cache_prune after a list), the GPUs in use,
 * the evidence Events on the Node, and validation pods (started,
 * deleted, overdue). Called with step_mu held. */
void cache_prune(struct nl *nl);
int gpus_in_use(const struct nl *nl);
void node_events_poll(struct nl *nl);
void pod_delete(struct nl *nl, const char *ns, const char *name);
void pod_seen(struct nl *nl, json_t *pod, int gone);
void validation_start(struct nl *nl, int gpus);
int validation_overdue(const struct nl *nl);

/* nodeloop/watch.c: the loop itself. run reads the state back from the
 * Node, then lists and watches until --run-for ends (never without it);
 * returns 0, or 1 when the Node never could be read before the end. */
int run(struct nl *nl);

#endif
