//===- DeallocAtLastUse.cpp - free each buffer right after its last use ----===//
//
// Upstream's ownership-based deallocation frees a block's buffers at the end
// of the block. The training step is one block, so every buffer it
// allocates (every saved activation, every gradient of one) lives until the
// step returns, and the step's memory is the sum of all of them: nothing a
// layer's backward pass is done with is ever reused within the step, and
// recomputing activations saves nothing. Moving each free to right after the
// last op that reads the buffer, or anything derived from it, bounds the
// step's memory by what is alive at once.
//
//===----------------------------------------------------------------------===//
#include "megatron/Lowering/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_DEALLOCATLASTUSE
#include "megatron/Lowering/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;

namespace {

/// The last op of `block` that reads the buffer `alloc` allocates, or a
/// value derived from it (a view, an extracted pointer, a started
/// collective's handle, a region op's results), so that freeing after it is
/// safe; nothing when a derived value leaves the block (its terminator, or a
/// user outside it).
std::optional<Operation *> lastUse(memref::AllocOp alloc, Block &block) {
  Operation *terminator = block.getTerminator();
  Operation *last = alloc;
  llvm::SetVector<Value> derived;
  derived.insert(alloc.getResult());
  for (unsigned i = 0; i < derived.size(); ++i) {
    for (Operation *user : derived[i].getUsers()) {
      Operation *ancestor = block.findAncestorOpInBlock(*user);
      if (!ancestor || ancestor == terminator)
        return std::nullopt;
      if (isa<memref::DeallocOp>(ancestor))
        continue;
      if (last->isBeforeInBlock(ancestor))
        last = ancestor;
      for (Value result : ancestor->getResults())
        derived.insert(result);
    }
  }
  return last;
}

/// Moves `dealloc` of a buffer allocated in its block to right after the
/// buffer's last use. A free of anything else (a function's argument, a
/// base extracted from a view) stays where deallocation put it.
void moveToLastUse(memref::DeallocOp dealloc) {
  Block &block = *dealloc->getBlock();
  auto alloc = dealloc.getMemref().getDefiningOp<memref::AllocOp>();
  if (!alloc || alloc->getBlock() != &block)
    return;
  std::optional<Operation *> last = lastUse(alloc, block);
  if (last && (*last)->isBeforeInBlock(dealloc))
    dealloc->moveAfter(*last);
}

struct DeallocAtLastUsePass
    : public megatron::impl::DeallocAtLastUseBase<DeallocAtLastUsePass> {
  void runOnOperation() override {
    SmallVector<memref::DeallocOp> deallocs;
    getOperation().walk(
        [&](memref::DeallocOp dealloc) { deallocs.push_back(dealloc); });
    for (memref::DeallocOp dealloc : deallocs)
      moveToLastUse(dealloc);
  }
};

} // namespace
