// RUN: xfuse-opt %s -p 'ew-kernel-to-loops{vector-bytes=64}' | filecheck %s

// With the vector width set, the innermost loop runs to the largest multiple of 4 vectors of the
// narrowest element (4 x 64 bytes of f32: 64 elements), and a copy of it from there to the end:
// the remainder loop, which LLVM vectorizes with masks (`xfuse.codegen.native.mark_loops`).
// CHECK-LABEL: func.func @one_dim
// CHECK-SAME:    (%[[X:.*]]: memref<?xf32>, %[[OUT:.*]]: memref<?xf32>)
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[N:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?xf32>
// CHECK-DAG:     %[[BLOCK:.*]] = arith.constant -64 : index
// CHECK:         %[[MAIN:.*]] = arith.andi %[[N]], %[[BLOCK]] : index
// CHECK-NEXT:    scf.for %[[I:.*]] = %[[C0]] to %[[MAIN]] step %{{.*}} {
// CHECK-NEXT:      %[[XS:.*]] = memref.load %[[X]][%[[I]]] : memref<?xf32>
// CHECK-NEXT:      %[[T:.*]] = math.tanh %[[XS]] : f32
// CHECK-NEXT:      memref.store %[[T]], %[[OUT]][%[[I]]] : memref<?xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    scf.for %[[J:.*]] = %[[MAIN]] to %[[N]] step %{{.*}} {
// CHECK-NEXT:      %[[XR:.*]] = memref.load %[[X]][%[[J]]] : memref<?xf32>
// CHECK-NEXT:      %[[TR:.*]] = math.tanh %[[XR]] : f32
// CHECK-NEXT:      memref.store %[[TR]], %[[OUT]][%[[J]]] : memref<?xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return
func.func @one_dim(%x: memref<?xf32>, %out: memref<?xf32>) {
  ew.kernel ins(%x : memref<?xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%xs: f32):
    %t = math.tanh %xs : f32
    ew.yield %t : f32
  }
  func.return
}

// Two dims: only the innermost loop is split (in every row); bf16 is the narrowest element, so
// the block is 4 x 64 bytes of bf16 (128 elements). The row's hoisted load and the row's start
// in the arrays' one-dimensional views stay outside both.
// CHECK-LABEL: func.func @two_dims
// CHECK-SAME:    (%[[X:.*]]: memref<?x?xbf16>, %[[S:.*]]: memref<?x1xf32>, %[[OUT:.*]]: memref<?x?xbf16>)
// CHECK-DAG:     %[[T:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?xbf16>
// CHECK-DAG:     %[[D:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?xbf16>
// CHECK-DAG:     %[[XF:.*]] = memref.collapse_shape %[[X]] {{.*}} into memref<?xbf16>
// CHECK-DAG:     %[[OUTF:.*]] = memref.collapse_shape %[[OUT]] {{.*}} into memref<?xbf16>
// CHECK:         scf.for %[[I:.*]] = %{{.*}} to %[[T]] step
// CHECK-NEXT:      %[[ROW:.*]] = arith.muli %[[I]], %[[D]] : index
// CHECK-NEXT:      %[[SS:.*]] = memref.load %[[S]][%[[I]], %{{.*}}] : memref<?x1xf32>
// CHECK-NEXT:      %[[BLOCK:.*]] = arith.constant -128 : index
// CHECK-NEXT:      %[[MAIN:.*]] = arith.andi %[[D]], %[[BLOCK]] : index
// CHECK-NEXT:      scf.for %[[J:.*]] = %{{.*}} to %[[MAIN]] step
// CHECK-NEXT:        %[[AT:.*]] = arith.addi %[[ROW]], %[[J]] : index
// CHECK-NEXT:        memref.load %[[XF]][%[[AT]]] : memref<?xbf16>
// CHECK:             memref.store %{{.*}}, %[[OUTF]][%[[AT]]] : memref<?xbf16>
// CHECK-NEXT:      }
// CHECK-NEXT:      scf.for %[[K:.*]] = %[[MAIN]] to %[[D]] step
// CHECK-NEXT:        %[[AT_REST:.*]] = arith.addi %[[ROW]], %[[K]] : index
// CHECK-NEXT:        memref.load %[[XF]][%[[AT_REST]]] : memref<?xbf16>
// CHECK:             memref.store %{{.*}}, %[[OUTF]][%[[AT_REST]]] : memref<?xbf16>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
func.func @two_dims(%x: memref<?x?xbf16>, %s: memref<?x1xf32>, %out: memref<?x?xbf16>) {
  ew.kernel ins(%x, %s : memref<?x?xbf16>, memref<?x1xf32>) outs(%out : memref<?x?xbf16>) {
  ^bb0(%xs: bf16, %ss: f32):
    %xf = arith.extf %xs : bf16 to f32
    %m = arith.mulf %xf, %ss : f32
    %r = arith.truncf %m : f32 to bf16
    ew.yield %r : bf16
  }
  func.return
}
