

tp.mesh @m axes = ["tp" = 4]
func.func @mlp(%x: tensor<8x16xf32>,
               %a: tensor<16x64xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>},
               %b: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %h = tp.matmul %x, %a : tensor<8x16xf32>, tensor<16x64xf32> -> tensor<8x64xf32>
  %g = tp.gelu %h : tensor<8x64xf32>
  %y = tp.matmul %g, %b : tensor<8x64xf32>, tensor<64x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

