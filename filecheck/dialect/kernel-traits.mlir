// xDSL's own cse, dce and canonicalize are legal after every stage: `ew.kernel` is isolated from
// above, has an implicit `ew.yield` terminator, and states its memory effects (none on tensors;
// on buffers it reads its `ins` and writes its `outs`).
// RUN: xfuse-opt %s -p 'ew-fuse{mode=none},cse,dce,canonicalize' | filecheck %s --check-prefix=TENSOR
// RUN: xfuse-opt %s -p 'ew-fuse{mode=none},ew-bufferize,cse,dce,canonicalize' | filecheck %s --check-prefix=BUFFER

// Two equal kernels on tensors are one; on buffers each writes its own result, and both stay
// (dce keeps a kernel that writes a buffer though nothing in the function reads it).
// TENSOR-LABEL: func.func @twice
// TENSOR-SAME:    (%[[X:.*]]: tensor<?xf32>)
// TENSOR-NEXT:    %[[E:.*]] = ew.kernel ins(%[[X]] : tensor<?xf32>) -> tensor<?xf32> {
// TENSOR:           math.exp
// TENSOR:         }
// TENSOR-NEXT:    func.return %[[E]], %[[E]]
// BUFFER-LABEL: func.func @twice
// BUFFER-SAME:    (%[[X:.*]]: memref<?xf32>, %[[A:.*]]: memref<?xf32>, %[[B:.*]]: memref<?xf32>)
// BUFFER:         ew.kernel ins(%[[X]] : memref<?xf32>) outs(%[[A]] : memref<?xf32>)
// BUFFER:         ew.kernel ins(%[[X]] : memref<?xf32>) outs(%[[B]] : memref<?xf32>)
// BUFFER-NEXT:      ^{{.*}}
// BUFFER-NEXT:      math.exp
func.func @twice(%x: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %a = ew.exp %x : tensor<?xf32>
  %b = ew.exp %x : tensor<?xf32>
  func.return %a, %b : tensor<?xf32>, tensor<?xf32>
}

// A kernel on tensors whose result is unused is dead; once bufferized it writes a buffer, which
// dce keeps (only a pass that knows the buffer is never read may drop it).
// TENSOR-LABEL: func.func @unused
// TENSOR-NOT:     math.tanh
// TENSOR:         arith.negf
// TENSOR-NOT:     math.tanh
// TENSOR:         func.return
// BUFFER-LABEL: func.func @unused
// BUFFER:         %[[T:.*]] = memref.alloc
// BUFFER-NEXT:    ew.kernel ins({{.*}}) outs(%[[T]] : memref<?xf32>)
// BUFFER:           math.tanh
// BUFFER:         arith.negf
func.func @unused(%x: tensor<?xf32>) -> tensor<?xf32> {
  %dead = ew.kernel ins(%x : tensor<?xf32>) -> tensor<?xf32> {
  ^bb0(%xs: f32):
    %t = math.tanh %xs : f32
    ew.yield %t : f32
  }
  %n = ew.neg %x : tensor<?xf32>
  func.return %n : tensor<?xf32>
}

// Kernels of the same inputs but different bodies stay two: cse compares the regions too.
// TENSOR-LABEL: func.func @different
// TENSOR:         %[[A:.*]] = ew.kernel
// TENSOR:           math.exp
// TENSOR:         %[[B:.*]] = ew.kernel
// TENSOR:           math.tanh
// TENSOR:         func.return %[[A]], %[[B]]
func.func @different(%x: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %a = ew.exp %x : tensor<?xf32>
  %b = ew.tanh %x : tensor<?xf32>
  func.return %a, %b : tensor<?xf32>, tensor<?xf32>
}
