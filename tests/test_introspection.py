"""What a user asks xfuse about itself: versions, the passes and their options, reprs, dir()."""

from __future__ import annotations

import importlib.metadata
import inspect
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import xfuse
from xfuse.tools import cli, opt
from xfuse.tools.pass_help import pass_options
from xfuse.transforms import ALL_PASSES


def test_version_names_xfuse_and_the_libraries_that_decide_its_output(capsys) -> None:
    assert xfuse.__version__ == importlib.metadata.version("xfuse")
    for main in (cli.main, opt.main):
        with pytest.raises(SystemExit) as exit_:
            main(["--version"])
        assert exit_.value.code == 0
        printed = capsys.readouterr().out.strip()
        assert printed == (
            f"xfuse {xfuse.__version__} (xdsl {importlib.metadata.version('xdsl')}, "
            f"llvmlite {importlib.metadata.version('llvmlite')})"
        )


def test_python_m_xfuse_runs_the_xfuse_command() -> None:
    """As `python -m pip` runs pip: `python -m xfuse` (no module `xfuse.__main__` before)."""
    done = subprocess.run(
        [sys.executable, "-m", "xfuse", "--version"], capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith(f"xfuse {xfuse.__version__} (xdsl ")


def test_list_passes_shows_every_pass_and_option(capsys) -> None:
    with pytest.raises(SystemExit):
        opt.main(["--list-passes"])
    listing = capsys.readouterr().out
    for name in ALL_PASSES:
        assert f"\n{name}: " in f"\n{listing}"
    assert "ew-fuse: Fuse elementwise ops into `ew.kernel` ops" in listing
    assert "    mode: 'greedy' | 'none' = 'greedy'\n        greedy: maximal legal fusion" in listing
    assert "    unsafe-math: bool = false\n" in listing


def test_every_pass_option_is_documented() -> None:
    undocumented = [
        f"{name}{{{option.name}}}"
        for name, factory in ALL_PASSES.items()
        for option in pass_options(factory())
        if not option.doc
    ]
    assert not undocumented, f"write a docstring under these pass fields: {undocumented}"


def test_every_pass_option_is_set_in_its_filecheck_file() -> None:
    """Each pass has `filecheck/*/<name>.mlir`, with a RUN line setting each of its options."""
    files = {path.stem: path for path in Path(__file__).parents[1].glob("filecheck/*/*.mlir")}
    unexercised: list[str] = []
    for name, factory in ALL_PASSES.items():
        text = files[name].read_text() if name in files else ""
        runs = [line for line in text.splitlines() if "RUN:" in line]
        unexercised += [
            f"{name}{{{option.name}}}"
            for option in pass_options(factory())
            if not any(re.search(rf"{name}{{[^}}]*\b{option.name}=", run) for run in runs)
        ]
        if not runs:
            unexercised.append(name)
    assert not unexercised, (
        f"no filecheck RUN line sets: {unexercised}; add one to filecheck/<stage>/<pass>.mlir"
    )


def test_kernel_and_jit_reprs_show_signature_and_options() -> None:
    kernel = xfuse.compile("input bf16 x[t, d]; input b[d]; out = x * b;", ["out"], math="libm")
    assert kernel.signature == "(x: bfloat16[t, d], b: float32[d]) -> (out: float32[?, ?])"
    assert repr(kernel).startswith(
        f"<xfuse.Kernel {kernel.signature} Options(fuse=True, math='libm'"
    )

    @xfuse.jit(fuse=False)
    def scaled(x, y):
        return x * y

    assert repr(scaled).startswith("<xfuse.jit scaled(x, y): 0 compiled, Options(fuse=False")
    scaled(np.ones(3, np.float32), np.ones(3, np.float32))
    assert repr(scaled).startswith("<xfuse.jit scaled(x, y): 1 compiled")


def test_dir_lists_the_lazy_exports_and_no_helper() -> None:
    """`dir(xfuse)` listed `Any`, `annotations` and `importlib`, the module's own imports."""
    listed = dir(xfuse)
    for name in ("compile", "jit", "Kernel", "ArgumentError", "tanh", "__version__"):
        assert name in listed
    listed_objects = {
        name
        for name in listed
        if not name.startswith("_") and not inspect.ismodule(getattr(xfuse, name))
    }  # (the subpackages imported so far are attributes too, as in any package)
    assert listed_objects == {*xfuse.__all__, "versions"}


def test_options_repr_leaves_out_the_other_targets_options() -> None:
    """A CUDA kernel's repr showed `interleave=None, streaming=True, ...`, options the CPU's
    alone that it refuses to take."""
    from xfuse.runtime.compiler import Options

    cuda = repr(Options(target="cuda"))
    assert "arch='sm_90'" in cuda and "streaming" not in cuda and "interleave" not in cuda
    cpu = repr(Options())
    assert "arch" not in cpu and "streaming=True" in cpu and "aligned_stores=True" in cpu


def test_prepared_call_repr_names_the_kernel_and_the_outputs_it_writes() -> None:
    kernel = xfuse.compile("input bf16 x[t, d]; out = x * 2;")
    prepared = kernel.prepare(x=np.ones((3, 4), kernel.function.inputs[0].dtype))
    assert repr(prepared) == (
        f"<xfuse.PreparedCall of {kernel.signature} writing (out: bfloat16[3, 4])>"
    )


def test_every_pass_is_registered_under_its_kebab_case_name() -> None:
    """A pass whose class's `name` differed from its key passed every test, was listed under
    its key, and failed in use with "bad options <name>" (`from_spec` refused the name)."""
    for key, factory in ALL_PASSES.items():
        name = factory().name
        assert name == key and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", key), (
            f"{key}: its class's `name` is {name!r}: it must be this key, in kebab case "
            "(src/xfuse/transforms/__init__.py registers it)"
        )
