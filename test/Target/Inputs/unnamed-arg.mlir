func.func @step(%wte: tensor<8x4xf32> {tp.name = "wte.weight"}, %extra: tensor<4xf32>,
                %ids: tensor<2x3xi32> {tp.name = "input_ids", tp.role = "tokens"}, %t: tensor<2x3xi32> {tp.name = "targets", tp.role = "targets"}) -> tensor<f32> {
  %x = tp.embedding %wte[%ids] : tensor<8x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
  %l = tp.matmul %x, %wte {transpose_rhs} : tensor<2x3x4xf32>, tensor<8x4xf32> -> tensor<2x3x8xf32>
  %loss = tp.cross_entropy %l, %t valid_vocab = 8 : tensor<2x3x8xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
