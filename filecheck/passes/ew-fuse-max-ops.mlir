// RUN: xfuse-opt %s -p 'ew-fuse{max-ops=36}' | filecheck %s
// RUN: xfuse-opt %s -p ew-fuse | filecheck %s --check-prefix=DEFAULT
// RUN: not xfuse-opt %s -p 'ew-fuse{max-ops=0}' 2>&1 | filecheck %s --check-prefix=BAD

// max-ops caps the scalar ops of one kernel, each op counted as what ew-expand-math makes of
// it (exp 35, tanh 25, neg and abs 1): with 36, a chain of five becomes kernels of exp and neg
// (36), tanh and abs (26), and exp (35), each passing its last value to the next (the default,
// 128, fuses the five, 97, into one).
// CHECK-LABEL: func.func @chain
// CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>)
// CHECK-NEXT:    %[[A:.*]] = ew.kernel ins(%[[X]] : tensor<?xf32>) -> tensor<?xf32> {
// CHECK:           math.exp
// CHECK-NEXT:      arith.negf
// CHECK:         %[[B:.*]] = ew.kernel ins(%[[A]] : tensor<?xf32>) -> tensor<?xf32> {
// CHECK:           math.tanh
// CHECK-NEXT:      math.absf
// CHECK:         %[[C:.*]] = ew.kernel ins(%[[B]] : tensor<?xf32>) -> tensor<?xf32> {
// CHECK:           math.exp
// CHECK:         func.return %[[C]]
// DEFAULT-LABEL: func.func @chain
// DEFAULT-COUNT-1: ew.kernel
// DEFAULT-NOT:   ew.kernel
// BAD: ew-fuse: max-ops must be at least 1, got 0
func.func @chain(%x: tensor<?xf32>) -> tensor<?xf32> {
  %a = ew.exp %x : tensor<?xf32>
  %b = ew.neg %a : tensor<?xf32>
  %c = ew.tanh %b : tensor<?xf32>
  %d = ew.abs %c : tensor<?xf32>
  %e = ew.exp %d : tensor<?xf32>
  func.return %e : tensor<?xf32>
}
