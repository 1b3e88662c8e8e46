"""The commands on .tflite files: emit, info, check and bench take them; check runs a streaming model several
times in a row against one LiteRT interpreter; a file cglow cannot read or translate gets one error line, exit
status 2 and no output file."""
from __future__ import annotations

from dataclasses import replace
import os
from pathlib import Path
import re

import numpy as np
import pytest

from cglow import cli

from cglow.tools import check
from cglow.tools.targets import TARGETS
from tests.tflite_file import TFLiteWriter
from tests.tflite_stream import svdf_spotter
from tests.util import cglow_cmd, need_tool


def small_int8(path: Path) -> str:
    """A quantized convolution and dense layer: int8 input and output with their scales."""
    rng = np.random.default_rng(0)
    w = TFLiteWriter()
    x = w.tensor("image", [1, 6, 6, 2], np.int8, scale=0.05, zero_point=-3)
    f = w.tensor("f", [4, 3, 3, 2], np.int8, rng.integers(-127, 128, (4, 3, 3, 2)).astype(np.int8),
                 scale=[0.01] * 4, zero_point=[0] * 4)
    y = w.tensor("y", [1, 6, 6, 4], np.int8, scale=0.08, zero_point=1)
    b = w.tensor("b", [4], np.int32, np.arange(4, dtype=np.int32) * 50, scale=[0.0005] * 4, zero_point=[0] * 4)
    w.op("CONV_2D", [x, f, b], [y], {"padding": "SAME", "stride_w": 1, "stride_h": 1,
                                     "fused_activation_function": "RELU"})
    r = w.tensor("r", [1, 144], np.int8, scale=0.08, zero_point=1)
    w.op("RESHAPE", [y], [r], {"new_shape": [1, 144]})
    d = w.tensor("d", [3, 144], np.int8, rng.integers(-127, 128, (3, 144)).astype(np.int8), scale=0.004,
                 zero_point=0)
    out = w.tensor("scores", [1, 3], np.int8, scale=0.2, zero_point=-5)
    w.op("FULLY_CONNECTED", [r, d, -1], [out], {})
    path.write_bytes(w.build([x], [out]))
    return str(path)


def test_emit_writes_the_files_quantized_io_in_the_header(tmp_path):
    model = small_int8(tmp_path / "small.tflite")
    result = cglow_cmd("emit", model, "-o", str(tmp_path / "net.c"))
    assert result.returncode == 0, result.stderr
    header = (tmp_path / "net.h").read_text()
    assert "#define NET_INPUT_0_SCALE 0.05f" in header and "#define NET_INPUT_0_ZERO_POINT -3" in header
    assert "#define NET_OUTPUT_0_SCALE 0.2f" in header and 'name in the model "scores"' in header
    result = cglow_cmd("emit", model, "--float-io", "-o", str(tmp_path / "f.c"))
    assert result.returncode == 0 and "float32 [1,6,6,2]" in (tmp_path / "f.h").read_text()


def test_info_lists_the_builtins_and_check_agrees_with_litert(tmp_path):
    if os.environ.get("CI") != "true":
        pytest.importorskip("ai_edge_litert")
    model = small_int8(tmp_path / "small.tflite")
    info = cglow_cmd("info", model)
    assert info.returncode == 0, info.stderr
    assert "ops: CONV_2D 1, FULLY_CONNECTED 1, RESHAPE 1" in info.stdout
    assert "image  int8[1,6,6,2]  scale 0.05, zero point -3" in info.stdout
    check = cglow_cmd("check", model)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "reference LiteRT" in check.stdout and "(0 quantization steps)" in check.stdout


def _need_litert() -> None:
    if os.environ.get("CI") != "true":
        pytest.importorskip("ai_edge_litert")


def _check_spotter(tmp_path, capsys, *args: str) -> tuple[int, list[str]]:
    """`cglow check` on the int8 SVDF spotter (state in two SVDF layers; the probabilities and the int8 logits
    as outputs): its exit status and the lines it printed."""
    _need_litert()
    path = tmp_path / "spotter.tflite"
    path.write_bytes(svdf_spotter(True))
    status = cli.main(["check", str(path), *args])
    out, err = capsys.readouterr()
    assert not err, err
    return status, out.splitlines()


@pytest.mark.parametrize("target", ["generic", "cortex-m4"])
def test_check_runs_a_streaming_model_several_times(target, tmp_path, capsys):
    """Four invocations in a row on seeds 0 to 3, each one's outputs compared with the same LiteRT interpreter's."""
    for tool in TARGETS[target].tools if target in TARGETS else ["cc"]:
        need_tool(tool)
    status, lines = _check_spotter(tmp_path, capsys, "--target", target)
    assert status == 0, lines
    assert "seeded random inputs (seeds 0 to 3: 4 invocations in a row, the state kept from one to the next)" \
        in lines[0]
    assert [line.split(": ")[0] for line in lines[1:-1]] == [
        f"invocation {k}, output {name}" for k in range(1, 5) for name in (
            "'probabilities' float32[1,12]", "'fully_connected' int8[1,12] (scale 0.3, zero point 0)")]
    assert all(line.endswith("(ok)") for line in lines[1:-1])
    assert lines[-1].startswith("check: passed: every output of every invocation within")


def test_check_of_a_streaming_model_repeats_given_inputs(tmp_path, capsys):
    need_tool("cc")
    np.save(tmp_path / "frame.npy", np.linspace(-1, 1, 40, dtype=np.float32).reshape(1, 1, 40, 1))
    status, lines = _check_spotter(tmp_path, capsys, "--input", str(tmp_path / "frame.npy"))
    assert status == 0, lines
    assert f"inputs from {tmp_path / 'frame.npy'} (in each of 4 invocations in a row, the state kept from one to " \
           "the next)" in lines[0]


def test_check_finds_a_state_that_is_not_kept(tmp_path, capsys, monkeypatch):
    """C that forgets the state at every run agrees with LiteRT on the first invocation only."""
    need_tool("cc")
    compile_model = check.compile_model

    def forgetful(*args, **kwargs):
        compiled = compile_model(*args, **kwargs)
        (head,) = re.findall(r"int net_run\([^)]*\)\n\{\n", compiled.c_source)
        return replace(compiled, c_source=compiled.c_source.replace(head, head + "    net_reset();\n"))
    monkeypatch.setattr(check, "compile_model", forgetful)
    status, lines = _check_spotter(tmp_path, capsys)
    assert status == 1
    assert [line.startswith("invocation 1, ") for line in lines if line.endswith("(ok)")] == [True, True]
    assert lines[-1].startswith("check: MISMATCH on 'probabilities' in invocations 2, 3, 4, 'fully_connected' in "
                                "invocations 2, 3, 4 (tolerance: ")


@pytest.mark.parametrize("op,version,kernels", [
    ("TILE", 3, "(reference kernels)"), ("MUL", 8, "(default kernels: its reference kernels lack MUL version 8)")])
def test_check_where_litert_reference_kernels_lack_a_version(op, version, kernels, tmp_path):
    """TensorFlow 2.21 writes an 8-bit TILE as version 3, which LiteRT 2.3 registers with its default kernels only;
    its reference resolver runs the same TILE kernel as version 2. Other operators run LiteRT's default kernels."""
    if os.environ.get("CI") != "true":
        pytest.importorskip("ai_edge_litert")
    w = TFLiteWriter()
    x = w.tensor("x", [2, 3], np.float32)
    y = w.tensor("y", [4, 3] if op == "TILE" else [2, 3], np.float32)
    second = w.tensor("multiples", [2], np.int32, np.array([2, 1], np.int32)) if op == "TILE" else x
    w.op(op, [x, second], [y], {} if op == "MUL" else None, version=version)
    model = tmp_path / "m.tflite"
    model.write_bytes(w.build([x], [y]))
    check = cglow_cmd("check", str(model))
    assert check.returncode == 0, check.stdout + check.stderr
    assert kernels in check.stdout


def _fails(result, *fragments: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and all(f in lines[0] for f in fragments), result.stderr
    assert "Traceback" not in result.stderr


def test_unsupported_builtins_are_named_with_their_operators(tmp_path):
    w = TFLiteWriter()
    ts = [w.tensor(f"t{i}", [2, 3], np.float32) for i in range(5)]
    w.op("RELU", [ts[0]], [ts[1]])
    w.op("CUMSUM", [ts[1], w.tensor("axis", [], np.int32, np.array(1, np.int32))], [ts[2]])
    w.op("ATAN2", [ts[2], ts[1]], [ts[3]])
    w.op("CUMSUM", [ts[3], w.tensor("axis2", [], np.int32, np.array(0, np.int32))], [ts[4]])
    model = tmp_path / "m.tflite"
    model.write_bytes(w.build([ts[0]], [ts[4]]))
    result = cglow_cmd("emit", str(model), "-o", str(tmp_path / "m.c"))
    _fails(result, "unsupported TFLite operators: ATAN2 (operator 2); CUMSUM (operators 1, 3)")
    assert not (tmp_path / "m.c").exists()


def test_a_damaged_file_is_one_error_line(tmp_path):
    data = Path(small_int8(tmp_path / "small.tflite")).read_bytes()
    damaged = tmp_path / "damaged.tflite"
    damaged.write_bytes(data[:200])
    _fails(cglow_cmd("emit", str(damaged), "-o", str(tmp_path / "d.c")), "damaged.tflite")
    assert not (tmp_path / "d.c").exists()
    _fails(cglow_cmd("emit", str(tmp_path / "small.tflite"), "--int8", "--calib", "x.npz", "-o",
                     str(tmp_path / "q.c")), "keeps the quantization it was converted with")
