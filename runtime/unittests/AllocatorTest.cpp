// The buffer cache of generated code: freed blocks come back for the same
// size, aligned, and sizes are kept apart.
#include "megatron_rt/allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

TEST(Allocator, FreedBlockIsReusedForTheSameSize) {
  void *first = _mlir_memref_to_llvm_alloc(1000);
  std::memset(first, 1, 1000);
  _mlir_memref_to_llvm_free(first);
  void *again = _mlir_memref_to_llvm_alloc(1000);
  EXPECT_EQ(again, first);
  // Sizes are rounded to 64 bytes, so 1000 and 1024 share blocks.
  _mlir_memref_to_llvm_free(again);
  void *rounded = _mlir_memref_to_llvm_alloc(1024);
  EXPECT_EQ(rounded, first);
  _mlir_memref_to_llvm_free(rounded);
}

TEST(Allocator, BlocksAreAlignedAndSizesKeptApart) {
  void *small = _mlir_memref_to_llvm_aligned_alloc(64, 100);
  void *large = _mlir_memref_to_llvm_alloc(1 << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large) % 64, 0u);
  _mlir_memref_to_llvm_free(small);
  void *other = _mlir_memref_to_llvm_alloc(1 << 20);
  EXPECT_NE(other, small);
  std::memset(other, 0, 1 << 20);
  _mlir_memref_to_llvm_free(other);
  _mlir_memref_to_llvm_free(large);
  _mlir_memref_to_llvm_free(nullptr);
}
