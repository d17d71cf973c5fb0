// RUN: xfuse-opt %s -p ew-expand-math | filecheck %s
// RUN: xfuse-opt %s -p 'ew-expand-math{math=approx}' | filecheck %s
// RUN: xfuse-opt %s -p 'ew-expand-math{math=libm}' | filecheck %s --check-prefix=LIBM
// RUN: xfuse-opt %s -p 'ew-expand-math{ldexp=true}' | filecheck %s --check-prefix=LDEXP
// RUN: xfuse-opt %s -p 'ew-expand-math{fastmath="contract,afn"}' | filecheck %s --check-prefix=FASTMATH
// RUN: xfuse-opt %s -p 'ew-expand-math{library=libdevice}' | filecheck %s --check-prefix=LIBDEVICE
// RUN: xfuse-opt %s -p 'ew-expand-math{math=libm library=libdevice}' | filecheck %s --check-prefix=LIBDEVICE-LIBM
// RUN: xfuse-opt %s -p 'ew-expand-math{fastmath=fast}' | filecheck %s --check-prefix=FAST

// approx: f32 transcendentals become plain arithmetic (no math op, no call is left); rsqrt is
// an `arcp` division by sqrt (what LLVM turns into the host's estimate), marked as one the
// step after it refines, then that second-order step: y (1 + e (1/2 + 3/8 e)) with FMAs; and
// 1 / sqrt with libm.
// CHECK-LABEL: func.func @f32_ops
// CHECK-DAG:     %[[THREE_EIGHTHS:.*]] = arith.constant 3.750000e-01 : f32
// CHECK-DAG:     %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NOT:     math.tanh
// CHECK-NOT:     func.call
// CHECK:         arith.divf
// CHECK-NOT:     math.exp
// CHECK-NOT:     math.log
// CHECK-NOT:     math.erf
// CHECK-NOT:     math.powf
// CHECK:         %[[ROOT:.*]] = math.sqrt %{{.*}} : f32
// CHECK-NEXT:    %[[ESTIMATE:.*]] = arith.divf %{{.*}}, %[[ROOT]] fastmath<arcp,contract> {ew.rsqrt_estimate} : f32
// CHECK:         math.fma %{{.*}}, %[[ESTIMATE]], %{{.*}} : f32
// CHECK:         %[[ONE_MINUS_HIGH:.*]] = math.fma %{{.*}}, %[[ESTIMATE]], %{{.*}} : f32
// CHECK-NEXT:    %[[E:.*]] = math.fma %{{.*}}, %[[ESTIMATE]], %[[ONE_MINUS_HIGH]] : f32
// CHECK-NEXT:    %[[SERIES:.*]] = math.fma %[[E]], %[[THREE_EIGHTHS]], %[[HALF]] : f32
// CHECK-NEXT:    %[[SCALED:.*]] = arith.mulf %[[ESTIMATE]], %[[SERIES]] fastmath<contract> : f32
// CHECK-NEXT:    %{{.*}} = math.fma %[[SCALED]], %[[E]], %[[ESTIMATE]] : f32
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

// exp(-|x|) cannot overflow: no +inf select; nor need its 2^n a select for denormal results:
// the scale is always 2^-63 times 2^(n + 63) (bits from n), 2^-63 carried by the coefficients
// of e^r's polynomial, Horner's rule alone (no r^2), its last two steps adding 2^-63 (1 and 1).
// log1p of it has its argument in [0, 1]: e + e (e p(e)), one polynomial without range
// reduction, select or division. A log1p of anything else corrects 1 + x with a division, and
// from 2^24 on and at a NaN x is log(1 + x) (one `uge` compare: log's NaN in every lane). The
// approximations share their constants: one op per value at the block's start.
// CHECK-LABEL: func.func @softplus_parts
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK-DAG:     %[[MINUS_104:.*]] = arith.constant -1.040000e+02 : f32
// CHECK-DAG:     %[[TWO_TO_MINUS_63:.*]] = arith.constant 1.08420217e-19 : f32
// CHECK-DAG:     %[[HIGHEST:.*]] = arith.constant 1.49762289e-22 : f32
// CHECK-DAG:     %[[INF:.*]] = arith.constant 0x7f800000 : f32
// CHECK-DAG:     %[[TWO_TO_24:.*]] = arith.constant 0x4B800000 : f32
// CHECK:         %[[ABS:.*]] = math.absf %[[X]]
// CHECK-NEXT:    %[[MINUS_ABS:.*]] = arith.negf %[[ABS]]
// CHECK-NEXT:    arith.cmpf olt, %[[MINUS_ABS]], %[[MINUS_104]]
// CHECK-NEXT:    arith.select
// CHECK-NOT:     arith.cmpf
// CHECK-NOT:     arith.select
// CHECK:         arith.mulf %[[HIGHEST]], %[[R:.*]] fastmath<contract> : f32
// CHECK-NOT:     arith.mulf %[[R]], %[[R]]
// CHECK:         %[[STEP:.*]] = arith.addf %{{.*}}, %[[TWO_TO_MINUS_63]] fastmath<contract> : f32
// CHECK-NEXT:    %[[LAST:.*]] = arith.mulf %[[STEP]], %[[R]] fastmath<contract> : f32
// CHECK-NEXT:    %[[EARLY:.*]] = arith.addf %[[LAST]], %[[TWO_TO_MINUS_63]] fastmath<contract> : f32
// CHECK-NEXT:    %[[SCALE:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK-NEXT:    %[[E:.*]] = arith.mulf %[[EARLY]], %[[SCALE]] fastmath<contract> : f32
// CHECK-NOT:     %[[INF]]
// CHECK-NOT:     arith.select
// CHECK-NOT:     arith.divf
// CHECK:         %[[EP:.*]] = arith.mulf %[[E]], %{{.*}} : f32
// CHECK-NEXT:    %[[EEP:.*]] = arith.mulf %[[E]], %[[EP]] fastmath<contract> : f32
// CHECK-NEXT:    arith.addf %[[EEP]], %[[E]] fastmath<contract> : f32
// CHECK:         arith.addf %{{.*}}, %[[X]] fastmath<contract> : f32
// CHECK:         arith.divf
// CHECK:         %[[LARGE_OR_NAN:.*]] = arith.cmpf uge, %[[X]], %[[TWO_TO_24]] : f32
// CHECK-NEXT:    %[[GENERAL:.*]] = arith.select %[[LARGE_OR_NAN]]
// CHECK-NEXT:    func.return %{{.*}}, %[[GENERAL]]
func.func @softplus_parts(%x: f32) -> (f32, f32) {
  %a = math.absf %x : f32
  %m = arith.negf %a : f32
  %e = math.exp %m : f32
  %l = math.log1p %e : f32
  %g = math.log1p %x : f32
  func.return %l, %g : f32, f32
}

// tanh of softplus's form (Mish's factor) is n / (n + 2) with e = exp(y), n = e (e + 2): one
// exp without its overflow select nor a select of its scale (only y <= 9.1 counts: the scale
// is always 2^-63, in e^r's coefficients as for exp(-|x|), then 2^(n + 63)), one division,
// 1 above y = 9.1; the softplus ops are erased. Where the softplus has another use, it stays
// beside the pair's form. libm keeps the calls.
// CHECK-LABEL: func.func @tanh_of_softplus
// CHECK-SAME:    (%[[Y:.*]]: f32)
// CHECK-DAG:     %[[MINUS_104:.*]] = arith.constant -1.040000e+02 : f32
// CHECK-DAG:     %[[TWO_TO_MINUS_63:.*]] = arith.constant 1.08420217e-19 : f32
// CHECK-DAG:     %[[HIGHEST:.*]] = arith.constant 1.49762289e-22 : f32
// CHECK-DAG:     %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-DAG:     %[[LIMIT:.*]] = arith.constant 9.100000e+00 : f32
// CHECK-DAG:     %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NOT:     math.
// CHECK-NOT:     arith.cmpf ogt
// CHECK:         arith.cmpf olt, %[[Y]], %[[MINUS_104]]
// CHECK-NEXT:    arith.select
// CHECK-NOT:     arith.select
// CHECK:         arith.mulf %[[HIGHEST]], %[[R:.*]] fastmath<contract> : f32
// CHECK-NOT:     arith.mulf %[[R]], %[[R]]
// CHECK:         %[[STEP:.*]] = arith.addf %{{.*}}, %[[TWO_TO_MINUS_63]] fastmath<contract> : f32
// CHECK-NEXT:    %[[LAST:.*]] = arith.mulf %[[STEP]], %[[R]] fastmath<contract> : f32
// CHECK-NEXT:    %[[EARLY:.*]] = arith.addf %[[LAST]], %[[TWO_TO_MINUS_63]] fastmath<contract> : f32
// CHECK-NEXT:    %[[SCALE:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK-NEXT:    %[[E:.*]] = arith.mulf %[[EARLY]], %[[SCALE]] fastmath<contract> : f32
// CHECK-NEXT:    %[[E_PLUS_2:.*]] = arith.addf %[[E]], %[[TWO]] fastmath<contract> : f32
// CHECK-NEXT:    %[[N:.*]] = arith.mulf %[[E]], %[[E_PLUS_2]] fastmath<contract> : f32
// CHECK-NEXT:    %[[N_PLUS_2:.*]] = arith.addf %[[N]], %[[TWO]] fastmath<contract> : f32
// CHECK-NEXT:    %[[RATIO:.*]] = arith.divf %[[N]], %[[N_PLUS_2]] fastmath<contract> : f32
// CHECK-NEXT:    %[[SATURATED:.*]] = arith.cmpf ogt, %[[Y]], %[[LIMIT]] : f32
// CHECK-NEXT:    %[[T:.*]] = arith.select %[[SATURATED]], %[[ONE]], %[[RATIO]] : f32
// CHECK-NEXT:    %[[MISH:.*]] = arith.mulf %[[Y]], %[[T]] : f32
// CHECK-NEXT:    func.return %[[MISH]]
// CHECK-LABEL: func.func @tanh_of_used_softplus
// CHECK:         arith.cmpf ogt
// CHECK:         arith.divf
// CHECK:         arith.cmpf ogt, %{{.*}}, %{{.*}} : f32
// CHECK:         func.return
// LIBM-LABEL: func.func @tanh_of_softplus
// LIBM:          func.call @expf
// LIBM:          func.call @log1pf
// LIBM:          func.call @tanhf
func.func @tanh_of_softplus(%y: f32) -> f32 {
  %zero = arith.constant 0.000000e+00 : f32
  %is_positive = arith.cmpf ogt, %y, %zero : f32
  %positive = arith.select %is_positive, %y, %zero : f32
  %a = math.absf %y : f32
  %m = arith.negf %a : f32
  %e = math.exp %m : f32
  %l = math.log1p %e : f32
  %softplus = arith.addf %positive, %l : f32
  %t = math.tanh %softplus : f32
  %mish = arith.mulf %y, %t : f32
  func.return %mish : f32
}
func.func @tanh_of_used_softplus(%y: f32) -> (f32, f32) {
  %zero = arith.constant 0.000000e+00 : f32
  %is_positive = arith.cmpf ogt, %y, %zero : f32
  %positive = arith.select %is_positive, %y, %zero : f32
  %a = math.absf %y : f32
  %m = arith.negf %a : f32
  %e = math.exp %m : f32
  %l = math.log1p %e : f32
  %softplus = arith.addf %positive, %l : f32
  %t = math.tanh %softplus : f32
  func.return %t, %softplus : f32, f32
}

// log of 1 + exp(x) (either order) is softplus's form, max(x, 0) + log1p(exp(-|x|)), with the
// composition's special values selected: +0 below ln 2^-24 (where 1 + exp(x) rounds to 1),
// +inf above 88.72 (where exp(x) overflows), log's NaN for NaN. No log is left (no shrsi of its
// exponent), and 1 + exp(x) is erased. libm keeps the calls.
// CHECK-LABEL: func.func @log_of_one_plus_exp
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK-DAG:     %[[NAN:.*]] = arith.constant 0x7fc00000 : f32
// CHECK-DAG:     %[[INF:.*]] = arith.constant 0x7f800000 : f32
// CHECK-DAG:     %[[FINITE_MAX:.*]] = arith.constant 88.7228317 : f32
// CHECK-DAG:     %[[ROUNDS_TO_ONE:.*]] = arith.constant -16.6355305 : f32
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NOT:     math.exp
// CHECK-NOT:     arith.shrsi
// CHECK:         %[[ABS:.*]] = math.absf %[[X]]
// CHECK-NEXT:    arith.negf %[[ABS]]
// CHECK-NOT:     arith.shrsi
// CHECK:         %[[RELU:.*]] = arith.select %{{.*}}, %[[X]], %[[ZERO]] : f32
// CHECK-NOT:     arith.shrsi
// CHECK:         %[[SOFTPLUS:.*]] = arith.addf %[[RELU]], %{{.*}} : f32
// CHECK-NEXT:    %[[IS_ONE:.*]] = arith.cmpf olt, %[[X]], %[[ROUNDS_TO_ONE]] : f32
// CHECK-NEXT:    %[[NOT_ONE:.*]] = arith.select %[[IS_ONE]], %[[ZERO]], %[[SOFTPLUS]] : f32
// CHECK-NEXT:    %[[OVERFLOWS:.*]] = arith.cmpf ogt, %[[X]], %[[FINITE_MAX]] : f32
// CHECK-NEXT:    %[[FINITE:.*]] = arith.select %[[OVERFLOWS]], %[[INF]], %[[NOT_ONE]] : f32
// CHECK-NEXT:    %[[IS_NAN:.*]] = arith.cmpf uno, %[[X]], %[[X]] : f32
// CHECK-NEXT:    %[[L:.*]] = arith.select %[[IS_NAN]], %[[NAN]], %[[FINITE]] : f32
// CHECK-NEXT:    func.return %[[L]]
// LIBM-LABEL: func.func @log_of_one_plus_exp
// LIBM:          func.call @expf
// LIBM:          func.call @logf
func.func @log_of_one_plus_exp(%x: f32) -> f32 {
  %one = arith.constant 1.000000e+00 : f32
  %e = math.exp %x : f32
  %u = arith.addf %e, %one : f32
  %l = math.log %u : f32
  func.return %l : f32
}

// Where a select takes log1p(exp(x)) only for x <= 20 (PyTorch's softplus), +inf above 88.72
// is not selected: the NaN's select is the last.
// CHECK-LABEL: func.func @softplus_with_a_threshold
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK-NOT:     0x7f800000
// CHECK:         %[[IS_NAN:.*]] = arith.cmpf uno, %[[X]], %[[X]] : f32
// CHECK-NEXT:    %[[L:.*]] = arith.select %[[IS_NAN]], %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:    %[[SOFTPLUS:.*]] = arith.select %{{.*}}, %[[X]], %[[L]] : f32
// CHECK-NEXT:    func.return %[[SOFTPLUS]]
func.func @softplus_with_a_threshold(%x: f32) -> f32 {
  %twenty = arith.constant 2.000000e+01 : f32
  %large = arith.cmpf ogt, %x, %twenty : f32
  %e = math.exp %x : f32
  %l = math.log1p %e : f32
  %softplus = arith.select %large, %x, %l : f32
  func.return %softplus : f32
}

// erf and tanh of x times a constant c (1/16 <= |c| <= 16) fold c into their rationals'
// coefficients: no multiply by c is left, x itself is clamped at the last float32 where the
// quotient is exactly 1 before it first passes 1, the Horner steps FMAs whatever the fast-math
// flags. libm calls the functions of the products.
// CHECK-LABEL: func.func @scaled_erf_and_tanh
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK-DAG:     %[[ERF_LIMIT:.*]] = arith.constant 5.17073774 : f32
// CHECK-DAG:     %[[ERF3_LIMIT:.*]] = arith.constant 1.21468067 : f32
// CHECK-DAG:     %[[TANH_LIMIT:.*]] = arith.constant 9.91849327 : f32
// CHECK-NOT:     arith.constant 0.707106769
// CHECK-NOT:     arith.constant -3.000000e+00
// CHECK-NOT:     arith.constant 0.797884583
// CHECK:         %[[ERF_ABOVE:.*]] = arith.cmpf ogt, %[[X]], %[[ERF_LIMIT]] : f32
// CHECK-NEXT:    arith.select %[[ERF_ABOVE]], %[[ERF_LIMIT]], %[[X]] : f32
// CHECK:         %[[ERF_SQUARE:.*]] = arith.mulf %[[ERF_X:.*]], %[[ERF_X]] fastmath<contract> : f32
// CHECK-NEXT:    %[[ERF_STEP:.*]] = math.fma %{{.*}}, %[[ERF_SQUARE]], %{{.*}} : f32
// CHECK-NEXT:    math.fma %[[ERF_STEP]], %[[ERF_SQUARE]], %{{.*}} : f32
// CHECK:         %[[ERF:.*]] = arith.divf
// CHECK-NEXT:    %[[ERF3_ABOVE:.*]] = arith.cmpf ogt, %[[X]], %[[ERF3_LIMIT]] : f32
// CHECK-NEXT:    arith.select %[[ERF3_ABOVE]], %[[ERF3_LIMIT]], %[[X]] : f32
// CHECK:         %[[ERF3:.*]] = arith.divf
// CHECK-NEXT:    %[[TANH_ABOVE:.*]] = arith.cmpf ogt, %[[X]], %[[TANH_LIMIT]] : f32
// CHECK-NEXT:    arith.select %[[TANH_ABOVE]], %[[TANH_LIMIT]], %[[X]] : f32
// CHECK:         %[[TANH_SQUARE:.*]] = arith.mulf %[[TANH_X:.*]], %[[TANH_X]] fastmath<contract> : f32
// CHECK-NEXT:    math.fma %{{.*}}, %[[TANH_SQUARE]], %{{.*}} : f32
// CHECK:         arith.divf
// CHECK:         func.return %[[ERF]], %[[ERF3]], %{{.*}} : f32, f32, f32
// LIBM-LABEL: func.func @scaled_erf_and_tanh
// LIBM-SAME:     (%[[X:.*]]: f32)
// LIBM:          %[[SCALED:.*]] = arith.mulf %[[X]], %{{.*}} : f32
// LIBM-NEXT:     func.call @erff(%[[SCALED]])
// LIBM:          func.call @erff
// LIBM:          %[[TANH_ARGUMENT:.*]] = arith.mulf %{{.*}}, %[[X]] : f32
// LIBM-NEXT:     func.call @tanhf(%[[TANH_ARGUMENT]])
func.func @scaled_erf_and_tanh(%x: f32) -> (f32, f32, f32) {
  %c = arith.constant 0.707106769 : f32
  %y = arith.mulf %x, %c : f32
  %r = math.erf %y : f32
  %minus_three = arith.constant -3.000000e+00 : f32
  %z = arith.mulf %minus_three, %x : f32
  %s = math.erf %z : f32
  %k = arith.constant 0.797884583 : f32
  %u = arith.mulf %k, %x : f32
  %t = math.tanh %u : f32
  func.return %r, %s, %t : f32, f32, f32
}

// A division by a constant folds as a multiply by its reciprocal would (PyTorch's GELU writes
// erf(x / sqrt(2))): x is clamped as erf(x * 0.7071) clamps it, and no division of x is left.
// libm divides, then calls erff.
// CHECK-LABEL: func.func @erf_of_a_quotient
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK-NOT:     arith.divf %[[X]]
// CHECK:         %[[LIMIT:.*]] = arith.constant 5.15133715 : f32
// CHECK:         arith.cmpf ogt, %[[X]], %[[LIMIT]] : f32
// CHECK-NOT:     arith.divf %[[X]]
// CHECK:         func.return
// LIBM-LABEL: func.func @erf_of_a_quotient
// LIBM-SAME:     (%[[X:.*]]: f32)
// LIBM:          %[[QUOTIENT:.*]] = arith.divf %[[X]], %{{.*}} : f32
// LIBM-NEXT:     func.call @erff(%[[QUOTIENT]])
func.func @erf_of_a_quotient(%x: f32) -> f32 {
  %root_two = arith.constant 1.41421354 : f32
  %y = arith.divf %x, %root_two : f32
  %r = math.erf %y : f32
  func.return %r : f32
}

// GELU's (0.5 x) (1 + f), f a tanh or an erf (either order of each product and sum): of an erf
// it is x (0.5 + f / 2) with f / 2 from f's numerator halved (the quotient exactly +-0.5 at the
// clamp), of f = tanh(u) x / (1 + 2^t) with t = -2 u log2(e) (one short exp2: no tanh rational);
// no multiply by 0.5 is left, and 0.5 x is erased once unused. Where 1 + f has another use,
// nothing changes.
// libm keeps the calls and the multiply.
// CHECK-LABEL: func.func @gelu_halves
// CHECK-SAME:    (%[[X:.*]]: f32, %[[U:.*]]: f32)
// CHECK-DAG:     %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG:     %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:     %[[MINUS_TWO_LOG2E:.*]] = arith.constant -2.885390e+00 : f32
// CHECK-NOT:     arith.mulf %[[HALF]], %[[X]]
// CHECK:         %[[T:.*]] = arith.mulf %[[U]], %[[MINUS_TWO_LOG2E]] fastmath<contract> : f32
// CHECK-NEXT:    arith.cmpf ogt, %[[T]]
// CHECK:         %[[SCALE:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK-NEXT:    %[[POWER:.*]] = arith.mulf %{{.*}}, %[[SCALE]] fastmath<contract> : f32
// CHECK-NEXT:    %[[DENOMINATOR:.*]] = arith.addf %[[POWER]], %[[ONE]] fastmath<contract> : f32
// CHECK-NEXT:    %[[G:.*]] = arith.divf %[[X]], %[[DENOMINATOR]] fastmath<contract> : f32
// CHECK-NOT:     arith.mulf %[[HALF]], %[[X]]
// CHECK:         %[[ERF:.*]] = arith.divf
// CHECK-NEXT:    %[[ERF_SUM:.*]] = arith.addf %[[HALF]], %[[ERF]] fastmath<contract> : f32
// CHECK-NEXT:    %[[EG:.*]] = arith.mulf %[[X]], %[[ERF_SUM]] fastmath<contract> : f32
// CHECK-NEXT:    func.return %[[G]], %[[EG]] : f32, f32
// CHECK-LABEL: func.func @gelu_sum_used_twice
// CHECK-SAME:    (%[[X:.*]]: f32, %[[U:.*]]: f32)
// CHECK:         %[[HALF_X:.*]] = arith.mulf %{{.*}}, %[[X]] : f32
// CHECK:         arith.divf
// CHECK:         %[[SUM:.*]] = arith.addf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:    %[[G:.*]] = arith.mulf %[[HALF_X]], %[[SUM]] : f32
// CHECK-NEXT:    func.return %[[G]], %[[SUM]] : f32, f32
// Of GELU's own u = c (h + a h^3) (any order, h^3 also as fpowi), t = h (k + k a h^2) with
// k = -2 c log2(e): the cube's ops go. Where h + a h^3 has another use, t = (h + a h^3) k, as of any u = c y.
// CHECK-LABEL: func.func @gelu_cubic
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK-DAG:     %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:     %[[MAGIC:.*]] = arith.constant 0x4B40007E : f32
// CHECK-DAG:     %[[LOW:.*]] = arith.constant -3.000000e+01 : f32
// CHECK-DAG:     %[[HIGH:.*]] = arith.constant 1.285000e+02 : f32
// CHECK-DAG:     %[[K:.*]] = arith.constant -2.30220819 : f32
// CHECK-DAG:     %[[KA:.*]] = arith.constant -0.102943242 : f32
// CHECK-DAG:     %[[SHIFT:.*]] = arith.constant 23 : i32
// CHECK-NOT:     math.tanh
// CHECK:         %[[SQUARE:.*]] = arith.mulf %[[X]], %[[X]] fastmath<contract> : f32
// CHECK-NEXT:    %[[SCALED:.*]] = arith.mulf %[[SQUARE]], %[[KA]] fastmath<contract> : f32
// CHECK-NEXT:    %[[INNER:.*]] = arith.addf %[[SCALED]], %[[K]] fastmath<contract> : f32
// CHECK-NEXT:    %[[T:.*]] = arith.mulf %[[X]], %[[INNER]] fastmath<contract> : f32
// CHECK-NEXT:    %[[ABOVE:.*]] = arith.cmpf ogt, %[[T]], %[[HIGH]] : f32
// CHECK-NEXT:    %[[T_HIGH:.*]] = arith.select %[[ABOVE]], %[[HIGH]], %[[T]] : f32
// CHECK-NEXT:    %[[BELOW:.*]] = arith.cmpf olt, %[[T_HIGH]], %[[LOW]] : f32
// CHECK-NEXT:    %[[CLAMPED:.*]] = arith.select %[[BELOW]], %[[LOW]], %[[T_HIGH]] : f32
// CHECK-NEXT:    %[[SHIFTED:.*]] = arith.addf %[[CLAMPED]], %[[MAGIC]] fastmath<contract> : f32
// CHECK-NEXT:    %[[N:.*]] = arith.subf %[[SHIFTED]], %[[MAGIC]] fastmath<contract> : f32
// CHECK-NEXT:    %[[R:.*]] = arith.subf %[[CLAMPED]], %[[N]] fastmath<contract> : f32
// CHECK-COUNT-5: arith.mulf %{{.*}}, %[[R]] fastmath<contract> : f32
// CHECK:         %[[TWICE:.*]] = arith.addf %{{.*}}, %{{.*}} fastmath<contract> : f32
// CHECK-NEXT:    %[[BITS:.*]] = arith.bitcast %[[SHIFTED]] : f32 to i32
// CHECK-NEXT:    %[[SCALE_BITS:.*]] = arith.shli %[[BITS]], %[[SHIFT]] : i32
// CHECK-NEXT:    %[[SCALE:.*]] = arith.bitcast %[[SCALE_BITS]] : i32 to f32
// CHECK-NEXT:    %[[POWER:.*]] = arith.mulf %[[TWICE]], %[[SCALE]] fastmath<contract> : f32
// CHECK-NEXT:    %[[DENOMINATOR:.*]] = arith.addf %[[POWER]], %[[ONE]] fastmath<contract> : f32
// CHECK-NEXT:    %[[G:.*]] = arith.divf %[[X]], %[[DENOMINATOR]] fastmath<contract> : f32
// CHECK-NEXT:    func.return %[[G]] : f32
// CHECK-LABEL: func.func @gelu_cubic_fpowi
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK-NOT:     math.fpowi
// CHECK:         %[[SQUARE:.*]] = arith.mulf %[[X]], %[[X]] fastmath<contract> : f32
// CHECK-NOT:     math.fpowi
// CHECK:         arith.divf %[[X]], %{{.*}} fastmath<contract> : f32
// CHECK-LABEL: func.func @gelu_cubic_used_twice
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK-DAG:     %[[MINUS_TWO_C_LOG2E:.*]] = arith.constant -2.30220819 : f32
// CHECK:         %[[V:.*]] = arith.addf %[[X]], %{{.*}} : f32
// CHECK-NEXT:    %[[T:.*]] = arith.mulf %[[V]], %[[MINUS_TWO_C_LOG2E]] fastmath<contract> : f32
// CHECK-NOT:     math.tanh
// CHECK:         %[[G:.*]] = arith.divf %[[X]], %{{.*}} fastmath<contract> : f32
// CHECK-NEXT:    func.return %[[G]], %[[V]] : f32, f32
// LIBM-LABEL: func.func @gelu_halves
// LIBM:          %[[HALF_X:.*]] = arith.mulf
// LIBM:          func.call @tanhf
// LIBM:          arith.mulf %[[HALF_X]], %{{.*}} : f32
// LIBM:          func.call @erff
func.func @gelu_halves(%x: f32, %u: f32) -> (f32, f32) {
  %half = arith.constant 5.000000e-01 : f32
  %one = arith.constant 1.000000e+00 : f32
  %hx = arith.mulf %half, %x : f32
  %t = math.tanh %u : f32
  %s = arith.addf %one, %t : f32
  %g = arith.mulf %hx, %s : f32
  %e = math.erf %u : f32
  %es = arith.addf %e, %one : f32
  %eg = arith.mulf %es, %hx : f32
  func.return %g, %eg : f32, f32
}

func.func @gelu_sum_used_twice(%x: f32, %u: f32) -> (f32, f32) {
  %half = arith.constant 5.000000e-01 : f32
  %one = arith.constant 1.000000e+00 : f32
  %hx = arith.mulf %half, %x : f32
  %t = math.tanh %u : f32
  %s = arith.addf %one, %t : f32
  %g = arith.mulf %hx, %s : f32
  func.return %g, %s : f32, f32
}

func.func @gelu_cubic(%x: f32) -> f32 {
  %half = arith.constant 5.000000e-01 : f32
  %one = arith.constant 1.000000e+00 : f32
  %a = arith.constant 0.0447149985 : f32
  %c = arith.constant 0.797884583 : f32
  %ax = arith.mulf %a, %x : f32
  %axx = arith.mulf %ax, %x : f32
  %cube = arith.mulf %x, %axx : f32
  %v = arith.addf %cube, %x : f32
  %u = arith.mulf %v, %c : f32
  %t = math.tanh %u : f32
  %s = arith.addf %t, %one : f32
  %hx = arith.mulf %x, %half : f32
  %g = arith.mulf %s, %hx : f32
  func.return %g : f32
}

func.func @gelu_cubic_fpowi(%x: f32) -> f32 {
  %half = arith.constant 5.000000e-01 : f32
  %one = arith.constant 1.000000e+00 : f32
  %three = arith.constant 3 : i32
  %a = arith.constant 0.0447149985 : f32
  %c = arith.constant 0.797884583 : f32
  %cube = math.fpowi %x, %three : f32, i32
  %acube = arith.mulf %a, %cube : f32
  %v = arith.addf %x, %acube : f32
  %u = arith.mulf %c, %v : f32
  %t = math.tanh %u : f32
  %s = arith.addf %one, %t : f32
  %hx = arith.mulf %half, %x : f32
  %g = arith.mulf %hx, %s : f32
  func.return %g : f32
}

func.func @gelu_cubic_used_twice(%x: f32) -> (f32, f32) {
  %half = arith.constant 5.000000e-01 : f32
  %one = arith.constant 1.000000e+00 : f32
  %a = arith.constant 0.0447149985 : f32
  %c = arith.constant 0.797884583 : f32
  %ax = arith.mulf %a, %x : f32
  %axx = arith.mulf %ax, %x : f32
  %cube = arith.mulf %axx, %x : f32
  %v = arith.addf %x, %cube : f32
  %u = arith.mulf %c, %v : f32
  %t = math.tanh %u : f32
  %s = arith.addf %one, %t : f32
  %hx = arith.mulf %half, %x : f32
  %g = arith.mulf %hx, %s : f32
  func.return %g, %v : f32, f32
}

// -softplus(-x) (log-sigmoid) loses both negations, in both modes: (x < -0 ? x : -0) minus the
// log1p term (exact: that term is never -0); the softplus ops are erased.
// CHECK-LABEL: func.func @log_sigmoid
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK-NOT:     arith.cmpf ogt
// CHECK:         %[[MINUS_ZERO:.*]] = arith.constant -0.000000e+00 : f32
// CHECK-NEXT:    %[[NEGATIVE:.*]] = arith.cmpf olt, %[[X]], %[[MINUS_ZERO]] : f32
// CHECK-NEXT:    %[[MINIMUM:.*]] = arith.select %[[NEGATIVE]], %[[X]], %[[MINUS_ZERO]] : f32
// CHECK-NEXT:    %[[RESULT:.*]] = arith.subf %[[MINIMUM]], %{{.*}} : f32
// CHECK-NEXT:    func.return %[[RESULT]]
// LIBM-LABEL: func.func @log_sigmoid
// LIBM-SAME:     (%[[X:.*]]: f32)
// LIBM-NOT:      arith.cmpf ogt
// LIBM:          %[[E:.*]] = func.call @expf
// LIBM-NEXT:     %[[L:.*]] = func.call @log1pf(%[[E]])
// LIBM:          arith.cmpf olt, %[[X]], %{{.*}} : f32
// LIBM-NEXT:     %[[MINIMUM:.*]] = arith.select
// LIBM-NEXT:     %[[RESULT:.*]] = arith.subf %[[MINIMUM]], %[[L]] : f32
// LIBM-NEXT:     func.return %[[RESULT]]
func.func @log_sigmoid(%x: f32) -> f32 {
  %zero = arith.constant 0.000000e+00 : f32
  %y = arith.negf %x : f32
  %is_positive = arith.cmpf ogt, %y, %zero : f32
  %positive = arith.select %is_positive, %y, %zero : f32
  %a = math.absf %y : f32
  %m = arith.negf %a : f32
  %e = math.exp %m : f32
  %l = math.log1p %e : f32
  %softplus = arith.addf %positive, %l : f32
  %result = arith.negf %softplus : f32
  func.return %result : f32
}

// In f64 too (the fold is exact in any IEEE format), with libm's exp and log1p in both modes.
// CHECK-LABEL: func.func @log_sigmoid_f64
// CHECK-SAME:    (%[[X:.*]]: f64)
// CHECK-NOT:     arith.cmpf ogt
// CHECK:         %[[L:.*]] = func.call @log1p(%{{.*}}) : (f64) -> f64
// CHECK-NEXT:    %[[MINUS_ZERO:.*]] = arith.constant -0.000000e+00 : f64
// CHECK-NEXT:    %[[NEGATIVE:.*]] = arith.cmpf olt, %[[X]], %[[MINUS_ZERO]] : f64
// CHECK-NEXT:    %[[MINIMUM:.*]] = arith.select %[[NEGATIVE]], %[[X]], %[[MINUS_ZERO]] : f64
// CHECK-NEXT:    %[[RESULT:.*]] = arith.subf %[[MINIMUM]], %[[L]] : f64
// CHECK-NEXT:    func.return %[[RESULT]]
// LIBM-LABEL: func.func @log_sigmoid_f64
// LIBM-NOT:      arith.cmpf ogt
// LIBM:          %[[L:.*]] = func.call @log1p(%{{.*}}) : (f64) -> f64
// LIBM:          arith.cmpf olt
// LIBM-NEXT:     %[[MINIMUM:.*]] = arith.select
// LIBM-NEXT:     %[[RESULT:.*]] = arith.subf %[[MINIMUM]], %[[L]] : f64
// LIBM-NEXT:     func.return %[[RESULT]]
func.func @log_sigmoid_f64(%x: f64) -> f64 {
  %zero = arith.constant 0.000000e+00 : f64
  %y = arith.negf %x : f64
  %is_positive = arith.cmpf ogt, %y, %zero : f64
  %positive = arith.select %is_positive, %y, %zero : f64
  %a = math.absf %y : f64
  %m = arith.negf %a : f64
  %e = math.exp %m : f64
  %l = math.log1p %e : f64
  %softplus = arith.addf %positive, %l : f64
  %result = arith.negf %softplus : f64
  func.return %result : f64
}

// exp's 2^n is built from n's bits by integer ops (in the full range a shift and an add of the
// bias, a select of it for denormal results; of exp(-|x|) the shift alone: the rounding trick's
// magic, 1.5 * 2^23 + 190, holds the bias of 2^(n+63)), or with `ldexp=true` (hosts with
// AVX-512) applied to e^r by one llvm.ldexp, n the rounding trick's bits less the trick's own:
// the same bits.
// CHECK-LABEL: func.func @exp_scalings
// CHECK-DAG:     %[[MAGIC:.*]] = arith.constant 0x4B400000 : f32
// CHECK-DAG:     %[[TAIL_MAGIC:.*]] = arith.constant 0x4B4000BE : f32
// CHECK-DAG:     %[[SHIFT:.*]] = arith.constant 23 : i32
// CHECK-NOT:     llvm.call_intrinsic
// CHECK:         %[[SHIFTED:.*]] = arith.addf %{{.*}}, %[[MAGIC]] fastmath<contract> : f32
// CHECK:         %[[BITS:.*]] = arith.bitcast %[[SHIFTED]] : f32 to i32
// CHECK-NEXT:    %[[EXPONENT:.*]] = arith.shli %[[BITS]], %[[SHIFT]] : i32
// CHECK:         arith.addi %[[EXPONENT]], %{{.*}} : i32
// CHECK:         %[[TAIL_SHIFTED:.*]] = arith.addf %{{.*}}, %[[TAIL_MAGIC]] fastmath<contract> : f32
// CHECK:         %[[TAIL_BITS:.*]] = arith.bitcast %[[TAIL_SHIFTED]] : f32 to i32
// CHECK-NEXT:    %[[TAIL_EXPONENT:.*]] = arith.shli %[[TAIL_BITS]], %[[SHIFT]] : i32
// CHECK-NOT:     arith.addi
// CHECK:         arith.bitcast %[[TAIL_EXPONENT]] : i32 to f32
// CHECK-NOT:     llvm.call_intrinsic
// CHECK:         func.return
// LDEXP-LABEL: func.func @exp_scalings
// LDEXP-SAME:    (%[[X:.*]]: f32)
// LDEXP-DAG:     %[[INF:.*]] = arith.constant 0x7f800000 : f32
// LDEXP-DAG:     %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// LDEXP-DAG:     %[[MAGIC_BITS:.*]] = arith.constant 1262485504 : i32
// LDEXP-DAG:     %[[MAGIC:.*]] = arith.constant 0x4B400000 : f32
// LDEXP-DAG:     %[[TAIL_MAGIC_BITS:.*]] = arith.constant 1262485694 : i32
// LDEXP-NOT:     arith.shli
// LDEXP:         %[[SHIFTED:.*]] = arith.addf %{{.*}}, %[[MAGIC]] fastmath<contract> : f32
// LDEXP:         %[[R_SQUARED:.*]] = arith.mulf %[[R:.*]], %[[R]] fastmath<contract> : f32
// LDEXP-NEXT:    %[[R_SQUARED_P:.*]] = arith.mulf %[[R_SQUARED]], %{{.*}} : f32
// LDEXP-NEXT:    %[[MINUS_ONE:.*]] = arith.addf %[[R_SQUARED_P]], %[[R]] fastmath<contract> : f32
// LDEXP-NEXT:    %[[BITS:.*]] = arith.bitcast %[[SHIFTED]] : f32 to i32
// LDEXP-NEXT:    %[[N:.*]] = arith.subi %[[BITS]], %[[MAGIC_BITS]] : i32
// LDEXP-NEXT:    %[[E_R:.*]] = arith.addf %[[MINUS_ONE]], %[[ONE]] fastmath<contract> : f32
// LDEXP-NEXT:    %[[SCALED:.*]] = llvm.call_intrinsic "llvm.ldexp.f32.i32"(%[[E_R]], %[[N]]) : (f32, i32) -> f32
// LDEXP-NEXT:    %[[OVERFLOWS:.*]] = arith.cmpf ogt, %[[X]], %{{.*}} : f32
// LDEXP-NEXT:    %{{.*}} = arith.select %[[OVERFLOWS]], %[[INF]], %[[SCALED]] : f32
// LDEXP:         %[[TAIL_BITS:.*]] = arith.bitcast %{{.*}} : f32 to i32
// LDEXP-NEXT:    %[[TAIL_N:.*]] = arith.subi %[[TAIL_BITS]], %[[TAIL_MAGIC_BITS]] : i32
// LDEXP:         %[[TAIL:.*]] = llvm.call_intrinsic "llvm.ldexp.f32.i32"(%{{.*}}, %[[TAIL_N]]) : (f32, i32) -> f32
// LDEXP-NOT:     arith.select
// LDEXP-NEXT:    func.return %{{.*}}, %[[TAIL]] : f32, f32
func.func @exp_scalings(%x: f32) -> (f32, f32) {
  %e = math.exp %x : f32
  %a = math.absf %x : f32
  %m = arith.negf %a : f32
  %t = math.exp %m : f32
  func.return %e, %t : f32, f32
}

// exp whose value counts only where its argument is at most 44 (where a select takes it: x <= c
// or NaN, the compare in either order, through elementwise ops) has exp(-|x|)'s short form:
// ELU's exp(x) - 1 under x > 0, exp(x) * 3 under 20 > x, exp(x) under 20 >= x or NaN (`uge`,
// unordered); not under x > NaN (never true: the false arm takes every x), under x < 50, or
// where exp's value is also returned.
// CHECK-LABEL: func.func @exp_counting_up_to_44
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK-NOT:     0x7f800000
// CHECK:         arith.constant 0x4B4000BE : f32
// CHECK-NOT:     0x7f800000
// CHECK-NOT:     arith.addi
// CHECK:         %[[ELU:.*]] = arith.select %{{.*}}, %[[X]], %{{.*}} : f32
// CHECK-NOT:     0x7f800000
// CHECK-NOT:     arith.addi
// CHECK:         func.return %[[ELU]], %{{.*}}, %{{.*}} : f32, f32, f32
// LDEXP-LABEL: func.func @exp_counting_up_to_44
// LDEXP-NOT:     0x7f800000
// LDEXP:         func.return
// CHECK-LABEL: func.func @exp_counting_past_44
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK:         %[[FINITE_MAX:.*]] = arith.constant 88.7228317 : f32
// CHECK-COUNT-3: arith.cmpf ogt, %[[X]], %[[FINITE_MAX]] : f32
// CHECK-NOT:     arith.cmpf ogt, %[[X]], %[[FINITE_MAX]] : f32
// CHECK:         func.return
func.func @exp_counting_up_to_44(%x: f32) -> (f32, f32, f32) {
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %three = arith.constant 3.000000e+00 : f32
  %twenty = arith.constant 2.000000e+01 : f32
  %positive = arith.cmpf ogt, %x, %zero : f32
  %e = math.exp %x : f32
  %e_minus_one = arith.subf %e, %one : f32
  %elu = arith.select %positive, %x, %e_minus_one : f32
  %below_twenty = arith.cmpf ogt, %twenty, %x : f32
  %f = math.exp %x : f32
  %f_times_three = arith.mulf %f, %three : f32
  %scaled = arith.select %below_twenty, %f_times_three, %x : f32
  %twenty_or_more = arith.cmpf uge, %twenty, %x : f32
  %g = math.exp %x : f32
  %unordered = arith.select %twenty_or_more, %g, %x : f32
  func.return %elu, %scaled, %unordered : f32, f32, f32
}

func.func @exp_counting_past_44(%x: f32) -> (f32, f32, f32, f32) {
  %nan = arith.constant 0x7FC00000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  %fifty = arith.constant 5.000000e+01 : f32
  %never = arith.cmpf ogt, %x, %nan : f32
  %e = math.exp %x : f32
  %always_e = arith.select %never, %x, %e : f32
  %below_fifty = arith.cmpf olt, %x, %fifty : f32
  %f = math.exp %x : f32
  %f_below_fifty = arith.select %below_fifty, %f, %x : f32
  %positive = arith.cmpf ogt, %x, %zero : f32
  %g = math.exp %x : f32
  %elu_and_g = arith.select %positive, %x, %g : f32
  func.return %always_e, %f_below_fifty, %elu_and_g, %g : f32, f32, f32, f32
}

// approx: pow by a constant 2, 3, 4 or -1 is `math.fpowi` (multiplies or 1 / x in LLVM), by
// -1/2 rsqrt (1 / sqrt in f64) with +-0 and -inf selected (+inf and +0 there), in f32 and f64;
// other constants keep exp(y log|x|) in f64 (f32) or the call (f64), on |x|, with C's signs and
// NaN for a negative base selected (libmvec's pow of a negative base is its scalar fallback).
// libm calls powf and pow for all.
// CHECK-LABEL: func.func @simple_powers
// CHECK-SAME:    (%[[X:.*]]: f32, %[[D:.*]]: f64)
// CHECK:         %[[THREE:.*]] = arith.constant 3 : i32
// CHECK-NEXT:    %{{.*}} = math.fpowi %[[X]], %[[THREE]] : f32, i32
// CHECK:         %[[TWO:.*]] = arith.constant 2 : i32
// CHECK-NEXT:    %{{.*}} = math.fpowi %[[D]], %[[TWO]] : f64, i32
// CHECK-NEXT:    %[[INF:.*]] = arith.constant 0x7ff0000000000000 : f64
// CHECK-NEXT:    %[[MINUS_INF:.*]] = arith.constant 0xfff0000000000000 : f64
// CHECK-NEXT:    %[[AT_MINUS_INF:.*]] = arith.cmpf oeq, %[[D]], %[[MINUS_INF]] : f64
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT:    %[[ROOT:.*]] = math.sqrt %[[D]] : f64
// CHECK-NEXT:    %[[RECIPROCAL:.*]] = arith.divf %[[ONE]], %[[ROOT]] : f64
// CHECK-NEXT:    %[[AT_ZERO:.*]] = arith.cmpf oeq, %[[D]], %[[ZERO]] : f64
// CHECK-NEXT:    %[[NOT_ZERO:.*]] = arith.select %[[AT_ZERO]], %[[INF]], %[[RECIPROCAL]] : f64
// CHECK-NEXT:    %{{.*}} = arith.select %[[AT_MINUS_INF]], %[[ZERO]], %[[NOT_ZERO]] : f64
// CHECK-NEXT:    %[[ABS:.*]] = math.absf %[[D]] : f64
// CHECK-NEXT:    %[[MAGNITUDE:.*]] = func.call @pow(%[[ABS]], %{{.*}}) : (f64, f64) -> f64
// CHECK-NEXT:    %{{.*}} = math.floor
// CHECK:         %[[NEGATED:.*]] = arith.negf %[[MAGNITUDE]] fastmath<contract> : f64
// CHECK:         %{{.*}} = arith.select %{{.*}}, %[[NEGATED]], %[[MAGNITUDE]] : f64
// CHECK-NOT:     math.fpowi
// CHECK:         %[[REDUCED:.*]] = arith.extf %{{.*}} : f32 to f64
// CHECK:         arith.mulf %[[REDUCED]], %[[REDUCED]]
// CHECK:         arith.truncf %{{.*}} : f64 to f32
// CHECK:         math.floor
// CHECK:         func.return
// LIBM-LABEL: func.func @simple_powers
// LIBM-NOT:      math.fpowi
// LIBM:          func.call @powf(
// LIBM-NEXT:     func.call @pow(
// LIBM-NEXT:     func.call @pow(
// LIBM-NEXT:     func.call @pow(
// LIBM-NEXT:     func.call @powf(
func.func @simple_powers(%x: f32, %d: f64) -> (f32, f64, f64, f64, f32) {
  %three = arith.constant 3.0 : f32
  %two = arith.constant 2.0 : f64
  %minus_half = arith.constant -0.5 : f64
  %five = arith.constant 5.0 : f64
  %two_and_a_half = arith.constant 2.5 : f32
  %c = math.powf %x, %three : f32
  %s = math.powf %d, %two : f64
  %r = math.powf %d, %minus_half : f64
  %f = math.powf %d, %five : f64
  %h = math.powf %x, %two_and_a_half : f32
  func.return %c, %s, %r, %f, %h : f32, f64, f64, f64, f32
}

// `fastmath`: the program's own arithmetic gains the flags, before anything is expanded; the
// approximation's ops keep only their `contract` (NVPTX makes an f32 division with `afn` a
// `div.approx.f32`).
// FASTMATH-LABEL: func.func @program_and_approximation
// FASTMATH-SAME:    (%[[X:.*]]: f32, %[[Y:.*]]: f32)
// FASTMATH:         %[[Q:.*]] = arith.divf %[[X]], %[[Y]] fastmath<contract,afn> : f32
// FASTMATH:         arith.cmpf olt, %{{.*}}, %{{.*}} : f32
// FASTMATH-NEXT:    %[[CLAMPED:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// FASTMATH-NEXT:    arith.mulf %[[CLAMPED]], %[[CLAMPED]] fastmath<contract> : f32
// FASTMATH:         arith.divf %{{.*}}, %{{.*}} fastmath<contract> : f32
// FASTMATH:         arith.addf %[[Q]], %{{.*}} fastmath<contract,afn> : f32
// FASTMATH-NEXT:    func.return
func.func @program_and_approximation(%x: f32, %y: f32) -> f32 {
  %q = arith.divf %x, %y : f32
  %t = math.tanh %x : f32
  %r = arith.addf %q, %t : f32
  func.return %r : f32
}

// The ops ew-fuse writes for sigmoid (log1p, softplus), marked `ew.expansion`, are not the
// program's: they gain no flags (under `fast`, log1p(1e-6) was 9.5e-7 and sigmoid(0) 0.49999997
// on the CPU, their divisions `div.approx.f32` on the GPU), and the mark is dropped; the
// program's division and addition around them gain the flags.
// FAST-LABEL: func.func @program_and_scalar_form
// FAST-SAME:    (%[[X:.*]]: f32, %[[Y:.*]]: f32)
// FAST:         %[[Q:.*]] = arith.divf %[[X]], %[[Y]] fastmath<fast> : f32
// FAST:         arith.negf %{{[^ ]+}} : f32
// FAST:         %[[DENOMINATOR:[^ ]+]] = arith.addf %{{[^ ]+}}, %{{[^ ]+}} : f32
// FAST-NEXT:    %[[SIGMOID:[^ ]+]] = arith.divf %{{[^ ]+}}, %[[DENOMINATOR]] : f32
// FAST-NEXT:    arith.addf %[[Q]], %[[SIGMOID]] fastmath<fast> : f32
// FAST-NEXT:    func.return
// FAST-NOT:     ew.expansion
func.func @program_and_scalar_form(%x: f32, %y: f32) -> f32 {
  %q = arith.divf %x, %y : f32
  %one = arith.constant 1.0 : f32
  %abs = math.absf %q : f32
  %minus_abs = arith.negf %abs {ew.expansion} : f32
  %e = math.exp %minus_abs : f32
  %sign = math.copysign %one, %q : f32
  %larger = arith.cmpf ogt, %e, %sign : f32
  %numerator = arith.select %larger, %e, %sign : f32
  %denominator = arith.addf %one, %e {ew.expansion} : f32
  %sigmoid = arith.divf %numerator, %denominator {ew.expansion} : f32
  %r = arith.addf %q, %sigmoid : f32
  func.return %r : f32
}

// The C library's functions that xfuse has no approximation of: called in f32 under `approx`
// too (the loop vectorizer then calls libmvec's vector variants), libdevice's on the GPU.
// CHECK-LABEL: func.func @library_functions
// CHECK-SAME:    (%[[X:.*]]: f32, %[[Y:.*]]: f32, %[[Z:.*]]: f64)
// CHECK-NEXT:    %[[SIN:.*]] = func.call @sinf(%[[X]]) : (f32) -> f32
// CHECK-NEXT:    %[[ATAN2:.*]] = func.call @atan2f(%[[X]], %[[Y]]) : (f32, f32) -> f32
// CHECK-NEXT:    %[[CBRT:.*]] = func.call @cbrt(%[[Z]]) : (f64) -> f64
// CHECK-NEXT:    func.return %[[SIN]], %[[ATAN2]], %[[CBRT]]
// LIBM-LABEL: func.func @library_functions
// LIBM-NEXT:     func.call @sinf
// LIBM-NEXT:     func.call @atan2f
// LIBM-NEXT:     func.call @cbrt
// LIBDEVICE-LABEL: func.func @library_functions
// LIBDEVICE-NEXT:     func.call @__nv_sinf
// LIBDEVICE-NEXT:     func.call @__nv_atan2f
// LIBDEVICE-NEXT:     func.call @__nv_cbrt
func.func @library_functions(%x: f32, %y: f32, %z: f64) -> (f32, f32, f64) {
  %s = math.sin %x : f32
  %a = math.atan2 %x, %y : f32
  %c = math.cbrt %z : f64
  func.return %s, %a, %c : f32, f32, f64
}

// rsqrt of a value never below the smallest normal float32 (a square or |z| plus a normal
// constant, a maximum with one) takes the estimate and its step on the value itself, +inf's 0
// selected: no denormal scaling, no +-0 select. A denormal constant, or a product that is not a
// square, keeps both.
// CHECK-LABEL: func.func @rsqrt_of_bounded_values
// CHECK-DAG:     %[[INF:.*]] = arith.constant 0x7f800000 : f32
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         %[[SQUARE:.*]] = arith.mulf %[[Y:.*]], %[[Y]] : f32
// CHECK-NEXT:    %[[SUM:.*]] = arith.addf %[[SQUARE]], %[[C:.*]] : f32
// CHECK-NEXT:    %[[ROOT:.*]] = math.sqrt %[[SUM]] : f32
// CHECK-NEXT:    %[[BARE:.*]] = arith.divf %{{.*}}, %[[ROOT]] fastmath<arcp,contract> {ew.rsqrt_estimate} : f32
// CHECK-NOT:     arith.bitcast
// CHECK:         %[[STEPPED:.*]] = math.fma %{{.*}}, %{{.*}}, %[[BARE]] : f32
// CHECK-NEXT:    %[[IS_INF:.*]] = arith.cmpf oeq, %[[SUM]], %[[INF]] : f32
// CHECK-NEXT:    %{{.*}} = arith.select %[[IS_INF]], %[[ZERO]], %[[STEPPED]] : f32
// CHECK-NEXT:    %[[DENORMAL_SUM:.*]] = arith.addf %[[SQUARE]], %{{.*}} : f32
// CHECK-NEXT:    arith.cmpf olt, %[[DENORMAL_SUM]], %{{.*}} : f32
// CHECK:         arith.ori
// CHECK:         %[[PRODUCT_SUM:.*]] = arith.addf %{{.*}}, %[[C]] : f32
// CHECK-NEXT:    arith.cmpf olt, %[[PRODUCT_SUM]], %{{.*}} : f32
// CHECK:         arith.ori
// CHECK:         %[[AT_LEAST_C:.*]] = arith.maximumf %{{.*}}, %[[C]] : f32
// CHECK-NEXT:    math.sqrt %[[AT_LEAST_C]] : f32
// CHECK-NOT:     arith.ori
// CHECK:         %[[MAX_IS_INF:.*]] = arith.cmpf oeq, %[[AT_LEAST_C]], %[[INF]] : f32
// CHECK-NEXT:    %{{.*}} = arith.select %[[MAX_IS_INF]], %[[ZERO]], %{{.*}} : f32
// CHECK-NEXT:    %[[MAGNITUDE:.*]] = math.absf %{{.*}} : f32
// CHECK-NEXT:    %[[C_PLUS_MAGNITUDE:.*]] = arith.addf %[[C]], %[[MAGNITUDE]] : f32
// CHECK-NEXT:    math.sqrt %[[C_PLUS_MAGNITUDE]] : f32
// CHECK-NOT:     arith.ori
// CHECK:         arith.cmpf oeq, %[[C_PLUS_MAGNITUDE]], %[[INF]] : f32
// CHECK-NEXT:    arith.select
// CHECK-NEXT:    func.return
func.func @rsqrt_of_bounded_values(%y: f32, %z: f32) -> (f32, f32, f32, f32, f32) {
  %c = arith.constant 1.0e-3 : f32
  %tiny = arith.constant 1.0e-39 : f32
  %square = arith.mulf %y, %y : f32
  %sum = arith.addf %square, %c : f32
  %bounded = math.rsqrt %sum : f32
  %denormal_sum = arith.addf %square, %tiny : f32
  %unbounded = math.rsqrt %denormal_sum : f32
  %product = arith.mulf %y, %z : f32
  %product_sum = arith.addf %product, %c : f32
  %not_square = math.rsqrt %product_sum : f32
  %m = arith.maximumf %z, %c : f32
  %at_least_c = math.rsqrt %m : f32
  %magnitude = math.absf %z : f32
  %c_plus_magnitude = arith.addf %c, %magnitude : f32
  %of_magnitude = math.rsqrt %c_plus_magnitude : f32
  func.return %bounded, %unbounded, %not_square, %at_least_c, %of_magnitude : f32, f32, f32, f32, f32
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


// library=libdevice (the GPU's): the calls are libdevice's, declared once; its pow takes a
// negative base itself, so f64 pow calls it on x (no |x| and sign selection as for libmvec),
// and f32 keeps its approximations. With math=libm, f32 calls libdevice's f32 functions.
// LIBDEVICE-LABEL: func.func @libdevice
// LIBDEVICE-SAME:    (%[[X:.*]]: f64, %[[Y:.*]]: f64, %[[F:.*]]: f32)
// LIBDEVICE:         %[[EXP:.*]] = func.call @__nv_exp(%[[X]]) : (f64) -> f64
// LIBDEVICE-NEXT:    %[[TANH:.*]] = func.call @__nv_tanh(%[[X]]) : (f64) -> f64
// LIBDEVICE-NEXT:    %[[ERF:.*]] = func.call @__nv_erf(%[[X]]) : (f64) -> f64
// LIBDEVICE-NEXT:    %[[LOG:.*]] = func.call @__nv_log(%[[X]]) : (f64) -> f64
// LIBDEVICE-NEXT:    %[[LOG1P:.*]] = func.call @__nv_log1p(%[[X]]) : (f64) -> f64
// LIBDEVICE-NEXT:    %[[POW:.*]] = func.call @__nv_pow(%[[X]], %[[Y]]) : (f64, f64) -> f64
// LIBDEVICE-NOT:     func.call
// LIBDEVICE:         func.return %[[EXP]], %[[TANH]], %[[ERF]], %[[LOG]], %[[LOG1P]], %[[POW]], %{{.*}} :
// LIBDEVICE-DAG:   func.func private @__nv_exp(f64) -> f64
// LIBDEVICE-DAG:   func.func private @__nv_pow(f64, f64) -> f64
// LIBDEVICE-NOT:   func.func private @pow(
// LIBDEVICE-LIBM-LABEL: func.func @libdevice
// LIBDEVICE-LIBM:         func.call @__nv_expf(%{{.*}}) : (f32) -> f32
// LIBDEVICE-LIBM-DAG:   func.func private @__nv_expf(f32) -> f32
// LIBDEVICE-LIBM-DAG:   func.func private @__nv_tanh(f64) -> f64
func.func @libdevice(%x: f64, %y: f64, %f: f32) -> (f64, f64, f64, f64, f64, f64, f32) {
  %e = math.exp %x : f64
  %t = math.tanh %x : f64
  %r = math.erf %x : f64
  %l = math.log %x : f64
  %p = math.log1p %x : f64
  %w = math.powf %x, %y : f64
  %g = math.exp %f : f32
  func.return %e, %t, %r, %l, %p, %w, %g : f64, f64, f64, f64, f64, f64, f32
}

