// The CUDA runtime's generated-code buffers: the buffer cache over device
// memory. Blocks are handed out again only in the order the host frees and
// reallocates them; since every kernel and collective of the rank is
// ordered on its stream (collectives through events), work queued on a
// reused block runs after all work queued on its previous owner.
#include "../../lib/buffer_cache.h"
#include "cuda_check.h"

mrt::BufferCache &mrt::generatedCodeBuffers() {
  static auto *instance =
      new BufferCache(mrt::cuda::deviceMalloc); // outlives static dtors
  return *instance;
}
