"""GPU specifications for the cost model, one sourced figure per field.

Which compute peak applies to elementwise kernels: they run on the CUDA cores, never on the tensor
cores (a tensor core only does matrix multiply-accumulate), and xfuse's kernels compute in f32 even
when the tensors are stored in f16 or bf16 (the region widens with `arith.extf` after loading and
rounds with `arith.truncf` before storing). So the peak that bounds them is the FP32 CUDA-core
("non-tensor", "VFMA") figure for f16, bf16 and f32 storage, and the FP64 one for f64. The BF16
dense tensor-core figure is kept for the matmul side (the ridge point the lecture quotes, ~295 on
an H100 SXM, is that peak over HBM bandwidth) and for the epilogue what-if.

Datasheet peaks count an FMA as 2 FLOPs and are at boost clock; "dense" means without 2:4
sparsity (datasheets print the sparse figure, twice the dense one, with an asterisk).
Cache sizes are binary megabytes (MiB), as NVIDIA means them.

Sources, cited per figure below:
  [H100-DS]  NVIDIA H100 Tensor Core GPU datasheet (2023), "Technical Specifications" table.
  [H100-WP]  NVIDIA H100 Tensor Core GPU Architecture whitepaper (v1.04), tables 1-3.
  [H200-DS]  NVIDIA H200 Tensor Core GPU datasheet (2024), "Technical Specifications" table.
  [A100-DS]  NVIDIA A100 Tensor Core GPU datasheet (2021), "Technical Specifications" table.
  [A100-WP]  NVIDIA A100 Tensor Core GPU Architecture whitepaper (v1.0), table 3 and the L2 section
             ("5,120 bytes/clk" of L2 read bandwidth).
  [B200-TB]  NVIDIA Blackwell Architecture Technical Brief (2024), HGX B200 per-GPU figures (1,000 W
             configuration): 192 GB HBM3e at 8 TB/s, 80 TFLOP/s FP32, 40 TFLOP/s FP64. NVIDIA's
             later HGX/DGX B200 tables give 180 GB per GPU (1,440 GB for 8) and lower peaks; the
             entry takes every figure from this one source, not a mix of the two.
  [B200-CC]  Chips and Cheese, "Nvidia's B200: Keeping the CUDA Juggernaut Rolling" (2025):
             148 SMs enabled (74 per die), 126 MB of L2 measured.
L2 bandwidth is not a datasheet figure for any of these parts: it is ESTIMATED as A100's published
5,120 bytes/clk per die [A100-WP] times the part's boost clock (an assumption for Hopper and
Blackwell, whose per-clock L2 bandwidth NVIDIA has not published). Only `l2=true` uses it.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20
_L2_BYTES_PER_CLOCK = 5120  # per die [A100-WP]


@dataclass(frozen=True)
class Device:
    """One GPU's figures; bandwidths in bytes/s, peaks in FLOP/s, sizes in bytes."""

    name: str
    description: str
    hbm_bandwidth: float
    fp32_cuda_core_peak: float
    fp64_cuda_core_peak: float
    bf16_tensor_core_peak: float
    l2_bytes: int
    l2_bandwidth: float
    sm_count: int
    sources: str

    def elementwise_peak(self, dtype: str) -> float:
        """The FLOP/s that bounds an elementwise kernel whose tensors are stored in `dtype`.

        f16/bf16/f32 kernels compute in f32 on the CUDA cores; f64 kernels in f64 (see above).
        """
        return self.fp64_cuda_core_peak if dtype == "float64" else self.fp32_cuda_core_peak

    def ridge_point(self, dtype: str) -> float:
        """FLOP per HBM byte above which an elementwise kernel stops being memory-bound."""
        return self.elementwise_peak(dtype) / self.hbm_bandwidth

    @property
    def tensor_core_ridge_point(self) -> float:
        """BF16 tensor-core peak over HBM bandwidth: the lecture's "ridge point 295" on H100."""
        return self.bf16_tensor_core_peak / self.hbm_bandwidth


H100_SXM = Device(
    name="h100-sxm",
    description="NVIDIA H100 SXM5 80 GB (HBM3, 700 W)",  # [H100-DS]
    hbm_bandwidth=3.35e12,  # 3.35 TB/s HBM3 [H100-DS]
    fp32_cuda_core_peak=67e12,  # 67 TFLOP/s FP32 [H100-DS] (66.9 in [H100-WP] table 2)
    fp64_cuda_core_peak=34e12,  # 34 TFLOP/s FP64 [H100-DS]
    bf16_tensor_core_peak=989e12,  # 1,979 TFLOP/s BF16 with sparsity, half dense [H100-DS]
    l2_bytes=50 * MIB,  # 50 MB L2 [H100-WP] table 3
    l2_bandwidth=_L2_BYTES_PER_CLOCK * 1.98e9,  # estimate: 1,980 MHz boost [H100-WP] table 3
    sm_count=132,  # 132 SMs [H100-WP] table 3
    sources="[H100-DS] [H100-WP]",
)

H100_PCIE = Device(
    name="h100-pcie",
    description="NVIDIA H100 PCIe 80 GB (HBM2e, 350 W)",  # [H100-DS]
    hbm_bandwidth=2.0e12,  # 2 TB/s HBM2e [H100-DS]
    fp32_cuda_core_peak=51e12,  # 51 TFLOP/s FP32 [H100-DS]
    fp64_cuda_core_peak=26e12,  # 26 TFLOP/s FP64 [H100-DS]
    bf16_tensor_core_peak=756e12,  # 1,513 TFLOP/s BF16 with sparsity, half dense [H100-DS]
    l2_bytes=50 * MIB,  # 50 MB L2 [H100-WP] table 3
    l2_bandwidth=_L2_BYTES_PER_CLOCK * 1.755e9,  # estimate: 1,755 MHz boost [H100-WP] table 3
    sm_count=114,  # 114 SMs [H100-WP] table 3
    sources="[H100-DS] [H100-WP]",
)

H200 = Device(
    name="h200",
    description="NVIDIA H200 SXM 141 GB (HBM3e, 700 W)",  # [H200-DS]
    hbm_bandwidth=4.8e12,  # 4.8 TB/s HBM3e [H200-DS]
    fp32_cuda_core_peak=67e12,  # 67 TFLOP/s FP32 [H200-DS]
    fp64_cuda_core_peak=34e12,  # 34 TFLOP/s FP64 [H200-DS]
    bf16_tensor_core_peak=989e12,  # 1,979 TFLOP/s BF16 with sparsity, half dense [H200-DS]
    l2_bytes=50 * MIB,  # same GH100 die and L2 as H100 SXM [H100-WP] table 3
    l2_bandwidth=_L2_BYTES_PER_CLOCK * 1.98e9,  # estimate, as H100 SXM [H100-WP] table 3
    sm_count=132,  # same GH100 configuration as H100 SXM [H100-WP] table 3
    sources="[H200-DS] [H100-WP]",
)

A100_80GB = Device(
    name="a100-80gb",
    description="NVIDIA A100 SXM4 80 GB (HBM2e, 400 W)",  # [A100-DS]
    hbm_bandwidth=2.039e12,  # 2,039 GB/s HBM2e [A100-DS]
    fp32_cuda_core_peak=19.5e12,  # 19.5 TFLOP/s FP32 [A100-DS]
    fp64_cuda_core_peak=9.7e12,  # 9.7 TFLOP/s FP64 [A100-DS]
    bf16_tensor_core_peak=312e12,  # 312 TFLOP/s BF16 dense [A100-DS]
    l2_bytes=40 * MIB,  # 40 MB L2 [A100-WP] table 3
    l2_bandwidth=_L2_BYTES_PER_CLOCK * 1.41e9,  # 5,120 B/clk at 1,410 MHz boost [A100-WP]
    sm_count=108,  # 108 SMs [A100-WP] table 3
    sources="[A100-DS] [A100-WP]",
)

B200 = Device(
    name="b200",
    description="NVIDIA B200 (HGX, 192 GB HBM3e, 1,000 W)",  # [B200-TB]
    hbm_bandwidth=8e12,  # 8 TB/s HBM3e per GPU [B200-TB]
    fp32_cuda_core_peak=80e12,  # 80 TFLOP/s FP32 per GPU [B200-TB]
    fp64_cuda_core_peak=40e12,  # 40 TFLOP/s FP64 per GPU [B200-TB]
    bf16_tensor_core_peak=2.25e15,  # 4.5 PFLOP/s BF16 with sparsity, half dense [B200-TB]
    l2_bytes=126 * MIB,  # 126 MB L2 measured [B200-CC]
    l2_bandwidth=2 * _L2_BYTES_PER_CLOCK * 1.98e9,  # estimate: two dies, H100-like clock [B200-CC]
    sm_count=148,  # 148 SMs [B200-CC]
    sources="[B200-TB] [B200-CC]",
)

DEVICES: dict[str, Device] = {d.name: d for d in (H100_SXM, H100_PCIE, H200, A100_80GB, B200)}
_ALIASES = {"h100": "h100-sxm", "a100": "a100-80gb", "h200-sxm": "h200"}
DEVICE_NAMES = (*DEVICES, *_ALIASES)
"""Every name `device` takes (in any case): the devices', then the aliases."""


def _device_choices() -> str:
    named = []
    for name in DEVICES:
        aliases = [alias for alias, target in _ALIASES.items() if target == name]
        named.append(f"{name} (or {', '.join(aliases)})" if aliases else name)
    return f"{', '.join(named[:-1])} or {named[-1]}"


DEVICE_CHOICES = _device_choices()
"""Every name `device` takes, in words for a help text: each device's, its aliases beside it."""

DEFAULT_LAUNCH_US = 4.0
"""Per-kernel launch overhead in microseconds: the lecture's assumption (P2)."""


def device(name: str) -> Device:
    """A device by name or alias (`h100` is the H100 SXM, `a100` the A100 80 GB)."""
    if not isinstance(name, str):  # (None was "'NoneType' object has no attribute 'lower'")
        raise TypeError(
            f"device must be a device's name, got {name!r}: one of {', '.join(DEVICE_NAMES)}"
        )
    key = name.lower()
    key = _ALIASES.get(key, key)
    if key not in DEVICES:
        raise ValueError(f"unknown device {name!r}: expected one of {', '.join(DEVICE_NAMES)}")
    return DEVICES[key]
