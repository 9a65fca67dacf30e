// The buffer cache of generated code: freed blocks come back for the same
// size, aligned, and sizes are kept apart; large blocks are huge-page memory.
#include "megatron_rt/allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>

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

namespace {

// The VmFlags line of the mapping of /proc/self/smaps that holds `address`.
std::string vmFlagsAt(const void *address) {
  auto at = reinterpret_cast<uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-')
      inside = begin <= at && at < end;
    else if (inside && line.rfind("VmFlags:", 0) == 0)
      return line;
  }
  return "";
}

} // namespace

TEST(Allocator, LargeBlocksAreAdvisedAsHugePages) {
  struct stat info;
  if (stat("/sys/kernel/mm/transparent_hugepage", &info) != 0)
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  const size_t bytes = (size_t(2) << 20) * 3 + 100;
  void *block = _mlir_memref_to_llvm_alloc(bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % (size_t(2) << 20), 0u);
  std::memset(block, 1, bytes);
  // "hg": the mapping carries MADV_HUGEPAGE.
  EXPECT_NE(vmFlagsAt(block).find(" hg"), std::string::npos) << vmFlagsAt(block);
  _mlir_memref_to_llvm_free(block);
}

TEST(AllocatorDeathTest, SizeThatWrapsAroundStops) {
  EXPECT_DEATH(_mlir_memref_to_llvm_alloc(SIZE_MAX - 10),
               "cannot allocate a buffer of [0-9]+ bytes");
}
