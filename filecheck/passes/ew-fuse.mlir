// RUN: xfuse-opt %s -p ew-fuse | filecheck %s
// RUN: xfuse-opt %s -p 'ew-fuse{mode=none}' | filecheck %s --check-prefix=NONE
// RUN: xfuse-opt %s -p 'ew-fuse{max-ops=36}' | filecheck %s --check-prefix=MAXOPS
// RUN: xfuse-opt %s -p 'ew-fuse{recompute=all}' | filecheck %s --check-prefix=ALL
// RUN: xfuse-opt %s -p 'ew-fuse{math=libm}' | filecheck %s --check-prefix=LIBM
// RUN: not xfuse-opt %s -p 'ew-fuse{max-ops=0}' 2>&1 | filecheck %s --check-prefix=MAXOPS-BAD
// RUN: xfuse-opt %inputs/ew-fuse-stats.mlir -p 'ew-fuse{stats}' 2>&1 >/dev/null | filecheck %s --check-prefix=STATS
// RUN: xfuse-opt %inputs/ew-fuse-stats.mlir -p 'ew-fuse{mode=none stats=true}' 2>&1 >/dev/null | filecheck %s --check-prefix=STATS-NONE

// A multi-use value is computed once; returned as well, it becomes a second kernel result.
// Constants are scalar immediates inside the region.
// CHECK-LABEL: func.func @multi_use
// CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>, %[[B:.*]]: tensor<?xf32>)
// CHECK-NEXT:    %[[H:.*]], %[[Y:.*]] = ew.kernel ins(%[[X]], %[[B]] : tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>, tensor<?xf32> {
// CHECK-NEXT:    ^{{.*}}(%[[XS:.*]]: f32, %[[BS:.*]]: f32):
// CHECK-NEXT:      %[[HS:.*]] = arith.addf %[[XS]], %[[BS]] : f32
// CHECK-NEXT:      %[[C:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[C]], %[[HS]] : f32
// CHECK-NEXT:      %[[T:.*]] = math.tanh %[[HS]] : f32
// CHECK-NEXT:      %[[YS:.*]] = arith.mulf %[[M]], %[[T]] : f32
// CHECK-NEXT:      ew.yield %[[HS]], %[[YS]] : f32, f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[Y]], %[[H]]
// CHECK-NOT:     ew.constant
// NONE-LABEL: func.func @multi_use
// NONE-COUNT-4: ew.kernel
// NONE-NOT:     ew.kernel
// NONE:         func.return
func.func @multi_use(%x: tensor<?xf32>, %b: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %half = ew.constant 0.5 : tensor<f32>
  %h = ew.add %x, %b : tensor<?xf32>
  %m = ew.mul %half, %h : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  %t = ew.tanh %h : tensor<?xf32>
  %y = ew.mul %m, %t : tensor<?xf32>
  func.return %y, %h : tensor<?xf32>, tensor<?xf32>
}

// A select on a comparison selects on its compare (the mask of 1 and 0 is never made); on any
// other value it tests that value against 0 (`une`: a NaN is true). Unfused, the mask is a kernel
// of its own, whose 1 and 0 the select's kernel tests.
// CHECK-LABEL: func.func @select_on_a_comparison
// CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>, %[[C:.*]]: tensor<?xf32>)
// CHECK-NEXT:    ew.kernel ins(%[[X]], %[[C]] : tensor<?xf32>, tensor<?xf32>)
// CHECK-NEXT:    ^{{.*}}(%[[XS:.*]]: f32, %[[CS:.*]]: f32):
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[POSITIVE:.*]] = arith.cmpf ogt, %[[XS]], %[[ZERO]] : f32
// CHECK-NEXT:      %[[SCALE:.*]] = arith.constant 1.000000e-02 : f32
// CHECK-NEXT:      %[[LEAK:.*]] = arith.mulf %[[SCALE]], %[[XS]] : f32
// CHECK-NEXT:      %[[LEAKY:.*]] = arith.select %[[POSITIVE]], %[[XS]], %[[LEAK]] : f32
// CHECK-NEXT:      %[[ZERO2:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[NONZERO:.*]] = arith.cmpf une, %[[CS]], %[[ZERO2]] : f32
// CHECK-NEXT:      %[[PICKED:.*]] = arith.select %[[NONZERO]], %[[XS]], %[[ZERO]] : f32
// CHECK-NEXT:      ew.yield %[[LEAKY]], %[[PICKED]] : f32, f32
// NONE-LABEL: func.func @select_on_a_comparison
// NONE:         ew.kernel ins(%[[X:.*]] : tensor<?xf32>)
// NONE:           %[[HOLDS:.*]] = arith.cmpf ogt
// NONE-NEXT:      %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// NONE-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// NONE-NEXT:      %[[MASK:.*]] = arith.select %[[HOLDS]], %[[ONE]], %[[ZERO]] : f32
// NONE-NEXT:      ew.yield %[[MASK]] : f32
// NONE:         ew.kernel ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>)
// NONE-NEXT:    ^{{.*}}(%[[MS:.*]]: f32, %[[XS:.*]]: f32, %[[LS:.*]]: f32):
// NONE-NEXT:      %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// NONE-NEXT:      %[[TRUE:.*]] = arith.cmpf une, %[[MS]], %[[Z]] : f32
// NONE-NEXT:      arith.select %[[TRUE]], %[[XS]], %[[LS]] : f32
func.func @select_on_a_comparison(%x: tensor<?xf32>, %c: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %zero = ew.constant 0.0 : tensor<f32>
  %scale = ew.constant 0.01 : tensor<f32>
  %positive = ew.gt %x, %zero : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %leak = ew.mul %scale, %x : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  %leaky = ew.select %positive, %x, %leak : tensor<?xf32>
  %picked = ew.select %c, %x, %zero : tensor<?xf32>, tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  func.return %leaky, %picked : tensor<?xf32>, tensor<?xf32>
}

// Independent chains stay separate kernels (their `?` sizes may differ at run time).
// CHECK-LABEL: func.func @independent
// CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>, %[[Y:.*]]: tensor<?xf32>)
// CHECK:         %[[A:.*]] = ew.kernel ins(%[[X]] : tensor<?xf32>)
// CHECK:           math.exp
// CHECK-NEXT:      arith.negf
// CHECK:         %[[B:.*]] = ew.kernel ins(%[[Y]] : tensor<?xf32>)
// CHECK:           math.log
// CHECK-NEXT:      math.absf
// CHECK:         func.return %[[A]], %[[B]]
// NONE-LABEL: func.func @independent
// NONE-COUNT-4: ew.kernel
// NONE-NOT:     ew.kernel
// NONE:         func.return
func.func @independent(%x: tensor<?xf32>, %y: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %a = ew.exp %x : tensor<?xf32>
  %b = ew.neg %a : tensor<?xf32>
  %c = ew.log %y : tensor<?xf32>
  %d = ew.abs %c : tensor<?xf32>
  func.return %b, %d : tensor<?xf32>, tensor<?xf32>
}

// A returned argument gets a copy kernel (one for both results), a returned constant a
// constant kernel.
// CHECK-LABEL: func.func @trivial
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[COPY:.*]] = ew.kernel ins(%[[X]] : tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    ^{{.*}}(%[[XS:.*]]: f32):
// CHECK-NEXT:      ew.yield %[[XS]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[CONST:.*]] = ew.kernel ins() -> tensor<f32> {
// CHECK-NEXT:      %[[C:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:      ew.yield %[[C]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[COPY]], %[[CONST]], %[[COPY]]
func.func @trivial(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>, tensor<4xf32>) {
  %c = ew.constant 2.0 : tensor<f32>
  func.return %x, %c, %x : tensor<4xf32>, tensor<f32>, tensor<4xf32>
}

// A returned argument that a kernel reads over its own shape is one more result of that kernel
// (its block argument yielded as it is), not a copy kernel reading it again; the [d] bias %b,
// read by a [t, d] kernel, keeps a copy kernel. Unfused, %x's copy is a kernel of its own.
// CHECK-LABEL: func.func @returned_input_read
// CHECK-SAME:    (%[[X:.*]]: tensor<?x?xf16>, %[[B:.*]]: tensor<?xf16>)
// CHECK-NEXT:    %[[Y:.*]], %[[XC:.*]] = ew.kernel ins(%[[X]], %[[B]] : tensor<?x?xf16>, tensor<?xf16>) -> tensor<?x?xf16>, tensor<?x?xf16> {
// CHECK-NEXT:    ^{{.*}}(%[[XS:.*]]: f16, %[[BS:.*]]: f16):
// CHECK:           ew.yield %{{.*}}, %[[XS]] : f16, f16
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[BC:.*]] = ew.kernel ins(%[[B]] : tensor<?xf16>) -> tensor<?xf16> {
// CHECK:         func.return %[[XC]], %[[Y]], %[[BC]], %[[XC]]
// NONE-LABEL: func.func @returned_input_read
// NONE-COUNT-4: ew.kernel
// NONE-NOT:     ew.kernel
// NONE:         func.return
func.func @returned_input_read(%x: tensor<?x?xf16>, %b: tensor<?xf16>) -> (tensor<?x?xf16>, tensor<?x?xf16>, tensor<?xf16>, tensor<?x?xf16>) {
  %e = ew.exp %x : tensor<?x?xf16>
  %y = ew.add %e, %b : tensor<?x?xf16>, tensor<?xf16> -> tensor<?x?xf16>
  func.return %x, %y, %b, %x : tensor<?x?xf16>, tensor<?x?xf16>, tensor<?xf16>, tensor<?x?xf16>
}

// The [d] bias (and the op on it alone) stays inside the [t, d] kernel, read per row, never
// materialized; bf16 computes in f32 between extf and truncf. sigmoid is e / (1 + e) or
// 1 / (1 + e) with e = exp(-|h|), its numerator max(e, copysign(1, h)). Its float arithmetic is
// marked `ew.expansion` (ew-expand-math{fastmath} gives it none of the user's flags); the
// program's own multiply and add, one op each, are not.
// CHECK-LABEL: func.func @bias_bf16
// CHECK-SAME:    (%[[X:.*]]: tensor<?x?xbf16>, %[[B:.*]]: tensor<?xbf16>)
// CHECK-NEXT:    %[[G:.*]] = ew.kernel ins(%[[B]], %[[X]] : tensor<?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16> {
// CHECK-NEXT:    ^{{.*}}(%[[BS:.*]]: bf16, %[[XS:.*]]: bf16):
// CHECK-NEXT:      %[[BW:.*]] = arith.extf %[[BS]] : bf16 to f32
// CHECK-NEXT:      %[[XW:.*]] = arith.extf %[[XS]] : bf16 to f32
// CHECK-NEXT:      %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:      %[[S:.*]] = arith.mulf %[[BW]], %[[TWO]] : f32
// CHECK-NEXT:      %[[H:.*]] = arith.addf %[[XW]], %[[S]] : f32
// CHECK-NEXT:      %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %[[ABS:.*]] = math.absf %[[H]] : f32
// CHECK-NEXT:      %[[MINUS_ABS:.*]] = arith.negf %[[ABS]] {ew.expansion} : f32
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[MINUS_ABS]] : f32
// CHECK-NEXT:      %[[SIGN:.*]] = math.copysign %[[ONE]], %[[H]] : f32
// CHECK-NEXT:      %[[LARGER:.*]] = arith.cmpf ogt, %[[E]], %[[SIGN]] : f32
// CHECK-NEXT:      %[[NUMERATOR:.*]] = arith.select %[[LARGER]], %[[E]], %[[SIGN]] : f32
// CHECK-NEXT:      %[[DENOMINATOR:.*]] = arith.addf %[[ONE]], %[[E]] {ew.expansion} : f32
// CHECK-NEXT:      %[[SIG:.*]] = arith.divf %[[NUMERATOR]], %[[DENOMINATOR]] {ew.expansion} : f32
// CHECK-NEXT:      %[[N:.*]] = arith.truncf %[[SIG]] : f32 to bf16
// CHECK-NEXT:      ew.yield %[[N]] : bf16
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[G]]
// NONE-LABEL: func.func @bias_bf16
// NONE:         ew.kernel ins(%{{.*}} : tensor<?xbf16>) -> tensor<?xbf16>
// NONE:         ew.kernel ins(%{{.*}}, %{{.*}} : tensor<?x?xbf16>, tensor<?xbf16>) -> tensor<?x?xbf16>
// NONE:         ew.kernel ins(%{{.*}} : tensor<?x?xbf16>) -> tensor<?x?xbf16>
// NONE-NOT:     ew.kernel
func.func @bias_bf16(%x: tensor<?x?xbf16>, %b: tensor<?xbf16>) -> tensor<?x?xbf16> {
  %c = ew.constant 2.0 : tensor<bf16>
  %s = ew.mul %b, %c : tensor<?xbf16>, tensor<bf16> -> tensor<?xbf16>
  %h = ew.add %x, %s : tensor<?x?xbf16>, tensor<?xbf16> -> tensor<?x?xbf16>
  %g = ew.sigmoid %h : tensor<?x?xbf16>
  func.return %g : tensor<?x?xbf16>
}

// A [d] row's sin, a libm call, is not called again for each row of the [t, d] kernel: a
// kernel of its own over [d]. Arithmetic is (bias_bf16's `b * 2`, an `exp`).
// CHECK-LABEL: func.func @row_sin
// CHECK-SAME:    (%[[X:.*]]: tensor<?x?xf32>, %[[B:.*]]: tensor<?xf32>)
// CHECK-NEXT:    %[[E:.*]] = ew.kernel ins(%[[B]] : tensor<?xf32>) -> tensor<?xf32>
// CHECK:         %[[H:.*]] = ew.kernel ins(%[[X]], %[[E]] : tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
// CHECK:         func.return %[[H]]
// NONE-LABEL: func.func @row_sin
// NONE-COUNT-2: ew.kernel
// ALL-LABEL: func.func @row_sin
// ALL-NEXT:    ew.kernel ins(%{{.*}}, %{{.*}} : tensor<?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
// ALL-NOT:     ew.kernel
// ALL:         func.return
func.func @row_sin(%x: tensor<?x?xf32>, %b: tensor<?xf32>) -> tensor<?x?xf32> {
  %e = ew.sin %b : tensor<?xf32>
  %h = ew.add %x, %e : tensor<?x?xf32>, tensor<?xf32> -> tensor<?x?xf32>
  func.return %h : tensor<?x?xf32>
}

// A [d] row's exp is arithmetic under math=approx (it stays in the [t, d] kernel) and a libm
// call under math=libm (a kernel of its own).
// CHECK-LABEL: func.func @row_exp
// CHECK-NEXT:    ew.kernel ins(%{{.*}}, %{{.*}} : tensor<?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
// CHECK-NOT:     ew.kernel
// CHECK:         func.return
// LIBM-LABEL: func.func @row_exp
// LIBM-NEXT:    ew.kernel ins(%{{.*}} : tensor<?xf32>) -> tensor<?xf32>
// LIBM:         ew.kernel ins(%{{.*}}, %{{.*}} : tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
func.func @row_exp(%x: tensor<?x?xf32>, %b: tensor<?xf32>) -> tensor<?x?xf32> {
  %e = ew.exp %b : tensor<?xf32>
  %h = ew.add %x, %e : tensor<?x?xf32>, tensor<?xf32> -> tensor<?x?xf32>
  func.return %h : tensor<?x?xf32>
}

// A [d] value also returned cannot live inside the [t, d] kernel: it is a kernel of its own.
// CHECK-LABEL: func.func @broadcast_returned
// CHECK:         %[[S:.*]] = ew.kernel ins(%{{.*}} : tensor<?xf32>) -> tensor<?xf32>
// CHECK:         %[[H:.*]] = ew.kernel ins(%{{.*}}, %[[S]] : tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
// CHECK:         func.return %[[H]], %[[S]]
// NONE-LABEL: func.func @broadcast_returned
func.func @broadcast_returned(%x: tensor<?x?xf32>, %b: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  %s = ew.exp %b : tensor<?xf32>
  %h = ew.add %x, %s : tensor<?x?xf32>, tensor<?xf32> -> tensor<?x?xf32>
  func.return %h, %s : tensor<?x?xf32>, tensor<?xf32>
}

// Two readers of the same value fuse (sibling fusion): x is read once for both results.
// CHECK-LABEL: func.func @siblings
// CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>)
// CHECK-NEXT:    %[[E:.*]], %[[N:.*]] = ew.kernel ins(%[[X]] : tensor<?xf32>) -> tensor<?xf32>, tensor<?xf32>
// CHECK:         func.return %[[E]], %[[N]]
// NONE-LABEL: func.func @siblings
// NONE-COUNT-2: ew.kernel ins(%{{.*}} : tensor<?xf32>)
func.func @siblings(%x: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %e = ew.exp %x : tensor<?xf32>
  %n = ew.neg %x : tensor<?xf32>
  func.return %e, %n : tensor<?xf32>, tensor<?xf32>
}

// softplus is max(x, 0) + log1p(exp(-|x|)) (scalar.py), max(x, 0) as x > 0 ? x : 0; its
// arithmetic is marked.
// CHECK-LABEL: func.func @softplus
// CHECK:         ew.kernel
// CHECK-NEXT:      ^{{.*}}(%[[X:.*]]: f32):
// CHECK:           %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[IS_POSITIVE:.*]] = arith.cmpf ogt, %[[X]], %[[ZERO]]
// CHECK-NEXT:      %[[POSITIVE:.*]] = arith.select %[[IS_POSITIVE]], %[[X]], %[[ZERO]]
// CHECK:           %[[ABS:.*]] = math.absf
// CHECK-NEXT:      %[[MINUS_ABS:.*]] = arith.negf %[[ABS]] {ew.expansion} : f32
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[MINUS_ABS]]
// CHECK-NEXT:      %[[LOG1P:.*]] = math.log1p %[[E]]
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[POSITIVE]], %[[LOG1P]] {ew.expansion} : f32
// CHECK-NEXT:      ew.yield %[[S]]
// NONE-LABEL: func.func @softplus
// NONE-COUNT-1: ew.kernel
func.func @softplus(%x: tensor<?xf32>) -> tensor<?xf32> {
  %s = ew.softplus %x : tensor<?xf32>
  func.return %s : tensor<?xf32>
}

// log1p of an exp in the same kernel is math.log1p (one function to ew-expand-math); of
// anything else, Goldberg's log(u) x / (u - 1) with u = 1 + x, and log(u) from x = 2^24 on,
// its arithmetic marked.
// CHECK-LABEL: func.func @log1p_of_exp_and_of_x
// CHECK:         ew.kernel
// CHECK-NEXT:      ^{{.*}}(%[[X:.*]]: f32):
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[X]]
// CHECK-NEXT:      %[[OF_EXP:.*]] = math.log1p %[[E]]
// CHECK-NEXT:      ew.yield %[[OF_EXP]]
// CHECK:         ew.kernel
// CHECK-NEXT:      ^{{.*}}(%[[Y:.*]]: f32):
// CHECK:           %[[U:.*]] = arith.addf %{{.*}}, %[[Y]] {ew.expansion} : f32
// CHECK-NEXT:      %[[LOG_U:.*]] = math.log %[[U]]
// CHECK-NOT:       math.log1p
// CHECK:           arith.divf %{{.*}}, %{{.*}} {ew.expansion} : f32
// CHECK:           arith.select %{{.*}}, %[[LOG_U]], %{{.*}}
func.func @log1p_of_exp_and_of_x(%x: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %e = ew.exp %x : tensor<?xf32>
  %a = ew.log1p %e : tensor<?xf32>
  %b = ew.log1p %x : tensor<?xf32>
  func.return %a, %b : tensor<?xf32>, tensor<?xf32>
}

// Conversions fuse like any elementwise op. Each value is held in its dtype's compute type:
// the bf16 input widens to f32 (its convert to f32 is then free), f64 -> f32 is one truncf,
// f32 -> f16 rounds to f16 and is held in f32 again for the exp, rounded once more at the yield.
// CHECK-LABEL: func.func @convert
// CHECK-SAME:    (%[[X:.*]]: tensor<?x4xbf16>, %[[Y:.*]]: tensor<?x4xf64>)
// CHECK-NEXT:    %[[K:.*]] = ew.kernel ins(%[[X]], %[[Y]] : tensor<?x4xbf16>, tensor<?x4xf64>) -> tensor<?x4xf16> {
// CHECK-NEXT:    ^{{.*}}(%[[XS:.*]]: bf16, %[[YS:.*]]: f64):
// CHECK-NEXT:      %[[XW:.*]] = arith.extf %[[XS]] : bf16 to f32
// CHECK-NEXT:      %[[YN:.*]] = arith.truncf %[[YS]] : f64 to f32
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[XW]], %[[YN]] : f32
// CHECK-NEXT:      %[[H:.*]] = arith.truncf %[[S]] : f32 to f16
// CHECK-NEXT:      %[[HW:.*]] = arith.extf %[[H]] : f16 to f32
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[HW]] : f32
// CHECK-NEXT:      %[[EN:.*]] = arith.truncf %[[E]] : f32 to f16
// CHECK-NEXT:      ew.yield %[[EN]] : f16
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[K]]
// NONE-LABEL: func.func @convert
// NONE-COUNT-5: ew.kernel
// NONE-NOT:     ew.kernel
func.func @convert(%x: tensor<?x4xbf16>, %y: tensor<?x4xf64>) -> tensor<?x4xf16> {
  %xw = ew.convert %x : tensor<?x4xbf16> to tensor<?x4xf32>
  %yn = ew.convert %y : tensor<?x4xf64> to tensor<?x4xf32>
  %s = ew.add %xw, %yn : tensor<?x4xf32>
  %h = ew.convert %s : tensor<?x4xf32> to tensor<?x4xf16>
  %e = ew.exp %h : tensor<?x4xf16>
  func.return %e : tensor<?x4xf16>
}

// max-ops caps the scalar ops of one kernel, each op counted as what ew-expand-math makes of
// it (exp 35, tanh 25, neg and abs 1): with 36, a chain of five becomes kernels of exp and neg
// (36), tanh and abs (26), and exp (35), each passing its last value to the next (the default,
// 128, fuses the five, 97, into one).
// CHECK-LABEL: func.func @chain
// CHECK-COUNT-1: ew.kernel
// CHECK-NOT:     ew.kernel
// NONE-LABEL: func.func @chain
// NONE-COUNT-5: ew.kernel
// NONE-NOT:     ew.kernel
// MAXOPS-LABEL: func.func @chain
// MAXOPS-SAME:    (%[[X:.*]]: tensor<?xf32>)
// MAXOPS-NEXT:    %[[A:.*]] = ew.kernel ins(%[[X]] : tensor<?xf32>) -> tensor<?xf32> {
// MAXOPS:           math.exp
// MAXOPS-NEXT:      arith.negf
// MAXOPS:         %[[B:.*]] = ew.kernel ins(%[[A]] : tensor<?xf32>) -> tensor<?xf32> {
// MAXOPS:           math.tanh
// MAXOPS-NEXT:      math.absf
// MAXOPS:         %[[C:.*]] = ew.kernel ins(%[[B]] : tensor<?xf32>) -> tensor<?xf32> {
// MAXOPS:           math.exp
// MAXOPS:         func.return %[[C]]
// MAXOPS-BAD: xfuse-opt: error: ew-fuse: bad value '0' for option 'max-ops': expected an integer from 1 to 2^63 - 1
func.func @chain(%x: tensor<?xf32>) -> tensor<?xf32> {
  %a = ew.exp %x : tensor<?xf32>
  %b = ew.neg %a : tensor<?xf32>
  %c = ew.tanh %b : tensor<?xf32>
  %d = ew.abs %c : tensor<?xf32>
  %e = ew.exp %d : tensor<?xf32>
  func.return %e : tensor<?xf32>
}

// A row's libm call joins the [t, d] kernel where its group holds an f16 value (its own kernel
// would store that rounded), also once merged with f32 ops after it (the merged group is still
// "narrow"): one kernel.
// CHECK-LABEL: func.func @half_row
// CHECK:         ew.kernel
// CHECK:           math.sin
// CHECK-NOT:     ew.kernel
// CHECK:         func.return
// NONE-LABEL:  func.func @half_row
// NONE-COUNT-4:  ew.kernel
// NONE-NOT:      ew.kernel
func.func @half_row(%x: tensor<?x?xf32>, %b: tensor<?xf16>) -> tensor<?x?xf32> {
  %s = ew.sin %b : tensor<?xf16>
  %0 = ew.convert %s : tensor<?xf16> to tensor<?xf32>
  %1 = ew.constant 2.0 : tensor<f32>
  %r = ew.mul %0, %1 : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %out = ew.mul %x, %r : tensor<?x?xf32>, tensor<?xf32> -> tensor<?x?xf32>
  func.return %out : tensor<?x?xf32>
}

// The statistics of %inputs/ew-fuse-stats.mlir, counted by hand. @chain: 3 elementwise ops (the
// constant is not one) fused into 1 kernel, the 0.5 an immediate inside it. @results: the
// returned argument gets a copy kernel and the returned constant a constant kernel (2 copy
// kernels, nothing fused). Unfused (mode=none): one kernel per op, the 0.5 inlined into the mul's.
// STATS:      'ew-fuse'
// STATS-NEXT:   (elementwise-ops) 3 :
// STATS-NEXT:   (kernels) 3 :
// STATS-NEXT:   (fused-ops) 3 :
// STATS-NEXT:   (copy-kernels) 2 :
// STATS-NEXT:   (constants-inlined) 1 :
// STATS-NONE:      'ew-fuse'
// STATS-NONE-NEXT:   (elementwise-ops) 3 :
// STATS-NONE-NEXT:   (kernels) 5 :
// STATS-NONE-NEXT:   (fused-ops) 0 :
// STATS-NONE-NEXT:   (copy-kernels) 2 :
// STATS-NONE-NEXT:   (constants-inlined) 1 :
