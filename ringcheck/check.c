/* Runs the ring check's phases through the supervisor, diagnoses a
 * failure with fresh workers, and decides and tells the outcome. */
#include "check.h"

#include "multinode.h"
#include "ncclenv.h"
#include "report.h"
#include "supervisor.h"
#include "worker.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

extern char **environ;

/* The settings diagnosis tries, one at a time, in this order. */
static const struct setting {
    const char *name, *value, *transport, *why;
} settings[] = {
    {"NCCL_P2P_DISABLE", "1", "P2P",
     "GPU peer-to-peer is broken between these GPUs; the usual cause is "
     "PCIe ACS or the IOMMU on the node, or a GPU that reports peer access "
     "it cannot do"},
    {"NCCL_SHM_DISABLE", "1", "SHM",
     "the shared-memory transport fails; /dev/shm is usually too small or "
     "not shared between the processes (see the webhook's shm.perGPU)"},
    {"NCCL_NVLS_ENABLE", "0", "NVLS",
     "NVLink SHARP (NVSwitch multicast) fails; check nvidia-fabricmanager "
     "and the NVSwitch state on the node"},
    {"NCCL_CUMEM_ENABLE", "0", "cuMem",
     "cuMem IPC handles between processes fail; check the driver version "
     "and that the pod's processes may share them (IPC, fabric handles)"},
};

#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

static struct rc_report rep;
static struct rc_run scratch;
static double deadline;

static void set_failure(int code, int phase, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
set_failure(int code, int phase, const char *fmt, ...)
{
    va_list ap;

    rep.code = code;
    rep.phase = phase;
    va_start(ap, fmt);
    vsnprintf(rep.what, sizeof(rep.what), fmt, ap);
    va_end(ap);
}

static void set_fix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
set_fix(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(rep.fix, sizeof(rep.fix), fmt, ap);
    va_end(ap);
}

static void
take_run_failure(const struct rc_run *run)
{
    rep.code = run->code;
    rep.phase = run->phase;
    snprintf(rep.what, sizeof(rep.what), "%s", run->what);
    snprintf(rep.ranks, sizeof(rep.ranks), "%s", run->ranks);
    snprintf(rep.warn, sizeof(rep.warn), "%s", run->warn);
}

/* Phase 0, without CUDA: the NCCL_* variables against the catalog. */
static void
preflight_env(void)
{
    int n = 0;

    for (char **e = environ; *e != NULL; e++) {
        const char *eq = strchr(*e, '=');
        char name[128];
        struct ncclenv_finding f;
        size_t len;

        if (eq == NULL || (strncmp(*e, "NCCL_", 5) != 0 &&
                           strncmp(*e, "TORCH_NCCL_", 11) != 0))
            continue;
        len = (size_t)(eq - *e);
        if (len >= sizeof(name))
            len = sizeof(name) - 1;
        memcpy(name, *e, len);
        name[len] = '\0';
        n++;
        memset(&f, 0, sizeof(f));
        if (ncclenv_check(name, eq + 1, &f) != NCCLENV_OK) {
            report_log("phase 0 preflight: warning: %s=%s: %s", name, eq + 1,
                       f.msg);
            rep.nwarnings++;
        }
    }
    report_log("phase 0 preflight: %d NCCL variables checked against the "
               "NCCL %s catalog",
               n, ncclenv_catalog_version());
}

static size_t
env_size(const char *name, size_t dflt)
{
    const char *v = getenv(name);
    char *end;
    unsigned long long l;

    if (v == NULL || *v < '0' || *v > '9')
        return dflt;
    errno = 0;
    l = strtoull(v, &end, 0);
    if (errno != 0 || *end != '\0')
        return dflt;
    return (size_t)l;
}

static int
env_is(const char *name, const char *value)
{
    const char *v = getenv(name);

    return v != NULL && strcmp(v, value) == 0;
}

/*
 * /dev/shm against a lower bound of what NCCL's shared-memory transport
 * needs between processes: each rank keeps two ring connections, each with
 * the Simple, LL128 and LL buffers (about 2.3 x NCCL_BUFFSIZE). One process
 * driving all GPUs does not use it, nor does NCCL_SHM_DISABLE=1.
 */
static int
preflight_shm(int ndev)
{
    struct statvfs sv;
    double buffsize = (double)env_size("NCCL_BUFFSIZE", (size_t)4 << 20);

    if (rep.opts->group || env_is("NCCL_SHM_DISABLE", "1") || ndev < 2)
        return 0;
    if (statvfs("/dev/shm", &sv) != 0) {
        report_log("phase 0 preflight: warning: cannot read /dev/shm (%s); "
                   "NCCL needs it between processes",
                   strerror(errno));
        rep.nwarnings++;
        return 0;
    }
    rep.shm_free_mib = (double)sv.f_bavail * (double)sv.f_frsize / 1048576.0;
    rep.shm_need_mib = ndev * 2 * 2.3 * buffsize / 1048576.0;
    report_log("phase 0 preflight: /dev/shm has %.0f MiB free; NCCL needs "
               "about %.0f MiB for %d GPUs",
               rep.shm_free_mib, rep.shm_need_mib, ndev);
    if (rep.shm_free_mib < rep.shm_need_mib) {
        set_failure(RC_EXIT_ENV, 0,
                    "/dev/shm too small: %.0f MiB free, NCCL needs about "
                    "%.0f MiB for %d GPUs (NCCL_BUFFSIZE %.0f)",
                    rep.shm_free_mib, rep.shm_need_mib, ndev, buffsize);
        set_fix("mount a memory-backed /dev/shm of at least %.0f MiB (the "
                "webhook's shm.perGPU), or set NCCL_SHM_DISABLE=1",
                rep.shm_need_mib);
        return -1;
    }
    return 0;
}

static void
preflight_memlock(void)
{
    struct rlimit rl;
    DIR *d;
    struct dirent *de;
    int ib = 0;

    if (env_is("NCCL_IB_DISABLE", "1"))
        return;
    d = opendir("/sys/class/infiniband");
    if (d == NULL)
        return;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            ib++;
    closedir(d);
    if (ib == 0 || getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
        return;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < ((rlim_t)64 << 20)) {
        report_log("phase 0 preflight: warning: InfiniBand is enabled (%d "
                   "devices) but the memlock limit is %llu KiB; NCCL's IB "
                   "transport may fail to register memory",
                   ib, (unsigned long long)rl.rlim_cur >> 10);
        rep.nwarnings++;
    } else {
        report_log("phase 0 preflight: InfiniBand enabled (%d devices), "
                   "memlock limit ok",
                   ib);
    }
}

static void
sv_spec_base(struct sv_spec *s, enum sv_kind kind)
{
    memset(s, 0, sizeof(*s));
    s->kind = kind;
    s->group = rep.opts->group;
    s->ndev = rep.ndev;
    memcpy(s->dev, rep.dev, sizeof(s->dev));
    s->phase_timeout_s = rep.opts->phase_timeout_s;
    s->deadline = deadline;
    s->label = "";
}

static int
check_preflight(void)
{
    struct sv_spec s;
    const struct rc_opts *o = rep.opts;
    struct rc_run *p = &rep.pre;

    report_log("phase 0 preflight: starting");
    preflight_env();
    sv_spec_base(&s, SV_PREFLIGHT);
    if (sv_run(&s, p) != 0) {
        take_run_failure(p);
        if (rep.code == RC_EXIT_ENV)
            set_fix("run the pod on a GPU node with the NVIDIA driver, "
                    "request its GPUs (nvidia.com/gpu) and use the NVIDIA "
                    "container runtime");
        return -1;
    }
    report_log("phase 0 preflight: NCCL %d.%d.%d, CUDA runtime %d.%d, driver "
               "%d.%d; %d GPUs visible, %d expected",
               p->nccl_version / 10000, p->nccl_version / 100 % 100,
               p->nccl_version % 100, p->cuda_runtime / 1000,
               p->cuda_runtime % 1000 / 10, p->cuda_driver / 1000,
               p->cuda_driver % 1000 / 10, p->ngpus, o->expect_gpus);
    if (p->ngpus <= 0) {
        set_failure(RC_EXIT_ENV, 0,
                    "no usable GPU: the CUDA runtime sees "
                    "no device");
        set_fix("request GPUs for this container (nvidia.com/gpu) and run it "
                "with the NVIDIA container runtime");
        return -1;
    }
    if (o->expect_gpus > 0 && p->ngpus != o->expect_gpus) {
        set_failure(RC_EXIT_ENV, 0,
                    "GPU count mismatch: %d visible, %d expected", p->ngpus,
                    o->expect_gpus);
        set_fix("check the device plugin and CUDA_VISIBLE_DEVICES / "
                "NVIDIA_VISIBLE_DEVICES: the pod must see exactly the GPUs "
                "it requested");
        return -1;
    }
    rep.ndev = p->ngpus < WORKER_MAX_GPUS ? p->ngpus : WORKER_MAX_GPUS;
    for (int i = 0; i < rep.ndev; i++) {
        rep.dev[i] = i;
        report_log("phase 0 preflight: GPU %d: %s, %s, %lu MiB, uuid %s", i,
                   p->gpu[i].name, p->gpu[i].busid, p->gpu[i].total_mib,
                   p->gpu[i].uuid);
    }
    for (int i = 0; i < rep.ndev; i++)
        for (int j = i + 1; j < rep.ndev; j++)
            if (strcmp(p->gpu[i].busid, p->gpu[j].busid) == 0 ||
                strcmp(p->gpu[i].uuid, p->gpu[j].uuid) == 0) {
                set_failure(RC_EXIT_ENV, 0,
                            "duplicate devices: GPU %d and GPU %d are the "
                            "same GPU (%s)",
                            i, j, p->gpu[i].busid);
                snprintf(rep.gpus, sizeof(rep.gpus), "GPU %d and GPU %d", i, j);
                set_fix("the container sees one GPU twice: check the device "
                        "plugin and CUDA_VISIBLE_DEVICES");
                return -1;
            }
    if (preflight_shm(rep.ndev) != 0)
        return -1;
    preflight_memlock();
    return 0;
}

static int
check_devices(void)
{
    struct sv_spec s;
    struct rc_run *p = &rep.pre;
    unsigned long min_free = 0;

    /* The devices run fills its own struct; keep the preflight's. */
    sv_spec_base(&s, SV_DEVICES);
    report_log("phase 1 devices: allocate, memset and synchronize on %d "
               "GPUs",
               rep.ndev);
    if (sv_run(&s, &scratch) != 0) {
        take_run_failure(&scratch);
        if (rep.code == RC_EXIT_TIMEOUT)
            set_fix("a GPU does not respond: check nvidia-smi and the "
                    "kernel log for Xid errors; drain the node if it "
                    "repeats");
        else
            set_fix("check the GPU with nvidia-smi and the kernel log for "
                    "Xid errors");
        return -1;
    }
    for (int i = 0; i < rep.ndev; i++) {
        int d = rep.dev[i];

        p->gpu[d].free_mib = scratch.gpu[d].free_mib;
        if (min_free == 0 || p->gpu[d].free_mib < min_free)
            min_free = p->gpu[d].free_mib;
        report_log("phase 1 devices: GPU %d ok, %lu MiB free", d,
                   p->gpu[d].free_mib);
    }
    memcpy(p->access, scratch.access, sizeof(p->access));
    memcpy(p->perf, scratch.perf, sizeof(p->perf));
    p->topo_done = 1;
    report_log("phase 2 topology: peer access matrix");
    report_topology(&rep);
    rep.bw_bytes = rep.opts->bw_bytes;
    /* Send and receive buffers plus headroom for NCCL itself. */
    if (rep.bw_bytes > 0 && min_free > 0 &&
        rep.bw_bytes / 1048576 * 4 > min_free) {
        rep.bw_bytes = (size_t)(min_free / 4) << 20;
        if (rep.bw_bytes == 0)
            rep.bw_bytes = (size_t)1 << 20;
        report_log("phase 5 bandwidth: memory is short (%lu MiB free); "
                   "using %zu bytes instead of %zu",
                   min_free, rep.bw_bytes, rep.opts->bw_bytes);
    }
    return 0;
}

static double
run_busbw(const struct rc_run *run, int n, double *algbw)
{
    for (int i = 0; i < run->nrows; i++) {
        const struct rc_row *row = &run->rows[i];

        if (row->timed && row->time_us > 0) {
            double a = (double)row->bytes / row->time_us / 1e3;

            if (algbw != NULL)
                *algbw = a;
            return n > 1 ? a * 2.0 * (n - 1) / n : a;
        }
    }
    return -1;
}

static long
run_wrong(const struct rc_run *run, unsigned long long *ranks, char *first,
          size_t len)
{
    long total = 0;

    *ranks = 0;
    if (first != NULL)
        first[0] = '\0';
    for (int i = 0; i < run->nrows; i++) {
        const struct rc_row *row = &run->rows[i];

        if (row->wrong > 0 && first != NULL && first[0] == '\0')
            snprintf(first, len, "%s int32 %zu B", row->op, row->bytes);
        total += row->wrong;
        *ranks |= row->wrong_ranks;
    }
    return total;
}

/* The verdict on one ring run: its own failure, else wrong results, else
 * bandwidth (when asked). */
static int
judge(const struct rc_run *run, int n, int check_bw)
{
    unsigned long long wr;
    double bw;

    if (run->code != 0)
        return run->code;
    if (run_wrong(run, &wr, NULL, 0) > 0)
        return RC_EXIT_WRONG;
    bw = run_busbw(run, n, NULL);
    if (check_bw && rep.opts->min_busbw > 0 && bw >= 0 &&
        bw < rep.opts->min_busbw)
        return RC_EXIT_BANDWIDTH;
    return 0;
}

static void
ranks_to_gpus(const char *ranks, const int *dev, int ndev, char *buf,
              size_t len)
{
    const char *p = ranks;
    size_t n = 0;

    buf[0] = '\0';
    while (*p != '\0') {
        char *end;
        long r = strtol(p, &end, 10);

        if (end == p)
            break;
        if (r >= 0 && r < ndev && n < len)
            n += (size_t)snprintf(buf + n, len - n, "%sGPU %d (%s)",
                                  n > 0 ? ", " : "", dev[r],
                                  rep.pre.gpu[dev[r]].busid);
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0')
            break;
    }
}

static void
check_ring_result(void)
{
    struct rc_run *g = &rep.ring;
    unsigned long long wr;
    char first[64];
    int code;

    rep.wrong_total = run_wrong(g, &wr, first, sizeof(first));
    rep.busbw = run_busbw(g, rep.ndev, &rep.algbw);
    code = judge(g, rep.ndev, 1);
    if (code == 0)
        return;
    if (g->code != 0) {
        take_run_failure(g);
    } else if (code == RC_EXIT_WRONG) {
        rep.code = code;
        rep.phase = 4;
        rep.ranks[0] = '\0';
        for (int r = 0; r < rep.ndev && r < 64; r++)
            if (wr & (1ULL << r)) {
                size_t n = strlen(rep.ranks);
                snprintf(rep.ranks + n, sizeof(rep.ranks) - n, "%s%d",
                         n > 0 ? "," : "", r);
            }
        snprintf(rep.what, sizeof(rep.what),
                 "wrong results: %ld values differ, first in %s, on "
                 "ranks %s",
                 rep.wrong_total, first, rep.ranks);
        snprintf(rep.warn, sizeof(rep.warn), "%s", g->warn);
    } else {
        rep.code = code;
        rep.phase = 5;
        snprintf(rep.what, sizeof(rep.what),
                 "bus bandwidth %.2f GB/s is below --min-busbw %.2f GB/s "
                 "(AllReduce %zu B, algbw %.2f GB/s)",
                 rep.busbw, rep.opts->min_busbw, rep.bw_bytes, rep.algbw);
        snprintf(rep.warn, sizeof(rep.warn), "%s", g->warn);
    }
}

/* One diagnostic run on devs with one override; 1 passes, 0 fails,
 * -1 ran out of time. */
static int
try_run(const int *devs, int n, const struct setting *set, const char *why)
{
    struct sv_spec s;
    int code;
    int check_bw = rep.phase == 5;

    if (deadline - sv_now() < 0.5)
        return -1;
    sv_spec_base(&s, SV_RING);
    s.ndev = n;
    memcpy(s.dev, devs, sizeof(int) * (size_t)n);
    s.bw_bytes = check_bw ? rep.bw_bytes : 0;
    s.label = "diagnosis: ";
    if (set != NULL) {
        s.env_name = set->name;
        s.env_value = set->value;
    }
    sv_run(&s, &scratch);
    if (scratch.overall_timeout)
        return -1;
    code = judge(&scratch, n, check_bw);
    {
        char list[96] = "";
        size_t k = 0;

        for (int i = 0; i < n && k < sizeof(list); i++)
            k += (size_t)snprintf(list + k, sizeof(list) - k, "%s%d",
                                  i > 0 ? "," : "", devs[i]);
        report_log("diagnosis: GPUs %s%s%s%s%s: %s%s%s", list,
                   set != NULL ? " with " : "", set != NULL ? set->name : "",
                   set != NULL ? "=" : "", set != NULL ? set->value : "",
                   code == 0 ? "pass" : report_code_name(code),
                   why != NULL ? " " : "", why != NULL ? why : "");
    }
    if (code != 0 && rep.warn[0] == '\0' && scratch.warn[0] != '\0')
        snprintf(rep.warn, sizeof(rep.warn), "%s", scratch.warn);
    return code == 0;
}

/* Narrows a failing set of devices down to one failing pair. */
static int
find_pair(const int *set, int n, int pair[2])
{
    int h = n / 2;
    int r;

    if (n == 2) {
        pair[0] = set[0];
        pair[1] = set[1];
        return 1;
    }
    if (h >= 2) {
        r = try_run(set, h, NULL, "(first half)");
        if (r < 0)
            return -1;
        if (r == 0)
            return find_pair(set, h, pair);
    }
    if (n - h >= 2) {
        r = try_run(set + h, n - h, NULL, "(second half)");
        if (r < 0)
            return -1;
        if (r == 0)
            return find_pair(set + h, n - h, pair);
    }
    for (int a = 0; a < h; a++)
        for (int b = h; b < n; b++) {
            int two[2] = {set[a], set[b]};

            r = try_run(two, 2, NULL, "(pair across halves)");
            if (r < 0)
                return -1;
            if (r == 0) {
                pair[0] = two[0];
                pair[1] = two[1];
                return 1;
            }
        }
    return 0;
}

static void
diagnose(void)
{
    const struct rc_opts *o = rep.opts;
    size_t n = 0;
    int r;

    rep.diag_ran = 1;
    report_log("diagnosis: rerunning in fresh workers to find what fails");
    for (size_t i = 0; i < NSETTINGS; i++) {
        const struct setting *s = &settings[i];

        if (env_is(s->name, s->value)) {
            report_log("diagnosis: %s=%s is already set; skipped", s->name,
                       s->value);
            continue;
        }
        r = try_run(rep.dev, rep.ndev, s, NULL);
        if (r < 0) {
            rep.diag_incomplete = 1;
            break;
        }
        if (r == 1) {
            snprintf(rep.cure, sizeof(rep.cure), "%s=%s", s->name, s->value);
            snprintf(rep.transport, sizeof(rep.transport), "%s", s->transport);
            break;
        }
    }
    if (!rep.diag_incomplete && o->diagnose && rep.ndev > 2) {
        r = find_pair(rep.dev, rep.ndev, rep.pair);
        if (r < 0)
            rep.diag_incomplete = 1;
        else if (r == 0)
            rep.pair[0] = rep.pair[1] = -1;
    } else if (rep.ndev == 2) {
        rep.pair[0] = rep.dev[0];
        rep.pair[1] = rep.dev[1];
    }
    if (rep.cure[0] != '\0')
        n += (size_t)snprintf(rep.diag_note + n, sizeof(rep.diag_note) - n,
                              "passes with %s (%s transport)", rep.cure,
                              rep.transport);
    else if (!rep.diag_incomplete)
        n += (size_t)snprintf(rep.diag_note + n, sizeof(rep.diag_note) - n,
                              "no single setting made it pass");
    if (rep.pair[0] >= 0 && n < sizeof(rep.diag_note))
        n += (size_t)snprintf(rep.diag_note + n, sizeof(rep.diag_note) - n,
                              "%sfailing pair GPU %d - GPU %d",
                              n > 0 ? "; " : "", rep.pair[0], rep.pair[1]);
    if (rep.diag_incomplete && n < sizeof(rep.diag_note))
        snprintf(rep.diag_note + n, sizeof(rep.diag_note) - n,
                 "%sincomplete: the check's deadline came first",
                 n > 0 ? "; " : "");
    report_log("diagnosis: %s", rep.diag_note);
}

static void
failure_fix(void)
{
    const struct setting *cure = NULL;

    for (size_t i = 0; i < NSETTINGS; i++)
        if (rep.cure[0] != '\0' &&
            strncmp(rep.cure, settings[i].name, strlen(settings[i].name)) == 0)
            cure = &settings[i];
    if (cure != NULL) {
        set_fix("set %s for this workload (the fallback file does that); "
                "%s",
                rep.cure, cure->why);
        return;
    }
    if (rep.fix[0] != '\0')
        return;
    switch (rep.code) {
    case RC_EXIT_TIMEOUT:
        set_fix("a GPU or link hangs: check nvidia-smi and the kernel log "
                "for Xid errors on the GPUs named above, rerun with "
                "NCCL_DEBUG=INFO; drain the node if it repeats");
        break;
    case RC_EXIT_WRONG:
        set_fix("the GPUs return wrong data: check ECC errors "
                "(nvidia-smi -q -d ECC) and Xid errors on the GPUs named "
                "above; drain the node");
        break;
    case RC_EXIT_BANDWIDTH:
        set_fix("check the topology (NVLink, PCIe width and generation), "
                "that no other job shares these GPUs, and the node's NCCL "
                "settings");
        break;
    case RC_EXIT_NCCL:
        set_fix("see the NCCL WARN line; rerun with NCCL_DEBUG=INFO for "
                "details");
        break;
    case RC_EXIT_CUDA:
        set_fix("check the driver with nvidia-smi and the kernel log for "
                "Xid errors");
        break;
    default:
        set_fix("an internal error of ncclguard-ringcheck; report it with "
                "this output");
        break;
    }
}

static void
describe_gpus(void)
{
    if (rep.pair[0] >= 0)
        snprintf(rep.gpus, sizeof(rep.gpus), "pair GPU %d (%s) - GPU %d (%s)",
                 rep.pair[0], rep.pre.gpu[rep.pair[0]].busid, rep.pair[1],
                 rep.pre.gpu[rep.pair[1]].busid);
    else if (rep.gpus[0] == '\0' && rep.ranks[0] != '\0' && rep.phase >= 3)
        ranks_to_gpus(rep.ranks, rep.dev, rep.ndev, rep.gpus, sizeof(rep.gpus));
}

static void
finish(double t0, int ring_ran)
{
    const struct rc_opts *o = rep.opts;
    static char json[16384];
    char verdict[4096];

    rep.result = "pass";
    rep.exit_code = 0;
    if (rep.code != 0) {
        describe_gpus();
        failure_fix();
        rep.result = "fail";
        rep.exit_code = rep.code;
        if (o->on_failure == RC_FALLBACK && rep.cure[0] != '\0') {
            char name[48];
            const char *eq = strchr(rep.cure, '=');

            snprintf(name, sizeof(name), "%.*s", (int)(eq - rep.cure),
                     rep.cure);
            if (getenv(name) != NULL) {
                report_log("fallback: %s=%s is set in the pod's environment "
                           "and would win over the fallback file",
                           name, getenv(name));
                set_fix("remove %s from the pod's environment (or set %s "
                        "there); the environment wins over the fallback file",
                        name, rep.cure);
            } else if (report_fallback_write(&rep, o->fallback_conf) != 0) {
                int err = errno;

                report_log("fallback: cannot write %s: %s", o->fallback_conf,
                           strerror(err));
                set_fix("the check passes with %s but cannot write the "
                        "fallback file %s (%s): mount the shared emptyDir "
                        "there, writable by the init container",
                        rep.cure, o->fallback_conf, strerror(err));
                rep.exit_code = RC_EXIT_INTERNAL;
            } else {
                rep.fallback_written = 1;
                rep.result = "fallback";
                rep.exit_code = 0;
                report_log("warning: fallback: wrote %s to %s; the workload "
                           "reads it through NCCL_CONF_FILE",
                           rep.cure, o->fallback_conf);
            }
        } else if (o->on_failure == RC_WARN) {
            rep.result = "warn";
            rep.exit_code = 0;
        }
    } else if (rep.mn_warn) {
        rep.result = "warn";
    } else if (o->on_failure == RC_FALLBACK) {
        /* Replace any stale file: the pod's own settings passed. */
        if (report_fallback_write(&rep, o->fallback_conf) == 0)
            rep.fallback_written = 1;
        else
            report_log("fallback: warning: cannot write %s: %s",
                       o->fallback_conf, strerror(errno));
    }
    rep.elapsed_s = sv_now() - t0;
    if (ring_ran)
        report_table(&rep);
    report_verdict(&rep, verdict, sizeof(verdict));
    for (char *line = verdict; *line != '\0';) {
        char *nl = strchr(line, '\n');

        if (nl != NULL)
            *nl = '\0';
        report_log("%s", line);
        if (nl == NULL)
            break;
        *nl = '\n';
        line = nl + 1;
    }
    if (report_json(&rep, json, sizeof(json)) != 0)
        report_log("warning: the JSON summary was cut short");
    printf("%s\n", json);
    fflush(stdout);
    if (o->report != NULL) {
        size_t n = strlen(json);

        if (n + 1 < sizeof(json)) {
            json[n] = '\n';
            json[n + 1] = '\0';
        }
        if (report_file_write(o->report, json) != 0)
            report_log("warning: cannot write the report %s: %s", o->report,
                       strerror(errno));
    }
    /* Outside Kubernetes the default path does not exist; do not create
     * a file in /dev then. */
    if (o->termination_log_given || access(o->termination_log, F_OK) == 0) {
        if (report_file_write(o->termination_log, verdict) != 0)
            report_log("warning: cannot write the termination message to "
                       "%s: %s",
                       o->termination_log, strerror(errno));
    }
}

int
check_run(const struct rc_opts *o)
{
    double t0 = sv_now();
    struct sv_spec s;
    int ring_ran = 0;

    memset(&rep, 0, sizeof(rep));
    rep.opts = o;
    rep.phase = -1;
    rep.pair[0] = rep.pair[1] = -1;
    rep.busbw = rep.algbw = -1;
    rep.pre.phase = -1;
    deadline = t0 + o->timeout_s;
    report_log("ncclguard-ringcheck: expect %d GPUs, mode %s, timeout %.1f "
               "s, phase timeout %.1f s, bandwidth size %zu B, on failure %s",
               o->expect_gpus, o->group ? "group" : "process", o->timeout_s,
               o->phase_timeout_s, o->bw_bytes,
               o->on_failure == RC_FAIL   ? "fail"
               : o->on_failure == RC_WARN ? "warn"
                                          : "fallback");
    if (check_preflight() != 0 || check_devices() != 0)
        goto done;
    ring_ran = 1;
    sv_spec_base(&s, SV_RING);
    s.bw_bytes = rep.bw_bytes;
    report_log("phase 3 nccl-init: %d ranks, %s", rep.ndev,
               o->group ? "one process for all GPUs (group init)"
                        : "one process per GPU");
    sv_run(&s, &rep.ring);
    check_ring_result();
    if (rep.code == 0) {
        if (rep.busbw >= 0)
            report_log("phase 5 bandwidth: AllReduce %zu B: algbw %.2f GB/s, "
                       "busbw %.2f GB/s",
                       rep.bw_bytes, rep.algbw, rep.busbw);
        goto done;
    }
    report_log("phase %d %s: FAILED: %s", rep.phase,
               report_phase_name(rep.phase), rep.what);
    if (rep.phase >= 3 && !rep.ring.overall_timeout &&
        (o->diagnose || o->on_failure == RC_FALLBACK))
        diagnose();
done:
    /* The other pods of a multi-node job wait for this one's result, so
     * the cross-node phase runs (and reports a local failure) whatever the
     * single-pod phases found. */
    mn_check(&rep);
    finish(t0, ring_ran);
    return rep.exit_code;
}
