// RUN: xfuse-opt %s -p ew-to-llvm | filecheck %s
// RUN: xfuse-opt %s -p 'ew-to-llvm{fastmath=contract}' | filecheck %s --check-prefix=CONTRACT
// RUN: xfuse-opt %s -p 'ew-to-llvm{f16c=true}' | filecheck %s --check-prefix=F16C
// RUN: xfuse-opt %s -p 'ew-to-llvm{avx512bf16=true}' | filecheck %s --check-prefix=BF16HW
// RUN: xfuse-opt %s -p 'ew-to-llvm{packed=false}' | filecheck %s --check-prefix=UNPACKED

// malloc and free are declared when a temporary needs them (see @temporary below).
// CHECK-DAG:   llvm.func @malloc(i64) -> !llvm.ptr
// CHECK-DAG:   llvm.func @free(!llvm.ptr)

// Memref arguments become a pointer plus one i64 per dynamic dim; loads and stores index
// row-major with a getelementptr; the loop becomes branches with an i64 induction variable.
// Float ops carry their own fast-math flags only (`fastmath=contract` adds `contract`).
// CHECK-LABEL: llvm.func @add
// CHECK-SAME:    (%[[X:.*]]: !llvm.ptr, %[[N:.*]]: i64, %[[Y:.*]]: !llvm.ptr, %{{.*}}: i64, %[[OUT:.*]]: !llvm.ptr, %{{.*}}: i64)
// CHECK:         llvm.br ^[[HEAD:.*]](%{{.*}} : i64)
// CHECK:       ^[[HEAD]](%[[I:.*]]: i64):
// CHECK-NEXT:    %[[MORE:.*]] = llvm.icmp "slt" %[[I]], %[[N]] : i64
// CHECK-NEXT:    llvm.cond_br %[[MORE]]
// CHECK:         %[[PX:.*]] = llvm.getelementptr inbounds %[[X]][%[[I]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    %[[VX:.*]] = llvm.load %[[PX]] : !llvm.ptr -> f32
// CHECK:         %[[S:.*]] = llvm.fadd %[[VX]], %{{.*}} : f32
// CHECK-NEXT:    %[[M:.*]] = llvm.call_intrinsic "llvm.maximum.f32"(%[[S]], %{{.*}}) : (f32, f32) -> f32
// CHECK-NEXT:    %[[PO:.*]] = llvm.getelementptr inbounds %[[OUT]][%[[I]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    llvm.store %[[M]], %[[PO]] : f32, !llvm.ptr
// CONTRACT-LABEL: llvm.func @add
// CONTRACT:        llvm.fadd %{{.*}}, %{{.*}} {fastmathFlags = #llvm.fastmath<contract>} : f32
func.func @add(%x: memref<?xf32>, %y: memref<?xf32>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %n = memref.dim %x, %c0 : memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %a = memref.load %x[%i] : memref<?xf32>
    %b = memref.load %y[%i] : memref<?xf32>
    %s = arith.addf %a, %b : f32
    %m = arith.maximumf %s, %zero : f32
    memref.store %m, %out[%i] : memref<?xf32>
  }
  func.return
}

// 2-D: the linear index is i * d + j, with the static inner size as a constant. bf16 loads as
// i16, widens by a shift into the high half (a NaN quieted: LLVM drops x * 1, so it would not
// quiet it), and narrows with round-to-nearest-
// even in integer ops: add 0x7fff plus the lowest kept bit, drop the low half; NaN selected.
// CHECK-LABEL: llvm.func @bf16_matrix
// CHECK-SAME:    (%[[X:.*]]: !llvm.ptr, %{{.*}}: i64, %[[OUT:.*]]: !llvm.ptr, %{{.*}}: i64)
// CHECK:       ^{{.*}}(%[[I:.*]]: i64):
// CHECK:       ^{{.*}}(%[[J:.*]]: i64):
// CHECK:         %[[EIGHT:.*]] = llvm.mlir.constant(8) : i64
// CHECK-NEXT:    %[[ROW:.*]] = llvm.mul %[[I]], %[[EIGHT]] : i64
// CHECK-NEXT:    %[[LIN:.*]] = llvm.add %[[ROW]], %[[J]] : i64
// CHECK-NEXT:    %[[P:.*]] = llvm.getelementptr inbounds %[[X]][%[[LIN]]] : (!llvm.ptr, i64) -> !llvm.ptr, i16
// CHECK-NEXT:    %[[BITS:.*]] = llvm.load %[[P]] : !llvm.ptr -> i16
// CHECK-NEXT:    %[[WIDE:.*]] = llvm.zext %[[BITS]] : i16 to i32
// CHECK:         %[[HIGH:.*]] = llvm.shl %[[WIDE]], %{{.*}} : i32
// CHECK:         %[[QUIETED:.*]] = llvm.select %{{.*}}, %{{.*}}, %[[HIGH]] : i1, i32
// CHECK-NEXT:    %[[F:.*]] = llvm.bitcast %[[QUIETED]] : i32 to f32
// CHECK:         %[[HALF:.*]] = llvm.mlir.constant(32767 : i32) : i32
// CHECK-NEXT:    %[[BIASED:.*]] = llvm.add %{{.*}}, %[[HALF]] : i32
// CHECK-NEXT:    %[[ROUNDED:.*]] = llvm.add %[[BIASED]], %{{.*}} : i32
// CHECK:         %[[KEPT:.*]] = llvm.lshr %[[ROUNDED]], %{{.*}} : i32
// CHECK:         %[[NAN:.*]] = llvm.fcmp "uno" %[[D:.*]], %[[D]] : f32
// CHECK-NEXT:    %[[CHOSEN:.*]] = llvm.select %[[NAN]], %{{.*}}, %[[KEPT]] : i1, i32
// CHECK-NEXT:    %[[NARROW:.*]] = llvm.trunc %[[CHOSEN]] : i32 to i16
// CHECK:         llvm.store %[[NARROW]], %{{.*}} : i16, !llvm.ptr
// CHECK-NOT:     llvm.fptrunc
func.func @bf16_matrix(%x: memref<?x8xbf16>, %out: memref<?x8xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %one = arith.constant 1.0 : f32
  %t = memref.dim %x, %c0 : memref<?x8xbf16>
  scf.for %i = %c0 to %t step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      %v = memref.load %x[%i, %j] : memref<?x8xbf16>
      %f = arith.extf %v : bf16 to f32
      %d = arith.mulf %f, %one : f32
      %r = arith.truncf %d : f32 to bf16
      memref.store %r, %out[%i, %j] : memref<?x8xbf16>
    }
  }
  func.return
}

// A widening whose every user is + - * / with a non-constant operand is not quieted: the
// hardware's add quiets a signaling NaN itself, to the same bits. So is one whose users are a
// compare, and a select's arm multiplied by a constant LLVM keeps (x * 0.5, not x * 1).
// CHECK-LABEL: llvm.func @bf16_sum
// CHECK:         %[[BITS:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i16
// CHECK:         %[[WIDE:.*]] = llvm.zext %[[BITS]] : i16 to i32
// CHECK-NEXT:    %[[SIXTEEN:.*]] = llvm.mlir.constant(16 : i32) : i32
// CHECK-NEXT:    %[[HIGH:.*]] = llvm.shl %[[WIDE]], %[[SIXTEEN]] : i32
// CHECK-NEXT:    %[[F:.*]] = llvm.bitcast %[[HIGH]] : i32 to f32
// CHECK-NEXT:    llvm.fadd %[[F]], %{{.*}} : f32
func.func @bf16_sum(%x: memref<?xbf16>, %y: memref<?xf32>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xbf16>
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %x[%i] : memref<?xbf16>
    %w = memref.load %y[%i] : memref<?xf32>
    %f = arith.extf %v : bf16 to f32
    %s = arith.addf %f, %w : f32
    memref.store %s, %out[%i] : memref<?xf32>
  }
  func.return
}

// CHECK-LABEL: llvm.func @bf16_clamped_half
// CHECK:         %[[HIGH:.*]] = llvm.shl %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    %[[F:.*]] = llvm.bitcast %[[HIGH]] : i32 to f32
// CHECK:         %[[ABOVE:.*]] = llvm.fcmp "ogt" %[[F]], %{{.*}} : f32
// CHECK-NEXT:    %[[CLAMPED:.*]] = llvm.select %[[ABOVE]], %{{.*}}, %[[F]] : i1, f32
// CHECK-NEXT:    llvm.fmul %[[CLAMPED]], %{{.*}} : f32
func.func @bf16_clamped_half(%x: memref<?xbf16>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %limit = arith.constant 10.0 : f32
  %half = arith.constant 0.5 : f32
  %n = memref.dim %x, %c0 : memref<?xbf16>
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %x[%i] : memref<?xbf16>
    %f = arith.extf %v : bf16 to f32
    %above = arith.cmpf ogt, %f, %limit : f32
    %clamped = arith.select %above, %limit, %f : f32
    %h = arith.mulf %clamped, %half : f32
    memref.store %h, %out[%i] : memref<?xf32>
  }
  func.return
}

// So is one whose users reach such arithmetic through |.| and negation, give a copysign its
// sign, or are divided by what `llvm.ldexp` scaled (exp's 2^n with ew-expand-math{ldexp}).
// CHECK-LABEL: llvm.func @bf16_through_sign_ops
// CHECK:         %[[HIGH:.*]] = llvm.shl %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    %[[F:.*]] = llvm.bitcast %[[HIGH]] : i32 to f32
// CHECK-NEXT:    llvm.call_intrinsic "llvm.copysign.f32"(%{{.*}}, %[[F]])
// CHECK:         llvm.fdiv %[[F]], %{{.*}} : f32
func.func @bf16_through_sign_ops(%x: memref<?xbf16>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  %half = arith.constant 0.5 : f32
  %two = arith.constant 2 : i32
  %n = memref.dim %x, %c0 : memref<?xbf16>
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %x[%i] : memref<?xbf16>
    %f = arith.extf %v : bf16 to f32
    %sign = math.copysign %one, %f : f32
    %magnitude = math.absf %f : f32
    %minus = arith.negf %magnitude : f32
    %m = arith.mulf %minus, %half : f32
    %scaled = llvm.call_intrinsic "llvm.ldexp.f32.i32"(%m, %two) : (f32, i32) -> f32
    %q = arith.divf %f, %scaled : f32
    %r = arith.mulf %q, %sign : f32
    memref.store %r, %out[%i] : memref<?xf32>
  }
  func.return
}

// maximumf (relu) passes a NaN on, maybe signaling: then narrowed (which quiets it) the widening
// is not quieted, stored as it is it is.
// CHECK-LABEL: llvm.func @bf16_relu_narrowed
// CHECK:         %[[HIGH:.*]] = llvm.shl %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    %[[F:.*]] = llvm.bitcast %[[HIGH]] : i32 to f32
// CHECK-NEXT:    llvm.call_intrinsic "llvm.maximum.f32"(%[[F]], %{{.*}})
// CHECK-LABEL: llvm.func @bf16_relu_stored
// CHECK:         %[[HIGH:.*]] = llvm.shl %{{.*}}, %{{.*}} : i32
// CHECK:         %[[QUIETED:.*]] = llvm.select %{{.*}}, %{{.*}}, %[[HIGH]] : i1, i32
// CHECK-NEXT:    %[[F:.*]] = llvm.bitcast %[[QUIETED]] : i32 to f32
// CHECK-NEXT:    llvm.call_intrinsic "llvm.maximum.f32"(%[[F]], %{{.*}})
func.func @bf16_relu_narrowed(%x: memref<?xbf16>, %out: memref<?xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %n = memref.dim %x, %c0 : memref<?xbf16>
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %x[%i] : memref<?xbf16>
    %f = arith.extf %v : bf16 to f32
    %r = arith.maximumf %f, %zero : f32
    %narrow = arith.truncf %r : f32 to bf16
    memref.store %narrow, %out[%i] : memref<?xbf16>
  }
  func.return
}
func.func @bf16_relu_stored(%x: memref<?xbf16>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %n = memref.dim %x, %c0 : memref<?xbf16>
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %x[%i] : memref<?xbf16>
    %f = arith.extf %v : bf16 to f32
    %r = arith.maximumf %f, %zero : f32
    memref.store %r, %out[%i] : memref<?xf32>
  }
  func.return
}

// A clamp (an ordered compare of s and s where it is false, as ew-expand-math's) gives NaN for
// a NaN s, so it is no constant LLVM could fold x / c to: x / (x * x clamped + 1) quiets x
// itself. Where a NaN takes the constant (an unordered compare) the widening is quieted.
// CHECK-LABEL: llvm.func @bf16_over_clamp
// CHECK:         %[[HIGH:.*]] = llvm.shl %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    %[[F:.*]] = llvm.bitcast %[[HIGH]] : i32 to f32
// CHECK-NEXT:    %[[SQUARE:.*]] = llvm.fmul %[[F]], %[[F]] : f32
// CHECK-NEXT:    %[[ABOVE:.*]] = llvm.fcmp "ogt" %[[SQUARE]], %[[LIMIT:.*]] : f32
// CHECK-NEXT:    %[[CLAMPED:.*]] = llvm.select %[[ABOVE]], %[[LIMIT]], %[[SQUARE]] : i1, f32
// CHECK:         %[[SUM:.*]] = llvm.fadd %[[CLAMPED]], %{{.*}} : f32
// CHECK-NEXT:    llvm.fdiv %[[F]], %[[SUM]] : f32
// CHECK-LABEL: llvm.func @bf16_over_unordered_clamp
// CHECK:         %[[HIGH:.*]] = llvm.shl %{{.*}}, %{{.*}} : i32
// CHECK:         %[[QUIETED:.*]] = llvm.select %{{.*}}, %{{.*}}, %[[HIGH]] : i1, i32
// CHECK-NEXT:    llvm.bitcast %[[QUIETED]] : i32 to f32
func.func @bf16_over_clamp(%x: memref<?xbf16>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %limit = arith.constant 10.0 : f32
  %one = arith.constant 1.0 : f32
  %n = memref.dim %x, %c0 : memref<?xbf16>
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %x[%i] : memref<?xbf16>
    %f = arith.extf %v : bf16 to f32
    %square = arith.mulf %f, %f : f32
    %above = arith.cmpf ogt, %square, %limit : f32
    %clamped = arith.select %above, %limit, %square : f32
    %sum = arith.addf %clamped, %one : f32
    %q = arith.divf %f, %sum : f32
    memref.store %q, %out[%i] : memref<?xf32>
  }
  func.return
}
func.func @bf16_over_unordered_clamp(%x: memref<?xbf16>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %limit = arith.constant 10.0 : f32
  %one = arith.constant 1.0 : f32
  %n = memref.dim %x, %c0 : memref<?xbf16>
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %x[%i] : memref<?xbf16>
    %f = arith.extf %v : bf16 to f32
    %square = arith.mulf %f, %f : f32
    %above = arith.cmpf ugt, %square, %limit : f32
    %clamped = arith.select %above, %limit, %square : f32
    %sum = arith.addf %clamped, %one : f32
    %q = arith.divf %f, %sum : f32
    memref.store %q, %out[%i] : memref<?xf32>
  }
  func.return
}

// A temporary in the workspace (from ew-workspace): its pointer is the workspace pointer moved
// on by the byte shift; its dynamic size comes along.
// CHECK-LABEL: llvm.func @workspace_view
// CHECK-SAME:    (%[[X:.*]]: !llvm.ptr, %[[N:.*]]: i64, %[[WS:.*]]: !llvm.ptr, %{{.*}}: i64)
// CHECK:         %[[SHIFT:.*]] = llvm.mlir.constant(64) : i64
// CHECK-NEXT:    %[[T:.*]] = llvm.getelementptr inbounds %[[WS]][%[[SHIFT]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK:         %[[P:.*]] = llvm.getelementptr inbounds %[[T]][%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    llvm.store %{{.*}}, %[[P]] : f32, !llvm.ptr
// CHECK-NOT:     llvm.call
// CHECK:         llvm.return
func.func @workspace_view(%x: memref<?xf32>, %workspace: memref<?xi8>) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %t = memref.view %workspace[%c64][%n] : memref<?xi8> to memref<?xf32>
  %v = memref.load %x[%c0] : memref<?xf32>
  memref.store %v, %t[%c0] : memref<?xf32>
  func.return
}

// A contiguous memref collapsed to one dim (ew-kernel-to-loops reads a kernel's full-size
// arrays so): the same pointer, indexed by the linear index; its size is the product of the
// collapsed sizes (static where they all are).
// CHECK-LABEL: llvm.func @collapsed
// CHECK-SAME:    (%[[X:.*]]: !llvm.ptr, %[[T:.*]]: i64, %[[D:.*]]: i64, %[[S:.*]]: !llvm.ptr) -> i64
// CHECK:         %[[N:.*]] = llvm.mul %[[T]], %[[D]] : i64
// CHECK:         %[[P:.*]] = llvm.getelementptr inbounds %[[X]][%[[I:.*]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    %[[V:.*]] = llvm.load %[[P]] : !llvm.ptr -> f32
// CHECK-NEXT:    %[[Q:.*]] = llvm.getelementptr inbounds %[[S]][%[[I]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    llvm.store %[[V]], %[[Q]] : f32, !llvm.ptr
// CHECK-NEXT:    llvm.return %[[N]] : i64
func.func @collapsed(%x: memref<?x?xf32>, %s: memref<2x4xf32>) -> index {
  %c0 = arith.constant 0 : index
  %c7 = arith.constant 7 : index
  %flat = memref.collapse_shape %x [[0, 1]] : memref<?x?xf32> into memref<?xf32>
  %static = memref.collapse_shape %s [[0, 1]] : memref<2x4xf32> into memref<8xf32>
  %n = memref.dim %flat, %c0 : memref<?xf32>
  %v = memref.load %flat[%c7] : memref<?xf32>
  memref.store %v, %static[%c7] : memref<8xf32>
  func.return %n : index
}

// A memref seen with each run of its dims as one (ew-kernel-to-loops' views of arrays not read at
// the linear index): the same pointer, the middle group's size d1 * 1 * d3; indices divided out
// of a merged loop's index are LLVM's unsigned division and remainder.
// CHECK-LABEL: llvm.func @collapsed_runs
// CHECK-SAME:    (%[[X:.*]]: !llvm.ptr, %[[D0:.*]]: i64, %[[D1:.*]]: i64, %[[D3:.*]]: i64, %[[D4:.*]]: i64, %[[I:.*]]: i64, %[[N:.*]]: i64) -> f32
// CHECK:         %[[ONE:.*]] = llvm.mlir.constant(1) : i64
// CHECK-NEXT:    %[[D11:.*]] = llvm.mul %[[D1]], %[[ONE]] : i64
// CHECK-NEXT:    %[[D13:.*]] = llvm.mul %[[D11]], %[[D3]] : i64
// CHECK-NEXT:    %[[K:.*]] = llvm.urem %[[I]], %[[N]] : i64
// CHECK-NEXT:    %[[Q:.*]] = llvm.udiv %[[I]], %[[N]] : i64
// CHECK-NEXT:    %[[ROW:.*]] = llvm.mul %[[Q]], %[[D13]] : i64
// CHECK-NEXT:    %[[AT:.*]] = llvm.add %[[ROW]], %[[K]] : i64
// CHECK-NEXT:    %[[LINE:.*]] = llvm.mul %[[AT]], %[[D4]] : i64
// CHECK-NEXT:    %[[ELEMENT:.*]] = llvm.add %[[LINE]], %[[K]] : i64
// CHECK-NEXT:    llvm.getelementptr inbounds %[[X]][%[[ELEMENT]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
func.func @collapsed_runs(%x: memref<?x?x1x?x?xf32>, %i: index, %n: index) -> f32 {
  %runs = memref.collapse_shape %x [[0], [1, 2, 3], [4]] : memref<?x?x1x?x?xf32> into memref<?x?x?xf32>
  %k = arith.remui %i, %n : index
  %q = arith.divui %i, %n : index
  %v = memref.load %runs[%q, %k, %k] : memref<?x?x?xf32>
  func.return %v : f32
}

// Temporaries: alloc is malloc of the byte size, dealloc is free; libm declarations carry over.
// CHECK-LABEL: llvm.func @temporary
// CHECK:         %[[BYTES:.*]] = llvm.mul %{{.*}}, %{{.*}} : i64
// CHECK-NEXT:    %[[T:.*]] = llvm.call @malloc(%[[BYTES]]) : (i64) -> !llvm.ptr
// CHECK:         llvm.call @tanhf(%{{.*}}) : (f32) -> f32
// CHECK:         llvm.call @free(%[[T]]) : (!llvm.ptr) -> ()
// CHECK-NEXT:    llvm.return
// CHECK:       llvm.func @tanhf(f32) -> f32
func.func @temporary(%x: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %t = memref.alloc(%n) : memref<?xf32>
  %v = memref.load %x[%c0] : memref<?xf32>
  %h = func.call @tanhf(%v) : (f32) -> f32
  memref.store %h, %t[%c0] : memref<?xf32>
  memref.dealloc %t : memref<?xf32>
  func.return
}
func.func private @tanhf(f32) -> f32

// A static strided layout: x[i, j] is element 3 + i * 10 + j * 2 from the pointer (a stride of 1
// needs no multiply); the dynamic size is still an argument.
// CHECK-LABEL: llvm.func @strided
// CHECK-SAME:    (%[[X:.*]]: !llvm.ptr, %{{.*}}: i64, %[[OUT:.*]]: !llvm.ptr)
// CHECK:         %[[OFFSET:.*]] = llvm.mlir.constant(3) : i64
// CHECK-NEXT:    %[[S0:.*]] = llvm.mlir.constant(10) : i64
// CHECK-NEXT:    %[[ROW:.*]] = llvm.mul %[[I:.*]], %[[S0]] : i64
// CHECK-NEXT:    %[[PARTIAL:.*]] = llvm.add %[[OFFSET]], %[[ROW]] : i64
// CHECK-NEXT:    %[[S1:.*]] = llvm.mlir.constant(2) : i64
// CHECK-NEXT:    %[[COLUMN:.*]] = llvm.mul %[[J:.*]], %[[S1]] : i64
// CHECK-NEXT:    %[[LINEAR:.*]] = llvm.add %[[PARTIAL]], %[[COLUMN]] : i64
// CHECK-NEXT:    %[[P:.*]] = llvm.getelementptr inbounds %[[X]][%[[LINEAR]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    %[[V:.*]] = llvm.load %[[P]] : !llvm.ptr -> f32
// CHECK:         %[[OFFSET2:.*]] = llvm.mlir.constant(1) : i64
// CHECK-NEXT:    %[[LINEAR2:.*]] = llvm.add %[[OFFSET2]], %[[J]] : i64
// CHECK-NEXT:    llvm.getelementptr inbounds %[[OUT]][%[[LINEAR2]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
func.func @strided(%x: memref<?x4xf32, strided<[10, 2], offset: 3>>, %out: memref<4xf32, strided<[1], offset: 1>>) {
  %i = arith.constant 5 : index
  %j = arith.constant 1 : index
  %v = memref.load %x[%i, %j] : memref<?x4xf32, strided<[10, 2], offset: 3>>
  memref.store %v, %out[%j] : memref<4xf32, strided<[1], offset: 1>>
  func.return
}

// An op's own fast-math flags survive (the option only adds to them); math.fma is LLVM's fma
// intrinsic; sqrt at f32 and f64 in one function calls two intrinsics mangled by type.
// CHECK-LABEL: llvm.func @flags_fma_sqrt
// CHECK:         llvm.fmul %{{.*}}, %{{.*}} {fastmathFlags = #llvm.fastmath<fast>} : f32
// CHECK-NEXT:    llvm.intr.fma(%{{.*}}, %{{.*}}, %{{.*}}) : (f32, f32, f32) -> f32
// CHECK-NEXT:    llvm.intr.fma(%{{.*}}, %{{.*}}, %{{.*}}) : (f64, f64, f64) -> f64
// CHECK-NEXT:    llvm.call_intrinsic "llvm.sqrt.f32"(%{{.*}}) : (f32) -> f32
// CHECK-NEXT:    llvm.call_intrinsic "llvm.sqrt.f64"(%{{.*}}) : (f64) -> f64
// CONTRACT-LABEL: llvm.func @flags_fma_sqrt
// CONTRACT:        llvm.fmul %{{.*}}, %{{.*}} {fastmathFlags = #llvm.fastmath<fast>} : f32
func.func @flags_fma_sqrt(%a: f32, %b: f64) -> f64 {
  %m = arith.mulf %a, %a fastmath<fast> : f32
  %f = math.fma %m, %a, %a : f32
  %g = math.fma %b, %b, %b : f64
  %s = math.sqrt %f : f32
  %t = math.sqrt %g : f64
  %w = arith.extf %s : f32 to f64
  %r = arith.addf %w, %t : f64
  func.return %r : f64
}

// approx.rsqrt's estimated division keeps its mark (xfuse.codegen.native reads it in the llvm
// dialect); another division gains none.
// CHECK-LABEL: llvm.func @rsqrt_estimate
// CHECK-SAME:    (%[[A:.*]]: f32)
// CHECK:         %[[ROOT:.*]] = llvm.call_intrinsic "llvm.sqrt.f32"(%[[A]]) : (f32) -> f32
// CHECK-NEXT:    %[[ESTIMATE:.*]] = llvm.fdiv %{{.*}}, %[[ROOT]] {ew.rsqrt_estimate, fastmathFlags = #llvm.fastmath<arcp>} : f32
// CHECK-NEXT:    llvm.fdiv %[[ESTIMATE]], %[[A]] {fastmathFlags = #llvm.fastmath<arcp>} : f32
func.func @rsqrt_estimate(%a: f32) -> f32 {
  %one = arith.constant 1.0 : f32
  %root = math.sqrt %a : f32
  %estimate = arith.divf %one, %root fastmath<arcp> {ew.rsqrt_estimate} : f32
  %q = arith.divf %estimate, %a fastmath<arcp> : f32
  func.return %q : f32
}

// math.copysign (sigmoid's numerator) and math.absf are LLVM's intrinsics, mangled by type.
// CHECK-LABEL: llvm.func @copysign_absf
// CHECK-SAME:    (%[[A:.*]]: f32, %[[B:.*]]: f64)
// CHECK-NEXT:    %[[MAGNITUDE:.*]] = llvm.call_intrinsic "llvm.fabs.f32"(%[[A]]) : (f32) -> f32
// CHECK-NEXT:    %[[SIGNED:.*]] = llvm.call_intrinsic "llvm.copysign.f32"(%[[MAGNITUDE]], %[[A]]) : (f32, f32) -> f32
// CHECK-NEXT:    %[[WIDE:.*]] = llvm.fpext %[[SIGNED]] : f32 to f64
// CHECK-NEXT:    llvm.call_intrinsic "llvm.copysign.f64"(%[[B]], %[[WIDE]]) : (f64, f64) -> f64
func.func @copysign_absf(%a: f32, %b: f64) -> f64 {
  %m = math.absf %a : f32
  %s = math.copysign %m, %a : f32
  %w = arith.extf %s : f32 to f64
  %t = math.copysign %b, %w : f64
  func.return %t : f64
}

// The roundings (ew.floor, ew.ceil, ew.trunc, ew.rint) are LLVM's exact intrinsics.
// CHECK-LABEL: llvm.func @roundings
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK-NEXT:    %[[FLOOR:.*]] = llvm.call_intrinsic "llvm.floor.f32"(%[[X]]) : (f32) -> f32
// CHECK-NEXT:    %[[CEIL:.*]] = llvm.call_intrinsic "llvm.ceil.f32"(%[[FLOOR]]) : (f32) -> f32
// CHECK-NEXT:    %[[TRUNC:.*]] = llvm.call_intrinsic "llvm.trunc.f32"(%[[CEIL]]) : (f32) -> f32
// CHECK-NEXT:    llvm.call_intrinsic "llvm.roundeven.f32"(%[[TRUNC]]) : (f32) -> f32
func.func @roundings(%x: f32) -> f32 {
  %f = math.floor %x : f32
  %c = math.ceil %f : f32
  %t = math.trunc %c : f32
  %r = math.roundeven %t : f32
  func.return %r : f32
}

// math.fpowi (pow by a constant whole exponent) is `llvm.powi`, mangled by both types, with no
// fast-math flags: LLVM's multiplies for it cannot be contracted with the next op.
// CHECK-LABEL: llvm.func @powi
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK-NEXT:    %[[THREE:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK-NEXT:    %[[CUBE:.*]] = llvm.call_intrinsic "llvm.powi.f32.i32"(%[[X]], %[[THREE]]) : (f32, i32) -> f32
// CHECK-NEXT:    %[[WIDE:.*]] = llvm.fpext %[[CUBE]] : f32 to f64
// CHECK-NEXT:    llvm.call_intrinsic "llvm.powi.f64.i32"(%[[WIDE]], %[[THREE]]) : (f64, i32) -> f64
func.func @powi(%x: f32) -> f64 {
  %three = arith.constant 3 : i32
  %c = math.fpowi %x, %three : f32, i32
  %w = arith.extf %c : f32 to f64
  %p = math.fpowi %w, %three : f64, i32
  func.return %p : f64
}

// f64 -> f16 rounds once, in integer ops on the f64 bits (no fptrunc: without AVX-512 FP16 it is
// a call of compiler-rt's __truncdfhf2, which the JIT cannot resolve): below f16's normals an
// f64 add of 2^28 (whose ulp is f16's smallest subnormal) rounds; from 2^16 on it is inf.
// CHECK-LABEL: llvm.func @f64_to_f16
// CHECK:         %[[BITS:.*]] = llvm.bitcast %{{.*}} : f64 to i64
// CHECK-NOT:     llvm.fptrunc
// CHECK:         %[[MAGIC:.*]] = llvm.mlir.constant(4733283208366391296) : i64
// CHECK:         %[[SUM:.*]] = llvm.fadd %{{.*}}, %{{.*}} : f64
// CHECK-NEXT:    %[[SUM_BITS:.*]] = llvm.bitcast %[[SUM]] : f64 to i64
// CHECK-NEXT:    %{{.*}} = llvm.sub %[[SUM_BITS]], %[[MAGIC]] : i64
// CHECK:         %[[TWO_16:.*]] = llvm.mlir.constant(4679240012837945344) : i64
// CHECK-NEXT:    %[[HUGE:.*]] = llvm.icmp "uge" %{{.*}}, %[[TWO_16]] : i64
// CHECK-NEXT:    %[[INF:.*]] = llvm.mlir.constant(31744) : i64
// CHECK-NEXT:    llvm.select %[[HUGE]], %[[INF]], %{{.*}} : i1, i64
// CHECK:         %[[H:.*]] = llvm.trunc %{{.*}} : i64 to i16
// CHECK-NEXT:    %{{.*}} = llvm.bitcast %[[H]] : i16 to f16
// CHECK-NOT:     llvm.fptrunc
// CHECK:         llvm.return
func.func @f64_to_f16(%x: f64) -> f16 {
  %h = arith.truncf %x : f64 to f16
  func.return %h : f16
}

// f32 <-> f16 is integer code by default; with `f16c` (the target converts in hardware) it is
// `fptrunc`/`fpext`, while f64 -> f16 above stays integer code (one rounding, no library call).
// CHECK-LABEL: llvm.func @f32_f16
// CHECK-NOT:     llvm.fptrunc
// CHECK-NOT:     llvm.fpext
// CHECK:         llvm.return
// F16C-LABEL: llvm.func @f32_f16
// F16C-NEXT:    %[[H:.*]] = llvm.fptrunc %{{.*}} : f32 to f16
// F16C-NEXT:    %[[W:.*]] = llvm.fpext %[[H]] : f16 to f32
// F16C-NEXT:    llvm.return %[[W]] : f32
func.func @f32_f16(%x: f32) -> f32 {
  %h = arith.truncf %x : f32 to f16
  %w = arith.extf %h : f16 to f32
  func.return %w : f32
}

// f32 -> bf16 is integer code by default; with `avx512bf16` it calls the function that
// xfuse's code generation makes `fptrunc` to bfloat (`vcvtneps2bf16`), whose input treats
// subnormals as zero: a subnormal (or zero) goes in with the exponent's lowest bit set, and the
// 0x0080 that adds comes off the result. f64 -> bf16 stays integer code (one rounding).
// BF16HW:       llvm.func @xfuse.fptrunc.f32.bf16(f32) -> i16
// CHECK-LABEL: llvm.func @f32_bf16
// CHECK-NOT:     llvm.call
// CHECK:         llvm.return
// BF16HW-LABEL: llvm.func @f32_bf16
// BF16HW-NEXT:    %[[BITS:.*]] = llvm.bitcast %{{.*}} : f32 to i32
// BF16HW-NEXT:    %[[EXPONENT_FIELD:.*]] = llvm.mlir.constant(2139095040 : i32) : i32
// BF16HW-NEXT:    %[[EXPONENT:.*]] = llvm.and %[[BITS]], %[[EXPONENT_FIELD]] : i32
// BF16HW-NEXT:    %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// BF16HW-NEXT:    %[[TINY:.*]] = llvm.icmp "eq" %[[EXPONENT]], %[[ZERO]] : i32
// BF16HW-NEXT:    %[[LOWEST:.*]] = llvm.mlir.constant(8388608 : i32) : i32
// BF16HW-NEXT:    %[[LIFTED:.*]] = llvm.or %[[BITS]], %[[LOWEST]] : i32
// BF16HW-NEXT:    %[[OPERAND:.*]] = llvm.select %[[TINY]], %[[LIFTED]], %[[BITS]] : i1, i32
// BF16HW-NEXT:    %[[FLOAT:.*]] = llvm.bitcast %[[OPERAND]] : i32 to f32
// BF16HW-NEXT:    %[[ROUNDED:.*]] = llvm.call @xfuse.fptrunc.f32.bf16(%[[FLOAT]]) : (f32) -> i16
// BF16HW-NEXT:    %[[ULPS:.*]] = llvm.mlir.constant(128 : i16) : i16
// BF16HW-NEXT:    %[[LOWERED:.*]] = llvm.sub %[[ROUNDED]], %[[ULPS]] : i16
// BF16HW-NEXT:    %[[RESULT:.*]] = llvm.select %[[TINY]], %[[LOWERED]], %[[ROUNDED]] : i1, i16
// BF16HW-NEXT:    llvm.return %[[RESULT]] : i16
// BF16HW-LABEL: llvm.func @f64_bf16
// BF16HW-NOT:     llvm.call
// BF16HW:         llvm.return
func.func @f32_bf16(%x: f32) -> bf16 {
  %h = arith.truncf %x : f32 to bf16
  func.return %h : bf16
}
func.func @f64_bf16(%x: f64) -> bf16 {
  %h = arith.truncf %x : f64 to bf16
  func.return %h : bf16
}

// A function of memrefs also gets a packed entry: one pointer to its argument words, which the
// runtime calls (any number of arrays fits one ctypes call); `packed=false` leaves it out.
// CHECK-LABEL: llvm.func @copy(
// CHECK-LABEL: llvm.func @copy.packed
// CHECK-SAME:    (%[[WORDS:.*]]: !llvm.ptr)
// CHECK-NEXT:    %[[P0:.*]] = llvm.getelementptr inbounds %[[WORDS]][0] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:    %[[X:.*]] = llvm.load %[[P0]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT:    %[[P1:.*]] = llvm.getelementptr inbounds %[[WORDS]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:    %[[N:.*]] = llvm.load %[[P1]] : !llvm.ptr -> i64
// CHECK-NEXT:    llvm.call @copy(%[[X]], %[[N]]) : (!llvm.ptr, i64) -> ()
// CHECK-NEXT:    llvm.return
// UNPACKED-LABEL: llvm.func @copy(
// UNPACKED-NOT:   @copy.packed
func.func @copy(%x: memref<?xf32>) {
  func.return
}

// A call passes each memref as the callee takes it: its pointer, then its dynamic sizes (a
// static dim passes nothing). A private function (ew-kernel-to-loops puts each kernel in one)
// is internal, keeps its ew.no_inline, and gets no packed entry: only the runtime's entries do.
// CHECK-LABEL: llvm.func @caller
// CHECK-SAME:    (%[[X:.*]]: !llvm.ptr, %[[N:.*]]: i64, %[[Y:.*]]: !llvm.ptr)
// CHECK-NEXT:    llvm.call @caller.kernel0(%[[X]], %[[N]], %[[Y]]) : (!llvm.ptr, i64, !llvm.ptr) -> ()
// CHECK-LABEL: llvm.func @caller.packed
// CHECK-LABEL: llvm.func internal @caller.kernel0
// CHECK-SAME:    (%{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: !llvm.ptr) attributes {ew.no_inline}
// CHECK-NOT:   @caller.kernel0.packed
func.func @caller(%x: memref<?x4xf32>, %y: memref<3xf32>) {
  func.call @caller.kernel0(%x, %y) : (memref<?x4xf32>, memref<3xf32>) -> ()
  func.return
}
func.func private @caller.kernel0(%x: memref<?x4xf32>, %y: memref<3xf32>) attributes {ew.no_inline} {
  func.return
}

// A loop of part of a row (`ew.loop`, which ew-kernel-to-loops gives its head and remainder
// loops) has its header block named after its role, as LLVM IR shows it to
// xfuse.codegen.native.mark_loops (which vectorizes those loops with masks); a loop without
// one keeps a number. A memref's address as an index is its pointer as an i64.
// CHECK-LABEL: llvm.func @roles
// CHECK-SAME:    (%[[OUT:.*]]: !llvm.ptr, %[[N:.*]]: i64)
// CHECK:         %[[P:.*]] = llvm.ptrtoint %[[OUT]] : !llvm.ptr to i64
// CHECK:         llvm.br ^head(%{{.*}} : i64)
// CHECK:       ^head(%[[I:.*]]: i64):
// CHECK-NEXT:    llvm.icmp "slt" %[[I]], %[[P]] : i64
// CHECK:         llvm.br ^[[MAIN:bb[0-9]+]](%[[P]] : i64)
// CHECK:       ^[[MAIN]](%[[J:.*]]: i64):
// CHECK-NEXT:    llvm.icmp "slt" %[[J]], %[[N]] : i64
// CHECK:       ^remainder(%[[K:.*]]: i64):
// CHECK-NEXT:    llvm.icmp "slt" %[[K]], %[[N]] : i64
func.func @roles(%out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %n = memref.dim %out, %c0 : memref<?xf32>
  %p = "memref.extract_aligned_pointer_as_index"(%out) : (memref<?xf32>) -> index
  scf.for %i = %c0 to %p step %c1 {
    memref.store %zero, %out[%i] : memref<?xf32>
  } {ew.loop = "head"}
  scf.for %j = %p to %n step %c1 {
    memref.store %zero, %out[%j] : memref<?xf32>
  }
  scf.for %k = %n to %n step %c1 {
    memref.store %zero, %out[%k] : memref<?xf32>
  } {ew.loop = "remainder"}
  func.return
}
