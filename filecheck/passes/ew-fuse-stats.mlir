// RUN: xfuse-opt %s -p 'ew-fuse{stats=true}' 2>&1 >/dev/null | filecheck %s
// RUN: xfuse-opt %s -p 'ew-fuse{mode=none stats=true}' 2>&1 >/dev/null | filecheck %s --check-prefix=NONE

// ew-fuse's statistics, counted by hand. @chain: 3 elementwise ops (the constant is not one)
// fused into 1 kernel, the 0.5 an immediate inside it. @results: the returned argument gets a
// copy kernel and the returned constant a constant kernel (2 copy kernels, nothing fused).
// Unfused (mode=none): one kernel per op, the 0.5 inlined into the mul's.

// CHECK:      'ew-fuse'
// CHECK-NEXT:   (elementwise-ops) 3 :
// CHECK-NEXT:   (kernels) 3 :
// CHECK-NEXT:   (fused-ops) 3 :
// CHECK-NEXT:   (copy-kernels) 2 :
// CHECK-NEXT:   (constants-inlined) 1 :

// NONE:      'ew-fuse'
// NONE-NEXT:   (elementwise-ops) 3 :
// NONE-NEXT:   (kernels) 5 :
// NONE-NEXT:   (fused-ops) 0 :
// NONE-NEXT:   (copy-kernels) 2 :
// NONE-NEXT:   (constants-inlined) 1 :

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
