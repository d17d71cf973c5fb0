// Input of filecheck/passes/ew-cost.mlir: an elementwise op outside any kernel.
func.func @not_fused(%x: tensor<?xf32>) -> tensor<?xf32> {
  %y = ew.add %x, %x : tensor<?xf32>
  func.return %y : tensor<?xf32>
}
