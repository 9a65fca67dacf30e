

tp.mesh @m axes = ["tp" = 4]
func.func @mlp(%x: tensor<8x16xf32>,
               %a: tensor<16x64xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>},
               %b: tensor<64x16xf32>, %bias: tensor<16xf32>) -> tensor<8x16xf32> {
  %h = tp.matmul %x, %a : tensor<8x16xf32>, tensor<16x64xf32> -> tensor<8x64xf32>
  %g = tp.gelu %h : tensor<8x64xf32>
  %y = tp.matmul %g, %b : tensor<8x64xf32>, tensor<64x16xf32> -> tensor<8x16xf32>
  %z = tp.bias_add %y, %bias : tensor<8x16xf32>, tensor<16xf32>
  return %z : tensor<8x16xf32>
}

