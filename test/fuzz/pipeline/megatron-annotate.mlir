

func.func @block(%wte: tensor<16x8xf32>, %lnw: tensor<8xf32>,
                 %c_attn: tensor<8x24xf32>, %c_attn_b: tensor<24xf32>,
                 %c_proj: tensor<8x8xf32>, %c_proj_b: tensor<8xf32>,
                 %c_fc: tensor<8x32xf32>, %c_fc_b: tensor<32xf32>,
                 %mlp_proj: tensor<32x8xf32>, %ids: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  %x = tp.embedding %wte[%ids] : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %h = tp.layer_norm %x, %lnw, %lnw : tensor<2x4x8xf32>, tensor<8xf32>
  %qkv = tp.matmul %h, %c_attn : tensor<2x4x8xf32>, tensor<8x24xf32> -> tensor<2x4x24xf32>
  %qkvb = tp.bias_add %qkv, %c_attn_b : tensor<2x4x24xf32>, tensor<24xf32>
  %a = tp.attention %qkvb heads = 2 : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %p = tp.matmul %a, %c_proj : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %pb = tp.bias_add %p, %c_proj_b : tensor<2x4x8xf32>, tensor<8xf32>
  %fc = tp.matmul %pb, %c_fc : tensor<2x4x8xf32>, tensor<8x32xf32> -> tensor<2x4x32xf32>
  %fcb = tp.bias_add %fc, %c_fc_b : tensor<2x4x32xf32>, tensor<32xf32>
  %g = tp.gelu %fcb : tensor<2x4x32xf32>
  %y = tp.matmul %g, %mlp_proj : tensor<2x4x32xf32>, tensor<32x8xf32> -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

