// Internal to the CUDA runtime: the rank's stream and error checks.
#ifndef MEGATRON_RT_CUDA_CUDA_CHECK_H
#define MEGATRON_RT_CUDA_CUDA_CHECK_H

#include "../../lib/fatal.h"

#include <cuda_runtime.h>

namespace mrt::cuda {

// Every kernel, GEMM and generated launch of a rank goes on this one stream,
// so stream order alone orders them; collectives run on their own stream and
// are ordered against it by events (context.cpp). Fatal when no context
// exists: a kernel without a device would fail later with a vaguer error.
cudaStream_t computeStream();

// The rank's GPU, for work done on a thread other than the one that created
// the context (each thread has its own current device).
int currentDevice();

// Copies device values to the host; the one place kernels synchronise, for
// results the host code of the step reads (the loss, squared norms).
template <typename T> void readArray(const T *device, T *host, size_t count) {
  cudaError_t error =
      cudaMemcpyAsync(host, device, count * sizeof(T), cudaMemcpyDeviceToHost,
                      computeStream());
  if (error == cudaSuccess)
    error = cudaStreamSynchronize(computeStream());
  if (error != cudaSuccess)
    fatal("reading a result from the GPU failed: %s",
          cudaGetErrorString(error));
}

// cudaMalloc, or the end of the process with what ran out
// (device_buffers.cpp).
void *deviceMalloc(size_t bytes);

template <typename T> T readScalar(const T *device) {
  T host;
  readArray(device, &host, 1);
  return host;
}

} // namespace mrt::cuda

// A failed CUDA call leaves the device in an unknown state: end the process
// with the call and the error, as the CPU runtime does for broken contracts.
#define MRT_CUDA_CHECK(call)                                                   \
  do {                                                                         \
    cudaError_t mrtError_ = (call);                                            \
    if (mrtError_ != cudaSuccess)                                              \
      ::mrt::fatal("%s failed at %s:%d: %s", #call, __FILE__, __LINE__,        \
                   cudaGetErrorString(mrtError_));                             \
  } while (0)

// After a kernel launch: a bad configuration is reported at the launch site.
#define MRT_CUDA_CHECK_LAUNCH() MRT_CUDA_CHECK(cudaGetLastError())

#endif // MEGATRON_RT_CUDA_CUDA_CHECK_H
