// The generic form of every `ew` op parses, prints back generically unchanged, and prints in
// the custom form.
// RUN: xfuse-opt %s | filecheck %s
// RUN: xfuse-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC
// RUN: xfuse-opt %s --print-op-generic | xfuse-opt --print-op-generic | filecheck %s --check-prefix=GENERIC
// RUN: xfuse-opt %s | xfuse-opt --print-op-generic | filecheck %s --check-prefix=GENERIC

"builtin.module"() ({
  // CHECK-LABEL: func.func @constants
  // CHECK-NEXT:    ew.constant -2.5 : tensor<f32>
  // CHECK-NEXT:    ew.constant inf : tensor<f32>
  // CHECK-NEXT:    ew.constant -inf : tensor<f16>
  // CHECK-NEXT:    ew.constant nan : tensor<bf16>
  // CHECK-NEXT:    ew.constant 1.0e-30 : tensor<f32>
  // CHECK-NEXT:    ew.constant 0.7978845608 : tensor<f64>
  // GENERIC-LABEL: "func.func"() <{sym_name = "constants"
  // GENERIC-NEXT:    "ew.constant"() <{value = -2.500000e+00 : f64}> : () -> tensor<f32>
  // GENERIC-NEXT:    "ew.constant"() <{value = 0x7ff0000000000000 : f64}> : () -> tensor<f32>
  // GENERIC-NEXT:    "ew.constant"() <{value = 0xfff0000000000000 : f64}> : () -> tensor<f16>
  // GENERIC-NEXT:    "ew.constant"() <{value = 0x7ff8000000000000 : f64}> : () -> tensor<bf16>
  // GENERIC-NEXT:    "ew.constant"() <{value = 1.000000e-30 : f64}> : () -> tensor<f32>
  // GENERIC-NEXT:    "ew.constant"() <{value = 0.79788456080000003 : f64}> : () -> tensor<f64>
  "func.func"() <{sym_name = "constants", function_type = () -> (tensor<f32>, tensor<f32>, tensor<f16>, tensor<bf16>, tensor<f32>, tensor<f64>)}> ({
    %a = "ew.constant"() <{value = -2.5 : f64}> : () -> tensor<f32>
    %b = "ew.constant"() <{value = 0x7FF0000000000000 : f64}> : () -> tensor<f32>
    %c = "ew.constant"() <{value = 0xFFF0000000000000 : f64}> : () -> tensor<f16>
    %d = "ew.constant"() <{value = 0x7FF8000000000000 : f64}> : () -> tensor<bf16>
    %e = "ew.constant"() <{value = 1.0e-30 : f64}> : () -> tensor<f32>
    %f = "ew.constant"() <{value = 0.7978845608 : f64}> : () -> tensor<f64>
    "func.return"(%a, %b, %c, %d, %e, %f) : (tensor<f32>, tensor<f32>, tensor<f16>, tensor<bf16>, tensor<f32>, tensor<f64>) -> ()
  }) : () -> ()

  // CHECK-LABEL: func.func @elementwise
  // CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>, %[[S:.*]]: tensor<f32>)
  // CHECK-NEXT:    %[[A:.*]] = ew.add %[[X]], %[[X]] : tensor<?xf32>
  // CHECK-NEXT:    %[[P:.*]] = ew.pow %[[S]], %[[A]] : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  // CHECK-NEXT:    %[[R:.*]] = ew.rsqrt %[[P]] : tensor<?xf32>
  // CHECK-NEXT:    func.return %[[R]]
  // GENERIC-LABEL: "func.func"() <{sym_name = "elementwise"
  // GENERIC:         %[[A:.*]] = "ew.add"(%[[X:.*]], %[[X]]) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  // GENERIC-NEXT:    %[[P:.*]] = "ew.pow"(%{{.*}}, %[[A]]) : (tensor<f32>, tensor<?xf32>) -> tensor<?xf32>
  // GENERIC-NEXT:    "ew.rsqrt"(%[[P]]) : (tensor<?xf32>) -> tensor<?xf32>
  "func.func"() <{sym_name = "elementwise", function_type = (tensor<?xf32>, tensor<f32>) -> tensor<?xf32>}> ({
  ^bb0(%x: tensor<?xf32>, %s: tensor<f32>):
    %a = "ew.add"(%x, %x) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
    %p = "ew.pow"(%s, %a) : (tensor<f32>, tensor<?xf32>) -> tensor<?xf32>
    %r = "ew.rsqrt"(%p) : (tensor<?xf32>) -> tensor<?xf32>
    "func.return"(%r) : (tensor<?xf32>) -> ()
  }) : () -> ()

  // CHECK-LABEL: func.func @kernels
  // CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>, %[[B:.*]]: memref<?xf32>)
  // CHECK-NEXT:    %[[K:.*]] = ew.kernel ins(%[[X]] : tensor<?xf32>) -> tensor<?xf32> {
  // CHECK-NEXT:    ^{{.*}}(%[[XS:.*]]: f32):
  // CHECK-NEXT:      %[[N:.*]] = arith.negf %[[XS]] : f32
  // CHECK-NEXT:      ew.yield %[[N]] : f32
  // CHECK-NEXT:    }
  // CHECK-NEXT:    ew.kernel ins(%[[B]] : memref<?xf32>) outs(%[[B]] : memref<?xf32>) {
  // CHECK-NEXT:    ^{{.*}}(%[[BS:.*]]: f32):
  // CHECK-NEXT:      ew.yield %[[BS]] : f32
  // CHECK-NEXT:    }
  // GENERIC-LABEL: "func.func"() <{sym_name = "kernels"
  // GENERIC:         "ew.kernel"(%{{.*}}) <{operandSegmentSizes = array<i32: 1, 0>}> ({
  // GENERIC:           "ew.yield"(%{{.*}}) : (f32) -> ()
  // GENERIC-NEXT:    }) : (tensor<?xf32>) -> tensor<?xf32>
  // GENERIC-NEXT:    "ew.kernel"(%[[B:.*]], %[[B]]) <{operandSegmentSizes = array<i32: 1, 1>}> ({
  // GENERIC:           "ew.yield"(%{{.*}}) : (f32) -> ()
  // GENERIC-NEXT:    }) : (memref<?xf32>, memref<?xf32>) -> ()
  "func.func"() <{sym_name = "kernels", function_type = (tensor<?xf32>, memref<?xf32>) -> tensor<?xf32>}> ({
  ^bb0(%x: tensor<?xf32>, %b: memref<?xf32>):
    %k = "ew.kernel"(%x) <{operandSegmentSizes = array<i32: 1, 0>}> ({
    ^bb0(%xs: f32):
      %n = "arith.negf"(%xs) <{fastmath = #arith.fastmath<none>}> : (f32) -> f32
      "ew.yield"(%n) : (f32) -> ()
    }) : (tensor<?xf32>) -> tensor<?xf32>
    "ew.kernel"(%b, %b) <{operandSegmentSizes = array<i32: 1, 1>}> ({
    ^bb0(%bs: f32):
      "ew.yield"(%bs) : (f32) -> ()
    }) : (memref<?xf32>, memref<?xf32>) -> ()
    "func.return"(%k) : (tensor<?xf32>) -> ()
  }) : () -> ()
}) : () -> ()
