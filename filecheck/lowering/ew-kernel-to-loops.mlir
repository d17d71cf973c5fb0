// RUN: xfuse-opt %s -p ew-kernel-to-loops | filecheck %s
// RUN: xfuse-opt %s -p 'ew-kernel-to-loops{vector-bytes=64}' | filecheck %s --check-prefix=REMAINDER
// RUN: xfuse-opt %s -p 'ew-kernel-to-loops{vector-bytes=64 bf16-only=true}' | filecheck %s --check-prefix=BF16
// RUN: xfuse-opt %s -p 'ew-kernel-to-loops{vector-bytes=64 store-alignment=64}' | filecheck %s --check-prefix=HEAD
// RUN: xfuse-opt %s -p 'ew-kernel-to-loops{vector-bytes=1}' | filecheck %s --check-prefix=NARROW
// RUN: xfuse-opt %s -p 'ew-kernel-to-loops{max-loop-depth=1}' | filecheck %s --check-prefix=DEPTH1

// A 1-D kernel becomes one loop over the output's size: loads, the region, a store. A function
// of one kernel keeps it in place (functions of several outline each kernel, see below).
// CHECK-LABEL: func.func @one_dim
// CHECK-SAME:    (%[[X:.*]]: memref<?xf32>, %[[B:.*]]: memref<?xf32>, %[[OUT:.*]]: memref<?xf32>)
// CHECK-NOT:     func.call
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK:         %[[N:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?xf32>
// CHECK-NEXT:    scf.for %[[I:.*]] = %[[C0]] to %[[N]] step %[[C1]] {
// CHECK-NEXT:      %[[XS:.*]] = memref.load %[[X]][%[[I]]] : memref<?xf32>
// CHECK-NEXT:      %[[BS:.*]] = memref.load %[[B]][%[[I]]] : memref<?xf32>
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[XS]], %[[BS]] : f32
// CHECK-NEXT:      %[[T:.*]] = math.tanh %[[S]] : f32
// CHECK-NEXT:      memref.store %[[T]], %[[OUT]][%[[I]]] : memref<?xf32>
// CHECK-NEXT:    }
// CHECK-NOT:     ew.kernel
// CHECK:         func.return
func.func @one_dim(%x: memref<?xf32>, %b: memref<?xf32>, %out: memref<?xf32>) {
  ew.kernel ins(%x, %b : memref<?xf32>, memref<?xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%xs: f32, %bs: f32):
    %s = arith.addf %xs, %bs : f32
    %t = math.tanh %s : f32
    ew.yield %t : f32
  }
  func.return
}

// Two dims: the innermost loop walks the last dim. x and the output, arrays of the whole
// iteration space, are read and written through one-dimensional views at one linear index
// (i * d + j, its product in the outer loop): LLVM sees one address computation and one row
// length for all such arrays of a kernel, not one per array. The bias [d] is read with the
// inner index only, the [t, 1] scale with the outer index and 0, once per row (it and its extf
// sit in the outer loop). bf16 casts stay in the region.
// CHECK-LABEL: func.func @broadcast
// CHECK-SAME:    (%[[X:.*]]: memref<?x?xbf16>, %[[B:.*]]: memref<?xbf16>, %[[S:.*]]: memref<?x1xbf16>, %[[OUT:.*]]: memref<?x?xbf16>)
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[T:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?xbf16>
// CHECK-DAG:     %[[D:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?xbf16>
// CHECK-DAG:     %[[XF:.*]] = memref.collapse_shape %[[X]] {{\[\[}}0 : i64, 1 : i64]] : memref<?x?xbf16> into memref<?xbf16>
// CHECK-DAG:     %[[OUTF:.*]] = memref.collapse_shape %[[OUT]] {{\[\[}}0 : i64, 1 : i64]] : memref<?x?xbf16> into memref<?xbf16>
// CHECK:         scf.for %[[I:.*]] = %[[C0]] to %[[T]] step
// CHECK-NEXT:      %[[ROW:.*]] = arith.muli %[[I]], %[[D]] : index
// CHECK-NEXT:      %[[SS:.*]] = memref.load %[[S]][%[[I]], %[[C0]]] : memref<?x1xbf16>
// CHECK-NEXT:      %[[SF:.*]] = arith.extf %[[SS]] : bf16 to f32
// CHECK-NEXT:      scf.for %[[J:.*]] = %[[C0]] to %[[D]] step
// CHECK-NEXT:        %[[AT:.*]] = arith.addi %[[ROW]], %[[J]] : index
// CHECK-NEXT:        memref.load %[[XF]][%[[AT]]] : memref<?xbf16>
// CHECK-NEXT:        memref.load %[[B]][%[[J]]] : memref<?xbf16>
// CHECK:             %[[M:.*]] = arith.mulf %{{.*}}, %[[SF]] : f32
// CHECK-NEXT:        %[[R:.*]] = arith.truncf %[[M]] : f32 to bf16
// CHECK-NEXT:        memref.store %[[R]], %[[OUTF]][%[[AT]]] : memref<?xbf16>
func.func @broadcast(%x: memref<?x?xbf16>, %b: memref<?xbf16>, %s: memref<?x1xbf16>, %out: memref<?x?xbf16>) {
  ew.kernel ins(%x, %b, %s : memref<?x?xbf16>, memref<?xbf16>, memref<?x1xbf16>) outs(%out : memref<?x?xbf16>) {
  ^bb0(%xs: bf16, %bs: bf16, %ss: bf16):
    %xf = arith.extf %xs : bf16 to f32
    %bf = arith.extf %bs : bf16 to f32
    %sf = arith.extf %ss : bf16 to f32
    %a = arith.addf %xf, %bf : f32
    %m = arith.mulf %a, %sf : f32
    %r = arith.truncf %m : f32 to bf16
    ew.yield %r : bf16
  }
  func.return
}

// Static sizes are constants; a rank-0 output needs no loop; several outputs get one store each.
// Each of several kernels gets a private function that LLVM must not inline (so that it
// optimizes one kernel at a time), called where the kernel was; a memref a kernel reads and
// writes (in place) is passed once.
// CHECK-LABEL: func.func @static_and_scalar
// CHECK-SAME:    (%[[X:.*]]: memref<4xf32>, %[[O0:.*]]: memref<4xf32>, %[[O1:.*]]: memref<4xf32>, %[[O2:.*]]: memref<f32>)
// CHECK-NEXT:    func.call @static_and_scalar.kernel0(%[[X]], %[[O0]], %[[O1]])
// CHECK-NEXT:    func.call @static_and_scalar.kernel1(%[[O2]]) : (memref<f32>) -> ()
// CHECK-NEXT:    func.call @static_and_scalar.kernel2(%[[O0]], %[[O1]]) : (memref<4xf32>, memref<4xf32>) -> ()
// CHECK-NEXT:    func.return
// CHECK-LABEL: func.func private @static_and_scalar.kernel0
// CHECK:         %[[FOUR:.*]] = arith.constant 4 : index
// CHECK:         scf.for %[[I:.*]] = %{{.*}} to %[[FOUR]] step
// CHECK:           memref.store %{{.*}}, %{{.*}}[%[[I]]] : memref<4xf32>
// CHECK-NEXT:      memref.store %{{.*}}, %{{.*}}[%[[I]]] : memref<4xf32>
// CHECK-NEXT:    }
// CHECK-LABEL: func.func private @static_and_scalar.kernel1
// CHECK-NOT:     scf.for
// CHECK:         %[[C:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:    memref.store %[[C]], %{{.*}}[] : memref<f32>
// CHECK-LABEL: func.func private @static_and_scalar.kernel2
// CHECK-SAME:    (%[[A:.*]]: memref<4xf32>, %[[B:.*]]: memref<4xf32>)
// CHECK:           memref.load %[[A]]
// CHECK:           memref.store %{{.*}}, %[[A]]
// CHECK-NEXT:      memref.store %{{.*}}, %[[B]]
func.func @static_and_scalar(%x: memref<4xf32>, %o0: memref<4xf32>, %o1: memref<4xf32>, %o2: memref<f32>) {
  ew.kernel ins(%x : memref<4xf32>) outs(%o0, %o1 : memref<4xf32>, memref<4xf32>) {
  ^bb0(%xs: f32):
    %n = arith.negf %xs : f32
    ew.yield %xs, %n : f32, f32
  }
  ew.kernel ins() outs(%o2 : memref<f32>) {
    %c = arith.constant 2.0 : f32
    ew.yield %c : f32
  }
  ew.kernel ins(%o0, %o0 : memref<4xf32>, memref<4xf32>) outs(%o0, %o1 : memref<4xf32>, memref<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    ew.yield %s, %s : f32, f32
  }
  func.return
}

// Kernels alike in everything LLVM would see of them share one function, which each of them
// calls: the program still runs every kernel, each where it was, but LLVM compiles it once.
// Alike means the same argument types and ops one for one, with the same attributes, the same
// constants to the bit, fed from the same places: kernels that differ in a constant's sign
// (0.0, -0.0), an operand order, a fast-math flag, the element type, or in which of their
// memrefs are one (in place) each keep a function.
// CHECK-LABEL: func.func @alike
// CHECK-SAME:    (%[[X:.*]]: memref<?xf32>, %[[T:.*]]: memref<?xf32>, %[[U:.*]]: memref<?xf32>, %[[D:.*]]: memref<?xf64>, %[[E:.*]]: memref<?xf64>)
// CHECK-NEXT:    func.call @alike.kernel0(%[[X]], %[[T]])
// CHECK-NEXT:    func.call @alike.kernel0(%[[T]], %[[U]])
// CHECK-NEXT:    func.call @alike.kernel1(%[[X]], %[[U]])
// CHECK-NEXT:    func.call @alike.kernel2(%[[X]], %[[U]])
// CHECK-NEXT:    func.call @alike.kernel3(%[[X]], %[[U]])
// CHECK-NEXT:    func.call @alike.kernel4(%[[D]], %[[E]])
// CHECK-NEXT:    func.call @alike.kernel5(%[[T]]) : (memref<?xf32>) -> ()
// CHECK-NEXT:    func.call @alike.kernel0(%[[U]], %[[T]])
// CHECK-NEXT:    func.return
// CHECK-LABEL: func.func private @alike.kernel0
// CHECK-SAME:    (%[[A:.*]]: memref<?xf32>, %{{.*}}: memref<?xf32>)
// CHECK:           %[[AS:.*]] = memref.load %[[A]]
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      arith.mulf %[[AS]], %[[ZERO]] : f32
// CHECK-LABEL: func.func private @alike.kernel1
// CHECK:           %[[MINUS_ZERO:.*]] = arith.constant -0.000000e+00 : f32
// CHECK-NEXT:      arith.mulf %{{.*}}, %[[MINUS_ZERO]] : f32
// CHECK-LABEL: func.func private @alike.kernel2
// CHECK:           %[[AS:.*]] = memref.load
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      arith.mulf %[[ZERO]], %[[AS]] : f32
// CHECK-LABEL: func.func private @alike.kernel3
// CHECK:           arith.mulf %{{.*}}, %{{.*}} fastmath<fast> : f32
// CHECK-LABEL: func.func private @alike.kernel4
// CHECK-SAME:    memref<?xf64>
// CHECK:           arith.mulf %{{.*}}, %{{.*}} : f64
// CHECK-LABEL: func.func private @alike.kernel5
// CHECK-SAME:    (%[[A:.*]]: memref<?xf32>)
// CHECK:           memref.load %[[A]]
// CHECK:           memref.store %{{.*}}, %[[A]]
// CHECK-NOT:     func.func private @alike.kernel6
func.func @alike(%x: memref<?xf32>, %t: memref<?xf32>, %u: memref<?xf32>, %d: memref<?xf64>, %e: memref<?xf64>) {
  ew.kernel ins(%x : memref<?xf32>) outs(%t : memref<?xf32>) {
  ^bb0(%a: f32):
    %c = arith.constant 0.0 : f32
    %m = arith.mulf %a, %c : f32
    ew.yield %m : f32
  }
  ew.kernel ins(%t : memref<?xf32>) outs(%u : memref<?xf32>) {
  ^bb0(%a: f32):
    %c = arith.constant 0.0 : f32
    %m = arith.mulf %a, %c : f32
    ew.yield %m : f32
  }
  ew.kernel ins(%x : memref<?xf32>) outs(%u : memref<?xf32>) {
  ^bb0(%a: f32):
    %c = arith.constant -0.0 : f32
    %m = arith.mulf %a, %c : f32
    ew.yield %m : f32
  }
  ew.kernel ins(%x : memref<?xf32>) outs(%u : memref<?xf32>) {
  ^bb0(%a: f32):
    %c = arith.constant 0.0 : f32
    %m = arith.mulf %c, %a : f32
    ew.yield %m : f32
  }
  ew.kernel ins(%x : memref<?xf32>) outs(%u : memref<?xf32>) {
  ^bb0(%a: f32):
    %c = arith.constant 0.0 : f32
    %m = arith.mulf %a, %c fastmath<fast> : f32
    ew.yield %m : f32
  }
  ew.kernel ins(%d : memref<?xf64>) outs(%e : memref<?xf64>) {
  ^bb0(%a: f64):
    %c = arith.constant 0.0 : f64
    %m = arith.mulf %a, %c : f64
    ew.yield %m : f64
  }
  ew.kernel ins(%t : memref<?xf32>) outs(%t : memref<?xf32>) {
  ^bb0(%a: f32):
    %c = arith.constant 0.0 : f32
    %m = arith.mulf %a, %c : f32
    ew.yield %m : f32
  }
  ew.kernel ins(%u : memref<?xf32>) outs(%t : memref<?xf32>) {
  ^bb0(%a: f32):
    %c = arith.constant 0.0 : f32
    %m = arith.mulf %a, %c : f32
    ew.yield %m : f32
  }
  func.return
}

// What depends on no loop index is computed once, before the loops (with the constants it
// needs); a constant used only inside stays there. Every array here is either of the whole
// iteration space (x, the output) or read once (s): the kernel walks all its elements in one
// loop over their product, at the arrays' linear index, not a nest whose every row would end
// in LLVM's vector epilogue. With vector-bytes, that one loop is split once.
// CHECK-LABEL: func.func @invariant
// CHECK-SAME:    (%[[X:.*]]: memref<?x4xf32>, %[[S:.*]]: memref<f32>, %[[OUT:.*]]: memref<?x4xf32>)
// CHECK-DAG:     %[[T:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x4xf32>
// CHECK-DAG:     %[[FOUR:.*]] = arith.constant 4 : index
// CHECK:         %[[N:.*]] = arith.muli %[[T]], %[[FOUR]] : index
// CHECK:         %[[SS:.*]] = memref.load %[[S]][] : memref<f32>
// CHECK-NEXT:    %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:    %[[P:.*]] = math.powf %[[SS]], %[[TWO]] : f32
// CHECK-NEXT:    %[[OUTF:.*]] = memref.collapse_shape %[[OUT]] {{.*}} : memref<?x4xf32> into memref<?xf32>
// CHECK-NEXT:    scf.for %[[I:.*]] = %{{.*}} to %[[N]] step
// CHECK-NEXT:      %[[XS:.*]] = memref.load %{{.*}}[%[[I]]] : memref<?xf32>
// CHECK-NEXT:      %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:      %[[A:.*]] = arith.addf %[[P]], %[[XS]] : f32
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[A]], %[[HALF]] : f32
// CHECK-NEXT:      memref.store %[[M]], %[[OUTF]][%[[I]]] : memref<?xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return
// REMAINDER-LABEL: func.func @invariant
// REMAINDER:         %[[N:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// REMAINDER:         %[[MAIN:.*]] = arith.andi %[[N]], %{{.*}} : index
// REMAINDER-NEXT:    scf.for %{{.*}} = %{{.*}} to %[[MAIN]] step
// REMAINDER-NOT:     scf.for
// REMAINDER:         }
// REMAINDER-NEXT:    scf.for %{{.*}} = %[[MAIN]] to %[[N]] step
// REMAINDER-NOT:     scf.for
// REMAINDER:         func.return
func.func @invariant(%x: memref<?x4xf32>, %s: memref<f32>, %out: memref<?x4xf32>) {
  ew.kernel ins(%x, %s : memref<?x4xf32>, memref<f32>) outs(%out : memref<?x4xf32>) {
  ^bb0(%xs: f32, %ss: f32):
    %two = arith.constant 2.0 : f32
    %p = math.powf %ss, %two : f32
    %half = arith.constant 0.5 : f32
    %a = arith.addf %p, %xs : f32
    %m = arith.mulf %a, %half : f32
    ew.yield %m : f32
  }
  func.return
}

// Neighbouring dims along which every input is read alike (all of it, or broadcast: size 1 or
// absent), and dims of size 1, are one loop: here y is read along d0 and d4 only, z along d4
// only, so d1 to d3 are one loop of d1 * d3 elements, and the arrays it does not read at one
// linear index (a dim of 1 in x and the output) are seen with each run's dims as one. A nest of
// a loop per dim compiled in time growing with the rank (`x * y`, y a row under 16-dim x: 5.4 s).
// CHECK-LABEL: func.func @runs
// CHECK-SAME:    (%[[X:.*]]: memref<?x?x1x?x?xf32>, %[[Y:.*]]: memref<?x1x1x1x?xf32>, %[[Z:.*]]: memref<?xf32>, %[[OUT:.*]]: memref<?x?x1x?x?xf32>)
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[XR:.*]] = memref.collapse_shape %[[X]] {{\[\[}}0 : i64], [1 : i64, 2 : i64, 3 : i64], [4 : i64]] : memref<?x?x1x?x?xf32> into memref<?x?x?xf32>
// CHECK-DAG:     %[[YR:.*]] = memref.collapse_shape %[[Y]] {{\[\[}}0 : i64], [1 : i64, 2 : i64, 3 : i64], [4 : i64]] : memref<?x1x1x1x?xf32> into memref<?x1x?xf32>
// CHECK-DAG:     %[[OUTR:.*]] = memref.collapse_shape %[[OUT]] {{\[\[}}0 : i64], [1 : i64, 2 : i64, 3 : i64], [4 : i64]] : memref<?x?x1x?x?xf32> into memref<?x?x?xf32>
// CHECK:         %[[D0:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?x1x?x?xf32>
// CHECK:         %[[D1:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?x1x?x?xf32>
// CHECK:         %[[D3:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?x1x?x?xf32>
// CHECK-NEXT:    %[[D13:.*]] = arith.muli %[[D1]], %[[D3]] : index
// CHECK:         %[[D4:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?x1x?x?xf32>
// CHECK-NEXT:    scf.for %[[I:.*]] = %[[C0]] to %[[D0]] step
// CHECK-NEXT:      scf.for %[[J:.*]] = %[[C0]] to %[[D13]] step
// CHECK-NEXT:        scf.for %[[K:.*]] = %[[C0]] to %[[D4]] step
// CHECK-NEXT:          memref.load %[[XR]][%[[I]], %[[J]], %[[K]]] : memref<?x?x?xf32>
// CHECK-NEXT:          memref.load %[[YR]][%[[I]], %[[C0]], %[[K]]] : memref<?x1x?xf32>
// CHECK-NEXT:          memref.load %[[Z]][%[[K]]] : memref<?xf32>
// CHECK:               memref.store %{{.*}}, %[[OUTR]][%[[I]], %[[J]], %[[K]]] : memref<?x?x?xf32>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// With max-loop-depth=1 the three runs are one loop over d0 * (d1 * d3) * d4, each array's index
// in each run divided out of the loop's (the output's too: its dim of 1 keeps it off the linear
// index).
// DEPTH1-LABEL: func.func @runs
// DEPTH1-SAME:    (%[[X:.*]]: memref<?x?x1x?x?xf32>, %[[Y:.*]]: memref<?x1x1x1x?xf32>, %[[Z:.*]]: memref<?xf32>, %[[OUT:.*]]: memref<?x?x1x?x?xf32>)
// DEPTH1:         %[[D13:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// DEPTH1:         %[[D4:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?x1x?x?xf32>
// DEPTH1-NEXT:    %[[D013:.*]] = arith.muli %{{.*}}, %[[D13]] : index
// DEPTH1-NEXT:    %[[N:.*]] = arith.muli %[[D013]], %[[D4]] : index
// DEPTH1-NEXT:    scf.for %[[I:.*]] = %{{.*}} to %[[N]] step
// DEPTH1-NEXT:      %[[K:.*]] = arith.remui %[[I]], %[[D4]] : index
// DEPTH1-NEXT:      %[[IJ:.*]] = arith.divui %[[I]], %[[D4]] : index
// DEPTH1-NEXT:      %[[J:.*]] = arith.remui %[[IJ]], %[[D13]] : index
// DEPTH1-NEXT:      %[[I0:.*]] = arith.divui %[[IJ]], %[[D13]] : index
// DEPTH1-NEXT:      memref.load %{{.*}}[%[[I0]], %[[J]], %[[K]]] : memref<?x?x?xf32>
// DEPTH1-NEXT:      memref.load %{{.*}}[%[[I0]], %{{.*}}, %[[K]]] : memref<?x1x?xf32>
// DEPTH1-NEXT:      memref.load %[[Z]][%[[K]]] : memref<?xf32>
// DEPTH1:           memref.store %{{.*}}, %{{.*}}[%[[I0]], %[[J]], %[[K]]] : memref<?x?x?xf32>
// DEPTH1-NEXT:    }
// DEPTH1-NOT:     scf.for
// DEPTH1:         func.return
func.func @runs(%x: memref<?x?x1x?x?xf32>, %y: memref<?x1x1x1x?xf32>, %z: memref<?xf32>, %out: memref<?x?x1x?x?xf32>) {
  ew.kernel ins(%x, %y, %z : memref<?x?x1x?x?xf32>, memref<?x1x1x1x?xf32>, memref<?xf32>) outs(%out : memref<?x?x1x?x?xf32>) {
  ^bb0(%xs: f32, %ys: f32, %zs: f32):
    %s = arith.addf %xs, %ys : f32
    %t = arith.mulf %s, %zs : f32
    ew.yield %t : f32
  }
  func.return
}

// An array with strides of its own cannot be seen with dims merged: each dim stays a loop.
// CHECK-LABEL: func.func @strided_runs
// CHECK-NOT:     memref.collapse_shape %{{.*}} : memref<?x?x?xf32, strided
// CHECK-COUNT-3: scf.for
// CHECK:         memref.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x?x?xf32, strided<[?, ?, 1]>>
func.func @strided_runs(%x: memref<?x?x?xf32, strided<[?, ?, 1]>>, %y: memref<?xf32>, %out: memref<?x?x?xf32>) {
  ew.kernel ins(%x, %y : memref<?x?x?xf32, strided<[?, ?, 1]>>, memref<?xf32>) outs(%out : memref<?x?x?xf32>) {
  ^bb0(%xs: f32, %ys: f32):
    %s = arith.addf %xs, %ys : f32
    ew.yield %s : f32
  }
  func.return
}

// No two neighbouring dims are read alike by y and s: ten runs. A nest is at most
// max-loop-depth (MAX_LOOP_DEPTH, 8) loops: the first three runs are one loop over d0 * d1 * d2,
// and each index an array reads of them is divided out of that loop's index, in that loop: s's
// in d0 and d2, y's in d1. s, read along those runs alone, is loaded there, its exp with it.
// CHECK-LABEL: func.func @deep
// CHECK-SAME:    (%[[X:.*]]: memref<?x?x?x?x?x?x?x?x?x?xf32>, %[[Y:.*]]: memref<1x?x1x?x1x?x1x?x1x?xf32>, %[[S:.*]]: memref<?x1x?x1x1x1x1x1x1x1xf32>, %[[OUT:.*]]: memref<?x?x?x?x?x?x?x?x?x?xf32>)
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[D0:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?x?x?x?x?x?x?x?x?xf32>
// CHECK-DAG:     %[[D1:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?x?x?x?x?x?x?x?x?xf32>
// CHECK-DAG:     %[[D2:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?x?x?x?x?x?x?x?x?xf32>
// CHECK:         %[[D01:.*]] = arith.muli %[[D0]], %[[D1]] : index
// CHECK-NEXT:    %[[D012:.*]] = arith.muli %[[D01]], %[[D2]] : index
// CHECK:         scf.for %[[I:.*]] = %[[C0]] to %[[D012]] step
// CHECK-NEXT:      %[[I2:.*]] = arith.remui %[[I]], %[[D2]] : index
// CHECK-NEXT:      %[[I01:.*]] = arith.divui %[[I]], %[[D2]] : index
// CHECK-NEXT:      %[[I1:.*]] = arith.remui %[[I01]], %[[D1]] : index
// CHECK-NEXT:      %[[I0:.*]] = arith.divui %[[I01]], %[[D1]] : index
// CHECK-NEXT:      arith.muli %[[I]], %{{.*}} : index
// CHECK-NEXT:      %[[SS:.*]] = memref.load %[[S]][%[[I0]], %[[C0]], %[[I2]], %[[C0]], %[[C0]], %[[C0]], %[[C0]], %[[C0]], %[[C0]], %[[C0]]] : memref<?x1x?x1x1x1x1x1x1x1xf32>
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[SS]] : f32
// CHECK-NOT:       arith.remui
// CHECK-NOT:       arith.divui
// CHECK-COUNT-7:   scf.for
// CHECK-NOT:       scf.for
// CHECK:           memref.load %[[Y]][%[[C0]], %[[I1]], %[[C0]], %{{.*}}, %[[C0]], %{{.*}}, %[[C0]], %{{.*}}, %[[C0]], %{{.*}}] : memref<1x?x1x?x1x?x1x?x1x?xf32>
// CHECK:           arith.mulf %{{.*}}, %[[E]] : f32
// CHECK-NEXT:      memref.store
func.func @deep(%x: memref<?x?x?x?x?x?x?x?x?x?xf32>, %y: memref<1x?x1x?x1x?x1x?x1x?xf32>, %s: memref<?x1x?x1x1x1x1x1x1x1xf32>, %out: memref<?x?x?x?x?x?x?x?x?x?xf32>) {
  ew.kernel ins(%x, %y, %s : memref<?x?x?x?x?x?x?x?x?x?xf32>, memref<1x?x1x?x1x?x1x?x1x?xf32>, memref<?x1x?x1x1x1x1x1x1x1xf32>) outs(%out : memref<?x?x?x?x?x?x?x?x?x?xf32>) {
  ^bb0(%xs: f32, %ys: f32, %ss: f32):
    %e = math.exp %ss : f32
    %m = arith.mulf %xs, %ys : f32
    %r = arith.mulf %m, %e : f32
    ew.yield %r : f32
  }
  func.return
}

// With the vector width set (vector-bytes=64), the innermost loop runs to the largest multiple
// of 4 vectors of the narrowest element (4 x 64 bytes of f32: 64 elements), and a copy of it from
// there to the end: the remainder loop, which LLVM vectorizes with masks
// (`xfuse.codegen.native.mark_loops`). Without it, each innermost loop stays one loop, and so
// it does with bf16-only=true in a kernel of no bf16 array (the default pipeline's choice).
// CHECK-LABEL: func.func @remainder_one_dim
// CHECK-COUNT-1: scf.for
// CHECK-NOT:     scf.for
// CHECK:         func.return
// BF16-LABEL:    func.func @remainder_one_dim
// BF16-COUNT-1:  scf.for
// BF16-NOT:      scf.for
// BF16:          func.return
// REMAINDER-LABEL: func.func @remainder_one_dim
// REMAINDER-SAME:    (%[[X:.*]]: memref<?xf32>, %[[OUT:.*]]: memref<?xf32>)
// REMAINDER-DAG:     %[[C0:.*]] = arith.constant 0 : index
// REMAINDER-DAG:     %[[N:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?xf32>
// REMAINDER-DAG:     %[[BLOCK:.*]] = arith.constant -64 : index
// REMAINDER:         %[[MAIN:.*]] = arith.andi %[[N]], %[[BLOCK]] : index
// REMAINDER-NEXT:    scf.for %[[I:.*]] = %[[C0]] to %[[MAIN]] step %{{.*}} {
// REMAINDER-NEXT:      %[[XS:.*]] = memref.load %[[X]][%[[I]]] : memref<?xf32>
// REMAINDER-NEXT:      %[[T:.*]] = math.tanh %[[XS]] : f32
// REMAINDER-NEXT:      memref.store %[[T]], %[[OUT]][%[[I]]] : memref<?xf32>
// REMAINDER-NEXT:    }
// REMAINDER-NEXT:    scf.for %[[J:.*]] = %[[MAIN]] to %[[N]] step %{{.*}} {
// REMAINDER-NEXT:      %[[XR:.*]] = memref.load %[[X]][%[[J]]] : memref<?xf32>
// REMAINDER-NEXT:      %[[TR:.*]] = math.tanh %[[XR]] : f32
// REMAINDER-NEXT:      memref.store %[[TR]], %[[OUT]][%[[J]]] : memref<?xf32>
// REMAINDER-NEXT:    }
// REMAINDER-NEXT:    func.return
// A loop of an approximation (tanh) gets no head with store-alignment: it runs as fast with its
// stores aligned or not, and the head would run the approximation for nothing.
// HEAD-LABEL:    func.func @remainder_one_dim
// HEAD-NOT:      memref.extract_aligned_pointer_as_index
// HEAD-COUNT-2:  scf.for
// HEAD-NOT:      scf.for
// HEAD:          func.return
func.func @remainder_one_dim(%x: memref<?xf32>, %out: memref<?xf32>) {
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
// CHECK-LABEL: func.func @remainder_two_dims
// CHECK-COUNT-2: scf.for
// CHECK-NOT:     scf.for
// CHECK:         func.return
// With store-alignment too, no head: a kernel of bf16 arrays is bound by its conversions.
// HEAD-LABEL:    func.func @remainder_two_dims
// HEAD-NOT:        memref.extract_aligned_pointer_as_index
// HEAD-COUNT-3:    scf.for
// HEAD-NOT:        scf.for
// HEAD:          func.return
// With bf16-only=true, split as with vector-bytes alone: a kernel of bf16 arrays.
// BF16-LABEL:    func.func @remainder_two_dims
// BF16:            %[[MAIN:.*]] = arith.andi %{{.*}}, %{{.*}} : index
// BF16-NEXT:       scf.for %{{.*}} = %{{.*}} to %[[MAIN]] step
// BF16:            scf.for %{{.*}} = %[[MAIN]] to %{{.*}} step
// BF16-NOT:        scf.for
// BF16:          func.return
// REMAINDER-LABEL: func.func @remainder_two_dims
// REMAINDER-SAME:    (%[[X:.*]]: memref<?x?xbf16>, %[[S:.*]]: memref<?x1xf32>, %[[OUT:.*]]: memref<?x?xbf16>)
// REMAINDER-DAG:     %[[T:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?xbf16>
// REMAINDER-DAG:     %[[D:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?xbf16>
// REMAINDER-DAG:     %[[XF:.*]] = memref.collapse_shape %[[X]] {{.*}} into memref<?xbf16>
// REMAINDER-DAG:     %[[OUTF:.*]] = memref.collapse_shape %[[OUT]] {{.*}} into memref<?xbf16>
// REMAINDER:         scf.for %[[I:.*]] = %{{.*}} to %[[T]] step
// REMAINDER-NEXT:      %[[ROW:.*]] = arith.muli %[[I]], %[[D]] : index
// REMAINDER-NEXT:      %[[SS:.*]] = memref.load %[[S]][%[[I]], %{{.*}}] : memref<?x1xf32>
// REMAINDER-NEXT:      %[[BLOCK:.*]] = arith.constant -128 : index
// REMAINDER-NEXT:      %[[MAIN:.*]] = arith.andi %[[D]], %[[BLOCK]] : index
// REMAINDER-NEXT:      scf.for %[[J:.*]] = %{{.*}} to %[[MAIN]] step
// REMAINDER-NEXT:        %[[AT:.*]] = arith.addi %[[ROW]], %[[J]] : index
// REMAINDER-NEXT:        memref.load %[[XF]][%[[AT]]] : memref<?xbf16>
// REMAINDER:             memref.store %{{.*}}, %[[OUTF]][%[[AT]]] : memref<?xbf16>
// REMAINDER-NEXT:      }
// REMAINDER-NEXT:      scf.for %[[K:.*]] = %[[MAIN]] to %[[D]] step
// REMAINDER-NEXT:        %[[AT_REST:.*]] = arith.addi %[[ROW]], %[[K]] : index
// REMAINDER-NEXT:        memref.load %[[XF]][%[[AT_REST]]] : memref<?xbf16>
// REMAINDER:             memref.store %{{.*}}, %[[OUTF]][%[[AT_REST]]] : memref<?xbf16>
// REMAINDER-NEXT:      } {ew.loop = "remainder"}
// REMAINDER-NEXT:    }
func.func @remainder_two_dims(%x: memref<?x?xbf16>, %s: memref<?x1xf32>, %out: memref<?x?xbf16>) {
  ew.kernel ins(%x, %s : memref<?x?xbf16>, memref<?x1xf32>) outs(%out : memref<?x?xbf16>) {
  ^bb0(%xs: bf16, %ss: f32):
    %xf = arith.extf %xs : bf16 to f32
    %m = arith.mulf %xf, %ss : f32
    %r = arith.truncf %m : f32 to bf16
    ew.yield %r : bf16
  }
  func.return
}

// bf16-only=true splits a flat loop of bf16 arrays (LLVM leaves a loop that rounds to bf16 in
// hardware a scalar epilogue), and not a loop nest of f32 (a [d] bias makes one): its remainder,
// at every row, stays LLVM's vector epilogue (splitting it too cost up to 54 ms more compile a
// nest).
// CHECK-LABEL:       func.func @bf16_only_flat
// CHECK-COUNT-1:     scf.for
// CHECK-NOT:         scf.for
// CHECK:             func.return
// BF16-LABEL:        func.func @bf16_only_flat
// BF16:                %[[MAIN:.*]] = arith.andi %{{.*}}, %{{.*}} : index
// BF16-NEXT:           scf.for %{{.*}} = %{{.*}} to %[[MAIN]] step
// BF16:                scf.for %{{.*}} = %[[MAIN]] to %{{.*}} step
// BF16-NOT:            scf.for
// BF16:              func.return
func.func @bf16_only_flat(%x: memref<?xbf16>, %out: memref<?xbf16>) {
  ew.kernel ins(%x : memref<?xbf16>) outs(%out : memref<?xbf16>) {
  ^bb0(%xs: bf16):
    %xf = arith.extf %xs : bf16 to f32
    %t = math.tanh %xf : f32
    %r = arith.truncf %t : f32 to bf16
    ew.yield %r : bf16
  }
  func.return
}

// CHECK-LABEL:       func.func @bf16_only_rows_f32
// CHECK-COUNT-2:     scf.for
// CHECK-NOT:         scf.for
// CHECK:             func.return
// BF16-LABEL:        func.func @bf16_only_rows_f32
// BF16-COUNT-2:      scf.for
// BF16-NOT:          scf.for
// BF16:              func.return
func.func @bf16_only_rows_f32(%x: memref<?x?xf32>, %b: memref<?xf32>, %out: memref<?x?xf32>) {
  ew.kernel ins(%x, %b : memref<?x?xf32>, memref<?xf32>) outs(%out : memref<?x?xf32>) {
  ^bb0(%xs: f32, %bs: f32):
    %h = arith.addf %xs, %bs : f32
    %t = math.tanh %h : f32
    ew.yield %t : f32
  }
  func.return
}

// With store-alignment=64, a loop bound by its loads and stores (no function that
// ew-expand-math approximates) first runs the elements before the output's first address that
// is a multiple of 64 bytes: a head loop, marked so (LLVM vectorizes it with masks, see
// `xfuse.codegen.native.mark_loops`), to (-address mod 64) / 4 bytes of f32, or all elements
// where there are fewer. The main loop still counts from 0, to the elements after the head,
// its element the head's length on; the remainder splits from it as without a head. The
// head's bound is computed once, before the loops.
// HEAD-LABEL:    func.func @head_one_dim
// HEAD-SAME:       (%[[X:.*]]: memref<?xf32>, %[[Y:.*]]: memref<?xf32>, %[[OUT:.*]]: memref<?xf32>)
// HEAD-DAG:        %[[C0:.*]] = arith.constant 0 : index
// HEAD-DAG:        %[[N:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?xf32>
// HEAD:            %[[P:.*]] = "memref.extract_aligned_pointer_as_index"(%[[OUT]]) : (memref<?xf32>) -> index
// HEAD-NEXT:       %[[ZERO:.*]] = arith.constant 0 : index
// HEAD-NEXT:       %[[NEG:.*]] = arith.subi %[[ZERO]], %[[P]] : index
// HEAD-NEXT:       %[[LINE:.*]] = arith.constant 63 : index
// HEAD-NEXT:       %[[GAP:.*]] = arith.andi %[[NEG]], %[[LINE]] : index
// HEAD-NEXT:       %[[TWO:.*]] = arith.constant 2 : index
// HEAD-NEXT:       %[[ELEMENTS:.*]] = arith.shrui %[[GAP]], %[[TWO]] : index
// HEAD-NEXT:       %[[FEWER:.*]] = arith.cmpi ult, %[[ELEMENTS]], %[[N]] : index
// HEAD-NEXT:       %[[H:.*]] = arith.select %[[FEWER]], %[[ELEMENTS]], %[[N]] : index
// HEAD-NEXT:       scf.for %[[I:.*]] = %[[C0]] to %[[H]] step %{{.*}} {
// HEAD-NEXT:         %[[XS:.*]] = memref.load %[[X]][%[[I]]] : memref<?xf32>
// HEAD-NEXT:         %[[YS:.*]] = memref.load %[[Y]][%[[I]]] : memref<?xf32>
// HEAD-NEXT:         %[[S:.*]] = arith.addf %[[XS]], %[[YS]] : f32
// HEAD-NEXT:         memref.store %[[S]], %[[OUT]][%[[I]]] : memref<?xf32>
// HEAD-NEXT:       } {ew.loop = "head"}
// HEAD-NEXT:       %[[REST:.*]] = arith.subi %[[N]], %[[H]] : index
// HEAD-NEXT:       %[[BLOCK:.*]] = arith.constant -64 : index
// HEAD-NEXT:       %[[MAIN:.*]] = arith.andi %[[REST]], %[[BLOCK]] : index
// HEAD-NEXT:       scf.for %[[J:.*]] = %[[C0]] to %[[MAIN]] step %{{.*}} {
// HEAD-NEXT:         %[[AT:.*]] = arith.addi %[[H]], %[[J]] : index
// HEAD-NEXT:         memref.load %[[X]][%[[AT]]] : memref<?xf32>
// HEAD:              memref.store %{{.*}}, %[[OUT]][%[[AT]]] : memref<?xf32>
// HEAD-NEXT:       }
// HEAD-NEXT:       scf.for %[[K:.*]] = %[[MAIN]] to %[[REST]] step %{{.*}} {
// HEAD-NEXT:         %[[AT_REST:.*]] = arith.addi %[[H]], %[[K]] : index
// HEAD:              memref.store %{{.*}}, %[[OUT]][%[[AT_REST]]] : memref<?xf32>
// HEAD-NEXT:       } {ew.loop = "remainder"}
// HEAD-NEXT:       func.return
func.func @head_one_dim(%x: memref<?xf32>, %y: memref<?xf32>, %out: memref<?xf32>) {
  ew.kernel ins(%x, %y : memref<?xf32>, memref<?xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%xs: f32, %ys: f32):
    %s = arith.addf %xs, %ys : f32
    ew.yield %s : f32
  }
  func.return
}

// In a nest every row starts as far before a 64-byte boundary only where a row is whole
// 64-byte lines: then the head's length is the first row's, made once before the loops, where
// a row is at least one main-loop block long (256 bytes), else 0 (no head); each row runs its
// head, then its main loop shifted by it, at the row's linear index (i * d2). (The bias is read
// alike along d0 and d1, so they are one loop of d0 * d1 rows.)
// HEAD-LABEL:    func.func @head_rows
// HEAD-SAME:       (%[[X:.*]]: memref<?x?x?xf32>, %[[B:.*]]: memref<?xf32>, %[[OUT:.*]]: memref<?x?x?xf32>)
// HEAD:            %[[D0:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?x?xf32>
// HEAD:            %[[D1:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?x?xf32>
// HEAD-NEXT:       %[[D01:.*]] = arith.muli %[[D0]], %[[D1]] : index
// HEAD:            %[[D2:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?x?xf32>
// HEAD:            %[[P:.*]] = "memref.extract_aligned_pointer_as_index"(%[[OUT]]) : (memref<?x?x?xf32>) -> index
// HEAD-NEXT:       %[[ZERO:.*]] = arith.constant 0 : index
// HEAD-NEXT:       %[[NEG:.*]] = arith.subi %[[ZERO]], %[[P]] : index
// HEAD-NEXT:       %[[LINE:.*]] = arith.constant 63 : index
// HEAD-NEXT:       %[[GAP:.*]] = arith.andi %[[NEG]], %[[LINE]] : index
// HEAD-NEXT:       %[[TWO:.*]] = arith.constant 2 : index
// HEAD-NEXT:       %[[ELEMENTS:.*]] = arith.shrui %[[GAP]], %[[TWO]] : index
// HEAD-NEXT:       %[[TWO_AGAIN:.*]] = arith.constant 2 : index
// HEAD-NEXT:       %[[ROW_BYTES:.*]] = arith.shli %[[D2]], %[[TWO_AGAIN]] : index
// HEAD-NEXT:       %[[LINE_AGAIN:.*]] = arith.constant 63 : index
// HEAD-NEXT:       %[[PARTIAL:.*]] = arith.andi %[[ROW_BYTES]], %[[LINE_AGAIN]] : index
// HEAD-NEXT:       %[[NONE:.*]] = arith.constant 0 : index
// HEAD-NEXT:       %[[WHOLE:.*]] = arith.cmpi eq, %[[PARTIAL]], %[[NONE]] : index
// HEAD-NEXT:       %[[BLOCK_BYTES:.*]] = arith.constant 256 : index
// HEAD-NEXT:       %[[LONG:.*]] = arith.cmpi uge, %[[ROW_BYTES]], %[[BLOCK_BYTES]] : index
// HEAD-NEXT:       %[[BOTH:.*]] = arith.andi %[[WHOLE]], %[[LONG]] : i1
// HEAD-NEXT:       %[[NO_HEAD:.*]] = arith.constant 0 : index
// HEAD-NEXT:       %[[SOME:.*]] = arith.select %[[BOTH]], %[[ELEMENTS]], %[[NO_HEAD]] : index
// HEAD-NEXT:       %[[FEWER:.*]] = arith.cmpi ult, %[[SOME]], %[[D2]] : index
// HEAD-NEXT:       %[[H:.*]] = arith.select %[[FEWER]], %[[SOME]], %[[D2]] : index
// HEAD-NEXT:       scf.for %[[I:.*]] = %{{.*}} to %[[D01]] step
// HEAD-NEXT:         %[[START:.*]] = arith.muli %[[I]], %[[D2]] : index
// HEAD-NEXT:         scf.for %[[K:.*]] = %{{.*}} to %[[H]] step
// HEAD-NEXT:           %[[AT:.*]] = arith.addi %[[START]], %[[K]] : index
// HEAD-NEXT:           memref.load %{{.*}}[%[[AT]]] : memref<?xf32>
// HEAD-NEXT:           memref.load %[[B]][%[[K]]] : memref<?xf32>
// HEAD:                memref.store %{{.*}}, %{{.*}}[%[[AT]]] : memref<?xf32>
// HEAD-NEXT:         } {ew.loop = "head"}
// HEAD-NEXT:         %[[REST:.*]] = arith.subi %[[D2]], %[[H]] : index
// HEAD:              scf.for %[[L:.*]] = %{{.*}} to %{{.*}} step
// HEAD-NEXT:           %[[SHIFTED:.*]] = arith.addi %[[H]], %[[L]] : index
// HEAD-NEXT:           arith.addi %[[START]], %[[SHIFTED]] : index
// HEAD:              scf.for %{{.*}} = %{{.*}} to %[[REST]] step
// HEAD:              } {ew.loop = "remainder"}
// HEAD-NEXT:       }
// HEAD-NEXT:       func.return
func.func @head_rows(%x: memref<?x?x?xf32>, %b: memref<?xf32>, %out: memref<?x?x?xf32>) {
  ew.kernel ins(%x, %b : memref<?x?x?xf32>, memref<?xf32>) outs(%out : memref<?x?x?xf32>) {
  ^bb0(%xs: f32, %bs: f32):
    %s = arith.addf %xs, %bs : f32
    ew.yield %s : f32
  }
  func.return
}

// An output with a layout of its own (strides) gets no head: its rows' addresses are not
// those of a contiguous array: the rows, each a main loop and a remainder, and no more.
// HEAD-LABEL:    func.func @head_strided
// HEAD-NOT:      memref.extract_aligned_pointer_as_index
// HEAD-COUNT-3:  scf.for
// HEAD-NOT:      scf.for
// HEAD:          func.return
func.func @head_strided(%x: memref<4x4xf32>, %out: memref<4x4xf32, strided<[8, 1]>>) {
  ew.kernel ins(%x : memref<4x4xf32>) outs(%out : memref<4x4xf32, strided<[8, 1]>>) {
  ^bb0(%xs: f32):
    %n = arith.negf %xs : f32
    ew.yield %n : f32
  }
  func.return
}

// Vectors narrower than 4 of the narrowest element make a block of one element or none: each
// innermost loop stays one loop (a block of none was an empty main loop before the remainder).
// NARROW-LABEL:  func.func @narrow_f64
// NARROW-COUNT-1: scf.for
// NARROW-NOT:    scf.for
// NARROW:        func.return
// REMAINDER-LABEL: func.func @narrow_f64
// REMAINDER-COUNT-2: scf.for
// REMAINDER-NOT: scf.for
// REMAINDER:     func.return
func.func @narrow_f64(%x: memref<?xf64>, %out: memref<?xf64>) {
  ew.kernel ins(%x : memref<?xf64>) outs(%out : memref<?xf64>) {
  ^bb0(%xs: f64):
    %n = arith.negf %xs : f64
    ew.yield %n : f64
  }
  func.return
}
