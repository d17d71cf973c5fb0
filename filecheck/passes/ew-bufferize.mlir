// RUN: xfuse-opt %s -p 'ew-fuse{mode=none},ew-bufferize' | filecheck %s
// RUN: xfuse-opt %s -p 'ew-fuse{mode=none},ew-bufferize{reuse=false}' | filecheck %s --check-prefix=NAIVE
// RUN: xfuse-opt %s -p 'ew-fuse,ew-bufferize' | filecheck %s --check-prefix=FUSED
// RUN: xfuse-opt %inputs/gelu.ew -p 'ew-fuse{mode=none},ew-bufferize{stats=true}' 2>&1 | filecheck %s --check-prefix=GELU
// RUN: xfuse-opt %inputs/gelu.ew -p 'ew-fuse{mode=none},ew-bufferize{reuse=false stats=true}' 2>&1 | filecheck %s --check-prefix=GELU-NAIVE

// A chain: the second temporary is written in place over the first, which dies there.
// CHECK-LABEL: func.func @chain
// CHECK-SAME:    (%[[X:.*]]: memref<?xf32>, %[[OUT:.*]]: memref<?xf32>) {
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[N:.*]] = memref.dim %[[X]], %[[C0]] : memref<?xf32>
// CHECK-NEXT:    %[[T:.*]] = memref.alloc(%[[N]]) : memref<?xf32>
// CHECK-NEXT:    ew.kernel ins(%[[X]] : memref<?xf32>) outs(%[[T]] : memref<?xf32>) {
// CHECK:           math.exp
// CHECK:         ew.kernel ins(%[[T]] : memref<?xf32>) outs(%[[T]] : memref<?xf32>) {
// CHECK:           arith.negf
// CHECK:         ew.kernel ins(%[[T]] : memref<?xf32>) outs(%[[OUT]] : memref<?xf32>) {
// CHECK:           math.absf
// CHECK:         }
// CHECK-NEXT:    memref.dealloc %[[T]] : memref<?xf32>
// CHECK-NEXT:    func.return
// NAIVE-LABEL: func.func @chain
// NAIVE:         %[[T1:.*]] = memref.alloc
// NAIVE:         ew.kernel ins(%{{.*}} : memref<?xf32>) outs(%[[T1]] : memref<?xf32>)
// NAIVE:         %[[T2:.*]] = memref.alloc
// NAIVE:         ew.kernel ins(%[[T1]] : memref<?xf32>) outs(%[[T2]] : memref<?xf32>)
// NAIVE:         memref.dealloc %[[T1]]
// NAIVE:         ew.kernel ins(%[[T2]] : memref<?xf32>) outs(%{{.*}} : memref<?xf32>)
// NAIVE:         memref.dealloc %[[T2]]
// FUSED-LABEL: func.func @chain
// FUSED-NOT:     memref.alloc
// FUSED:         ew.kernel ins(%{{.*}} : memref<?xf32>) outs(%{{.*}} : memref<?xf32>)
// FUSED-NOT:     ew.kernel
// FUSED:         func.return
func.func @chain(%x: tensor<?xf32>) -> tensor<?xf32> {
  %a = ew.exp %x : tensor<?xf32>
  %b = ew.neg %a : tensor<?xf32>
  %c = ew.abs %b : tensor<?xf32>
  func.return %c : tensor<?xf32>
}

// Results go to the trailing output arguments in order; a returned value is read from there.
// FUSED-LABEL: func.func @multi_output
// FUSED-SAME:    (%[[X:.*]]: memref<?xf32>, %[[B:.*]]: memref<?xf32>, %[[Y:.*]]: memref<?xf32>, %[[H:.*]]: memref<?xf32>) {
// FUSED-NEXT:    ew.kernel ins(%[[X]], %[[B]] : memref<?xf32>, memref<?xf32>) outs(%[[H]], %[[Y]] : memref<?xf32>, memref<?xf32>) {
// FUSED:           ew.yield
// FUSED-NEXT:    }
// FUSED-NEXT:    func.return
// CHECK-LABEL: func.func @multi_output
// CHECK-SAME:    (%[[X:.*]]: memref<?xf32>, %[[B:.*]]: memref<?xf32>, %[[Y:.*]]: memref<?xf32>, %[[H:.*]]: memref<?xf32>) {
// CHECK:         ew.kernel ins(%[[X]], %[[B]] : memref<?xf32>, memref<?xf32>) outs(%[[H]] : memref<?xf32>)
// CHECK:         ew.kernel ins(%[[H]] : memref<?xf32>) outs(%[[T:.*]] : memref<?xf32>)
// CHECK:         ew.kernel ins(%[[H]], %[[T]] : memref<?xf32>, memref<?xf32>) outs(%[[Y]] : memref<?xf32>)
func.func @multi_output(%x: tensor<?xf32>, %b: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %h = ew.add %x, %b : tensor<?xf32>
  %t = ew.tanh %h : tensor<?xf32>
  %y = ew.mul %h, %t : tensor<?xf32>
  func.return %y, %h : tensor<?xf32>, tensor<?xf32>
}

// Copy and constant kernels fill outputs that are an argument (twice) or a constant.
// CHECK-LABEL: func.func @trivial
// CHECK-SAME:    (%[[X:.*]]: memref<4xf32>, %[[O0:.*]]: memref<4xf32>, %[[O1:.*]]: memref<f32>, %[[O2:.*]]: memref<4xf32>) {
// CHECK-NEXT:    ew.kernel ins(%[[X]] : memref<4xf32>) outs(%[[O0]], %[[O2]] : memref<4xf32>, memref<4xf32>) {
// CHECK-NEXT:    ^{{.*}}(%[[XS:.*]]: f32):
// CHECK-NEXT:      ew.yield %[[XS]], %[[XS]] : f32, f32
// CHECK-NEXT:    }
// CHECK-NEXT:    ew.kernel ins() outs(%[[O1]] : memref<f32>) {
// CHECK-NEXT:      %[[C:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:      ew.yield %[[C]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return
func.func @trivial(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>, tensor<4xf32>) {
  %c = ew.constant 2.0 : tensor<f32>
  func.return %x, %c, %x : tensor<4xf32>, tensor<f32>, tensor<4xf32>
}

// Unfused broadcast in bf16: the [d] temporary takes its size from the bias, the [t, d] one
// from x; the [t, d] result cannot overwrite the [d] input, so there is no in-place write.
// CHECK-LABEL: func.func @bias_bf16
// CHECK-SAME:    (%[[X:.*]]: memref<?x?xbf16>, %[[B:.*]]: memref<?xbf16>, %[[G:.*]]: memref<?x?xbf16>) {
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK:         %[[D:.*]] = memref.dim %[[B]], %[[C0]] : memref<?xbf16>
// CHECK-NEXT:    %[[S:.*]] = memref.alloc(%[[D]]) : memref<?xbf16>
// CHECK-NEXT:    ew.kernel ins(%[[B]] : memref<?xbf16>) outs(%[[S]] : memref<?xbf16>)
// CHECK:         %[[T:.*]] = memref.dim %[[X]], %[[C0]] : memref<?x?xbf16>
// CHECK-NEXT:    %[[H:.*]] = memref.alloc(%[[T]], %[[D]]) : memref<?x?xbf16>
// CHECK-NEXT:    ew.kernel ins(%[[X]], %[[S]] : memref<?x?xbf16>, memref<?xbf16>) outs(%[[H]] : memref<?x?xbf16>)
// CHECK:         memref.dealloc %[[S]] : memref<?xbf16>
// CHECK-NEXT:    ew.kernel ins(%[[H]] : memref<?x?xbf16>) outs(%[[G]] : memref<?x?xbf16>)
// CHECK:         memref.dealloc %[[H]] : memref<?x?xbf16>
// FUSED-LABEL: func.func @bias_bf16
// FUSED-NOT:     memref.alloc
// FUSED:         ew.kernel ins(%{{.*}}, %{{.*}} : memref<?xbf16>, memref<?x?xbf16>) outs(%{{.*}} : memref<?x?xbf16>)
func.func @bias_bf16(%x: tensor<?x?xbf16>, %b: tensor<?xbf16>) -> tensor<?x?xbf16> {
  %c = ew.constant 2.0 : tensor<bf16>
  %s = ew.mul %b, %c : tensor<?xbf16>, tensor<bf16> -> tensor<?xbf16>
  %h = ew.add %x, %s : tensor<?x?xbf16>, tensor<?xbf16> -> tensor<?x?xbf16>
  %g = ew.sigmoid %h : tensor<?x?xbf16>
  func.return %g : tensor<?x?xbf16>
}

// Unfused GELU in the lecture's order: 10 temporaries, 3 buffers with reuse (7 in place).
// (the statistics go to stderr, printed before the IR)
// GELU:         'ew-bufferize'
// GELU-NEXT:      (temporaries) 10 :
// GELU-NEXT:      (buffers-allocated) 3 :
// GELU-NEXT:      (buffers-reused) 0 :
// GELU-NEXT:      (in-place-writes) 7 :
// GELU-LABEL: func.func @main
// GELU-COUNT-3: memref.alloc
// GELU-NOT:     memref.alloc
// GELU-COUNT-3: memref.dealloc
// GELU-NAIVE:         (buffers-allocated) 10 :
// GELU-NAIVE-LABEL: func.func @main
// GELU-NAIVE-COUNT-10: memref.alloc
// GELU-NAIVE-NOT:     memref.alloc
