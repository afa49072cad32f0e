/* NVML, loaded at run time with dlopen: per-GPU utilisation and the host
 * PIDs of the compute processes on each GPU. */
#ifndef NCCLGUARD_WD_NVML_H
#define NCCLGUARD_WD_NVML_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define WD_NVML_MAX_GPUS 64
#define WD_NVML_MAX_PROCS 256

/* One GPU at one moment. */
struct wd_gpu {
    unsigned util; /* percent of time a kernel ran (nvmlUtilization_t.gpu) */
    size_t n_pids;
    pid_t pids[WD_NVML_MAX_PROCS];
};

/* All GPUs at one moment; ok is false when NVML could not be read. */
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
 * Reads every GPU into *out. When the library is not loaded or not
 * initialised, tries again (dlopen at most once per retry_ms, nvmlInit on
 * every call). When a call fails (the driver went away, a GPU is lost),
 * shuts NVML down so that the next call starts afresh, and sets out->ok =
 * false with the reason. Returns out->ok.
 */
bool wd_nvml_read(struct wd_nvml *n, struct wd_gpus *out, long long now_ms,
                  long long retry_ms);

/* Shuts NVML down and closes the library. NULL is a no-op. */
void wd_nvml_free(struct wd_nvml *n);

#endif
