// RUN: megatron-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{axis "tp" is declared twice}}
tp.mesh @m axes = ["tp" = 2, "tp" = 4]

// -----

// expected-error @+1 {{axis "tp" has size 0; sizes must be positive}}
tp.mesh @m axes = ["tp" = 0]

// -----

// expected-error @+1 {{the sub-axes of "tp" multiply to 6, not its size 4}}
tp.mesh @m axes = ["tp" = 4 ["tp_kv" = 2, "tp_rep" = 3]]

// -----

// expected-error @+1 {{axis "tp" is declared twice}}
tp.mesh @m axes = ["tp" = 4 ["tp" = 2, "tp_rep" = 2]]

// -----

// expected-error @+1 {{sub-axis "tp_kv" has size 1}}
tp.mesh @m axes = ["tp" = 2 ["tp_kv" = 1, "tp_rep" = 2]]

// -----

// expected-error @+1 {{needs a size and a parent axis for each sub-axis}}
"tp.mesh"() <{sym_name = "m", axis_names = ["tp"], axis_sizes = array<i64: 4>, sub_axis_names = ["tp_kv", "tp_rep"], sub_axis_sizes = array<i64: 2, 2>}> : () -> ()

// -----

// expected-error @+1 {{sub-axes of "pp", which is not an axis}}
"tp.mesh"() <{sym_name = "m", axis_names = ["tp"], axis_sizes = array<i64: 4>, sub_axis_names = ["a", "b"], sub_axis_sizes = array<i64: 2, 2>, sub_axis_parents = ["pp", "pp"]}> : () -> ()

// -----

// A sub-axis and its axis split one tensor twice over the same ranks.
tp.mesh @m axes = ["tp" = 4 ["tp_kv" = 2, "tp_rep" = 2]]
// expected-error @+1 {{sharding uses "tp_kv" twice, as a sub-axis and through its axis}}
func.func @sub_axis_twice(%x: tensor<8x8xf32> {tp.sharding = #tp.sharding<@m, [["tp"], ["tp_kv"]]>}) {
  return
}

// -----

func.func @matmul_contracting(%a: tensor<2x8x16xf32>, %b: tensor<32x8xf32>) {
  // expected-error @+1 {{contracting sizes differ: lhs has 16, rhs has 32}}
  %0 = tp.matmul %a, %b : tensor<2x8x16xf32>, tensor<32x8xf32> -> tensor<2x8x8xf32>
  return
}

// -----

func.func @matmul_result(%a: tensor<2x8x16xf32>, %b: tensor<16x8xf32>) {
  // expected-error @+1 {{result has shape [2, 8, 9] but [2, 8, 8] is expected}}
  %0 = tp.matmul %a, %b : tensor<2x8x16xf32>, tensor<16x8xf32> -> tensor<2x8x9xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x8x16xf32>, %b: tensor<3x16x8xf32>) {
  // expected-error @+1 {{rhs batch has shape [3] but [2] is expected}}
  %0 = tp.matmul %a, %b : tensor<2x8x16xf32>, tensor<3x16x8xf32> -> tensor<2x8x8xf32>
  return
}

// -----

func.func @embedding_width(%t: tensor<64x16xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{result has shape [2, 8, 32] but [2, 8, 16] is expected}}
  %0 = tp.embedding %t[%ids] : tensor<64x16xf32>, tensor<2x8xi32> -> tensor<2x8x32xf32>
  return
}

// -----

func.func @position_embedding_too_long(%t: tensor<8x16xf32>) {
  // expected-error @+1 {{needs 9 positions but the table has 8}}
  %0 = tp.position_embedding %t : tensor<8x16xf32> -> tensor<9x16xf32>
  return
}

// -----

func.func @layer_norm_weight(%x: tensor<2x8x16xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{weight has shape [8] but [16] is expected}}
  %0 = tp.layer_norm %x, %w, %w : tensor<2x8x16xf32>, tensor<8xf32>
  return
}

// -----

func.func @bias_not_suffix(%x: tensor<2x8x16xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{bias shape [8] is not a suffix of the input shape [2, 8, 16]}}
  %0 = tp.bias_add %x, %b : tensor<2x8x16xf32>, tensor<8xf32>
  return
}

// -----

func.func @add_types(%a: tensor<2x8xf32>, %b: tensor<2x9xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "tp.add"(%a, %b) : (tensor<2x8xf32>, tensor<2x9xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @heads_do_not_divide(%qkv: tensor<2x8x48xf32>) {
  // expected-error @+1 {{num_heads 3 does not divide the embedding width 16}}
  %0 = tp.attention %qkv heads = 3 : tensor<2x8x48xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @qkv_not_fused(%qkv: tensor<2x8x16xf32>) {
  // expected-error @+1 {{qkv width 16 is not 3 * width}}
  %0 = tp.attention %qkv heads = 2 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_result(%qkv: tensor<2x8x48xf32>) {
  // expected-error @+1 {{result has shape [2, 8, 48] but [2, 8, 16] is expected}}
  %0 = tp.attention %qkv heads = 2 : tensor<2x8x48xf32> -> tensor<2x8x48xf32>
  return
}

// -----

func.func @softmax_dim(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = tp.softmax %x dim = 2 : tensor<2x8xf32>
  return
}

// -----

func.func @cross_entropy_targets(%l: tensor<2x8x64xf32>, %t: tensor<2x4xi32>) {
  // expected-error @+1 {{targets has shape [2, 4] but [2, 8] is expected}}
  %0 = tp.cross_entropy %l, %t valid_vocab = 64 : tensor<2x8x64xf32>, tensor<2x4xi32> -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_vocab(%l: tensor<2x8x64xf32>, %t: tensor<2x8xi32>) {
  // expected-error @+1 {{valid_vocab 65 exceeds the 64 logits}}
  %0 = tp.cross_entropy %l, %t valid_vocab = 65 : tensor<2x8x64xf32>, tensor<2x8xi32> -> tensor<f32>
  return
}

// -----

// expected-error @+1 {{sharding refers to unknown mesh @nowhere}}
func.func @unknown_mesh(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@nowhere, [[], []]>}) {
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
// expected-error @+1 {{mesh @m has no axis "pp"}}
func.func @unknown_axis(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@m, [["pp"], []]>}) {
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
// expected-error @+1 {{mesh @m has no axis "dp"}}
func.func @unknown_partial_axis(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@m, [[], []], partial = ["dp"]>}) {
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
// expected-error @+1 {{mesh axis "tp" is used more than once in one sharding}}
func.func @axis_twice(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@m, [["tp"], ["tp"]]>}) {
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
// expected-error @+1 {{mesh axis "tp" is used more than once in one sharding}}
func.func @axis_split_and_partial(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@m, [["tp"], []], partial = ["tp"]>}) {
  return
}

// -----

tp.mesh @m axes = ["tp" = 4]
// expected-error @+1 {{dimension 1 of size 6 cannot be split into 4 shards}}
func.func @indivisible(%x: tensor<4x6xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>}) {
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
// expected-error @+1 {{sharding has 1 dimension entries for a tensor of rank 2}}
func.func @sharding_rank(%x: tensor<4x6xf32> {tp.sharding = #tp.sharding<@m, [[]]>}) {
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
func.func @result_sharding_indivisible(%x: tensor<3x8xf32>) {
  // expected-error @+1 {{dimension 0 of size 3 cannot be split into 2 shards}}
  %0 = tp.gelu %x {tp.sharding = #tp.sharding<@m, [["tp"], []]>} : tensor<3x8xf32>
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
func.func @sharding_not_attr(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'tp.sharding' must be a #tp.sharding attribute}}
  %0 = tp.gelu %x {tp.sharding = 3 : i64} : tensor<4x8xf32>
  return
}

// -----

func.func @collective_unknown_mesh(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{refers to unknown mesh @m}}
  %0 = tp.g %x over @m["tp"] : tensor<4x8xf32>
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
func.func @collective_unknown_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{mesh @m has no axis "pp"}}
  %0 = tp.f %x over @m["pp"] : tensor<4x8xf32>
  return
}

// -----

tp.mesh @m axes = ["tp" = 4]
func.func @all_gather_shape(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{local side has shape [4, 8] but [4, 4] is expected}}
  %0 = tp.all_gather %x over @m["tp"] dim = 1 : tensor<4x8xf32> -> tensor<4x16xf32>
  return
}

// -----

tp.mesh @m axes = ["tp" = 4]
func.func @local_slice_indivisible(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{dimension 1 of size 6 cannot be split into 4 shards}}
  %0 = tp.local_slice %x over @m["tp"] dim = 1 : tensor<4x6xf32> -> tensor<4x1xf32>
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
func.func @reduce_scatter_dim(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dim 2 is out of range, or input and result ranks differ}}
  %0 = tp.reduce_scatter sum %x over @m["tp"] dim = 2 : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @name_not_string(%x: tensor<4xf32> {tp.name = 3 : i64}) {
  // expected-error @-1 {{'tp.name' of argument #0 must be a string}}
  return
}

// -----

// Names key the checkpoint and the manifest: two arguments of one name.
// expected-error @+1 {{'func.func' op arguments #0 and #2 have the same 'tp.name' "w"}}
func.func @duplicate_name(%a: tensor<4xf32> {tp.name = "w"}, %b: tensor<4xf32> {tp.name = "b"}, %c: tensor<4xf32> {tp.name = "w"}) {
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
func.func @unknown_tp_attr(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{unknown tp attribute 'tp.shard' on an operation}}
  %0 = tp.gelu %x {tp.shard = #tp.sharding<@m, [[], []]>} : tensor<4x8xf32>
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
// expected-error @+1 {{expected 'partial' or 'sections' (each once)}}
func.func @sharding_keyword(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@m, [[], []], split = [1, 1]>}) {
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
// expected-error @+1 {{sections has 1 entries for 2 dimensions}}
func.func @sections_rank(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]], sections = [3]>}) {
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
// expected-error @+1 {{dimension 1 of size 9 cannot be split into 2 shards of each of 3 sections}}
func.func @sections_divide(%x: tensor<4x9xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]], sections = [1, 3]>}) {
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]

// 2 shards of 2^63-1 sections wrap to -2, which divides 6: refused all the same.
// expected-error @+1 {{dimension 1 of size 6 cannot be split into 2 shards of each of 9223372036854775807 sections}}
func.func @sections_overflow(%x: tensor<4x6xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]], sections = [1, 9223372036854775807]>}) {
  return
}

// -----

func.func @bad_phase(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'tp.phase' must be "recompute", "backward" or "optimizer"}}
  %0 = tp.gelu %x {tp.phase = "sideways"} : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @no_squares() -> f32 {
  // expected-error @+1 {{'tp.sum_squares' op needs at least one input}}
  %0 = "tp.sum_squares"() : () -> f32
  return %0 : f32
}

// -----

func.func @narrow_loss(%l: tensor<2x8xf32>, %t: tensor<2xi32>) -> tensor<bf16> {
  // expected-error @+1 {{loss has element type 'bf16', narrower than 'f32'}}
  %0 = tp.cross_entropy %l, %t valid_vocab = 8 : tensor<2x8xf32>, tensor<2xi32> -> tensor<bf16>
  return %0 : tensor<bf16>
}

// -----

func.func @narrow_norm_grads(%x: tensor<2x8xf32>, %w: tensor<8xf32>) -> tensor<8xbf16> {
  // expected-error @+1 {{weight_grad has element type 'bf16', narrower than 'f32'}}
  %dx, %dw, %db = tp.layer_norm_grad %x, %w, %x {epsilon = 1.0e-5 : f32} : tensor<2x8xf32>, tensor<8xf32> -> tensor<8xbf16>
  return %dw : tensor<8xbf16>
}

// -----

// expected-error @+1 {{'tp.mesh' op needs at least one axis}}
tp.mesh @m axes = []

// -----

// expected-error @+1 {{'tp.mesh' op has 1 axis names but 2 sizes}}
"tp.mesh"() <{sym_name = "m", axis_names = ["tp"], axis_sizes = array<i64: 2, 4>}> : () -> ()

// -----

// expected-error @+1 {{'tp.mesh' op axis names must not be empty}}
tp.mesh @m axes = ["" = 2]

// -----

func.func @embedding_ids(%t: tensor<64x16xf32>, %ids: tensor<2x8xi64>) {
  // expected-error @+1 {{'tp.embedding' op ids must be i32 token ids}}
  %0 = tp.embedding %t[%ids] : tensor<64x16xf32>, tensor<2x8xi64> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @embedding_table_rank(%t: tensor<64xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{'tp.embedding' op table must be [vocab, width], got rank 1}}
  %0 = tp.embedding %t[%ids] : tensor<64xf32>, tensor<2x8xi32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @embedding_element_type(%t: tensor<64x16xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{'tp.embedding' op result has element type 'f16' but 'f32' is expected}}
  %0 = tp.embedding %t[%ids] : tensor<64x16xf32>, tensor<2x8xi32> -> tensor<2x8x16xf16>
  return
}

// -----

func.func @position_embedding_rank(%t: tensor<8x16xf32>) {
  // expected-error @+1 {{'tp.position_embedding' op table and result must be [positions, width]}}
  %0 = tp.position_embedding %t : tensor<8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @layer_norm_scalar(%x: tensor<f32>, %w: tensor<f32>) {
  // expected-error @+1 {{'tp.layer_norm' op input must have at least one dimension}}
  %0 = tp.layer_norm %x, %w, %w : tensor<f32>, tensor<f32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<16xf32>, %b: tensor<16x8xf32>) {
  // expected-error @+1 {{'tp.matmul' op operands must have rank 2 or more}}
  %0 = tp.matmul %a, %b : tensor<16xf32>, tensor<16x8xf32> -> tensor<8xf32>
  return
}

// -----

func.func @matmul_rhs_rank(%a: tensor<2x3x8x16xf32>, %b: tensor<3x16x8xf32>) {
  // expected-error @+1 {{'tp.matmul' op rhs must be a [K, N] matrix or have the lhs's rank 4, got rank 3}}
  %0 = tp.matmul %a, %b : tensor<2x3x8x16xf32>, tensor<3x16x8xf32> -> tensor<2x3x8x8xf32>
  return
}

// -----

func.func @attention_rank(%qkv: tensor<8x48xf32>) {
  // expected-error @+1 {{'tp.attention' op qkv must be [batch, seq, 3 * width], got rank 2}}
  %0 = tp.attention %qkv heads = 2 : tensor<8x48xf32> -> tensor<8x16xf32>
  return
}

// -----

func.func @xent_max_logits_rank(%l: tensor<64xf32>, %offset: index) {
  // expected-error @+1 {{'tp.xent_max' op logits must be [..., vocab] with at least one token dimension}}
  %0 = tp.xent_max %l offset %offset valid_vocab = 64 : tensor<64xf32> -> tensor<f32>
  return
}

// -----

func.func @weight_grad_rows(%a: tensor<8x16xf32>, %b: tensor<4x32xf32>) {
  // expected-error @+1 {{'tp.weight_grad' op operands must share their leading dimensions, got [8, 16] and [4, 32]}}
  %0 = tp.weight_grad %a, %b : tensor<8x16xf32>, tensor<4x32xf32> -> tensor<16x32xf32>
  return
}

// -----

func.func @sum_to_not_suffix(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'tp.sum_to' op result shape [8] is not a suffix of the input shape [2, 8, 16]}}
  %0 = tp.sum_to %x : tensor<2x8x16xf32> -> tensor<8xf32>
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
// expected-error @+1 {{dimension 0 must be a list of mesh axis names}}
func.func @dims_not_lists(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@m, [3, []]>}) {
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
// expected-error @+1 {{dimension 1 must be a list of mesh axis names}}
func.func @axis_not_string(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@m, [[], [3]]>}) {
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
// expected-error @+1 {{partial must be a list of mesh axis names}}
func.func @partial_not_names(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@m, [[], []], partial = [3]>}) {
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
// expected-error @+1 {{sections must be positive}}
func.func @sections_zero(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]], sections = [1, 0]>}) {
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
// expected-error @+1 {{'func.func' op sharding needs a statically shaped tensor, got 'tensor<?x8xf32>'}}
func.func @dynamic_sharded(%x: tensor<?x8xf32> {tp.sharding = #tp.sharding<@m, [["tp"], []]>}) {
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
// expected-error @+1 {{'func.func' op 'tp.sharding' needs an op with exactly one result}}
func.func @sharding_no_result() attributes {tp.sharding = #tp.sharding<@m, []>} {
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
// expected-error @+1 {{'func.func' op 'tp.sharding' on a missing argument #0}}
func.func private @external(tensor<4x8xf32> {tp.sharding = #tp.sharding<@m, [[], []]>})

// -----

// expected-error @+1 {{'func.func' op 'tp.global_shape' on argument #0, which is not a tensor}}
func.func @global_shape_scalar(%x: f32 {tp.global_shape = array<i64: 4>}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'tp.global_shape' of argument #0 must list one size per dimension}}
func.func @global_shape_rank(%x: tensor<4x8xf32> {tp.global_shape = array<i64: 8>}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op unknown tp attribute 'tp.shard' on argument #0}}
func.func @unknown_arg_attr(%x: tensor<4x8xf32> {tp.shard = 1 : i64}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'tp.updates' of result #0 must name an argument of the same type}}
func.func @updates_type(%x: tensor<4x8xf32>) -> (tensor<8x4xf32> {tp.updates = 0 : i64}) {
  %0 = tensor.empty() : tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// expected-error @+1 {{'func.func' op 'tp.grad_of' of result #0 must be a string}}
func.func @grad_of_not_string(%x: tensor<4x8xf32>) -> (tensor<4x8xf32> {tp.grad_of = 0 : i64}) {
  return %x : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{'func.func' op unknown tp attribute 'tp.name' on result #0}}
func.func @unknown_result_attr(%x: tensor<4x8xf32>) -> (tensor<4x8xf32> {tp.name = "y"}) {
  return %x : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{'func.func' op 'tp.role' of argument #0 must be one of "param" "tokens" "targets" "hyperparameters" "logits" "adam_m" "adam_v" "grad"}}
func.func @unknown_role(%ids: tensor<2x8xi32> {tp.role = "input_ids"}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'tp.init' of argument #0 must be a #tp.init attribute}}
func.func @init_not_a_rule(%w: tensor<8xf32> {tp.init = 2.0e-02 : f64}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'tp.layer' of argument #0 must be a #tp.layer attribute}}
func.func @layer_not_a_layer(%w: tensor<8xf32> {tp.layer = 3 : i64}) {
  return
}

// -----

// expected-error @+1 {{expected 'normal' or 'constant'}}
func.func @init_kind(%w: tensor<8xf32> {tp.init = #tp.init<uniform, 1.0>}) {
  return
}

// -----

// expected-error @+1 {{#tp.init value must be finite}}
func.func @init_infinite(%w: tensor<8xf32> {tp.init = #tp.init<constant, 0x7FF0000000000000>}) {
  return
}

// -----

// expected-error @+1 {{#tp.init<normal> needs a non-negative std, got -2.000000e-02}}
func.func @init_negative_std(%w: tensor<8xf32> {tp.init = #tp.init<normal, -2.0e-02>}) {
  return
}

// -----

// expected-error @+1 {{#tp.layer index must be non-negative, got -1}}
func.func @layer_negative(%w: tensor<8xf32> {tp.layer = #tp.layer<-1>}) {
  return
}

// -----

// expected-error @+1 {{'tp.partitioned' must be a unit attribute on a function}}
func.func @partitioned_value() attributes {tp.partitioned = 1 : i64} {
  return
}

// -----

// expected-error @+1 {{'tp.checkpoint_names' must be a string on a function}}
func.func @checkpoint_names() attributes {tp.checkpoint_names = 2 : i64} {
  return
}

// -----

// expected-error @+1 {{'tp.entry' must be on a function, one of "forward" "train_step" "function" "prefill" "decode"}}
func.func @entry_kind() attributes {tp.entry = "backward"} {
  return
}

// -----

// expected-error @+1 {{'tp.step' must be a dictionary on a module}}
module attributes {tp.step = "manifest"} {
}

// -----

tp.mesh @m axes = ["dp" = 2]
func.func @empty_bucket() {
  // expected-error @+1 {{'tp.all_reduce_bucket' op needs at least one tensor}}
  "tp.all_reduce_bucket"() <{axis = "dp", mesh = @m}> : () -> ()
  return
}

// -----

tp.mesh @m axes = ["dp" = 2]
func.func @bf16_bucket(%x: tensor<4xbf16>) {
  // expected-error @+1 {{'tp.all_reduce_bucket' op operand #0 must be variadic of statically shaped tensor of 32-bit float values}}
  %r = tp.all_reduce_bucket sum %x over @m["dp"] : tensor<4xbf16>
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
func.func @bucket_axis(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tp.all_reduce_bucket' op mesh @m has no axis "dp"}}
  %r = tp.all_reduce_bucket sum %x over @m["dp"] : tensor<4xf32>
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
func.func @empty_start() {
  // expected-error @+1 {{'tp.all_reduce_start' op needs at least one tensor}}
  %p = "tp.all_reduce_start"() <{axis = "tp", kind = 0 : i32, mesh = @m}> : () -> !tp.pending
  "tp.wait"(%p) : (!tp.pending) -> ()
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
func.func @start_without_wait(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tp.all_reduce_start' op needs exactly one tp.wait}}
  %p = tp.all_reduce_start sum %x over @m["tp"] : tensor<4xf32>
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
func.func @start_axis(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tp.all_reduce_start' op mesh @m has no axis "dp"}}
  %p = tp.all_reduce_start sum %x over @m["dp"] : tensor<4xf32>
  %r = tp.wait %p : tensor<4xf32>
  return
}

// -----

func.func @wait_for_argument(%p: !tp.pending) {
  // expected-error @+1 {{'tp.wait' op waits for a value no started collective defined}}
  %r = tp.wait %p : tensor<4xf32>
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
func.func @wait_in_region(%x: tensor<4xf32>, %c: i1) {
  %p = tp.all_reduce_start sum %x over @m["tp"] : tensor<4xf32>
  scf.if %c {
    // expected-error @+1 {{'tp.wait' op must follow its start in the same block}}
    %r = tp.wait %p : tensor<4xf32>
  }
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
func.func @wait_types(%x: tensor<4xf32>) {
  %p = tp.all_reduce_start sum %x over @m["tp"] : tensor<4xf32>
  // expected-error @+1 {{'tp.wait' op results must have the types of the start's inputs}}
  %r = tp.wait %p : tensor<8xf32>
  return
}

// -----

tp.mesh @m axes = ["dp" = 2]
func.func @empty_scatter_bucket() {
  // expected-error @+1 {{'tp.reduce_scatter_bucket' op needs at least one tensor}}
  "tp.reduce_scatter_bucket"() <{axis = "dp", mesh = @m}> : () -> ()
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
func.func @scatter_bucket_axis(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tp.reduce_scatter_bucket' op mesh @m has no axis "dp"}}
  %r = tp.reduce_scatter_bucket sum %x over @m["dp"] : tensor<4xf32> -> tensor<2xf32>
  return
}

// -----

tp.mesh @m axes = ["dp" = 2]
func.func @scatter_bucket_results(%x: tensor<4xf32>, %y: tensor<4xf32>) {
  // expected-error @+1 {{'tp.reduce_scatter_bucket' op has 1 results for 2 inputs}}
  %r = tp.reduce_scatter_bucket sum %x, %y over @m["dp"] : tensor<4xf32>, tensor<4xf32> -> tensor<2xf32>
  return
}

// -----

tp.mesh @m axes = ["dp" = 2]
func.func @scatter_bucket_rows(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{'tp.reduce_scatter_bucket' op cannot split the rows of input 0, of type 'tensor<3x4xf32>', over the 2 ranks of its axis}}
  %r = tp.reduce_scatter_bucket sum %x over @m["dp"] : tensor<3x4xf32> -> tensor<1x4xf32>
  return
}

// -----

tp.mesh @m axes = ["dp" = 2]
func.func @scatter_bucket_result_type(%x: tensor<4x3xf32>) {
  // expected-error @+1 {{'tp.reduce_scatter_bucket' op result 0 must be 'tensor<2x3xf32>', this rank's rows of input 0}}
  %r = tp.reduce_scatter_bucket sum %x over @m["dp"] : tensor<4x3xf32> -> tensor<4x3xf32>
  return
}

// -----

tp.mesh @m axes = ["dp" = 2]
func.func @scatter_start_without_wait(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tp.reduce_scatter_start' op needs exactly one tp.wait}}
  %p = tp.reduce_scatter_start sum %x over @m["dp"] : tensor<4xf32>
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
func.func @scatter_start_axis(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tp.reduce_scatter_start' op mesh @m has no axis "dp"}}
  %p = tp.reduce_scatter_start sum %x over @m["dp"] : tensor<4xf32>
  %r = tp.wait %p : tensor<2xf32>
  return
}

// -----

tp.mesh @m axes = ["dp" = 2]
func.func @scatter_wait_types(%x: tensor<4xf32>) {
  %p = tp.reduce_scatter_start sum %x over @m["dp"] : tensor<4xf32>
  // expected-error @+1 {{'tp.wait' op result 0 must be 'tensor<2xf32>', this rank's rows of input 0}}
  %r = tp.wait %p : tensor<4xf32>
  return
}

// -----

func.func @positions_not_i32(%qkv: tensor<2x1x192xf32>, %k: tensor<2x2x4x64x16xf32>, %pos: tensor<2xi64>) {
  // expected-error @+1 {{'tp.kv_cache_store' op positions must hold i32, not 'i64'}}
  %0 = tp.kv_cache_store %qkv, %k, %pos layer = 0 section = key heads = 4 : tensor<2x1x192xf32>, tensor<2x2x4x64x16xf32>, tensor<2xi64>
  return
}

// -----

func.func @cache_rank(%qkv: tensor<2x1x192xf32>, %k: tensor<2x4x64x16xf32>, %pos: tensor<2xi32>) {
  // expected-error @+1 {{'tp.kv_cache_store' op the caches must be [layers, batch, heads, context, head width], got rank 4}}
  %0 = tp.kv_cache_store %qkv, %k, %pos layer = 0 section = value heads = 4 : tensor<2x1x192xf32>, tensor<2x4x64x16xf32>, tensor<2xi32>
  return
}

// -----

func.func @layer_beyond_cache(%qkv: tensor<2x1x192xf32>, %k: tensor<2x2x4x64x16xf32>, %pos: tensor<2xi32>) {
  // expected-error @+1 {{'tp.kv_cache_store' op layer 2 is beyond the caches' 2 layers}}
  %0 = tp.kv_cache_store %qkv, %k, %pos layer = 2 section = key heads = 4 : tensor<2x1x192xf32>, tensor<2x2x4x64x16xf32>, tensor<2xi32>
  return
}

// -----

func.func @chunk_beyond_context(%qkv: tensor<2x8x192xf32>, %k: tensor<2x2x4x4x16xf32>, %v: tensor<2x2x4x4x16xf32>, %pos: tensor<2xi32>) {
  // expected-error @+1 {{'tp.cached_attention' op the chunk of 8 tokens does not fit the caches' context of 4}}
  %0 = tp.cached_attention %qkv, %k, %v, %pos layer = 0 heads = 4 : tensor<2x8x192xf32>, tensor<2x2x4x4x16xf32>, tensor<2xi32> -> tensor<2x8x64xf32>
  return
}

// -----

func.func @position_table_rank(%wpe: tensor<64xf32>, %pos: tensor<2xi32>) {
  // expected-error @+1 {{'tp.position_embedding_at' op table must be [positions, width] and the result [batch, chunk, width]}}
  %0 = tp.position_embedding_at %wpe, %pos : tensor<64xf32>, tensor<2xi32> -> tensor<2x1x64xf32>
  return
}

// -----

func.func @chunk_beyond_table(%wpe: tensor<4x64xf32>, %pos: tensor<2xi32>) {
  // expected-error @+1 {{'tp.position_embedding_at' op a chunk of 8 positions does not fit the table's 4}}
  %0 = tp.position_embedding_at %wpe, %pos : tensor<4x64xf32>, tensor<2xi32> -> tensor<2x8x64xf32>
  return
}

// -----

func.func @take_position_rank(%x: tensor<2x64xf32>, %last: tensor<2xi32>) {
  // expected-error @+1 {{'tp.take_position' op input must be [batch, chunk, width], got rank 2}}
  %0 = tp.take_position %x, %last : tensor<2x64xf32>, tensor<2xi32> -> tensor<2x64xf32>
  return
}

// -----

func.func @residual_layer_norm_bias(%x: tensor<2x8x16xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{bias has shape [8] but [16] is expected}}
  %sum, %h = tp.residual_layer_norm %x, %x, %b, %b, %b : tensor<2x8x16xf32>, tensor<8xf32>
  return
}

// -----

func.func @residual_layer_norm_element_type(%x: tensor<2x16xf32>, %b: tensor<16xbf16>) {
  // expected-error @+1 {{'tp.residual_layer_norm' op bias has element type 'bf16' but 'f32' is expected}}
  %sum, %h = tp.residual_layer_norm %x, %x, %b, %b, %b : tensor<2x16xf32>, tensor<16xbf16>
  return
}

// -----

func.func @residual_layer_norm_scalar(%x: tensor<f32>, %b: tensor<f32>) {
  // expected-error @+1 {{'tp.residual_layer_norm' op residual must have at least one dimension}}
  %sum, %h = tp.residual_layer_norm %x, %x, %b, %b, %b : tensor<f32>, tensor<f32>
  return
}

// -----

tp.mesh @m axes = ["dp" = 2]
func.func @gather_start_without_wait(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tp.all_gather_start' op needs exactly one tp.wait}}
  %p = tp.all_gather_start %x over @m["dp"] : tensor<4xf32>
  return
}

// -----

tp.mesh @m axes = ["tp" = 2]
func.func @gather_start_axis(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tp.all_gather_start' op mesh @m has no axis "dp"}}
  %p = tp.all_gather_start %x over @m["dp"] : tensor<4xf32>
  %r = tp.wait %p : tensor<8xf32>
  return
}

// -----

tp.mesh @m axes = ["dp" = 2]
func.func @gather_start_scalar(%x: tensor<f32>) {
  // expected-error @+1 {{'tp.all_gather_start' op input 0 is 0-d: it has no rows}}
  %p = tp.all_gather_start %x over @m["dp"] : tensor<f32>
  %r = tp.wait %p : tensor<f32>
  return
}

// -----

tp.mesh @m axes = ["dp" = 2]
func.func @gather_wait_types(%x: tensor<4x3xf32>) {
  %p = tp.all_gather_start %x over @m["dp"] : tensor<4x3xf32>
  // expected-error @+1 {{'tp.wait' op result 0 must be 'tensor<8x3xf32>', the 2 ranks' rows of input 0}}
  %r = tp.wait %p : tensor<4x3xf32>
  return
}

// -----

tp.mesh @m axes = ["dp" = 2]
func.func @gather_wait_count(%x: tensor<4xf32>, %y: tensor<4xf32>) {
  %p = tp.all_gather_start %x, %y over @m["dp"] : tensor<4xf32>, tensor<4xf32>
  // expected-error @+1 {{'tp.wait' op has 1 results for 2 inputs}}
  %r = tp.wait %p : tensor<8xf32>
  return
}

// -----

func.func @rms_norm_weight(%x: tensor<2x8x16xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'tp.rms_norm' op weight has shape [8] but [16] is expected}}
  %0 = tp.rms_norm %x, %w : tensor<2x8x16xf32>, tensor<8xf32>
  return
}

// -----

func.func @rms_norm_scalar(%x: tensor<f32>, %w: tensor<f32>) {
  // expected-error @+1 {{'tp.rms_norm' op input must have at least one dimension}}
  %0 = tp.rms_norm %x, %w : tensor<f32>, tensor<f32>
  return
}

// -----

func.func @residual_rms_norm_weight(%x: tensor<2x16xf32>, %w: tensor<16xbf16>) {
  // expected-error @+1 {{'tp.residual_rms_norm' op weight has element type 'bf16' but 'f32' is expected}}
  %sum, %h = tp.residual_rms_norm %x, %x, %w : tensor<2x16xf32>, tensor<16xbf16>
  return
}

// -----

func.func @residual_rms_norm_scalar(%x: tensor<f32>, %w: tensor<f32>) {
  // expected-error @+1 {{'tp.residual_rms_norm' op residual must have at least one dimension}}
  %sum, %h = tp.residual_rms_norm %x, %x, %w : tensor<f32>, tensor<f32>
  return
}

// -----

func.func @narrow_rms_norm_grad(%x: tensor<2x8xf32>, %w: tensor<8xf32>) -> tensor<8xbf16> {
  // expected-error @+1 {{'tp.rms_norm_grad' op weight_grad has element type 'bf16', narrower than 'f32'}}
  %dx, %dw = tp.rms_norm_grad %x, %w, %x {epsilon = 1.0e-5 : f32} : tensor<2x8xf32>, tensor<8xf32> -> tensor<8xbf16>
  return %dw : tensor<8xbf16>
}

// -----

func.func @rope_heads(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'tp.rope' op 3 heads do not divide the width 16}}
  %0 = tp.rope %x heads = 3 theta = 1.0e4 : tensor<2x8x16xf32>
  return
}

// -----

func.func @rope_odd_head(%x: tensor<2x8x18xf32>) {
  // expected-error @+1 {{'tp.rope' op rotary embeddings pair the halves of each head: the head width 9 is odd}}
  %0 = tp.rope %x heads = 2 theta = 1.0e4 : tensor<2x8x18xf32>
  return
}

// -----

func.func @rope_rank(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'tp.rope' op input must be [batch, seq, heads * head width], got [8, 16]}}
  %0 = tp.rope %x heads = 2 theta = 1.0e4 : tensor<8x16xf32>
  return
}

// -----

func.func @rope_theta(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'tp.rope' op theta must be positive, got 0}}
  %0 = tp.rope %x heads = 2 theta = 0.0 : tensor<2x8x16xf32>
  return
}

// -----

func.func @rope_positions(%x: tensor<2x8x16xf32>, %p: tensor<3xi32>) {
  // expected-error @+1 {{'tp.rope' op positions has shape [3] but [2] is expected}}
  %0 = tp.rope %x, %p heads = 2 theta = 1.0e4 : tensor<2x8x16xf32>, tensor<3xi32>
  return
}

// -----

func.func @attention_q_rank(%q: tensor<8x16xf32>, %k: tensor<2x8x8xf32>) {
  // expected-error @+1 {{'tp.attention' op q must be [batch, seq, heads * head width], got [8, 16]}}
  %0 = tp.attention %q, %k, %k heads = 2 : tensor<8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32> -> tensor<8x16xf32>
  return
}

// -----

func.func @attention_kv_heads(%q: tensor<2x8x16xf32>, %k: tensor<2x8x12xf32>) {
  // expected-error @+1 {{'tp.attention' op kv_heads 3 does not divide num_heads 4}}
  %0 = tp.attention %q, %k, %k heads = 4 kv_heads = 3 : tensor<2x8x16xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_query_width(%q: tensor<2x8x18xf32>, %k: tensor<2x8x8xf32>) {
  // expected-error @+1 {{'tp.attention' op num_heads 4 does not divide the query width 18}}
  %0 = tp.attention %q, %k, %k heads = 4 kv_heads = 2 : tensor<2x8x18xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32> -> tensor<2x8x18xf32>
  return
}

// -----

func.func @attention_kv_width(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'tp.attention' op k has shape [2, 8, 16] but [2, 8, 8] is expected}}
  %0 = tp.attention %q, %k, %k heads = 4 kv_heads = 2 : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_fused_kv_heads(%qkv: tensor<2x8x48xf32>) {
  // expected-error @+1 {{'tp.attention' op kv_heads belongs to separate q, k and v; a fused qkv has num_heads heads of each}}
  %0 = tp.attention %qkv heads = 4 kv_heads = 2 : tensor<2x8x48xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_two_inputs(%q: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'tp.attention' op takes a fused qkv or q, k and v, got 2 inputs}}
  %0 = tp.attention %q, %q heads = 4 : tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_grad_types(%q: tensor<2x8x16xf32>, %k: tensor<2x8x8xf32>) {
  // expected-error @+1 {{'tp.attention_grad' op input_grads must have the inputs' types}}
  %0:3 = tp.attention_grad %q, %q, %k, %k heads = 4 kv_heads = 2 : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32> -> tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xf32>
  return
}

// -----

func.func @kv_cache_store_width(%k: tensor<2x1x12xf32>, %c: tensor<1x2x2x16x4xf32>, %p: tensor<2xi32>) {
  // expected-error @+1 {{'tp.kv_cache_store' op without a section the input must be [batch, seq, 8 heads * head width], got [2, 1, 12]}}
  %0 = tp.kv_cache_store %k, %c, %p layer = 0 heads = 8 : tensor<2x1x12xf32>, tensor<1x2x2x16x4xf32>, tensor<2xi32>
  return
}

// -----

func.func @dropout_rank(%x: tensor<2x2x2x2xf32>, %s: index) {
  // expected-error @+1 {{'tp.dropout' op drops elements of tensors of rank 1 to 3, got rank 4}}
  %0 = tp.dropout %x dropout = 0.1 stream = %s : tensor<2x2x2x2xf32>
  return
}

// -----

func.func @dropout_rate(%x: tensor<4xf32>, %s: index) {
  // expected-error @+1 {{'tp.dropout' op attribute 'dropout' failed to satisfy constraint: 64-bit float attribute whose value is in [0, 1)}}
  %0 = tp.dropout %x dropout = 1.0 stream = %s : tensor<4xf32>
  return
}

// -----

func.func @dropout_offsets_without_shape(%x: tensor<4xf32>, %s: index, %i: index) {
  // expected-error @+1 {{'tp.dropout' op takes offsets and a global shape together}}
  %0 = "tp.dropout"(%x, %s, %i) {dropout = 0.1 : f64, operandSegmentSizes = array<i32: 1, 1, 0, 1>} : (tensor<4xf32>, index, index) -> tensor<4xf32>
  return
}

// -----

func.func @dropout_offsets_count(%x: tensor<2x4xf32>, %s: index, %i: index) {
  // expected-error @+1 {{'tp.dropout' op places its 2 dimensions with 1 offsets in a global shape of 2}}
  %0 = tp.dropout %x dropout = 0.1 stream = %s at [%i] of [4, 4] : tensor<2x4xf32>
  return
}

// -----

func.func @dropout_beyond_global(%x: tensor<2x4xf32>, %s: index, %i: index) {
  // expected-error @+1 {{'tp.dropout' op holds 4 elements of dimension 1, more than the global shape's 2}}
  %0 = tp.dropout %x dropout = 0.1 stream = %s at [%i, %i] of [4, 2] : tensor<2x4xf32>
  return
}

// -----

func.func @attention_rate_without_stream(%qkv: tensor<2x8x48xf32>) {
  // expected-error @+1 {{'tp.attention' op takes a dropout rate and its stream together}}
  %0 = "tp.attention"(%qkv) {num_heads = 4 : i64, dropout = 0.1 : f64, operandSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_key_without_rate(%qkv: tensor<2x8x48xf32>, %hp: tensor<8xf32>) {
  // expected-error @+1 {{'tp.attention' op has dropout arguments but no dropout rate}}
  %0 = "tp.attention"(%qkv, %hp) {num_heads = 4 : i64, operandSegmentSizes = array<i32: 1, 0, 1, 0>} : (tensor<2x8x48xf32>, tensor<8xf32>) -> tensor<2x8x16xf32>
  return
}
