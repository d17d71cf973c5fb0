// RUN: xfuse-opt %s -p ew-expand-math | filecheck %s
// RUN: xfuse-opt %s -p 'ew-expand-math{math=approx}' | filecheck %s
// RUN: xfuse-opt %s -p 'ew-expand-math{math=libm}' | filecheck %s --check-prefix=LIBM

// approx: f32 transcendentals become plain arithmetic (no math op, no call is left);
// rsqrt is 1 / sqrt in both modes.
// CHECK-LABEL: func.func @f32_ops
// CHECK-NOT:     math.tanh
// CHECK-NOT:     func.call
// CHECK:         arith.divf
// CHECK-NOT:     math.exp
// CHECK-NOT:     math.log
// CHECK-NOT:     math.erf
// CHECK-NOT:     math.powf
// CHECK:         %[[ROOT:.*]] = math.sqrt %{{.*}} : f32
// CHECK-NEXT:    %{{.*}} = arith.divf %{{.*}}, %[[ROOT]] : f32
// CHECK:         func.return
// LIBM-LABEL: func.func @f32_ops
// LIBM-SAME:     (%[[X:.*]]: f32, %[[Y:.*]]: f32)
// LIBM-NEXT:     %{{.*}} = func.call @tanhf(%[[X]]) : (f32) -> f32
// LIBM-NEXT:     %{{.*}} = func.call @expf(%[[X]]) : (f32) -> f32
// LIBM-NEXT:     %{{.*}} = func.call @logf(%[[X]]) : (f32) -> f32
// LIBM-NEXT:     %{{.*}} = func.call @erff(%[[X]]) : (f32) -> f32
// LIBM-NEXT:     %{{.*}} = func.call @powf(%[[X]], %[[Y]]) : (f32, f32) -> f32
// LIBM:          math.sqrt %[[X]] : f32
func.func @f32_ops(%x: f32, %y: f32) -> (f32, f32, f32, f32, f32, f32) {
  %t = math.tanh %x : f32
  %e = math.exp %x : f32
  %l = math.log %x : f32
  %r = math.erf %x : f32
  %p = math.powf %x, %y : f32
  %s = math.rsqrt %x : f32
  func.return %t, %e, %l, %r, %p, %s : f32, f32, f32, f32, f32, f32
}

// f64 has no approximation: it calls the double libm functions in both modes, declared once.
// CHECK-LABEL: func.func @f64_ops
// CHECK:         func.call @tanh(%{{.*}}) : (f64) -> f64
// CHECK:         func.call @tanh(%{{.*}}) : (f64) -> f64
// LIBM-LABEL: func.func @f64_ops
// LIBM:          func.call @tanh(%{{.*}}) : (f64) -> f64
func.func @f64_ops(%x: f64) -> (f64, f64) {
  %a = math.tanh %x : f64
  %b = math.tanh %a : f64
  func.return %a, %b : f64, f64
}
// CHECK:       func.func private @tanh(f64) -> f64
// CHECK-NOT:   func.func private @tanh(
// LIBM-DAG:    func.func private @tanhf(f32) -> f32
// LIBM-DAG:    func.func private @powf(f32, f32) -> f32
// LIBM-DAG:    func.func private @tanh(f64) -> f64
