//===- TPBase.td - tp dialect definition -------------------*- tablegen -*-===//
#ifndef MEGATRON_DIALECT_TP_IR_TPBASE_TD
#define MEGATRON_DIALECT_TP_IR_TPBASE_TD

include "mlir/IR/OpBase.td"

def TP_Dialect : Dialect {
  let name = "tp";
  let cppNamespace = "::mlir::tp";
  let summary = "Tensor-parallel transformer ops, sharding specs and collectives";
  let description = [{
    The tp dialect describes a transformer at global shapes, the sharding of
    its values over a device mesh (`tp.mesh`, `#tp.sharding`), and the
    collectives of Megatron-LM tensor parallelism, among them the conjugate
    pair `tp.f` (identity forward, all-reduce backward) and `tp.g`
    (all-reduce forward, identity backward).

    Shardings are attached as the discardable attribute `tp.sharding`: on an
    op it describes the op's single result, on a function argument the
    argument. `tp.name` on a function argument names a model parameter;
    after tp-partition, `tp.global_shape` gives its shape before the split;
    `tp.unpadded_shape` the shape a checkpoint holds when tp-megatron-annotate
    padded the vocabulary. A model states what its arguments are in the IR,
    so that no pass or runtime matches names: `tp.role` ("tokens",
    "targets", "param", ...), `tp.init` (#tp.init, how a parameter is
    initialised), `tp.layer` (#tp.layer, the repeated layer it belongs to);
    tp-optimizer adds state arguments with `tp.role` and `tp.param`.

    The example is Megatron's MLP at global shapes: its first weight split
    by columns, its second by rows, with the conjugates that
    tp-insert-conjugates places around them.

    Example:

    ```mlir
    tp.mesh @m axes = ["tp" = 2]
    func.func @mlp(%x: tensor<8x64xf32>,
                   %w1: tensor<64x256xf32> {tp.name = "fc.weight", tp.sharding = #tp.sharding<@m, [[], ["tp"]]>},
                   %w2: tensor<256x64xf32> {tp.name = "proj.weight", tp.sharding = #tp.sharding<@m, [["tp"], []]>})
        -> tensor<8x64xf32> {
      %xf = tp.f %x over @m["tp"] : tensor<8x64xf32>
      %h = tp.matmul %xf, %w1 : tensor<8x64xf32>, tensor<64x256xf32> -> tensor<8x256xf32>
      %a = tp.gelu %h : tensor<8x256xf32>
      %y = tp.matmul %a, %w2 : tensor<8x256xf32>, tensor<256x64xf32> -> tensor<8x64xf32>
      %z = tp.g %y over @m["tp"] : tensor<8x64xf32>
      return %z : tensor<8x64xf32>
    }
    ```
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    static constexpr ::llvm::StringLiteral kShardingAttrName = "tp.sharding";
    static constexpr ::llvm::StringLiteral kNameAttrName = "tp.name";
    static constexpr ::llvm::StringLiteral kGlobalShapeAttrName = "tp.global_shape";
    static constexpr ::llvm::StringLiteral kUnpaddedShapeAttrName = "tp.unpadded_shape";
    /// What the runtime feeds an argument (megatron_rt/contract.h's
    /// MGT_ROLE_*); a float argument without one is a parameter.
    static constexpr ::llvm::StringLiteral kRoleAttrName = "tp.role";
    /// The parameter optimizer state or an exported gradient belongs to.
    static constexpr ::llvm::StringLiteral kParamAttrName = "tp.param";
    /// A parameter's #tp.init rule.
    static constexpr ::llvm::StringLiteral kInitAttrName = "tp.init";
    /// A parameter's #tp.layer.
    static constexpr ::llvm::StringLiteral kLayerAttrName = "tp.layer";
    /// "recompute", "backward" or "optimizer" on ops of the training step's
    /// later phases; the forward pass carries none.
    static constexpr ::llvm::StringLiteral kPhaseAttrName = "tp.phase";
    static constexpr ::llvm::StringLiteral kGradOfAttrName = "tp.grad_of";
    /// On a model's function: how its family's published checkpoints name
    /// tensors (megatron_rt/contract.h's MGT_CHECKPOINT_NAMES_*).
    static constexpr ::llvm::StringLiteral kCheckpointNamesAttrName = "tp.checkpoint_names";
    /// On a function tp-partition made per-rank: its types are local shapes.
    static constexpr ::llvm::StringLiteral kPartitionedAttrName = "tp.partitioned";
    static constexpr ::llvm::StringLiteral kUpdatesAttrName = "tp.updates";
    /// On a function a step library exports: the entry it becomes
    /// (megatron_rt/contract.h's MGT_ENTRY_KIND_*, "forward" or
    /// "train_step"). tp-keep-forward sets it; tp-autodiff leaves a forward
    /// entry alone.
    static constexpr ::llvm::StringLiteral kEntryAttrName = "tp.entry";
    /// On the module: what tp-step-manifest recorded for the step library
    /// (its manifest, target and entry points), read after the lowering.
    static constexpr ::llvm::StringLiteral kStepAttrName = "tp.step";

  private:
    void registerAttributes();
  public:
  }];
}

class TP_Op<string mnemonic, list<Trait> traits = []>
    : Op<TP_Dialect, mnemonic, traits>;

// Every value the transformer ops compute is a statically shaped float
// tensor: local shapes must be known to plan per-rank memory and GEMMs.
def TP_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;
def TP_F32Tensor : StaticShapeTensorOf<[F32]>;
def TP_IndexTensor : StaticShapeTensorOf<[AnySignlessInteger]>;
def TP_Scalar : 0DTensorOf<[AnyFloat]>;
// The training step's hyperparameters (megatron_rt/contract.h's MGT_HP_*).
def TP_Hyperparameters : StaticShapeTensorOf<[F32]>;
// A dropout probability: in [0, 1).
def TP_DropoutRate : ConfinedAttr<F64Attr, [AttrConstraint<
    CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() >= 0.0 && "
          "::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() < 1.0">,
    "whose value is in [0, 1)">]>;

#endif // MEGATRON_DIALECT_TP_IR_TPBASE_TD
