/* The NVML entry points the watchdog needs, declared from NVML's header
 * (nvml.h, as NVIDIA/go-nvml carries it in gen/nvml/nvml.h): names, struct
 * layouts, enum values and return codes. Debian main does not ship the
 * header, so the few declarations live here. */
#include "watchdog/nvml.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* nvmlReturn_t values used here. */
#define NVML_SUCCESS 0
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_GPU_IS_LOST 15

/* nvmlSamplingType_t. */
#define NVML_GPU_UTILIZATION_SAMPLES 1
#define NVML_MEMORY_UTILIZATION_SAMPLES 2

/* Field ids: NVLink data throughput in KiB (scopeId UINT_MAX sums every
 * link), PCIe byte counts (which "can be wrapped"). */
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX 139
#define NVML_FI_DEV_PCIE_COUNT_TX_BYTES 197
#define NVML_FI_DEV_PCIE_COUNT_RX_BYTES 198
#define N_FIELDS 4

#define MAX_SAMPLES 128

typedef int nvml_return;
typedef struct nvml_device *nvml_device; /* nvmlDevice_t: opaque pointer */

/* nvmlUtilization_t: percent of the sample period a kernel ran (gpu) and
 * memory was read or written (memory). */
struct nvml_utilization {
    unsigned int gpu;
    unsigned int memory;
};

/* nvmlProcessInfo_t as the _v2 and _v3 process queries fill it (the
 * "v2" struct layout): pid, usedGpuMemory, gpuInstanceId,
 * computeInstanceId. With hostPID the PIDs are the node's. */
struct nvml_process_info {
    unsigned int pid;
    unsigned long long used_gpu_memory;
    unsigned int gpu_instance_id;
    unsigned int compute_instance_id;
};

/* nvmlValue_t. */
typedef union {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} nvml_value;

/* nvmlSample_t: timeStamp is a CPU timestamp in microseconds. */
struct nvml_sample {
    unsigned long long time_stamp;
    nvml_value value;
};

/* nvmlFieldValue_t. */
struct nvml_field_value {
    unsigned int field_id;
    unsigned int scope_id;
    long long timestamp;
    long long latency_usec;
    int value_type;  /* nvmlValueType_t */
    int nvml_return; /* nvmlReturn_t of this value alone */
    nvml_value value;
};

/* What the agent remembers of one GPU between reads. */
struct gpu_mem {
    struct wd_gpu_counters c;
    unsigned long long util_seen, mem_seen; /* lastSeenTimeStamp */
    bool util_primed, mem_primed; /* a read answered: later samples count */
    bool energy_raw_ok;
    unsigned long long energy_raw;
    long long power_ms; /* when power was last integrated */
    bool field_ok[N_FIELDS];
    unsigned long long field_raw[N_FIELDS];
    size_t n_pids;
    pid_t pids[WD_NVML_MAX_PROCS];
    bool mps;
};

struct wd_nvml {
    char path[256];
    void *lib;
    bool inited;
    long long last_try_ms;
    bool tried;
    nvml_return (*init)(void);
    nvml_return (*shutdown)(void);
    nvml_return (*count)(unsigned int *);
    nvml_return (*handle)(unsigned int, nvml_device *);
    nvml_return (*util)(nvml_device, struct nvml_utilization *);
    nvml_return (*mps_procs)(nvml_device, unsigned int *,
                             struct nvml_process_info *);
    nvml_return (*procs)(nvml_device, unsigned int *,
                         struct nvml_process_info *);
    nvml_return (*power)(nvml_device, unsigned int *);
    nvml_return (*limit)(nvml_device, unsigned int *);
    nvml_return (*energy)(nvml_device, unsigned long long *);
    nvml_return (*samples)(nvml_device, int, unsigned long long, int *,
                           unsigned int *, struct nvml_sample *);
    nvml_return (*fields)(nvml_device, int, struct nvml_field_value *);
    const char *(*error_string)(nvml_return);
    struct gpu_mem mem[WD_NVML_MAX_GPUS];
};

struct wd_nvml *
wd_nvml_new(const char *path)
{
    struct wd_nvml *n = calloc(1, sizeof(*n));

    if (n == NULL)
        return NULL;
    snprintf(n->path, sizeof(n->path), "%s", path);
    return n;
}

bool
wd_nvml_up(const struct wd_nvml *n)
{
    return n != NULL && n->inited;
}

static void
nvml_unload(struct wd_nvml *n)
{
    if (n->inited && n->shutdown != NULL)
        n->shutdown();
    n->inited = false;
    if (n->lib != NULL)
        dlclose(n->lib);
    n->lib = NULL;
}

/* dlsym into a function pointer without the object/function cast warning. */
static void *
sym(void *lib, const char *name)
{
    return dlsym(lib, name);
}

static int
nvml_load(struct wd_nvml *n, char *why, size_t wn)
{
    void *p;

    n->lib = dlopen(n->path, RTLD_NOW | RTLD_LOCAL);
    if (n->lib == NULL) {
        const char *e = dlerror();

        snprintf(why, wn, "cannot load %.200s: %.180s", n->path, e ? e : "?");
        return -1;
    }
#define LOAD(field, name)                                                      \
    do {                                                                       \
        p = sym(n->lib, name);                                                 \
        memcpy(&n->field, &p, sizeof(p));                                      \
    } while (0)
    LOAD(init, "nvmlInit_v2");
    LOAD(shutdown, "nvmlShutdown");
    LOAD(count, "nvmlDeviceGetCount_v2");
    LOAD(handle, "nvmlDeviceGetHandleByIndex_v2");
    LOAD(util, "nvmlDeviceGetUtilizationRates");
    LOAD(procs, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (n->procs == NULL) /* drivers before R510: same struct layout */
        LOAD(procs, "nvmlDeviceGetComputeRunningProcesses_v2");
    /* Optional (Volta and newer, nvml.h): MPS clients are listed by this
     * call only; nvmlDeviceGetComputeRunningProcesses lists the server. */
    LOAD(mps_procs, "nvmlDeviceGetMPSComputeRunningProcesses_v3");
    /* Optional: without them a signal is "unknown", never "idle". */
    LOAD(power, "nvmlDeviceGetPowerUsage");
    LOAD(limit, "nvmlDeviceGetEnforcedPowerLimit");
    LOAD(energy, "nvmlDeviceGetTotalEnergyConsumption");
    LOAD(samples, "nvmlDeviceGetSamples");
    LOAD(fields, "nvmlDeviceGetFieldValues");
    LOAD(error_string, "nvmlErrorString");
#undef LOAD
    if (!n->init || !n->shutdown || !n->count || !n->handle || !n->util ||
        !n->procs) {
        snprintf(why, wn, "%.200s lacks an NVML function the watchdog needs",
                 n->path);
        dlclose(n->lib);
        n->lib = NULL;
        return -1;
    }
    return 0;
}

static void
nvml_fail(struct wd_nvml *n, struct wd_gpus *out, const char *what,
          nvml_return r)
{
    const char *s = n->error_string ? n->error_string(r) : NULL;

    out->ok = false;
    snprintf(out->why, sizeof(out->why), "%s failed: %s (%d)", what,
             s ? s : "NVML error", r);
    /* Start afresh next time: the driver may come back. */
    if (n->inited)
        n->shutdown();
    n->inited = false;
}

/* Marks one GPU as failed by call what with r; returns false. */
static bool
gpu_fail(struct wd_gpu *g, const char *what, nvml_return r)
{
    g->state = r == NVML_ERROR_GPU_IS_LOST     ? WD_NVML_GPU_LOST
               : r == NVML_ERROR_NOT_SUPPORTED ? WD_NVML_GPU_NO_UTIL
                                               : WD_NVML_GPU_ERROR;
    g->nvml_error = r;
    g->failed = what;
    return false;
}

/* New utilisation samples of one kind into *n_out / *sum_out; returns the
 * call's result (NOT_FOUND: no sample since the last one). */
static nvml_return
read_samples(struct wd_nvml *n, nvml_device dev, int type,
             unsigned long long *seen, bool *primed, uint64_t *n_out,
             uint64_t *sum_out, uint64_t *nonzero_out, unsigned *last)
{
    struct nvml_sample s[MAX_SAMPLES];
    unsigned int cnt = MAX_SAMPLES;
    int vt = 0;
    nvml_return r = n->samples(dev, type, *seen, &vt, &cnt, s);
    bool count = *seen != 0 || *primed;

    /* NOT_FOUND with nothing seen yet: the buffer was empty, so every
     * sample the driver logs from now on is new. */
    if (r == NVML_SUCCESS || r == NVML_ERROR_NOT_FOUND)
        *primed = true;
    if (r != NVML_SUCCESS)
        return r;
    if (cnt > MAX_SAMPLES)
        cnt = MAX_SAMPLES;
    for (unsigned i = 0; i < cnt; i++) {
        unsigned v = s[i].value.uiVal > 100 ? 100 : s[i].value.uiVal;

        /* The first read only sets the mark: older samples belong to no
         * period of ours. */
        if (count) {
            (*n_out)++;
            *sum_out += v;
            if (nonzero_out != NULL && v > 0)
                (*nonzero_out)++;
        }
        if (last != NULL)
            *last = v;
    }
    for (unsigned i = 0; i < cnt; i++)
        if (s[i].time_stamp > *seen)
            *seen = s[i].time_stamp;
    return NVML_SUCCESS;
}

/* Utilisation: samples where the driver has them, else one reading. */
static bool
read_util(struct wd_nvml *n, nvml_device dev, struct gpu_mem *m,
          struct wd_gpu *g)
{
    struct nvml_utilization u;
    nvml_return r = NVML_ERROR_NOT_SUPPORTED;

    if (n->samples != NULL) {
        r = read_samples(n, dev, NVML_GPU_UTILIZATION_SAMPLES, &m->util_seen,
                         &m->util_primed, &m->c.util_n, &m->c.util_sum,
                         &m->c.util_nonzero, &g->util);
        if (r == NVML_ERROR_GPU_IS_LOST)
            return gpu_fail(g, "nvmlDeviceGetSamples", r);
        /* NOT_FOUND: "sample entries are not found" (nvml.h), which the
         * driver answers when it logged no sample since last_seen, as on
         * an idle GPU (polarsignals/gpu-metrics-agent #37). The period
         * then takes one nvmlDeviceGetUtilizationRates reading below, so
         * that an idle GPU reads 0 % rather than no sample at all. */
        if (r == NVML_SUCCESS) {
            g->samples = true;
            r = read_samples(n, dev, NVML_MEMORY_UTILIZATION_SAMPLES,
                             &m->mem_seen, &m->mem_primed, &m->c.mem_n,
                             &m->c.mem_sum, NULL, NULL);
            if (r == NVML_ERROR_GPU_IS_LOST)
                return gpu_fail(g, "nvmlDeviceGetSamples", r);
            return true;
        }
        /* The driver logs both kinds on one schedule: no utilisation
         * sample means no memory sample either, so later ones are new. */
        if (r == NVML_ERROR_NOT_FOUND)
            m->mem_primed = true;
    }
    /* No samples (NOT_SUPPORTED on MIG, or an old driver; NOT_FOUND, none
     * since the last read): one reading, which covers the last 1/6 s to
     * 1 s only. */
    r = n->util(dev, &u);
    if (r != NVML_SUCCESS)
        return gpu_fail(g, "nvmlDeviceGetUtilizationRates", r);
    g->util = u.gpu > 100 ? 100 : u.gpu;
    m->c.util_n++;
    m->c.util_sum += g->util;
    m->c.util_nonzero += g->util > 0;
    m->c.mem_n++;
    m->c.mem_sum += u.memory > 100 ? 100 : u.memory;
    return true;
}

/* Energy: the total energy counter, else power integrated over time. */
static void
read_energy(struct wd_nvml *n, nvml_device dev, struct gpu_mem *m,
            long long now_ms)
{
    unsigned long long e;
    unsigned int mw;

    if (n->energy != NULL && n->energy(dev, &e) == NVML_SUCCESS) {
        if (m->energy_raw_ok && e >= m->energy_raw)
            m->c.energy_mj += e - m->energy_raw;
        m->energy_raw = e;
        m->energy_raw_ok = true;
        m->c.energy_ok = true;
        return;
    }
    m->energy_raw_ok = false;
    if (n->power != NULL && n->power(dev, &mw) == NVML_SUCCESS) {
        if (m->power_ms != 0 && now_ms > m->power_ms)
            m->c.energy_mj +=
                (uint64_t)mw * (uint64_t)(now_ms - m->power_ms) / 1000;
        m->power_ms = now_ms;
        m->c.energy_ok = true;
        return;
    }
    m->power_ms = 0;
    m->c.energy_ok = false;
}

/* NVLink and PCIe bytes. A counter that went backwards wrapped: it moved. */
static void
read_links(struct wd_nvml *n, nvml_device dev, struct gpu_mem *m)
{
    static const unsigned ids[N_FIELDS] = {
        NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
        NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, NVML_FI_DEV_PCIE_COUNT_TX_BYTES,
        NVML_FI_DEV_PCIE_COUNT_RX_BYTES};
    struct nvml_field_value v[N_FIELDS];
    bool any = false;

    if (n->fields == NULL) {
        m->c.links_ok = false;
        return;
    }
    memset(v, 0, sizeof(v));
    for (int i = 0; i < N_FIELDS; i++) {
        v[i].field_id = ids[i];
        v[i].scope_id = i < 2 ? UINT_MAX : 0;
    }
    if (n->fields(dev, N_FIELDS, v) != NVML_SUCCESS) {
        m->c.links_ok = false;
        return;
    }
    for (int i = 0; i < N_FIELDS; i++) {
        unsigned long long x, mult = i < 2 ? 1024 : 1;

        if (v[i].nvml_return != NVML_SUCCESS) {
            m->field_ok[i] = false;
            continue;
        }
        x = v[i].value.ullVal;
        if (m->field_ok[i])
            m->c.link_bytes += x >= m->field_raw[i]
                                   ? (x - m->field_raw[i]) * mult
                                   : (1ULL << 40); /* wrapped: moved */
        m->field_raw[i] = x;
        m->field_ok[i] = true;
        any = true;
    }
    m->c.links_ok = any;
}

/* One GPU; false when it failed (g->state says how). */
static bool
read_gpu(struct wd_nvml *n, unsigned i, struct wd_gpu *g, long long now_ms)
{
    struct nvml_process_info info[WD_NVML_MAX_PROCS];
    struct gpu_mem *m = &n->mem[i];
    unsigned int np = WD_NVML_MAX_PROCS, lim;
    nvml_device dev;
    nvml_return r;

    r = n->handle(i, &dev);
    if (r != NVML_SUCCESS)
        return gpu_fail(g, "nvmlDeviceGetHandleByIndex_v2", r);
    /* More processes than we track (NVML_ERROR_INSUFFICIENT_SIZE, infos
     * left unfilled) fails the GPU: a partial list could leave a pod out. */
    r = n->procs(dev, &np, info);
    if (r != NVML_SUCCESS)
        return gpu_fail(g, "nvmlDeviceGetComputeRunningProcesses", r);
    if (np > WD_NVML_MAX_PROCS)
        np = WD_NVML_MAX_PROCS;
    m->n_pids = np;
    for (unsigned int k = 0; k < np; k++)
        m->pids[k] = (pid_t)info[k].pid;
    /* MPS clients are the pods' processes on an MPS GPU; the compute list
     * above holds the server. A failure here (NOT_SUPPORTED before Volta)
     * leaves the GPU without MPS clients, as it was before the call. */
    m->mps = false;
    if (n->mps_procs != NULL && np < WD_NVML_MAX_PROCS) {
        unsigned int nm = WD_NVML_MAX_PROCS - np;

        if (n->mps_procs(dev, &nm, info) == NVML_SUCCESS && nm > 0) {
            if (nm > WD_NVML_MAX_PROCS - np)
                nm = WD_NVML_MAX_PROCS - np;
            for (unsigned int k = 0; k < nm; k++)
                m->pids[m->n_pids++] = (pid_t)info[k].pid;
            m->mps = true;
        }
    }
    read_energy(n, dev, m, now_ms);
    read_links(n, dev, m);
    if (n->limit != NULL && n->limit(dev, &lim) == NVML_SUCCESS)
        g->limit_mw = lim;
    return read_util(n, dev, m, g);
}

bool
wd_nvml_read(struct wd_nvml *n, struct wd_gpus *out, long long now_ms,
             long long retry_ms)
{
    unsigned int count = 0;
    nvml_return r;

    out->ok = false;
    out->n = 0;
    out->why[0] = '\0';
    if (n == NULL) {
        snprintf(out->why, sizeof(out->why), "out of memory");
        return false;
    }
    if (n->lib == NULL) {
        if (n->tried && now_ms - n->last_try_ms < retry_ms) {
            snprintf(out->why, sizeof(out->why), "%.200s is not loaded",
                     n->path);
            return false;
        }
        n->tried = true;
        n->last_try_ms = now_ms;
        if (nvml_load(n, out->why, sizeof(out->why)) != 0)
            return false;
    }
    if (!n->inited) {
        r = n->init();
        if (r != NVML_SUCCESS) {
            nvml_fail(n, out, "nvmlInit_v2", r);
            return false;
        }
        n->inited = true;
    }
    r = n->count(&count);
    if (r != NVML_SUCCESS) {
        nvml_fail(n, out, "nvmlDeviceGetCount_v2", r);
        return false;
    }
    if (count > WD_NVML_MAX_GPUS)
        count = WD_NVML_MAX_GPUS;
    for (unsigned int i = 0; i < count; i++) {
        struct wd_gpu *g = &out->gpu[i];
        struct gpu_mem *m = &n->mem[i];

        g->state = WD_NVML_GPU_OK;
        g->nvml_error = 0;
        g->failed = "";
        g->util = 0;
        g->limit_mw = 0;
        g->samples = false;
        (void)read_gpu(n, i, g, now_ms);
        m->c.t_ms = now_ms;
        g->c = m->c;
        /* A lost GPU keeps the processes of its last good read. */
        g->n_pids = m->n_pids;
        g->mps = m->mps;
        memcpy(g->pids, m->pids, m->n_pids * sizeof(*g->pids));
    }
    out->n = count;
    out->ok = true;
    return true;
}

void
wd_nvml_free(struct wd_nvml *n)
{
    if (n == NULL)
        return;
    nvml_unload(n);
    free(n);
}
