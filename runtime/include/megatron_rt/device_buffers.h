/* Device memory for the arguments of a CUDA step (the manifest's
 * "memory": "device" arguments). Only libmegatron_rt_cuda exports these;
 * megatron-run initialises, checkpoints and dumps such arguments through
 * host copies. Every copy waits for the rank's GPU work queued before it. */
#ifndef MEGATRON_RT_DEVICE_BUFFERS_H
#define MEGATRON_RT_DEVICE_BUFFERS_H

#include "megatron_rt/api.h"

MRT_EXTERN_C_BEGIN

/* bytes of zeroed device memory; fatal when the GPU is out of memory. */
MRT_API void *mrt_device_alloc(int64_t bytes);
MRT_API void mrt_device_free(void *buffer);
MRT_API void mrt_copy_to_device(void *device, const void *host, int64_t bytes);
MRT_API void mrt_copy_to_host(void *host, const void *device, int64_t bytes);

MRT_EXTERN_C_END

#endif /* MEGATRON_RT_DEVICE_BUFFERS_H */
