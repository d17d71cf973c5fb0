"""The on-disk compile cache: hits skip the pipeline, damaged or stale entries are replaced."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import importlib.metadata
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import ml_dtypes
import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

import xfuse
from xfuse.codegen.libdevice import find_libdevice
from xfuse.codegen.native import UnresolvedSymbolsError, declared_symbols
from xfuse.dialects import ew
from xfuse.frontend.language import EwNameWarning, parse_program
from xfuse.runtime import bound_calls, cache_files, disk_cache
from xfuse.runtime.compiler import compile_module
from xfuse.tools.cli import main as cli_main
from xfuse.transforms import ALL_PASSES

if TYPE_CHECKING:
    from conftest import Gelu


def inputs(n: int = 1000) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {name: rng.standard_normal(n, dtype=np.float32) for name in ("x", "b", "r")}


def entries(directory: Path) -> list[Path]:
    """The entries in `directory`'s toolchain subdirectories."""
    return sorted(directory.glob("toolchain-*/*.xfuse"))


def test_a_hit_runs_no_pass_and_gives_the_same_kernel(
    cache: Path, lowerings: list[str], gelu: Gelu
) -> None:
    compiled = xfuse.compile(gelu.source, fuse=False)
    assert len(lowerings) == 1
    # One entry by the source (no parse on a hit), one by the frontend IR (traced functions).
    assert len(entries(cache)) == 2
    assert all(path.stat().st_mode & 0o777 == 0o644 for path in entries(cache))  # shareable
    xfuse.clear_cache()
    loaded = xfuse.compile(gelu.source, fuse=False)
    assert len(lowerings) == 1
    assert loaded.program is not compiled.program
    assert loaded.signature == compiled.signature
    assert loaded.llvm_ir == compiled.llvm_ir
    assert loaded.ir("ew-fuse") == compiled.ir("ew-fuse")  # recomputed from the frontend IR
    assert loaded.function.workspace  # the unfused program's temporaries
    np.testing.assert_array_equal(loaded(**inputs()), compiled(**inputs()))


def test_a_hit_warns_as_the_parse_it_skips_did(cache: Path, lowerings: list[str]) -> None:
    """A typo's `EwNameWarning` came from the parse alone: a new process that loaded the program
    from the disk cache said nothing."""
    source = "input x;\nh = x * 2;\ny = hh + h;"
    for _ in range(2):  # compiled, then loaded
        xfuse.clear_cache()
        with pytest.warns(EwNameWarning) as caught:
            xfuse.compile(source)
        (warning,) = caught
        assert (warning.filename, warning.lineno) == ("<source>", 3)
        assert str(warning.message) == (
            "column 5: 'hh' is neither declared nor assigned, so it is an input: did you mean 'h'?"
        )
    assert len(lowerings) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):  # compiled, then loaded: a program that warned nothing
            xfuse.clear_cache()
            xfuse.compile("input x;\nh = x * 2;")
    assert len(lowerings) == 2


def test_options_and_programs_have_their_own_entries(
    cache: Path, lowerings: list[str], gelu: Gelu
) -> None:
    xfuse.compile(gelu.source)
    xfuse.compile(gelu.source, math="libm")
    xfuse.compile("out = x * 2;")
    assert len(lowerings) == 3
    assert len(entries(cache)) == 6


def test_a_pass_from_outside_the_package_keeps_its_kernels_off_disk(
    cache: Path, lowerings: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass a script adds to `ALL_PASSES` is in no toolchain fingerprint: its kernel from disk
    was the old code's after the script's pass changed (a key of its name alone); so is one put
    in the place of xfuse's own (a process got the stock pass's kernel from disk)."""

    @dataclasses.dataclass(frozen=True)
    class MulToAdd(ModulePass):
        name = "mul-to-add"

        def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
            for mul in [o for o in op.walk() if isinstance(o, ew.MulOp)]:
                mul_add = ew.AddOp(*mul.operands)
                Rewriter.replace_op(mul, mul_add)

    x = np.arange(4, dtype=np.float32)
    stock = "ew-strength-reduce"
    xfuse.compile("out = x * 3;", extra_passes=stock)
    assert len(entries(cache)) == 2  # xfuse's own passes: kept
    monkeypatch.setitem(ALL_PASSES, "mul-to-add", lambda: MulToAdd)

    @dataclasses.dataclass(frozen=True)
    class InPlaceOfXfuses(MulToAdd):
        name = "ew-strength-reduce"

    monkeypatch.setitem(ALL_PASSES, "ew-strength-reduce", lambda: InPlaceOfXfuses)
    for passes in ("mul-to-add", stock):
        for _ in range(2):  # a new process's compile: again from the source
            xfuse.clear_cache()
            np.testing.assert_array_equal(
                xfuse.compile("out = x * 3;", extra_passes=passes)(x), x + 3
            )
    assert len(lowerings) == 5 and len(entries(cache)) == 2


def test_output_names_of_commas_have_their_own_entries(cache: Path, lowerings: list[str]) -> None:
    """The key joined the names by ",": `["a", "a,a"]` and `["a,a", "a"]` shared an entry, so
    a new process got the other's names, and each `out=` by name the other output."""
    program = "a = x + 1; b = x * 2; output a, b;"
    x = np.arange(3, dtype=np.float32)
    for names in (["a", "a,a"], ["a,a", "a"]):
        xfuse.clear_cache()
        kernel = compile_module(parse_program(program), names)
        assert kernel.output_names == tuple(names)
        out = {name: np.empty(3, np.float32) for name in names}
        kernel(x, out=out)
        np.testing.assert_array_equal(out[names[0]], x + 1)
    assert len(lowerings) == 2


def test_a_traced_function_hits_by_its_frontend_ir(cache: Path, lowerings: list[str]) -> None:
    def scaled(x, b):
        return xfuse.tanh(x) * b

    x = np.linspace(-2, 2, 50, dtype=np.float32)
    first = xfuse.jit(scaled)(x, x)
    xfuse.clear_cache()
    np.testing.assert_array_equal(xfuse.jit(scaled)(x, x), first)
    assert len(lowerings) == 1


def corrupt_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


def not_an_entry(path: Path) -> None:
    path.write_bytes(b"not an xfuse cache entry")


def empty(path: Path) -> None:
    path.write_bytes(b"")


def checksummed_garbage(path: Path) -> None:
    body = b"\x80\x05garbage"
    path.write_bytes(cache_files.MAGIC + hashlib.sha256(body).digest() + body)


def earlier_layout(path: Path) -> None:
    """The entry as layout 2 wrote it (0.2.27 before `repeated_axes`: a KeyError on loading it
    where the package's version alone named the toolchain)."""
    fields = cache_files.sealed_fields(path.read_bytes())
    assert fields is not None
    fields.pop("repeated_axes", None)
    body = pickle.dumps(fields, protocol=pickle.HIGHEST_PROTOCOL)
    path.write_bytes(b"XFUSE-CACHE-2\n" + hashlib.sha256(body).digest() + body)


def oversized(path: Path) -> None:
    """A sparse file of 1 TiB in its place, which no read may take whole (one of 64 GiB raised
    MemoryError from `xfuse.compile` and `xfuse cache info`)."""
    os.truncate(path, 1 << 40)


@pytest.mark.parametrize(
    "damage",
    [corrupt_byte, truncate, not_an_entry, empty, checksummed_garbage, earlier_layout, oversized],
)
def test_a_damaged_entry_is_recompiled_and_replaced(
    cache: Path, lowerings: list[str], damage, gelu: Gelu
) -> None:
    expected = xfuse.compile(gelu.source)(**inputs())
    for path in entries(cache):
        damage(path)
    xfuse.clear_cache()
    np.testing.assert_array_equal(xfuse.compile(gelu.source)(**inputs()), expected)
    assert len(lowerings) == 2
    for path in entries(cache):
        assert disk_cache.decode(path.read_bytes(), path.stem) is not None, path
    xfuse.clear_cache()
    xfuse.compile(gelu.source)
    assert len(lowerings) == 2  # the replaced entries hit


def _unlinkable(*_: object) -> NoReturn:
    """`load_object_code` of code that refers to a name this process does not define (the
    process that compiled it had it): what it raises."""
    raise UnresolvedSymbolsError("the CPU code uses 'gone', which neither it nor ...")


def test_an_entry_whose_code_this_process_cannot_link_is_recompiled(
    cache: Path, lowerings: list[str], gelu: Gelu, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = xfuse.compile(gelu.source)(**inputs())
    xfuse.clear_cache()
    monkeypatch.setattr(disk_cache, "load_object_code", _unlinkable)
    np.testing.assert_array_equal(xfuse.compile(gelu.source)(**inputs()), expected)
    assert len(lowerings) == 2


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
def test_an_entry_that_is_no_regular_file_is_recompiled_and_replaced(
    cache: Path, gelu: Gelu, kind: str
) -> None:
    """A FIFO (whose opening waited for a writer) or a device (whose reading never ended) where
    an entry should be, the call glue's included, is a miss: a new process compiles."""
    compile_in_a_new_process = [
        sys.executable,
        "-c",
        f"import xfuse; xfuse.compile({gelu.source!r})",
    ]
    subprocess.run(compile_in_a_new_process, check=True, timeout=120)
    written = entries(cache)
    assert len(written) == 3  # the program's two and the glue's
    for path in written:
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to("/dev/zero")
    subprocess.run(compile_in_a_new_process, check=True, timeout=120)
    assert all(path.is_file() and not path.is_symlink() for path in written)
    assert all(disk_cache.decode(path.read_bytes(), path.stem) for path in written)


INFO_AFTER_A_SWAP = textwrap.dedent(
    """
    import os, sys
    import xfuse
    from xfuse.runtime import cache_files, disk_cache

    xfuse.compile(sys.argv[1])
    listed = cache_files.own_files(cache_files.cache_dir())
    swapped = listed.entries[0].path
    os.unlink(swapped)
    os.mkfifo(swapped)  # after info's listing, before its read
    disk_cache.own_files = lambda directory: listed
    print(disk_cache.info().entries)
    """
)


def test_info_reads_no_fifo_swapped_in_after_its_listing(cache: Path, gelu: Gelu) -> None:
    """An entry replaced by a FIFO between `xfuse cache info`'s listing and its reading is
    passed over (opening it to read waited for a writer forever)."""
    run = [sys.executable, "-c", INFO_AFTER_A_SWAP, gelu.source]
    counted = subprocess.run(run, check=True, timeout=60, capture_output=True, text=True)
    assert int(counted.stdout) == len(entries(cache)) - 1  # all but the FIFO (not an entry)


def test_alternating_toolchains_keep_their_own_entries(
    cache: Path,
    lowerings: list[str],
    bound_call_compiles: list[str],
    monkeypatch: pytest.MonkeyPatch,
    gelu: Gelu,
) -> None:
    """Two versions sharing one directory (two virtual environments, a cluster mid-upgrade)
    replaced each other's entries, the call glue's too (60-87 ms a switch): each toolchain has
    a subdirectory of its own, so both hit."""
    toolchains = [
        disk_cache.toolchain(),
        disk_cache.toolchain().replace("llvmlite", "llvmlite 0.1"),
    ]
    for toolchain in [*toolchains, *toolchains]:
        monkeypatch.setattr(disk_cache, "toolchain", lambda toolchain=toolchain: toolchain)
        monkeypatch.setattr(cache_files, "toolchain", lambda toolchain=toolchain: toolchain)
        xfuse.clear_cache()
        xfuse.compile(gelu.source)
        bound_calls._bound_call_module()
    assert len(lowerings) == 2  # once each, then hits
    assert len(bound_call_compiles) == 2
    directories = sorted(path.parent for path in entries(cache))
    assert len(set(directories)) == 2 and len(directories) == 6  # 2 programs' and 1 glue each
    for path in entries(cache):
        fields = cache_files.sealed_fields(path.read_bytes())
        assert fields is not None
        assert cache_files.toolchain_directory(cache, fields["toolchain"]) == path.parent


def test_cache_info_shows_each_toolchains_entries_and_sizes(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], gelu: Gelu
) -> None:
    xfuse.compile(gelu.source)
    current = disk_cache.toolchain()
    other = current.replace("xdsl", "xdsl 0.1")
    monkeypatch.setattr(disk_cache, "toolchain", lambda: other)
    xfuse.clear_cache()
    xfuse.compile("out = x * 2;")
    (cache / f"{'c' * 64}.xfuse").write_bytes(b"an entry of the layout before subdirectories")
    monkeypatch.setattr(disk_cache, "toolchain", lambda: current)
    sizes: dict[str, int] = {}
    for path in [*entries(cache), cache / f"{'c' * 64}.xfuse"]:
        directory = os.path.relpath(path.parent, cache)
        sizes[directory] = sizes.get(directory, 0) + path.stat().st_size
    mine = cache_files.toolchain_directory(cache, current).name
    theirs = cache_files.toolchain_directory(cache, other).name
    assert cli_main(["cache", "info", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    readable = {"readable": True}
    assert shown == {
        "directory": str(cache),
        "entries": 5,
        "total_bytes": sum(sizes.values()),
        "current": 2,
        "current_bytes": sizes[mine],
        "max_bytes": cache_files.DEFAULT_MAX_BYTES,
        "toolchains": sorted(
            [
                {
                    "directory": ".",
                    "toolchain": None,
                    "entries": 1,
                    "bytes": sizes["."],
                    **readable,
                },
                {
                    "directory": mine,
                    "toolchain": current,
                    "entries": 2,
                    "bytes": sizes[mine],
                    **readable,
                },
                {
                    "directory": theirs,
                    "toolchain": other,
                    "entries": 2,
                    "bytes": sizes[theirs],
                    **readable,
                },
            ],
            key=lambda files: files["directory"],
        ),
    }
    assert cli_main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"  {mine}: 2 entries, {sizes[mine]:,} bytes (this toolchain)\n" in out
    assert f"  {theirs}: 2 entries, {sizes[theirs]:,} bytes ({other})\n" in out
    never_read = "the layout before subdirectories, never read"
    assert f"  .: 1 entries, {sizes['.']:,} bytes ({never_read}: unreadable)\n" in out
    assert f"limit:     {cache_files.DEFAULT_MAX_BYTES:,} bytes " in out
    assert cli_main(["cache", "clear", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == 5
    assert list(cache.iterdir()) == []  # the emptied subdirectories too


def test_cache_info_does_not_call_old_layout_entries_this_toolchains(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry of the layout before subdirectories made by this toolchain (an installed xfuse
    of the same version wrote it) is never read: its row said '(this toolchain)' beside a
    'current' that did not count it."""
    entry = sorted(compile_new(cache, "out = x * 2;"))[0]
    shutil.copy(entry, cache / entry.name)
    assert cli_main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert "current:   2 " in out and "entries:   3 " in out
    size = entry.stat().st_size
    never_read = "the layout before subdirectories, never read: this toolchain"
    assert f"  .: 1 entries, {size:,} bytes ({never_read})\n" in out


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path], Path]]:
    """Makes `xfuse.__file__` point into a fake package under the given directory."""

    def make(parent: Path) -> Path:
        package = parent / "xfuse"
        (package / "passes").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "passes" / "fuse.py").write_text("A = 1\n")
        monkeypatch.setattr(xfuse, "__file__", str(package / "__init__.py"))
        cache_files._source_fingerprint.cache_clear()
        return package

    yield make
    monkeypatch.undo()
    cache_files._source_fingerprint.cache_clear()


def test_an_edited_source_file_changes_the_toolchain(package, tmp_path: Path) -> None:
    source = package(tmp_path / "src")
    before = disk_cache.toolchain()
    assert before.startswith(f"xfuse {xfuse.__version__}+")
    (source / "passes" / "fuse.py").write_text("A = 2\n")
    cache_files._source_fingerprint.cache_clear()
    assert disk_cache.toolchain() != before


def test_an_installed_package_is_named_by_its_version(package, tmp_path: Path) -> None:
    package(tmp_path / "lib" / "site-packages")
    assert disk_cache.toolchain().startswith(f"xfuse {xfuse.__version__} xdsl ")


def test_installed_versions_are_read_from_the_dist_info_next_to_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cache_files._installed_version("xdsl") == importlib.metadata.version("xdsl")
    site, elsewhere = tmp_path / "site-packages", tmp_path / "elsewhere"
    (site / "fakepkg").mkdir(parents=True)
    (site / "fakepkg" / "__init__.py").write_text("raise ImportError('not to be imported')\n")
    (site / "fakepkg-1.2.3.dist-info").mkdir()
    monkeypatch.syspath_prepend(site)
    monkeypatch.syspath_prepend(elsewhere)
    assert cache_files._installed_version.__wrapped__("fakepkg") == "1.2.3"
    (site / "fakepkg-1.2.3.dist-info").rename(site / "fakepkg-1.3.0.dist-info")  # an upgrade
    assert cache_files._installed_version.__wrapped__("fakepkg") == "1.3.0"
    # Installed apart from its package (editable): importlib.metadata finds it.
    (site / "fakepkg-1.3.0.dist-info").rmdir()
    (elsewhere / "fakepkg-2.0.dist-info").mkdir(parents=True)
    (elsewhere / "fakepkg-2.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fakepkg\nVersion: 2.0\n"
    )
    assert cache_files._installed_version.__wrapped__("fakepkg") == "2.0"


@pytest.mark.parametrize("value", ["0", "false", " OFF ", "No"])
def test_xfuse_cache_off_words_turn_it_off(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capsys, gelu: Gelu, value: str
) -> None:
    """`false`, `off` and `no` kept the cache on: only `0` turned it off."""
    monkeypatch.setenv("XFUSE_CACHE", value)
    xfuse.compile(gelu.source)
    assert not cache.exists()
    assert cli_main(["cache", "info"]) == 0
    assert capsys.readouterr().out == f"the compile cache is off (XFUSE_CACHE={value})\n"


@pytest.mark.parametrize("value", ["1", "TRUE", " on", "yes", ""])
def test_xfuse_cache_on_words_keep_it_on(
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    recwarn: pytest.WarningsRecorder,
    gelu: Gelu,
    value: str,
) -> None:
    monkeypatch.setenv("XFUSE_CACHE", value)
    xfuse.clear_cache()
    xfuse.compile(gelu.source)
    assert list(cache.iterdir())
    assert not [w for w in recwarn if "XFUSE_CACHE" in str(w.message)]


def warnings_of_two_compiles(gelu: Gelu, message: str) -> list[warnings.WarningMessage]:
    """The warnings of compiling `gelu` and a variant of it (two programs: a warning said once
    is said at the first), with xfuse's said-once memory cleared first; one matches `message`."""
    cache_files.warn_once.cache_clear()
    with pytest.warns(RuntimeWarning, match=message) as warned:
        xfuse.compile(gelu.source)
        xfuse.compile(gelu.source.replace("0.5", "0.25"))
    return list(warned)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "XFUSE_CACHE",
            "disabled",
            r"^xfuse: XFUSE_CACHE='disabled' is neither off \(0, false, off, no\) nor on \(1, "
            r"true, on, yes or empty\); the compile cache stays on$",
        ),
        (
            "XFUSE_CACHE_MAX_BYTES",
            "10 gigs",
            r"^xfuse: XFUSE_CACHE_MAX_BYTES='10 gigs' is no size \(a number of bytes, with k, M, "
            r"G, T or Ki, Mi, Gi, Ti after it if wanted: 500M, 2GiB; 0 for no limit\); the "
            r"compile cache keeps its default limit, 1,073,741,824 bytes$",
        ),
    ],
    ids=["on_or_off", "size_limit"],
)
def test_a_bad_cache_setting_warns_once_and_keeps_the_default(
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    gelu: Gelu,
    variable: str,
    value: str,
    message: str,
) -> None:
    """The cache stays on, with its default limit, and says so once, at the user's line."""
    monkeypatch.setenv(variable, value)
    warned = warnings_of_two_compiles(gelu, message)
    bad_setting = [w for w in warned if f"{variable}=" in str(w.message)]
    assert [w.filename for w in bad_setting] == [__file__]  # (not bound_calls.py, the glue)
    assert len(entries(cache)) == 4
    assert cache_files.max_bytes() == cache_files.DEFAULT_MAX_BYTES


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the XDG rule is Linux's")
@pytest.mark.parametrize("xdg_cache_home", [None, "/somewhere/cache", "relative/cache", ""])
def test_the_default_cache_dir_is_platformdirs_one(
    monkeypatch: pytest.MonkeyPatch, xdg_cache_home: str | None
) -> None:
    import platformdirs

    monkeypatch.delenv("XFUSE_CACHE_DIR", raising=False)
    monkeypatch.delenv("XFUSE_CACHE", raising=False)
    if xdg_cache_home is None:
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_CACHE_HOME", xdg_cache_home)
    assert disk_cache.cache_dir() == Path(platformdirs.user_cache_dir("xfuse"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the XDG rule is Linux's")
@pytest.mark.parametrize("home", [None, "relative/home"])
def test_no_home_directory_turns_the_cache_off_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, gelu: Gelu, home: str | None
) -> None:
    """With HOME unset and no password database entry (a container's arbitrary user id), or a
    relative HOME, `~/.cache` names no place: the cache is not made relative to the working
    directory (a directory named `~` there), it is off, and says so once."""
    import pwd

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(uid)

    for name in ("XFUSE_CACHE_DIR", "XFUSE_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    if home is None:
        monkeypatch.delenv("HOME", raising=False)
        monkeypatch.setattr(pwd, "getpwuid", no_entry)
    else:
        monkeypatch.setenv("HOME", home)
    monkeypatch.chdir(tmp_path)
    cache_files.warn_once.cache_clear()
    xfuse.clear_cache()
    with pytest.warns(RuntimeWarning, match="no home directory for the compile cache") as warned:
        kernel = xfuse.compile(gelu.source)
    assert [w.filename for w in warned] == [__file__]  # the user's line, not xfuse's
    np.testing.assert_allclose(kernel(**inputs()), gelu.reference(**inputs()), atol=1e-6)
    assert list(tmp_path.iterdir()) == []
    assert cli_main(["cache", "info"]) == 0
    assert capsys.readouterr().out == "the compile cache is off (no home directory for it)\n"


def test_finding_the_default_cache_dir_imports_no_platformdirs(tmp_path: Path) -> None:
    """platformdirs' import costs more than a whole cache hit (~6 ms)."""
    environment = {k: v for k, v in os.environ.items() if k != "XFUSE_CACHE_DIR"}
    script = "import sys; from xfuse.runtime import disk_cache as d; d.cache_dir(); "
    script += "print('platformdirs' in sys.modules)"
    child = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**environment, "XDG_CACHE_HOME": str(tmp_path)},
    )
    assert child.stdout.strip() == str(not sys.platform.startswith("linux")), child.stderr


def test_a_relative_cache_dir_stays_where_it_was_first_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lowerings: list[str], gelu: Gelu
) -> None:
    """A relative `XFUSE_CACHE_DIR` followed the working directory: after an `os.chdir` the
    process missed and wrote a second cache there."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    monkeypatch.setenv("XFUSE_CACHE_DIR", "relative/cache")
    cache_files._absolute.cache_clear()
    monkeypatch.chdir(first)
    xfuse.clear_cache()
    xfuse.compile(gelu.source)
    assert disk_cache.cache_dir() == first / "relative" / "cache"
    monkeypatch.chdir(second)
    xfuse.clear_cache()
    xfuse.compile(gelu.source)
    assert len(lowerings) == 1
    assert disk_cache.cache_dir() == first / "relative" / "cache"
    assert len(entries(first / "relative" / "cache")) == 2
    assert list(second.iterdir()) == []
    cache_files._absolute.cache_clear()


def test_a_tilde_in_the_cache_dir_is_the_home_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gelu: Gelu
) -> None:
    """`XFUSE_CACHE_DIR=~/xfuse-cache` (quoted, so that no shell expanded it) made a directory
    named `~` in the working directory."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XFUSE_CACHE_DIR", "~/xfuse-cache")
    monkeypatch.chdir(tmp_path)
    cache_files._absolute.cache_clear()
    xfuse.clear_cache()
    xfuse.compile(gelu.source)
    assert disk_cache.cache_dir() == tmp_path / "home" / "xfuse-cache"
    assert len(entries(tmp_path / "home" / "xfuse-cache")) == 2
    assert sorted(path.name for path in tmp_path.iterdir()) == ["home"]
    cache_files._absolute.cache_clear()


@pytest.mark.parametrize("directory", ["~/xfuse-cache", "~no-such-user-here/xfuse-cache"])
def test_a_tilde_that_names_no_home_turns_the_cache_off_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gelu: Gelu, directory: str
) -> None:
    import pwd

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(uid)

    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    monkeypatch.setenv("XFUSE_CACHE_DIR", directory)
    monkeypatch.chdir(tmp_path)
    cache_files._absolute.cache_clear()
    xfuse.clear_cache()
    message = f"^xfuse: XFUSE_CACHE_DIR='{directory}' names a home directory that there is none"
    warned = warnings_of_two_compiles(gelu, message)
    assert [w.filename for w in warned] == [__file__]
    assert list(tmp_path.iterdir()) == []
    cache_files._absolute.cache_clear()


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1048576", 1048576),
        (" 500M ", 500 * 10**6),
        ("2GiB", 2 * 2**30),
        ("1.5g", 1_500_000_000),
        ("1.1T", 1_100_000_000_000),  # exact: float arithmetic gives 1100000000000.0002
        ("64 kib", 65536),
        ("12b", 12),
        ("0", 0),
        ("0.00k", 0),
        (".5K", 500),
        ("1.0001", 1),  # rounded down
        # past int()'s 4,300 digits only in zeros that change nothing (it was a ValueError)
        ("0" * 4400 + "1G", 10**9),
        ("1." + "0" * 5000, 1),
        ("2." + "0" * 5000 + "1k", 2000),
    ],
)
def test_sizes_parse_as_ccaches_do(text: str, size: int) -> None:
    assert cache_files.parse_size(text) == size


@pytest.mark.parametrize(
    "text",
    ["lots", "-1", "1X", "1.5.2", "1e9", "nan", "inf", "b", ".", "1 000", "²", "1ki b"]
    # not zero, but under a byte: 0 would be no limit
    + ["0.5", "0.0001", "0.0001k", ".9b"]
    # more digits than int() takes (a ValueError at every compile), or under a byte
    + ["1" * 5000, "0." + "0" * 5000 + "1G"],
)
def test_what_is_no_size_parses_as_none(text: str) -> None:
    assert cache_files.parse_size(text) is None


def test_no_cache_limit_is_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XFUSE_CACHE_MAX_BYTES", "0")
    assert cache_files.max_bytes() is None
    monkeypatch.setenv("XFUSE_CACHE_MAX_BYTES", "")
    assert cache_files.max_bytes() == cache_files.DEFAULT_MAX_BYTES


def test_a_limit_under_a_byte_is_no_size_not_no_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XFUSE_CACHE_MAX_BYTES", "0.0001")
    cache_files.warn_once.cache_clear()
    with pytest.warns(RuntimeWarning, match=r"^xfuse: XFUSE_CACHE_MAX_BYTES='0.0001' is no size"):
        assert cache_files.max_bytes() == cache_files.DEFAULT_MAX_BYTES


def compile_new(cache: Path, program: str) -> set[Path]:
    """Compile `program`: the entries it adds to `cache`."""
    before = set(entries(cache))
    xfuse.compile(program)
    return set(entries(cache)) - before


def age(paths: list[Path], seconds: float) -> None:
    """Set `paths`' modification times `seconds` back: when they were last used."""
    when = time.time() - seconds
    for path in paths:
        os.utime(path, (when, when))


def test_a_write_past_the_limit_evicts_the_least_recently_used(
    cache: Path, monkeypatch: pytest.MonkeyPatch, lowerings: list[str]
) -> None:
    """Entries of about one size (two per program: by its source and by its frontend IR), a
    limit of 3.5 of them: the third program's writes evict the entries used longest ago (down
    to 90% of the limit), the second program's and the first's that no hit used, but not the
    first's that a hit used since."""
    programs = ["out = x * 3;", "out = x * 5;", "out = x * 7;"]

    first, second = compile_new(cache, programs[0]), compile_new(cache, programs[1])
    age(list(first), 3600)  # written first,
    age(list(second), 1800)
    xfuse.clear_cache()
    xfuse.compile(programs[0])  # and used since (by its source)
    used = {path for path in first if time.time() - path.stat().st_mtime < 60}
    limit = sum(path.stat().st_size for path in entries(cache)) * 7 // 8
    monkeypatch.setenv("XFUSE_CACHE_MAX_BYTES", str(limit))
    monkeypatch.setattr(cache_files, "SIZE_CHECK_INTERVAL_NS", 0)  # a check at every write
    third = compile_new(cache, programs[2])
    assert len(lowerings) == 3 and len(used) == 1 and len(third) == 2
    assert set(entries(cache)) == used | third
    assert sum(path.stat().st_size for path in entries(cache)) <= limit * 0.9
    xfuse.clear_cache()
    for program in programs:
        xfuse.compile(program)
    assert len(lowerings) == 4  # the evicted one compiled again, the others hit


def test_a_write_checks_the_size_at_most_once_a_minute(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The size check lists and stats every entry (240 ms for 20,000): a write makes it only
    where the last one, by any process, is a minute old; `clear` removes its marker."""

    xfuse.compile("out = x * 3;")  # the first write checks: the marker is made
    marker = cache / cache_files.SIZE_CHECK_MARKER
    assert marker.exists() and len(entries(cache)) == 2
    monkeypatch.setenv("XFUSE_CACHE_MAX_BYTES", "1")
    xfuse.compile("out = x * 5;")  # past the limit, but checked under a minute ago
    assert len(entries(cache)) == 4
    age([marker], 61)
    seven = compile_new(cache, "out = x * 7;")  # a minute on: the first write evicts the rest
    assert set(entries(cache)) == seven  # and its second is under a minute after that check
    age([marker], -3600)  # in the future (a clock set back): due too
    nine = compile_new(cache, "out = x * 9;")
    assert set(entries(cache)) == nine
    size = sum(path.stat().st_size for path in nine)
    assert disk_cache.clear() == disk_cache.Cleared(2, size)
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["dangling link", "link", "directory"])
def test_a_marker_that_is_not_a_file_is_not_followed_and_every_write_checks(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A link at the marker's name was followed (a file made outside the cache; a dangling one
    into a missing directory warned 'cannot write the compile cache' after each write had
    succeeded, and no size check was ever made); a directory there stopped `clear` with an
    error after it had removed the entries."""
    cache.mkdir()
    marker = cache / cache_files.SIZE_CHECK_MARKER
    outside = tmp_path / ("missing/file" if kind == "dangling link" else "file")
    if kind == "directory":
        marker.mkdir()
    else:
        marker.symlink_to(outside)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compile_new(cache, "out = x * 3;")
        monkeypatch.setenv("XFUSE_CACHE_MAX_BYTES", "1")
        five = compile_new(cache, "out = x * 5;")  # checked at each write: no marker says
    assert set(entries(cache)) == five and len(five) == 1  # one was made just now
    assert not outside.exists()
    assert disk_cache.clear().files == 1
    assert marker.is_dir() == (kind == "directory")  # a link is removed, not followed


def test_a_marker_of_another_user_leaves_every_write_checking(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a shared cache the marker may be another user's, which this one may not touch (as
    root, the tests cannot make one: setting its time is refused here instead). That warned
    'cannot write the compile cache (Permission denied)' after every good write, and no write
    of this user's ever checked the size."""
    cache.mkdir()
    marker = cache / cache_files.SIZE_CHECK_MARKER
    marker.touch()
    age([marker], 120)
    real_open, real_utime = os.open, os.utime

    def refused(function: Callable[..., Any]) -> Callable[..., Any]:
        def call(path: Any, *args: Any, **kwargs: Any) -> Any:
            if str(path) == str(marker):
                raise PermissionError(13, "Permission denied", str(path))
            return function(path, *args, **kwargs)

        return call

    monkeypatch.setattr(os, "open", refused(real_open))
    monkeypatch.setattr(os, "utime", refused(real_utime))
    monkeypatch.setenv("XFUSE_CACHE_MAX_BYTES", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        three = compile_new(cache, "out = x * 3;")
    assert set(entries(cache)) == three and len(three) == 1  # the first evicted by the second


def test_eviction_goes_by_use_across_toolchains_and_leaves_what_it_does_not_own(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    gone, old, new = (cache / f"toolchain-{digit * 16}" for digit in "012")
    for directory in (gone, old, new):
        directory.mkdir(parents=True)
    files = {  # oldest first
        "legacy": cache / f"{'a' * 64}.xfuse",  # the layout before subdirectories
        "gone": gone / f"{'b' * 64}.xfuse",
        "old": old / f"{'c' * 64}.xfuse",
        "new, used earlier": new / f"{'d' * 64}.xfuse",
        "new, used later": new / f"{'e' * 64}.xfuse",
        "just written": new / f"{'f' * 64}.xfuse",
    }
    for index, path in enumerate(files.values()):
        path.write_bytes(b"x" * 1000)
        age([path], 1000 * (len(files) - index))
    age([files["just written"]], 9000)  # even the oldest is kept: it was just written
    foreign = [cache / "notes.txt", cache / f"{'9' * 64}.xfuse.bak", old / "notes.txt"]
    for path in foreign:
        path.write_bytes(b"y" * 100_000)
        age([path], 99_000)
    cache_files.evict(cache, 3500, keep=files["just written"])  # 6000 bytes: down to 3150
    assert [name for name, path in files.items() if path.exists()] == [
        "new, used earlier",
        "new, used later",
        "just written",
    ]
    assert all(path.exists() for path in foreign)
    assert not gone.exists()  # emptied
    assert old.exists()  # holds another program's file
    cache_files.evict(cache, 1, keep=files["just written"])
    assert [path for path in files.values() if path.exists()] == [files["just written"]]
    cache_files.evict(cache, None, keep=files["just written"])  # no limit
    assert files["just written"].exists()


def test_a_hit_marks_its_entry_used_once_a_minute(cache: Path, gelu: Gelu) -> None:
    """Eviction goes by the modification time, which a hit sets, unless it is under a minute
    old (a metadata write per hit for nothing)."""
    xfuse.compile(gelu.source)
    paths = entries(cache)
    age(paths, 30)
    mtimes = [path.stat().st_mtime_ns for path in paths]
    xfuse.clear_cache()
    xfuse.compile(gelu.source)
    assert [path.stat().st_mtime_ns for path in paths] == mtimes
    age(paths, 3600)
    xfuse.clear_cache()
    xfuse.compile(gelu.source)
    # One entry renewed: the hit by the source, which needs no frontend IR's entry.
    assert len([path for path in paths if time.time() - path.stat().st_mtime < 60]) == 1


def test_an_entry_evicted_while_it_is_read_is_read_whole(
    cache: Path, monkeypatch: pytest.MonkeyPatch, lowerings: list[str], gelu: Gelu
) -> None:
    """Another process's eviction removes an entry that this one has opened: the read goes on
    (POSIX keeps an open file's data) and gives the program."""
    xfuse.compile(gelu.source)
    fstat = os.fstat
    evicted: list[int] = []

    def evict_first(descriptor: int) -> os.stat_result:
        cache_files.evict(cache, 1, keep=cache / "none")
        evicted.append(len(entries(cache)))
        return fstat(descriptor)

    monkeypatch.setattr(cache_files.os, "fstat", evict_first)
    xfuse.clear_cache()
    kernel = xfuse.compile(gelu.source)
    assert evicted == [0]
    assert len(lowerings) == 1
    np.testing.assert_allclose(kernel(**inputs()), gelu.reference(**inputs()), atol=1e-6)


def test_an_unwritable_cache_warns_and_compiles(tmp_path: Path, monkeypatch, gelu: Gelu) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("XFUSE_CACHE_DIR", str(blocker / "cache"))
    xfuse.clear_cache()
    with pytest.warns(RuntimeWarning, match="cannot write the compile cache") as warned:
        kernel = xfuse.compile(gelu.source)
    assert {w.filename for w in warned if "cannot write" in str(w.message)} == {__file__}
    expected = xfuse.compile(gelu.source, fuse=False)(**inputs())
    np.testing.assert_allclose(kernel(**inputs()), expected, atol=1e-6)


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda path: path.symlink_to(path.parent / "missing"), "cache is a link to nothing"),
        (lambda path: path.symlink_to(path), "cache is a link to nothing"),
        (lambda path: path.write_text(""), "cache is not a directory"),
    ],
    ids=["link to a missing directory", "link to itself", "file"],
)
def test_a_cache_directory_that_is_no_directory_says_what_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: Callable[[Path], object], reason: str
) -> None:
    """mkdir's "File exists" was the reason for each: true of the name, no help to the user."""
    cache = tmp_path / "cache"
    make(cache)
    monkeypatch.setenv("XFUSE_CACHE_DIR", str(cache))
    xfuse.clear_cache()
    message = rf"cannot write the compile cache in {re.escape(str(cache))} \({reason}"
    with pytest.warns(RuntimeWarning, match=message):
        kernel = xfuse.compile("y = x * 3 + 0.25;")
    np.testing.assert_array_equal(kernel(x=np.ones(4, np.float32)), 3.25)


def test_a_cache_path_that_cannot_be_checked_warns_and_compiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name too long for the file system (as a directory this user may not search) raised
    OSError out of `xfuse.compile`: pathlib's `is_symlink` raises what is not ENOENT."""
    monkeypatch.setenv("XFUSE_CACHE_DIR", str(tmp_path / ("a" * 300)))
    xfuse.clear_cache()
    with pytest.warns(RuntimeWarning, match=r"cannot write the compile cache .*File name too long"):
        kernel = xfuse.compile("y = x * 3 + 0.25;")
    np.testing.assert_array_equal(kernel(x=np.ones(4, np.float32)), 3.25)


def read_while_they_write(cache: Path, writers: list[subprocess.Popen[bytes]]) -> int:
    """Read every entry over and over until the `writers` exit (each must succeed): each read
    finds an entry whole or none (written or evicted meanwhile); how many were read."""
    reads = 0
    while any(writer.poll() is None for writer in writers):
        for path in entries(cache):
            try:
                data = path.read_bytes()
            except FileNotFoundError:  # replaced or evicted meanwhile
                continue
            assert disk_cache.decode(data, path.stem) is not None
            reads += 1
        time.sleep(0.001)
    assert [writer.returncode for writer in writers] == [0, 0]
    return reads


WRITER = textwrap.dedent(
    """
    import sys
    import numpy as np
    import xfuse
    from xfuse.runtime import compiler, disk_cache

    kernel = xfuse.compile(sys.argv[1])
    x = np.linspace(-4, 4, 999, dtype=np.float32)
    np.save(sys.argv[2], kernel(x=x, b=x, r=x))
    key = ("ir", kernel.program.frontend_ir, "out", repr(kernel.options))
    for _ in range(20):  # rewrite the entry over and over while the others read and write it
        disk_cache.store(key, kernel.program, "main")
    """
)


def test_concurrent_writers_never_expose_a_partial_entry(
    cache: Path, tmp_path: Path, gelu: Gelu
) -> None:
    results = [tmp_path / f"result{i}.npy" for i in range(2)]
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, gelu.source, str(result)])
        for result in results
    ]
    assert read_while_they_write(cache, writers) > 0
    assert not list(cache.rglob(".xfuse-tmp-*"))
    x = np.linspace(-4, 4, 999, dtype=np.float32)
    expected = xfuse.compile(gelu.source)(x=x, b=x, r=x)
    for result in results:
        np.testing.assert_array_equal(np.load(result), expected)


EVICTING_WRITER = textwrap.dedent(
    """
    import sys
    import xfuse
    from xfuse.runtime import cache_files, disk_cache

    cache_files.SIZE_CHECK_INTERVAL_NS = 0  # a size check at every write
    kernel = xfuse.compile(sys.argv[1])
    for index in range(40):  # a new entry each time, past a limit of a few: each evicts
        disk_cache.store(("evicting", sys.argv[2], str(index)), kernel.program, "main")
    """
)


def test_concurrent_evictions_never_expose_a_partial_entry(
    cache: Path, monkeypatch: pytest.MonkeyPatch, gelu: Gelu
) -> None:
    """Two writers evict each other's entries while this process reads them: a read finds an
    entry whole or not at all, and neither writer fails."""
    xfuse.compile(gelu.source)
    size = max(path.stat().st_size for path in entries(cache))
    monkeypatch.setenv("XFUSE_CACHE_MAX_BYTES", str(4 * size))
    writers = [
        subprocess.Popen([sys.executable, "-c", EVICTING_WRITER, gelu.source, str(i)])
        for i in range(2)
    ]
    assert read_while_they_write(cache, writers) > 0
    assert sum(path.stat().st_size for path in entries(cache)) <= 4 * size
    assert not list(cache.rglob(".xfuse-tmp-*"))


def test_cache_info_and_clear(cache: Path, capsys: pytest.CaptureFixture[str], gelu: Gelu) -> None:
    xfuse.compile(gelu.source)
    (cache / "unrelated.txt").write_text("not ours")
    assert cli_main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"directory: {cache}" in out
    assert "entries:   2 (" in out
    assert "current:   2 " in out
    # what the others may be: another CPU's entries, valid, are not current either
    assert "this host; the others are stale, damaged, for another CPU or C library," in out
    assert cli_main(["cache", "clear"]) == 0
    assert "removed 2 file(s)" in capsys.readouterr().out
    assert not entries(cache)
    assert (cache / "unrelated.txt").exists()


def test_cache_info_counts_a_file_too_large_for_an_entry_without_reading_it(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = sorted(compile_new(cache, "out = x * 5;"))[0]
    oversized(entry)
    assert cli_main(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["total_bytes"] > 1 << 40 and info["current"] == info["entries"] - 1


def test_cache_info_and_clear_leave_files_they_did_not_write(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], gelu: Gelu
) -> None:
    """Only files named as `entry_path` names them, and temporary files, are the cache's: a
    cache directory shared with other files (`XFUSE_CACHE_DIR=~/project`) loses none of them."""
    xfuse.compile(gelu.source)
    outside = tmp_path / "outside.txt"
    outside.write_text("not ours")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / f"{'b' * 64}.xfuse").write_text("not ours, though named like an entry")

    def toolchain_like_directory_with_a_file(path: Path) -> None:
        path.mkdir()
        (path / "notes.txt").write_text("not ours")

    foreign = {
        "notes.xfuse": lambda path: path.write_text("not ours"),
        "link.xfuse": lambda path: path.symlink_to(outside),
        f"{'0' * 64}.xfuse.bak": lambda path: path.write_text("not ours"),
        "sub.xfuse": Path.mkdir,
        f"{'a' * 64}.xfuse": Path.mkdir,
        ".xfuse-tmp-a-directory": Path.mkdir,
        f"toolchain-{'d' * 16}": toolchain_like_directory_with_a_file,
        f"toolchain-{'e' * 16}": lambda path: path.symlink_to(elsewhere),
        f"toolchain-{'f' * 15}": lambda path: shutil.copytree(elsewhere, path),
    }
    for name, make in foreign.items():
        make(cache / name)
    assert cli_main(["cache", "info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entries"] == 2
    assert cli_main(["cache", "clear", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == 2
    assert sorted(path.name for path in cache.iterdir()) == sorted(foreign)
    assert outside.read_text() == "not ours"
    assert (cache / f"toolchain-{'d' * 16}" / "notes.txt").exists()
    assert (elsewhere / f"{'b' * 64}.xfuse").exists()
    assert (cache / f"toolchain-{'f' * 15}" / f"{'b' * 64}.xfuse").exists()


def test_a_linked_toolchain_directory_is_neither_written_nor_read(
    cache: Path, tmp_path: Path, lowerings: list[str], gelu: Gelu
) -> None:
    """`info`, eviction and `clear` do not follow a link named like a toolchain's subdirectory
    (above): what was written through one, where it was this toolchain's, grew without limit."""
    xfuse.compile(gelu.source)
    (current,) = cache.glob("toolchain-*")
    elsewhere = tmp_path / "elsewhere"
    current.rename(elsewhere)
    current.symlink_to(elsewhere)
    kept = sorted(elsewhere.iterdir())
    xfuse.clear_cache()
    message = (
        rf"^xfuse: cannot write the compile cache in {re.escape(str(cache))} "
        rf"\({current.name} is a link, which it does not follow\); set XFUSE_CACHE_DIR"
    )
    warned = warnings_of_two_compiles(gelu, message)
    assert len([w for w in warned if "cannot write" in str(w.message)]) == 1
    assert len(lowerings) == 3  # its entry is not read
    assert sorted(elsewhere.iterdir()) == kept  # nor another written there
    assert disk_cache.info().entries == 0


@pytest.mark.parametrize("step", ["rename", "temporary file"])
def test_a_clear_while_an_entry_is_written_is_no_error(
    cache: Path, monkeypatch: pytest.MonkeyPatch, gelu: Gelu, step: str
) -> None:
    """`xfuse cache clear` in another process removes the temporary file of an entry being
    written, or the toolchain's directory it made for it (empty) before the temporary file is
    made: the writer drops the entry, without warning that the directory is unwritable."""
    module, name = (cache_files.os, "replace") if step == "rename" else (tempfile, "mkstemp")
    step_function = getattr(module, name)

    def clear_first(*args: object, **kwargs: object) -> object:
        disk_cache.clear()
        return step_function(*args, **kwargs)

    monkeypatch.setattr(module, name, clear_first)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel = xfuse.compile(gelu.source)
    np.testing.assert_allclose(kernel(**inputs()), gelu.reference(**inputs()), atol=1e-6)
    assert list(cache.iterdir()) == []


@pytest.mark.parametrize("json_output", [False, True])
def test_cache_clear_removes_what_it_may_and_names_what_it_kept(
    cache: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    json_output: bool,
) -> None:
    """An entry this user may not remove (another user's in a shared cache, EPERM) stopped
    `clear` at it: the entries sorted after it, this user's own, stayed. Now each other one
    goes, and the command says what it kept and exits 1."""
    for factor in range(3):
        xfuse.compile(f"out = x * {factor + 2};")
    paths = sorted(entries(cache))
    theirs = paths[0]
    unlink = os.unlink

    def not_permitted(path: str, *args: object, **kwargs: object) -> None:
        if Path(path) == theirs:
            raise PermissionError(errno.EPERM, "Operation not permitted", path)
        unlink(path, *args, **kwargs)

    monkeypatch.setattr(cache_files.os, "unlink", not_permitted)
    assert cli_main(["cache", "clear", *(["--json"] * json_output)]) == 1
    out, err = capsys.readouterr()
    assert entries(cache) == [theirs]
    if json_output:
        assert json.loads(out)["removed"] == len(paths) - 1 and json.loads(out)["kept"] == 1
    else:
        assert f"removed {len(paths) - 1} file(s)" in out
    assert f"kept 1 file(s) it could not remove, the first {theirs}: Operation not permitted" in err
    assert "Traceback" not in err


def test_another_users_unreadable_subdirectory_stops_no_eviction_info_or_clear(
    cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A toolchain's subdirectory this user may not list (another user's, 0700, in a shared
    cache): its PermissionError stopped eviction after each write (which then warned 'cannot
    write the compile cache'), `info` (no output, exit 1) and `clear` (nothing removed)."""
    theirs = cache / f"{cache_files.TOOLCHAIN_PREFIX}{'0' * 16}"
    theirs.mkdir(parents=True)
    (theirs / f"{'a' * 64}{cache_files.ENTRY_SUFFIX}").write_bytes(b"x" * 1000)
    scandir = os.scandir

    def not_listable(path: str | os.PathLike[str]) -> Any:
        if Path(path) == theirs:
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(cache_files.os, "scandir", not_listable)
    monkeypatch.setenv("XFUSE_CACHE_MAX_BYTES", "1")
    monkeypatch.setattr(cache_files, "SIZE_CHECK_INTERVAL_NS", 0)  # a check at every write
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        seven = compile_new(cache, "out = x * 7;")
        nine = compile_new(cache, "out = x * 9;")  # evicts the other program's entries
    their_entry = theirs / f"{'a' * 64}{cache_files.ENTRY_SUFFIX}"
    assert set(entries(cache)) == nine and their_entry.exists()  # (`entries` lists no `theirs`)
    assert seven and not seven & set(entries(cache))
    assert cli_main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"entries:   {len(nine)} " in out
    assert f"  {theirs.name}: 0 entries, 0 bytes (not readable by this user" in out
    assert cli_main(["cache", "info", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["toolchains"]
    assert [t["readable"] for t in listed if t["directory"] == theirs.name] == [False]
    assert cli_main(["cache", "clear"]) == 1
    out, err = capsys.readouterr()
    assert f"removed {len(nine)} file(s)" in out
    assert not entries(cache) and their_entry.exists()
    assert f"the first {theirs}: Permission denied" in err and "Traceback" not in err


def test_cache_clear_of_a_read_only_cache_names_what_it_kept(
    cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a read-only mount (EROFS, which Linux gives even for a file that is not there), the
    size-check marker's removal failed `clear` before it printed anything: an empty cache was
    "Read-only file system: .../.xfuse-size-checked", exit 1."""

    def read_only(path: str, *args: object, **kwargs: object) -> NoReturn:
        raise OSError(errno.EROFS, "Read-only file system", path)

    cache.mkdir(parents=True, exist_ok=True)
    with monkeypatch.context() as patch:
        patch.setattr(cache_files.os, "unlink", read_only)
        assert cli_main(["cache", "clear", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == 0
    xfuse.compile("out = x * 3;")
    kept = sorted(entries(cache))
    monkeypatch.setattr(cache_files.os, "unlink", read_only)
    assert cli_main(["cache", "clear"]) == 1
    out, err = capsys.readouterr()
    assert "removed 0 file(s)" in out and entries(cache) == kept
    assert f"kept {len(kept)} file(s) it could not remove, the first {kept[0]}: Read-only" in err


def test_cache_clear_prints_json_when_asked(
    cache: Path, capsys: pytest.CaptureFixture[str], gelu: Gelu
) -> None:
    xfuse.compile(gelu.source)
    sizes = sum(path.stat().st_size for path in entries(cache))
    assert cli_main(["cache", "clear", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "directory": str(cache),
        "removed": 2,
        "bytes": sizes,
        "kept": 0,
    }
    assert not entries(cache)


def test_the_toolchain_names_numpy_and_ml_dtypes() -> None:
    # Constant folding computes with numpy (and ml_dtypes for bf16): code folded under another
    # version may hold other bits.
    assert disk_cache.toolchain().endswith(
        f" numpy {np.__version__} ml_dtypes {ml_dtypes.__version__}"
    )


def test_cache_info_when_off(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XFUSE_CACHE", "0")
    assert cli_main(["cache", "info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "directory": None,
        "entries": 0,
        "total_bytes": 0,
        "current": 0,
        "current_bytes": 0,
        "max_bytes": cache_files.DEFAULT_MAX_BYTES,
        "toolchains": [],
    }


@pytest.mark.parametrize("action", ["info", "clear"])
@pytest.mark.parametrize(
    ("where", "inside"), [("file", ""), ("file/sub/dir", " (in {file}, which is not one either)")]
)
@pytest.mark.parametrize("file_is", ["a file", "a dangling link"])
def test_cache_commands_on_a_file_say_it_is_not_a_directory(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    action: str,
    where: str,
    inside: str,
    file_is: str,
) -> None:
    """`XFUSE_CACHE_DIR` naming a file, or a directory in one: info said "entries: 0", clear
    "removed 0 file(s)" (and before that, "error: Not a directory: .../.xfuse-size-checked", a
    marker the user never made); the file stays as it is. So for a link to nothing (it was
    passed over for its parent, which exists: "entries: 0" too)."""
    file = tmp_path / "file"
    if file_is == "a file":
        file.write_text("mine")
        problem = f"not a directory{inside.format(file=file)}"
    else:
        file.symlink_to("nowhere")
        dangling = "a link to nowhere, which resolves to nothing"
        problem = dangling if where == "file" else f"not a directory (in {file}, {dangling})"
    monkeypatch.setenv("XFUSE_CACHE_DIR", str(tmp_path / where))
    assert cli_main(["cache", action]) == 1
    assert capsys.readouterr().err == (
        f"xfuse cache: error: the cache directory {tmp_path / where} is {problem}: set "
        "XFUSE_CACHE_DIR to a writable directory or XFUSE_CACHE=0\n"
    )
    assert file.is_symlink() or file.read_text() == "mine"


def test_cli_shows_the_caches_warning_as_one_line() -> None:
    """Python placed it at the console script's line (`.../bin/xfuse:6: RuntimeWarning: xfuse:
    ...`, then the script's `sys.exit(main())`)."""
    done = subprocess.run(
        [sys.executable, "-m", "xfuse", "cache", "info"],
        env={**os.environ, "XFUSE_CACHE": "maybe"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0
    assert done.stderr == (
        "xfuse: warning: XFUSE_CACHE='maybe' is neither off (0, false, off, no) nor on "
        "(1, true, on, yes or empty); the compile cache stays on\n"
    )


def test_the_test_session_has_its_own_cache() -> None:
    assert "xfuse-test-cache-" in os.environ["XFUSE_CACHE_DIR"]


CACHED_RUN = textwrap.dedent(
    """
    import sys
    import numpy as np
    import xfuse

    kernel = xfuse.compile(sys.argv[1], dtype=sys.argv[2])
    x = np.linspace(-4, 4, 999, dtype=sys.argv[2])
    np.save(sys.argv[3], kernel(**{name: x for name in kernel.input_names}))
    print(sorted({name.split(".")[0] for name in sys.modules} & {"xdsl", "dask"}))
    """
)


@pytest.mark.parametrize("case", ["gelu", "f64-libmvec", "name-warning"])
def test_a_hit_in_a_new_process_loads_no_xdsl(
    cache: Path, tmp_path: Path, gelu: Gelu, case: str
) -> None:
    """f64's exp and tanh call libmvec's vector functions: the loaded code links to them too.
    A hit that issues the parse's name warning again (`yy` beside `y`) imported the parser, and
    with it xDSL, to do so."""
    source, dtype = {
        "gelu": (gelu.source, "float32"),
        "f64-libmvec": ("out = exp(x) * tanh(x);", "float64"),
        "name-warning": ("input x, y; out = x * y + yy;", "float32"),
    }[case]
    results = [tmp_path / f"result{i}.npy" for i in range(2)]
    runs = [
        subprocess.run(
            [sys.executable, "-c", CACHED_RUN, source, dtype, str(result)],
            capture_output=True,
            text=True,
            check=True,
        )
        for result in results
    ]
    # the first process compiles, the second loads
    assert [run.stdout.strip() for run in runs] == ["['xdsl']", "[]"]
    warned = ["EwNameWarning: column 27: 'yy'" in run.stderr for run in runs]
    assert warned == [case == "name-warning"] * 2
    np.testing.assert_array_equal(np.load(results[1]), np.load(results[0]))


CACHED_GPU_COMPILE = textwrap.dedent(
    """
    import sys
    import xfuse

    kernel = xfuse.compile(sys.argv[1], target="cuda")  # compiling and loading need no GPU
    print(sorted({name.split(".")[0] for name in sys.modules} & {"xdsl"}))
    print(kernel.ptx)
    """
)


def test_a_gpu_hit_in_a_new_process_loads_no_xdsl(cache: Path, gelu: Gelu) -> None:
    imported, ptx = zip(
        *(
            subprocess.run(
                [sys.executable, "-c", CACHED_GPU_COMPILE, gelu.source],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split("\n", 1)
            for _ in range(2)
        ),
        strict=True,
    )
    assert imported == ("['xdsl']", "[]")  # the first process compiles, the second loads
    assert ".entry main_kernel0(" in ptx[1] and ptx[1] == ptx[0]


@pytest.mark.parametrize(
    ("option", "error"),
    [
        ({"fastmath": "quick"}, ValueError),
        ({"fastmath": ["contract"]}, TypeError),  # unhashable
        ({"opt_level": 9}, ValueError),
        ({"extra_passes": "ew-fuse"}, ValueError),
        ({"fuse": 1}, TypeError),
    ],
)
def test_a_bad_option_raises_where_the_program_is_cached(
    cache: Path, option: dict[str, object], error: type[Exception], gelu: Gelu
) -> None:
    """Options are checked on a miss only, and a bad one never made an entry: it always misses."""
    xfuse.compile(gelu.source)
    (name,) = option
    for _ in range(2):  # in memory, then on disk only
        with pytest.raises(error, match=name):
            xfuse.compile(gelu.source, **option)  # type: ignore[arg-type]
        xfuse.clear_cache()


CODE_CHANGING_ARGUMENTS: list[dict[str, object]] = [
    {},
    {"fuse": False},
    {"math": "libm"},
    {"fastmath": "fast"},
    {"reuse": False},
    {"opt_level": 2},
    {"extra_passes": "ew-strength-reduce"},
    {"dtype": "float64"},
    {"dtype": {"b": "float16"}},
    {"shapes": {"x": ["t", "d"], "b": ["d"], "r": ["t", "d"]}},
    {"outputs": ["y"]},
    {"target": "cuda"},
    {"target": "cuda", "arch": "sm_80"},
    {"interleave": 2},
    {"streaming": False},
    {"masked_remainder": True},
    {"aligned_stores": False},
]


def test_every_argument_that_changes_code_and_the_cpu_have_their_own_entries(
    cache: Path, lowerings: list[str], use_cpu: Callable[[str, str], object], gelu: Gelu
) -> None:
    for arguments in CODE_CHANGING_ARGUMENTS:
        xfuse.compile(gelu.source, **arguments)  # type: ignore[arg-type]
    assert len(lowerings) == len(CODE_CHANGING_ARGUMENTS)
    xfuse.clear_cache()
    for arguments in CODE_CHANGING_ARGUMENTS:  # each finds its own entry on disk
        xfuse.compile(gelu.source, **arguments)  # type: ignore[arg-type]
    xfuse.compile(gelu.source, threads=2)  # the thread count is not in the code
    assert len(lowerings) == len(CODE_CHANGING_ARGUMENTS)
    use_cpu("x86-64", "+sse2")
    xfuse.compile(gelu.source)
    xfuse.compile(gelu.source, target="cuda")  # PTX does not depend on the host
    assert len(lowerings) == len(CODE_CHANGING_ARGUMENTS) + 1


def test_another_c_library_has_its_own_entries(
    cache: Path, lowerings: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # f64 code calls libmvec's functions: one cached under glibc 2.36 may call one (tanh, erf,
    # log1p) that an older glibc sharing the cache lacks, which MCJIT could not link.
    source = "out = tanh(x);"
    xfuse.compile(source, dtype="float64")
    xfuse.clear_cache()
    monkeypatch.setattr(disk_cache, "c_library", lambda: "glibc 2.31")
    xfuse.compile(source, dtype="float64")
    assert len(lowerings) == 2


@pytest.mark.skipif(find_libdevice() is None, reason="NVIDIA's libdevice is not installed")
def test_gpu_code_that_links_libdevice_has_its_entries_checked_against_it(
    cache: Path, lowerings: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # f64 math on the GPU links libdevice's code into the PTX: an entry made with another
    # libdevice (another CUDA toolkit), or where none is found now, is a miss; other PTX is not.
    f64, f32 = ("out = tanh(x);", "float64"), ("out = tanh(x);", "float32")
    for source, dtype in (f64, f32):
        xfuse.compile(source, dtype=dtype, target="cuda")
    found = find_libdevice()
    assert found is not None
    for now in (dataclasses.replace(found, digest="0" * 64), None, found):
        xfuse.clear_cache()
        monkeypatch.setattr(disk_cache, "find_libdevice", lambda now=now: now)
        for source, dtype in (f64, f32):
            xfuse.compile(source, dtype=dtype, target="cuda")
    assert lowerings.count(lowerings[0]) == 3  # the f64 program: made, then two misses, one hit
    assert len(lowerings) == 4


def test_info_does_not_count_entries_of_another_cpu_or_c_library_as_current(
    cache: Path, monkeypatch: pytest.MonkeyPatch, use_cpu: Callable[[str, str], object]
) -> None:
    """docs/scale-out.md: `info` counts the entries that "would be hits"; it counted every
    entry of this toolchain, those of another CPU sharing the cache too (each a miss here)."""
    xfuse.compile("out = x * 2;")
    xfuse.compile("out = x * 2;", target="cuda")  # (PTX: a hit on any host)
    assert (disk_cache.info().entries, disk_cache.info().current) == (4, 4)
    with monkeypatch.context() as glibc:
        glibc.setattr(disk_cache, "c_library", lambda: "glibc 2.31")
        assert (disk_cache.info().entries, disk_cache.info().current) == (4, 2)
    use_cpu("haswell", "+avx2,+fma,+avx")
    assert (disk_cache.info().entries, disk_cache.info().current) == (4, 2)


@pytest.mark.skipif(find_libdevice() is None, reason="NVIDIA's libdevice is not installed")
def test_info_does_not_count_gpu_entries_of_another_libdevice_as_current(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `load` misses them, so `xfuse cache info` must not call them usable.
    for dtype in ("float64", "float32"):  # f64 tanh links libdevice; f32 links none
        xfuse.compile("out = tanh(x);", dtype=dtype, target="cuda")
    found = find_libdevice()
    assert found is not None
    fields = [cache_files.sealed_fields(path.read_bytes()) for path in entries(cache)]
    linking = [
        f
        for f in fields
        if f and f["target"] == "cuda" and f["cuda_function"].ptx.libdevice == found.digest
    ]
    assert 0 < len(linking) < len(fields)
    before = disk_cache.info()
    assert before.current == before.entries == len(fields)
    for now in (dataclasses.replace(found, digest="0" * 64), None):
        monkeypatch.setattr(disk_cache, "find_libdevice", lambda now=now: now)
        info = disk_cache.info()
        assert (info.entries, info.current) == (len(fields), len(fields) - len(linking))
        assert info.current_bytes < before.current_bytes


BOUND_CALLS_USER = textwrap.dedent(
    """
    import sys
    import numpy as np
    import xfuse
    from xfuse.runtime import bound_calls

    compiled = []
    compile_llvm_ir = bound_calls.compile_llvm_ir
    bound_calls.compile_llvm_ir = lambda *args: compiled.append(args) or compile_llvm_ir(*args)
    x = np.linspace(-4, 4, 999, dtype=np.float32)
    xfuse.compile(sys.argv[1])(x=x, b=x, r=x)
    print(len(compiled))
    """
)


def test_the_bound_calls_symbols_are_every_declared_function_and_variable() -> None:
    """What MCJIT is told the addresses of: each function `BOUND_CALL_IR` declares (not LLVM's
    intrinsics) and each external variable, read here with regular expressions."""
    functions = re.findall(r"^declare [^@\n]*@([\w.]+)\(", bound_calls.BOUND_CALL_IR, re.MULTILINE)
    variables = re.findall(r"^@(\w+) = external global ", bound_calls.BOUND_CALL_IR, re.MULTILINE)
    expected = [name for name in functions if not name.startswith("llvm.")] + variables
    assert "PyEval_SaveThread" in expected and "_Py_NoneStruct" in expected
    assert declared_symbols(bound_calls.BOUND_CALL_IR) == expected


def bound_calls_compiled_by_a_new_process(cache: Path, source: str) -> int:
    """How many times a new process that compiles and calls a kernel compiles `BOUND_CALL_IR`."""
    environment = {**os.environ, "XFUSE_CACHE_DIR": str(cache)}
    run = subprocess.run(
        [sys.executable, "-c", BOUND_CALLS_USER, source],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(run.stdout)


def bound_call_entry(cache: Path) -> Path:
    return cache_files.entry_path(cache, cache_files.toolchain(), bound_calls.bound_call_digest())


def test_a_new_process_loads_the_bound_calls_from_the_cache(cache: Path, gelu: Gelu) -> None:
    assert bound_calls_compiled_by_a_new_process(cache, gelu.source) == 1
    entry = bound_call_entry(cache)
    assert entry.stat().st_mode & 0o777 == 0o644
    # An entry like a program's: `xfuse cache info` counts it, `xfuse cache clear` removes it.
    assert disk_cache.decode(entry.read_bytes(), entry.stem) is not None
    assert len(entries(cache)) == 3  # the program's two and the bound calls'
    assert bound_calls_compiled_by_a_new_process(cache, gelu.source) == 0
    assert disk_cache.clear().files == 3


@pytest.fixture
def bound_call_compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The IR of every `compile_llvm_ir` of `xfuse.runtime.bound_calls` (`BOUND_CALL_IR`'s)."""
    compiled: list[str] = []
    compile_llvm_ir = bound_calls.compile_llvm_ir

    def counting(llvm_ir: str, opt_level: int = 3, codegen_level: int | None = None):
        compiled.append(llvm_ir)
        return compile_llvm_ir(llvm_ir, opt_level, codegen_level)

    monkeypatch.setattr(bound_calls, "compile_llvm_ir", counting)
    return compiled


@pytest.mark.parametrize(
    "damage", [corrupt_byte, truncate, not_an_entry, empty, checksummed_garbage, oversized]
)
def test_a_damaged_bound_call_entry_is_compiled_and_replaced(
    cache: Path, bound_call_compiles: list[str], damage: Callable[[Path], None]
) -> None:
    bound_calls._bound_call_module()
    entry = bound_call_entry(cache)
    assert bound_call_compiles == [bound_calls.BOUND_CALL_IR]
    bound_calls._bound_call_module()
    assert len(bound_call_compiles) == 1  # loaded
    damage(entry)
    native = bound_calls._bound_call_module()
    assert len(bound_call_compiles) == 2
    assert native.address("keeping_gil")
    assert disk_cache.decode(entry.read_bytes(), entry.stem) is not None


def test_bound_calls_this_process_cannot_link_are_compiled(
    cache: Path, bound_call_compiles: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bound_calls._bound_call_module()
    monkeypatch.setattr(bound_calls, "load_object_code", _unlinkable)
    assert bound_calls._bound_call_module().address("keeping_gil")
    assert len(bound_call_compiles) == 2


def test_bound_calls_from_another_toolchain_are_compiled(
    cache: Path, bound_call_compiles: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bound_calls._bound_call_module()
    toolchain = cache_files.toolchain()
    monkeypatch.setattr(cache_files, "toolchain", lambda: toolchain.replace("python", "python 2"))
    bound_calls._bound_call_module()
    assert len(bound_call_compiles) == 2


def test_no_cache_writes_no_bound_call_entry(
    cache: Path, bound_call_compiles: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XFUSE_CACHE", "0")
    bound_calls._bound_call_module()
    bound_calls._bound_call_module()
    assert len(bound_call_compiles) == 2
    assert not cache.exists()


def test_a_toolchain_directory_is_shared_as_the_cache_directory_is(cache: Path) -> None:
    """Made with the process's umask, it was its first user's (0755, 0700 under umask 077):
    another user of a shared (1777) cache could not write it, or not read it. It takes the
    cache directory's bits, the sticky bit included."""
    cache.mkdir(parents=True, exist_ok=True)
    cache.chmod(0o1777)
    umask = os.umask(0o077)
    try:
        xfuse.compile("out = x * 7 + 1;")
    finally:
        os.umask(umask)
    (toolchain,) = cache.glob("toolchain-*")
    assert toolchain.stat().st_mode & 0o7777 == 0o1777
    assert all(path.stat().st_mode & 0o777 == 0o644 for path in entries(cache))
