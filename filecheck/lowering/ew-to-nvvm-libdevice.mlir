// RUN: xfuse-opt %s -p 'ew-to-nvvm,ew-expand-math{library=libdevice},ew-to-llvm{packed=false}' | filecheck %s

// The GPU pipeline's lowering of f64 transcendentals: ew-to-nvvm leaves them to ew-expand-math,
// whose calls are libdevice's (declared here; xfuse.codegen.ptx links their definitions in).
// CHECK-LABEL: llvm.func @f64_math_kernel0
// CHECK:         llvm.call @__nv_tanh(%{{.*}}) : (f64) -> f64
// CHECK:         llvm.call @__nv_pow(%{{.*}}, %{{.*}}) : (f64, f64) -> f64
// CHECK-DAG:   llvm.func @__nv_tanh(f64) -> f64
// CHECK-DAG:   llvm.func @__nv_pow(f64, f64) -> f64
func.func @f64_math(%x: memref<?xf64>, %y: memref<?xf64>, %out: memref<?xf64>) {
  ew.kernel ins(%x, %y : memref<?xf64>, memref<?xf64>) outs(%out : memref<?xf64>) {
  ^bb0(%xs: f64, %ys: f64):
    %t = math.tanh %xs : f64
    %p = math.powf %t, %ys : f64
    ew.yield %p : f64
  }
  func.return
}
