// The runtime a step library was linked against, found through the step
// itself: a CPU step brings libmegatron_rt, a CUDA step libmegatron_rt_cuda.
// megatron-run links neither, so its own calls (context, agreement,
// checkpoint gathering) and the step's go to the same library.
#ifndef MEGATRON_RUN_RUNTIMEAPI_H
#define MEGATRON_RUN_RUNTIMEAPI_H

#include "megatron_rt/comm.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace mrun {

struct RuntimeApi {
  mrt_context *(*contextCreate)(int64_t, double, char *, size_t) = nullptr;
  void (*contextDestroy)(mrt_context *) = nullptr;
  int64_t (*axisRank)(const mrt_context *, int) = nullptr;
  int64_t (*axisSize)(const mrt_context *, int) = nullptr;
  int64_t (*worldRank)(const mrt_context *) = nullptr;
  void (*allReduce)(mrt_context *, int, float *, int64_t, int) = nullptr;
  void (*allGather)(mrt_context *, int, const float *, float *,
                    int64_t) = nullptr;
  void (*suspendCollectiveTimeout)(mrt_context *, int) = nullptr;
  double (*exposedCommSeconds)(const mrt_context *) = nullptr;
  // Device memory (megatron_rt/device_buffers.h): the CUDA runtime only.
  void *(*deviceAlloc)(int64_t) = nullptr;
  void (*deviceFree)(void *) = nullptr;
  void (*copyToDevice)(void *, const void *, int64_t) = nullptr;
  void (*copyToHost)(void *, const void *, int64_t) = nullptr;
  // The CPU runtime's GEMM engines (megatron_rt/gemm.h): absent from the
  // CUDA runtime.
  const char *(*gemmEngines)() = nullptr;
  const char *(*gemmError)(int) = nullptr;

  bool hasDeviceMemory() const { return deviceAlloc != nullptr; }
};

// Resolves the API through the dlopen()ed step library `lib`; returns an
// empty string, or the first symbol it lacks.
std::string loadRuntimeApi(void *lib, RuntimeApi &api);

} // namespace mrun

#endif // MEGATRON_RUN_RUNTIMEAPI_H
