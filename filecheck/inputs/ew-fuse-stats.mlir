// Input of filecheck/passes/ew-fuse.mlir's `stats=true` runs: @chain fuses 3 ops into one
// kernel with its constant inlined; @results returns an argument and a constant (copy kernels).
func.func @chain(%x: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {
  %half = ew.constant 0.5 : tensor<f32>
  %h = ew.add %x, %b : tensor<?xf32>
  %m = ew.mul %half, %h : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  %t = ew.tanh %m : tensor<?xf32>
  func.return %t : tensor<?xf32>
}

func.func @results(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>) {
  %c = ew.constant 2.0 : tensor<f32>
  func.return %x, %c : tensor<4xf32>, tensor<f32>
}
