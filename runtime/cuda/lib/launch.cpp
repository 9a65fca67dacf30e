// The kernel-launch entry points MLIR's GPU lowering emits calls to, over
// the CUDA driver API (Debian's MLIR ships no CUDA runtime wrappers).
//
// The step's global constructors register its kernel modules when the .so
// is loaded, before megatron-run has a context or even knows whether a GPU
// exists; so registration only records the image, and the module is loaded
// on the first launch, in the context of the rank's device.
#include "cuda_check.h"

#include <cuda.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace {

void checkDriver(CUresult result, const char *what) {
  if (result == CUDA_SUCCESS)
    return;
  const char *message = nullptr;
  cuGetErrorString(result, &message);
  mrt::fatal("%s failed: %s", what, message ? message : "unknown CUDA error");
}

/// A fatbin image of the step and, once needed, its loaded module.
struct LazyModule {
  const void *image;
  CUmodule module = nullptr;
  std::unordered_map<std::string, CUfunction> functions;
  std::mutex mutex;

  CUfunction function(const char *name) {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = functions.find(name);
    if (found != functions.end())
      return found->second;
    if (!module) {
      // The rank's device, made current on this thread, initialises its
      // primary context, which the driver API then sees.
      MRT_CUDA_CHECK(cudaSetDevice(mrt::cuda::currentDevice()));
      MRT_CUDA_CHECK(cudaFree(nullptr));
      checkDriver(cuModuleLoadData(&module, image), "loading the step's kernels");
    }
    CUfunction function = nullptr;
    checkDriver(cuModuleGetFunction(&function, module, name),
                "finding a kernel of the step");
    functions.emplace(name, function);
    return function;
  }
};

} // namespace

extern "C" __attribute__((visibility("default"))) void *
mgpuModuleLoad(const void *image, size_t /*bytes*/) {
  return new LazyModule{image};
}

/// Called from the step's destructors at exit, when the CUDA runtime may
/// already have torn its contexts down: the module goes with its context,
/// so only the record is freed.
extern "C" __attribute__((visibility("default"))) void
mgpuModuleUnload(void *handle) {
  delete static_cast<LazyModule *>(handle);
}

/// The handle is the module's kernel, resolved once per name.
extern "C" __attribute__((visibility("default"))) void *
mgpuModuleGetFunction(void *handle, const char *name) {
  return static_cast<LazyModule *>(handle)->function(name);
}

extern "C" __attribute__((visibility("default"))) void
mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                 intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                 intptr_t blockZ, int32_t sharedBytes, void *stream,
                 void **params, void **extra, size_t /*paramCount*/) {
  checkDriver(cuLaunchKernel(static_cast<CUfunction>(function), gridX, gridY,
                             gridZ, blockX, blockY, blockZ, sharedBytes,
                             static_cast<CUstream>(stream), params, extra),
              "launching a kernel of the step");
}

/// A step's launches and the runtime's own kernels share the rank's stream,
/// so stream order alone orders them: the "new" stream of a step is it.
extern "C" __attribute__((visibility("default"))) void *mgpuStreamCreate() {
  return mrt::cuda::computeStream();
}

extern "C" __attribute__((visibility("default"))) void
mgpuStreamSynchronize(void *stream) {
  MRT_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

/// The rank's stream lives as long as its context.
extern "C" __attribute__((visibility("default"))) void
mgpuStreamDestroy(void * /*stream*/) {}
