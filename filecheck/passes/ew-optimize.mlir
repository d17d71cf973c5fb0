// RUN: xfuse-opt %s -p ew-optimize | filecheck %s
// RUN: xfuse-opt %s -p 'ew-optimize{unsafe-math=true}' | filecheck %s --check-prefix=UNSAFE

// Constants fold, in the element type.
// CHECK-LABEL: func.func @fold
// CHECK-NEXT:    %[[C:.*]] = ew.constant 3.0 : tensor<f32>
// CHECK-NEXT:    %[[S:.*]] = ew.add %{{.*}}, %[[C]] : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
// CHECK-NEXT:    func.return %[[S]]
func.func @fold(%x: tensor<?xf32>) -> tensor<?xf32> {
  %a = ew.constant 1.0 : tensor<f32>
  %b = ew.constant 2.0 : tensor<f32>
  %c = ew.add %a, %b : tensor<f32>
  %s = ew.add %x, %c : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  func.return %s : tensor<?xf32>
}

// x*1, 1*x, x+0, x-0, x/1 and --x disappear.
// CHECK-LABEL: func.func @identities
// CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>)
// CHECK-NEXT:    func.return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
func.func @identities(%x: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %one = ew.constant 1.0 : tensor<f32>
  %zero = ew.constant 0.0 : tensor<f32>
  %a = ew.mul %x, %one : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %b = ew.mul %one, %x : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  %c = ew.add %x, %zero : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %d = ew.sub %x, %zero : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %e = ew.div %x, %one : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %n = ew.neg %x : tensor<?xf32>
  %f = ew.neg %n : tensor<?xf32>
  func.return %a, %b, %c, %d, %e, %f : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>
}

// x*0 is not IEEE-safe (inf*0 is NaN): kept unless unsafe-math; CSE shares the repeated tanh.
// CHECK-LABEL: func.func @unsafe
// CHECK:         ew.mul
// CHECK:         %[[T:.*]] = ew.tanh
// CHECK-NEXT:    %[[S:.*]] = ew.add %[[T]], %[[T]]
// UNSAFE-LABEL: func.func @unsafe
// UNSAFE-NOT:    ew.mul
// UNSAFE:        %[[Z:.*]] = ew.constant 0.0 : tensor<4xf32>
// UNSAFE:        func.return %[[Z]],
func.func @unsafe(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = ew.constant 0.0 : tensor<f32>
  %m = ew.mul %x, %zero : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %t1 = ew.tanh %x : tensor<4xf32>
  %t2 = ew.tanh %x : tensor<4xf32>
  %s = ew.add %t1, %t2 : tensor<4xf32>
  func.return %m, %s : tensor<4xf32>, tensor<4xf32>
}
