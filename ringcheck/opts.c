/* Parses and checks the command line of ncclguard-ringcheck. */
#include "ringcheck/opts.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/limits.h"
#include "contract/multinode_env.h"

void
rc_opts_usage(void *fp)
{
    FILE *f = fp;

    fputs("usage: ncclguard-ringcheck [--expect-gpus N] [--timeout SECONDS]\n"
          "         [--mode process|group] [--bw-bytes BYTES]\n"
          "         [--on-failure fail|warn|fallback] [--min-busbw GBPS]\n"
          "         [--fallback-conf PATH] [--phase-timeout SECONDS]\n"
          "         [--diagnose|--no-diagnose] [--report FILE]\n"
          "         [--termination-log PATH] [--multi-node auto|off]\n"
          "         [--rendezvous-port N] [--multi-node-timeout SECONDS]\n"
          "         [--on-missing warn|fail] [--min-busbw-net GBPS]\n"
          "         [--on-no-cure fail|warn]\n"
          "         [--expect-transport intra=WORD,inter=WORD] [--help]\n"
          "\n"
          "Proves that NCCL works on this pod's GPUs before the workload "
          "starts.\n"
          "  --expect-gpus N      GPUs the pod asked for (default: all "
          "visible)\n"
          "  --timeout SECONDS    deadline for the whole check (default 300)\n"
          "  --phase-timeout S    deadline for each phase (default: a quarter "
          "of\n"
          "                       --timeout, at least 10 s, at most "
          "--timeout)\n"
          "  --mode process|group one process per GPU (default) or one for "
          "all\n"
          "  --bw-bytes BYTES     AllReduce size of the bandwidth phase; Ki, "
          "Mi, Gi\n"
          "                       suffixes; 0 skips it (default 256Mi)\n"
          "  --min-busbw GBPS     fail (exit 8) below this bus bandwidth\n"
          "  --on-failure MODE    fail (default), warn (exit 0), or fallback "
          "(write\n"
          "                       the settings that passed to the fallback "
          "file)\n"
          "  --fallback-conf PATH default /run/ncclguard/nccl.conf\n"
          "  --no-diagnose        do not rerun with other settings on failure\n"
          "  --report FILE        also write the JSON summary to FILE\n"
          "  --termination-log P  default /dev/termination-log (written when "
          "it\n"
          "                       exists)\n"
          "  --multi-node auto|off  after the single-pod phases, check the "
          "ring across\n"
          "                       the job's pods (membership from the "
          "operator's\n"
          "                       variables; default off)\n"
          "  --rendezvous-port N  TCP port of node rank 0 (default 29450)\n"
          "  --multi-node-timeout S  deadline of the cross-node phase "
          "(default 120)\n"
          "  --on-missing warn|fail  pods missing at that deadline: warn "
          "(exit 0,\n"
          "                       default) or fail (exit 4)\n"
          "  --min-busbw-net GBPS fail (exit 8) below this bus bandwidth "
          "across nodes\n"
          "  --on-no-cure fail|warn  under --on-failure fallback, when no "
          "single\n"
          "                       setting passes or the deadline comes first: "
          "fail\n"
          "                       (default, the failure's exit code) or warn "
          "(exit 0)\n"
          "  --expect-transport intra=p2p|nvlink|shm|net,inter=ib-gdr|ib|"
          "socket|net\n"
          "                       what NCCL must choose within the pod and "
          "across\n"
          "                       pods; anything else fails (exit 10)\n"
          "exit codes: 0 pass, 1 internal, 2 CUDA, 3 NCCL, 4 timeout/hang, "
          "6 usage,\n"
          "            7 wrong results, 8 bandwidth below threshold, 9 "
          "environment,\n"
          "            10 transport other than expected\n",
          f);
}

#define RC_STR2(x) #x
#define RC_STR(x) RC_STR2(x)

static int
parse_seconds(const char *s, double *out)
{
    char *end;
    double d;

    errno = 0;
    d = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(d) || d <= 0 ||
        d > 86400)
        return -1;
    *out = d;
    return 0;
}

int
rc_opts_parse_bytes(const char *s, size_t *out)
{
    char *end;
    unsigned long long v;
    unsigned long long mult = 1;

    if (s[0] < '0' || s[0] > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    if (strcmp(end, "Ki") == 0)
        mult = 1ULL << 10;
    else if (strcmp(end, "Mi") == 0)
        mult = 1ULL << 20;
    else if (strcmp(end, "Gi") == 0)
        mult = 1ULL << 30;
    else if (*end != '\0')
        return -1;
    if (v > SIZE_MAX / mult)
        return -1;
    *out = (size_t)(v * mult);
    return 0;
}

/* One setter per option: parses arg into *o; 0, or -1 when arg is not
 * what the table's `expect` says. */
static int
set_expect(struct rc_opts *o, const char *arg)
{
    char *end;
    long l;

    errno = 0;
    l = strtol(arg, &end, 10);
    if (errno != 0 || end == arg || *end != '\0' || l < RINGCHECK_MIN_GPUS ||
        l > RINGCHECK_MAX_GPUS)
        return -1;
    o->expect_gpus = (int)l;
    return 0;
}

static int
set_timeout(struct rc_opts *o, const char *arg)
{
    return parse_seconds(arg, &o->timeout_s);
}

static int
set_phase(struct rc_opts *o, const char *arg)
{
    return parse_seconds(arg, &o->phase_timeout_s);
}

static int
set_mode(struct rc_opts *o, const char *arg)
{
    if (strcmp(arg, "process") == 0)
        o->group = 0;
    else if (strcmp(arg, "group") == 0)
        o->group = 1;
    else
        return -1;
    return 0;
}

static int
set_bw(struct rc_opts *o, const char *arg)
{
    size_t v;

    if (rc_opts_parse_bytes(arg, &v) != 0 || v > RINGCHECK_MAX_BW_BYTES ||
        (v > 0 && v < 4))
        return -1;
    o->bw_bytes = v & ~(size_t)3;
    return 0;
}

static int
set_onfail(struct rc_opts *o, const char *arg)
{
    if (strcmp(arg, "fail") == 0)
        o->on_failure = RC_FAIL;
    else if (strcmp(arg, "warn") == 0)
        o->on_failure = RC_WARN;
    else if (strcmp(arg, "fallback") == 0)
        o->on_failure = RC_FALLBACK;
    else
        return -1;
    return 0;
}

static int
set_minbw(struct rc_opts *o, const char *arg)
{
    char *end;
    double d;

    errno = 0;
    d = strtod(arg, &end);
    if (errno != 0 || end == arg || *end != '\0' || !isfinite(d) || d < 0 ||
        d > RINGCHECK_MAX_BUSBW_GBPS)
        return -1;
    o->min_busbw = d;
    return 0;
}

static int
set_minbw_net(struct rc_opts *o, const char *arg)
{
    double keep = o->min_busbw;
    int rc = set_minbw(o, arg);

    if (rc == 0)
        o->min_busbw_net = o->min_busbw;
    o->min_busbw = keep;
    return rc;
}

static int
set_fallback(struct rc_opts *o, const char *arg)
{
    if (arg[0] == '\0' || strlen(arg) > 200)
        return -1;
    o->fallback_conf = arg;
    return 0;
}

static int
set_diag(struct rc_opts *o, const char *arg)
{
    (void)arg;
    o->diagnose = 1;
    return 0;
}

static int
set_nodiag(struct rc_opts *o, const char *arg)
{
    (void)arg;
    o->diagnose = 0;
    return 0;
}

static int
set_report(struct rc_opts *o, const char *arg)
{
    if (arg[0] == '\0')
        return -1;
    o->report = arg;
    return 0;
}

static int
set_termlog(struct rc_opts *o, const char *arg)
{
    if (arg[0] == '\0')
        return -1;
    o->termination_log = arg;
    o->termination_log_given = 1;
    return 0;
}

static int
set_help(struct rc_opts *o, const char *arg)
{
    (void)arg;
    o->help = 1;
    return 0;
}

static int
set_multinode(struct rc_opts *o, const char *arg)
{
    if (strcmp(arg, "auto") != 0 && strcmp(arg, "off") != 0)
        return -1;
    o->multi_node = strcmp(arg, "auto") == 0;
    return 0;
}

static int
set_rdvport(struct rc_opts *o, const char *arg)
{
    char *end;
    long l;

    errno = 0;
    l = strtol(arg, &end, 10);
    if (errno != 0 || end == arg || *end != '\0' || l < RINGCHECK_MIN_PORT ||
        l > RINGCHECK_MAX_PORT)
        return -1;
    o->rendezvous_port = (int)l;
    return 0;
}

static int
set_mntimeout(struct rc_opts *o, const char *arg)
{
    char *end;
    double d;

    errno = 0;
    d = strtod(arg, &end);
    if (errno != 0 || end == arg || *end != '\0' || !isfinite(d) ||
        d < RINGCHECK_MIN_MN_TIMEOUT_S || d > RINGCHECK_MAX_MN_TIMEOUT_S)
        return -1;
    o->multi_node_timeout_s = d;
    return 0;
}

static int
set_onmissing(struct rc_opts *o, const char *arg)
{
    if (strcmp(arg, "warn") != 0 && strcmp(arg, "fail") != 0)
        return -1;
    o->on_missing =
        strcmp(arg, "fail") == 0 ? RC_MISSING_FAIL : RC_MISSING_WARN;
    return 0;
}

static int
set_onnocure(struct rc_opts *o, const char *arg)
{
    if (strcmp(arg, "warn") != 0 && strcmp(arg, "fail") != 0)
        return -1;
    o->on_no_cure = strcmp(arg, "warn") == 0 ? RC_NOCURE_WARN : RC_NOCURE_FAIL;
    return 0;
}

/* "intra=WORD,inter=WORD", either part alone, each at most once. */
static int
set_expect_transport(struct rc_opts *o, const char *arg)
{
    static const char *const intra[] = {"p2p", "nvlink", "shm", "net"};
    static const char *const inter[] = {"ib-gdr", "ib", "socket", "net"};
    const char *p = arg;

    memset(&o->expect, 0, sizeof(o->expect));
    while (*p != '\0') {
        size_t len = strcspn(p, ",");
        int is_intra = strncmp(p, "intra=", 6) == 0;
        const char *const *words = is_intra ? intra : inter;
        char *dst = is_intra ? o->expect.intra : o->expect.inter;
        const size_t klen = 6; /* "intra=" and "inter=" */
        int found = 0;

        if (!is_intra && strncmp(p, "inter=", 6) != 0)
            return -1;
        if (dst[0] != '\0' || len < klen)
            return -1;
        for (size_t i = 0; i < 4; i++)
            if (len - klen == strlen(words[i]) &&
                strncmp(p + klen, words[i], len - klen) == 0) {
                snprintf(dst, sizeof(o->expect.intra), "%s", words[i]);
                found = 1;
            }
        if (!found)
            return -1;
        p += len;
        if (*p == ',')
            p++;
    }
    return o->expect.intra[0] != '\0' || o->expect.inter[0] != '\0' ? 0 : -1;
}

/* The options: name, whether it takes a value, its setter, and what a
 * valid value is (for the error message). */
static const struct opt_def {
    const char *name;
    int has_arg;
    int (*set)(struct rc_opts *o, const char *arg);
    const char *expect;
} opt_defs[] = {
    {"expect-gpus", required_argument, set_expect,
     "a whole number from " RC_STR(RINGCHECK_MIN_GPUS) " to " RC_STR(
         RINGCHECK_MAX_GPUS)},
    {"timeout", required_argument, set_timeout,
     "seconds above 0 and at most 86400"},
    {"phase-timeout", required_argument, set_phase,
     "seconds above 0 and at most 86400"},
    {"mode", required_argument, set_mode, "process or group"},
    {"bw-bytes", required_argument, set_bw,
     "0 or a byte count from 4 to 64Gi (plain or with Ki, Mi, Gi)"},
    {"on-failure", required_argument, set_onfail, "fail, warn or fallback"},
    {"min-busbw", required_argument, set_minbw,
     "GB/s from 0 to " RC_STR(RINGCHECK_MAX_BUSBW_GBPS)},
    {"fallback-conf", required_argument, set_fallback,
     "a path of 1 to 200 characters"},
    {"diagnose", no_argument, set_diag, NULL},
    {"no-diagnose", no_argument, set_nodiag, NULL},
    {"report", required_argument, set_report, "a file name"},
    {"termination-log", required_argument, set_termlog, "a path"},
    {"help", no_argument, set_help, NULL},
    {"multi-node", required_argument, set_multinode, "auto or off"},
    {"rendezvous-port", required_argument, set_rdvport,
     "a port from " RC_STR(RINGCHECK_MIN_PORT) " to " RC_STR(
         RINGCHECK_MAX_PORT)},
    {"multi-node-timeout", required_argument, set_mntimeout,
     "seconds from " RC_STR(RINGCHECK_MIN_MN_TIMEOUT_S) " to " RC_STR(
         RINGCHECK_MAX_MN_TIMEOUT_S)},
    {"on-missing", required_argument, set_onmissing, "warn or fail"},
    {"min-busbw-net", required_argument, set_minbw_net,
     "GB/s from 0 to " RC_STR(RINGCHECK_MAX_BUSBW_GBPS)},
    {"on-no-cure", required_argument, set_onnocure, "fail or warn"},
    {"expect-transport", required_argument, set_expect_transport,
     "intra=p2p|nvlink|shm|net and/or inter=ib-gdr|ib|socket|net, comma "
     "separated"},
};

#define NOPTS (sizeof(opt_defs) / sizeof(opt_defs[0]))
#define OPT_BASE 256

int
rc_opts_parse(int argc, char **argv, struct rc_opts *o, char *err,
              size_t errlen)
{
    struct option longopts[NOPTS + 1];
    int c;

    memset(o, 0, sizeof(*o));
    o->timeout_s = 300;
    o->bw_bytes = (size_t)256 << 20;
    o->diagnose = 1;
    o->fallback_conf = "/run/ncclguard/nccl.conf";
    o->termination_log = "/dev/termination-log";
    o->rendezvous_port = MN_DEFAULT_PORT;
    o->multi_node_timeout_s = RINGCHECK_DEFAULT_MN_TIMEOUT_S;
    for (size_t i = 0; i < NOPTS; i++)
        longopts[i] = (struct option){opt_defs[i].name, opt_defs[i].has_arg,
                                      NULL, OPT_BASE + (int)i};
    longopts[NOPTS] = (struct option){NULL, 0, NULL, 0};
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        const struct opt_def *d;

        if (c == 'h') {
            o->help = 1;
            return 0;
        }
        if (c == ':') {
            snprintf(err, errlen, "%s: missing value", argv[optind - 1]);
            return -1;
        }
        if (c < OPT_BASE || c >= OPT_BASE + (int)NOPTS) {
            snprintf(err, errlen, "unknown option \"%s\"", argv[optind - 1]);
            return -1;
        }
        d = &opt_defs[c - OPT_BASE];
        if (d->set(o, optarg) != 0) {
            snprintf(err, errlen, "--%s: expected %s, got \"%s\"", d->name,
                     d->expect, optarg);
            return -1;
        }
        if (o->help)
            return 0;
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument \"%s\"", argv[optind]);
        return -1;
    }
    if ((o->min_busbw > 0 || o->min_busbw_net > 0) && o->bw_bytes == 0) {
        snprintf(err, errlen,
                 "%s needs the bandwidth phase, but --bw-bytes is 0",
                 o->min_busbw > 0 ? "--min-busbw" : "--min-busbw-net");
        return -1;
    }
    if (o->phase_timeout_s == 0) {
        o->phase_timeout_s = o->timeout_s / 4;
        if (o->phase_timeout_s < 10)
            o->phase_timeout_s = o->timeout_s < 10 ? o->timeout_s : 10;
    }
    if (o->phase_timeout_s > o->timeout_s)
        o->phase_timeout_s = o->timeout_s;
    return 0;
}
