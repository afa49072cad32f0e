/* ncclguard serve: the option table, then parse, then run (start-up,
 * signals, drain). */
#include "server/serve.h"

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

#include "admission/jsonmem.h"
#include "base/file.h"
#include "cli/cmd.h"
#include "policy/policy.h"
#include "server/http.h"
#include "server/log.h"
#include "server/reload.h"
#include "server/tlspair.h"
#include "version.h"

/* How long SIGTERM waits for requests in flight before closing anyway;
 * below Kubernetes' default 30 s grace period. */
#define DRAIN_TIMEOUT_MS 25000

#define KI 1024ULL
#define MI (1024ULL * KI)
#define GI (1024ULL * MI)

/* The options, by their index in opts[]. */
enum opt_id {
    OPT_LISTEN,
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
    OPT_N
};

static unsigned long long default_threads(void);
static unsigned long long default_memory_limit(void);

/*
 * Every flag of `ncclguard serve`, its environment variable, default and
 * bounds: the one place they are spelled. --help is written from it, and
 * parsing knows nothing else.
 */
static const struct serve_option opts[OPT_N] = {
    [OPT_LISTEN] = {.flag = "listen",
                    .env = "NCCLGUARD_LISTEN",
                    .arg = "ADDR",
                    .kind = SERVE_OPT_TEXT,
                    .def = ":8443",
                    .help = "HOST:PORT, [V6]:PORT or :PORT; port 0 picks a "
                            "free one"},
    [OPT_CERT] = {.flag = "cert",
                  .env = "NCCLGUARD_CERT",
                  .arg = "FILE",
                  .kind = SERVE_OPT_TEXT,
                  .required = true,
                  .help = "serving certificate chain, PEM"},
    [OPT_KEY] = {.flag = "key",
                 .env = "NCCLGUARD_KEY",
                 .arg = "FILE",
                 .kind = SERVE_OPT_TEXT,
                 .required = true,
                 .help = "its private key, PEM"},
    [OPT_POLICY] = {.flag = "policy",
                    .env = "NCCLGUARD_POLICY",
                    .arg = "FILE",
                    .kind = SERVE_OPT_TEXT,
                    .required = true,
                    .help = "policy YAML"},
    [OPT_CLIENT_CA] = {.flag = "client-ca",
                       .env = "NCCLGUARD_CLIENT_CA",
                       .arg = "FILE",
                       .kind = SERVE_OPT_TEXT,
                       .help = "require client certificates signed by this "
                               "CA"},
    [OPT_NAMESPACE] = {.flag = "namespace",
                       .env = "NCCLGUARD_NAMESPACE",
                       .arg = "NS",
                       .kind = SERVE_OPT_TEXT,
                       .def_env = "POD_NAMESPACE",
                       .help = "the webhook's own namespace, never mutated"},
    [OPT_MAX_BODY] = {.flag = "max-body",
                      .env = "NCCLGUARD_MAX_BODY",
                      .arg = "BYTES",
                      .kind = SERVE_OPT_BYTES,
                      .def = "4Mi",
                      .min = KI,
                      .max = GI,
                      .help = "largest request body; Ki/Mi/Gi suffixes "
                              "allowed"},
    [OPT_THREADS] = {.flag = "threads",
                     .env = "NCCLGUARD_THREADS",
                     .arg = "N",
                     .kind = SERVE_OPT_NUMBER,
                     .def_fn = default_threads,
                     .def_doc = "the CPUs this process may use",
                     .min = 1,
                     .max = 256,
                     .help = "worker threads"},
    [OPT_CONNECTION_TIMEOUT] = {.flag = "connection-timeout",
                                .env = "NCCLGUARD_CONNECTION_TIMEOUT",
                                .arg = "S",
                                .kind = SERVE_OPT_NUMBER,
                                .def = "30",
                                .min = 0,
                                .max = 86400,
                                .zero = "never",
                                .help = "close connections idle this long"},
    [OPT_MAX_CONNECTIONS] = {.flag = "max-connections",
                             .env = "NCCLGUARD_MAX_CONNECTIONS",
                             .arg = "N",
                             .kind = SERVE_OPT_NUMBER,
                             .def = "1024",
                             .min = 1,
                             .max = 1000000,
                             .help = "open connections at most"},
    /* Without a per-address cap, one client holding idle connections
     * (slowloris) starves the pool for everyone: make faults measured a
     * 24 s median wait for a well-behaved client at the default 1024. */
    [OPT_PER_IP_CONNECTIONS] = {.flag = "per-ip-connections",
                                .env = "NCCLGUARD_PER_IP_CONNECTIONS",
                                .arg = "N",
                                .kind = SERVE_OPT_NUMBER,
                                .def = "128",
                                .min = 0,
                                .max = 1000000,
                                .zero = "no limit",
                                .help = "open connections per client "
                                        "address"},
    [OPT_RELOAD_INTERVAL] = {.flag = "reload-interval",
                             .env = "NCCLGUARD_RELOAD_INTERVAL",
                             .arg = "S",
                             .kind = SERVE_OPT_NUMBER,
                             .def = "10",
                             .min = 0,
                             .max = 86400,
                             .zero = "off",
                             .help = "also re-read policy and certificate "
                                     "every S seconds"},
    [OPT_HEADER_TIMEOUT] = {.flag = "header-timeout",
                            .env = "NCCLGUARD_HEADER_TIMEOUT",
                            .arg = "S",
                            .kind = SERVE_OPT_NUMBER,
                            .def = "10",
                            .min = 0,
                            .max = 3600,
                            .zero = "no limit",
                            .help = "TLS handshake plus request headers must "
                                    "finish within S seconds of connecting"},
    [OPT_MIN_BODY_RATE] = {.flag = "min-body-rate",
                           .env = "NCCLGUARD_MIN_BODY_RATE",
                           .arg = "BYTES",
                           .kind = SERVE_OPT_BYTES,
                           .def = "64Ki",
                           .min = 0,
                           .max = GI,
                           .zero = "no limit",
                           .help = "a body must then arrive at BYTES a "
                                   "second"},
    [OPT_MEMORY_LIMIT] = {.flag = "memory-limit",
                          .env = "NCCLGUARD_MEMORY_LIMIT",
                          .arg = "BYTES",
                          .kind = SERVE_OPT_BYTES,
                          .def_fn = default_memory_limit,
                          .def_doc = "the cgroup's memory.max",
                          .min = MI,
                          .max = 1ULL << 50,
                          .help = "memory figure the body budget derives "
                                  "from; Ki, Mi, Gi allowed"},
    [OPT_LOG_LEVEL] = {.flag = "log-level",
                       .env = "NCCLGUARD_LOG_LEVEL",
                       .arg = "LEVEL",
                       .kind = SERVE_OPT_LEVEL,
                       .def = "info",
                       .help = "debug, info, warn or error"},
    /* The image itself is built into policy/ (policies loaded by `mutate`
     * get it too); tests/unit/test_serve.c checks this text names it. */
    [OPT_RINGCHECK_IMAGE] = {.flag = "ringcheck-image",
                             .env = "NCCLGUARD_RINGCHECK_IMAGE",
                             .arg = "IMAGE",
                             .kind = SERVE_OPT_TEXT,
                             .def_doc = "ghcr.io/ncclguard/"
                                        "ncclguard-ringcheck:0.1.0",
                             .help = "ring-check image where the policy "
                                     "names none"},
    [OPT_HELP] = {.flag = "help",
                  .kind = SERVE_OPT_SWITCH,
                  .help = "show this help"},
};

const struct serve_option *
serve_options(size_t *n)
{
    *n = OPT_N;
    return opts;
}

/* Bytes as a user would write them: 4Mi rather than 4194304. */
static void
bytes_format(unsigned long long v, char *buf, size_t n)
{
    if (v != 0 && v % GI == 0)
        snprintf(buf, n, "%lluGi", v / GI);
    else if (v != 0 && v % MI == 0)
        snprintf(buf, n, "%lluMi", v / MI);
    else if (v != 0 && v % KI == 0)
        snprintf(buf, n, "%lluKi", v / KI);
    else
        snprintf(buf, n, "%llu", v);
}

/* "1..1000000" or "1Ki..1Gi": o's bounds as --help and errors show them. */
static void
range_format(const struct serve_option *o, char *buf, size_t n)
{
    char lo[32], hi[32];

    if (o->kind == SERVE_OPT_BYTES) {
        bytes_format(o->min, lo, sizeof(lo));
        bytes_format(o->max, hi, sizeof(hi));
    } else {
        snprintf(lo, sizeof(lo), "%llu", o->min);
        snprintf(hi, sizeof(hi), "%llu", o->max);
    }
    snprintf(buf, n, "%s..%s", lo, hi);
}

/* Reads a run of decimal digits: 0, 1 for a number past every bound
 * (still digits), -1 for anything else. */
static int
digits_parse(const char *s, size_t len, unsigned long long *out)
{
    unsigned long long v = 0;

    if (len == 0)
        return -1;
    for (size_t i = 0; i < len; i++) {
        unsigned int d;
        if (s[i] < '0' || s[i] > '9')
            return -1;
        d = (unsigned int)(s[i] - '0');
        if (v > (~0ULL - d) / 10) {
            /* Still check the rest are digits. */
            for (size_t j = i + 1; j < len; j++)
                if (s[j] < '0' || s[j] > '9')
                    return -1;
            return 1;
        }
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int
serve_option_parse(const struct serve_option *o, const char *label,
                   const char *value, unsigned long long *out, char *msg,
                   size_t n)
{
    /* "--flag VALUE: ..." or "ENV=VALUE: ...", for a value that is not of
     * the option's kind; "LABEL: VALUE is out of range ..." for one that
     * is, outside the bounds. */
    const char *sep = strncmp(label, "--", 2) == 0 ? " " : "=";
    unsigned long long mult = 1, v = 0;
    size_t len = strlen(value);
    char range[80];
    int rc;

    switch (o->kind) {
    case SERVE_OPT_TEXT:
    case SERVE_OPT_SWITCH:
        return 0;
    case SERVE_OPT_LEVEL: {
        enum log_level level;
        if (log_level_parse(value, &level) == 0)
            return 0;
        snprintf(msg, n, "%s%s%s: expected debug, info, warn or error", label,
                 sep, value);
        return -1;
    }
    case SERVE_OPT_BYTES:
        if (len > 2 && value[len - 1] == 'i') {
            switch (value[len - 2]) {
            case 'K':
                mult = KI;
                break;
            case 'M':
                mult = MI;
                break;
            case 'G':
                mult = GI;
                break;
            default:
                break;
            }
            if (mult != 1)
                len -= 2;
        }
        rc = digits_parse(value, len, &v);
        if (rc < 0) {
            snprintf(msg, n, "%s%s%s: expected bytes, e.g. 4194304 or 4Mi",
                     label, sep, value);
            return -1;
        }
        if (rc > 0 || v > o->max / mult)
            goto out_of_range;
        v *= mult;
        break;
    case SERVE_OPT_NUMBER:
        rc = digits_parse(value, len, &v);
        if (rc < 0) {
            snprintf(msg, n,
                     "%s%s%s: expected a whole number from %llu to %llu", label,
                     sep, value, o->min, o->max);
            return -1;
        }
        if (rc > 0)
            goto out_of_range;
        break;
    }
    if (v < o->min || v > o->max)
        goto out_of_range;
    *out = v;
    return 0;
out_of_range:
    range_format(o, range, sizeof(range));
    snprintf(msg, n, "%s: %s is out of range %s", label, value, range);
    return -1;
}

/* "(default 30; 0..86400; 0 = never)": what --help says after the help
 * text of o; empty when there is nothing to say. */
static void
help_tail_format(const struct serve_option *o, char *buf, size_t n)
{
    char def[96] = "", range[80] = "", zero[48] = "";

    if (o->required)
        snprintf(def, sizeof(def), "required");
    else if (o->def != NULL)
        snprintf(def, sizeof(def), "default %s", o->def);
    else if (o->def_env != NULL)
        snprintf(def, sizeof(def), "default $%s", o->def_env);
    else if (o->def_fn != NULL)
        snprintf(def, sizeof(def), "default: %s", o->def_doc);
    else if (o->def_doc != NULL)
        snprintf(def, sizeof(def), "default %s", o->def_doc);
    if (o->kind == SERVE_OPT_NUMBER || o->kind == SERVE_OPT_BYTES)
        range_format(o, range, sizeof(range));
    if (o->zero != NULL)
        snprintf(zero, sizeof(zero), "0 = %s", o->zero);
    snprintf(buf, n, "%s%s%s%s%s", def, def[0] && range[0] ? "; " : "", range,
             (def[0] || range[0]) && zero[0] ? "; " : "", zero);
}

static void
usage(FILE *out)
{
    fprintf(out, "usage: ncclguard serve --cert FILE --key FILE --policy FILE "
                 "[options]\n\nRuns the HTTPS admission webhook (POST /mutate, "
                 "GET /healthz, /readyz, /metrics).\n\noptions (each also "
                 "read from the environment variable shown):\n");
    for (size_t i = 0; i < OPT_N; i++) {
        const struct serve_option *o = &opts[i];
        char left[64], tail[256];

        if (o->arg != NULL)
            snprintf(left, sizeof(left), "--%s %s", o->flag, o->arg);
        else
            snprintf(left, sizeof(left), "--%s", o->flag);
        help_tail_format(o, tail, sizeof(tail));
        if (tail[0] != '\0')
            fprintf(out, "  %-28s %s (%s)\n", left, o->help, tail);
        else
            fprintf(out, "  %-28s %s\n", left, o->help);
        if (o->env != NULL)
            fprintf(out, "  %-28s   env %s\n", "", o->env);
    }
    fprintf(out, "\nSIGHUP re-reads the policy and the certificate; SIGTERM "
                 "stops accepting,\nfinishes the requests in flight and "
                 "exits 0.\n");
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

static unsigned long long
default_threads(void)
{
    return cpu_count();
}

static unsigned long long
default_memory_limit(void)
{
    return cgroup_memory_limit();
}

/* getopt_long's value for opts[i]: past every character, so that it
 * cannot be taken for 'h', '?' or ':'. */
#define OPT_VAL(i) (1000 + (int)(i))

/* Every option's value after parsing: text as given (or its default),
 * numbers and bytes as numbers, and where each came from. */
struct serve_settings {
    const char *text[OPT_N]; /* NULL: unset, no default */
    unsigned long long num[OPT_N];
    /* "--log-level" or "NCCLGUARD_LOG_LEVEL", so that a message names
     * what the user set. */
    char label[OPT_N][48];
};

/* " " after a flag, "=" after an environment variable, as the value was
 * written: "--log-level loud" or "NCCLGUARD_LOG_LEVEL=loud". */
static const char *
label_sep(const char *label)
{
    return strncmp(label, "--", 2) == 0 ? " " : "=";
}

/*
 * Reads the raw values into val[] and their labels into st: the
 * environment, then flags on top. Returns 0, 1 when --help was shown, 2
 * after saying on stderr what is wrong.
 */
static int
serve_read(int argc, char **argv, const char **val, struct serve_settings *st)
{
    struct option longopts[OPT_N + 1];
    int opt;

    memset(longopts, 0, sizeof(longopts));
    for (size_t i = 0; i < OPT_N; i++) {
        const struct serve_option *o = &opts[i];
        longopts[i].name = o->flag;
        longopts[i].has_arg =
            o->kind == SERVE_OPT_SWITCH ? no_argument : required_argument;
        longopts[i].val = OPT_VAL(i);
        snprintf(st->label[i], sizeof(st->label[i]), "--%s", o->flag);
        if (o->env != NULL) {
            const char *v = getenv(o->env);
            if (v != NULL && *v != '\0') {
                val[i] = v;
                snprintf(st->label[i], sizeof(st->label[i]), "%s", o->env);
            }
        }
    }
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        size_t i;
        if (opt == 'h' || opt == OPT_VAL(OPT_HELP)) {
            usage(stdout);
            return 1;
        }
        if (opt < OPT_VAL(0) || opt >= OPT_VAL(OPT_N)) {
            if (optopt >= OPT_VAL(0) && optopt < OPT_VAL(OPT_N))
                fprintf(stderr, "ncclguard serve: --%s needs a value\n",
                        opts[optopt - OPT_VAL(0)].flag);
            else if (optopt != 0)
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
        i = (size_t)(opt - OPT_VAL(0));
        val[i] = optarg;
        snprintf(st->label[i], sizeof(st->label[i]), "--%s", opts[i].flag);
    }
    if (optind < argc) {
        fprintf(stderr, "ncclguard serve: unexpected argument '%s'\n",
                argv[optind]);
        return 2;
    }
    return 0;
}

/*
 * Parse: the raw values (serve_read), the required ones present, each
 * unset one given its default, and each checked against the table into
 * st. Returns 0, 1 when --help was shown, 2 after saying on stderr what is
 * wrong.
 */
static int
serve_parse(int argc, char **argv, struct serve_settings *st)
{
    const char *val[OPT_N] = {0};
    char msg[320];
    int rc;

    memset(st, 0, sizeof(*st));
    rc = serve_read(argc, argv, val, st);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < OPT_N; i++) {
        if (opts[i].required && val[i] == NULL) {
            fprintf(stderr, "ncclguard serve: --%s is required (or set %s)\n",
                    opts[i].flag, opts[i].env);
            return 2;
        }
    }
    for (size_t i = 0; i < OPT_N; i++) {
        const struct serve_option *o = &opts[i];
        const char *v = val[i];

        if (v == NULL && o->def_env != NULL) {
            v = getenv(o->def_env);
            if (v != NULL && *v == '\0')
                v = NULL;
        }
        if (v == NULL && o->def != NULL)
            v = o->def;
        if (v == NULL) {
            if (o->def_fn != NULL)
                st->num[i] = o->def_fn();
            continue;
        }
        if (serve_option_parse(o, st->label[i], v, &st->num[i], msg,
                               sizeof(msg)) != 0) {
            fprintf(stderr, "ncclguard serve: %s\n", msg);
            return 2;
        }
        st->text[i] = v;
    }
    return 0;
}

/* What running the server needs, made from the settings. */
struct serve_plan {
    struct http_config hc;
    struct reload_config rc;
    unsigned long long memory_limit;
    const char *listen;
    const char *client_ca_path; /* NULL: no client certificates */
};

/*
 * Configure: the settings as the server's and the reloader's
 * configuration; sets the log level and the default ring-check image.
 * Returns 0, or 2 after saying on stderr what is wrong.
 */
static int
serve_configure(const struct serve_settings *st, struct serve_plan *p)
{
    struct ng_error e;
    enum log_level level = LOG_INFO;

    memset(p, 0, sizeof(*p));
    ng_error_clear(&e);
    p->listen = st->text[OPT_LISTEN];
    if (http_listen_parse(p->listen, &p->hc, &e) != 0) {
        fprintf(stderr, "ncclguard serve: %s: %s\n", st->label[OPT_LISTEN],
                e.msg);
        return 2;
    }
    if (log_level_parse(st->text[OPT_LOG_LEVEL], &level) != 0)
        return 2; /* cannot happen: serve_parse checked it */
    log_level_set(level);
    if (st->text[OPT_RINGCHECK_IMAGE] != NULL &&
        policy_ringcheck_image_set_default(st->text[OPT_RINGCHECK_IMAGE]) !=
            0) {
        const char *l = st->label[OPT_RINGCHECK_IMAGE];
        fprintf(stderr,
                "ncclguard serve: %s%s%s: expected an image reference without "
                "whitespace, at most %d characters\n",
                l, label_sep(l), st->text[OPT_RINGCHECK_IMAGE],
                POLICY_MAX_IMAGE);
        return 2;
    }
    p->hc.max_body = (size_t)st->num[OPT_MAX_BODY];
    p->hc.threads = (unsigned int)st->num[OPT_THREADS];
    p->hc.connection_timeout = (unsigned int)st->num[OPT_CONNECTION_TIMEOUT];
    p->hc.max_connections = (unsigned int)st->num[OPT_MAX_CONNECTIONS];
    p->hc.per_ip_connections = (unsigned int)st->num[OPT_PER_IP_CONNECTIONS];
    p->hc.header_timeout = (unsigned int)st->num[OPT_HEADER_TIMEOUT];
    p->hc.min_body_rate = (size_t)st->num[OPT_MIN_BODY_RATE];
    p->memory_limit = st->num[OPT_MEMORY_LIMIT];
    p->hc.body_budget =
        http_body_budget(p->memory_limit, p->hc.threads, p->hc.max_body);
    p->hc.own_namespace = st->text[OPT_NAMESPACE];
    p->rc.interval_seconds = (unsigned int)st->num[OPT_RELOAD_INTERVAL];
    p->rc.policy_path = st->text[OPT_POLICY];
    p->rc.cert_path = st->text[OPT_CERT];
    p->rc.key_path = st->text[OPT_KEY];
    p->client_ca_path = st->text[OPT_CLIENT_CA];
    return 0;
}

/* Logs the "listening" line: what the server runs with. */
static void
serve_log_listening(const struct serve_plan *p, struct reload *reload,
                    struct http_server *srv, bool client_ca)
{
    struct policy_snap *ps = reload_policy_acquire(reload);
    struct cert_snap *cs = reload_cert_acquire(reload);
    json_t *f = json_pack(
        "{s:s,s:s,s:i,s:i,s:I,s:I,s:I,s:s,s:s,s:I,s:b}", "version",
        NCCLGUARD_VERSION, "listen", p->listen, "port",
        (int)http_server_port(srv), "threads", (int)p->hc.threads, "max_body",
        (json_int_t)p->hc.max_body, "memory_limit", (json_int_t)p->memory_limit,
        "body_budget", (json_int_t)p->hc.body_budget, "policy",
        p->rc.policy_path, "policy_hash", ps->hash, "cert_not_after",
        (json_int_t)tlspair_not_after(cs->pair), "client_ca", client_ca);

    log_fields_write(LOG_INFO, "listening", f);
    json_decref(f);
    reload_policy_release(ps);
    reload_cert_release(cs);
}

/*
 * Run: starts the reloader and the server, then waits for signals:
 * SIGHUP re-reads, SIGTERM or SIGINT drains and stops. Returns the exit
 * status, 0 after a signal, 1 when the server cannot start.
 */
static int
serve_run(struct serve_plan *p)
{
    struct reload *reload = NULL;
    struct http_server *srv = NULL;
    struct ng_error e;
    char *client_ca = NULL;
    sigset_t sigs;
    int status = 1;

    /* Signals are taken synchronously by this thread only; every thread
     * started below inherits the blocked mask. */
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    if (p->client_ca_path != NULL) {
        client_ca = read_client_ca(p->client_ca_path);
        if (client_ca == NULL)
            goto done;
        p->hc.client_ca_pem = client_ca;
    }

    ng_error_clear(&e);
    reload = reload_new(&p->rc, &e);
    if (reload == NULL) {
        log_error_write(LOG_ERROR, "cannot start", NULL, NULL, "%s", e.msg);
        goto done;
    }
    ng_error_clear(&e);
    srv = http_server_start(&p->hc, reload, &e);
    if (srv == NULL) {
        log_error_write(LOG_ERROR, "cannot start", "listen", p->listen, "%s",
                        e.msg);
        goto done;
    }
    ng_error_clear(&e);
    if (reload_start(reload, &e) != 0) {
        log_error_write(LOG_ERROR, "cannot start", NULL, NULL, "%s", e.msg);
        goto done;
    }
    serve_log_listening(p, reload, srv, client_ca != NULL);

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

int
cmd_serve(int argc, char **argv)
{
    struct serve_settings st;
    struct serve_plan plan;
    int rc;

    /* Before any thread uses jansson: admissions allocate their JSON
     * values from a per-thread arena (see admission/jsonmem.h). */
    jsonmem_install();
    rc = serve_parse(argc, argv, &st);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    if (serve_configure(&st, &plan) != 0)
        return 2;
    return serve_run(&plan);
}
