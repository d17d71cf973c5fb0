// Every `ew` op prints in its custom form, and that output parses back to the same text,
// directly and through the generic form.
// RUN: xfuse-opt %s | filecheck %s
// RUN: xfuse-opt %s | xfuse-opt | filecheck %s
// RUN: xfuse-opt %s --print-op-generic | xfuse-opt | filecheck %s

// Literals keep their f64 bits whatever the element type; MLIR's float syntax needs a '.'. `nan`
// is the canonical quiet NaN; any other NaN prints as its f64 bits in MLIR's hex form.
// CHECK-LABEL: func.func @constants
// CHECK-NEXT:    ew.constant -2.5 : tensor<f32>
// CHECK-NEXT:    ew.constant inf : tensor<f32>
// CHECK-NEXT:    ew.constant -inf : tensor<f16>
// CHECK-NEXT:    ew.constant nan : tensor<bf16>
// CHECK-NEXT:    ew.constant 1.0e-30 : tensor<f32>
// CHECK-NEXT:    ew.constant 3.4e+38 : tensor<f32>
// CHECK-NEXT:    ew.constant -0.0 : tensor<f64>
// CHECK-NEXT:    ew.constant 5.0e-324 : tensor<f64>
// CHECK-NEXT:    ew.constant 0.7978845608 : tensor<2x3xf32>
// CHECK-NEXT:    ew.constant 0xFFF8000000000000 : tensor<f32>
// CHECK-NEXT:    ew.constant 0x7FF0000000000001 : tensor<f16>
// CHECK-NEXT:    ew.constant nan : tensor<f32>
func.func @constants() -> (tensor<f32>, tensor<f32>, tensor<f16>, tensor<bf16>, tensor<f32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<2x3xf32>, tensor<f32>, tensor<f16>, tensor<f32>) {
  %a = ew.constant -2.5 : tensor<f32>
  %b = ew.constant inf : tensor<f32>
  %c = ew.constant -inf : tensor<f16>
  %d = ew.constant nan : tensor<bf16>
  %e = ew.constant 1.0e-30 : tensor<f32>
  %f = ew.constant 3.4e+38 : tensor<f32>
  %g = ew.constant -0.0 : tensor<f64>
  %h = ew.constant 4.9406564584124654e-324 : tensor<f64>
  %i = ew.constant 0.7978845608 : tensor<2x3xf32>
  %j = ew.constant 0xfff8000000000000 : tensor<f32>
  %k = ew.constant 0x7FF0000000000001 : tensor<f16>
  %l = ew.constant 0x7FF8000000000000 : tensor<f32>
  func.return %a, %b, %c, %d, %e, %f, %g, %h, %i, %j, %k, %l : tensor<f32>, tensor<f32>, tensor<f16>, tensor<bf16>, tensor<f32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<2x3xf32>, tensor<f32>, tensor<f16>, tensor<f32>
}

// Binary ops: one type when all three agree.
// CHECK-LABEL: func.func @binary
// CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>, %[[Y:.*]]: tensor<?xf32>)
// CHECK-NEXT:    %[[ADD:.*]] = ew.add %[[X]], %[[Y]] : tensor<?xf32>
// CHECK-NEXT:    %[[SUB:.*]] = ew.sub %[[ADD]], %[[Y]] : tensor<?xf32>
// CHECK-NEXT:    %[[MUL:.*]] = ew.mul %[[SUB]], %[[Y]] : tensor<?xf32>
// CHECK-NEXT:    %[[DIV:.*]] = ew.div %[[MUL]], %[[Y]] : tensor<?xf32>
// CHECK-NEXT:    %[[MAX:.*]] = ew.max %[[DIV]], %[[Y]] : tensor<?xf32>
// CHECK-NEXT:    %[[MIN:.*]] = ew.min %[[MAX]], %[[Y]] : tensor<?xf32>
// CHECK-NEXT:    %[[POW:.*]] = ew.pow %[[MIN]], %[[Y]] : tensor<?xf32>
// CHECK-NEXT:    %[[SIGN:.*]] = ew.copysign %[[POW]], %[[Y]] : tensor<?xf32>
// CHECK-NEXT:    func.return %[[SIGN]] : tensor<?xf32>
func.func @binary(%x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %0 = ew.add %x, %y : tensor<?xf32>
  %1 = ew.sub %0, %y : tensor<?xf32>
  %2 = ew.mul %1, %y : tensor<?xf32>
  %3 = ew.div %2, %y : tensor<?xf32>
  %4 = ew.max %3, %y : tensor<?xf32>
  %5 = ew.min %4, %y : tensor<?xf32>
  %6 = ew.pow %5, %y : tensor<?xf32>
  %7 = ew.copysign %6, %y : tensor<?xf32>
  func.return %7 : tensor<?xf32>
}

// CHECK-LABEL: func.func @unary
// CHECK-SAME:    (%[[X:.*]]: tensor<2x?xf64>)
// CHECK-NEXT:    %[[V0:.*]] = ew.neg %[[X]] : tensor<2x?xf64>
// CHECK-NEXT:    %[[V1:.*]] = ew.abs %[[V0]] : tensor<2x?xf64>
// CHECK-NEXT:    %[[V2:.*]] = ew.exp %[[V1]] : tensor<2x?xf64>
// CHECK-NEXT:    %[[V3:.*]] = ew.log %[[V2]] : tensor<2x?xf64>
// CHECK-NEXT:    %[[V4:.*]] = ew.tanh %[[V3]] : tensor<2x?xf64>
// CHECK-NEXT:    %[[V5:.*]] = ew.sigmoid %[[V4]] : tensor<2x?xf64>
// CHECK-NEXT:    %[[V6:.*]] = ew.erf %[[V5]] : tensor<2x?xf64>
// CHECK-NEXT:    %[[V7:.*]] = ew.sqrt %[[V6]] : tensor<2x?xf64>
// CHECK-NEXT:    %[[V8:.*]] = ew.rsqrt %[[V7]] : tensor<2x?xf64>
// CHECK-NEXT:    %[[V9:.*]] = ew.relu %[[V8]] : tensor<2x?xf64>
// CHECK-NEXT:    %[[V10:.*]] = ew.softplus %[[V9]] : tensor<2x?xf64>
// CHECK-NEXT:    %[[V11:.*]] = ew.log1p %[[V10]] : tensor<2x?xf64>
// CHECK-NEXT:    %[[V12:.*]] = ew.floor %[[V11]] : tensor<2x?xf64>
// CHECK-NEXT:    %[[V13:.*]] = ew.ceil %[[V12]] : tensor<2x?xf64>
// CHECK-NEXT:    %[[V14:.*]] = ew.trunc %[[V13]] : tensor<2x?xf64>
// CHECK-NEXT:    %[[V15:.*]] = ew.rint %[[V14]] : tensor<2x?xf64>
// CHECK-NEXT:    func.return %[[V15]] : tensor<2x?xf64>
func.func @unary(%x: tensor<2x?xf64>) -> tensor<2x?xf64> {
  %0 = ew.neg %x : tensor<2x?xf64>
  %1 = ew.abs %0 : tensor<2x?xf64>
  %2 = ew.exp %1 : tensor<2x?xf64>
  %3 = ew.log %2 : tensor<2x?xf64>
  %4 = ew.tanh %3 : tensor<2x?xf64>
  %5 = ew.sigmoid %4 : tensor<2x?xf64>
  %6 = ew.erf %5 : tensor<2x?xf64>
  %7 = ew.sqrt %6 : tensor<2x?xf64>
  %8 = ew.rsqrt %7 : tensor<2x?xf64>
  %9 = ew.relu %8 : tensor<2x?xf64>
  %10 = ew.softplus %9 : tensor<2x?xf64>
  %11 = ew.log1p %10 : tensor<2x?xf64>
  %12 = ew.floor %11 : tensor<2x?xf64>
  %13 = ew.ceil %12 : tensor<2x?xf64>
  %14 = ew.trunc %13 : tensor<2x?xf64>
  %15 = ew.rint %14 : tensor<2x?xf64>
  func.return %15 : tensor<2x?xf64>
}

// The C library's functions (glibc's vector variants under math=approx).
// CHECK-LABEL: func.func @library_functions
// CHECK-SAME:    (%[[X:.*]]: tensor<?x3xbf16>, %[[S:.*]]: tensor<bf16>)
// CHECK-NEXT:    %[[F0:.*]] = ew.sin %[[X]] : tensor<?x3xbf16>
// CHECK-NEXT:    %[[F1:.*]] = ew.cos %[[F0]] : tensor<?x3xbf16>
// CHECK-NEXT:    %[[F2:.*]] = ew.tan %[[F1]] : tensor<?x3xbf16>
// CHECK-NEXT:    %[[F3:.*]] = ew.asin %[[F2]] : tensor<?x3xbf16>
// CHECK-NEXT:    %[[F4:.*]] = ew.acos %[[F3]] : tensor<?x3xbf16>
// CHECK-NEXT:    %[[F5:.*]] = ew.atan %[[F4]] : tensor<?x3xbf16>
// CHECK-NEXT:    %[[F6:.*]] = ew.sinh %[[F5]] : tensor<?x3xbf16>
// CHECK-NEXT:    %[[F7:.*]] = ew.cosh %[[F6]] : tensor<?x3xbf16>
// CHECK-NEXT:    %[[F8:.*]] = ew.asinh %[[F7]] : tensor<?x3xbf16>
// CHECK-NEXT:    %[[F9:.*]] = ew.acosh %[[F8]] : tensor<?x3xbf16>
// CHECK-NEXT:    %[[F10:.*]] = ew.atanh %[[F9]] : tensor<?x3xbf16>
// CHECK-NEXT:    %[[F11:.*]] = ew.exp2 %[[F10]] : tensor<?x3xbf16>
// CHECK-NEXT:    %[[F12:.*]] = ew.expm1 %[[F11]] : tensor<?x3xbf16>
// CHECK-NEXT:    %[[F13:.*]] = ew.log2 %[[F12]] : tensor<?x3xbf16>
// CHECK-NEXT:    %[[F14:.*]] = ew.log10 %[[F13]] : tensor<?x3xbf16>
// CHECK-NEXT:    %[[F15:.*]] = ew.cbrt %[[F14]] : tensor<?x3xbf16>
// CHECK-NEXT:    %[[A2:.*]] = ew.atan2 %[[F15]], %[[S]] : tensor<?x3xbf16>, tensor<bf16> -> tensor<?x3xbf16>
// CHECK-NEXT:    func.return %[[A2]] : tensor<?x3xbf16>
func.func @library_functions(%x: tensor<?x3xbf16>, %s: tensor<bf16>) -> tensor<?x3xbf16> {
  %0 = ew.sin %x : tensor<?x3xbf16>
  %1 = ew.cos %0 : tensor<?x3xbf16>
  %2 = ew.tan %1 : tensor<?x3xbf16>
  %3 = ew.asin %2 : tensor<?x3xbf16>
  %4 = ew.acos %3 : tensor<?x3xbf16>
  %5 = ew.atan %4 : tensor<?x3xbf16>
  %6 = ew.sinh %5 : tensor<?x3xbf16>
  %7 = ew.cosh %6 : tensor<?x3xbf16>
  %8 = ew.asinh %7 : tensor<?x3xbf16>
  %9 = ew.acosh %8 : tensor<?x3xbf16>
  %10 = ew.atanh %9 : tensor<?x3xbf16>
  %11 = ew.exp2 %10 : tensor<?x3xbf16>
  %12 = ew.expm1 %11 : tensor<?x3xbf16>
  %13 = ew.log2 %12 : tensor<?x3xbf16>
  %14 = ew.log10 %13 : tensor<?x3xbf16>
  %15 = ew.cbrt %14 : tensor<?x3xbf16>
  %16 = ew.atan2 %15, %s : tensor<?x3xbf16>, tensor<bf16> -> tensor<?x3xbf16>
  func.return %16 : tensor<?x3xbf16>
}

// Broadcasting spells out all three types; every element type works.
// CHECK-LABEL: func.func @broadcast
// CHECK-SAME:    (%[[M:.*]]: tensor<4x?xf32>, %[[V:.*]]: tensor<?xf32>, %[[S:.*]]: tensor<f32>, %[[C:.*]]: tensor<1x3xf16>, %[[R:.*]]: tensor<4x1xf16>, %[[B:.*]]: tensor<?xbf16>)
// CHECK-NEXT:    ew.add %[[M]], %[[V]] : tensor<4x?xf32>, tensor<?xf32> -> tensor<4x?xf32>
// CHECK-NEXT:    ew.mul %[[S]], %[[M]] : tensor<f32>, tensor<4x?xf32> -> tensor<4x?xf32>
// CHECK-NEXT:    ew.sub %[[S]], %[[S]] : tensor<f32>
// CHECK-NEXT:    ew.max %[[C]], %[[R]] : tensor<1x3xf16>, tensor<4x1xf16> -> tensor<4x3xf16>
// CHECK-NEXT:    ew.pow %[[B]], %[[B]] : tensor<?xbf16>
func.func @broadcast(%m: tensor<4x?xf32>, %v: tensor<?xf32>, %s: tensor<f32>, %c: tensor<1x3xf16>, %r: tensor<4x1xf16>, %b: tensor<?xbf16>) -> (tensor<4x?xf32>, tensor<4x?xf32>, tensor<f32>, tensor<4x3xf16>, tensor<?xbf16>) {
  %0 = ew.add %m, %v : tensor<4x?xf32>, tensor<?xf32> -> tensor<4x?xf32>
  %1 = ew.mul %s, %m : tensor<f32>, tensor<4x?xf32> -> tensor<4x?xf32>
  %2 = ew.sub %s, %s : tensor<f32>, tensor<f32> -> tensor<f32>
  %3 = ew.max %c, %r : tensor<1x3xf16>, tensor<4x1xf16> -> tensor<4x3xf16>
  %4 = ew.pow %b, %b : tensor<?xbf16>
  func.return %0, %1, %2, %3, %4 : tensor<4x?xf32>, tensor<4x?xf32>, tensor<f32>, tensor<4x3xf16>, tensor<?xbf16>
}

// Comparisons give 1 and 0 of their operands' type; `ew.select` takes three operands, with one
// type when all four agree and each operand's otherwise.
// CHECK-LABEL: func.func @compare_select
// CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>, %[[Y:.*]]: tensor<?xf32>, %[[S:.*]]: tensor<f32>)
// CHECK-NEXT:    %[[LT:.*]] = ew.lt %[[X]], %[[Y]] : tensor<?xf32>
// CHECK-NEXT:    %[[LE:.*]] = ew.le %[[LT]], %[[Y]] : tensor<?xf32>
// CHECK-NEXT:    %[[GT:.*]] = ew.gt %[[LE]], %[[S]] : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
// CHECK-NEXT:    %[[GE:.*]] = ew.ge %[[S]], %[[GT]] : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
// CHECK-NEXT:    %[[EQ:.*]] = ew.eq %[[GE]], %[[Y]] : tensor<?xf32>
// CHECK-NEXT:    %[[NE:.*]] = ew.ne %[[EQ]], %[[Y]] : tensor<?xf32>
// CHECK-NEXT:    %[[SEL:.*]] = ew.select %[[NE]], %[[X]], %[[Y]] : tensor<?xf32>
// CHECK-NEXT:    %[[SEL2:.*]] = ew.select %[[SEL]], %[[S]], %[[X]] : tensor<?xf32>, tensor<f32>, tensor<?xf32> -> tensor<?xf32>
// CHECK-NEXT:    func.return %[[SEL2]] : tensor<?xf32>
func.func @compare_select(%x: tensor<?xf32>, %y: tensor<?xf32>, %s: tensor<f32>) -> tensor<?xf32> {
  %0 = ew.lt %x, %y : tensor<?xf32>
  %1 = ew.le %0, %y : tensor<?xf32>
  %2 = ew.gt %1, %s : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %3 = ew.ge %s, %2 : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  %4 = ew.eq %3, %y : tensor<?xf32>
  %5 = ew.ne %4, %y : tensor<?xf32>
  %6 = ew.select %5, %x, %y : tensor<?xf32>
  %7 = ew.select %6, %s, %x : tensor<?xf32>, tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  func.return %7 : tensor<?xf32>
}

// A kernel on tensors: one block argument per input, one yielded scalar per result.
// CHECK-LABEL: func.func @kernel_tensors
// CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>, %[[B:.*]]: tensor<f32>)
// CHECK-NEXT:    %[[K0:.*]], %[[K1:.*]] = ew.kernel ins(%[[X]], %[[B]] : tensor<?xf32>, tensor<f32>) -> tensor<?xf32>, tensor<?xf32> {
// CHECK-NEXT:    ^{{.*}}(%[[XS:.*]]: f32, %[[BS:.*]]: f32):
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[XS]], %[[BS]] : f32
// CHECK-NEXT:      %[[T:.*]] = math.tanh %[[S]] : f32
// CHECK-NEXT:      ew.yield %[[S]], %[[T]] : f32, f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[K0]], %[[K1]]
func.func @kernel_tensors(%x: tensor<?xf32>, %b: tensor<f32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %r:2 = ew.kernel ins(%x, %b : tensor<?xf32>, tensor<f32>) -> tensor<?xf32>, tensor<?xf32> {
  ^bb0(%xs: f32, %bs: f32):
    %s = arith.addf %xs, %bs : f32
    %t = math.tanh %s : f32
    ew.yield %s, %t : f32, f32
  }
  func.return %r#0, %r#1 : tensor<?xf32>, tensor<?xf32>
}

// A kernel without inputs (a constant fill), with an attribute dictionary.
// CHECK-LABEL: func.func @kernel_no_inputs
// CHECK-NEXT:    ew.kernel ins() -> tensor<4xf16> attributes {note = "fill"} {
// CHECK-NEXT:      %[[C:.*]] = arith.constant 1.5{{.*}} : f16
// CHECK-NEXT:      ew.yield %[[C]] : f16
func.func @kernel_no_inputs() -> tensor<4xf16> {
  %r = ew.kernel ins() -> tensor<4xf16> attributes {note = "fill"} {
    %c = arith.constant 1.5 : f16
    ew.yield %c : f16
  }
  func.return %r : tensor<4xf16>
}

// After bufferization: memrefs in, memrefs out (here in place), no results.
// CHECK-LABEL: func.func @kernel_buffers
// CHECK-SAME:    (%[[X:.*]]: memref<?xf32>, %[[Y:.*]]: memref<?xf32>)
// CHECK-NEXT:    ew.kernel ins(%[[X]], %[[Y]] : memref<?xf32>, memref<?xf32>) outs(%[[Y]] : memref<?xf32>) {
// CHECK-NEXT:    ^{{.*}}(%[[XS:.*]]: f32, %[[YS:.*]]: f32):
// CHECK-NEXT:      %[[M:.*]] = arith.maximumf %[[XS]], %[[YS]] : f32
// CHECK-NEXT:      ew.yield %[[M]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return
func.func @kernel_buffers(%x: memref<?xf32>, %y: memref<?xf32>) {
  ew.kernel ins(%x, %y : memref<?xf32>, memref<?xf32>) outs(%y : memref<?xf32>) {
  ^bb0(%xs: f32, %ys: f32):
    %m = arith.maximumf %xs, %ys : f32
    ew.yield %m : f32
  }
  func.return
}

// Conversions between element types keep the shape: widening and narrowing, N-D and rank 0;
// f16 and bf16 also to themselves (a rounding of what a kernel holds in f32).
// CHECK-LABEL: func.func @convert
// CHECK-SAME:    (%[[X:.*]]: tensor<?x4xbf16>, %[[S:.*]]: tensor<f64>)
// CHECK-NEXT:    %[[W:.*]] = ew.convert %[[X]] : tensor<?x4xbf16> to tensor<?x4xf32>
// CHECK-NEXT:    %[[N:.*]] = ew.convert %[[W]] : tensor<?x4xf32> to tensor<?x4xf16>
// CHECK-NEXT:    %[[T:.*]] = ew.convert %[[S]] : tensor<f64> to tensor<bf16>
// CHECK-NEXT:    %[[R:.*]] = ew.convert %[[N]] : tensor<?x4xf16> to tensor<?x4xf16>
// CHECK-NEXT:    func.return %[[R]], %[[T]]
func.func @convert(%x: tensor<?x4xbf16>, %s: tensor<f64>) -> (tensor<?x4xf16>, tensor<bf16>) {
  %w = ew.convert %x : tensor<?x4xbf16> to tensor<?x4xf32>
  %n = ew.convert %w : tensor<?x4xf32> to tensor<?x4xf16>
  %t = ew.convert %s : tensor<f64> to tensor<bf16>
  %r = ew.convert %n : tensor<?x4xf16> to tensor<?x4xf16>
  func.return %r, %t : tensor<?x4xf16>, tensor<bf16>
}
