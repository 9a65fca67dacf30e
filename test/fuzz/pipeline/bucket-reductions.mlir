
tp.mesh @mesh axes = ["dp" = 2, "tp" = 2]
func.func @grads(%t: tensor<16x8xf32>, %a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<8xf32>,
                 %d: tensor<8xf32>, %l: tensor<f32>)
    -> (tensor<f32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %loss = tp.g %l over @mesh["dp"] : tensor<f32>
  %over_tp = tp.all_reduce sum %a over @mesh["tp"] {tp.phase = "backward"} : tensor<8xf32>
  %dt = tp.all_reduce sum %t over @mesh["dp"] {tp.phase = "backward"} : tensor<16x8xf32>
  %da = tp.all_reduce sum %a over @mesh["dp"] {tp.phase = "backward"} : tensor<8xf32>
  %db = tp.all_reduce sum %b over @mesh["dp"] {tp.phase = "backward"} : tensor<8xf32>
  %dc = tp.all_reduce sum %c over @mesh["dp"] {tp.phase = "backward"} : tensor<8xf32>
  %use = tp.add %dc, %over_tp : tensor<8xf32>
  %dd = tp.all_reduce sum %d over @mesh["dp"] {tp.phase = "backward"} : tensor<8xf32>
  return %loss, %dt, %da, %db, %use, %dd : tensor<f32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}
