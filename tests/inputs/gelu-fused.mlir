builtin.module {
  func.func @main(%x: tensor<?xf32>, %b: tensor<?xf32>, %r: tensor<?xf32>) -> tensor<?xf32> {
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
}

