// RUN: xfuse-opt %s -p ew-expand-math | filecheck %s
// RUN: xfuse-opt %s -p 'ew-expand-math{math=approx}' | filecheck %s
// RUN: xfuse-opt %s -p 'ew-expand-math{math=libm}' | filecheck %s --check-prefix=LIBM

// approx: f32 transcendentals become plain arithmetic (no math op, no call is left); rsqrt is
// an `arcp` division by sqrt (what LLVM turns into the host's estimate) refined with FMAs, and
// 1 / sqrt with libm.
// CHECK-LABEL: func.func @f32_ops
// CHECK-NOT:     math.tanh
// CHECK-NOT:     func.call
// CHECK:         arith.divf
// CHECK-NOT:     math.exp
// CHECK-NOT:     math.log
// CHECK-NOT:     math.erf
// CHECK-NOT:     math.powf
// CHECK:         %[[ROOT:.*]] = math.sqrt %{{.*}} : f32
// CHECK-NEXT:    %[[ESTIMATE:.*]] = arith.divf %{{.*}}, %[[ROOT]] fastmath<arcp> : f32
// CHECK:         math.fma %{{.*}}, %[[ESTIMATE]], %{{.*}} : f32
// CHECK:         func.return
// LIBM-LABEL: func.func @f32_ops
// LIBM-SAME:     (%[[X:.*]]: f32, %[[Y:.*]]: f32)
// LIBM-NEXT:     %{{.*}} = func.call @tanhf(%[[X]]) : (f32) -> f32
// LIBM-NEXT:     %{{.*}} = func.call @expf(%[[X]]) : (f32) -> f32
// LIBM-NEXT:     %{{.*}} = func.call @logf(%[[X]]) : (f32) -> f32
// LIBM-NEXT:     %{{.*}} = func.call @erff(%[[X]]) : (f32) -> f32
// LIBM-NEXT:     %{{.*}} = func.call @powf(%[[X]], %[[Y]]) : (f32, f32) -> f32
// LIBM:          %[[LIBM_ROOT:.*]] = math.sqrt %[[X]] : f32
// LIBM-NEXT:     arith.divf %{{.*}}, %[[LIBM_ROOT]] : f32
// LIBM-NOT:      math.fma
func.func @f32_ops(%x: f32, %y: f32) -> (f32, f32, f32, f32, f32, f32) {
  %t = math.tanh %x : f32
  %e = math.exp %x : f32
  %l = math.log %x : f32
  %r = math.erf %x : f32
  %p = math.powf %x, %y : f32
  %s = math.rsqrt %x : f32
  func.return %t, %e, %l, %r, %p, %s : f32, f32, f32, f32, f32, f32
}

// exp(-|x|) cannot overflow: no +inf select. log1p of it has its argument in [0, 1]: no
// special-case select, no division. A log1p of anything else corrects 1 + x with a division.
// CHECK-LABEL: func.func @softplus_parts
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK:         %[[ABS:.*]] = math.absf %[[X]]
// CHECK-NEXT:    %[[MINUS_ABS:.*]] = arith.negf %[[ABS]]
// CHECK:         arith.cmpf olt, %[[MINUS_ABS]]
// CHECK-NOT:     0x7f800000
// CHECK-NOT:     arith.divf
// CHECK:         arith.addf %{{.*}}, %[[X]] : f32
// CHECK:         arith.divf
// CHECK:         arith.cmpf oeq, %[[X]], %{{.*}} : f32
// CHECK-NEXT:    %[[GENERAL:.*]] = arith.select
// CHECK-NEXT:    func.return %{{.*}}, %[[GENERAL]]
func.func @softplus_parts(%x: f32) -> (f32, f32) {
  %a = math.absf %x : f32
  %m = arith.negf %a : f32
  %e = math.exp %m : f32
  %l = math.log1p %e : f32
  %g = math.log1p %x : f32
  func.return %l, %g : f32, f32
}

// f64 has no approximation: it calls the double libm functions in both modes, declared once;
// its rsqrt is 1 / sqrt.
// CHECK-LABEL: func.func @f64_ops
// CHECK:         func.call @tanh(%{{.*}}) : (f64) -> f64
// CHECK:         func.call @tanh(%{{.*}}) : (f64) -> f64
// CHECK:         %[[ROOT64:.*]] = math.sqrt %{{.*}} : f64
// CHECK-NEXT:    arith.divf %{{.*}}, %[[ROOT64]] : f64
// CHECK-NOT:     math.fma
// LIBM-LABEL: func.func @f64_ops
// LIBM:          func.call @tanh(%{{.*}}) : (f64) -> f64
func.func @f64_ops(%x: f64) -> (f64, f64, f64) {
  %a = math.tanh %x : f64
  %b = math.tanh %a : f64
  %s = math.rsqrt %x : f64
  func.return %a, %b, %s : f64, f64, f64
}
// CHECK:       func.func private @tanh(f64) -> f64
// CHECK-NOT:   func.func private @tanh(
// LIBM-DAG:    func.func private @tanhf(f32) -> f32
// LIBM-DAG:    func.func private @powf(f32, f32) -> f32
// LIBM-DAG:    func.func private @tanh(f64) -> f64

