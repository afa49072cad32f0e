/* The watchdog env: the agent's spec, the pod's identity, NCCL's RAS
 * address, PyTorch's flight recorder, the checkpoint folder. */
#include "admission/plan_watchdog.h"

#include <stdio.h>
#include <string.h>

#include "admission/plan_names.h"
#include "contract/wdspec.h"

/* An env entry whose value comes from the Downward API (fieldRef). */
static int
env_add_field(struct ctr *c, const char *name, const char *field)
{
    json_t *e;

    if (env_has(c, name))
        return 0;
    e = json_pack("{s:s,s:{s:{s:s}}}", "name", name, "valueFrom", "fieldRef",
                  "fieldPath", field);
    return e ? json_array_append_new(add_list(&c->env_add), e) : -1;
}

/*
 * What lets the agent confirm a hang and name its culprit
 * (docs/watchdog.md): NCCL's RAS (2.24+) listening on the pod's own IP,
 * where the agent connects from the node, instead of the default
 * localhost:28028 that only the pod reaches (NCCL_RAS_ADDR, NCCL's
 * environment variables; the pod IP from the Downward API, status.podIP);
 * and, when the watchdog has a folder of its own in the pod (the
 * checkpoint file's), PyTorch's flight recorder: a trace buffer
 * (TORCH_NCCL_TRACE_BUFFER_SIZE), the FIFO per rank that an outside
 * process writes to ask for a dump (TORCH_NCCL_DEBUG_INFO_PIPE_FILE, the
 * DumpPipe of ProcessGroupNCCL) and the dump's file stem
 * (TORCH_NCCL_DEBUG_INFO_TEMP_FILE), both on that volume. A variable the
 * pod sets itself wins: env_add() never replaces one.
 */
static int
plan_watchdog_confirm(struct ctr *c, const char *dir)
{
    char path[WD_FILE_MAX + 64];
    if (!env_has(c, "NCCL_RAS_ADDR") &&
        (env_add_field(c, "NCCLGUARD_POD_IP", "status.podIP") != 0 ||
         env_add(c, "NCCL_RAS_ADDR", "$(NCCLGUARD_POD_IP):28028") != 0))
        return -1;
    if (dir[0] == '\0' || strcmp(dir, "/") == 0)
        return 0; /* no volume of the pod's to dump on */
    if (env_add(c, "TORCH_NCCL_TRACE_BUFFER_SIZE", "2000") != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/nccl_trace_pipe_", dir);
    if (env_add(c, "TORCH_NCCL_DEBUG_INFO_PIPE_FILE", path) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/nccl_trace_rank_", dir);
    return env_add(c, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", path);
}

/*
 * NCCLGUARD_WATCHDOG for each GPU container when the policy enables the
 * watchdog, written with the agent's own writer (contract/wdspec.c), with
 * the pod's termination grace as the SIGTERM -> SIGKILL delay; the pod's
 * name, namespace and UID through the Downward API, for the agent's
 * Events; and, when a checkpoint file is configured, an emptyDir mounted
 * at its folder so that the agent can write it and the job can poll it.
 */
int
plan_watchdog(struct plan *p)
{
    const struct settings *s = p->s;
    const json_t *tg =
        json_object_get(p->spec, "terminationGracePeriodSeconds");
    struct wd_spec w;
    char value[512], dir[WD_FILE_MAX + 1] = "", vname[256] = "";
    const char *file = s->watchdog.checkpoint_file;
    bool any = false;

    if (!s->watchdog.enabled)
        return 0;
    wd_spec_defaults(&w);
    w.period_ms = s->watchdog.period_ms;
    w.idle_periods = s->watchdog.idle_periods;
    w.min_cpu_milli = s->watchdog.min_cpu_milli;
    w.action = s->watchdog.restart ? WD_ACTION_RESTART : WD_ACTION_REPORT;
    w.checkpoint_signal = s->watchdog.checkpoint_signal;
    w.grace_ms = s->watchdog.grace_ms;
    if (json_is_integer(tg) && json_integer_value(tg) >= 0)
        w.term_ms = json_integer_value(tg) > WD_TERM_MAX_MS / 1000
                        ? WD_TERM_MAX_MS
                        : json_integer_value(tg) * 1000;
    if (file != NULL && file[0] != '\0') {
        char *slash;

        snprintf(w.checkpoint_file, sizeof(w.checkpoint_file), "%s", file);
        snprintf(dir, sizeof(dir), "%s", file);
        slash = strrchr(dir, '/');
        if (slash == dir)
            slash[1] = '\0'; /* a file right under / */
        else if (slash != NULL)
            *slash = '\0';
    }
    if (wd_spec_format(&w, value, sizeof(value)) != 0)
        return -1;
    for (size_t i = 0; i < p->n_ctr; i++) {
        struct ctr *c = &p->ctr[i];

        if (c->gpus == 0 || (c->init && !c->sidecar))
            continue;
        if (env_add(c, WD_ENV_NAME, value) != 0 ||
            env_add_field(c, "NCCLGUARD_POD_NAME", "metadata.name") != 0 ||
            env_add_field(c, "NCCLGUARD_POD_NAMESPACE", "metadata.namespace") !=
                0 ||
            env_add_field(c, "NCCLGUARD_POD_UID", "metadata.uid") != 0 ||
            plan_watchdog_confirm(c, dir) != 0)
            return -1;
        any = true;
        if (w.checkpoint_file[0] == '\0' || strcmp(dir, "/") == 0 ||
            mount_at(c, dir) != NULL)
            continue; /* the pod already mounts something there */
        if (vname[0] == '\0') {
            json_t *v;

            if (volume_name_unique(p, "ncclguard-watchdog", vname,
                                   sizeof(vname)) != 0)
                return -1;
            v = jobj("name", jstr(vname), "emptyDir", json_object());
            if (v == NULL || json_array_append_new(p->vol_add, v) != 0)
                return -1;
        }
        if (mount_add(c, vname, dir, false) != 0)
            return -1;
    }
    if (any)
        injected_add(p->res, "watchdog");
    return 0;
}
