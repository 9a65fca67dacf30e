//===- Pipeline.cpp - the Megatron pipeline and pass registration ---------===//
#include "megatron/Dialect/TP/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

void megatron::buildMegatronPipeline(OpPassManager &pm,
                                     const MegatronAnnotateOptions &layout,
                                     bool exportLogits) {
  pm.addPass(createMegatronAnnotate(layout));
  buildPartitionPipeline(pm, exportLogits);
}

void megatron::buildPartitionPipeline(OpPassManager &pm, bool exportLogits) {
  pm.addPass(createPropagate());
  pm.addPass(createInsertConjugates());
  if (exportLogits)
    pm.addPass(createExportLogits());
  pm.addPass(createPartition());
}

void megatron::registerPassesAndPipelines() {
  registerMegatronTPPasses();
  PassPipelineRegistration<PipelineOptions>(
      "megatron-pipeline",
      "Megatron-LM tensor parallelism: annotate, propagate, insert f/g, "
      "partition",
      [](OpPassManager &pm, const PipelineOptions &options) {
        buildMegatronPipeline(pm, options.annotateOptions(),
                              options.exportLogits);
      });
  PassPipelineRegistration<>(
      "megatron-partition-pipeline",
      "Partitions a program from the shardings written on it (a framework's "
      "linalg program with tp.sharding arguments or upstream shard "
      "annotations): import shard annotations, propagate, insert f/g, "
      "partition",
      [](OpPassManager &pm) {
        pm.addPass(createImportShard());
        buildPartitionPipeline(pm, /*exportLogits=*/false);
      });
}
