/* ncclguard-watchdog: the node agent's command line. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/opts.h"
#include "contract/wdspec.h"
#include "watchdog/agent.h"
#include "watchdog/event.h"

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: ncclguard-watchdog [options]\n"
            "  --proc DIR            /proc root to read (default /proc)\n"
            "  --nvml PATH           NVML library to dlopen (default\n"
            "                        libnvidia-ml.so.1; env "
            "NCCLGUARD_NVML_LIBRARY)\n"
            "  --scan DURATION       how often /proc is walked (default 5s)\n"
            "  --nvml-retry DURATION retry a missing NVML (default 60s)\n"
            "  --metrics-addr ADDR   /metrics address (default 0.0.0.0;\n"
            "                        \"off\" disables)\n"
            "  --metrics-port N      /metrics port (default 9464; 0 = any)\n"
            "  --port-file PATH      write the bound metrics port here\n"
            "  --api-server URL      post Events here (default from\n"
            "                        KUBERNETES_SERVICE_HOST/PORT; \"off\")\n"
            "  --token-file PATH     service-account token\n"
            "  --ca-file PATH        service-account CA bundle\n"
            "  --node-name NAME      Event source host (env NODE_NAME)\n"
            "  --termination-log P   hang report path inside the container\n"
            "                        (default /dev/termination-log; \"\" "
            "off)\n"
            "  --pod-from-env        accept NCCLGUARD_POD_UID when the cgroup\n"
            "                        names no pod (tests, non-kubelet hosts)\n"
            "  --run-for DURATION    stop after this long (tests)\n"
            "  --max-procs N         processes watched on the node before\n"
            "                        each pod is held to its share (4096)\n"
            "  -v, --verbose         one log line per pod per period\n"
            "  --check-spec VALUE    parse an NCCLGUARD_WATCHDOG value, print\n"
            "                        it in canonical form, and exit\n");
}

/* Reads a duration option into *out; prints what is wrong and returns -1
 * when it is not a positive duration. */
static int
duration_opt(const char *name, const char *v, long long *out)
{
    struct ng_error e;
    int64_t ms;

    if (wd_duration_arg(v, 0, &ms, &e) != 0) {
        fprintf(stderr, "ncclguard-watchdog: --%s: %s\n", name, e.msg);
        return -1;
    }
    *out = ms;
    return 0;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"proc", required_argument, NULL, 'p'},
        {"nvml", required_argument, NULL, 'n'},
        {"scan", required_argument, NULL, 's'},
        {"nvml-retry", required_argument, NULL, 'r'},
        {"metrics-addr", required_argument, NULL, 'a'},
        {"metrics-port", required_argument, NULL, 'P'},
        {"port-file", required_argument, NULL, 'f'},
        {"api-server", required_argument, NULL, 'A'},
        {"token-file", required_argument, NULL, 'T'},
        {"ca-file", required_argument, NULL, 'C'},
        {"node-name", required_argument, NULL, 'N'},
        {"termination-log", required_argument, NULL, 'L'},
        {"pod-from-env", no_argument, NULL, 'E'},
        {"run-for", required_argument, NULL, 'R'},
        {"max-procs", required_argument, NULL, 'M'},
        {"verbose", no_argument, NULL, 'v'},
        {"check-spec", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    static char api[300];
    struct wd_options o;
    const char *env;
    int c, rc;

    wd_options_defaults(&o);
    if ((env = getenv("NCCLGUARD_NVML_LIBRARY")) != NULL && env[0] != '\0')
        o.nvml_path = env;
    o.node_name = getenv("NODE_NAME");
    if (opts_in_cluster_api(api, sizeof(api)) != NULL)
        o.api_server = api;
    while ((c = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
        long v;

        switch (c) {
        case 'p':
            o.proc_root = optarg;
            break;
        case 'n':
            o.nvml_path = optarg;
            break;
        case 's':
            if (duration_opt("scan", optarg, &o.scan_ms) != 0)
                return 2;
            break;
        case 'r':
            if (duration_opt("nvml-retry", optarg, &o.nvml_retry_ms) != 0)
                return 2;
            break;
        case 'a':
            o.metrics_addr = strcmp(optarg, "off") == 0 ? NULL : optarg;
            break;
        case 'P':
            if (opts_long(optarg, 0, 65535, &v) != 0) {
                fprintf(stderr,
                        "ncclguard-watchdog: --metrics-port must be 0 to "
                        "65535, got \"%s\"\n",
                        optarg);
                return 2;
            }
            o.metrics_port = (int)v;
            break;
        case 'f':
            o.port_file = optarg;
            break;
        case 'M':
            if (opts_long(optarg, 1, 1000000, &v) != 0) {
                fprintf(stderr,
                        "ncclguard-watchdog: --max-procs must be 1 to "
                        "1000000, got \"%s\"\n",
                        optarg);
                return 2;
            }
            o.node_max_procs = v;
            break;
        case 'A':
            o.api_server = strcmp(optarg, "off") == 0 ? NULL : optarg;
            break;
        case 'T':
            o.token_file = optarg;
            break;
        case 'C':
            o.ca_file = optarg;
            break;
        case 'N':
            o.node_name = optarg;
            break;
        case 'L':
            o.termination_log = optarg;
            break;
        case 'E':
            o.pod_from_env = true;
            break;
        case 'R':
            if (duration_opt("run-for", optarg, &o.run_ms) != 0)
                return 2;
            break;
        case 'v':
            o.verbose = true;
            break;
        case 'c': {
            struct wd_spec s;
            struct ng_error e;
            char buf[512];

            if (wd_spec_parse(optarg, strlen(optarg), &s, &e) != 0) {
                fprintf(stderr, "ncclguard-watchdog: %s: %s\n", WD_ENV_NAME,
                        e.msg);
                return 1;
            }
            if (wd_spec_format(&s, buf, sizeof(buf)) != 0)
                return 1;
            printf("%s\n", buf);
            return 0;
        }
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "ncclguard-watchdog: unexpected argument \"%s\"\n",
                argv[optind]);
        return 2;
    }
    if (wd_event_global_init() != 0) {
        fprintf(stderr, "ncclguard-watchdog: libcurl failed to start\n");
        return 1;
    }
    rc = wd_agent_run(&o);
    wd_event_global_cleanup();
    return rc;
}
