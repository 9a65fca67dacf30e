//===- ShardingTest.cpp - #tp.sharding helpers ----------------------------===//
#include "megatron/Dialect/TP/IR/TP.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Parser/Parser.h"
#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::tp;

namespace {
class ShardingTest : public ::testing::Test {
protected:
  ShardingTest() {
    context.loadDialect<TPDialect, func::FuncDialect>();
    module = parseSourceString<ModuleOp>(
        R"mlir(tp.mesh @m axes = ["dp" = 2, "tp" = 4])mlir", &context);
    mesh = cast<MeshOp>(&module->getBody()->front());
  }

  ShardingAttr sharding(StringRef text) {
    return cast<ShardingAttr>(parseAttribute(text, &context));
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  MeshOp mesh;
};
} // namespace

TEST_F(ShardingTest, LocalShapeDividesEachSplitDimension) {
  ShardingAttr columns = sharding(R"(#tp.sharding<@m, [["dp"], ["tp"]]>)");
  EXPECT_EQ(getLocalShape({8, 768}, columns, mesh),
            (SmallVector<int64_t>{4, 192}));
  ShardingAttr both = sharding(R"(#tp.sharding<@m, [[], ["dp", "tp"]]>)");
  EXPECT_EQ(getLocalShape({3, 64}, both, mesh), (SmallVector<int64_t>{3, 8}));
}

TEST_F(ShardingTest, PartialSumKeepsItsShape) {
  ShardingAttr partial =
      sharding(R"(#tp.sharding<@m, [[], []], partial = ["tp"]>)");
  EXPECT_FALSE(partial.isReplicated());
  EXPECT_EQ(partial.getPartialAxes(), (SmallVector<StringRef>{"tp"}));
  EXPECT_EQ(getLocalShape({4, 5}, partial, mesh), (SmallVector<int64_t>{4, 5}));
  EXPECT_TRUE(sharding("#tp.sharding<@m, [[], []]>").isReplicated());
}

TEST_F(ShardingTest, VerifierRejectsIndivisibleDimension) {
  ShardingAttr columns = sharding(R"(#tp.sharding<@m, [[], ["tp"]]>)");
  SymbolTableCollection symbols;
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
    message = diagnostic.str();
    return success();
  });
  auto type = RankedTensorType::get({8, 6}, Float32Type::get(&context));
  EXPECT_TRUE(failed(verifyShardingForType(mesh, columns, type, symbols)));
  EXPECT_NE(message.find("dimension 1 of size 6 cannot be split into 4"),
            std::string::npos)
      << message;
  auto fits = RankedTensorType::get({8, 12}, Float32Type::get(&context));
  EXPECT_TRUE(succeeded(verifyShardingForType(mesh, columns, fits, symbols)));
}

// The parser cannot give a sharding without a mesh, but C++ builders and
// the C API (mlirAttributeParseGet aside) can: the verifier refuses it.
TEST_F(ShardingTest, VerifierRejectsShardingWithoutMesh) {
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
    message = diagnostic.str();
    return success();
  });
  Builder b(&context);
  auto emitError = [&] { return mlir::emitError(UnknownLoc::get(&context)); };
  ShardingAttr meshless = ShardingAttr::getChecked(
      emitError, &context, FlatSymbolRefAttr(), b.getArrayAttr({}),
      b.getArrayAttr({}), ArrayRef<int64_t>{});
  EXPECT_FALSE(meshless);
  EXPECT_NE(message.find("sharding needs a mesh"), std::string::npos)
      << message;
}
