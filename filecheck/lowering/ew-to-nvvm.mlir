// RUN: xfuse-opt %s --split-input-file -p ew-to-nvvm | filecheck %s
// RUN: xfuse-opt %s --split-input-file -p 'ew-to-nvvm{math=ptx-approx}' | filecheck %s --check-prefix=PTX
// RUN: xfuse-opt %s --split-input-file -p 'ew-to-nvvm,ew-expand-math,ew-to-llvm{packed=false}' | filecheck %s --check-prefix=LLVM

// A bias under a 2-D input: the kernel becomes an entry taking one pointer per operand and the
// iteration's two dynamic sizes. The first index and the stride of the grid-stride loop come from
// the special registers; the vector loop runs when every pointer is 16-byte aligned and rows are
// whole vectors, loading 4 floats of x, and of b at the row position of the first element.
// CHECK-LABEL: func.func @bias_tanh_kernel0
// CHECK-SAME:    (%[[X:.*]]: !llvm.ptr, %[[B:.*]]: !llvm.ptr, %[[OUT:.*]]: !llvm.ptr, %[[T:.*]]: i64, %[[D:.*]]: i64)
// CHECK:         %[[N:.*]] = arith.muli %[[T]], %[[D]] : i64
// CHECK:         %[[NTID:.*]] = llvm.call_intrinsic "llvm.nvvm.read.ptx.sreg.ntid.x"() : () -> i32
// CHECK:         %[[BLOCK:.*]] = llvm.call_intrinsic "llvm.nvvm.read.ptx.sreg.ctaid.x"() : () -> i32
// CHECK:         %[[TID:.*]] = llvm.call_intrinsic "llvm.nvvm.read.ptx.sreg.tid.x"() : () -> i32
// CHECK:         %[[FIRST:.*]] = llvm.add %{{.*}}, %{{.*}} : i64
// CHECK:         %[[GRID:.*]] = llvm.call_intrinsic "llvm.nvvm.read.ptx.sreg.nctaid.x"() : () -> i32
// CHECK:         %[[STRIDE:.*]] = llvm.mul %{{.*}}, %{{.*}} : i64
// CHECK:         llvm.ptrtoint %[[X]] : !llvm.ptr to i64
// CHECK:         %[[ROW:.*]] = llvm.urem %[[D]], %{{.*}} : i64
// CHECK:         %[[VECTORS:.*]] = llvm.select %{{.*}}, %{{.*}}, %{{.*}} : i1, i64
// CHECK:         scf.for %[[V:.*]] = %[[FIRST]] to %[[VECTORS]] step %[[STRIDE]] : i64 {
// CHECK:           %[[BASE:.*]] = llvm.mul %[[V]], %{{.*}} : i64
// CHECK:           %[[COLUMN:.*]] = arith.remui %[[BASE]], %[[D]] : i64
// CHECK:           %[[PX:.*]] = llvm.getelementptr inbounds %[[X]][%[[BASE]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:      %[[VX:.*]] = llvm.load %[[PX]] {alignment = 16 : i64} : !llvm.ptr -> vector<4xf32>
// CHECK:           %[[PB:.*]] = llvm.getelementptr inbounds %[[B]][%[[COLUMN]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:      %[[VB:.*]] = llvm.load %[[PB]] {alignment = 16 : i64} : !llvm.ptr -> vector<4xf32>
// CHECK-COUNT-4:   math.tanh
// CHECK:           llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr
// CHECK-NEXT:    }
// The scalar loop takes the rest: the tail, or everything when the vector loop cannot run.
// CHECK:         %[[DONE:.*]] = llvm.mul %[[VECTORS]], %{{.*}} : i64
// CHECK-NEXT:    %[[START:.*]] = llvm.add %[[DONE]], %[[FIRST]] : i64
// CHECK-NEXT:    scf.for %[[I:.*]] = %[[START]] to %[[N]] step %[[STRIDE]] : i64 {
// CHECK:           llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> f32
// CHECK:           math.tanh
// CHECK:           llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return

// PTX-LABEL: func.func @bias_tanh_kernel0
// PTX-NOT:     math.tanh
// PTX:         llvm.call_intrinsic "llvm.nvvm.tanh.approx.f32"(%{{.*}}) : (f32) -> f32

// After ew-to-llvm the entry is an llvm.func whose loops are branches on i64 indices.
// LLVM-LABEL: llvm.func @bias_tanh_kernel0
// LLVM-SAME:    (%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64)
// LLVM:         llvm.urem %{{.*}}, %{{.*}} : i64
// LLVM:         llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr -> vector<4xf32>
// LLVM:         llvm.cond_br
// LLVM-NOT:     math.
func.func @bias_tanh(%x: memref<?x?xf32>, %b: memref<?xf32>, %out: memref<?x?xf32>) {
  ew.kernel ins(%x, %b : memref<?x?xf32>, memref<?xf32>) outs(%out : memref<?x?xf32>) {
  ^bb0(%xs: f32, %bs: f32):
    %h = arith.addf %xs, %bs : f32
    %t = math.tanh %h : f32
    ew.yield %t : f32
  }
  func.return
}

// -----

// A row of the last two dims under a 3-D input: those two dims are one run of the iteration
// space (`coalesced_axes`, as ew-kernel-to-loops'), so the row's index is one remainder of the
// linear index by their product, with no division, and the vector loop runs where that product
// is a multiple of the 4 lanes.
// CHECK-LABEL: func.func @row_under_3d_kernel0
// CHECK-SAME:    (%{{.*}}: !llvm.ptr, %[[Y:.*]]: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %[[M:.*]]: i64, %[[K:.*]]: i64)
// CHECK:         %[[ROW:.*]] = arith.muli %[[M]], %[[K]] : i64
// CHECK:         llvm.urem %[[ROW]], %{{.*}} : i64
// CHECK:         scf.for %[[V:.*]] = %{{.*}} to %{{.*}} step %{{.*}} : i64 {
// CHECK:           %[[BASE:.*]] = llvm.mul %[[V]], %{{.*}} : i64
// CHECK-NOT:       {{arith.divui|llvm.udiv|llvm.urem}}
// CHECK:           %[[ROW_INDEX:.*]] = arith.remui %[[BASE]], %[[ROW]] : i64
// CHECK-NOT:       {{arith.divui|arith.remui|llvm.udiv|llvm.urem}}
// CHECK:           llvm.getelementptr inbounds %[[Y]][%[[ROW_INDEX]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NOT:       {{arith.divui|arith.remui|llvm.udiv|llvm.urem}}
// CHECK:         scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} : i64 {
// CHECK-NOT:       {{arith.divui|llvm.udiv|llvm.urem}}
// CHECK:           %[[SCALAR_ROW_INDEX:.*]] = arith.remui %[[I]], %[[ROW]] : i64
// CHECK-NOT:       {{arith.divui|arith.remui|llvm.udiv|llvm.urem}}
// CHECK:           llvm.getelementptr inbounds %[[Y]][%[[SCALAR_ROW_INDEX]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NOT:       {{arith.divui|arith.remui|llvm.udiv|llvm.urem}}
// CHECK:         func.return
func.func @row_under_3d(%x: memref<?x?x?xf32>, %y: memref<?x?xf32>, %out: memref<?x?x?xf32>) {
  ew.kernel ins(%x, %y : memref<?x?x?xf32>, memref<?x?xf32>) outs(%out : memref<?x?x?xf32>) {
  ^bb0(%xs: f32, %ys: f32):
    %p = arith.mulf %xs, %ys : f32
    ew.yield %p : f32
  }
  func.return
}
