/* A test double for the CUDA runtime (libcudart.so.13, or .12 when built
 * against CUDA 12's headers): N simulated GPUs in
 * host memory. */
#include "fake.h"

#include <cuda_runtime_api.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/*
 * Environment read by this double (tests set these per run):
 *   FAKECUDA_DEVICES=N        number of simulated GPUs (default 2; 0 = none)
 *   FAKECUDA_DRIVER=missing   no driver: every call fails as on a host
 *                             without the NVIDIA driver
 *   FAKECUDA_DRIVER_VERSION=N the CUDA version the driver supports
 *                             (cudaDriverGetVersion, default the
 *                             runtime's); below the runtime's version
 *                             every call fails with
 *                             cudaErrorInsufficientDriver, as the CUDA
 *                             runtime API documents for a driver older
 *                             than the runtime
 *   FAKECUDA_DUPLICATE=A,B    device B reports device A's PCI id and UUID
 *   FAKECUDA_INIT_HANG=1      the first call never returns (the driver's
 *                             initialisation hangs)
 *   FAKECUDA_MEM_MIB=N        memory per device (default 81920)
 *   FAKECUDA_HANG=D[,copy]    GPU D stops completing work, as a wedged GPU
 *                             does: its synchronous calls (cudaMemcpy,
 *                             cudaMemset, cudaDeviceSynchronize) block for
 *                             good, ignoring signal handlers, and its
 *                             streams never become ready again; with
 *                             ",copy" only copies to or from it do
 *   FAKECUDA_LINK=pcie        peers have no native atomics (a PCIe link);
 *                             the default reports them (an NVLink link)
 */

struct CUstream_st {
    atomic_int pending; /* operations enqueued by the NCCL double */
    atomic_int error;   /* sticky cudaError_t set by the NCCL double */
    int dev;
};

static __thread int current_dev;

/* The device of each allocation, so that a synchronous copy knows which
 * GPU it waits for. A short list is enough for the ring check. */
#define MAX_ALLOCS 256
struct alloc {
    void *p;
    size_t len;
    int dev;
};
static struct alloc allocs[MAX_ALLOCS];
static int nallocs;
static pthread_mutex_t allocs_mu = PTHREAD_MUTEX_INITIALIZER;

static int
env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    char *end;
    long l;

    if (v == NULL || *v == '\0')
        return dflt;
    errno = 0;
    l = strtol(v, &end, 10);
    if (errno != 0 || *end != '\0' || l < 0 || l > 1024)
        return dflt;
    return (int)l;
}

static int
driver_missing(void)
{
    const char *v = getenv("FAKECUDA_DRIVER");

    return v != NULL && strcmp(v, "missing") == 0;
}

int
fakecuda_device_count(void)
{
    int n = env_int("FAKECUDA_DEVICES", 2);

    return n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n;
}

int
fakecuda_current_device(void)
{
    return current_dev;
}

/* The device whose identity device dev reports (FAKECUDA_DUPLICATE). */
static int
identity_of(int dev)
{
    const char *v = getenv("FAKECUDA_DUPLICATE");
    int a, b;

    if (v != NULL && sscanf(v, "%d,%d", &a, &b) == 2 && dev == b)
        return a;
    return dev;
}

static int
driver_version(void)
{
    const char *v = getenv("FAKECUDA_DRIVER_VERSION");
    char *end;
    long l;

    if (driver_missing())
        return 0;
    if (v == NULL || *v == '\0')
        return CUDART_VERSION;
    l = strtol(v, &end, 10);
    return *end == '\0' && l > 0 && l < 100000 ? (int)l : CUDART_VERSION;
}

static cudaError_t
check_init(void)
{
    /* FAKECUDA_INIT_HANG=1: the driver's initialisation never returns (a
     * GPU that fell off the bus, a driver waiting on its device); signal
     * handlers still run. */
    if (env_int("FAKECUDA_INIT_HANG", 0) == 1)
        for (;;)
            pause();
    if (driver_missing() || driver_version() < CUDART_VERSION)
        return cudaErrorInsufficientDriver;
    if (fakecuda_device_count() == 0)
        return cudaErrorNoDevice;
    return cudaSuccess;
}

static cudaError_t
check_dev(int dev)
{
    cudaError_t e = check_init();

    if (e != cudaSuccess)
        return e;
    if (dev < 0 || dev >= fakecuda_device_count())
        return cudaErrorInvalidDevice;
    return cudaSuccess;
}

/* FAKECUDA_HANG: 2 all work on dev hangs, 1 only copies, 0 none. */
static int
hang_mode(int dev)
{
    const char *v = getenv("FAKECUDA_HANG");
    char mode[16] = "";
    int d;

    if (v == NULL || sscanf(v, "%d,%15s", &d, mode) < 1 || d != dev)
        return 0;
    return strcmp(mode, "copy") == 0 ? 1 : 2;
}

/* A wedged GPU: the call never returns. Signal handlers run, and the call
 * carries on waiting, as the real runtime's spin or yield wait does. */
static void
block_forever(void)
{
    struct timespec ts = {1, 0};

    for (;;)
        nanosleep(&ts, NULL);
}

static int
dev_of_ptr(const void *p)
{
    int dev = -1;

    pthread_mutex_lock(&allocs_mu);
    for (int i = 0; i < nallocs; i++)
        if ((const char *)p >= (const char *)allocs[i].p &&
            (const char *)p < (const char *)allocs[i].p + allocs[i].len)
            dev = allocs[i].dev;
    pthread_mutex_unlock(&allocs_mu);
    return dev;
}

/* Whether a copy between src and dst would touch a hung GPU. */
static int
copy_hangs(const void *dst, const void *src)
{
    int a = dev_of_ptr(dst), b = dev_of_ptr(src);

    return (a >= 0 && hang_mode(a) > 0) || (b >= 0 && hang_mode(b) > 0);
}

void
fakecuda_stream_begin(cudaStream_t s)
{
    if (s != NULL)
        atomic_fetch_add(&s->pending, 1);
}

void
fakecuda_stream_end(cudaStream_t s, int err)
{
    if (s == NULL)
        return;
    if (err != 0)
        atomic_store(&s->error, err);
    atomic_fetch_sub(&s->pending, 1);
}

cudaError_t
cudaGetDeviceCount(int *count)
{
    cudaError_t e = check_init();

    if (e != cudaSuccess) {
        *count = 0;
        return e;
    }
    *count = fakecuda_device_count();
    return cudaSuccess;
}

cudaError_t
cudaDriverGetVersion(int *v)
{
    *v = driver_version();
    return cudaSuccess;
}

cudaError_t
cudaRuntimeGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}

const char *
cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return "cudaSuccess";
    case cudaErrorInvalidValue:
        return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
        return "cudaErrorMemoryAllocation";
    case cudaErrorInsufficientDriver:
        return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice:
        return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
        return "cudaErrorInvalidDevice";
    case cudaErrorNotReady:
        return "cudaErrorNotReady";
    case cudaErrorLaunchFailure:
        return "cudaErrorLaunchFailure";
    case cudaErrorInvalidResourceHandle:
        return "cudaErrorInvalidResourceHandle";
    default:
        return "cudaErrorUnknown";
    }
}

const char *
cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return "no error";
    case cudaErrorInvalidValue:
        return "invalid argument";
    case cudaErrorMemoryAllocation:
        return "out of memory";
    case cudaErrorInsufficientDriver:
        return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice:
        return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
        return "invalid device ordinal";
    case cudaErrorNotReady:
        return "device not ready";
    case cudaErrorLaunchFailure:
        return "unspecified launch failure";
    case cudaErrorInvalidResourceHandle:
        return "invalid resource handle";
    default:
        return "unknown error";
    }
}

cudaError_t
cudaGetLastError(void)
{
    return cudaSuccess;
}

cudaError_t
cudaSetDevice(int dev)
{
    cudaError_t e = check_dev(dev);

    if (e == cudaSuccess)
        current_dev = dev;
    return e;
}

cudaError_t
cudaGetDevice(int *dev)
{
    cudaError_t e = check_init();

    if (e == cudaSuccess)
        *dev = current_dev;
    return e;
}

cudaError_t
cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev)
{
    cudaError_t e = check_dev(dev);
    int id = identity_of(dev);

    if (e != cudaSuccess)
        return e;
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "Fake GPU (host memory)");
    for (int i = 0; i < 16; i++)
        p->uuid.bytes[i] = (char)(0x40 + id * 3 + i);
    p->totalGlobalMem = (size_t)env_int("FAKECUDA_MEM_MIB", 81920) << 20;
    p->pciDomainID = 0;
    p->pciBusID = 0x18 + id;
    p->pciDeviceID = 0;
    p->major = 9;
    return cudaSuccess;
}

cudaError_t
cudaDeviceGetPCIBusId(char *buf, int len, int dev)
{
    cudaError_t e = check_dev(dev);

    if (e != cudaSuccess)
        return e;
    if (len <= 0)
        return cudaErrorInvalidValue;
    snprintf(buf, (size_t)len, "00000000:%02X:00.0", 0x18 + identity_of(dev));
    return cudaSuccess;
}

cudaError_t
cudaDeviceCanAccessPeer(int *can, int dev, int peer)
{
    cudaError_t e = check_dev(dev);

    if (e == cudaSuccess)
        e = check_dev(peer);
    if (e != cudaSuccess)
        return e;
    /* Like a PCIe switch with ACS on: access is reported even where the
     * NCCL double's FAKENCCL_P2P_BROKEN makes it fail. */
    *can = dev != peer;
    return cudaSuccess;
}

cudaError_t
cudaDeviceGetP2PAttribute(int *value, enum cudaDeviceP2PAttr attr, int src,
                          int dst)
{
    cudaError_t e = check_dev(src);

    if (e == cudaSuccess)
        e = check_dev(dst);
    if (e != cudaSuccess)
        return e;
    switch (attr) {
    case cudaDevP2PAttrPerformanceRank:
        *value = 0;
        break;
    case cudaDevP2PAttrAccessSupported:
        *value = src != dst;
        break;
    case cudaDevP2PAttrNativeAtomicSupported:
        *value = src != dst && !(getenv("FAKECUDA_LINK") != NULL &&
                                 strcmp(getenv("FAKECUDA_LINK"), "pcie") == 0);
        break;
    default:
        *value = 0;
        break;
    }
    return cudaSuccess;
}

cudaError_t
cudaMemGetInfo(size_t *free_b, size_t *total)
{
    cudaError_t e = check_dev(current_dev);

    if (e != cudaSuccess)
        return e;
    *total = (size_t)env_int("FAKECUDA_MEM_MIB", 81920) << 20;
    *free_b = *total - ((size_t)512 << 20);
    return cudaSuccess;
}

cudaError_t
cudaMalloc(void **p, size_t size)
{
    cudaError_t e = check_dev(current_dev);

    if (e != cudaSuccess)
        return e;
    *p = malloc(size == 0 ? 1 : size);
    if (*p == NULL)
        return cudaErrorMemoryAllocation;
    pthread_mutex_lock(&allocs_mu);
    if (nallocs < MAX_ALLOCS)
        allocs[nallocs++] = (struct alloc){*p, size, current_dev};
    pthread_mutex_unlock(&allocs_mu);
    return cudaSuccess;
}

cudaError_t
cudaFree(void *p)
{
    pthread_mutex_lock(&allocs_mu);
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].p == p) {
            allocs[i] = allocs[--nallocs];
            break;
        }
    pthread_mutex_unlock(&allocs_mu);
    free(p);
    return cudaSuccess;
}

cudaError_t
cudaMallocHost(void **p, size_t size)
{
    *p = malloc(size == 0 ? 1 : size);
    return *p == NULL ? cudaErrorMemoryAllocation : cudaSuccess;
}

cudaError_t
cudaFreeHost(void *p)
{
    free(p);
    return cudaSuccess;
}

cudaError_t
cudaMemset(void *p, int v, size_t n)
{
    int dev = dev_of_ptr(p);

    if (dev >= 0 && hang_mode(dev) == 2)
        block_forever();
    memset(p, v, n);
    return cudaSuccess;
}

cudaError_t
cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    (void)kind;
    if (copy_hangs(dst, src))
        block_forever();
    memmove(dst, src, n);
    return cudaSuccess;
}

/* Async work runs at once (the ring check waits for its streams before it
 * queues copies); on a hung GPU it never completes. */
cudaError_t
cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    if (s != NULL && hang_mode(s->dev) == 2) {
        fakecuda_stream_begin(s);
        return cudaSuccess;
    }
    memset(p, v, n);
    return cudaSuccess;
}

cudaError_t
cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                cudaStream_t s)
{
    (void)kind;
    if (copy_hangs(dst, src) || (s != NULL && hang_mode(s->dev) > 0)) {
        fakecuda_stream_begin(s);
        return cudaSuccess;
    }
    memmove(dst, src, n);
    return cudaSuccess;
}

cudaError_t
cudaDeviceSynchronize(void)
{
    cudaError_t e = check_dev(current_dev);

    if (e == cudaSuccess && hang_mode(current_dev) == 2)
        block_forever();
    return e;
}

cudaError_t
cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    cudaError_t e = check_dev(current_dev);

    (void)flags;
    if (e != cudaSuccess)
        return e;
    *s = calloc(1, sizeof(**s));
    if (*s == NULL)
        return cudaErrorMemoryAllocation;
    (*s)->dev = current_dev;
    return cudaSuccess;
}

cudaError_t
cudaStreamDestroy(cudaStream_t s)
{
    free(s);
    return cudaSuccess;
}

cudaError_t
cudaStreamQuery(cudaStream_t s)
{
    int err;

    if (s == NULL)
        return cudaSuccess;
    err = atomic_load(&s->error);
    if (err != 0)
        return (cudaError_t)err;
    return atomic_load(&s->pending) > 0 ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t
cudaStreamSynchronize(cudaStream_t s)
{
    struct timespec ts = {0, 100000};
    cudaError_t e;

    while ((e = cudaStreamQuery(s)) == cudaErrorNotReady)
        nanosleep(&ts, NULL);
    return e;
}
