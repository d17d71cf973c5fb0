// RUN: xfuse-opt %s -p xfuse-default | filecheck %s
// RUN: xfuse-opt %s -p 'xfuse-default{fuse=false}' | filecheck %s --check-prefix=UNFUSED
// RUN: xfuse-opt %s -p 'xfuse-default{fuse=false reuse=false}' | filecheck %s --check-prefix=NOREUSE
// RUN: xfuse-opt %s -p 'xfuse-default{math=libm}' | filecheck %s --check-prefix=LIBM
// RUN: xfuse-opt %s -p 'xfuse-default{fastmath=contract}' | filecheck %s --check-prefix=CONTRACT
// RUN: xfuse-opt %s -p 'xfuse-default{f16c=true}' | filecheck %s --check-prefix=F16C
// RUN: xfuse-opt %s -p 'xfuse-default{avx512bf16=true}' | filecheck %s --check-prefix=BF16HW
// RUN: xfuse-opt %s -p 'xfuse-default{ldexp=true}' | filecheck %s --check-prefix=LDEXP
// RUN: xfuse-opt %s -p 'xfuse-default{masked-remainder=true}' | filecheck %s --check-prefix=MASKED
// RUN: xfuse-opt %s -p 'xfuse-default{aligned-stores=false}' | filecheck %s --check-prefix=UNALIGNED

// xfuse-default is xfuse.compile's pipeline, ew on tensors to llvm: each option reaches the pass
// it names (the passes' own files check what each one does in detail).

// Fused, the chain is one loop, its arithmetic as written (IEEE, no flags), with no temporary;
// bound by its loads and stores, it first runs the elements before the output's first 64-byte
// boundary in a loop of their own, whose header block is named ^head (ew-kernel-to-loops'
// store-alignment), then the rest from there.
// Unfused, each op is a kernel in a function of its own (alike ones shared); the temporaries
// are views of a workspace argument: with reuse, one, that the add writes in place; without,
// one for each op's result.
// CHECK-LABEL: llvm.func @chain(
// CHECK-SAME:    %[[Q:[a-z0-9_]+]]: !llvm.ptr, %[[N:[a-z0-9_]+]]: i64)
// CHECK-NOT:     llvm.call
// CHECK:         %{{.*}} = llvm.ptrtoint %[[Q]] : !llvm.ptr to i64
// CHECK:         %[[H:.*]] = llvm.select %{{.*}}, %{{.*}}, %[[N]] : i1, i64
// CHECK:       ^head(%[[I:.*]]: i64):
// CHECK-NEXT:    llvm.icmp "slt" %[[I]], %[[H]] : i64
// CHECK:         llvm.fmul
// CHECK:         llvm.br ^head
// CHECK:         %[[REST:.*]] = llvm.sub %[[N]], %[[H]] : i64
// CHECK:         llvm.icmp "slt" %{{.*}}, %[[REST]] : i64
// CHECK:         %[[P:.*]] = llvm.fmul %{{[^ ]+}}, %{{[^ ]+}} : f32
// CHECK-NEXT:    %[[S:.*]] = llvm.fadd %[[P]], %{{[^ ]+}} : f32
// CHECK-NEXT:    llvm.fmul %[[S]], %{{[^ ]+}} : f32
// CHECK-NOT:     llvm.icmp
// CHECK:         llvm.return

// UNFUSED-LABEL: llvm.func @chain(
// UNFUSED-SAME:    %[[X:[a-z0-9_]+]]: !llvm.ptr, %{{[a-z0-9_]+}}: i64, %[[Y:[a-z0-9_]+]]: !llvm.ptr, %{{[a-z0-9_]+}}: i64, %[[Q:[a-z0-9_]+]]: !llvm.ptr, %{{[a-z0-9_]+}}: i64, %[[WS:[a-z0-9_]+]]: !llvm.ptr, %{{[a-z0-9_]+}}: i64)
// UNFUSED:         %[[T:.*]] = llvm.getelementptr inbounds %[[WS]][%{{.*}}]
// UNFUSED-NEXT:    llvm.call @chain.kernel0(%[[X]], %{{[^,]*}}, %[[Y]], %{{[^,]*}}, %[[T]], %{{[^,]*}})
// UNFUSED-NEXT:    llvm.call @chain.kernel1(%[[T]], %{{[^,]*}}, %[[X]], %{{[^,]*}})
// UNFUSED-NEXT:    llvm.call @chain.kernel0(%[[T]], %{{[^,]*}}, %[[Y]], %{{[^,]*}}, %[[Q]], %{{[^,]*}})
// UNFUSED-NEXT:    llvm.return

// NOREUSE-LABEL: llvm.func @chain(
// NOREUSE-SAME:    %[[WS:[a-z0-9_]+]]: !llvm.ptr, %{{[a-z0-9_]+}}: i64)
// NOREUSE:         %[[T1:.*]] = llvm.getelementptr inbounds %[[WS]][%{{.*}}]
// NOREUSE-NEXT:    llvm.call @chain.kernel0(%{{.*}}, %[[T1]], %{{[^,]*}})
// NOREUSE:         %[[T2:.*]] = llvm.getelementptr inbounds %[[WS]][%{{.*}}]
// NOREUSE-NEXT:    llvm.call @chain.kernel1(%[[T1]], %{{.*}}, %[[T2]], %{{[^,]*}})
// NOREUSE-NEXT:    llvm.call @chain.kernel0(%[[T2]], %{{.*}})
// NOREUSE-NEXT:    llvm.return

// With aligned-stores=false, the chain is one loop: no head.
// UNALIGNED-LABEL: llvm.func @chain(
// UNALIGNED-NOT:     llvm.ptrtoint
// UNALIGNED-COUNT-1: llvm.cond_br
// UNALIGNED-NOT:     llvm.cond_br
// UNALIGNED:         llvm.return

// CONTRACT-LABEL: llvm.func @chain(
// CONTRACT:         llvm.fmul %{{.*}}, %{{.*}} {fastmathFlags = #llvm.fastmath<contract>} : f32
// CONTRACT-NEXT:    llvm.fadd %{{.*}}, %{{.*}} {fastmathFlags = #llvm.fastmath<contract>} : f32
// CONTRACT-NEXT:    llvm.fmul %{{.*}}, %{{.*}} {fastmathFlags = #llvm.fastmath<contract>} : f32

// With masked-remainder, the loop after the head runs over the last whole block of 4 x 64
// bytes (64 f32) of the elements after the head, and a third loop, the remainder
// (^remainder), over the rest.
// MASKED-LABEL: llvm.func @chain(
// MASKED-SAME:    %{{[a-z0-9_]+}}: !llvm.ptr, %[[N:[a-z0-9_]+]]: i64)
// MASKED:         %[[H:.*]] = llvm.select %{{.*}}, %{{.*}}, %[[N]] : i1, i64
// MASKED:       ^head(%{{[0-9]+}}: i64):
// MASKED:         %[[REST:.*]] = llvm.sub %[[N]], %[[H]] : i64
// MASKED-NEXT:    %[[BLOCK:.*]] = llvm.mlir.constant(-64) : i64
// MASKED-NEXT:    %[[MAIN:.*]] = llvm.and %[[REST]], %[[BLOCK]] : i64
// MASKED:         llvm.icmp "slt" %{{.*}}, %[[MAIN]] : i64
// MASKED:       ^remainder(%{{[0-9]+}}: i64):
// MASKED-NEXT:    llvm.icmp "slt" %{{.*}}, %[[REST]] : i64
// MASKED:         llvm.return
func.func @chain(%x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %p = ew.mul %x, %y : tensor<?xf32>
  %s = ew.add %p, %x : tensor<?xf32>
  %q = ew.mul %s, %y : tensor<?xf32>
  func.return %q : tensor<?xf32>
}

// math=approx (the default) expands exp and tanh inline, exp's 2**n built of integer ops;
// math=libm calls the C library; ldexp=true applies exp's 2**n with `llvm.ldexp`.
// CHECK-LABEL: llvm.func @tanh_exp(
// CHECK-NOT:     llvm.call
// CHECK-NOT:     ldexp
// CHECK:         llvm.return

// LIBM-LABEL: llvm.func @tanh_exp(
// LIBM:         %[[E:.*]] = llvm.call @expf(%{{.*}}) : (f32) -> f32
// LIBM-NEXT:    llvm.call @tanhf(%[[E]]) : (f32) -> f32

// LDEXP-LABEL: llvm.func @tanh_exp(
// LDEXP:         llvm.call_intrinsic "llvm.ldexp.f32.i32"(%{{.*}}, %{{.*}}) : (f32, i32) -> f32
func.func @tanh_exp(%x: tensor<?xf32>) -> tensor<?xf32> {
  %e = ew.exp %x : tensor<?xf32>
  %t = ew.tanh %e : tensor<?xf32>
  func.return %t : tensor<?xf32>
}

// f16 -> f32 is integer code on the f16's bits, or one `fpext` with f16c=true.
// CHECK-LABEL: llvm.func @widen(
// CHECK:         %[[H:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f16
// CHECK-NEXT:    llvm.bitcast %[[H]] : f16 to i16
// CHECK-NOT:     llvm.fpext

// F16C-LABEL: llvm.func @widen(
// F16C:         %[[H:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f16
// F16C-NEXT:    %[[W:.*]] = llvm.fpext %[[H]] : f16 to f32
// F16C-NEXT:    %[[AT:.*]] = llvm.getelementptr
// F16C-NEXT:    llvm.store %[[W]], %[[AT]] : f32, !llvm.ptr
func.func @widen(%x: tensor<?xf16>) -> tensor<?xf32> {
  %w = ew.convert %x : tensor<?xf16> to tensor<?xf32>
  func.return %w : tensor<?xf32>
}

// f32 -> bf16 is integer code, or with avx512bf16=true a call that xfuse's code generation
// makes an `fptrunc` to `bfloat`.
// CHECK-LABEL: llvm.func @narrow(
// CHECK-NOT:     llvm.call
// CHECK:         llvm.store %{{.*}}, %{{.*}} : i16, !llvm.ptr

// BF16HW-LABEL: llvm.func @narrow(
// BF16HW:         llvm.call @xfuse.fptrunc.f32.bf16(%{{.*}}) : (f32) -> i16
// BF16HW:         llvm.store %{{.*}}, %{{.*}} : i16, !llvm.ptr
func.func @narrow(%x: tensor<?xf32>) -> tensor<?xbf16> {
  %n = ew.convert %x : tensor<?xf32> to tensor<?xbf16>
  func.return %n : tensor<?xbf16>
}
