// RUN: xfuse-opt %s -p ew-to-linalg | filecheck %s
// RUN: xfuse-opt %inputs/gelu.ew -p 'ew-optimize,ew-fuse,ew-to-linalg' | filecheck %s --check-prefix=PIPELINE

// The whole lecture program through the real pipeline: one generic, nothing of ew left.
// PIPELINE-LABEL: func.func @main
// PIPELINE-NOT:   ew.
// PIPELINE:       linalg.generic
// PIPELINE:       math.tanh
// PIPELINE:       linalg.yield
// PIPELINE-NOT:   linalg.generic
// PIPELINE:       func.return

// A fused GELU kernel: identity maps, the init sized by tensor.dim of an input, the body moved
// over with one more block argument (the init's element, unused) and linalg.yield.
// CHECK-LABEL: func.func @gelu
// CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>, %[[B:.*]]: tensor<?xf32>, %[[R:.*]]: tensor<?xf32>)
// CHECK:         %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[N:.*]] = tensor.dim %[[X]], %[[C0]] : tensor<?xf32>
// CHECK-NEXT:    %[[INIT:.*]] = tensor.empty(%[[N]]) : tensor<?xf32>
// CHECK-NEXT:    %[[OUT:.*]] = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%[[X]], %[[B]], %[[R]] : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) outs(%[[INIT]] : tensor<?xf32>) {
// CHECK-NEXT:    ^{{.*}}(%[[XS:.*]]: f32, %[[BS:.*]]: f32, %[[RS:.*]]: f32, %{{.*}}: f32):
// CHECK:           %[[H:.*]] = arith.addf %[[XS]], %[[BS]] : f32
// CHECK:           math.tanh
// CHECK:           %[[O:.*]] = arith.addf %{{.*}}, %[[RS]] : f32
// CHECK-NEXT:      linalg.yield %[[O]] : f32
// CHECK-NEXT:    } -> tensor<?xf32>
// CHECK-NEXT:    func.return %[[OUT]] : tensor<?xf32>
// CHECK-NOT:     ew.
func.func @gelu(%x: tensor<?xf32>, %b: tensor<?xf32>, %r: tensor<?xf32>) -> tensor<?xf32> {
  %out = ew.kernel ins(%x, %b, %r : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32> {
  ^bb0(%xs: f32, %bs: f32, %rs: f32):
    %half = arith.constant 0.5 : f32
    %one = arith.constant 1.0 : f32
    %k = arith.constant 0.7978845608 : f32
    %c = arith.constant 0.044715 : f32
    %h = arith.addf %xs, %bs : f32
    %h2 = arith.mulf %h, %h : f32
    %h3 = arith.mulf %h2, %h : f32
    %ch3 = arith.mulf %c, %h3 : f32
    %inner = arith.addf %h, %ch3 : f32
    %scaled = arith.mulf %k, %inner : f32
    %t = math.tanh %scaled : f32
    %onet = arith.addf %one, %t : f32
    %hh = arith.mulf %half, %h : f32
    %y = arith.mulf %hh, %onet : f32
    %o = arith.addf %y, %rs : f32
    ew.yield %o : f32
  }
  func.return %out : tensor<?xf32>
}

// Broadcasting: a row (lower rank), a column (size 1 along a wider loop) and a scalar. The
// dynamic size comes from the input that spans dimension 0. f16 data computed in f32.
// CHECK-LABEL: func.func @broadcast
// CHECK-SAME:    (%[[M:.*]]: tensor<?x4xf16>, %[[ROW:.*]]: tensor<4xf16>, %[[COL:.*]]: tensor<?x1xf16>, %[[S:.*]]: tensor<f16>)
// CHECK:         %[[N:.*]] = tensor.dim %[[M]], %{{.*}} : tensor<?x4xf16>
// CHECK-NEXT:    %[[INIT:.*]] = tensor.empty(%[[N]]) : tensor<?x4xf16>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%[[M]], %[[ROW]], %[[COL]], %[[S]] : tensor<?x4xf16>, tensor<4xf16>, tensor<?x1xf16>, tensor<f16>) outs(%[[INIT]] : tensor<?x4xf16>)
// CHECK:           arith.extf
// CHECK:           math.erf
// CHECK:           %[[T:.*]] = arith.truncf %{{.*}} : f32 to f16
// CHECK-NEXT:      linalg.yield %[[T]] : f16
// CHECK-NEXT:    } -> tensor<?x4xf16>
func.func @broadcast(%m: tensor<?x4xf16>, %row: tensor<4xf16>, %col: tensor<?x1xf16>, %s: tensor<f16>) -> tensor<?x4xf16> {
  %y = ew.kernel ins(%m, %row, %col, %s : tensor<?x4xf16>, tensor<4xf16>, tensor<?x1xf16>, tensor<f16>) -> tensor<?x4xf16> {
  ^bb0(%a: f16, %b: f16, %c: f16, %d: f16):
    %ae = arith.extf %a : f16 to f32
    %be = arith.extf %b : f16 to f32
    %ce = arith.extf %c : f16 to f32
    %de = arith.extf %d : f16 to f32
    %p = arith.mulf %ae, %be : f32
    %q = arith.maximumf %p, %ce : f32
    %w = arith.subf %q, %de : f32
    %e = math.erf %w : f32
    %t = arith.truncf %e : f32 to f16
    ew.yield %t : f16
  }
  func.return %y : tensor<?x4xf16>
}

// Two results on a static shape: two empty inits, no tensor.dim; a leftover ew.constant becomes
// an arith.constant splat.
// CHECK-LABEL: func.func @two_results
// CHECK-NOT:     tensor.dim
// CHECK-DAG:     %[[I0:.*]] = tensor.empty() : tensor<2x3xf64>
// CHECK-DAG:     %[[I1:.*]] = tensor.empty() : tensor<2x3xf64>
// CHECK:         %[[E:.*]], %[[L:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%{{.*}} : tensor<2x3xf64>) outs(%[[I0]], %[[I1]] : tensor<2x3xf64>, tensor<2x3xf64>)
// CHECK-NEXT:    ^{{.*}}(%{{.*}}: f64, %{{.*}}: f64, %{{.*}}: f64):
// CHECK:           linalg.yield %{{.*}}, %{{.*}} : f64, f64
// CHECK-NEXT:    } -> (tensor<2x3xf64>, tensor<2x3xf64>)
// CHECK-NEXT:    %[[K:.*]] = arith.constant dense<-2.500000e+00> : tensor<3xf64>
// CHECK-NEXT:    func.return %[[E]], %[[L]], %[[K]]
func.func @two_results(%x: tensor<2x3xf64>) -> (tensor<2x3xf64>, tensor<2x3xf64>, tensor<3xf64>) {
  %e, %l = ew.kernel ins(%x : tensor<2x3xf64>) -> tensor<2x3xf64>, tensor<2x3xf64> {
  ^bb0(%xs: f64):
    %ex = math.exp %xs : f64
    %lg = math.log %xs : f64
    ew.yield %ex, %lg : f64, f64
  }
  %k = ew.constant -2.5 : tensor<3xf64>
  func.return %e, %l, %k : tensor<2x3xf64>, tensor<2x3xf64>, tensor<3xf64>
}

// Buffer form: the kernel's outs become the generic's outs; no results, no inits.
// CHECK-LABEL: func.func @buffers
// CHECK-SAME:    (%[[X:.*]]: memref<?xf32>, %[[Y:.*]]: memref<?xf32>)
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%[[X]] : memref<?xf32>) outs(%[[Y]] : memref<?xf32>) {
// CHECK-NEXT:    ^{{.*}}(%[[XS:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[A:.*]] = math.absf %[[XS]] : f32
// CHECK-NEXT:      linalg.yield %[[A]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return
func.func @buffers(%x: memref<?xf32>, %y: memref<?xf32>) {
  ew.kernel ins(%x : memref<?xf32>) outs(%y : memref<?xf32>) {
  ^bb0(%xs: f32):
    %a = math.absf %xs : f32
    ew.yield %a : f32
  }
  func.return
}

// A chain of kernels: the second init reuses the first one's size instead of reading it with
// tensor.dim from the first result (a second use would block upstream elementwise fusion).
// CHECK-LABEL: func.func @chain
// CHECK:         %[[N:.*]] = tensor.dim
// CHECK-NEXT:    %[[I0:.*]] = tensor.empty(%[[N]]) : tensor<?xf32>
// CHECK-NEXT:    %[[E:.*]] = linalg.generic {{.*}} outs(%[[I0]] : tensor<?xf32>)
// CHECK-NOT:     tensor.dim
// CHECK:         %[[I1:.*]] = tensor.empty(%[[N]]) : tensor<?xf32>
// CHECK-NEXT:    linalg.generic {{.*}} ins(%[[E]] : tensor<?xf32>) outs(%[[I1]] : tensor<?xf32>)
func.func @chain(%x: tensor<?xf32>) -> tensor<?xf32> {
  %e = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf32> {
  ^bb0(%xs: f32):
    %v = math.exp %xs : f32
    ew.yield %v : f32
  }
  %t = ew.kernel ins(%e : tensor<?xf32>) -> tensor<?xf32> {
  ^bb0(%es: f32):
    %v = math.tanh %es : f32
    ew.yield %v : f32
  }
  func.return %t : tensor<?xf32>
}

// A leftover ew.constant's splat is the literal as a kernel holds it, rounded to the element
// type: past f32's or f16's range it is inf (packing the f64 literal raised OverflowError).
// CHECK-LABEL: func.func @constants_past_the_range
// CHECK-NEXT:    arith.constant dense<0x7f800000> : tensor<f32>
// CHECK-NEXT:    arith.constant dense<0xfc00> : tensor<2xf16>
// CHECK-NEXT:    arith.constant dense<1.000980e-01> : tensor<bf16>
func.func @constants_past_the_range() -> (tensor<f32>, tensor<2xf16>, tensor<bf16>) {
  %a = ew.constant 1.0e300 : tensor<f32>
  %b = ew.constant -65520.0 : tensor<2xf16>
  %c = ew.constant 0.1 : tensor<bf16>
  func.return %a, %b, %c : tensor<f32>, tensor<2xf16>, tensor<bf16>
}

// Fusion's `ew.expansion` marks (on the arithmetic of its forms, sigmoid's here) are not
// upstream's: they are dropped.
// CHECK-LABEL: func.func @expansion_marks
// CHECK:         arith.negf %{{[^ ]+}} : f32
// CHECK:         arith.addf %{{[^ ]+}}, %{{[^ ]+}} : f32
// CHECK-NEXT:    arith.divf %{{[^ ]+}}, %{{[^ ]+}} : f32
// CHECK-NEXT:    linalg.yield
func.func @expansion_marks(%x: tensor<?xf32>) -> tensor<?xf32> {
  %out = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf32> {
  ^bb0(%xs: f32):
    %one = arith.constant 1.0 : f32
    %abs = math.absf %xs : f32
    %minus_abs = arith.negf %abs {ew.expansion} : f32
    %e = math.exp %minus_abs : f32
    %denominator = arith.addf %one, %e {ew.expansion} : f32
    %sigmoid = arith.divf %one, %denominator {ew.expansion} : f32
    ew.yield %sigmoid : f32
  }
  func.return %out : tensor<?xf32>
}
