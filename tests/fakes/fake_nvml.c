/* A test double for NVML (libnvidia-ml.so.1): GPUs, their utilisation,
 * power, energy, link counters and compute processes come from a script file
 * that tests rewrite while the watchdog runs. The agent loads it through the
 * same dlopen path as the real library.
 *
 * Names, struct layouts, enum values and return codes follow NVML's header
 * (nvml.h as carried by NVIDIA/go-nvml, gen/nvml/nvml.h): nvmlReturn_t,
 * nvmlSample_t, nvmlValue_t, nvmlFieldValue_t, nvmlSamplingType_t,
 * nvmlValueType_t and the NVML_FI_* field ids used below.
 *
 * FAKE_NVML_SCRIPT names the file, re-read on every nvmlInit_v2 and
 * nvmlDeviceGetCount_v2. One line per GPU, in index order:
 *     gpu [UTIL] [key=value ...] [pid ...]
 * UTIL (or util=) is the utilisation percent. The keys, each with a default
 * that follows from the utilisation (a working GPU draws power, reads memory
 * and moves bytes over its links; an idle one does none of that):
 *     mem=PCT       memory utilisation (40 when util > 0, else 0)
 *     power=W       power draw (300 W when util > 0, else 60 W)
 *     limit=W       enforced power limit (400 W)
 *     nvlink=MB/s   NVLink data, TX and RX each (1000 when util > 0, else 0)
 *     pcie=MB/s     PCIe bytes, TX and RX each (100 when util > 0, else 0)
 *     state=ok|lost|mig
 *     mps=PID[,PID...]  clients of an MPS server on this GPU, listed by
 *                   nvmlDeviceGetMPSComputeRunningProcesses_v3 ("processes
 *                   with a Multi-Process Service (MPS) compute context",
 *                   nvml.h); the plain PIDs of the line are then the MPS
 *                   server's, as nvmlDeviceGetComputeRunningProcesses_v3
 *                   lists the server and not its clients
 *     links=on|off  off: the NVLink and PCIe fields answer
 *                   NVML_ERROR_NOT_SUPPORTED in their nvmlReturn, while
 *                   the call itself succeeds (nvml.h, nvmlFieldValue_t:
 *                   "nvmlReturn ... must be checked before looking at
 *                   value"); the counters keep advancing meanwhile
 * state=lost: every call on that device, the handle included, fails with
 * NVML_ERROR_GPU_IS_LOST ("the target GPU has fallen off the bus", nvml.h).
 * state=mig: MIG mode, where nvml.h says utilisation rates and utilisation
 * samples are "not currently supported" (NVML_ERROR_NOT_SUPPORTED); power,
 * energy and the process list still answer.
 * Counters (energy, NVLink, PCIe) advance with real time at the scripted
 * rates, and a utilisation sample is taken every 1/6 s (the shortest sample
 * period nvml.h names for nvmlDeviceGetUtilizationRates) while the GPU is
 * not idle: an idle GPU logs no sample, so nvmlDeviceGetSamples answers
 * NVML_ERROR_NOT_FOUND ("if sample entries are not found", nvml.h), as the
 * driver does on an idle GPU (polarsignals/gpu-metrics-agent #37), while
 * nvmlDeviceGetUtilizationRates still answers 0 %. As the driver
 * samples in the background, so does the fake: from nvmlInit_v2 to
 * nvmlShutdown a thread re-reads the script every 20 ms and advances the
 * counters, so a change shows from the moment it is made, whether or not
 * the agent calls in between. Every call takes one lock, as NVML's own
 * calls are thread-safe.
 * These lines change the whole library's behaviour:
 *     lost       every device call fails with NVML_ERROR_GPU_IS_LOST;
 *                nvmlDeviceGetCount_v2, whose nvml.h list of return codes
 *                has no GPU_IS_LOST, fails with NVML_ERROR_UNKNOWN ("on
 *                any unexpected error")
 *     no-driver  nvmlInit_v2 fails with NVML_ERROR_DRIVER_NOT_LOADED
 *     no-samples nvmlDeviceGetSamples is NOT_SUPPORTED (older drivers)
 * A missing file means no GPUs. Lines starting with # are comments. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* nvmlReturn_t (nvml.h). */
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_UNKNOWN 999

/* nvmlSamplingType_t and nvmlValueType_t (nvml.h). */
#define NVML_GPU_UTILIZATION_SAMPLES 1
#define NVML_MEMORY_UTILIZATION_SAMPLES 2
#define NVML_VALUE_TYPE_UNSIGNED_INT 1
#define NVML_VALUE_TYPE_UNSIGNED_LONG_LONG 3

/* Field ids (nvml.h): NVLink throughput in KiB, scopeId UINT_MAX for the sum
 * over all links; PCIe byte counts ("Value can be wrapped"). */
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX 139
#define NVML_FI_DEV_PCIE_COUNT_TX_BYTES 197
#define NVML_FI_DEV_PCIE_COUNT_RX_BYTES 198

#define MAX_GPUS 16
#define MAX_PIDS 64
#define RING 120            /* samples the driver keeps (20 s at 1/6 s) */
#define SAMPLE_US 166667ULL /* 1/6 s */

struct nvml_utilization {
    unsigned int gpu;
    unsigned int memory;
};

struct nvml_process_info {
    unsigned int pid;
    unsigned long long used_gpu_memory;
    unsigned int gpu_instance_id;
    unsigned int compute_instance_id;
};

typedef union {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} nvml_value;

struct nvml_sample {
    unsigned long long timeStamp; /* CPU timestamp, microseconds */
    nvml_value sampleValue;
};

struct nvml_field_value {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp; /* microseconds since 1970 */
    long long latencyUsec;
    int valueType;  /* nvmlValueType_t */
    int nvmlReturn; /* nvmlReturn_t */
    nvml_value value;
};

enum gstate { G_OK, G_LOST, G_MIG };

struct gpu {
    /* scripted */
    unsigned util, mem, power_w, limit_w, nvlink_mbs, pcie_mbs;
    enum gstate state;
    int links_off;
    unsigned n_pids;
    unsigned pids[MAX_PIDS];
    unsigned n_mps;
    unsigned mps[MAX_PIDS];
    /* advancing with time */
    unsigned long long last_us; /* counters advanced up to here */
    double energy_mj, nvlink_kib, pcie_bytes;
    unsigned long long next_sample_us;
    struct nvml_sample su[RING], sm[RING];
    unsigned n_s, head; /* ring of samples, oldest at head */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t sampler;
static volatile int sampler_stop;

static struct {
    int inited;
    int lost;
    int no_driver;
    int no_samples;
    unsigned n;
    struct gpu g[MAX_GPUS];
} S;

/* The exported API (declared here: there is no header to include). */
int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlDeviceGetCount_v2(unsigned int *count);
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device);
int nvmlDeviceGetUtilizationRates(void *device, struct nvml_utilization *u);
int nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned int *count,
                                            struct nvml_process_info *infos);
int nvmlDeviceGetMPSComputeRunningProcesses_v3(void *device,
                                               unsigned int *count,
                                               struct nvml_process_info *infos);
int nvmlDeviceGetPowerUsage(void *device, unsigned int *power);
int nvmlDeviceGetEnforcedPowerLimit(void *device, unsigned int *limit);
int nvmlDeviceGetTotalEnergyConsumption(void *device,
                                        unsigned long long *energy);
int nvmlDeviceGetSamples(void *device, int type, unsigned long long last_seen,
                         int *value_type, unsigned int *count,
                         struct nvml_sample *samples);
int nvmlDeviceGetFieldValues(void *device, int count,
                             struct nvml_field_value *values);
const char *nvmlErrorString(int r);

static unsigned long long
now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (unsigned long long)ts.tv_sec * 1000000ULL +
           (unsigned long long)ts.tv_nsec / 1000ULL;
}

/* Moves g's counters and samples from g->last_us to now at its current
 * rates. */
static void
advance(struct gpu *g, unsigned long long now)
{
    double dt;

    if (g->last_us == 0) {
        g->last_us = now;
        g->next_sample_us = now;
    }
    if (now <= g->last_us)
        return;
    dt = (double)(now - g->last_us) / 1e6;
    g->energy_mj += (double)g->power_w * 1000.0 * dt;
    g->nvlink_kib += (double)g->nvlink_mbs * 1e6 / 1024.0 * dt;
    g->pcie_bytes += (double)g->pcie_mbs * 1e6 * dt;
    while (g->next_sample_us <= now) {
        unsigned k = (g->head + g->n_s) % RING;

        if (g->util == 0 && g->mem == 0) {
            /* Idle: the driver logs no sample. */
            g->next_sample_us += SAMPLE_US;
            continue;
        }
        if (g->n_s == RING) {
            g->head = (g->head + 1) % RING;
            k = (g->head + RING - 1) % RING;
        } else {
            g->n_s++;
        }
        g->su[k].timeStamp = g->next_sample_us;
        g->su[k].sampleValue.uiVal = g->util;
        g->sm[k].timeStamp = g->next_sample_us;
        g->sm[k].sampleValue.uiVal = g->mem;
        g->next_sample_us += SAMPLE_US;
    }
    g->last_us = now;
}

static void
advance_all(void)
{
    unsigned long long t = now_us();

    for (unsigned i = 0; i < S.n; i++)
        advance(&S.g[i], t);
}

static unsigned
num(const char *s)
{
    return (unsigned)strtoul(s, NULL, 10);
}

/* Reads the script; a GPU that was already there keeps its counters, which
 * first advance to now at the old rates. */
static void
script_load(void)
{
    const char *path = getenv("FAKE_NVML_SCRIPT");
    char line[1024];
    unsigned n = 0;
    FILE *f;

    advance_all();
    S.lost = 0;
    S.no_driver = 0;
    S.no_samples = 0;
    if (path == NULL || (f = fopen(path, "r")) == NULL) {
        S.n = 0;
        return;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        char *save = NULL, *tok = strtok_r(line, " \t\n", &save);
        int have_util = 0, set_mem = 0, set_pow = 0, set_nvl = 0, set_pci = 0;
        struct gpu *g;

        if (tok == NULL || tok[0] == '#')
            continue;
        if (strcmp(tok, "lost") == 0) {
            S.lost = 1;
            continue;
        }
        if (strcmp(tok, "no-driver") == 0) {
            S.no_driver = 1;
            continue;
        }
        if (strcmp(tok, "no-samples") == 0) {
            S.no_samples = 1;
            continue;
        }
        if (strcmp(tok, "gpu") != 0 || n >= MAX_GPUS)
            continue;
        g = &S.g[n];
        if (n >= S.n)
            memset(g, 0, sizeof(*g));
        n++;
        g->util = 0;
        g->limit_w = 400;
        g->state = G_OK;
        g->links_off = 0;
        g->n_pids = 0;
        g->n_mps = 0;
        while ((tok = strtok_r(NULL, " \t\n", &save)) != NULL) {
            char *eq = strchr(tok, '=');

            if (eq == NULL) {
                if (!have_util)
                    g->util = num(tok);
                else if (g->n_pids < MAX_PIDS)
                    g->pids[g->n_pids++] = num(tok);
                have_util = 1;
                continue;
            }
            *eq++ = '\0';
            if (strcmp(tok, "util") == 0)
                g->util = num(eq), have_util = 1;
            else if (strcmp(tok, "mem") == 0)
                g->mem = num(eq), set_mem = 1;
            else if (strcmp(tok, "power") == 0)
                g->power_w = num(eq), set_pow = 1;
            else if (strcmp(tok, "limit") == 0)
                g->limit_w = num(eq);
            else if (strcmp(tok, "nvlink") == 0)
                g->nvlink_mbs = num(eq), set_nvl = 1;
            else if (strcmp(tok, "pcie") == 0)
                g->pcie_mbs = num(eq), set_pci = 1;
            else if (strcmp(tok, "mps") == 0) {
                char *save2 = NULL, *p;

                for (p = strtok_r(eq, ",", &save2);
                     p != NULL && g->n_mps < MAX_PIDS;
                     p = strtok_r(NULL, ",", &save2))
                    g->mps[g->n_mps++] = num(p);
            } else if (strcmp(tok, "links") == 0)
                g->links_off = strcmp(eq, "off") == 0;
            else if (strcmp(tok, "state") == 0)
                g->state = strcmp(eq, "lost") == 0  ? G_LOST
                           : strcmp(eq, "mig") == 0 ? G_MIG
                                                    : G_OK;
        }
        if (!set_mem)
            g->mem = g->util > 0 ? 40 : 0;
        if (!set_pow)
            g->power_w = g->util > 0 ? 300 : 60;
        if (!set_nvl)
            g->nvlink_mbs = g->util > 0 ? 1000 : 0;
        if (!set_pci)
            g->pcie_mbs = g->util > 0 ? 100 : 0;
    }
    fclose(f);
    S.n = n;
}

/* The driver's background sampling. */
static void *
sample_loop(void *arg)
{
    (void)arg;
    while (!sampler_stop) {
        struct timespec ts = {0, 20 * 1000 * 1000};

        nanosleep(&ts, NULL);
        pthread_mutex_lock(&mu);
        script_load();
        advance_all();
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

static int
init_locked(void)
{
    script_load();
    if (S.no_driver)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    if (!S.inited) {
        sampler_stop = 0;
        if (pthread_create(&sampler, NULL, sample_loop, NULL) != 0)
            return NVML_ERROR_UNKNOWN;
    }
    S.inited = 1;
    return NVML_SUCCESS;
}

int
nvmlInit_v2(void)
{
    int r;

    pthread_mutex_lock(&mu);
    r = init_locked();
    pthread_mutex_unlock(&mu);
    return r;
}

int
nvmlShutdown(void)
{
    pthread_mutex_lock(&mu);
    if (!S.inited) {
        pthread_mutex_unlock(&mu);
        return NVML_ERROR_UNINITIALIZED;
    }
    S.inited = 0;
    sampler_stop = 1;
    pthread_mutex_unlock(&mu);
    pthread_join(sampler, NULL);
    return NVML_SUCCESS;
}

static int
count_locked(unsigned int *count)
{
    if (!S.inited)
        return NVML_ERROR_UNINITIALIZED;
    script_load();
    /* nvml.h lists SUCCESS, UNINITIALIZED, INVALID_ARGUMENT and UNKNOWN
     * for nvmlDeviceGetCount_v2: a lost driver state is UNKNOWN here. */
    if (S.lost)
        return NVML_ERROR_UNKNOWN;
    *count = S.n;
    return NVML_SUCCESS;
}

/* A handle is index + 1, so that NULL is never a valid device. */
static struct gpu *
dev(void *d)
{
    unsigned long i = (unsigned long)d;

    return i >= 1 && i <= S.n ? &S.g[i - 1] : NULL;
}

/* The checks every device call starts with: initialised, not lost, a valid
 * handle. Advances the device's counters to now. */
static int
dev_check(void *device, const void *out, struct gpu **g)
{
    if (!S.inited)
        return NVML_ERROR_UNINITIALIZED;
    if (S.lost)
        return NVML_ERROR_GPU_IS_LOST;
    *g = dev(device);
    if (*g == NULL || out == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((*g)->state == G_LOST)
        return NVML_ERROR_GPU_IS_LOST;
    advance(*g, now_us());
    return NVML_SUCCESS;
}

static int
nvmlDeviceGetHandleByIndex_v2_locked(unsigned int index, void **device)
{
    if (!S.inited)
        return NVML_ERROR_UNINITIALIZED;
    if (S.lost)
        return NVML_ERROR_GPU_IS_LOST;
    if (index >= S.n || device == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* nvml.h lists NVML_ERROR_GPU_IS_LOST among this call's returns. */
    if (S.g[index].state == G_LOST)
        return NVML_ERROR_GPU_IS_LOST;
    *device = (void *)(unsigned long)(index + 1);
    return NVML_SUCCESS;
}

static int
nvmlDeviceGetUtilizationRates_locked(void *device, struct nvml_utilization *u)
{
    struct gpu *g = NULL;
    int r = dev_check(device, u, &g);

    if (r != NVML_SUCCESS)
        return r;
    if (g->state == G_MIG)
        return NVML_ERROR_NOT_SUPPORTED;
    u->gpu = g->util;
    u->memory = g->mem;
    return NVML_SUCCESS;
}

static int
nvmlDeviceGetComputeRunningProcesses_v3_locked(void *device,
                                               unsigned int *count,
                                               struct nvml_process_info *infos)
{
    struct gpu *g = NULL;
    int r = dev_check(device, count, &g);

    if (r != NVML_SUCCESS)
        return r;
    if (*count < g->n_pids) {
        *count = g->n_pids;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < g->n_pids; i++) {
        memset(&infos[i], 0, sizeof(infos[i]));
        infos[i].pid = g->pids[i];
        infos[i].used_gpu_memory = 1ULL << 30;
        /* Outside MIG the instance ids are 0xFFFFFFFF (nvml.h). */
        infos[i].gpu_instance_id = g->state == G_MIG ? 1 : 0xFFFFFFFFu;
        infos[i].compute_instance_id = g->state == G_MIG ? 0 : 0xFFFFFFFFu;
    }
    *count = g->n_pids;
    return NVML_SUCCESS;
}

/* nvml.h: only processes with an MPS compute context; with *count 0 the
 * answer is INSUFFICIENT_SIZE, or SUCCESS when none run. */
static int
nvmlDeviceGetMPSComputeRunningProcesses_v3_locked(
    void *device, unsigned int *count, struct nvml_process_info *infos)
{
    struct gpu *g = NULL;
    int r = dev_check(device, count, &g);

    if (r != NVML_SUCCESS)
        return r;
    if (*count < g->n_mps) {
        *count = g->n_mps;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (g->n_mps > 0 && infos == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < g->n_mps; i++) {
        memset(&infos[i], 0, sizeof(infos[i]));
        infos[i].pid = g->mps[i];
        infos[i].used_gpu_memory = 1ULL << 30;
        infos[i].gpu_instance_id = 0xFFFFFFFFu;
        infos[i].compute_instance_id = 0xFFFFFFFFu;
    }
    *count = g->n_mps;
    return NVML_SUCCESS;
}

/* Milliwatts (nvml.h: "power usage for this GPU in milliwatts"). */
static int
nvmlDeviceGetPowerUsage_locked(void *device, unsigned int *power)
{
    struct gpu *g = NULL;
    int r = dev_check(device, power, &g);

    if (r != NVML_SUCCESS)
        return r;
    *power = g->power_w * 1000;
    return NVML_SUCCESS;
}

/* Milliwatts (nvml.h: "the power management limit in milliwatts"). */
static int
nvmlDeviceGetEnforcedPowerLimit_locked(void *device, unsigned int *limit)
{
    struct gpu *g = NULL;
    int r = dev_check(device, limit, &g);

    if (r != NVML_SUCCESS)
        return r;
    *limit = g->limit_w * 1000;
    return NVML_SUCCESS;
}

/* Millijoules since the driver was loaded (nvml.h); here since the fake
 * first saw the GPU. */
static int
nvmlDeviceGetTotalEnergyConsumption_locked(void *device,
                                           unsigned long long *energy)
{
    struct gpu *g = NULL;
    int r = dev_check(device, energy, &g);

    if (r != NVML_SUCCESS)
        return r;
    *energy = (unsigned long long)g->energy_mj;
    return NVML_SUCCESS;
}

/* nvml.h: samples newer than last_seen; samples == NULL asks for the count;
 * NOT_FOUND when there are no such samples; GPU and memory utilisation
 * samples are not supported on MIG-enabled GPUs. */
static int
nvmlDeviceGetSamples_locked(void *device, int type,
                            unsigned long long last_seen, int *value_type,
                            unsigned int *count, struct nvml_sample *samples)
{
    struct gpu *g = NULL;
    const struct nvml_sample *ring;
    unsigned out = 0;
    int r = dev_check(device, count, &g);

    if (r != NVML_SUCCESS)
        return r;
    if (S.no_samples)
        return NVML_ERROR_NOT_SUPPORTED;
    if (type != NVML_GPU_UTILIZATION_SAMPLES &&
        type != NVML_MEMORY_UTILIZATION_SAMPLES)
        return NVML_ERROR_NOT_SUPPORTED;
    if (g->state == G_MIG)
        return NVML_ERROR_NOT_SUPPORTED;
    if (samples != NULL && *count == 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    ring = type == NVML_GPU_UTILIZATION_SAMPLES ? g->su : g->sm;
    if (samples == NULL) {
        *count = RING;
        return NVML_SUCCESS;
    }
    for (unsigned i = 0; i < g->n_s && out < *count; i++) {
        const struct nvml_sample *s = &ring[(g->head + i) % RING];

        if (s->timeStamp > last_seen)
            samples[out++] = *s;
    }
    if (out == 0)
        return NVML_ERROR_NOT_FOUND;
    if (value_type != NULL)
        *value_type = NVML_VALUE_TYPE_UNSIGNED_INT;
    *count = out;
    return NVML_SUCCESS;
}

/* nvml.h: the call succeeds and each value carries its own nvmlReturn. */
static int
nvmlDeviceGetFieldValues_locked(void *device, int count,
                                struct nvml_field_value *values)
{
    struct gpu *g = NULL;
    int r = dev_check(device, values, &g);
    unsigned long long t = now_us();

    if (r != NVML_SUCCESS)
        return r;
    for (int i = 0; i < count; i++) {
        struct nvml_field_value *v = &values[i];
        double x;

        v->timestamp = (long long)t;
        v->latencyUsec = 0;
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
        if (g->links_off) {
            v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            continue;
        }
        switch (v->fieldId) {
        case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
        case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
            x = g->nvlink_kib;
            if (v->scopeId != UINT_MAX)
                x = 0; /* one link of many: the sum is what tests script */
            break;
        case NVML_FI_DEV_PCIE_COUNT_TX_BYTES:
        case NVML_FI_DEV_PCIE_COUNT_RX_BYTES:
            x = g->pcie_bytes;
            break;
        default:
            v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            continue;
        }
        v->nvmlReturn = NVML_SUCCESS;
        v->value.ullVal = (unsigned long long)x;
    }
    return NVML_SUCCESS;
}

/* The exported calls: each under the one lock. */
#define LOCKED(call)                                                           \
    do {                                                                       \
        int r_;                                                                \
        pthread_mutex_lock(&mu);                                               \
        r_ = call;                                                             \
        pthread_mutex_unlock(&mu);                                             \
        return r_;                                                             \
    } while (0)

int
nvmlDeviceGetCount_v2(unsigned int *count)
{
    LOCKED(count_locked(count));
}

int
nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device)
{
    LOCKED(nvmlDeviceGetHandleByIndex_v2_locked(index, device));
}

int
nvmlDeviceGetUtilizationRates(void *device, struct nvml_utilization *u)
{
    LOCKED(nvmlDeviceGetUtilizationRates_locked(device, u));
}

int
nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned int *count,
                                        struct nvml_process_info *infos)
{
    LOCKED(
        nvmlDeviceGetComputeRunningProcesses_v3_locked(device, count, infos));
}

int
nvmlDeviceGetMPSComputeRunningProcesses_v3(void *device, unsigned int *count,
                                           struct nvml_process_info *infos)
{
    LOCKED(nvmlDeviceGetMPSComputeRunningProcesses_v3_locked(device, count,
                                                             infos));
}

int
nvmlDeviceGetPowerUsage(void *device, unsigned int *power)
{
    LOCKED(nvmlDeviceGetPowerUsage_locked(device, power));
}

int
nvmlDeviceGetEnforcedPowerLimit(void *device, unsigned int *limit)
{
    LOCKED(nvmlDeviceGetEnforcedPowerLimit_locked(device, limit));
}

int
nvmlDeviceGetTotalEnergyConsumption(void *device, unsigned long long *energy)
{
    LOCKED(nvmlDeviceGetTotalEnergyConsumption_locked(device, energy));
}

int
nvmlDeviceGetSamples(void *device, int type, unsigned long long last_seen,
                     int *value_type, unsigned int *count,
                     struct nvml_sample *samples)
{
    LOCKED(nvmlDeviceGetSamples_locked(device, type, last_seen, value_type,
                                       count, samples));
}

int
nvmlDeviceGetFieldValues(void *device, int count,
                         struct nvml_field_value *values)
{
    LOCKED(nvmlDeviceGetFieldValues_locked(device, count, values));
}

const char *
nvmlErrorString(int r)
{
    switch (r) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    default:
        return "Unknown Error";
    }
}
