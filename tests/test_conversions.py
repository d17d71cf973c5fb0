"""Float conversions in the generated code: bit-exact, and never a call the JIT cannot resolve.

Narrowing to f16/bf16 and widening from them are integer code in the kernel (`ew-to-llvm`'s
`narrow_bits`/`widen_bits`), so they are checked against numpy and ml_dtypes on every 16-bit
pattern and on f32/f64 values around every rounding boundary: halfway cases, subnormals,
overflow, infinities and NaNs. The external-call scan compiles every op and every conversion for
this host and for older x86-64 CPUs and reads the symbols the object code leaves for MCJIT to
resolve: a call to one it does not resolve (compiler-rt's `__truncdfhf2`, `__extendhfsf2`, ...)
segfaults when it runs.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest

import xfuse
from xfuse.codegen import native
from xfuse.codegen.native import HostCpu, host_cpu, libmvec_symbols
from xfuse.dialects import ew
from xfuse.transforms.expand_math import libm_functions

DTYPES = {
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
}
UNSIGNED = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def bits(values: np.ndarray) -> np.ndarray:
    return values.view(UNSIGNED[values.dtype.itemsize])


def boundary_values(source: np.dtype, target: np.dtype) -> np.ndarray:
    """`source` values at every kind of rounding boundary of `target`: all 2^16 patterns of a
    16-bit source; from f32/f64, random patterns, `target`'s values, the halfway points between
    neighbours (ties) and a source ulp either side of each, the overflow threshold, subnormals,
    infinities and NaNs (quiet and signaling, both signs)."""
    if source.itemsize == 2:
        return np.arange(1 << 16, dtype=np.uint16).view(source)
    unsigned = UNSIGNED[source.itemsize]
    rng = np.random.default_rng(0)
    patterns = rng.integers(0, np.iinfo(unsigned).max, 1 << 16, dtype=unsigned, endpoint=True)
    values = [patterns.view(source)]
    if target.itemsize < source.itemsize:
        target_patterns = np.arange(1 << 16, dtype=np.uint16)
        if target.itemsize == 4:
            target_patterns = rng.integers(0, 1 << 32, 1 << 16, dtype=np.uint32)
        with np.errstate(invalid="ignore"):
            exact = np.sort(target_patterns.view(target).astype(np.float64))
        exact = exact[np.isfinite(exact)]
        info = ml_dtypes.finfo(target)
        top_ulp = float(info.max) - float(np.nextafter(info.max, 0, dtype=target))
        # Ties between neighbours, and max + half an ulp (the overflow threshold): exact in f64.
        halfway = np.concatenate([(exact[:-1] + exact[1:]) / 2, [float(info.max) + top_ulp / 2]])
        with np.errstate(over="ignore"):
            near = np.concatenate([exact, halfway]).astype(source)
        values += [near, np.nextafter(near, source.type(np.inf)), np.nextafter(near, -near)]
    info = ml_dtypes.finfo(source)
    infinity = int(np.array(np.inf, source).view(unsigned))
    sign = 1 << (source.itemsize * 8 - 1)
    quiet = 1 << (int(info.nmant) - 1)
    special = [0, 1, 2, 3, 0x7FF, infinity, infinity | 1, infinity | quiet, infinity | quiet | 5]
    specials = np.array(special + [pattern | sign for pattern in special], unsigned)
    return np.concatenate([*values, specials.view(source)])


def converted_nans(source: np.ndarray, target: np.dtype) -> np.ndarray:
    """`source`'s NaNs converted as IEEE 754 recommends and x86 hardware does: a quiet NaN of the
    same sign whose payload keeps the source payload's leading bits (numpy and ml_dtypes drop
    or keep payloads depending on the pair, so they are no reference for NaN bits)."""
    source_bits = bits(source).astype(np.uint64)
    source_width, target_width = source.dtype.itemsize * 8, target.itemsize * 8
    source_fraction, target_fraction = (
        int(ml_dtypes.finfo(d).nmant) for d in (source.dtype, target)
    )
    sign = (source_bits >> np.uint64(source_width - 1)) << np.uint64(target_width - 1)
    payload = source_bits & np.uint64((1 << source_fraction) - 1)
    shift = np.uint64(abs(source_fraction - target_fraction))
    payload = payload >> shift if source_fraction > target_fraction else payload << shift
    infinity = int(bits(np.array(np.inf, target)))
    quiet = 1 << (target_fraction - 1)
    return (sign | np.uint64(infinity | quiet) | payload).astype(UNSIGNED[target.itemsize])


def assert_same_floats(got: np.ndarray, want: np.ndarray, source: np.ndarray) -> None:
    """Bit-exact: numbers as the reference has them, NaNs as `converted_nans`."""
    assert got.dtype == want.dtype
    with np.errstate(invalid="ignore"):
        nan = np.isnan(source.astype(np.float64))
    mismatch = np.flatnonzero(bits(got)[~nan] != bits(want)[~nan])
    assert not mismatch.size, (
        f"{mismatch.size} values differ, e.g. {source[~nan][mismatch[:4]]!r}: "
        f"got {[hex(b) for b in bits(got)[~nan][mismatch[:4]]]}, "
        f"want {[hex(b) for b in bits(want)[~nan][mismatch[:4]]]}"
    )
    expected_nans = converted_nans(source[nan], got.dtype)
    wrong = np.flatnonzero(bits(got)[nan] != expected_nans)
    assert not wrong.size, (
        f"NaN {hex(bits(source[nan])[wrong[0]])} became {hex(bits(got)[nan][wrong[0]])}, "
        f"want {hex(expected_nans[wrong[0]])}"
    )


PAIRS = list(itertools.permutations(DTYPES, 2))


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize(("source", "target"), PAIRS, ids=[f"{s}-{t}" for s, t in PAIRS])
def test_conversion_is_bit_exact(source: str, target: str, fuse: bool) -> None:
    kernel = xfuse.compile(f"input {source} x; out = {target}(x);", fuse=fuse)
    x = boundary_values(DTYPES[source], DTYPES[target])
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(DTYPES[target])
    assert_same_floats(kernel(x=x), want, x)


@pytest.mark.parametrize("source", ["f16", "bf16"])
@pytest.mark.parametrize(
    "program",
    [
        "out = x + y;",
        "out = y * x;",
        "out = (x + y) * x;",
        "out = f32(x) * 2;",
        "out = x / pow(y, 0);",
        "out = f32(x);",
        # x / (1 + 2^t) with t clamped: a clamp of a NaN is that NaN, no constant to fold.
        "out = 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x))) + y;",
        # Through erf's clamps of x and the multiplies after them.
        "out = 0.5 * x * (1 + erf(x * 0.70710678118654752)) + y;",
    ],
)
def test_a_widened_signaling_nan_comes_out_quiet(program: str, source: str) -> None:
    # A widening whose uses reach + - * / that LLVM keeps is not quieted (that op quiets a
    # signaling NaN, to the same bits: x * 2, GELU's x / (1 + 2^t) with its t clamped); before an
    # op LLVM drops (pow(y, 0) folds to 1, and x / 1 is x) or a plain conversion it is.
    every = np.arange(1 << 16, dtype=np.uint16).view(DTYPES[source])
    x = every[np.isnan(every.astype(np.float32))]
    kernel = xfuse.compile(f"input {source} x; input f32 y; {program}", ["out"])
    got = kernel(x=x, y=np.ones(x.size, np.float32))
    assert bits(got).tolist() == converted_nans(x, np.dtype(np.float32)).tolist()


@pytest.mark.parametrize("source", ["f16", "bf16"])
@pytest.mark.parametrize(
    "activation",
    [
        "x * sigmoid(x)",
        "x * sigmoid(1.703125 * x)",
        "softplus(x)",
        "-softplus(-x)",
        "log(1 + exp(x))",
        "0.5 * x * (1 + erf(x * 0.70703125))",
        "x * min(max(x + 3, 0), 6) / 6",
        "relu(x)",
    ],
)
def test_a_widened_input_computes_as_its_float32(activation: str, source: str) -> None:
    # Whether or not its users quiet a signaling NaN (the widening then does not), every 16-bit
    # input gives the bits the float32 program gives the widened value, rounded; a NaN gives a
    # quiet NaN (its sign is not defined where two NaNs meet in one op: `_QuietingUsers`).
    # The literals are exact in both types (a program's literals take its type).
    x = np.arange(1 << 16, dtype=np.uint16).view(DTYPES[source])
    got = xfuse.compile(f"input {source} x; out = {activation};")(x=x)
    wide = xfuse.compile(f"input f32 x; out = {activation};")(x=x.astype(np.float32))
    want = wide.astype(DTYPES[source])
    nan = np.isnan(want.astype(np.float32))
    assert np.array_equal(np.isnan(got.astype(np.float32)), nan)
    assert bits(got[~nan]).tolist() == bits(want[~nan]).tolist()
    quiet = 1 << (ml_dtypes.finfo(DTYPES[source]).nmant - 1)
    assert (bits(got[nan]) & quiet).all()  # no signaling NaN comes out


def test_f64_to_f16_rounds_once_not_through_f32() -> None:
    # 1 + 2^-11 + 2^-40 is just above the tie between two f16 values; through f32 it becomes
    # the tie itself (2^-40 is lost) and then rounds to even, one ulp down.
    x = np.array([1 + 2**-11 + 2**-40, 65519.99999999, 2.0**-25 * (1 + 2**-30)], np.float64)
    got = xfuse.compile("input f64 x; out = f16(x);")(x=x)
    assert bits(got).tolist() == [0x3C01, 0x7BFF, 0x0001]
    assert bits(got).tolist() == bits(x.astype(np.float16)).tolist()
    bf = xfuse.compile("input f64 x; out = bf16(x);")(x=np.array([1 + 2**-8 + 2**-30]))
    assert bits(bf).tolist() == [0x3F81]


INTRINSIC_LIBM_CALLS = {
    f"{name}{suffix}"
    for name in ("fma", "floor", "ceil", "trunc", "roundeven")
    for suffix in ("f", "")
}
"""How LLVM lowers the fma and rounding intrinsics on CPUs without FMA3 or SSE4.1 (glibc has
`roundeven` since 2.25)."""

ALLOWED_CALLS = {
    *libm_functions(),
    *INTRINSIC_LIBM_CALLS,
    *libmvec_symbols(),
    *("malloc", "free", "memset", "memcpy"),
}
"""libm (`math=libm`, and f64 under `math=approx`), libmvec's vector variants that this process
has (f64 under `math=approx`), the allocator, and the C library's memory functions: all in the
process, so MCJIT resolves them."""

CPUS = {
    "x86-64": "",
    "x86-64-v3": "+avx,+avx2,+fma,+f16c,+bmi,+bmi2",
    "skylake-avx512": "+avx,+avx2,+fma,+f16c,+avx512f,+avx512bw,+avx512dq,+avx512vl",
}
"""Besides the host: no F16C, AVX2 with F16C, AVX-512 without FP16 and BF16 (as
`XFUSE_CPU_NAME`/`XFUSE_CPU_FEATURES` give them: the code differs with F16C)."""


def undefined_symbols(kernel: xfuse.Kernel) -> set[str]:
    """What MCJIT must resolve when it links `kernel`'s code (`native.undefined_symbols`)."""
    undefined = native.undefined_symbols(kernel.function.native.object_code)
    assert undefined is not None, "MCJIT generates ELF objects on Linux"
    return undefined


def every_op_program(dtype: str) -> tuple[str, list[str]]:
    lines = [f"input {dtype} x; input {dtype} y;"]
    for name, op in ew.OPS_BY_MNEMONIC.items():
        lines.append(f"o_{name} = {name}({', '.join(['x', 'y', 'x'][: ew.arity(op)])});")
    return "\n".join(lines), [f"o_{name}" for name in ew.OPS_BY_MNEMONIC]


def every_conversion_program() -> tuple[str, list[str]]:
    names = dict(zip(DTYPES, "abcd", strict=True))
    lines = [" ".join(f"input {dtype} {name};" for dtype, name in names.items())]
    outputs = []
    for source, target in PAIRS:
        lines.append(f"{names[source]}_{target} = {target}({names[source]});")
        outputs.append(f"{names[source]}_{target}")
    for first, second in itertools.combinations(names.values(), 2):
        lines.append(f"{first}{second} = {first} * {second};")  # mixed types: promotion
        outputs.append(f"{first}{second}")
    return "\n".join(lines), outputs


PROGRAMS = {
    **{f"ops-{dtype}": every_op_program(dtype) for dtype in DTYPES},
    "conversions": every_conversion_program(),
}


# Unfused under `math=approx` on every CPU (each op its own kernel, every conversion stored), and
# fused under `math=libm` on the host: fused and unfused kernels called the same symbols, and
# approx and libm ones the same besides libm's (measured on every program here, on all four
# CPUs; the conversions are lowered alike), so the other two variants repeated the check.
@pytest.mark.parametrize(("fuse", "math_mode"), [(False, "approx"), (True, "libm")])
@pytest.mark.parametrize("program", list(PROGRAMS))
def test_kernels_call_only_what_the_jit_resolves(
    program: str, fuse: bool, math_mode: str, use_cpu: Callable[[str, str], HostCpu]
) -> None:
    source, outputs = PROGRAMS[program]
    kernels = {"host": xfuse.compile(source, outputs, fuse=fuse, math=math_mode)}
    for cpu, features in CPUS.items() if math_mode == "approx" else ():
        use_cpu(cpu, features)
        kernels[cpu] = xfuse.compile(source, outputs, fuse=fuse, math=math_mode)
    for cpu, kernel in kernels.items():
        unresolved = undefined_symbols(kernel) - ALLOWED_CALLS
        assert not unresolved, f"{cpu} code calls {sorted(unresolved)}"


def dense_f32_sweep() -> np.ndarray:
    """f32 values around every bf16 rounding boundary: each of the 2^16 upper halves (every
    sign, exponent, subnormal, infinity and NaN) with the lower halves that decide its rounding
    (0, 1, just below, at and just above the tie, all ones) and a random one."""
    upper = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
    lowers = [0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF]
    random = np.random.default_rng(1).integers(0, 1 << 16, 1 << 16, dtype=np.uint32)
    return np.concatenate([upper | np.uint32(low) for low in lowers] + [upper | random]).view(
        np.float32
    )


def bf16_cpu(kind: str, use_cpu: Callable[[str, str], HostCpu]) -> HostCpu:
    """The host with AVX512_BF16 (`hardware`), the host without it (`software`), or an AVX2
    CPU (`avx2`); skipped where the host cannot run that code."""
    host = host_cpu()
    if kind == "avx2":
        if not host.has("avx2"):
            pytest.skip("this host cannot run AVX2 code")
        return use_cpu("x86-64-v3", CPUS["x86-64-v3"])
    if not host.has("avx512bf16"):
        pytest.skip("this host has no AVX512_BF16")
    if kind == "hardware":
        return host
    features = [f for f in host.features.split(",") if f not in ("+avx512bf16", "-prefer-256-bit")]
    return use_cpu(host.name, ",".join([*features, "-avx512bf16"]))


@pytest.mark.parametrize("kind", ["hardware", "software", "avx2"])
def test_f32_to_bf16_is_bit_exact_in_hardware_and_software(
    kind: str, use_cpu: Callable[[str, str], HostCpu]
) -> None:
    """With AVX512_BF16 the vector loop rounds with `vcvtneps2bf16` (one instruction for 16
    lanes) and a fixup for the subnormals it treats as zero; without it, integer code: both to
    ml_dtypes' rounding of the float64 value, NaNs quieted with their sign and payload's top."""
    cpu = bf16_cpu(kind, use_cpu)
    kernel = xfuse.compile("input f32 x; out = bf16(x);")
    vector = "zmm" if cpu.float_lanes == 16 else "ymm"
    assert bool(re.search(rf"vcvtneps2bf16\s+%{vector}", kernel.asm)) == (kind == "hardware")
    x = dense_f32_sweep()
    with np.errstate(invalid="ignore"):  # NaN
        want = x.astype(np.float64).astype(ml_dtypes.bfloat16)
    assert_same_floats(kernel(x=x), want, x)


def test_bf16_rounds_in_hardware_only_with_avx512vl(
    use_cpu: Callable[[str, str], HostCpu],
) -> None:
    """AVX512_BF16 without AVX512VL has no scalar or 128/256-bit `vcvtneps2bf16`: there LLVM
    would call compiler-rt's `__truncsfbf2` for the loop's remainder, which MCJIT does not
    resolve (the call segfaulted), so such a CPU keeps the integer code."""
    if not host_cpu().has("avx512f"):
        pytest.skip("this host cannot run AVX-512 code")
    use_cpu("x86-64", "+avx,+avx2,+fma,+f16c,+avx512f,+avx512bf16")
    kernel = xfuse.compile("input f32 x; out = bf16(x);")
    assert undefined_symbols(kernel) <= ALLOWED_CALLS
    x = np.array([1.0, 1e-40, -np.inf], np.float32)
    assert bits(kernel(x=x)).tolist() == [0x3F80, 0x0001, 0xFF80]


def test_bf16_llm_gelu_has_the_same_bits_with_avx512bf16(
    use_cpu: Callable[[str, str], HostCpu],
) -> None:
    """The fused LLM GELU (bf16 x, r and bias) stores the same bits whether its f32 result is
    rounded by `vcvtneps2bf16` or by integer code: random rows, rows whose results are every bf16
    (0 + r: subnormals, zeros, infinities, NaNs), and the math on every bf16 input."""
    source = """input bf16 x[t, d], r[t, d], b[d];
    h = x + b;
    y = 0.5 * h * (1 + tanh(0.7978845608 * (h + 0.044715 * h * h * h)));
    out = y + r;"""
    every = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16).reshape(16, 4096)
    zeros = np.zeros_like(every)
    rng = np.random.default_rng(2)
    random = rng.standard_normal((2, 4096)).astype(ml_dtypes.bfloat16)
    x = np.concatenate([random, zeros, every])  # y + r is r exactly, then the math on every x
    r = np.concatenate([random[::-1], every, zeros])
    b = random[0]
    results = {}
    for kind in ("hardware", "software"):
        bf16_cpu(kind, use_cpu)
        results[kind] = bits(xfuse.compile(source)(x=x, r=r, b=b))
    np.testing.assert_array_equal(results["hardware"], results["software"])
