builtin.module {
  func.func @main(%x: tensor<?xf32>, %b: tensor<?xf32>, %r: tensor<?xf32>) -> tensor<?xf32> {
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
}

