


func.func @lm(%wte: tensor<16x8xf32> {tp.name = "wte.weight"}, %ids: tensor<4x4xi32> {tp.role = "tokens"},
              %targets: tensor<4x4xi32> {tp.role = "targets"}) -> tensor<f32> {
  %x = tp.embedding %wte[%ids] : tensor<16x8xf32>, tensor<4x4xi32> -> tensor<4x4x8xf32>
  %l = tp.matmul %x, %wte {transpose_rhs} : tensor<4x4x8xf32>, tensor<16x8xf32> -> tensor<4x4x16xf32>
  %loss = tp.cross_entropy %l, %targets valid_vocab = 16 : tensor<4x4x16xf32>, tensor<4x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

