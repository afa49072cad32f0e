/* Fuzz target: the node loop's decoding of what the API server sends
 * (the files of nodeloop/): watch events, pod list pages, the Node, the
 * GPU-node list and the state annotation. Pods are the tenants': their
 * statuses, termination messages and resources are whatever a workload
 * wrote. The file-local functions are reached by including the loop's
 * files (all but main.c: the replay has its own main); kube.c is replaced
 * by an API server in memory (below) that answers from the input and
 * records what the loop writes.
 *
 * Input: lines. "N <json>" is the Node from now on, "C <json>" the GPU
 * node list, "L <json>" one list page (then the pods are listed), "S
 * <json>" a state annotation read back as at start-up, "E <json>" the
 * Events on the Node (then they are read, as the loop polls them), "Q"
 * switches to quarantine mode; any other line is one watch event. */
#include "fuzz.h"

#include <fcntl.h>

#include "nodeloop/loop.c"
#include "nodeloop/metrics.c"
#include "nodeloop/node.c"
#include "nodeloop/pods.c"
#include "nodeloop/watch.c"

#define NODE "gpu-1"
#define NS "ncclguard-watchdog"

static const char default_node[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"gpu-1\","
    "\"uid\":\"uid-gpu-1\",\"resourceVersion\":\"7\"},\"spec\":{\"taints\":"
    "[{\"key\":\"nvidia.com/gpu\",\"value\":\"present\",\"effect\":"
    "\"NoSchedule\"}]},\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"8\"}"
    ",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}";
static const char default_nodes[] =
    "{\"items\":[{\"metadata\":{\"name\":\"gpu-1\"}},{\"metadata\":{\"name\":"
    "\"gpu-2\"}},{\"metadata\":{\"name\":\"gpu-3\"}}]}";

/* The API server in memory: its answers, and what it was sent. */
static struct {
    const char *node, *nodes, *page, *events;
    size_t node_len, nodes_len, page_len, events_len;
    long pod_events; /* Events about Pods */
} api;

static void
answer(struct buf *resp, const char *p, size_t n)
{
    buf_init(resp, n + 1);
    FUZZ_ASSERT(buf_add(resp, p, n) == 0);
}

long
kube_request(const struct kube_client *kc, const char *method, const char *path,
             const char *content_type, const char *body, struct buf *resp,
             char *why, size_t wn)
{
    (void)kc;
    (void)content_type;
    buf_init(resp, 1);
    snprintf(why, wn, "no answer");
    /* Whatever the loop writes is JSON (json_dumps of what it built). */
    if (body != NULL) {
        json_t *v = json_loads(body, 0, NULL);

        FUZZ_ASSERT(v != NULL);
        if (strcmp(method, "POST") == 0 && strstr(path, "/events") != NULL &&
            strcmp(json_string_value(json_object_get(
                       json_object_get(v, "involvedObject"), "kind")),
                   "Pod") == 0)
            api.pod_events++;
        json_decref(v);
    }
    if (strcmp(method, "GET") == 0) {
        if (strcmp(path, "/api/v1/nodes/" NODE) == 0)
            answer(resp, api.node, api.node_len);
        else if (strncmp(path, "/api/v1/nodes?", 14) == 0)
            answer(resp, api.nodes, api.nodes_len);
        else if (strncmp(path, "/api/v1/namespaces/default/events?", 34) == 0 &&
                 api.events != NULL)
            answer(resp, api.events, api.events_len);
        else if (strncmp(path, "/api/v1/pods?", 13) == 0) {
            /* One page, then an empty last one. */
            answer(resp, api.page, api.page_len);
            api.page = "{\"items\":[]}";
            api.page_len = strlen(api.page);
        } else
            return 404;
        return 200;
    }
    answer(resp, "{}", 2);
    return strcmp(method, "POST") == 0 ? 201 : 200;
}

long
kube_watch(const struct kube_client *kc, const char *path, long max_ms,
           int (*on_line)(const char *line, size_t len, void *ud), void *ud,
           char *why, size_t wn)
{
    (void)kc;
    (void)path;
    (void)max_ms;
    (void)on_line;
    (void)ud;
    snprintf(why, wn, "not in the fuzz target");
    return -1;
}

static struct nl_opts opts;
static struct nl nl;
static int saved_stdout = -1, devnull = -1;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* The loop logs one JSON line per step: keep stdout for the replay
     * driver's own summary. */
    saved_stdout = dup(1);
    devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    return 0;
}

/* Whether s is ASCII: the API server validates names (DNS labels and
 * subdomains) and assigns uids, so it never sends other bytes there. */
static int
ascii(const char *s)
{
    for (; s != NULL && *s != '\0'; s++)
        if ((unsigned char)*s >= 0x80)
            return 0;
    return 1;
}

static int
names_ascii(json_t *pod)
{
    json_t *meta = json_object_get(pod, "metadata"), *cs;
    const char *lists[] = {"initContainerStatuses", "containerStatuses"};
    size_t i;

    if (!ascii(json_string_value(json_object_get(meta, "name"))) ||
        !ascii(json_string_value(json_object_get(meta, "namespace"))) ||
        !ascii(json_string_value(json_object_get(meta, "uid"))))
        return 0;
    for (int l = 0; l < 2; l++)
        json_array_foreach(
            json_object_get(json_object_get(pod, "status"), lists[l]), i, cs)
        {
            if (!ascii(json_string_value(json_object_get(cs, "name"))))
                return 0;
        }
    return 1;
}

static long
verdicts_total(void)
{
    long n = 0;

    for (int v = 0; v < 7; v++)
        for (int c = 0; c < 5; c++)
            n += nl.verdicts[v][c];
    return n;
}

/* What holds after every step. */
static void
check_loop(void)
{
    char state[8192];

    FUZZ_ASSERT(nl.npods >= 0 && nl.npods <= NL_MAX_PODS);
    FUZZ_ASSERT(nl.nseen >= 0 && nl.nseen <= NL_SEEN);
    FUZZ_ASSERT(nl.seen_next >= 0 && nl.seen_next < NL_SEEN);
    FUZZ_ASSERT(memchr(nl.rv, '\0', sizeof(nl.rv)) != NULL);
    FUZZ_ASSERT(nl.st.nev >= 0 && nl.st.nev <= NQ_MAX_EVIDENCE);
    FUZZ_ASSERT(nl.st.kind >= NQ_HEALTHY && nl.st.kind <= NQ_QUARANTINED);
    FUZZ_ASSERT(gpus_in_use(&nl) >= 0);
    /* The state can always be written back to the Node. */
    FUZZ_ASSERT(nq_encode(&nl.st, state, sizeof(state)) == 0);
}

/* A state annotation, read back as run() does at start-up: what decodes
 * encodes, and decodes again to the same state. */
static void
state_line(const char *p, size_t n)
{
    struct ng_error err;
    struct nq_node a, b;
    char enc[8192], enc2[8192];

    ng_error_clear(&err);
    if (nq_decode(p, n, &a, &err) != 0) {
        FUZZ_ASSERT(err.msg[0] != '\0');
        FUZZ_ASSERT(a.kind == NQ_HEALTHY && a.nev == 0);
        return;
    }
    FUZZ_ASSERT(a.nev >= 0 && a.nev <= NQ_MAX_EVIDENCE);
    FUZZ_ASSERT(nq_encode(&a, enc, sizeof(enc)) == 0);
    FUZZ_ASSERT(nq_decode(enc, strlen(enc), &b, &err) == 0);
    FUZZ_ASSERT(nq_encode(&b, enc2, sizeof(enc2)) == 0);
    if (strcmp(enc, enc2) != 0) {
        fprintf(stderr, "state round trip: %s then %s\n", enc, enc2);
        abort();
    }
    nl.st = a;
}

static void
one_line(const char *p, size_t n)
{
    if (n == 1 && p[0] == 'Q') {
        opts.pol.mode = NQ_QUARANTINE;
    } else if (n >= 2 && p[0] == 'N' && p[1] == ' ') {
        api.node = p + 2;
        api.node_len = n - 2;
    } else if (n >= 2 && p[0] == 'C' && p[1] == ' ') {
        api.nodes = p + 2;
        api.nodes_len = n - 2;
    } else if (n >= 2 && p[0] == 'E' && p[1] == ' ') {
        api.events = p + 2;
        api.events_len = n - 2;
        node_events_poll(&nl);
    } else if (n >= 2 && p[0] == 'S' && p[1] == ' ') {
        state_line(p + 2, n - 2);
    } else if (n >= 2 && p[0] == 'L' && p[1] == ' ') {
        api.page = p + 2;
        api.page_len = n - 2;
        (void)list_pods(&nl);
    } else {
        json_t *ev = json_loadb(p, n, 0, NULL);
        int counted = ev != NULL && names_ascii(json_object_get(ev, "object"));
        long before = verdicts_total(), events = api.pod_events;

        json_decref(ev);
        (void)on_event(p, n, &nl);
        /* Every verdict shown is one Event on its pod, never lost. */
        if (counted && verdicts_total() - before != api.pod_events - events) {
            fprintf(stderr, "%ld verdicts but %ld Events for: %.*s\n",
                    verdicts_total() - before, api.pod_events - events,
                    (int)(n > 300 ? 300 : n), p);
            abort();
        }
    }
    check_loop();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *end = p + size;

    if (size > (1u << 20))
        return 0;
    memset(&opts, 0, sizeof(opts));
    opts.node = NODE;
    opts.ns = NS;
    opts.image = "rc:test";
    opts.gpu_resource = "nvidia.com/gpu";
    opts.gpu_selector = "nvidia.com/gpu.present=true";
    opts.metrics_fd = -1;
    opts.watch_s = 1;
    opts.heartbeat_ms = 3600 * 1000;
    opts.tick_ms = 0; /* a tick after every event: the Node is read too */
    opts.validation_timeout_s = 60;
    nq_policy_defaults(&opts.pol);
    memset(&nl, 0, sizeof(nl));
    nl.o = &opts;
    pthread_mutex_init(&nl.mu, NULL);
    nq_node_init(&nl.st);
    memset(&api, 0, sizeof(api));
    api.node = default_node;
    api.node_len = strlen(default_node);
    api.nodes = default_nodes;
    api.nodes_len = strlen(default_nodes);
    api.page = "{\"items\":[]}";
    api.page_len = strlen(api.page);
    fflush(stdout);
    if (devnull >= 0)
        dup2(devnull, 1);
    while (p < end) {
        const char *nlp = memchr(p, '\n', (size_t)(end - p));
        size_t n = nlp != NULL ? (size_t)(nlp - p) : (size_t)(end - p);

        one_line(p, n);
        p += n + (nlp != NULL);
    }
    fflush(stdout);
    if (saved_stdout >= 0)
        dup2(saved_stdout, 1);
    pthread_mutex_destroy(&nl.mu);
    return 0;
}
