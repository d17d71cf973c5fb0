// RUN: xfuse-opt %s -p ew-strength-reduce | filecheck %s
// RUN: xfuse-opt %s -p 'ew-strength-reduce{max-exponent=3}' | filecheck %s --check-prefix=CUBE

// CHECK-LABEL: func.func @square
// CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>)
// CHECK-NOT:     ew.pow
// CHECK:         %[[SQ:.*]] = ew.mul %[[X]], %[[X]] : tensor<?xf32>
// CHECK-NEXT:    func.return %[[SQ]]
func.func @square(%x: tensor<?xf32>) -> tensor<?xf32> {
  %two = ew.constant 2.0 : tensor<f32>
  %p = ew.pow %x, %two : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  func.return %p : tensor<?xf32>
}

// Cubes expand only when asked; other exponents never.
// CHECK-LABEL: func.func @others
// CHECK:         ew.pow %{{.*}}, %{{.*}} : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
// CHECK:         ew.pow %{{.*}}, %{{.*}} : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
// CUBE-LABEL:  func.func @others
// CUBE-SAME:     (%[[X:.*]]: tensor<?xf32>)
// CUBE:          %[[SQ:.*]] = ew.mul %[[X]], %[[X]] : tensor<?xf32>
// CUBE-NEXT:     %[[CB:.*]] = ew.mul %[[SQ]], %[[X]] : tensor<?xf32>
// CUBE-NEXT:     %[[HALF:.*]] = ew.pow %[[X]], %{{.*}}
// CUBE-NEXT:     func.return %[[CB]], %[[HALF]]
func.func @others(%x: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %three = ew.constant 3.0 : tensor<f32>
  %half = ew.constant 0.5 : tensor<f32>
  %c = ew.pow %x, %three : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %h = ew.pow %x, %half : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  func.return %c, %h : tensor<?xf32>, tensor<?xf32>
}

// Never: a broadcast base (x * x would have the base's type, not the result's), pow(x, 1), a
// fractional exponent (`max-exponent=3` lets 2.5 into the range: not an integer).
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: ew.pow
// CHECK-NOT:     ew.mul
// CUBE-LABEL:  func.func @kept
// CUBE-COUNT-3:  ew.pow
// CUBE-NOT:      ew.mul
func.func @kept(%s: tensor<4xf32>, %x: tensor<?xf32>) -> (tensor<2x4xf32>, tensor<?xf32>, tensor<?xf32>) {
  %one = ew.constant 1.0 : tensor<f32>
  %two = ew.constant 2.0 : tensor<2x4xf32>
  %frac = ew.constant 2.5 : tensor<f32>
  %b = ew.pow %s, %two : tensor<4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %o = ew.pow %x, %one : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %f = ew.pow %x, %frac : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  func.return %b, %o, %f : tensor<2x4xf32>, tensor<?xf32>, tensor<?xf32>
}
