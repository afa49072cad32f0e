/* What the NCCL double needs from the CUDA runtime double (not CUDA API). */
#ifndef NCCLGUARD_FAKE_H
#define NCCLGUARD_FAKE_H

#include <cuda_runtime_api.h>

#define FAKE_MAX_DEVICES 64

/* Number of simulated devices (FAKECUDA_DEVICES). */
int fakecuda_device_count(void);
/* The calling thread's device (cudaSetDevice). */
int fakecuda_current_device(void);
/* One more operation pending on stream s; cudaStreamQuery says not ready
 * until the matching fakecuda_stream_end. */
void fakecuda_stream_begin(cudaStream_t s);
/* The operation finished; err != 0 makes the stream's error sticky. */
void fakecuda_stream_end(cudaStream_t s, int err);

#endif
