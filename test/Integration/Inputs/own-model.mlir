// A model of our own, not GPT-2: its parameters are named as it likes and
// state their roles and init rules in the IR.
func.func @tiny_lm(%table: tensor<64x16xf32> {tp.name = "tokens.table", tp.role = "param", tp.init = #tp.init<normal, 2.000000e-02>},
                   %w: tensor<16x32xf32> {tp.name = "mixer.in", tp.role = "param", tp.init = #tp.init<normal, 1.000000e-01>, tp.layer = #tp.layer<0>},
                   %b: tensor<32xf32> {tp.name = "mixer.in_bias", tp.role = "param", tp.init = #tp.init<constant, 0.000000e+00>, tp.layer = #tp.layer<0>},
                   %v: tensor<32x16xf32> {tp.name = "mixer.out", tp.role = "param", tp.init = #tp.init<normal, 1.000000e-01>, tp.layer = #tp.layer<0>},
                   %ids: tensor<2x8xi32> {tp.name = "ids", tp.role = "tokens"},
                   %next: tensor<2x8xi32> {tp.name = "next", tp.role = "targets"}) -> tensor<f32> {
  %x = tp.embedding %table[%ids] : tensor<64x16xf32>, tensor<2x8xi32> -> tensor<2x8x16xf32>
  %h = tp.matmul %x, %w : tensor<2x8x16xf32>, tensor<16x32xf32> -> tensor<2x8x32xf32>
  %hb = tp.bias_add %h, %b : tensor<2x8x32xf32>, tensor<32xf32>
  %a = tp.gelu %hb : tensor<2x8x32xf32>
  %y = tp.matmul %a, %v : tensor<2x8x32xf32>, tensor<32x16xf32> -> tensor<2x8x16xf32>
  %r = tp.add %x, %y : tensor<2x8x16xf32>
  %logits = tp.matmul %r, %table {transpose_rhs} : tensor<2x8x16xf32>, tensor<64x16xf32> -> tensor<2x8x64xf32>
  %loss = tp.cross_entropy %logits, %next valid_vocab = 64 : tensor<2x8x64xf32>, tensor<2x8xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
