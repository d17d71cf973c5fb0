"""`xfuse lecture`: the four demos' figures on the lecture's GELU and on another program."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from xfuse.tools.cli import main
from xfuse.tools.lecture import GELU_SOURCE

ROOT = Path(__file__).parents[1]


def lecture_json(capsys: pytest.CaptureFixture[str], *arguments: str) -> dict[str, Any]:
    assert (
        main(["lecture", "--quick", "--n", "4096", "--repeat", "1", "--json", "-", *arguments]) == 0
    )
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def gelu(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("lecture") / "lecture.json"
    assert main(["lecture", "--quick", "--n", "4096", "--repeat", "1", "--json", str(path)]) == 0
    return json.loads(path.read_text())


def test_builtin_program_is_the_example() -> None:
    assert (ROOT / "examples" / "gelu.ew").read_text() == GELU_SOURCE


def test_demo1_dataflow(gelu: dict[str, Any]) -> None:
    demo = gelu["dataflow"]
    assert demo["ops"] == 11 and demo["depth"] == 10
    h = demo["rows"][0]
    assert (h["value"], h["op"], h["readers"], h["last_use"]) == ("%h", "add(%x, %b)", 5, 5)
    out = demo["rows"][-1]
    assert out["is_output"] and out["level"] == 10 and out["readers"] == 0
    assert "func.func @main" in demo["ir"] and "ew.tanh" in demo["ir"]
    assert "11 ops in a graph of depth 10: a chain" in demo["observations"][0]
    assert demo["observations"][1].startswith("%h is read by 5 ops")


def test_demo2_traffic(gelu: dict[str, Any]) -> None:
    demo = gelu["traffic"]
    unfused, fused = demo["rows"]
    assert (unfused["tensors"], fused["tensors"]) == (28, 4)
    assert (unfused["kernels"], fused["kernels"]) == (11, 1)
    assert demo["elements"] == 4096 * 14336 and demo["tensor_bytes"] == 2 * 4096 * 14336
    assert (
        unfused["bytes"] == 28 * demo["tensor_bytes"] and fused["bytes"] == 4 * demo["tensor_bytes"]
    )
    assert demo["intensity"] == pytest.approx(11 / 8)
    assert demo["decode_launch_share"] > 0.5
    assert "28 whole tensors; fused, 4" in demo["observations"][0]
    assert "still memory-bound" in demo["observations"][2]


def test_demo3_memory_plan(gelu: dict[str, Any]) -> None:
    demo = gelu["memory_plan"]
    assert (demo["planned_buffers"], demo["naive_buffers"]) == (3, 10)
    assert demo["max_live"] == 3 and demo["in_place"] == 7 and demo["fused_buffers"] == 0
    assert demo["planned_bytes"] == 3 * demo["buffer_bytes"]
    assert [row["buffer"] for row in demo["rows"]][:3] == [0, 1, 2]
    assert "down to 3 buffers" in demo["observations"][0]


def test_demo4_measurement(gelu: dict[str, Any]) -> None:
    demo = gelu["measurement"]
    assert demo["n"] == 4096 and demo["unfused_bytes"] == 28 * 4 * 4096
    assert demo["fused_bytes"] == 4 * 4 * 4096
    rows = {row["variant"]: row for row in demo["rows"]}
    assert list(rows) == [
        "numpy per-op",
        "numpy planned",
        "xfuse fused libm",
        "xfuse fused approx",
        "bandwidth ceiling",
    ]
    for name in ("numpy per-op", "numpy planned", "xfuse fused libm"):
        assert rows[name]["max_error"] < 1e-5
    assert rows["xfuse fused approx"]["max_error"] < 1e-4
    assert rows["bandwidth ceiling"]["max_error"] is None
    assert rows["bandwidth ceiling"]["of_ceiling"] == 1.0
    for row in rows.values():
        assert row["time_s"] > 0
        assert row["unfused_bandwidth"] == pytest.approx(row["fused_bandwidth"] * 7)
    assert demo["ceiling_source"] == "out = x + b + r"
    assert len(demo["observations"]) == 4


def test_other_program(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Other inputs, a log (positive inputs chosen), no tanh: the figures follow the program."""
    source = tmp_path / "softmaxish.ew"
    source.write_text("s = log(a) * c; t = exp(s) + c;")
    figures = lecture_json(capsys, "--source", str(source))
    assert figures["inputs"] == ["%a", "%c"] and figures["outputs"] == ["%t"]
    assert figures["dataflow"]["ops"] == 4 and figures["dataflow"]["depth"] == 4
    unfused, fused = figures["traffic"]["rows"]
    assert (unfused["tensors"], fused["tensors"]) == (10, 3)
    for row in figures["measurement"]["rows"]:
        assert row["max_error"] is None or row["max_error"] < 1e-4
    assert figures["measurement"]["ceiling_source"] == "t = a + c"


def test_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lecture", "--quick", "--n", "1024", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    for title in ("Demo 1", "Demo 2", "Demo 3", "Demo 4", "Observations"):
        assert title in out


def test_bad_program(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "bad.ew"
    source.write_text("y = x +;")
    assert main(["lecture", "--quick", "--source", str(source)]) == 1
    assert "bad.ew:1:8: error" in capsys.readouterr().err
