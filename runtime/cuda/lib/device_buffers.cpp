#include "megatron_rt/device_buffers.h"

#include "cuda_check.h"

void *mrt::cuda::deviceMalloc(size_t bytes) {
  void *block = nullptr;
  cudaError_t error = cudaMalloc(&block, bytes);
  if (error != cudaSuccess)
    fatal("out of GPU memory allocating %zu bytes: %s", bytes,
          cudaGetErrorString(error));
  return block;
}

extern "C" void *mrt_device_alloc(int64_t bytes) {
  void *buffer = mrt::cuda::deviceMalloc(static_cast<size_t>(bytes));
  MRT_CUDA_CHECK(cudaMemsetAsync(buffer, 0, static_cast<size_t>(bytes),
                                 mrt::cuda::computeStream()));
  return buffer;
}

// cudaFree waits for the device itself, and needs no context: megatron-run
// may free its buffers after destroying it.
extern "C" void mrt_device_free(void *buffer) { MRT_CUDA_CHECK(cudaFree(buffer)); }

extern "C" void mrt_copy_to_device(void *device, const void *host,
                                   int64_t bytes) {
  cudaStream_t stream = mrt::cuda::computeStream();
  MRT_CUDA_CHECK(cudaMemcpyAsync(device, host, static_cast<size_t>(bytes),
                                 cudaMemcpyHostToDevice, stream));
  // The host buffer may be reused as soon as this returns.
  MRT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

extern "C" void mrt_copy_to_host(void *host, const void *device,
                                 int64_t bytes) {
  mrt::cuda::readArray(static_cast<const unsigned char *>(device),
                       static_cast<unsigned char *>(host),
                       static_cast<size_t>(bytes));
}
