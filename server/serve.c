/* ncclguard serve: flags and environment, start-up, signals, drain. */
#include "cli/cmd.h"

#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "base/file.h"
#include "server/http.h"
#include "admission/jsonmem.h"
#include "server/log.h"
#include "server/reload.h"
#include "server/tlspair.h"
#include "version.h"

/* How long SIGTERM waits for requests in flight before closing anyway;
 * below Kubernetes' default 30 s grace period. */
#define DRAIN_TIMEOUT_MS 25000

enum opt_id {
    OPT_LISTEN = 1,
    OPT_CERT,
    OPT_KEY,
    OPT_POLICY,
    OPT_CLIENT_CA,
    OPT_NAMESPACE,
    OPT_MAX_BODY,
    OPT_THREADS,
    OPT_CONNECTION_TIMEOUT,
    OPT_MAX_CONNECTIONS,
    OPT_PER_IP_CONNECTIONS,
    OPT_RELOAD_INTERVAL,
    OPT_HEADER_TIMEOUT,
    OPT_MIN_BODY_RATE,
    OPT_MEMORY_LIMIT,
    OPT_LOG_LEVEL,
    OPT_RINGCHECK_IMAGE,
    OPT_HELP,
    OPT_COUNT
};

static const struct {
    const char *flag;
    const char *env;
    const char *arg;
    const char *help;
} opt_doc[OPT_COUNT] = {
    [OPT_LISTEN] = {"listen", "NCCLGUARD_LISTEN", "ADDR",
                    "HOST:PORT, [V6]:PORT or :PORT (default :8443; port 0 "
                    "picks a free one)"},
    [OPT_CERT] = {"cert", "NCCLGUARD_CERT", "FILE",
                  "serving certificate chain, PEM (required)"},
    [OPT_KEY] = {"key", "NCCLGUARD_KEY", "FILE",
                 "its private key, PEM (required)"},
    [OPT_POLICY] = {"policy", "NCCLGUARD_POLICY", "FILE",
                    "policy YAML (required)"},
    [OPT_CLIENT_CA] = {"client-ca", "NCCLGUARD_CLIENT_CA", "FILE",
                       "require client certificates signed by this CA"},
    [OPT_NAMESPACE] = {"namespace", "NCCLGUARD_NAMESPACE", "NS",
                       "the webhook's own namespace, never mutated "
                       "(default $POD_NAMESPACE)"},
    [OPT_MAX_BODY] = {"max-body", "NCCLGUARD_MAX_BODY", "BYTES",
                      "largest request body; Ki/Mi suffixes allowed "
                      "(default 4Mi)"},
    [OPT_THREADS] = {"threads", "NCCLGUARD_THREADS", "N",
                     "worker threads (default: the CPUs this process may "
                     "use)"},
    [OPT_CONNECTION_TIMEOUT] = {"connection-timeout",
                                "NCCLGUARD_CONNECTION_TIMEOUT", "S",
                                "close connections idle this long "
                                "(default 30; 0 = never)"},
    [OPT_MAX_CONNECTIONS] = {"max-connections", "NCCLGUARD_MAX_CONNECTIONS",
                             "N", "open connections at most (default 1024)"},
    [OPT_PER_IP_CONNECTIONS] = {"per-ip-connections",
                                "NCCLGUARD_PER_IP_CONNECTIONS", "N",
                                "open connections per client address "
                                "(default 128; 0 = no limit)"},
    [OPT_RELOAD_INTERVAL] = {"reload-interval", "NCCLGUARD_RELOAD_INTERVAL",
                             "S",
                             "also re-read policy and certificate every S "
                             "seconds (default 10; 0 = off)"},
    [OPT_HEADER_TIMEOUT] = {"header-timeout", "NCCLGUARD_HEADER_TIMEOUT", "S",
                            "TLS handshake plus request headers must finish "
                            "within S seconds of connecting (default 10; 0 = "
                            "no limit)"},
    [OPT_MIN_BODY_RATE] = {"min-body-rate", "NCCLGUARD_MIN_BODY_RATE", "BYTES",
                           "a body must then arrive at BYTES a second "
                           "(default 64Ki; 0 = no limit)"},
    [OPT_MEMORY_LIMIT] = {"memory-limit", "NCCLGUARD_MEMORY_LIMIT", "BYTES",
                          "memory figure the body budget derives from; Ki, "
                          "Mi, Gi allowed (default: the cgroup's memory.max)"},
    [OPT_LOG_LEVEL] = {"log-level", "NCCLGUARD_LOG_LEVEL", "LEVEL",
                       "debug, info, warn or error (default info)"},
    [OPT_RINGCHECK_IMAGE] = {"ringcheck-image", "NCCLGUARD_RINGCHECK_IMAGE",
                             "IMAGE",
                             "ring-check image where the policy names none "
                             "(default ghcr.io/ncclguard/"
                             "ncclguard-ringcheck:0.1.0)"},
    [OPT_HELP] = {"help", NULL, NULL, "show this help"},
};

static void
usage(FILE *out)
{
    fprintf(out, "usage: ncclguard serve --cert FILE --key FILE --policy FILE "
                 "[options]\n\nRuns the HTTPS admission webhook (POST /mutate, "
                 "GET /healthz, /readyz, /metrics).\n\noptions (each also "
                 "read from the environment variable shown):\n");
    for (int i = 1; i < OPT_COUNT; i++) {
        char left[64];
        if (opt_doc[i].arg != NULL)
            snprintf(left, sizeof(left), "--%s %s", opt_doc[i].flag,
                     opt_doc[i].arg);
        else
            snprintf(left, sizeof(left), "--%s", opt_doc[i].flag);
        fprintf(out, "  %-28s %s\n", left, opt_doc[i].help);
        if (opt_doc[i].env != NULL)
            fprintf(out, "  %-28s   env %s\n", "", opt_doc[i].env);
    }
    fprintf(out, "\nSIGHUP re-reads the policy and the certificate; SIGTERM "
                 "stops accepting,\nfinishes the requests in flight and "
                 "exits 0.\n");
}

/* Where each value came from, so that an error names the flag or the
 * environment variable the user set: "--log-level " or
 * "NCCLGUARD_LOG_LEVEL=". Filled by cmd_serve before any value is parsed. */
static char opt_src[OPT_COUNT][48];

static const char *
src(int i)
{
    return opt_src[i];
}

/* Parses a non-negative integer no larger than max; label is src(i). */
static int
parse_uint(const char *label, const char *s, unsigned long long max,
           unsigned long long *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    if (s == NULL || *s < '0' || *s > '9')
        goto bad;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max)
        goto bad;
    *out = v;
    return 0;
bad:
    fprintf(stderr,
            "ncclguard serve: %s%s: expected a whole number from 0 to "
            "%llu\n",
            label, s ? s : "", max);
    return -1;
}

/* Parses BYTES with an optional Ki, Mi or Gi suffix for option id (its
 * label is src(id)): at least min, at most max bytes. */
static int
parse_bytes(int id, const char *s, unsigned long long min,
            unsigned long long max, unsigned long long *out)
{
    char num[32];
    size_t n = strlen(s);
    unsigned long long mult = 1, v;

    if (n > 2 && strcmp(s + n - 2, "Ki") == 0) {
        mult = 1024;
        n -= 2;
    } else if (n > 2 && strcmp(s + n - 2, "Mi") == 0) {
        mult = 1024 * 1024;
        n -= 2;
    } else if (n > 2 && strcmp(s + n - 2, "Gi") == 0) {
        mult = 1024 * 1024 * 1024;
        n -= 2;
    }
    if (n == 0 || n >= sizeof(num) || strspn(s, "0123456789") != n) {
        fprintf(stderr,
                "ncclguard serve: %s%s: expected bytes, "
                "e.g. 4194304 or 4Mi\n",
                src(id), s);
        return -1;
    }
    memcpy(num, s, n);
    num[n] = '\0';
    if (parse_uint(src(id), num, max / mult, &v) != 0)
        return -1;
    if (v * mult < min) {
        fprintf(stderr, "ncclguard serve: %s%s: must be at least %llu\n",
                src(id), s, min);
        return -1;
    }
    *out = v * mult;
    return 0;
}

/*
 * The memory limit of this process's cgroup: memory.max (cgroup v2, what
 * a Kubernetes memory limit sets), else memory.limit_in_bytes (v1).
 * Returns 0 when there is none ("max", or v1's huge "unlimited" value).
 */
static unsigned long long
cgroup_memory_limit(void)
{
    static const char *const files[] = {
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    unsigned long long v = 0;

    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char text[64], *end;
        FILE *f = fopen(files[i], "re");
        if (f == NULL)
            continue;
        if (fgets(text, sizeof(text), f) != NULL) {
            text[strcspn(text, "\n")] = '\0';
            errno = 0;
            v = strtoull(text, &end, 10);
            if (errno != 0 || end == text || *end != '\0' || v >= (1ULL << 60))
                v = 0;
        }
        fclose(f);
        return v;
    }
    return 0;
}

/*
 * The CPUs this process may use: its affinity mask, lowered to a cgroup v2
 * CPU quota (a Kubernetes CPU limit) when there is one, so that a pod
 * limited to 1 CPU on a 64-core node does not start 64 workers.
 */
static unsigned int
cpu_count(void)
{
    cpu_set_t set;
    long n;
    unsigned int cpus;
    FILE *f;

    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        cpus = (unsigned int)CPU_COUNT(&set);
    else {
        n = sysconf(_SC_NPROCESSORS_ONLN);
        cpus = n > 0 ? (unsigned int)n : 1;
    }
    f = fopen("/sys/fs/cgroup/cpu.max", "re");
    if (f != NULL) {
        char quota[32];
        unsigned long long period = 0;
        if (fscanf(f, "%31s %llu", quota, &period) == 2 &&
            strcmp(quota, "max") != 0 && period > 0) {
            char *end;
            unsigned long long q = strtoull(quota, &end, 10);
            if (*end == '\0' && q > 0) {
                unsigned long long limit = (q + period - 1) / period;
                if (limit < cpus)
                    cpus = (unsigned int)limit;
            }
        }
        fclose(f);
    }
    return cpus;
}

/* Reads the client CA bundle and checks it holds at least one certificate. */
static char *
read_client_ca(const char *path)
{
    struct ng_error e;
    size_t len = 0;
    char *pem;
    gnutls_x509_crt_t *crts = NULL;
    unsigned int n = 0;
    gnutls_datum_t d;

    ng_error_clear(&e);
    pem = file_read(path, TLSPAIR_MAX_PEM, &len, &e);
    if (pem == NULL) {
        log_error_write(LOG_ERROR, "cannot read the client CA", "path", path,
                        "%s", e.msg);
        return NULL;
    }
    d.data = (unsigned char *)pem;
    d.size = (unsigned int)len;
    if (gnutls_x509_crt_list_import2(&crts, &n, &d, GNUTLS_X509_FMT_PEM, 0) <
            0 ||
        n == 0) {
        log_error_write(LOG_ERROR, "cannot load the client CA", "path", path,
                        "no PEM certificate in %s", path);
        free(pem);
        return NULL;
    }
    for (unsigned int i = 0; i < n; i++)
        gnutls_x509_crt_deinit(crts[i]);
    gnutls_free(crts);
    return pem;
}

int
cmd_serve(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"cert", required_argument, NULL, OPT_CERT},
        {"key", required_argument, NULL, OPT_KEY},
        {"policy", required_argument, NULL, OPT_POLICY},
        {"client-ca", required_argument, NULL, OPT_CLIENT_CA},
        {"namespace", required_argument, NULL, OPT_NAMESPACE},
        {"max-body", required_argument, NULL, OPT_MAX_BODY},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"connection-timeout", required_argument, NULL, OPT_CONNECTION_TIMEOUT},
        {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
        {"per-ip-connections", required_argument, NULL, OPT_PER_IP_CONNECTIONS},
        {"reload-interval", required_argument, NULL, OPT_RELOAD_INTERVAL},
        {"header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT},
        {"min-body-rate", required_argument, NULL, OPT_MIN_BODY_RATE},
        {"memory-limit", required_argument, NULL, OPT_MEMORY_LIMIT},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"ringcheck-image", required_argument, NULL, OPT_RINGCHECK_IMAGE},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0}};
    const char *val[OPT_COUNT] = {0};
    struct http_config hc;
    struct reload_config rc;
    struct reload *reload = NULL;
    struct http_server *srv = NULL;
    struct ng_error e;
    char *client_ca = NULL;
    unsigned long long n, memory_limit = 0;
    enum log_level level = LOG_INFO;
    sigset_t sigs;
    int status = 1, opt;

    /* Before any thread uses jansson: admissions allocate their JSON
     * values from a per-thread arena (see admission/jsonmem.h). */
    jsonmem_install();

    /* The environment first, then flags on top. */
    for (int i = 1; i < OPT_COUNT; i++) {
        snprintf(opt_src[i], sizeof(opt_src[i]), "--%s ", opt_doc[i].flag);
        if (opt_doc[i].env != NULL) {
            const char *v = getenv(opt_doc[i].env);
            if (v != NULL && *v != '\0') {
                val[i] = v;
                snprintf(opt_src[i], sizeof(opt_src[i]), "%s=", opt_doc[i].env);
            }
        }
    }
    if (val[OPT_NAMESPACE] == NULL) {
        const char *v = getenv("POD_NAMESPACE");
        if (v != NULL && *v != '\0')
            val[OPT_NAMESPACE] = v;
    }
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (opt == 'h' || opt == OPT_HELP) {
            usage(stdout);
            return 0;
        }
        if (opt == '?' || opt == ':') {
            if (optopt != 0)
                fprintf(stderr, "ncclguard serve: unknown option -%c\n",
                        optopt);
            else
                fprintf(stderr,
                        "ncclguard serve: unknown option or missing "
                        "value: %s\n",
                        argv[optind - 1]);
            usage(stderr);
            return 2;
        }
        val[opt] = optarg;
        snprintf(opt_src[opt], sizeof(opt_src[opt]), "--%s ",
                 opt_doc[opt].flag);
    }
    if (optind < argc) {
        fprintf(stderr, "ncclguard serve: unexpected argument '%s'\n",
                argv[optind]);
        return 2;
    }
    for (int i = OPT_CERT; i <= OPT_POLICY; i++) {
        if (val[i] == NULL) {
            fprintf(stderr, "ncclguard serve: --%s is required (or set %s)\n",
                    opt_doc[i].flag, opt_doc[i].env);
            return 2;
        }
    }

    memset(&hc, 0, sizeof(hc));
    ng_error_clear(&e);
    if (http_listen_parse(val[OPT_LISTEN] ? val[OPT_LISTEN] : ":8443", &hc,
                          &e) != 0) {
        fprintf(stderr, "ncclguard serve: %.*s: %s\n",
                (int)strlen(src(OPT_LISTEN)) - 1, src(OPT_LISTEN), e.msg);
        return 2;
    }
    hc.max_body = 4 * 1024 * 1024;
    if (val[OPT_MAX_BODY] != NULL) {
        if (parse_bytes(OPT_MAX_BODY, val[OPT_MAX_BODY], 1024, 1ULL << 30, &n) !=
            0)
            return 2;
        hc.max_body = (size_t)n;
    }
    hc.threads = cpu_count();
    if (val[OPT_THREADS] != NULL) {
        if (parse_uint(src(OPT_THREADS), val[OPT_THREADS], 256, &n) != 0)
            return 2;
        if (n == 0) {
            fprintf(stderr, "ncclguard serve: --threads must be at least 1\n");
            return 2;
        }
        hc.threads = (unsigned int)n;
    }
    hc.connection_timeout = 30;
    if (val[OPT_CONNECTION_TIMEOUT] != NULL) {
        if (parse_uint(src(OPT_CONNECTION_TIMEOUT), val[OPT_CONNECTION_TIMEOUT],
                       86400, &n) != 0)
            return 2;
        hc.connection_timeout = (unsigned int)n;
    }
    hc.max_connections = 1024;
    /* Without a per-address cap, one client holding idle connections
     * (slowloris) starves the pool for everyone: make faults measured a
     * 24 s median wait for a well-behaved client at the default 1024. */
    hc.per_ip_connections = 128;
    if (val[OPT_MAX_CONNECTIONS] != NULL) {
        if (parse_uint(src(OPT_MAX_CONNECTIONS), val[OPT_MAX_CONNECTIONS],
                       1000000, &n) != 0)
            return 2;
        if (n == 0) {
            fprintf(stderr,
                    "ncclguard serve: --max-connections must be at least 1\n");
            return 2;
        }
        hc.max_connections = (unsigned int)n;
    }
    if (val[OPT_PER_IP_CONNECTIONS] != NULL) {
        if (parse_uint(src(OPT_PER_IP_CONNECTIONS), val[OPT_PER_IP_CONNECTIONS],
                       1000000, &n) != 0)
            return 2;
        hc.per_ip_connections = (unsigned int)n;
    }
    hc.header_timeout = 10;
    if (val[OPT_HEADER_TIMEOUT] != NULL) {
        if (parse_uint(src(OPT_HEADER_TIMEOUT), val[OPT_HEADER_TIMEOUT], 3600, &n) !=
            0)
            return 2;
        hc.header_timeout = (unsigned int)n;
    }
    hc.min_body_rate = 64 * 1024;
    if (val[OPT_MIN_BODY_RATE] != NULL) {
        if (parse_bytes(OPT_MIN_BODY_RATE, val[OPT_MIN_BODY_RATE], 0, 1ULL << 30,
                        &n) != 0)
            return 2;
        hc.min_body_rate = (size_t)n;
    }
    memory_limit = cgroup_memory_limit();
    if (val[OPT_MEMORY_LIMIT] != NULL) {
        if (parse_bytes(OPT_MEMORY_LIMIT, val[OPT_MEMORY_LIMIT], 1024 * 1024,
                        1ULL << 50, &memory_limit) != 0)
            return 2;
    }
    hc.body_budget = http_body_budget(memory_limit, hc.threads, hc.max_body);
    memset(&rc, 0, sizeof(rc));
    rc.interval_seconds = 10;
    if (val[OPT_RELOAD_INTERVAL] != NULL) {
        if (parse_uint(src(OPT_RELOAD_INTERVAL), val[OPT_RELOAD_INTERVAL],
                       86400, &n) != 0)
            return 2;
        rc.interval_seconds = (unsigned int)n;
    }
    if (val[OPT_LOG_LEVEL] != NULL &&
        log_level_parse(val[OPT_LOG_LEVEL], &level) != 0) {
        fprintf(stderr,
                "ncclguard serve: %s%s: expected debug, info, warn "
                "or error\n",
                src(OPT_LOG_LEVEL), val[OPT_LOG_LEVEL]);
        return 2;
    }
    log_level_set(level);
    if (val[OPT_RINGCHECK_IMAGE] != NULL &&
        policy_ringcheck_image_set_default(val[OPT_RINGCHECK_IMAGE]) != 0) {
        fprintf(stderr,
                "ncclguard serve: %s%s: expected an image reference without "
                "whitespace, at most %d characters\n",
                src(OPT_RINGCHECK_IMAGE), val[OPT_RINGCHECK_IMAGE],
                POLICY_MAX_IMAGE);
        return 2;
    }
    hc.own_namespace = val[OPT_NAMESPACE];
    rc.policy_path = val[OPT_POLICY];
    rc.cert_path = val[OPT_CERT];
    rc.key_path = val[OPT_KEY];

    /* Signals are taken synchronously by this thread only; every thread
     * started below inherits the blocked mask. */
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    if (val[OPT_CLIENT_CA] != NULL) {
        client_ca = read_client_ca(val[OPT_CLIENT_CA]);
        if (client_ca == NULL)
            goto done;
        hc.client_ca_pem = client_ca;
    }

    ng_error_clear(&e);
    reload = reload_new(&rc, &e);
    if (reload == NULL) {
        log_error_write(LOG_ERROR, "cannot start", NULL, NULL, "%s", e.msg);
        goto done;
    }
    ng_error_clear(&e);
    srv = http_server_start(&hc, reload, &e);
    if (srv == NULL) {
        log_error_write(LOG_ERROR, "cannot start", "listen",
                        val[OPT_LISTEN] ? val[OPT_LISTEN] : ":8443", "%s",
                        e.msg);
        goto done;
    }
    ng_error_clear(&e);
    if (reload_start(reload, &e) != 0) {
        log_error_write(LOG_ERROR, "cannot start", NULL, NULL, "%s", e.msg);
        goto done;
    }
    {
        struct policy_snap *ps = reload_policy_acquire(reload);
        struct cert_snap *cs = reload_cert_acquire(reload);
        json_t *f = json_pack(
            "{s:s,s:s,s:i,s:i,s:I,s:I,s:I,s:s,s:s,s:I,s:b}", "version",
            NCCLGUARD_VERSION, "listen",
            val[OPT_LISTEN] ? val[OPT_LISTEN] : ":8443", "port",
            (int)http_server_port(srv), "threads", (int)hc.threads, "max_body",
            (json_int_t)hc.max_body, "memory_limit", (json_int_t)memory_limit,
            "body_budget", (json_int_t)hc.body_budget, "policy", rc.policy_path,
            "policy_hash", ps->hash, "cert_not_after",
            (json_int_t)tlspair_not_after(cs->pair), "client_ca",
            client_ca != NULL);
        log_fields_write(LOG_INFO, "listening", f);
        json_decref(f);
        reload_policy_release(ps);
        reload_cert_release(cs);
    }

    for (;;) {
        int sig = sigwaitinfo(&sigs, NULL);
        if (sig < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (sig == SIGHUP) {
            log_fields_write(LOG_INFO,
                             "SIGHUP: re-reading policy and "
                             "certificate",
                             NULL);
            reload_request(reload);
            continue;
        }
        break;
    }
    log_fields_write(LOG_INFO,
                     "stopping: no new connections, finishing "
                     "requests in flight",
                     NULL);
    http_server_quiesce(srv);
    if (!http_server_drain(srv, DRAIN_TIMEOUT_MS))
        log_fields_write(LOG_WARN, "drain timed out; closing connections",
                         NULL);
    status = 0;
done:
    http_server_stop(srv);
    reload_free(reload);
    free(client_ca);
    if (status == 0)
        log_fields_write(LOG_INFO, "stopped", NULL);
    return status;
}
