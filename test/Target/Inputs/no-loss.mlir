// A step whose arguments are all named but which computes no loss.
func.func @step(%x: tensor<2x8xf32> {tp.name = "x"}, %w: tensor<8x8xf32> {tp.name = "w"}) -> tensor<2x8xf32> {
  %y = tp.matmul %x, %w : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
