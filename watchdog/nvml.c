/* The few NVML entry points the watchdog needs, declared from NVML's public
 * API reference (docs.nvidia.com/deploy/nvml-api) rather than its header,
 * which Debian main does not ship. */
#include "watchdog/nvml.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* nvmlReturn_t values used here (NVML API reference, "Error reporting"). */
#define NVML_SUCCESS 0

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
    nvml_return (*procs)(nvml_device, unsigned int *,
                         struct nvml_process_info *);
    const char *(*error_string)(nvml_return);
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
        struct nvml_process_info info[WD_NVML_MAX_PROCS];
        struct nvml_utilization u;
        struct wd_gpu *g = &out->gpu[i];
        unsigned int np = WD_NVML_MAX_PROCS;
        nvml_device dev;

        r = n->handle(i, &dev);
        if (r != NVML_SUCCESS) {
            nvml_fail(n, out, "nvmlDeviceGetHandleByIndex_v2", r);
            return false;
        }
        r = n->util(dev, &u);
        if (r != NVML_SUCCESS) {
            nvml_fail(n, out, "nvmlDeviceGetUtilizationRates", r);
            return false;
        }
        /* More processes than we track (NVML_ERROR_INSUFFICIENT_SIZE,
         * infos left unfilled) fails the sample: a partial list could
         * leave a pod's busy GPU out. */
        r = n->procs(dev, &np, info);
        if (r != NVML_SUCCESS) {
            nvml_fail(n, out, "nvmlDeviceGetComputeRunningProcesses", r);
            return false;
        }
        if (np > WD_NVML_MAX_PROCS)
            np = WD_NVML_MAX_PROCS;
        g->util = u.gpu > 100 ? 100 : u.gpu;
        g->n_pids = np;
        for (unsigned int k = 0; k < np; k++)
            g->pids[k] = (pid_t)info[k].pid;
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
