//===- View.cpp - one transformer layer as a Graphviz picture -------------===//
#include "megatron/Analysis/Passes.h"
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Dialect/TP/Utils/LayerLocations.h"
#include "megatron/Dialect/TP/Utils/Utils.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ToolOutputFile.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_VIEW
#include "megatron/Analysis/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::tp;

namespace {

/// How a value is laid out, as a legend entry and a fill colour.
std::pair<std::string, StringRef> describeLayout(ShardingAttr sharding) {
  if (!sharding || sharding.isReplicated())
    return {"replicated", "#dddddd"};
  if (!sharding.getPartialAxes().empty())
    return {"partial sum over " + describeAxes(sharding.getPartialAxes()),
            "#f6b26b"};
  for (unsigned dim = 0, e = sharding.getDims().size(); dim < e; ++dim)
    if (!sharding.getDimAxes(dim).empty())
      return {"dim " + std::to_string(dim) + " split over " +
                  describeAxes(sharding.getDimAxes(dim)),
              "#9fc5e8"};
  return {"replicated", "#dddddd"};
}

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleave(shape, os, "x");
  os << "]";
  return text;
}

/// "[2x32x192]", or "[2x32x192] -> [2x32x48] per rank" when split.
std::string describeShape(Value value, ShardingAttr sharding, MeshOp mesh) {
  ArrayRef<int64_t> global = cast<RankedTensorType>(value.getType()).getShape();
  std::string text = shapeString(global);
  if (!sharding || !mesh)
    return text;
  SmallVector<int64_t> local = getLocalShape(global, sharding, mesh);
  if (ArrayRef<int64_t>(local) != global)
    text += " -> " + shapeString(local) + " per rank";
  return text;
}

std::string escape(StringRef text) {
  std::string escaped;
  for (char c : text)
    escaped += c == '"' ? std::string("\\\"") : std::string(1, c);
  return escaped;
}

/// Why `function` has no forward op of `layer`: the layers it has, or that
/// none of its ops is located in a #tp.layer.
std::string missingLayerReason(func::FuncOp function) {
  int64_t last = -1;
  function.walk([&](Operation *op) {
    if (getPhase(op) == "forward")
      last = std::max(last, getLayer(op->getLoc()).value_or(-1));
  });
  if (last >= 0)
    return " (the layers are 0.." + std::to_string(last) + ")";
  return ": no op is located in a #tp.layer (the model generator's "
         "locations, which IR printed without --mlir-print-debuginfo has "
         "lost)";
}

class LayerPicture {
public:
  LayerPicture(func::FuncOp function, int64_t layer, MeshOp mesh)
      : function(function), layer(layer), mesh(mesh),
        tp(mesh ? mesh.getAxisSize(MGT_AXIS_NAME_TP).value_or(1) : 1) {
    collect();
  }

  /// Whether the function has forward ops of the layer at all.
  bool empty() const { return ops.empty(); }

  void write(raw_ostream &os) {
    os << "digraph layer {\n  rankdir=TB;\n  node [style=filled, "
          "fontname=\"Helvetica\", fontsize=10];\n"
       << "  label=\"Layer " << layer << " at TP=" << tp
       << ": both blocks use all " << tp
       << " ranks, one after the other\\nblue: split, orange: partial sum, "
          "grey: replicated; f and g are Megatron's conjugates\";\n"
       << "  labelloc=t;\n";
    for (StringRef block : {"attention", "mlp"}) {
      os << "  subgraph cluster_" << block << " {\n    label=\"" << block
         << " block (" << tp << " ranks)\";\n    color=\"#666666\";\n";
      for (Operation *op : ops)
        if (blocks.lookup(op) == block)
          writeNode(os, op);
      os << "  }\n";
    }
    writeEdges(os);
    os << "}\n";
  }

private:
  /// The layer's forward ops, in order. Megatron's two blocks follow from
  /// the layer's structure, not from its module names: the attention block
  /// runs up to the residual add after the attention, the MLP block after.
  void collect() {
    StringRef block = "attention";
    bool attended = false;
    function.walk([&](Operation *op) {
      if (op->getNumResults() != 1 || getPhase(op) != "forward" ||
          getLayer(op->getLoc()) != layer)
        return;
      ids[op] = ops.size(), ops.push_back(op);
      blocks[op] = block;
      attended |= isa<AttentionOp>(op);
      if (attended && isa<AddOp>(op))
        block = "mlp";
    });
  }

  void writeNode(raw_ostream &os, Operation *op) {
    Value result = op->getResult(0);
    ShardingAttr sharding = getSharding(result);
    auto [layout, color] = describeLayout(sharding);
    bool conjugate = isa<FOp, GOp>(op);
    os << "    n" << ids[op] << " [label=\""
       << escape(op->getName().getStringRef()) << "\\n"
       << escape(getModuleName(op->getLoc())) << "\\n"
       << describeShape(result, sharding, mesh) << "\\n" << escape(layout)
       << "\", fillcolor=\""
       << (conjugate ? (isa<FOp>(op) ? "#93c47d" : "#e06666") : color)
       << "\", shape=" << (conjugate ? "diamond" : "box") << "];\n";
  }

  void writeEdges(raw_ostream &os) {
    for (Operation *op : ops)
      for (Value operand : op->getOperands()) {
        Operation *producer = operand.getDefiningOp();
        if (producer && ids.count(producer))
          os << "  n" << ids[producer] << " -> n" << ids[op] << ";\n";
      }
  }

  func::FuncOp function;
  int64_t layer;
  MeshOp mesh;
  int64_t tp;
  /// The layer's ops in program order, numbered for stable node names.
  SmallVector<Operation *> ops;
  DenseMap<Operation *, unsigned> ids;
  /// "attention" or "mlp".
  DenseMap<Operation *, StringRef> blocks;
};

struct ViewPass : public megatron::impl::ViewBase<ViewPass> {
  using ViewBase::ViewBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(tp::verifyProgramDialects(getOperation(), getArgument())))
      return signalPassFailure();
    MeshOp mesh;
    for (auto candidate : module.getOps<MeshOp>())
      mesh = candidate;
    std::error_code error;
    llvm::ToolOutputFile out(dot, error, llvm::sys::fs::OF_Text);
    if (error) {
      module.emitError("cannot write '") << dot << "': " << error.message();
      return signalPassFailure();
    }
    // Each function that runs the layer's forward ops draws it (a step and
    // its forward entry both do; an outlined layer body may not).
    func::FuncOp withoutLayer;
    bool drawn = false;
    for (auto function : module.getOps<func::FuncOp>()) {
      if (function.isExternal())
        continue;
      LayerPicture picture(function, layer, mesh);
      if (picture.empty()) {
        withoutLayer = withoutLayer ? withoutLayer : function;
        continue;
      }
      picture.write(out.os());
      drawn = true;
    }
    if (!drawn && withoutLayer) {
      mlir::emitError(withoutLayer.getLoc())
          << "no forward op of layer " << static_cast<int64_t>(layer)
          << " to draw" << missingLayerReason(withoutLayer);
      return signalPassFailure();
    }
    out.keep();
    markAllAnalysesPreserved();
  }
};

} // namespace
