/* NVML, loaded at run time with dlopen: per GPU, its compute processes (host
 * PIDs), its utilisation samples, and the counters that show whether it does
 * real work (energy, NVLink and PCIe bytes). Each GPU answers on its own: a
 * lost or MIG-enabled GPU marks only itself. */
#ifndef NCCLGUARD_WD_NVML_H
#define NCCLGUARD_WD_NVML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define WD_NVML_MAX_GPUS 64
#define WD_NVML_MAX_PROCS 256

/* How one GPU answered the latest read. */
enum wd_gpu_state {
    WD_NVML_GPU_OK = 0,  /* every query answered */
    WD_NVML_GPU_LOST,    /* NVML_ERROR_GPU_IS_LOST: fell off the bus */
    WD_NVML_GPU_NO_UTIL, /* no utilisation (NOT_SUPPORTED: MIG mode) */
    WD_NVML_GPU_ERROR    /* another error; see nvml_error */
};

/*
 * Counters of one GPU, cumulative since the agent first read it, so that a
 * pod with its own period takes the difference of two readings. Utilisation
 * comes from nvmlDeviceGetSamples (every sample the driver took, 1/6 s to
 * 1 s apart) or, where the driver has no samples, one
 * nvmlDeviceGetUtilizationRates reading per read.
 */
struct wd_gpu_counters {
    long long t_ms;        /* when read, the agent's monotonic clock */
    uint64_t util_n;       /* utilisation samples */
    uint64_t util_sum;     /* sum of their percents */
    uint64_t util_nonzero; /* samples above 0 % */
    uint64_t mem_n;        /* memory utilisation samples */
    uint64_t mem_sum;      /* sum of their percents */
    bool energy_ok;        /* energy counter or power readings answered */
    uint64_t energy_mj;    /* millijoules */
    bool links_ok;         /* an NVLink or PCIe byte counter answered */
    uint64_t link_bytes;   /* NVLink data + PCIe, TX + RX */
};

/* One GPU at one moment. */
struct wd_gpu {
    enum wd_gpu_state state;
    int nvml_error;     /* the failing call's nvmlReturn_t; 0 when OK */
    const char *failed; /* the failing call's name; "" when OK */
    unsigned util;      /* the latest utilisation sample, percent */
    unsigned limit_mw;  /* enforced power limit; 0 when unknown */
    bool samples;       /* util came from nvmlDeviceGetSamples */
    struct wd_gpu_counters c;
    /* The compute processes. For a lost GPU: those of its last good read,
     * so that its pods learn that they lost it. */
    size_t n_pids;
    pid_t pids[WD_NVML_MAX_PROCS];
    /* Some of pids are MPS clients (nvmlDeviceGetMPSComputeRunningProcesses_v3
     * listed them): the GPU is shared through an MPS server. */
    bool mps;
};

/* All GPUs at one moment; ok is false when NVML as a whole could not be
 * read (no library, no driver, nvmlInit or the device count failed). */
struct wd_gpus {
    bool ok;
    char why[400]; /* when !ok: what failed */
    size_t n;
    struct wd_gpu gpu[WD_NVML_MAX_GPUS];
};

struct wd_nvml;

/*
 * Opens the library at path (dlopen; "libnvidia-ml.so.1" on a node) and
 * resolves the functions. Never fails: a library that cannot be loaded
 * leaves the handle unloaded, and wd_nvml_read() says why. Free with
 * wd_nvml_free(). Not thread-safe (one agent thread uses it).
 */
struct wd_nvml *wd_nvml_new(const char *path);

/* True once the library is loaded and initialised. */
bool wd_nvml_up(const struct wd_nvml *n);

/*
 * Reads every GPU into *out, advancing the cumulative counters. When the
 * library is not loaded or not initialised, tries again (dlopen at most once
 * per retry_ms, nvmlInit on every call). When nvmlInit or the device count
 * fails, shuts NVML down so that the next call starts afresh, and sets
 * out->ok = false with the reason. A failure of one GPU's query marks only
 * that GPU (out->gpu[i].state). Returns out->ok.
 */
bool wd_nvml_read(struct wd_nvml *n, struct wd_gpus *out, long long now_ms,
                  long long retry_ms);

/* Shuts NVML down and closes the library. NULL is a no-op. */
void wd_nvml_free(struct wd_nvml *n);

#endif
