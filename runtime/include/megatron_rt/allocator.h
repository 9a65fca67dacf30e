/* Buffers of generated code.
 *
 * The lowering (finalize-memref-to-llvm with use-generic-functions) calls
 * these instead of malloc/free. A step allocates the same buffers in the same
 * order every time, so freed blocks are kept by size and handed out again:
 * each step reuses the previous step's memory instead of faulting in fresh,
 * zeroed pages (the logits of GPT-2 124M alone are 51 MB at B*T = 256).
 * Blocks are 64-byte aligned. The cache holds at most what was live at once,
 * per size; it is released when the process ends. Thread-safe. */
#ifndef MEGATRON_RT_ALLOCATOR_H
#define MEGATRON_RT_ALLOCATOR_H

#include "megatron_rt/api.h"

MRT_EXTERN_C_BEGIN

MRT_API void *_mlir_memref_to_llvm_alloc(size_t bytes);
MRT_API void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment,
                                                 size_t bytes);
MRT_API void _mlir_memref_to_llvm_free(void *block);

MRT_EXTERN_C_END

#endif /* MEGATRON_RT_ALLOCATOR_H */
