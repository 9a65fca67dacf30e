#include "RuntimeApi.h"

#include <dlfcn.h>

namespace mrun {
namespace {

template <typename Fn> bool resolve(void *lib, const char *name, Fn &fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return fn != nullptr;
}

} // namespace

std::string loadRuntimeApi(void *lib, RuntimeApi &api) {
  struct Required {
    const char *name;
    bool found;
  } required[] = {
      {"mrt_context_create", resolve(lib, "mrt_context_create", api.contextCreate)},
      {"mrt_context_destroy", resolve(lib, "mrt_context_destroy", api.contextDestroy)},
      {"mrt_axis_rank", resolve(lib, "mrt_axis_rank", api.axisRank)},
      {"mrt_axis_size", resolve(lib, "mrt_axis_size", api.axisSize)},
      {"mrt_world_rank", resolve(lib, "mrt_world_rank", api.worldRank)},
      {"mrt_all_reduce_f32", resolve(lib, "mrt_all_reduce_f32", api.allReduce)},
      {"mrt_all_gather_f32", resolve(lib, "mrt_all_gather_f32", api.allGather)},
      {"mrt_suspend_collective_timeout",
       resolve(lib, "mrt_suspend_collective_timeout",
               api.suspendCollectiveTimeout)},
      {"mrt_exposed_comm_seconds",
       resolve(lib, "mrt_exposed_comm_seconds", api.exposedCommSeconds)},
  };
  for (const Required &r : required)
    if (!r.found)
      return r.name;
  // All four or none: a runtime either has device memory or it has not.
  bool device = resolve(lib, "mrt_device_alloc", api.deviceAlloc) &&
                resolve(lib, "mrt_device_free", api.deviceFree) &&
                resolve(lib, "mrt_copy_to_device", api.copyToDevice) &&
                resolve(lib, "mrt_copy_to_host", api.copyToHost);
  if (!device)
    api.deviceAlloc = nullptr;
  if (!resolve(lib, "mrt_gemm_engines", api.gemmEngines) ||
      !resolve(lib, "mrt_gemm_error", api.gemmError))
    api.gemmEngines = nullptr, api.gemmError = nullptr;
  return "";
}

} // namespace mrun
