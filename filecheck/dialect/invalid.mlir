// Every verifier check of the `ew` dialect, with its message and the failing op's line:col.
// RUN: xfuse-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// Binary ops: operands share the result's element type, and their shapes broadcast to it.
// CHECK: {{.*}}invalid.mlir:[[# @LINE + 4]]:8: error: 'ew.add' operand 'rhs' at position 1 does not verify:
// CHECK-NEXT: expected a tensor of f16, bf16, f32 or f64, of one element type for the operands and the result
// CHECK-NEXT: Underlying verification failure: attribute f32 expected from variable 'E', but got f64
func.func @f(%x: tensor<?xf32>, %y: tensor<?xf64>) -> tensor<?xf32> {
  %r = ew.add %x, %y : tensor<?xf32>, tensor<?xf64> -> tensor<?xf32>
  func.return %r : tensor<?xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.mul' operand shapes [3], [4] do not broadcast to the result shape [4]
func.func @f(%x: tensor<3xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %r = ew.mul %x, %y : tensor<3xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.sub' operand shapes [4], [4] do not broadcast to the result shape [5]
func.func @f(%x: tensor<4xf32>) -> tensor<5xf32> {
  %r = ew.sub %x, %x : tensor<4xf32>, tensor<4xf32> -> tensor<5xf32>
  func.return %r : tensor<5xf32>
}

// -----

// A result's ? takes its size from the operands at run time: beyond their ranks nothing gives it
// (the result was made 3x3, and a kernel filling a ? from no inputs was an internal IndexError).
// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.add' result dimension 0 is ? but no operand has that dimension, so nothing gives its size (operand shapes [3], [3], result shape [?, 3])
func.func @f(%x: tensor<3xf32>) -> tensor<?x3xf32> {
  %r = ew.add %x, %x : tensor<3xf32>, tensor<3xf32> -> tensor<?x3xf32>
  func.return %r : tensor<?x3xf32>
}

// -----

// Nor where the operands' static sizes give it (3 + x[1] was bound from the arguments: 1 element;
// 3x1 + x[7] read 7 rows of the constant's 3).
// CHECK: {{.*}}invalid.mlir:[[# @LINE + 3]]:8: error: 'ew.add' result dimension 0 is ? but its operands have 3 there (the result's size), so nothing gives its size (operand shapes [3], [1], result shape [?])
func.func @f(%x: tensor<1xf32>) -> tensor<?xf32> {
  %c = ew.constant 2.0 : tensor<3xf32>
  %r = ew.add %c, %x : tensor<3xf32>, tensor<1xf32> -> tensor<?xf32>
  func.return %r : tensor<?xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 3]]:8: error: 'ew.kernel' result dimension 0 is ? but its operands have 3 there (the result's size), so nothing gives its size (operand shapes [3, 1], [?], result shape [?, ?])
func.func @f(%x: tensor<?xf32>) -> tensor<?x?xf32> {
  %c = ew.constant 2.0 : tensor<3x1xf32>
  %r = ew.kernel ins(%c, %x : tensor<3x1xf32>, tensor<?xf32>) -> tensor<?x?xf32> {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    ew.yield %s : f32
  }
  func.return %r : tensor<?x?xf32>
}

// -----

// A ? never broadcasts to a 1: a kernel of one element read past the end of an empty input.
// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.kernel' input 0 of shape [?] does not broadcast to the iteration shape [1]
func.func @f(%x: tensor<?xf32>) -> tensor<1xf32> {
  %r = ew.kernel ins(%x : tensor<?xf32>) -> tensor<1xf32> {
  ^bb0(%s: f32):
    ew.yield %s : f32
  }
  func.return %r : tensor<1xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.kernel' result dimension 0 is ? but no operand has that dimension, so nothing gives its size (operand shapes none, result shape [?])
func.func @f() -> tensor<?xf16> {
  %r = ew.kernel ins() -> tensor<?xf16> {
    %c = arith.constant 1.5 : f16
    ew.yield %c : f16
  }
  func.return %r : tensor<?xf16>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.max' operand shapes [2, 3], [2, 3] do not broadcast to the result shape [3]
func.func @f(%x: tensor<2x3xf32>) -> tensor<3xf32> {
  %r = ew.max %x, %x : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<3xf32>
  func.return %r : tensor<3xf32>
}

// -----

// `ew.select`'s three operands broadcast to its result, of one element type.
// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.select' operand shapes [2], [3], [3] do not broadcast to the result shape [3]
func.func @f(%c: tensor<2xf32>, %x: tensor<3xf32>) -> tensor<3xf32> {
  %r = ew.select %c, %x, %x : tensor<2xf32>, tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  func.return %r : tensor<3xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 4]]:8: error: 'ew.select' operand 'on_true' at position 1 does not verify:
// CHECK-NEXT: expected a tensor of f16, bf16, f32 or f64, of one element type for the operands and the result
// CHECK-NEXT: Underlying verification failure: attribute f64 expected from variable 'E', but got f32
func.func @f(%c: tensor<3xf64>, %x: tensor<3xf32>) -> tensor<3xf32> {
  %r = ew.select %c, %x, %x : tensor<3xf64>, tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  func.return %r : tensor<3xf32>
}

// -----

// Its operands' types are one, or one for each.
// CHECK: {{.*}}invalid.mlir:[[# @LINE + 3]]:31
// CHECK: expected one type, or 3 types `->` the result's, got 2 types
func.func @f(%c: tensor<3xf32>) -> tensor<3xf32> {
  %r = ew.select %c, %c, %c : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  func.return %r : tensor<3xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 4]]:8: error: 'ew.add' operand 'lhs' at position 0 does not verify:
// CHECK-NEXT: expected a tensor of f16, bf16, f32 or f64, of one element type for the operands and the result
// CHECK-NEXT: Underlying verification failure: Unexpected attribute i32
func.func @f(%x: tensor<?xi32>) -> tensor<?xi32> {
  %r = ew.add %x, %x : tensor<?xi32>
  func.return %r : tensor<?xi32>
}

// -----

// Unary ops keep their operand's type.
// CHECK: {{.*}}invalid.mlir:[[# @LINE + 3]]:8: error: 'ew.exp' result 'result' at position 0 does not verify:
// CHECK-NEXT: attribute tensor<?xf32> expected from variable 'T', but got tensor<?xf64>
func.func @f(%x: tensor<?xf32>) -> tensor<?xf64> {
  %r = "ew.exp"(%x) : (tensor<?xf32>) -> tensor<?xf64>
  func.return %r : tensor<?xf64>
}

// -----

// Only tensors: memrefs are for kernels.
// CHECK: {{.*}}invalid.mlir:[[# @LINE + 3]]:8: error: 'ew.exp' operand 'operand' at position 0 does not verify:
// CHECK-NEXT: expected a tensor of f16, bf16, f32 or f64
func.func @f(%x: memref<?xf32>) -> memref<?xf32> {
  %r = "ew.exp"(%x) : (memref<?xf32>) -> memref<?xf32>
  func.return %r : memref<?xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 3]]:8: error: 'ew.add' operand 'lhs' at position 0 does not verify:
// CHECK-NEXT: expected a tensor of f16, bf16, f32 or f64, of one element type for the operands and the result
func.func @f(%x: memref<?xf32>) -> memref<?xf32> {
  %r = "ew.add"(%x, %x) : (memref<?xf32>, memref<?xf32>) -> memref<?xf32>
  func.return %r : memref<?xf32>
}

// -----

// Constants: static shape, float element type, an f64 value.
// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.constant' result must have a static shape
func.func @f() -> tensor<?xf32> {
  %c = ew.constant 1.0 : tensor<?xf32>
  func.return %c : tensor<?xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 4]]:8: error: 'ew.constant' result 'result' at position 0 does not verify:
// CHECK-NEXT: expected a tensor of f16, bf16, f32 or f64
// CHECK-NEXT: Underlying verification failure: Unexpected attribute i32
func.func @f() -> tensor<i32> {
  %c = ew.constant 1.0 : tensor<i32>
  func.return %c : tensor<i32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.constant' value must be an f64 attribute
func.func @f() -> tensor<f32> {
  %c = "ew.constant"() <{value = 1.0 : f32}> : () -> tensor<f32>
  func.return %c : tensor<f32>
}

// -----

// The custom form of ew.constant takes only tensor types.
// CHECK: {{.*}}invalid.mlir:[[# @LINE + 3]]:26
// CHECK: 'ew.constant' expected a tensor type, got memref<f32>
func.func @f() -> memref<f32> {
  %c = ew.constant 1.0 : memref<f32>
  func.return %c : memref<f32>
}

// -----

// Kernels: block arguments match the inputs, yields match the results.
// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.kernel' has 1 inputs but its block takes 2 arguments
func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
  %r = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf32> {
  ^bb0(%a: f32, %b: f32):
    ew.yield %a : f32
  }
  func.return %r : tensor<?xf32>
}

// -----

// The region computes one element from scalars: an op of a memref (or of no result, or with a
// region: tests/test_dialect.py) has no place in its loop (ew-kernel-to-loops raised an
// IndexError on a store).
// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:3: error: 'ew.kernel' region op 'memref.alloca' must take and give scalars: one result, scalar operands, no regions (the region computes one element)
func.func @f(%x: memref<?xf32>, %out: memref<?xf32>) {
  ew.kernel ins(%x : memref<?xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%a: f32):
    %c0 = arith.constant 0 : index
    %m = memref.alloca() : memref<1xf32>
    memref.store %a, %m[%c0] : memref<1xf32>
    ew.yield %a : f32
  }
  func.return
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.kernel' block argument 0 has type f64, expected the element type f32 of input 0
func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
  %r = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf32> {
  ^bb0(%a: f64):
    ew.yield %a : f64
  }
  func.return %r : tensor<?xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:10: error: 'ew.kernel' yields 1 values for 2 results
func.func @f(%x: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %r:2 = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf32>, tensor<?xf32> {
  ^bb0(%a: f32):
    ew.yield %a : f32
  }
  func.return %r#0, %r#1 : tensor<?xf32>, tensor<?xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.kernel' yield 0 has type f32, expected f64
func.func @f(%x: tensor<?xf32>) -> tensor<?xf64> {
  %r = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf64> {
  ^bb0(%a: f32):
    ew.yield %a : f32
  }
  func.return %r : tensor<?xf64>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:10: error: 'ew.kernel' results must all have the same shape
func.func @f(%x: tensor<?xf32>) -> (tensor<?xf32>, tensor<4xf32>) {
  %r:2 = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf32>, tensor<4xf32> {
  ^bb0(%a: f32):
    ew.yield %a, %a : f32, f32
  }
  func.return %r#0, %r#1 : tensor<?xf32>, tensor<4xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.kernel' input 0 of shape [3] does not broadcast to the iteration shape [4]
func.func @f(%x: tensor<3xf32>) -> tensor<4xf32> {
  %r = ew.kernel ins(%x : tensor<3xf32>) -> tensor<4xf32> {
  ^bb0(%a: f32):
    ew.yield %a : f32
  }
  func.return %r : tensor<4xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.kernel' with outs must have memref operands and no results
func.func @f(%x: memref<?xf32>, %y: memref<?xf32>) -> tensor<?xf32> {
  %r = ew.kernel ins(%x : memref<?xf32>) outs(%y : memref<?xf32>) -> tensor<?xf32> {
  ^bb0(%a: f32):
    ew.yield %a : f32
  }
  func.return %r : tensor<?xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 4]]:3: error: 'ew.kernel' operand 'outputs' at position 1 does not verify:
// CHECK-NEXT: expected a memref of f16, bf16, f32 or f64
// CHECK-NEXT: Underlying verification failure: tensor<?xf32> should be of base attribute memref
func.func @f(%x: tensor<?xf32>, %y: tensor<?xf32>) {
  ew.kernel ins(%x : tensor<?xf32>) outs(%y : tensor<?xf32>) {
  ^bb0(%a: f32):
    ew.yield %a : f32
  }
  func.return
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.kernel' on tensors must take tensors and return tensors
func.func @f(%x: memref<?xf32>) -> tensor<?xf32> {
  %r = ew.kernel ins(%x : memref<?xf32>) -> tensor<?xf32> {
  ^bb0(%a: f32):
    ew.yield %a : f32
  }
  func.return %r : tensor<?xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:3: error: 'ew.kernel' on tensors must take tensors and return tensors
func.func @f(%x: tensor<?xf32>) {
  ew.kernel ins(%x : tensor<?xf32>) {
  ^bb0(%a: f32):
    ew.yield
  }
  func.return
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 4]]:8: error: 'ew.kernel' operand 'inputs' at position 0 does not verify:
// CHECK-NEXT: expected a tensor or memref of f16, bf16, f32 or f64
// CHECK-NEXT: Underlying verification failure: Unexpected attribute i32
func.func @f(%x: tensor<?xi32>) -> tensor<?xi32> {
  %r = ew.kernel ins(%x : tensor<?xi32>) -> tensor<?xi32> {
  ^bb0(%a: i32):
    ew.yield %a : i32
  }
  func.return %r : tensor<?xi32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.kernel' Region 'body' at position 0 expected a single block, but got 0 blocks
func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
  %r = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf32> {
  }
  func.return %r : tensor<?xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 4]]:10: error: Operation arith.addf terminates block in single-block region but is not a terminator
func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
  %r = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf32> {
  ^bb0(%a: f32):
    %b = arith.addf %a, %a : f32
  }
  func.return %r : tensor<?xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:3: error: 'ew.yield' expects parent op 'ew.kernel'
func.func @f(%x: f32) {
  ew.yield %x : f32
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.kernel' Region 'body' at position 0 expected a single block, but got 2 blocks
func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
  %r = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf32> {
  ^bb0(%a: f32):
    ew.yield %a : f32
  ^bb1:
    ew.yield %a : f32
  }
  func.return %r : tensor<?xf32>
}

// -----

// Conversions: between two float element types (the same only for f16 and bf16, a rounding),
// keeping the shape.
// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.convert' from f32 to itself: only f16 and bf16 convert to themselves
func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
  %r = ew.convert %x : tensor<?xf32> to tensor<?xf32>
  func.return %r : tensor<?xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 2]]:8: error: 'ew.convert' keeps the shape: operand [?, 4] but result [4]
func.func @f(%x: tensor<?x4xbf16>) -> tensor<4xf32> {
  %r = ew.convert %x : tensor<?x4xbf16> to tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

// CHECK: {{.*}}invalid.mlir:[[# @LINE + 3]]:8
// CHECK: 'ew.convert' expected a tensor of f16, bf16, f32 or f64
func.func @f(%x: tensor<?xf32>) -> tensor<?xi32> {
  %r = ew.convert %x : tensor<?xf32> to tensor<?xi32>
  func.return %r : tensor<?xi32>
}

// -----

// The custom format leaves the element type to the verifier, as the binary ops' does.
// CHECK: {{.*}}invalid.mlir:[[# @LINE + 4]]:8: error: 'ew.tanh' operand 'operand' at position 0 does not verify:
// CHECK-NEXT: expected a tensor of f16, bf16, f32 or f64
// CHECK-NEXT: Underlying verification failure: Unexpected attribute i32
func.func @f(%x: tensor<?xi32>) -> tensor<?xi32> {
  %r = ew.tanh %x : tensor<?xi32>
  func.return %r : tensor<?xi32>
}
