/* ncclguard-nodeloop: the node loop's command line (docs/nodeloop.md). */
#include "nodeloop/loop.h"

#include "version.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/opts.h"
#include "contract/wdspec.h"
#include "nodeloop/nodeclass.h"
#include "nodeloop/nodestate.h"

/* --- options ------------------------------------------------------------ */

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: ncclguard-nodeloop [options]\n"
            "  --api-server URL       default from KUBERNETES_SERVICE_HOST\n"
            "  --token-file PATH      service-account token\n"
            "  --ca-file PATH         CA bundle for the API server\n"
            "  --node-name NAME       this node (env NODE_NAME)\n"
            "  --namespace NS         where validation pods go (env "
            "POD_NAMESPACE)\n"
            "  --image IMAGE          the ring-check image for validation\n"
            "  --gpu-resource NAME    default nvidia.com/gpu\n"
            "  --gpu-nodes SELECTOR   label selector of GPU nodes (breaker)\n"
            "  --policy FILE          the webhook's policy: its "
            "defaults.quarantine,\n"
            "                         read again when the file changes or on "
            "SIGHUP\n"
            "  --mode observe|quarantine   (each quarantine flag overrides "
            "the policy)\n"
            "  --threshold K          counted verdicts (from >= 2 pods)\n"
            "  --window D --cooldown D --cooldown-max D --expiry D (0 never)\n"
            "  --max-share PERCENT    breaker share of GPU nodes (10)\n"
            "  --watch-timeout D      server-side watch timeout (5m)\n"
            "  --tick D               periodic step at most this often (10s)\n"
            "  --heartbeat D          condition heartbeat (5m)\n"
            "  --event-poll D         read this Node's evidence Events (1m)\n"
            "  --validation-timeout S ring-check --timeout (120)\n"
            "  --metrics-port N       serve /metrics on 0.0.0.0:N (0 off)\n"
            "  --metrics-file PATH    also write the metrics there\n"
            "  --run-for D            stop after this long (tests)\n"
            "  --classify EXIT FILE   classify a termination message, print\n"
            "                         the result as JSON, exit\n");
}

/* Reads a duration option into *out (flags: WD_DURATION_*); prints what
 * is wrong and returns -1 when it is not one. */
static int
dur(const char *name, const char *v, int64_t *out, unsigned flags)
{
    struct ng_error e;

    if (wd_duration_arg(v, flags | WD_DURATION_HOURS, out, &e) != 0) {
        fprintf(stderr, "ncclguard-nodeloop: --%s: %s\n", name, e.msg);
        return -1;
    }
    return 0;
}

static int
classify_file(const char *exit_s, const char *path)
{
    char buf[8192];
    struct nc_result r;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    size_t n;
    char *end;
    long ex = strtol(exit_s, &end, 10);
    json_t *o;
    char *text;

    if (*end != '\0' || f == NULL) {
        fprintf(stderr, "ncclguard-nodeloop: --classify: bad exit "
                        "code or unreadable file\n");
        return 2;
    }
    n = fread(buf, 1, sizeof(buf), f);
    if (f != stdin)
        fclose(f);
    if (nc_classify_hang_report(buf, n, &r) != 0)
        nc_classify_ringcheck((int)ex, buf, n, &r);
    o = json_pack("{s:s,s:s,s:s,s:i,s:i,s:s,s:s}", "verdict",
                  nc_verdict_name(r.verdict), "class", nc_class_name(r.cls),
                  "reason", r.reason, "code", r.code, "phase", r.phase, "cure",
                  r.cure, "summary", r.summary);
    if (r.cls == NC_CLASS_PAIR) {
        /* The pods on either side of the failing pairs: their nodes get
         * the pair Event. */
        char hosts[NC_PAIR_HOSTS][NC_HOST_MAX];
        int nh = nc_pair_hosts(buf, n, hosts, NC_PAIR_HOSTS);
        json_t *arr = json_array();

        for (int i = 0; i < nh; i++)
            json_array_append_new(arr, json_string(hosts[i]));
        json_object_set_new(o, "pair_hosts", arr);
    }
    text = json_dumps(o, JSON_COMPACT);
    printf("%s\n", text);
    free(text);
    json_decref(o);
    return 0;
}

static int
metrics_listen(struct nl_opts *o)
{
    struct sockaddr_in a;
    socklen_t al = sizeof(a);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

    if (s < 0)
        return -1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)o->metrics_port);
    if (bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(s, 16) != 0) {
        close(s);
        return -1;
    }
    if (o->port_file != NULL &&
        getsockname(s, (struct sockaddr *)&a, &al) == 0) {
        FILE *f = fopen(o->port_file, "w");
        if (f != NULL) {
            fprintf(f, "%d\n", ntohs(a.sin_port));
            fclose(f);
        }
    }
    return s;
}

/* Returns the exit status: 0 after --run-for or a --classify that printed,
 * 2 on bad usage, 1 when it cannot start (no node name, no API server, a
 * policy that does not load). One thread lists and watches, one runs the
 * step on a timer, and a third serves /metrics when asked. */
int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"api-server", required_argument, NULL, 'A'},
        {"policy", required_argument, NULL, 'p'},
        {"token-file", required_argument, NULL, 'T'},
        {"ca-file", required_argument, NULL, 'C'},
        {"node-name", required_argument, NULL, 'N'},
        {"namespace", required_argument, NULL, 'n'},
        {"image", required_argument, NULL, 'i'},
        {"gpu-resource", required_argument, NULL, 'g'},
        {"gpu-nodes", required_argument, NULL, 'G'},
        {"mode", required_argument, NULL, 'm'},
        {"threshold", required_argument, NULL, 'k'},
        {"window", required_argument, NULL, 'w'},
        {"cooldown", required_argument, NULL, 'c'},
        {"cooldown-max", required_argument, NULL, 'x'},
        {"expiry", required_argument, NULL, 'e'},
        {"max-share", required_argument, NULL, 's'},
        {"watch-timeout", required_argument, NULL, 'W'},
        {"tick", required_argument, NULL, 't'},
        {"event-poll", required_argument, NULL, 'E'},
        {"heartbeat", required_argument, NULL, 'H'},
        {"validation-timeout", required_argument, NULL, 'V'},
        {"metrics-port", required_argument, NULL, 'P'},
        {"metrics-file", required_argument, NULL, 'M'},
        {"port-file", required_argument, NULL, 'f'},
        {"run-for", required_argument, NULL, 'R'},
        {"classify", required_argument, NULL, 'K'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    static struct nl nl;
    static struct nl_opts o;
    static char api[300];
    int64_t ms;
    int c, rc;

    memset(&o, 0, sizeof(o));
    nq_policy_defaults(&o.pol);
    nq_policy_defaults(&o.flag_pol);
    o.kc.timeout_ms = 10000;
    /* Named in the audit log and in managedFields (finding 10 of the
     * real-server review): the apiserver records fieldManager per write,
     * and falls back to the User-Agent's program name without one. */
    o.kc.user_agent = "ncclguard-node-loop/" NCCLGUARD_VERSION;
    o.kc.field_manager = "ncclguard-node-loop";
    o.node = getenv("NODE_NAME");
    o.ns = getenv("POD_NAMESPACE");
    o.image = "ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0";
    o.gpu_resource = "nvidia.com/gpu";
    o.gpu_selector = "nvidia.com/gpu.present=true";
    o.watch_s = 300;
    o.tick_ms = 10000;
    o.event_poll_ms = 60000;
    o.heartbeat_ms = 300000;
    o.validation_timeout_s = 120;
    if (opts_in_cluster_api(api, sizeof(api)) != NULL) {
        o.kc.api_server = api;
        o.kc.token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
        o.kc.ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
    }
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end;
        double d;
        long v;

        switch (c) {
        case 'A':
            o.kc.api_server = optarg;
            break;
        case 'p':
            o.policy_path = optarg;
            break;
        case 'T':
            o.kc.token_file = optarg;
            break;
        case 'C':
            o.kc.ca_file = optarg;
            break;
        case 'N':
            o.node = optarg;
            break;
        case 'n':
            o.ns = optarg;
            break;
        case 'i':
            o.image = optarg;
            break;
        case 'g':
            o.gpu_resource = optarg;
            break;
        case 'G':
            o.gpu_selector = optarg;
            break;
        case 'm':
            o.flags_set |= NLF_MODE;
            if (strcmp(optarg, "observe") == 0)
                o.flag_pol.mode = NQ_OBSERVE;
            else if (strcmp(optarg, "quarantine") == 0)
                o.flag_pol.mode = NQ_QUARANTINE;
            else {
                fprintf(stderr, "ncclguard-nodeloop: --mode: "
                                "expected observe or quarantine\n");
                return 2;
            }
            break;
        case 'k':
        case 'V':
        case 'P': {
            const long lo = c == 'P' ? 0 : 1, hi = c == 'P' ? 65535 : 3600;

            if (opts_long(optarg, lo, hi, &v) != 0) {
                fprintf(stderr,
                        "ncclguard-nodeloop: --%s must be a whole number "
                        "from %ld to %ld, got \"%s\"\n",
                        c == 'k'   ? "threshold"
                        : c == 'V' ? "validation-timeout"
                                   : "metrics-port",
                        lo, hi, optarg);
                return 2;
            }
            if (c == 'k') {
                o.flag_pol.threshold = (int)v;
                o.flags_set |= NLF_THRESHOLD;
            } else if (c == 'V')
                o.validation_timeout_s = (int)v;
            else
                o.metrics_port = (int)v;
            break;
        }
        case 'w':
            if (dur("window", optarg, &o.flag_pol.window_ms, 0) != 0)
                return 2;
            o.flags_set |= NLF_WINDOW;
            break;
        case 'c':
            if (dur("cooldown", optarg, &o.flag_pol.cooldown_ms, 0) != 0)
                return 2;
            o.flags_set |= NLF_COOLDOWN;
            break;
        case 'x':
            if (dur("cooldown-max", optarg, &o.flag_pol.cooldown_max_ms, 0) !=
                0)
                return 2;
            o.flags_set |= NLF_COOLDOWN_MAX;
            break;
        case 'e':
            if (dur("expiry", optarg, &o.flag_pol.expiry_ms,
                    WD_DURATION_ZERO) != 0)
                return 2;
            o.flags_set |= NLF_EXPIRY;
            break;
        case 's':
            d = strtod(optarg, &end);
            if (*end != '\0' || !(d >= 0 && d <= 100)) {
                fprintf(stderr, "ncclguard-nodeloop: --max-share: "
                                "a percentage 0-100\n");
                return 2;
            }
            o.flag_pol.max_share_permille = (int)(d * 10 + 0.5);
            o.flags_set |= NLF_SHARE;
            break;
        case 'W':
            if (dur("watch-timeout", optarg, &ms, 0) != 0)
                return 2;
            o.watch_s = ms / 1000 > 0 ? (long)(ms / 1000) : 1;
            break;
        case 't':
            if (dur("tick", optarg, &o.tick_ms, 0) != 0)
                return 2;
            break;
        case 'E':
            if (dur("event-poll", optarg, &o.event_poll_ms, 0) != 0)
                return 2;
            break;
        case 'H':
            if (dur("heartbeat", optarg, &o.heartbeat_ms, 0) != 0)
                return 2;
            break;
        case 'M':
            o.metrics_file = optarg;
            break;
        case 'f':
            o.port_file = optarg;
            break;
        case 'R':
            if (dur("run-for", optarg, &o.run_ms, 0) != 0)
                return 2;
            break;
        case 'K':
            if (optind >= argc) {
                fprintf(stderr, "ncclguard-nodeloop: --classify "
                                "EXIT FILE\n");
                return 2;
            }
            return classify_file(optarg, argv[optind]);
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (o.node == NULL || o.node[0] == '\0' || o.kc.api_server == NULL ||
        o.ns == NULL || o.ns[0] == '\0') {
        fprintf(stderr, "ncclguard-nodeloop: needs --node-name, "
                        "--namespace and an API server\n");
        return 1;
    }
    policy_apply(&o, NULL);
    memset(&nl, 0, sizeof(nl));
    nl.o = &o;
    nq_node_init(&nl.st);
    pthread_mutex_init(&nl.mu, NULL);
    pthread_mutex_init(&nl.step_mu, NULL);
    /* As the webhook: no start without a policy that loads. */
    if (policy_reload(&nl, 1) != 0) {
        fprintf(stderr,
                "ncclguard-nodeloop: the policy %s does "
                "not load (above)\n",
                o.policy_path);
        return 1;
    }
    {
        struct sigaction sa;

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_hup;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGHUP, &sa, NULL);
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    if (o.metrics_port > 0 || o.port_file != NULL) {
        pthread_t th;
        int s = metrics_listen(&o);

        if (s < 0) {
            fprintf(stderr, "ncclguard-nodeloop: cannot listen on "
                            "the metrics port\n");
            curl_global_cleanup();
            return 1;
        }
        o.metrics_fd = s;
        if (pthread_create(&th, NULL, metrics_serve, &nl) == 0)
            pthread_detach(th);
    }
    rc = run(&nl);
    curl_global_cleanup();
    return rc;
}
