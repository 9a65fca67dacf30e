//===- GPT2Test.cpp - GPT-2 configurations and the generated module -------===//
#include "megatron/Dialect/TP/IR/TP.h"
#include "megatron/Models/GPT2.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "gtest/gtest.h"

#include <tuple>

using namespace mlir;
using namespace mlir::megatron;

// Parameter counts of the Hugging Face GPT-2 checkpoints (V = 50257).
TEST(GPT2Config, PresetParameterCountsMatchGPT2) {
  EXPECT_EQ(countParameters(*GPT2Config::fromPreset("124M")), 124439808);
  EXPECT_EQ(countParameters(*GPT2Config::fromPreset("350M")), 354823168);
  EXPECT_EQ(countParameters(*GPT2Config::fromPreset("774M")), 774030080);
  EXPECT_EQ(countParameters(*GPT2Config::fromPreset("1558M")), 1557611200);
}

// Table 1 of the Megatron-LM paper: 1.2, 2.5, 4.2 and 8.3 billion
// parameters, 96 channels per head.
TEST(GPT2Config, MegatronPresetsMatchTheirTable) {
  for (auto [name, heads, params] :
       {std::tuple{"megatron-1.2B", 16, int64_t{1213479936}},
        std::tuple{"megatron-2.5B", 20, int64_t{2490408960}},
        std::tuple{"megatron-4.2B", 24, int64_t{4199109120}},
        std::tuple{"megatron-8.3B", 32, int64_t{8317040640}}}) {
    std::optional<GPT2Config> config = GPT2Config::fromPreset(name);
    ASSERT_TRUE(config) << name;
    EXPECT_EQ(config->heads, heads) << name;
    EXPECT_EQ(config->embd / config->heads, 96) << name;
    EXPECT_EQ(countParameters(*config), params) << name;
  }
}

TEST(GPT2Config, UnknownPresetIsRejected) {
  EXPECT_FALSE(GPT2Config::fromPreset("7B"));
}

TEST(GPT2Config, ValidateNamesTheProblem) {
  GPT2Config config = *GPT2Config::fromPreset("124M");
  EXPECT_EQ(config.validate(), "");
  config.heads = 7;
  EXPECT_NE(config.validate().find("--heads 7 does not divide"),
            std::string::npos);
  config = *GPT2Config::fromPreset("124M");
  config.seq = 2048;
  EXPECT_NE(config.validate().find("exceeds the position table"),
            std::string::npos);
}

// The function's parameter arguments, counted from the IR itself.
TEST(GPT2Module, ArgumentsHoldEveryParameterOnce) {
  MLIRContext context;
  GPT2Config config = *GPT2Config::fromPreset("tiny");
  OwningOpRef<ModuleOp> module = buildGPT2Module(context, config);
  ASSERT_TRUE(succeeded(verify(*module)));
  auto function = cast<func::FuncOp>(&module->getBody()->front());
  int64_t elements = 0;
  unsigned named = 0;
  for (unsigned i = 0; i < function.getNumArguments(); ++i) {
    auto name = function.getArgAttrOfType<StringAttr>(
        i, tp::TPDialect::kNameAttrName);
    ASSERT_TRUE(name) << "argument " << i << " has no tp.name";
    if (name.getValue() == "input_ids" || name.getValue() == "targets")
      continue;
    ++named;
    elements += cast<RankedTensorType>(function.getArgument(i).getType())
                    .getNumElements();
  }
  EXPECT_EQ(named, 4u + 12u * config.layers);
  EXPECT_EQ(elements, countParameters(config));
}
