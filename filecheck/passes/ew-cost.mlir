// RUN: xfuse-opt %s -p ew-cost 2>&1 >/dev/null | filecheck %s
// RUN: xfuse-opt %s -p ew-cost | filecheck %s --check-prefix=IR
// RUN: xfuse-opt %s -p 'ew-cost{annotate=true}' 2>/dev/null | filecheck %s --check-prefix=ANNOTATE
// RUN: xfuse-opt %s -p 'ew-cost{device=a100 dtype=ir launch-us=2}' 2>&1 >/dev/null | filecheck %s --check-prefix=A100
// RUN: xfuse-opt %s -p 'ew-cost{shape=32x14336 l2=true}' 2>&1 >/dev/null | filecheck %s --check-prefix=L2
// RUN: xfuse-opt %s -p 'ew-cost{epilogue=x}' 2>&1 >/dev/null | filecheck %s --check-prefix=EPILOGUE
// RUN: xfuse-opt %s -p 'ew-cost{shape=0x14336}' 2>&1 >/dev/null | filecheck %s --check-prefix=EMPTY
// RUN: not xfuse-opt %s -p 'ew-cost{device=tpu}' 2>&1 | filecheck %s --check-prefix=BAD-DEVICE
// RUN: not xfuse-opt %inputs/ew-cost-unfused-op.mlir -p ew-cost 2>&1 | filecheck %s --check-prefix=NOT-FUSED
// RUN: xfuse-opt %inputs/gelu.ew -p 'ew-optimize,ew-fuse{mode=none},ew-bufferize,ew-workspace,ew-cost' 2>&1 >/dev/null | filecheck %s --check-prefix=WORKSPACE
// RUN: not xfuse-opt %inputs/gelu.ew -p 'xfuse-default,ew-cost' 2>&1 | filecheck %s --check-prefix=LOWERED

// The lecture's bill (4096 x 14336 BF16 on an H100 SXM): fused GELU with bias and residual is one
// kernel reading x, b, r and writing out; unfused it is 11 kernels and 28 whole-tensor transfers.
// CHECK-LABEL: ew-cost @fused: 1 kernel, 4 tensor reads+writes, 469,762,048 bytes, 645,922,816 FLOPs, 140.2 us + 4.0 us launch = 144.2 us
// CHECK:         @fused on h100-sxm, 4096x14336 bfloat16, launch 4 us, HBM only
// CHECK:         11 ops {{.*}} x, b, r -> out {{.*}} 469,762,048 {{.*}} 11 {{.*}} 1.38 {{.*}} 144.2 us {{.*}} memory
// CHECK-LABEL: ew-cost @unfused: 11 kernels, 28 tensor reads+writes, 3,288,334,336 bytes, 645,922,816 FLOPs, 981.6 us + 44.0 us launch = 1,025.6 us
// CHECK:         addf {{.*}} x, b -> h {{.*}} 352,321,536 {{.*}} 109.2 us {{.*}} memory
// CHECK:         tanh {{.*}} 234,881,024 {{.*}} 74.1 us {{.*}} memory
// A [14336] bias costs its 28,672 real bytes, not a full tensor's.
// CHECK-LABEL: ew-cost @bias_row: 1 kernel, 4 tensor reads+writes, 352,350,208 bytes,
// In-place buffer form: %t is read and written, each counted; the constant costs nothing.
// CHECK-LABEL: ew-cost @buffers: 2 kernels, 5 tensor reads+writes, 587,202,560 bytes,

// IR-LABEL: func.func @fused
// IR:         ew.kernel ins(
// IR-NOT:     cost.
// IR:         func.return

// ANNOTATE-LABEL: func.func @fused
// ANNOTATE:         ew.kernel ins({{.*}}) -> tensor<?xf32> attributes {cost.read_bytes = 352321536 : i64, cost.write_bytes = 117440512 : i64, cost.flops = 645922816 : i64, cost.intensity = 1.375000e+00 : f64, cost.time_us = 1.442270e+02 : f64, cost.bound = "memory"}
// ANNOTATE-LABEL: func.func @buffers
// ANNOTATE:         ew.kernel ins({{.*}}) outs({{.*}}) attributes {cost.read_bytes = 234881024 : i64, cost.write_bytes = 117440512 : i64,

// dtype=ir keeps the IR's f32 (4 bytes); the A100 moves 2.039 TB/s; 2 us launches.
// A100-LABEL: ew-cost @fused: 1 kernel, 4 tensor reads+writes, 939,524,096 bytes, 645,922,816 FLOPs, 460.8 us + 2.0 us launch = 462.8 us
// A100:         @fused on a100-80gb, 4096x14336 IR dtypes, launch 2 us, HBM only
// A100-LABEL: ew-cost @bias_row: 1 kernel, 4 tensor reads+writes, 352,350,208 bytes,

// 32x14336 bf16 tensors (896 KiB; the [14336] bias broadcasts) stay in the 50 MB of L2, so unfused every re-read is an L2 hit and
// only the 3 inputs' first reads and the 11 writes reach HBM.
// L2-LABEL: ew-cost @fused: 1 kernel, 4 tensor reads+writes, 3,670,016 bytes (3,670,016 from HBM)
// L2:         ew-cost HBM only @fused: 1 kernel
// L2-LABEL: ew-cost @unfused: 11 kernels, 28 tensor reads+writes, 25,690,112 bytes (12,845,056 from HBM)
// L2:         h (L2) -> t0
// L2:         ew-cost HBM only @unfused: 11 kernels, 28 tensor reads+writes, 25,690,112 bytes,

// x from a matmul: its write and read (117 MB each) and one launch disappear.
// EPILOGUE: ew-cost epilogue x: 587,202,560 -> 352,321,536 bytes, 179.3 us -> 105.2 us

// An empty shape (0 rows, as an empty array) moves nothing, the [14336] bias included; each
// kernel still launches.
// EMPTY-LABEL: ew-cost @fused: 1 kernel, 4 tensor reads+writes, 0 bytes, 0 FLOPs, 0.0 us + 4.0 us launch = 4.0 us
// EMPTY-LABEL: ew-cost @bias_row: 1 kernel, 4 tensor reads+writes, 0 bytes, 0 FLOPs, 0.0 us + 4.0 us launch = 4.0 us

// BAD-DEVICE: xfuse-opt: error: ew-cost: bad value 'tpu' for option 'device': expected one of h100-sxm, h100-pcie, h200, a100-80gb, b200
// NOT-FUSED: ew-cost: 'ew.add' is not inside an ew.kernel: run ew-fuse before the cost model

// After ew-workspace, its size function (@main_workspace_bytes) launches nothing: no report of it
// (it had a table of no kernels).
// WORKSPACE-LABEL: ew-cost @main: 11 kernels, 28 tensor reads+writes, 3,288,334,336 bytes
// WORKSPACE-NOT:   workspace_bytes

// Lowered to LLVM, the module has no func.func: said, not an empty report with status 0.
// LOWERED: ew-cost: 'llvm.func' @main is lowered to LLVM: the cost model prices ew.kernel ops, run it before they are lowered (ew-kernel-to-loops, ew-to-linalg, ew-to-nvvm)
builtin.module {
  func.func @fused(%x: tensor<?xf32>, %b: tensor<?xf32>, %r: tensor<?xf32>) -> tensor<?xf32> {
    %out = ew.kernel ins(%x, %b, %r : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32> {
    ^bb0(%0: f32, %1: f32, %2: f32):
      %3 = arith.addf %0, %1 : f32
      %4 = arith.constant 5.000000e-01 : f32
      %5 = arith.mulf %4, %3 : f32
      %6 = arith.constant 4.471500e-02 : f32
      %7 = arith.mulf %6, %3 : f32
      %8 = arith.mulf %7, %3 : f32
      %9 = arith.mulf %8, %3 : f32
      %10 = arith.addf %3, %9 : f32
      %11 = arith.constant 0.797884583 : f32
      %12 = arith.mulf %11, %10 : f32
      %13 = math.tanh %12 : f32
      %14 = arith.constant 1.000000e+00 : f32
      %15 = arith.addf %14, %13 : f32
      %16 = arith.mulf %5, %15 : f32
      %17 = arith.addf %16, %2 : f32
      ew.yield %17 : f32
    }
    func.return %out : tensor<?xf32>
  }
  func.func @unfused(%x: tensor<?xf32>, %b: tensor<?xf32>, %r: tensor<?xf32>) -> tensor<?xf32> {
    %h = ew.kernel ins(%x, %b : tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32> {
    ^bb0(%0: f32, %1: f32):
      %2 = arith.addf %0, %1 : f32
      ew.yield %2 : f32
    }
    %3 = ew.kernel ins(%h : tensor<?xf32>) -> tensor<?xf32> {
    ^bb0(%4: f32):
      %5 = arith.constant 5.000000e-01 : f32
      %6 = arith.mulf %5, %4 : f32
      ew.yield %6 : f32
    }
    %7 = ew.kernel ins(%h : tensor<?xf32>) -> tensor<?xf32> {
    ^bb0(%8: f32):
      %9 = arith.constant 4.471500e-02 : f32
      %10 = arith.mulf %9, %8 : f32
      ew.yield %10 : f32
    }
    %11 = ew.kernel ins(%7, %h : tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32> {
    ^bb0(%12: f32, %13: f32):
      %14 = arith.mulf %12, %13 : f32
      ew.yield %14 : f32
    }
    %15 = ew.kernel ins(%11, %h : tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32> {
    ^bb0(%16: f32, %17: f32):
      %18 = arith.mulf %16, %17 : f32
      ew.yield %18 : f32
    }
    %19 = ew.kernel ins(%h, %15 : tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32> {
    ^bb0(%20: f32, %21: f32):
      %22 = arith.addf %20, %21 : f32
      ew.yield %22 : f32
    }
    %23 = ew.kernel ins(%19 : tensor<?xf32>) -> tensor<?xf32> {
    ^bb0(%24: f32):
      %25 = arith.constant 0.797884583 : f32
      %26 = arith.mulf %25, %24 : f32
      ew.yield %26 : f32
    }
    %27 = ew.kernel ins(%23 : tensor<?xf32>) -> tensor<?xf32> {
    ^bb0(%28: f32):
      %29 = math.tanh %28 : f32
      ew.yield %29 : f32
    }
    %30 = ew.kernel ins(%27 : tensor<?xf32>) -> tensor<?xf32> {
    ^bb0(%31: f32):
      %32 = arith.constant 1.000000e+00 : f32
      %33 = arith.addf %32, %31 : f32
      ew.yield %33 : f32
    }
    %y = ew.kernel ins(%3, %30 : tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32> {
    ^bb0(%34: f32, %35: f32):
      %36 = arith.mulf %34, %35 : f32
      ew.yield %36 : f32
    }
    %out = ew.kernel ins(%y, %r : tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32> {
    ^bb0(%37: f32, %38: f32):
      %39 = arith.addf %37, %38 : f32
      ew.yield %39 : f32
    }
    func.return %out : tensor<?xf32>
  }
  func.func @bias_row(%x: tensor<?x?xbf16>, %b: tensor<14336xbf16>, %r: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
    %out = ew.kernel ins(%x, %b, %r : tensor<?x?xbf16>, tensor<14336xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16> {
    ^bb0(%xs: bf16, %bs: bf16, %rs: bf16):
      %xw = arith.extf %xs : bf16 to f32
      %bw = arith.extf %bs : bf16 to f32
      %rw = arith.extf %rs : bf16 to f32
      %h = arith.addf %xw, %bw : f32
      %t = math.tanh %h : f32
      %s = arith.addf %t, %rw : f32
      %o = arith.truncf %s : f32 to bf16
      ew.yield %o : bf16
    }
    func.return %out : tensor<?x?xbf16>
  }
  func.func @buffers(%x: memref<?xf32>, %b: memref<?xf32>, %out: memref<?xf32>) {
    %c0 = arith.constant 0 : index
    %n = memref.dim %x, %c0 : memref<?xf32>
    %t = memref.alloc(%n) : memref<?xf32>
    ew.kernel ins(%x, %b : memref<?xf32>, memref<?xf32>) outs(%t : memref<?xf32>) {
    ^bb0(%xs: f32, %bs: f32):
      %s = arith.addf %xs, %bs : f32
      ew.yield %s : f32
    }
    ew.kernel ins(%t : memref<?xf32>) outs(%t : memref<?xf32>) {
    ^bb0(%ts: f32):
      %half = arith.constant 0.5 : f32
      %p = arith.mulf %half, %ts : f32
      ew.yield %p : f32
    }
    memref.dealloc %t : memref<?xf32>
    func.return
  }
}
