/* Runs the ring check's phases through the supervisor, diagnoses a
 * failure with fresh workers, and decides and tells the outcome. */
#include "ringcheck/check.h"

#include "contract/ncclenv.h"
#include "contract/profile_marker.h"
#include "ringcheck/multinode.h"
#include "ringcheck/netcheck.h"
#include "ringcheck/report.h"
#include "ringcheck/supervisor.h"
#include "ringcheck/topo.h"
#include "ringcheck/worker.h"

#include <dirent.h>
#include <errno.h>
#include <net/if.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
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
/* Index of NCCL_NVLS_ENABLE=0 in settings. */
#define SETTING_NVLS 2

/* A diagnosis rerun's phase timeout: a tenth of --timeout, at least
 * DIAG_PHASE_MIN_S and three times the longest phase the first ring run
 * finished, at most --phase-timeout. A rerun that hangs then costs a few
 * seconds, not a full phase, so the settings after it are still tried. */
#define DIAG_PHASE_MIN_S 3.0

/* One run of the check: what it found, a ck->scratch run for the devices phase
 * and the diagnosis, and the deadline. Passed to every step. */
struct check {
    struct rc_report rep;
    struct rc_run scratch;
    double deadline;
};

static void set_failure(struct check *ck, int code, int phase, const char *fmt,
                        ...) __attribute__((format(printf, 4, 5)));

static void
set_failure(struct check *ck, int code, int phase, const char *fmt, ...)
{
    va_list ap;

    ck->rep.code = code;
    ck->rep.phase = phase;
    va_start(ap, fmt);
    vsnprintf(ck->rep.what, sizeof(ck->rep.what), fmt, ap);
    va_end(ap);
}

static void set_fix(struct check *ck, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
set_fix(struct check *ck, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(ck->rep.fix, sizeof(ck->rep.fix), fmt, ap);
    va_end(ap);
}

static void
take_run_failure(struct check *ck, const struct rc_run *run)
{
    ck->rep.code = run->code;
    ck->rep.phase = run->phase;
    snprintf(ck->rep.what, sizeof(ck->rep.what), "%s", run->what);
    snprintf(ck->rep.ranks, sizeof(ck->rep.ranks), "%s", run->ranks);
    snprintf(ck->rep.warn, sizeof(ck->rep.warn), "%s", run->warn);
}

static void preflight_profile(struct check *ck);

/* Phase 0, without CUDA: the NCCL_* variables against the catalog. */
static void
preflight_env(struct check *ck)
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
            ck->rep.nwarnings++;
        }
    }
    report_log("phase 0 preflight: %d NCCL variables checked against the "
               "NCCL %s catalog",
               n, ncclenv_catalog_version());
    preflight_profile(ck);
    if (getenv("NCCL_COMM_ID") != NULL) {
        report_log("phase 0 preflight: warning: NCCL_COMM_ID=%s is set in "
                   "the pod: every NCCL unique id then carries that one "
                   "address, so the checks of the job's other pods would "
                   "collide; the check's workers run without it (the "
                   "workload still gets it)",
                   getenv("NCCL_COMM_ID"));
        ck->rep.nwarnings++;
    }
}

/*
 * Phase 0: whether the platform's NCCL profile reached this pod. The webhook
 * sets PROFILE_EXPECTED_ENV on the check to the profile's name, and the
 * profile ConfigMap carries PROFILE_MARKER_KEY with that name; envFrom is
 * optional, so a namespace without the ConfigMap starts the pod without the
 * platform's NCCL settings and nothing else says so.
 */
static void
preflight_profile(struct check *ck)
{
    const char *want = getenv(PROFILE_EXPECTED_ENV);
    const char *got = getenv(PROFILE_MARKER_KEY);

    if (want == NULL || *want == '\0')
        return;
    if (got == NULL) {
        report_log("phase 0 preflight: warning: the NCCL profile %s did not "
                   "reach this pod (no %s): the ConfigMap %s is missing in "
                   "this namespace, so the workload starts without the "
                   "platform's NCCL settings; copy it here "
                   "(deploy/components/nccl-profile)",
                   want, PROFILE_MARKER_KEY, want);
        ck->rep.nwarnings++;
    } else if (strcmp(got, want) != 0) {
        report_log("phase 0 preflight: warning: %s=%s, but the policy "
                   "expects the NCCL profile %s: the ConfigMap in this "
                   "namespace is another one, or its %s key is wrong",
                   PROFILE_MARKER_KEY, got, want, PROFILE_MARKER_KEY);
        ck->rep.nwarnings++;
    }
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
preflight_shm(struct check *ck, int ndev)
{
    struct statvfs sv;
    double buffsize = (double)env_size("NCCL_BUFFSIZE", (size_t)4 << 20);

    if (ck->rep.opts->group || env_is("NCCL_SHM_DISABLE", "1") || ndev < 2)
        return 0;
    if (statvfs("/dev/shm", &sv) != 0) {
        report_log("phase 0 preflight: warning: cannot read /dev/shm (%s); "
                   "NCCL needs it between processes",
                   strerror(errno));
        ck->rep.nwarnings++;
        return 0;
    }
    ck->rep.shm_free_mib =
        (double)sv.f_bavail * (double)sv.f_frsize / 1048576.0;
    ck->rep.shm_need_mib = ndev * 2 * 2.3 * buffsize / 1048576.0;
    report_log("phase 0 preflight: /dev/shm has %.0f MiB free; NCCL needs "
               "about %.0f MiB for %d GPUs",
               ck->rep.shm_free_mib, ck->rep.shm_need_mib, ndev);
    if (ck->rep.shm_free_mib < ck->rep.shm_need_mib) {
        set_failure(ck, RC_EXIT_ENV, 0,
                    "/dev/shm too small: %.0f MiB free, NCCL needs about "
                    "%.0f MiB for %d GPUs (NCCL_BUFFSIZE %.0f)",
                    ck->rep.shm_free_mib, ck->rep.shm_need_mib, ndev, buffsize);
        set_fix(ck,
                "mount a memory-backed /dev/shm of at least %.0f MiB (the "
                "webhook's shm.perGPU), or set NCCL_SHM_DISABLE=1",
                ck->rep.shm_need_mib);
        return -1;
    }
    return 0;
}

static const char *dev_root(void);

static void
preflight_memlock(struct check *ck)
{
    struct rlimit rl;
    int ib = 0;
    char why[700];

    if (env_is("NCCL_IB_DISABLE", "1"))
        return;
    /* IB is there only when the pod has the verbs devices too: sysfs
     * shows the host's HCAs in any pod. */
    ib =
        netcheck_ib_usable(netcheck_sysfs_root(), dev_root(), why, sizeof(why));
    if (ib == 0 && strstr(why, "uverbs") != NULL) {
        report_log("phase 0 preflight: warning: InfiniBand is not usable "
                   "here: %s; NCCL falls back to its socket transport",
                   why);
        ck->rep.nwarnings++;
    }
    if (ib == 0 || getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
        return;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < ((rlim_t)64 << 20)) {
        report_log("phase 0 preflight: warning: InfiniBand is enabled (%d "
                   "devices) but the memlock limit is %llu KiB; NCCL's IB "
                   "transport may fail to register memory",
                   ib, (unsigned long long)rl.rlim_cur >> 10);
        ck->rep.nwarnings++;
    } else {
        report_log("phase 0 preflight: InfiniBand enabled (%d devices), "
                   "memlock limit ok",
                   ib);
    }
}

/*
 * NCCL_SOCKET_IFNAME and NCCL_IB_HCA name interfaces that must exist in
 * this pod; a name that does not makes NCCL fail or hang at init, far less
 * clearly than this. Fails as an NCCL error (exit 3) in phase 0.
 */
static int
preflight_net(struct check *ck)
{
    struct netcheck_names have;
    const char *ifname = getenv("NCCL_SOCKET_IFNAME");
    const char *hca = getenv("NCCL_IB_HCA");
    char err[900];

    {
        static struct netcheck_if ifs[NETCHECK_MAX_NAMES];
        const char *fam = getenv("NCCL_SOCKET_FAMILY");
        int n = netcheck_if_list(ifs, NETCHECK_MAX_NAMES);
        int k = n > 0 ? netcheck_pick(ifs, n, ifname,
                                      fam == NULL                    ? 0
                                      : strcmp(fam, "AF_INET") == 0  ? AF_INET
                                      : strcmp(fam, "AF_INET6") == 0 ? AF_INET6
                                                                     : 0)
                      : -1;

        if (k >= 0)
            report_log("phase 0 preflight: NCCL's bootstrap and socket "
                       "interface: %s (%s)",
                       ifs[k].name, ifs[k].addr);
        else if (ifname == NULL || ifname[0] == '\0') {
            report_log("phase 0 preflight: warning: no running interface "
                       "with an IPv4 or IPv6 address that NCCL can use");
            ck->rep.nwarnings++;
        }
    }
    if (ifname != NULL && ifname[0] != '\0') {
        if (netcheck_interfaces(&have) != 0) {
            report_log("phase 0 preflight: warning: cannot list the network "
                       "interfaces: %s",
                       strerror(errno));
            ck->rep.nwarnings++;
        } else if (netcheck_ifname(ifname, &have, err, sizeof(err)) != 0) {
            set_failure(ck, RC_EXIT_NCCL, 0, "%s", err);
            set_fix(ck, "set NCCL_SOCKET_IFNAME to interfaces this pod has, "
                        "or attach the network it names to the pod (for "
                        "example its Multus or SR-IOV network)");
            return -1;
        } else {
            report_log("phase 0 preflight: NCCL_SOCKET_IFNAME=%s matches "
                       "this pod's interfaces",
                       ifname);
        }
    }
    if (hca != NULL && hca[0] != '\0' && !env_is("NCCL_IB_DISABLE", "1")) {
        netcheck_hcas(netcheck_sysfs_root(), &have);
        if (netcheck_hca(hca, netcheck_sysfs_root(), &have, err, sizeof(err)) !=
            0) {
            set_failure(ck, RC_EXIT_NCCL, 0, "%s", err);
            set_fix(ck, "set NCCL_IB_HCA to HCAs this pod has, or give the "
                        "pod its RDMA devices (the RDMA device plugin's "
                        "resource)");
            return -1;
        }
        report_log("phase 0 preflight: NCCL_IB_HCA=%s matches this pod's "
                   "HCAs",
                   hca);
    }
    return 0;
}

static void
sv_spec_base(struct check *ck, struct sv_spec *s, enum sv_kind kind)
{
    memset(s, 0, sizeof(*s));
    s->kind = kind;
    s->group = ck->rep.opts->group;
    s->ndev = ck->rep.ndev;
    memcpy(s->dev, ck->rep.dev, sizeof(s->dev));
    s->check_max_bytes = ck->rep.check_max_bytes;
    s->phase_timeout_s = ck->rep.opts->phase_timeout_s;
    s->deadline = ck->deadline;
    s->label = "";
}

/*
 * Why fewer devices are visible than requested, when the GPUs are shared:
 * "mig" when the device list names MIG instances ("MIG-..."), which CUDA
 * enumerates one per process at most (NVIDIA MIG user guide, "CUDA device
 * enumeration"); "time-slicing" when it names one GPU several times (the
 * device plugin's time-sliced replicas, "GPU-...::N" or repeated UUIDs, are
 * one device to CUDA). "" otherwise. Reads NVIDIA_VISIBLE_DEVICES, then
 * CUDA_VISIBLE_DEVICES.
 */
static const char *
gpu_sharing(int visible, int expected, const char **list)
{
    static const char *const vars[] = {"NVIDIA_VISIBLE_DEVICES",
                                       "CUDA_VISIBLE_DEVICES"};

    for (size_t v = 0; v < 2; v++) {
        const char *val = getenv(vars[v]);
        char ids[32][96];
        int n = 0, distinct = 0, mig = 0, replica = 0;

        if (val == NULL || *val == '\0')
            continue;
        *list = vars[v];
        for (const char *p = val; *p != '\0' && n < 32;) {
            size_t len = strcspn(p, ",");
            size_t idlen = len;
            const char *rep = memchr(p, ':', len);

            if (rep != NULL && (size_t)(rep - p) + 1 < len && rep[1] == ':') {
                idlen = (size_t)(rep - p);
                replica = 1;
            }
            snprintf(ids[n], sizeof(ids[0]), "%.*s",
                     (int)(idlen < 95 ? idlen : 95), p);
            mig |= strncmp(ids[n], "MIG-", 4) == 0;
            distinct++;
            for (int k = 0; k < n; k++)
                if (strcmp(ids[k], ids[n]) == 0) {
                    distinct--;
                    replica = 1;
                    break;
                }
            n++;
            p += len;
            if (*p == ',')
                p++;
        }
        if (mig && visible < expected)
            return "mig";
        if (replica && distinct <= visible && visible < expected)
            return "time-slicing";
        return "";
    }
    return "";
}

/* The oldest driver branch that a CUDA runtime major version runs on, with
 * minor version compatibility (CUDA Toolkit release notes, "CUDA Toolkit
 * and Minimum Required Driver Version for CUDA Minor Version
 * Compatibility": 13.x needs 580 or newer, 12.x 525.60.13, 11.x 450.80.02). */
static const char *
driver_needed(int runtime)
{
    switch (runtime / 1000) {
    case 11:
        return "450.80.02";
    case 12:
        return "525.60.13";
    case 13:
        return "580";
    default:
        return NULL;
    }
}

/* The device root: $RINGCHECK_DEVROOT (for tests) or "/dev". */
static const char *
dev_root(void)
{
    const char *v = getenv("RINGCHECK_DEVROOT");

    return v != NULL && v[0] != '\0' ? v : "/dev";
}

static int
dev_exists(const char *name)
{
    char path[512];

    snprintf(path, sizeof(path), "%s/%s", dev_root(), name);
    return access(path, F_OK) == 0;
}

/*
 * After CUDA found no usable GPU: is this "the check cannot run here" (the
 * image does not fit the node) rather than "the node is bad"? Writes the
 * reason into ck->rep.cannot_run, or leaves it empty.
 */
static void
classify_cannot_run(struct check *ck)
{
    const struct rc_run *p = &ck->rep.pre;
    char *why = ck->rep.cannot_run;
    size_t len = sizeof(ck->rep.cannot_run);
    const char *need = driver_needed(p->cuda_runtime);

    why[0] = '\0';
    if (!dev_exists("nvidiactl") && dev_exists("kfd")) {
        snprintf(why, len,
                 "this node's GPU is not an NVIDIA one (%s/kfd, the AMD "
                 "ROCm driver, is present and %s/nvidiactl is not): the "
                 "NCCL check is for NVIDIA GPUs",
                 dev_root(), dev_root());
    } else if (p->cuda_driver > 0 && p->cuda_runtime > 0 &&
               p->cuda_driver < p->cuda_runtime) {
        snprintf(why, len,
                 "the NVIDIA driver is too old for the check's image: the "
                 "driver supports CUDA %d.%d, the image's CUDA runtime is "
                 "%d.%d and needs driver %s or newer; use the image built "
                 "for this node's driver (see docs/deploy.md)",
                 p->cuda_driver / 1000, p->cuda_driver % 1000 / 10,
                 p->cuda_runtime / 1000, p->cuda_runtime % 1000 / 10,
                 need != NULL ? need : "a newer one");
    } else if (p->cuda_driver == 0 &&
               (strstr(ck->rep.what, "cudaErrorInsufficientDriver") != NULL ||
                strstr(ck->rep.what, "cudaErrorStubLibrary") != NULL)) {
        snprintf(why, len,
                 "no NVIDIA driver is loaded in this container (the CUDA "
                 "runtime finds no driver%s): the pod does not run with the "
                 "NVIDIA container runtime, or the node has no NVIDIA GPU",
                 dev_exists("nvidiactl") ? ""
                                         : ", and there is no /dev/nvidiactl");
    } else if (strstr(ck->rep.what, "cudaErrorSystemDriverMismatch") != NULL ||
               strstr(ck->rep.what, "cudaErrorCompatNotSupportedOnDevice") !=
                   NULL ||
               strstr(ck->rep.what, "cudaErrorCallRequiresNewerDriver") !=
                   NULL) {
        snprintf(why, len,
                 "the CUDA libraries in the check's image do not match the "
                 "node's driver (%.200s); use the image built for this "
                 "node's driver (see docs/deploy.md)",
                 ck->rep.what);
    }
}

static int
check_preflight(struct check *ck)
{
    struct sv_spec s;
    const struct rc_opts *o = ck->rep.opts;
    struct rc_run *p = &ck->rep.pre;

    report_log("phase 0 preflight: starting");
    preflight_env(ck);
    if (preflight_net(ck) != 0)
        return -1;
    sv_spec_base(ck, &s, SV_PREFLIGHT);
    if (sv_run(&s, p) != 0) {
        take_run_failure(ck, p);
        if (ck->rep.code == RC_EXIT_ENV)
            classify_cannot_run(ck);
        if (ck->rep.cannot_run[0] != '\0')
            set_fix(ck, "the check cannot run here: %s", ck->rep.cannot_run);
        else if (ck->rep.code == RC_EXIT_ENV)
            set_fix(ck, "run the pod on a GPU node with the NVIDIA driver, "
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
        set_failure(ck, RC_EXIT_ENV, 0,
                    "no usable GPU: the CUDA runtime sees "
                    "no device");
        set_fix(ck,
                "request GPUs for this container (nvidia.com/gpu) and run it "
                "with the NVIDIA container runtime");
        return -1;
    }
    if (o->expect_gpus > 0 && p->ngpus > 0 && p->ngpus < o->expect_gpus) {
        const char *list = "NVIDIA_VISIBLE_DEVICES";
        const char *sh = gpu_sharing(p->ngpus, o->expect_gpus, &list);

        if (sh[0] != '\0') {
            snprintf(ck->rep.sharing, sizeof(ck->rep.sharing), "%s", sh);
            report_log("phase 0 preflight: warning: %d GPUs requested, %d "
                       "visible: %s names %s, and %s; NCCL cannot run "
                       "across them, so the check runs on the %d device%s "
                       "CUDA sees, not on %d",
                       o->expect_gpus, p->ngpus, list,
                       strcmp(sh, "mig") == 0
                           ? "MIG instances"
                           : "time-sliced replicas of one GPU",
                       strcmp(sh, "mig") == 0
                           ? "CUDA enumerates one MIG instance per process"
                           : "replicas of one GPU are one CUDA device",
                       p->ngpus, p->ngpus == 1 ? "" : "s", o->expect_gpus);
            ck->rep.nwarnings++;
        }
    }
    if (ck->rep.sharing[0] != '\0') {
        /* told above: not a mismatch */
    } else if (o->expect_gpus > 0 && p->ngpus != o->expect_gpus) {
        set_failure(ck, RC_EXIT_ENV, 0,
                    "GPU count mismatch: %d visible, %d expected", p->ngpus,
                    o->expect_gpus);
        set_fix(ck, "check the device plugin and CUDA_VISIBLE_DEVICES / "
                    "NVIDIA_VISIBLE_DEVICES: the pod must see exactly the GPUs "
                    "it requested");
        return -1;
    }
    ck->rep.ndev = p->ngpus < WORKER_MAX_GPUS ? p->ngpus : WORKER_MAX_GPUS;
    for (int i = 0; i < ck->rep.ndev; i++) {
        ck->rep.dev[i] = i;
        report_log("phase 0 preflight: GPU %d: %s, %s, %lu MiB, uuid %s", i,
                   p->gpu[i].name, p->gpu[i].busid, p->gpu[i].total_mib,
                   p->gpu[i].uuid);
    }
    for (int i = 0; i < ck->rep.ndev; i++)
        for (int j = i + 1; j < ck->rep.ndev; j++)
            if (strcmp(p->gpu[i].busid, p->gpu[j].busid) == 0 ||
                strcmp(p->gpu[i].uuid, p->gpu[j].uuid) == 0) {
                set_failure(ck, RC_EXIT_ENV, 0,
                            "duplicate devices: GPU %d and GPU %d are the "
                            "same GPU (%s)",
                            i, j, p->gpu[i].busid);
                snprintf(ck->rep.gpus, sizeof(ck->rep.gpus),
                         "GPU %d and GPU %d", i, j);
                set_fix(ck,
                        "the container sees one GPU twice: check the device "
                        "plugin and CUDA_VISIBLE_DEVICES");
                return -1;
            }
    if (preflight_shm(ck, ck->rep.ndev) != 0)
        return -1;
    preflight_memlock(ck);
    return 0;
}

/* The link of each GPU pair: NVLink where the pair has native peer atomics
 * (PCIe peers do not), else the PCIe path from sysfs. */
static void
check_links(struct check *ck)
{
    struct rc_report *r = &ck->rep;

    for (int i = 0; i < r->ndev; i++)
        for (int j = 0; j < r->ndev; j++) {
            int a = r->dev[i], b = r->dev[j];
            char *cell = r->link[a][b];

            cell[0] = '\0';
            if (a == b)
                continue;
            if (r->pre.access[a][b] > 0 && r->pre.atomics[a][b] > 0)
                snprintf(cell, sizeof(r->link[0][0]), "NV");
            else
                topo_pci_path(netcheck_sysfs_root(), r->pre.gpu[a].busid,
                              r->pre.gpu[b].busid, cell, sizeof(r->link[0][0]));
        }
}

static void
check_link_warnings(struct check *ck)
{
    struct rc_report *r = &ck->rep;

    for (int i = 0; i < r->ndev; i++)
        for (int j = i + 1; j < r->ndev; j++) {
            const char *l = r->link[r->dev[i]][r->dev[j]];

            if (!topo_path_via_cpu(l))
                continue;
            report_log("phase 2 topology: warning: GPU %d and GPU %d are "
                       "connected through %s (PCIe through the CPU%s): NCCL "
                       "traffic between them is slower, and NCCL may not use "
                       "P2P there (NCCL_P2P_LEVEL)",
                       r->dev[i], r->dev[j], l,
                       strcmp(l, "SYS") == 0
                           ? " and the link between NUMA nodes"
                           : "");
            r->nwarnings++;
        }
}

static int
check_devices(struct check *ck)
{
    struct sv_spec s;
    struct rc_run *p = &ck->rep.pre;
    unsigned long min_free = 0;

    /* The devices run fills its own struct; keep the preflight's. */
    sv_spec_base(ck, &s, SV_DEVICES);
    report_log("phase 1 devices: allocate, memset and synchronize on %d "
               "GPUs",
               ck->rep.ndev);
    if (sv_run(&s, &ck->scratch) != 0) {
        take_run_failure(ck, &ck->scratch);
        if (ck->rep.code == RC_EXIT_TIMEOUT)
            set_fix(ck, "a GPU does not respond: check nvidia-smi and the "
                        "kernel log for Xid errors; drain the node if it "
                        "repeats");
        else
            set_fix(ck, "check the GPU with nvidia-smi and the kernel log for "
                        "Xid errors");
        return -1;
    }
    for (int i = 0; i < ck->rep.ndev; i++) {
        int d = ck->rep.dev[i];

        p->gpu[d].free_mib = ck->scratch.gpu[d].free_mib;
        if (min_free == 0 || p->gpu[d].free_mib < min_free)
            min_free = p->gpu[d].free_mib;
        report_log("phase 1 devices: GPU %d ok, %lu MiB free", d,
                   p->gpu[d].free_mib);
    }
    memcpy(p->access, ck->scratch.access, sizeof(p->access));
    memcpy(p->perf, ck->scratch.perf, sizeof(p->perf));
    memcpy(p->atomics, ck->scratch.atomics, sizeof(p->atomics));
    p->topo_done = 1;
    check_links(ck);
    report_log("phase 2 topology: GPU pair matrix");
    report_topology(&ck->rep);
    check_link_warnings(ck);
    ck->rep.bw_bytes = ck->rep.opts->bw_bytes;
    /* The largest correctness size needs two buffers of it on each GPU;
     * keep it to a quarter of the free memory, as the bandwidth size. */
    ck->rep.check_max_bytes = WORKER_CHECK_MAX_BYTES;
    if (min_free > 0 && min_free / 4 < (WORKER_CHECK_MAX_BYTES >> 20))
        ck->rep.check_max_bytes = (size_t)1 << 20;
    /* Send and receive buffers plus headroom for NCCL itself. */
    if (ck->rep.bw_bytes > 0 && min_free > 0 &&
        ck->rep.bw_bytes / 1048576 * 4 > min_free) {
        ck->rep.bw_bytes = (size_t)(min_free / 4) << 20;
        if (ck->rep.bw_bytes == 0)
            ck->rep.bw_bytes = (size_t)1 << 20;
        report_log("phase 5 bandwidth: memory is short (%lu MiB free); "
                   "using %zu bytes instead of %zu",
                   min_free, ck->rep.bw_bytes, ck->rep.opts->bw_bytes);
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
            /* nccl-tests' AllReduceGetBw: a factor of 2(n-1)/n, so 0 with
             * one rank (no bus traffic), not algbw. */
            if (n < 2)
                return 0;
            return n > 1 ? a * 2.0 * (n - 1) / n : a;
        }
    }
    return -1;
}

/* Wrong values over all rows; *ranks gets the ranks that saw some, first
 * (when not NULL) the first bad row, its size, rank and offset, and *phase
 * the phase of that row (4 correctness, 5 bandwidth). */
static long
run_wrong(const struct rc_run *run, unsigned long long *ranks, char *first,
          size_t len, int *phase)
{
    long total = 0;

    *ranks = 0;
    if (first != NULL)
        first[0] = '\0';
    for (int i = 0; i < run->nrows; i++) {
        const struct rc_row *row = &run->rows[i];

        if (row->wrong > 0 && first != NULL && first[0] == '\0') {
            snprintf(first, len,
                     "%s %s %zu B: first wrong value on rank %d at byte "
                     "offset %lld",
                     row->op, row->type, row->bytes, row->bad_rank,
                     row->bad_off);
            if (phase != NULL)
                *phase = row->timed ? 5 : 4;
        }
        total += row->wrong;
        *ranks |= row->wrong_ranks;
    }
    return total;
}

/* The verdict on one ring run: its own failure, else wrong results, else
 * bandwidth (when asked). */
static int
judge(struct check *ck, const struct rc_run *run, int n, int check_bw)
{
    unsigned long long wr;
    double bw;

    if (run->code != 0)
        return run->code;
    if (run_wrong(run, &wr, NULL, 0, NULL) > 0)
        return RC_EXIT_WRONG;
    bw = run_busbw(run, n, NULL);
    if (check_bw && ck->rep.opts->min_busbw > 0 && bw >= 0 &&
        bw < ck->rep.opts->min_busbw)
        return RC_EXIT_BANDWIDTH;
    return 0;
}

static void
ranks_to_gpus(struct check *ck, const char *ranks, const int *dev, int ndev,
              char *buf, size_t len)
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
                                  ck->rep.pre.gpu[dev[r]].busid);
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0')
            break;
    }
}

/*
 * What NCCL chose for the ring that passed, from its INFO log: told, and
 * held against --expect-transport. A ring that works over another
 * transport than expected fails with its own exit code (10); without an
 * expectation, a pod whose GPUs talk over the network is warned about:
 * that is the silent fallback no busbw figure explains.
 */
static void
check_transport(struct check *ck)
{
    const struct rc_opts *o = ck->rep.opts;
    const struct nccllog *l = &ck->rep.ring.nl;
    static unsigned char nv[NCCLLOG_MAX_LOCAL][NCCLLOG_MAX_LOCAL];
    char summary[400], why[400];
    int expect = o->expect.intra[0] != '\0' || o->expect.inter[0] != '\0';
    int w;

    if (!ck->rep.ring.nl_read || l->lines == 0) {
        report_log("phase 3 nccl-init: %swhat NCCL chose is unknown: %s",
                   expect ? "warning: " : "",
                   ck->rep.ring.nl_note[0] != '\0' ? ck->rep.ring.nl_note
                                                   : "NCCL wrote no INFO log");
        ck->rep.nwarnings += expect;
        return;
    }
    nccllog_summary(l, 0, ck->rep.ndev, summary, sizeof(summary));
    report_log("phase 3 nccl-init: NCCL chose: %s", summary);
    memset(nv, 0, sizeof(nv));
    for (int i = 0; i < ck->rep.ndev && i < NCCLLOG_MAX_LOCAL; i++)
        for (int j = 0; j < ck->rep.ndev && j < NCCLLOG_MAX_LOCAL; j++)
            nv[i][j] =
                strcmp(ck->rep.link[ck->rep.dev[i]][ck->rep.dev[j]], "NV") == 0;
    if (expect) {
        if (nccllog_expect(l, o->expect.intra, o->expect.inter,
                           (const unsigned char(*)[NCCLLOG_MAX_LOCAL])nv,
                           ck->rep.ndev, 0, why, sizeof(why)) != 0) {
            set_failure(ck, RC_EXIT_TRANSPORT, 3, "%s", why);
            set_fix(ck, "NCCL fell back from the transport the policy expects. "
                        "Within a pod P2P needs peer access between the GPUs "
                        "(PCIe ACS or the IOMMU can block it; see the GPU pair "
                        "matrix), and NCCL_P2P_DISABLE, NCCL_P2P_LEVEL or "
                        "NCCL_SHM_DISABLE must not rule it out; across pods IB "
                        "needs the RDMA devices (/dev/infiniband) and GPU "
                        "Direct RDMA the nvidia-peermem module or dma-buf");
            return;
        }
        if ((o->expect.intra[0] == '\0' || nccllog_worst(l, 0) < 0) &&
            (o->expect.inter[0] == '\0' || nccllog_worst(l, 1) < 0)) {
            report_log("phase 3 nccl-init: --expect-transport: nothing to "
                       "judge (no channel of that kind: one GPU, or no "
                       "other pod in this run)");
            return;
        }
        report_log("phase 3 nccl-init: the transport is as expected "
                   "(--expect-transport%s%s%s%s)",
                   o->expect.intra[0] != '\0' ? " intra=" : "", o->expect.intra,
                   o->expect.inter[0] != '\0' ? " inter=" : "",
                   o->expect.inter);
        return;
    }
    w = nccllog_worst(l, 0);
    if (w >= NL_NET_IB_GDR && ck->rep.ndev > 1) {
        char where[64];

        snprintf(where, sizeof(where), "%s%s%s", nccllog_class_name(w),
                 w == NL_NET_SOCKET && l->socket_if[0] != '\0' ? " on " : "",
                 w == NL_NET_SOCKET ? l->socket_if : "");
        report_log("phase 3 nccl-init: warning: the ring works but over %s "
                   "between this pod's own GPUs: NCCL found neither P2P nor "
                   "SHM usable (a silent fallback; --expect-transport "
                   "intra=p2p makes it a failure)",
                   where);
        ck->rep.nwarnings++;
    }
}

/* The address the unique id carries is the one every other rank connects
 * to: it must be one of this pod's running interfaces. */
static void
check_id_addr(struct check *ck)
{
    static struct netcheck_if ifs[NETCHECK_MAX_NAMES];
    const char *a = ck->rep.ring.id_addr;
    char host[72];
    const char *colon;
    int n;

    if (a[0] == '\0')
        return;
    colon = strrchr(a, ':');
    snprintf(host, sizeof(host), "%.*s",
             (int)(colon != NULL ? colon - a : (ptrdiff_t)strlen(a)), a);
    if (host[0] == '[') {
        memmove(host, host + 1, strlen(host));
        host[strcspn(host, "]")] = '\0';
    }
    n = netcheck_if_list(ifs, NETCHECK_MAX_NAMES);
    for (int i = 0; i < n; i++)
        if (strcmp(ifs[i].addr, host) == 0 && (ifs[i].flags & IFF_RUNNING)) {
            report_log("phase 3 nccl-init: the unique id carries %s (%s)", a,
                       ifs[i].name);
            return;
        }
    report_log("phase 3 nccl-init: warning: the unique id carries %s, which "
               "is not an address of this pod's running interfaces: the "
               "other ranks could not reach its bootstrap root",
               a);
    ck->rep.nwarnings++;
}

static void
check_ring_result(struct check *ck)
{
    struct rc_run *g = &ck->rep.ring;
    unsigned long long wr;
    char first[200];
    int code, wrong_phase = 4;

    ck->rep.wrong_total = run_wrong(g, &wr, first, sizeof(first), &wrong_phase);
    ck->rep.busbw = run_busbw(g, ck->rep.ndev, &ck->rep.algbw);
    check_id_addr(ck);
    code = judge(ck, g, ck->rep.ndev, 1);
    if (code == 0) {
        check_transport(ck);
        return;
    }
    if (g->code != 0) {
        take_run_failure(ck, g);
    } else if (code == RC_EXIT_WRONG) {
        ck->rep.code = code;
        ck->rep.phase = wrong_phase;
        ck->rep.ranks[0] = '\0';
        for (int r = 0; r < ck->rep.ndev && r < 64; r++)
            if (wr & (1ULL << r)) {
                size_t n = strlen(ck->rep.ranks);
                snprintf(ck->rep.ranks + n, sizeof(ck->rep.ranks) - n, "%s%d",
                         n > 0 ? "," : "", r);
            }
        snprintf(ck->rep.what, sizeof(ck->rep.what),
                 "wrong results: %ld values differ, on ranks %s; %s",
                 ck->rep.wrong_total, ck->rep.ranks, first);
        snprintf(ck->rep.warn, sizeof(ck->rep.warn), "%s", g->warn);
    } else {
        ck->rep.code = code;
        ck->rep.phase = 5;
        snprintf(ck->rep.what, sizeof(ck->rep.what),
                 "bus bandwidth %.2f GB/s is below --min-busbw %.2f GB/s "
                 "(AllReduce %zu B, algbw %.2f GB/s)",
                 ck->rep.busbw, ck->rep.opts->min_busbw, ck->rep.bw_bytes,
                 ck->rep.algbw);
        snprintf(ck->rep.warn, sizeof(ck->rep.warn), "%s", g->warn);
    }
}

static double
diag_phase_timeout(const struct check *ck)
{
    const struct rc_opts *o = ck->rep.opts;
    double t = o->timeout_s / 10;

    if (t < DIAG_PHASE_MIN_S)
        t = DIAG_PHASE_MIN_S;
    for (int p = 0; p < 8; p++)
        if (3 * ck->rep.ring.phase_s[p] > t)
            t = 3 * ck->rep.ring.phase_s[p];
    return t < o->phase_timeout_s ? t : o->phase_timeout_s;
}

/*
 * Whether the GPUs are likely on an NVSwitch, where NCCL uses NVLink SHARP
 * (NVLS): compute capability 9.0 or newer (NVLS needs Hopper or later,
 * NCCL 2.17 release notes) and NVLink between every pair. NVLS does not
 * depend on NCCL_P2P_DISABLE, so on such nodes it is tried first.
 */
static int
likely_nvswitch(const struct check *ck)
{
    const struct rc_report *r = &ck->rep;

    if (r->ndev < 2)
        return 0;
    for (int i = 0; i < r->ndev; i++) {
        if (r->pre.gpu[r->dev[i]].cc_major < 9)
            return 0;
        for (int j = 0; j < r->ndev; j++)
            if (i != j && strcmp(r->link[r->dev[i]][r->dev[j]], "NV") != 0)
                return 0;
    }
    return 1;
}

/* One diagnostic run on devs with one override; 1 passes, 0 fails,
 * -1 ran out of time. */
static int
try_run(struct check *ck, const int *devs, int n, const struct setting *set,
        const char *why)
{
    struct sv_spec s;
    int code;
    int check_bw = ck->rep.phase == 5;

    if (ck->deadline - sv_now() < 0.5)
        return -1;
    sv_spec_base(ck, &s, SV_RING);
    s.phase_timeout_s = diag_phase_timeout(ck);
    s.ndev = n;
    memcpy(s.dev, devs, sizeof(int) * (size_t)n);
    s.bw_bytes = check_bw ? ck->rep.bw_bytes : 0;
    s.label = "diagnosis: ";
    if (set != NULL) {
        s.env_name = set->name;
        s.env_value = set->value;
    }
    sv_run(&s, &ck->scratch);
    if (ck->scratch.overall_timeout)
        return -1;
    code = judge(ck, &ck->scratch, n, check_bw);
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
    if (code != 0 && ck->rep.warn[0] == '\0' && ck->scratch.warn[0] != '\0')
        snprintf(ck->rep.warn, sizeof(ck->rep.warn), "%s", ck->scratch.warn);
    return code == 0;
}

/* Narrows a failing set of devices down to one failing pair. */
static int
find_pair(struct check *ck, const int *set, int n, int pair[2])
{
    int h = n / 2;
    int r;

    if (n == 2) {
        pair[0] = set[0];
        pair[1] = set[1];
        return 1;
    }
    if (h >= 2) {
        r = try_run(ck, set, h, NULL, "(first half)");
        if (r < 0)
            return -1;
        if (r == 0)
            return find_pair(ck, set, h, pair);
    }
    if (n - h >= 2) {
        r = try_run(ck, set + h, n - h, NULL, "(second half)");
        if (r < 0)
            return -1;
        if (r == 0)
            return find_pair(ck, set + h, n - h, pair);
    }
    for (int a = 0; a < h; a++)
        for (int b = h; b < n; b++) {
            int two[2] = {set[a], set[b]};

            r = try_run(ck, two, 2, NULL, "(pair across halves)");
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
diagnose(struct check *ck)
{
    const struct rc_opts *o = ck->rep.opts;
    size_t n = 0;
    int r;

    size_t order[NSETTINGS];
    int nvs = likely_nvswitch(ck);

    ck->rep.diag_ran = 1;
    for (size_t i = 0, k = 0; i < NSETTINGS; i++)
        if (!nvs || i != SETTING_NVLS)
            order[nvs + k++] = i;
    if (nvs)
        order[0] = SETTING_NVLS;
    report_log("diagnosis: rerunning in fresh workers to find what fails "
               "(phase timeout %.1f s per rerun%s)",
               diag_phase_timeout(ck),
               nvs ? "; NVSwitch node (sm90+, NVLink between all GPUs): "
                     "NVLS first"
                   : "");
    for (size_t i = 0; i < NSETTINGS; i++) {
        const struct setting *s = &settings[order[i]];

        if (env_is(s->name, s->value)) {
            report_log("diagnosis: %s=%s is already set; skipped", s->name,
                       s->value);
            continue;
        }
        r = try_run(ck, ck->rep.dev, ck->rep.ndev, s, NULL);
        if (r < 0) {
            ck->rep.diag_incomplete = 1;
            break;
        }
        if (r == 1) {
            snprintf(ck->rep.cure, sizeof(ck->rep.cure), "%s=%s", s->name,
                     s->value);
            snprintf(ck->rep.transport, sizeof(ck->rep.transport), "%s",
                     s->transport);
            break;
        }
    }
    if (!ck->rep.diag_incomplete && o->diagnose && ck->rep.ndev > 2) {
        r = find_pair(ck, ck->rep.dev, ck->rep.ndev, ck->rep.pair);
        if (r < 0)
            ck->rep.diag_incomplete = 1;
        else if (r == 0)
            ck->rep.pair[0] = ck->rep.pair[1] = -1;
    } else if (ck->rep.ndev == 2) {
        ck->rep.pair[0] = ck->rep.dev[0];
        ck->rep.pair[1] = ck->rep.dev[1];
    }
    if (ck->rep.cure[0] != '\0')
        n += (size_t)snprintf(
            ck->rep.diag_note + n, sizeof(ck->rep.diag_note) - n,
            "passes with %s (%s transport)", ck->rep.cure, ck->rep.transport);
    else if (!ck->rep.diag_incomplete)
        n += (size_t)snprintf(ck->rep.diag_note + n,
                              sizeof(ck->rep.diag_note) - n,
                              "no single setting made it pass");
    if (ck->rep.pair[0] >= 0 && n < sizeof(ck->rep.diag_note))
        n += (size_t)snprintf(
            ck->rep.diag_note + n, sizeof(ck->rep.diag_note) - n,
            "%sfailing pair GPU %d - GPU %d", n > 0 ? "; " : "",
            ck->rep.pair[0], ck->rep.pair[1]);
    if (ck->rep.diag_incomplete && n < sizeof(ck->rep.diag_note))
        snprintf(ck->rep.diag_note + n, sizeof(ck->rep.diag_note) - n,
                 "%sincomplete: the check's deadline came first",
                 n > 0 ? "; " : "");
    report_log("diagnosis: %s", ck->rep.diag_note);
}

static void
failure_fix(struct check *ck)
{
    const struct setting *cure = NULL;

    for (size_t i = 0; i < NSETTINGS; i++)
        if (ck->rep.cure[0] != '\0' && strncmp(ck->rep.cure, settings[i].name,
                                               strlen(settings[i].name)) == 0)
            cure = &settings[i];
    if (cure != NULL) {
        set_fix(ck,
                "set %s for this workload (the fallback file does that); "
                "%s",
                ck->rep.cure, cure->why);
        return;
    }
    if (ck->rep.fix[0] != '\0')
        return;
    if (ck->rep.ring.unreaped > 0 || ck->rep.pre.unreaped > 0 ||
        ck->scratch.unreaped > 0) {
        set_fix(ck, "a worker is stuck in the kernel (SIGKILL did not end "
                    "it): look for Xid errors in the node's kernel log "
                    "(dmesg), reset the GPU or reboot, and drain the node");
        return;
    }
    switch (ck->rep.code) {
    case RC_EXIT_TIMEOUT:
        set_fix(ck, "a GPU or link hangs: check nvidia-smi and the kernel log "
                    "for Xid errors on the GPUs named above, rerun with "
                    "NCCL_DEBUG=INFO; drain the node if it repeats");
        break;
    case RC_EXIT_WRONG:
        set_fix(ck, "the GPUs return wrong data: check ECC errors "
                    "(nvidia-smi -q -d ECC) and Xid errors on the GPUs named "
                    "above; drain the node");
        break;
    case RC_EXIT_BANDWIDTH:
        set_fix(ck, "check the topology (NVLink, PCIe width and generation), "
                    "that no other job shares these GPUs, and the node's NCCL "
                    "settings");
        break;
    case RC_EXIT_NCCL:
        set_fix(ck, "see the NCCL WARN line; rerun with NCCL_DEBUG=INFO for "
                    "details");
        break;
    case RC_EXIT_CUDA:
        set_fix(ck, "check the driver with nvidia-smi and the kernel log for "
                    "Xid errors");
        break;
    default:
        set_fix(ck, "an internal error of ncclguard-ringcheck; report it with "
                    "this output");
        break;
    }
}

static void
describe_gpus(struct check *ck)
{
    if (ck->rep.pair[0] >= 0)
        snprintf(ck->rep.gpus, sizeof(ck->rep.gpus),
                 "pair GPU %d (%s) - GPU %d (%s)", ck->rep.pair[0],
                 ck->rep.pre.gpu[ck->rep.pair[0]].busid, ck->rep.pair[1],
                 ck->rep.pre.gpu[ck->rep.pair[1]].busid);
    else if (ck->rep.gpus[0] == '\0' && ck->rep.ranks[0] != '\0' &&
             ck->rep.phase >= 3)
        ranks_to_gpus(ck, ck->rep.ranks, ck->rep.dev, ck->rep.ndev,
                      ck->rep.gpus, sizeof(ck->rep.gpus));
}

static void
finish(struct check *ck, double t0, int ring_ran)
{
    const struct rc_opts *o = ck->rep.opts;
    static char json[16384];
    char verdict[4096];

    ck->rep.result = "pass";
    ck->rep.exit_code = 0;
    if (ck->rep.code != 0) {
        describe_gpus(ck);
        failure_fix(ck);
        ck->rep.result = "fail";
        ck->rep.exit_code = ck->rep.code;
        if (o->on_failure == RC_FALLBACK && ck->rep.cure[0] != '\0') {
            char name[48];
            const char *eq = strchr(ck->rep.cure, '=');

            snprintf(name, sizeof(name), "%.*s", (int)(eq - ck->rep.cure),
                     ck->rep.cure);
            if (getenv(name) != NULL) {
                report_log("fallback: %s=%s is set in the pod's environment "
                           "and would win over the fallback file",
                           name, getenv(name));
                set_fix(ck,
                        "remove %s from the pod's environment (or set %s "
                        "there); the environment wins over the fallback file",
                        name, ck->rep.cure);
            } else if (report_fallback_write(&ck->rep, o->fallback_conf) != 0) {
                int err = errno;

                report_log("fallback: cannot write %s: %s", o->fallback_conf,
                           strerror(err));
                set_fix(ck,
                        "the check passes with %s but cannot write the "
                        "fallback file %s (%s): mount the shared emptyDir "
                        "there, writable by the init container",
                        ck->rep.cure, o->fallback_conf, strerror(err));
                ck->rep.exit_code = RC_EXIT_INTERNAL;
            } else {
                ck->rep.fallback_written = 1;
                ck->rep.result = "fallback";
                ck->rep.exit_code = 0;
                report_log("warning: fallback: wrote %s to %s; the workload "
                           "reads it through NCCL_CONF_FILE",
                           ck->rep.cure, o->fallback_conf);
            }
        } else if (o->on_failure == RC_WARN) {
            ck->rep.result = "warn";
            ck->rep.exit_code = 0;
        }
        if (ck->rep.cannot_run[0] != '\0' && o->on_failure != RC_FAIL) {
            /* Not a verdict on the node: never the reason a pod cannot
             * start, unless the policy says onFailure: fail. */
            ck->rep.result = "cannot-run";
            ck->rep.exit_code = 0;
            report_log("WARNING: the check cannot run here, so it did not "
                       "judge this node: %s; the pod starts without the "
                       "check (--on-failure fail would block it)",
                       ck->rep.cannot_run);
        } else if (o->on_failure == RC_FALLBACK && !ck->rep.fallback_written &&
                   ck->rep.cure[0] == '\0' && o->on_no_cure == RC_NOCURE_WARN) {
            ck->rep.result = "warn";
            ck->rep.exit_code = 0;
            ck->rep.no_cure_warn = 1;
            /* A file from an earlier run would still cure what it cured
             * then: the workload gets the pod's own settings only. */
            if (unlink(o->fallback_conf) != 0 && errno != ENOENT)
                report_log("fallback: warning: cannot remove %s: %s",
                           o->fallback_conf, strerror(errno));
            report_log("warning: fallback: no cure (%s); --on-no-cure warn: "
                       "the pod starts with its own settings",
                       ck->rep.diag_note[0] != '\0'
                           ? ck->rep.diag_note
                           : "no diagnosis ran for this failure");
        }
    } else if (ck->rep.mn_warn) {
        ck->rep.result = "warn";
    } else if (o->on_failure == RC_FALLBACK) {
        /* Replace any stale file: the pod's own settings passed. */
        if (report_fallback_write(&ck->rep, o->fallback_conf) == 0)
            ck->rep.fallback_written = 1;
        else
            report_log("fallback: warning: cannot write %s: %s",
                       o->fallback_conf, strerror(errno));
    }
    ck->rep.elapsed_s = sv_now() - t0;
    if (ring_ran)
        report_table(&ck->rep);
    report_verdict(&ck->rep, verdict, sizeof(verdict));
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
    if (report_json(&ck->rep, json, sizeof(json)) != 0)
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
    struct check *ck = calloc(1, sizeof(*ck));
    struct sv_spec s;
    int ring_ran = 0, code;

    if (ck == NULL) {
        fprintf(stderr, "ncclguard-ringcheck: out of memory\n");
        return RC_EXIT_INTERNAL;
    }
    ck->rep.opts = o;
    ck->rep.phase = -1;
    ck->rep.pair[0] = ck->rep.pair[1] = -1;
    ck->rep.busbw = ck->rep.algbw = -1;
    ck->rep.pre.phase = -1;
    ck->rep.check_max_bytes = WORKER_CHECK_MAX_BYTES;
    ck->deadline = t0 + o->timeout_s;
    report_log(
        "ncclguard-ringcheck: expect %d GPUs, mode %s, timeout %.1f "
        "s, phase timeout %.1f s, bandwidth size %zu B, on failure %s, on no "
        "cure %s",
        o->expect_gpus, o->group ? "group" : "process", o->timeout_s,
        o->phase_timeout_s, o->bw_bytes,
        o->on_failure == RC_FAIL   ? "fail"
        : o->on_failure == RC_WARN ? "warn"
                                   : "fallback",
        o->on_no_cure == RC_NOCURE_WARN ? "warn" : "fail");
    if (check_preflight(ck) != 0 || check_devices(ck) != 0)
        goto done;
    ring_ran = 1;
    sv_spec_base(ck, &s, SV_RING);
    s.bw_bytes = ck->rep.bw_bytes;
    report_log("phase 3 nccl-init: %d ranks, %s", ck->rep.ndev,
               o->group ? "one process for all GPUs (group init)"
                        : "one process per GPU");
    sv_run(&s, &ck->rep.ring);
    check_ring_result(ck);
    if (ck->rep.code == 0) {
        if (ck->rep.busbw >= 0)
            report_log("phase 5 bandwidth: AllReduce %zu B: algbw %.2f GB/s, "
                       "busbw %.2f GB/s",
                       ck->rep.bw_bytes, ck->rep.algbw, ck->rep.busbw);
        goto done;
    }
    report_log("phase %d %s: FAILED: %s", ck->rep.phase,
               report_phase_name(ck->rep.phase), ck->rep.what);
    /* NCCL built for a newer CUDA than the driver runs fails its first
     * CUDA call with cudaErrorInsufficientDriver (35): the image, not the
     * node. */
    if (ck->rep.phase == 3 &&
        (strstr(ck->rep.warn, "driver version is insufficient") != NULL ||
         strstr(ck->rep.what, "driver version is insufficient") != NULL)) {
        snprintf(ck->rep.cannot_run, sizeof(ck->rep.cannot_run),
                 "the image's NCCL needs a newer CUDA driver than this "
                 "node's (driver CUDA %d.%d, runtime %d.%d): NCCL and CUDA in "
                 "the image do not match the node; use the image built for "
                 "this node's driver (see docs/deploy.md)",
                 ck->rep.pre.cuda_driver / 1000,
                 ck->rep.pre.cuda_driver % 1000 / 10,
                 ck->rep.pre.cuda_runtime / 1000,
                 ck->rep.pre.cuda_runtime % 1000 / 10);
        set_fix(ck, "the check cannot run here: %s", ck->rep.cannot_run);
        report_log("diagnosis: skipped: the check cannot run here");
        goto done;
    }
    /* No diagnosis when a worker could not be reaped (its GPU is wedged:
     * more runs would only wedge more processes) or the pod is being
     * stopped. */
    if (ck->rep.ring.unreaped > 0 || ck->rep.ring.interrupted ||
        sv_interrupted())
        report_log("diagnosis: skipped: %s", ck->rep.ring.unreaped > 0
                                                 ? "a worker cannot be reaped"
                                                 : "the check was stopped");
    else if (ck->rep.code == RC_EXIT_TRANSPORT)
        report_log("diagnosis: skipped: the ring works; only its transport "
                   "is not the expected one");
    else if (ck->rep.phase >= 3 && !ck->rep.ring.overall_timeout &&
             (o->diagnose || o->on_failure == RC_FALLBACK))
        diagnose(ck);
done:
    /* The other pods of a multi-node job wait for this one's result, so
     * the cross-node phase runs (and reports a local failure) whatever the
     * single-pod phases found. */
    mn_check(&ck->rep);
    finish(ck, t0, ring_ran);
    code = ck->rep.exit_code;
    free(ck);
    return code;
}
