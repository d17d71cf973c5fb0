// RUN: xfuse-opt %s -p ew-workspace | filecheck %s
// RUN: xfuse-opt %s -p 'ew-workspace{alignment=16}' | filecheck %s --check-prefix=ALIGN16

// Each temporary becomes a view of a trailing workspace argument: the first at byte 0, the next
// after the first's 4 * n bytes rounded up to 64 (the offset plus a rounded size: a flat sum);
// deallocs disappear.
// CHECK-LABEL: func.func @two_temporaries
// CHECK-SAME:    (%[[X:.*]]: memref<?xf32>, %[[OUT:.*]]: memref<?xf32>, %[[WS:.*]]: memref<?xi8>)
// CHECK:         %[[N:.*]] = memref.dim %[[X]], %{{.*}} : memref<?xf32>
// CHECK:         %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[T:.*]] = memref.view %[[WS]][%[[ZERO]]][%[[N]]] : memref<?xi8> to memref<?xf32>
// CHECK:         ew.kernel ins(%[[X]] : memref<?xf32>) outs(%[[T]] : memref<?xf32>)
// CHECK:         %[[FOUR:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %[[BYTES:.*]] = arith.muli %[[FOUR]], %[[N]] : index
// CHECK-NEXT:    %[[PAD:.*]] = arith.constant 63 : index
// CHECK-NEXT:    %[[PADDED:.*]] = arith.addi %[[BYTES]], %[[PAD]] : index
// CHECK-NEXT:    %[[MASK:.*]] = arith.constant -64 : index
// CHECK-NEXT:    %[[ROUNDED:.*]] = arith.andi %[[PADDED]], %[[MASK]] : index
// CHECK-NEXT:    %[[OFFSET:.*]] = arith.addi %[[ZERO]], %[[ROUNDED]] : index
// CHECK-NEXT:    %[[U:.*]] = memref.view %[[WS]][%[[OFFSET]]][] : memref<?xi8> to memref<5xf64>
// CHECK:         ew.kernel ins(%[[T]], %[[U]] : memref<?xf32>, memref<5xf64>)
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     memref.dealloc
// CHECK:         func.return

// The companion takes the original arguments and returns the bytes: both buffers, aligned.
// CHECK-LABEL: func.func @two_temporaries_workspace_bytes
// CHECK-SAME:    (%[[X:.*]]: memref<?xf32>, %{{.*}}: memref<?xf32>) -> index
// CHECK:         %[[N:.*]] = memref.dim %[[X]], %{{.*}} : memref<?xf32>
// CHECK:         arith.muli %{{.*}}, %[[N]] : index
// CHECK:         %[[R1:.*]] = arith.andi
// CHECK-NEXT:    %[[E1:.*]] = arith.addi %{{.*}}, %[[R1]] : index
// CHECK-NEXT:    %[[EIGHT:.*]] = arith.constant 8 : index
// CHECK-NEXT:    %[[FIVE:.*]] = arith.constant 5 : index
// CHECK-NEXT:    %[[B2:.*]] = arith.muli %[[EIGHT]], %[[FIVE]] : index
// CHECK:         %[[P2:.*]] = arith.addi %[[B2]], %{{.*}} : index
// CHECK:         %[[R2:.*]] = arith.andi %[[P2]], %{{.*}} : index
// CHECK-NEXT:    %[[E2:.*]] = arith.addi %[[E1]], %[[R2]] : index
// CHECK-NEXT:    func.return %[[E2]] : index

// ALIGN16-LABEL: func.func @two_temporaries
// ALIGN16:         arith.constant 15 : index
// ALIGN16:         arith.constant -16 : index
// ALIGN16:         memref.view
func.func @two_temporaries(%x: memref<?xf32>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %t = memref.alloc(%n) : memref<?xf32>
  ew.kernel ins(%x : memref<?xf32>) outs(%t : memref<?xf32>) {
  ^bb0(%xs: f32):
    %e = math.exp %xs : f32
    ew.yield %e : f32
  }
  %u = memref.alloc() : memref<5xf64>
  ew.kernel ins(%t, %u : memref<?xf32>, memref<5xf64>) outs(%out : memref<?xf32>) {
  ^bb0(%ts: f32, %us: f64):
    %s = arith.truncf %us : f64 to f32
    %d = arith.subf %ts, %s : f32
    ew.yield %d : f32
  }
  memref.dealloc %u : memref<5xf64>
  memref.dealloc %t : memref<?xf32>
  func.return
}

// A function without temporaries (the fused pipeline) is left alone: no workspace, no companion.
// CHECK-LABEL: func.func @fused
// CHECK-SAME:    (%{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>) {
// CHECK-NOT:     func.func @fused_workspace_bytes
func.func @fused(%x: memref<?xf32>, %out: memref<?xf32>) {
  ew.kernel ins(%x : memref<?xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%xs: f32):
    %e = math.exp %xs : f32
    ew.yield %e : f32
  }
  func.return
}

// A nested module's function gets its workspace too, its companion beside it.
// CHECK-LABEL: builtin.module
// CHECK-LABEL:   func.func @nested
// CHECK-SAME:      (%[[X:.*]]: memref<?xf32>, %{{.*}}: memref<?xf32>, %[[WS:.*]]: memref<?xi8>)
// CHECK:           memref.view %[[WS]]
// CHECK-NOT:       memref.alloc
// CHECK-LABEL:   func.func @nested_workspace_bytes
// CHECK-SAME:      -> index
builtin.module {
  func.func @nested(%x: memref<?xf32>, %out: memref<?xf32>) {
    %c0 = arith.constant 0 : index
    %n = memref.dim %x, %c0 : memref<?xf32>
    %t = memref.alloc(%n) : memref<?xf32>
    ew.kernel ins(%x : memref<?xf32>) outs(%t : memref<?xf32>) {
    ^bb0(%xs: f32):
      %e = math.exp %xs : f32
      ew.yield %e : f32
    }
    ew.kernel ins(%t : memref<?xf32>) outs(%out : memref<?xf32>) {
    ^bb0(%ts: f32):
      %d = arith.addf %ts, %ts : f32
      ew.yield %d : f32
    }
    memref.dealloc %t : memref<?xf32>
    func.return
  }
}
