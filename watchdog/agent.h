/* The watchdog agent: finds opted-in processes, groups them by pod, judges
 * each pod once per period and acts on a hang. */
#ifndef NCCLGUARD_WD_AGENT_H
#define NCCLGUARD_WD_AGENT_H

#include <stdbool.h>

/* Everything the command line sets. Strings are borrowed. */
struct wd_options {
    const char *proc_root;       /* "/proc" */
    const char *nvml_path;       /* "libnvidia-ml.so.1" */
    long long scan_ms;           /* how often /proc is walked: 5000 */
    long long nvml_retry_ms;     /* dlopen retry when missing: 60000 */
    const char *metrics_addr;    /* "0.0.0.0"; NULL = no /metrics */
    int metrics_port;            /* 0 = any (see port_file) */
    const char *port_file;       /* where the bound port is written */
    const char *api_server;      /* Events; NULL/"" = no Events */
    const char *token_file;      /* service-account token */
    const char *ca_file;         /* service-account CA */
    const char *node_name;       /* Event source host */
    const char *termination_log; /* in the container; "" = none */
    bool pod_from_env;           /* accept NCCLGUARD_POD_UID (tests) */
    bool verbose;                /* one log line per pod per period */
    long long run_ms;            /* stop after this long; 0 = never */
    long node_max_procs;         /* the node's work budget: 4096 */
};

/* Fills *o with the defaults above. */
void wd_options_defaults(struct wd_options *o);

/*
 * Runs the agent until SIGTERM or SIGINT (or run_ms). Logs one JSON line
 * per decision to stdout. Returns the process exit status: 0 after a
 * clean stop, 1 when it cannot start (the metrics port is taken). A
 * missing NVML is not a failure: the agent says so once and idles.
 */
int wd_agent_run(const struct wd_options *o);

#endif
