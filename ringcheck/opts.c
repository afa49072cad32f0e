/* Parses and checks the command line of ncclguard-ringcheck. */
#include "opts.h"

#include "limits.h"
#include "multinode_env.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GPUS 32
#define MAX_BW_BYTES ((size_t)64 << 30)

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
          "         [--on-missing warn|fail] [--help]\n"
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
          "exit codes: 0 pass, 1 internal, 2 CUDA, 3 NCCL, 4 timeout/hang, "
          "6 usage,\n"
          "            7 wrong results, 8 bandwidth below threshold, 9 "
          "environment\n",
          f);
}

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

enum {
    OPT_EXPECT = 256,
    OPT_TIMEOUT,
    OPT_MODE,
    OPT_BW,
    OPT_ONFAIL,
    OPT_MINBW,
    OPT_FALLBACK,
    OPT_PHASE,
    OPT_DIAG,
    OPT_NODIAG,
    OPT_REPORT,
    OPT_TERMLOG,
    OPT_HELP,
    OPT_MULTINODE,
    OPT_RDVPORT,
    OPT_MNTIMEOUT,
    OPT_ONMISSING
};

static const struct option longopts[] = {
    {"expect-gpus", required_argument, NULL, OPT_EXPECT},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"mode", required_argument, NULL, OPT_MODE},
    {"bw-bytes", required_argument, NULL, OPT_BW},
    {"on-failure", required_argument, NULL, OPT_ONFAIL},
    {"min-busbw", required_argument, NULL, OPT_MINBW},
    {"fallback-conf", required_argument, NULL, OPT_FALLBACK},
    {"phase-timeout", required_argument, NULL, OPT_PHASE},
    {"diagnose", no_argument, NULL, OPT_DIAG},
    {"no-diagnose", no_argument, NULL, OPT_NODIAG},
    {"report", required_argument, NULL, OPT_REPORT},
    {"termination-log", required_argument, NULL, OPT_TERMLOG},
    {"help", no_argument, NULL, OPT_HELP},
    {"multi-node", required_argument, NULL, OPT_MULTINODE},
    {"rendezvous-port", required_argument, NULL, OPT_RDVPORT},
    {"multi-node-timeout", required_argument, NULL, OPT_MNTIMEOUT},
    {"on-missing", required_argument, NULL, OPT_ONMISSING},
    {NULL, 0, NULL, 0},
};

/* The cross-node options; 0, or -1 with a message in err. */
static int
parse_multinode(int c, const char *arg, struct rc_opts *o, char *err,
                size_t errlen)
{
    char *end;
    long l;
    double d;

    switch (c) {
    case OPT_MULTINODE:
        if (strcmp(arg, "auto") != 0 && strcmp(arg, "off") != 0) {
            snprintf(err, errlen,
                     "--multi-node: expected auto or off, got \"%s\"", arg);
            return -1;
        }
        o->multi_node = strcmp(arg, "auto") == 0;
        return 0;
    case OPT_RDVPORT:
        errno = 0;
        l = strtol(arg, &end, 10);
        if (errno != 0 || end == arg || *end != '\0' ||
            l < RINGCHECK_MIN_PORT || l > RINGCHECK_MAX_PORT) {
            snprintf(err, errlen,
                     "--rendezvous-port: expected a port from %d to %d, got "
                     "\"%s\"",
                     RINGCHECK_MIN_PORT, RINGCHECK_MAX_PORT, arg);
            return -1;
        }
        o->rendezvous_port = (int)l;
        return 0;
    case OPT_MNTIMEOUT:
        errno = 0;
        d = strtod(arg, &end);
        if (errno != 0 || end == arg || *end != '\0' || !isfinite(d) ||
            d < RINGCHECK_MIN_MN_TIMEOUT_S || d > RINGCHECK_MAX_MN_TIMEOUT_S) {
            snprintf(err, errlen,
                     "--multi-node-timeout: expected seconds from %d to %d, "
                     "got \"%s\"",
                     RINGCHECK_MIN_MN_TIMEOUT_S, RINGCHECK_MAX_MN_TIMEOUT_S,
                     arg);
            return -1;
        }
        o->multi_node_timeout_s = d;
        return 0;
    default:
        if (strcmp(arg, "warn") != 0 && strcmp(arg, "fail") != 0) {
            snprintf(err, errlen,
                     "--on-missing: expected warn or fail, got \"%s\"", arg);
            return -1;
        }
        o->on_missing =
            strcmp(arg, "fail") == 0 ? RC_MISSING_FAIL : RC_MISSING_WARN;
        return 0;
    }
}

int
rc_opts_parse(int argc, char **argv, struct rc_opts *o, char *err,
              size_t errlen)
{
    int c;
    int phase_given = 0;
    char *end;
    long l;

    memset(o, 0, sizeof(*o));
    o->timeout_s = 300;
    o->bw_bytes = (size_t)256 << 20;
    o->diagnose = 1;
    o->fallback_conf = "/run/ncclguard/nccl.conf";
    o->termination_log = "/dev/termination-log";
    o->rendezvous_port = MN_DEFAULT_PORT;
    o->multi_node_timeout_s = RINGCHECK_DEFAULT_MN_TIMEOUT_S;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_EXPECT:
            errno = 0;
            l = strtol(optarg, &end, 10);
            if (errno != 0 || end == optarg || *end != '\0' || l < 1 ||
                l > MAX_GPUS) {
                snprintf(err, errlen,
                         "--expect-gpus: expected a whole number from 1 to "
                         "%d, got \"%s\"",
                         MAX_GPUS, optarg);
                return -1;
            }
            o->expect_gpus = (int)l;
            break;
        case OPT_TIMEOUT:
            if (parse_seconds(optarg, &o->timeout_s) != 0) {
                snprintf(err, errlen,
                         "--timeout: expected seconds above 0 and at most "
                         "86400, got \"%s\"",
                         optarg);
                return -1;
            }
            break;
        case OPT_PHASE:
            if (parse_seconds(optarg, &o->phase_timeout_s) != 0) {
                snprintf(err, errlen,
                         "--phase-timeout: expected seconds above 0 and at "
                         "most 86400, got \"%s\"",
                         optarg);
                return -1;
            }
            phase_given = 1;
            break;
        case OPT_MODE:
            if (strcmp(optarg, "process") == 0)
                o->group = 0;
            else if (strcmp(optarg, "group") == 0)
                o->group = 1;
            else {
                snprintf(err, errlen,
                         "--mode: expected process or group, got \"%s\"",
                         optarg);
                return -1;
            }
            break;
        case OPT_BW:
            if (rc_opts_parse_bytes(optarg, &o->bw_bytes) != 0 ||
                o->bw_bytes > MAX_BW_BYTES ||
                (o->bw_bytes > 0 && o->bw_bytes < 4)) {
                snprintf(err, errlen,
                         "--bw-bytes: expected 0 or a byte count from 4 to "
                         "64Gi (plain or with Ki, Mi, Gi), got \"%s\"",
                         optarg);
                return -1;
            }
            o->bw_bytes &= ~(size_t)3;
            break;
        case OPT_ONFAIL:
            if (strcmp(optarg, "fail") == 0)
                o->on_failure = RC_FAIL;
            else if (strcmp(optarg, "warn") == 0)
                o->on_failure = RC_WARN;
            else if (strcmp(optarg, "fallback") == 0)
                o->on_failure = RC_FALLBACK;
            else {
                snprintf(err, errlen,
                         "--on-failure: expected fail, warn or fallback, got "
                         "\"%s\"",
                         optarg);
                return -1;
            }
            break;
        case OPT_MINBW:
            errno = 0;
            o->min_busbw = strtod(optarg, &end);
            if (errno != 0 || end == optarg || *end != '\0' ||
                !isfinite(o->min_busbw) || o->min_busbw < 0 ||
                o->min_busbw > 1e6) {
                snprintf(err, errlen,
                         "--min-busbw: expected GB/s from 0 to 1000000, got "
                         "\"%s\"",
                         optarg);
                return -1;
            }
            break;
        case OPT_FALLBACK:
            if (optarg[0] == '\0' || strlen(optarg) > 200) {
                snprintf(err, errlen,
                         "--fallback-conf: expected a path of 1 to 200 "
                         "characters");
                return -1;
            }
            o->fallback_conf = optarg;
            break;
        case OPT_DIAG:
            o->diagnose = 1;
            break;
        case OPT_NODIAG:
            o->diagnose = 0;
            break;
        case OPT_REPORT:
            if (optarg[0] == '\0') {
                snprintf(err, errlen, "--report: expected a file name");
                return -1;
            }
            o->report = optarg;
            break;
        case OPT_TERMLOG:
            if (optarg[0] == '\0') {
                snprintf(err, errlen, "--termination-log: expected a path");
                return -1;
            }
            o->termination_log = optarg;
            o->termination_log_given = 1;
            break;
        case OPT_MULTINODE:
        case OPT_RDVPORT:
        case OPT_MNTIMEOUT:
        case OPT_ONMISSING:
            if (parse_multinode(c, optarg, o, err, errlen) != 0)
                return -1;
            break;
        case 'h':
        case OPT_HELP:
            o->help = 1;
            return 0;
        case ':':
            snprintf(err, errlen, "%s: missing value", argv[optind - 1]);
            return -1;
        default:
            snprintf(err, errlen, "unknown option \"%s\"", argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument \"%s\"", argv[optind]);
        return -1;
    }
    if (o->min_busbw > 0 && o->bw_bytes == 0) {
        snprintf(err, errlen,
                 "--min-busbw needs the bandwidth phase, but --bw-bytes is 0");
        return -1;
    }
    if (!phase_given) {
        o->phase_timeout_s = o->timeout_s / 4;
        if (o->phase_timeout_s < 10)
            o->phase_timeout_s = o->timeout_s < 10 ? o->timeout_s : 10;
    }
    if (o->phase_timeout_s > o->timeout_s)
        o->phase_timeout_s = o->timeout_s;
    return 0;
}
