/* A test double for NVML (libnvidia-ml.so.1): GPUs, their utilisation and
 * their compute processes come from a script file that tests rewrite while
 * the watchdog runs. The agent loads it through the same dlopen path as the
 * real library.
 *
 * FAKE_NVML_SCRIPT names the file, re-read on every nvmlInit_v2 and
 * nvmlDeviceGetCount_v2. One line per GPU, in index order:
 *     gpu <utilisation percent> [pid ...]
 * and these lines change the library's behaviour:
 *     lost       every device call fails with NVML_ERROR_GPU_IS_LOST
 *     no-driver  nvmlInit_v2 fails with NVML_ERROR_DRIVER_NOT_LOADED
 * A missing file means no GPUs. Lines starting with # are comments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_GPU_IS_LOST 15

#define MAX_GPUS 16
#define MAX_PIDS 64

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

struct gpu {
    unsigned util;
    unsigned n_pids;
    unsigned pids[MAX_PIDS];
};

static struct {
    int inited;
    int lost;
    int no_driver;
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
const char *nvmlErrorString(int r);

static void
script_load(void)
{
    const char *path = getenv("FAKE_NVML_SCRIPT");
    char line[1024];
    FILE *f;

    S.n = 0;
    S.lost = 0;
    S.no_driver = 0;
    if (path == NULL || (f = fopen(path, "r")) == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *save = NULL, *tok = strtok_r(line, " \t\n", &save);

        if (tok == NULL || tok[0] == '#')
            continue;
        if (strcmp(tok, "lost") == 0) {
            S.lost = 1;
        } else if (strcmp(tok, "no-driver") == 0) {
            S.no_driver = 1;
        } else if (strcmp(tok, "gpu") == 0 && S.n < MAX_GPUS) {
            struct gpu *g = &S.g[S.n++];

            memset(g, 0, sizeof(*g));
            tok = strtok_r(NULL, " \t\n", &save);
            g->util = tok ? (unsigned)strtoul(tok, NULL, 10) : 0;
            while ((tok = strtok_r(NULL, " \t\n", &save)) != NULL &&
                   g->n_pids < MAX_PIDS)
                g->pids[g->n_pids++] = (unsigned)strtoul(tok, NULL, 10);
        }
    }
    fclose(f);
}

int
nvmlInit_v2(void)
{
    script_load();
    if (S.no_driver)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    S.inited = 1;
    return NVML_SUCCESS;
}

int
nvmlShutdown(void)
{
    if (!S.inited)
        return NVML_ERROR_UNINITIALIZED;
    S.inited = 0;
    return NVML_SUCCESS;
}

int
nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!S.inited)
        return NVML_ERROR_UNINITIALIZED;
    script_load();
    if (S.lost)
        return NVML_ERROR_GPU_IS_LOST;
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

int
nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device)
{
    if (!S.inited)
        return NVML_ERROR_UNINITIALIZED;
    if (S.lost)
        return NVML_ERROR_GPU_IS_LOST;
    if (index >= S.n || device == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = (void *)(unsigned long)(index + 1);
    return NVML_SUCCESS;
}

int
nvmlDeviceGetUtilizationRates(void *device, struct nvml_utilization *u)
{
    struct gpu *g = dev(device);

    if (!S.inited)
        return NVML_ERROR_UNINITIALIZED;
    if (S.lost)
        return NVML_ERROR_GPU_IS_LOST;
    if (g == NULL || u == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    u->gpu = g->util;
    u->memory = 0;
    return NVML_SUCCESS;
}

int
nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned int *count,
                                        struct nvml_process_info *infos)
{
    struct gpu *g = dev(device);

    if (!S.inited)
        return NVML_ERROR_UNINITIALIZED;
    if (S.lost)
        return NVML_ERROR_GPU_IS_LOST;
    if (g == NULL || count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (*count < g->n_pids) {
        *count = g->n_pids;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < g->n_pids; i++) {
        memset(&infos[i], 0, sizeof(infos[i]));
        infos[i].pid = g->pids[i];
        infos[i].used_gpu_memory = 1ULL << 30;
        infos[i].gpu_instance_id = 0xFFFFFFFFu;
        infos[i].compute_instance_id = 0xFFFFFFFFu;
    }
    *count = g->n_pids;
    return NVML_SUCCESS;
}

const char *
nvmlErrorString(int r)
{
    switch (r) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
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
