//===- PlanBuffers.cpp - a function's buffers at offsets of one arena -----===//
//
// After deallocation, the step allocates and frees each of its buffers: two
// runtime calls per buffer, about two thousand in a 48-layer GPT-2 step,
// each one more call for the code generator to lower and for the step to
// run. Their lifetimes are known statically (each free follows its buffer's
// last use in the one block), so the buffers are planned once, at compile
// time, into one arena: the way XLA's buffer assignment and TFLite's
// greedy-by-size planner place tensors.
//
//===----------------------------------------------------------------------===//
#include "megatron/Lowering/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_PLANBUFFERS
#include "megatron/Lowering/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;

namespace {

/// Offsets are multiples of this: the runtime's allocator aligns to it, and
/// vector loads of a buffer's rows stay aligned as they were.
constexpr int64_t kAlignment = 64;

/// A buffer of the block, alive from its allocation to its free.
struct Lifetime {
  memref::AllocOp alloc;
  memref::DeallocOp dealloc;
  int64_t first, last;
  int64_t bytes;
  int64_t offset = 0;
};

int64_t alignUp(int64_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

/// The bytes of a buffer `memref.view` can place: statically shaped, with
/// the identity layout, of whole-byte elements.
std::optional<int64_t> plannableBytes(memref::AllocOp alloc) {
  MemRefType type = alloc.getType();
  Type element = type.getElementType();
  if (!type.hasStaticShape() || !type.getLayout().isIdentity() ||
      type.getMemorySpace() || !element.isIntOrFloat() ||
      element.getIntOrFloatBitWidth() % 8 != 0)
    return std::nullopt;
  if (auto alignment = alloc.getAlignment();
      alignment && kAlignment % *alignment != 0)
    return std::nullopt;
  return type.getNumElements() * (element.getIntOrFloatBitWidth() / 8);
}

/// The buffers of `block` freed in it, with their positions in it.
SmallVector<Lifetime> collectLifetimes(Block &block) {
  DenseMap<Operation *, int64_t> position;
  for (auto [index, op] : llvm::enumerate(block))
    position[&op] = index;
  SmallVector<Lifetime> lifetimes;
  for (auto dealloc : block.getOps<memref::DeallocOp>()) {
    auto alloc = dealloc.getMemref().getDefiningOp<memref::AllocOp>();
    if (!alloc || alloc->getBlock() != &block)
      continue;
    std::optional<int64_t> bytes = plannableBytes(alloc);
    if (!bytes)
      continue;
    lifetimes.push_back({alloc, dealloc, position.lookup(alloc),
                         position.lookup(dealloc), alignUp(*bytes)});
  }
  return lifetimes;
}

bool overlapInTime(const Lifetime &a, const Lifetime &b) {
  return a.first <= b.last && b.first <= a.last;
}

/// Places the largest buffer first, each at the lowest offset where it
/// overlaps no placed buffer alive at the same time; returns the arena's
/// size.
int64_t placeGreedyBySize(MutableArrayRef<Lifetime> lifetimes) {
  SmallVector<Lifetime *> bySize =
      llvm::map_to_vector(lifetimes, [](Lifetime &l) { return &l; });
  llvm::stable_sort(bySize, [](const Lifetime *a, const Lifetime *b) {
    return a->bytes > b->bytes;
  });
  SmallVector<Lifetime *> placed;
  int64_t size = 0;
  for (Lifetime *buffer : bySize) {
    SmallVector<Lifetime *> alive;
    for (Lifetime *other : placed)
      if (overlapInTime(*buffer, *other))
        alive.push_back(other);
    llvm::sort(alive, [](const Lifetime *a, const Lifetime *b) {
      return a->offset < b->offset;
    });
    int64_t offset = 0;
    for (Lifetime *other : alive) {
      if (offset + buffer->bytes <= other->offset)
        break;
      offset = std::max(offset, other->offset + other->bytes);
    }
    buffer->offset = offset;
    size = std::max(size, offset + buffer->bytes);
    placed.push_back(buffer);
  }
  return size;
}

/// The arena at the top of `block`, freed before its terminator, and each
/// buffer a view of it.
void rewriteIntoArena(Block &block, MutableArrayRef<Lifetime> lifetimes,
                      int64_t size) {
  OpBuilder b = OpBuilder::atBlockBegin(&block);
  Location loc = block.getParentOp()->getLoc();
  auto arenaType = MemRefType::get({size}, b.getI8Type());
  Value arena = memref::AllocOp::create(b, loc, arenaType,
                                        b.getI64IntegerAttr(kAlignment));
  b.setInsertionPoint(block.getTerminator());
  memref::DeallocOp::create(b, loc, arena);
  for (Lifetime &buffer : lifetimes) {
    b.setInsertionPoint(buffer.alloc);
    Location at = buffer.alloc.getLoc();
    Value offset = arith::ConstantIndexOp::create(b, at, buffer.offset);
    Value view = memref::ViewOp::create(b, at, buffer.alloc.getType(), arena,
                                        offset, ValueRange());
    buffer.alloc.getResult().replaceAllUsesWith(view);
    buffer.dealloc->erase();
    buffer.alloc->erase();
  }
}

struct PlanBuffersPass
    : public megatron::impl::PlanBuffersBase<PlanBuffersPass> {
  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (function.isExternal())
      return;
    Block &block = function.getBody().front();
    SmallVector<Lifetime> lifetimes = collectLifetimes(block);
    // One buffer gains nothing from an arena of its own.
    if (lifetimes.size() < 2)
      return;
    int64_t size = placeGreedyBySize(lifetimes);
    rewriteIntoArena(block, lifetimes, size);
  }
};

} // namespace
