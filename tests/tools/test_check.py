"""`cglow check`: the model's C built and run on the host (or under QEMU for cortex-m4) against onnxruntime, on
seeded or given inputs; a wrong C is a mismatch (exit 1); bad inputs and missing tools are one-line errors."""
from __future__ import annotations

from dataclasses import replace
import re
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

from cglow import cli, zoo
from cglow.graph.registry import OPS
from cglow.instr.expr import Input, call
from cglow.lower.ops import elementwise
from cglow.quantize import quantize_model
from cglow.tools import check

from tests.tf2onnx_style import dense_int8
from tests.util import cglow_cmd, need_target, need_tool, save

ERRORS = re.compile(r"^output '(\w+)' (\w+)\[([\d,]*)\].*: max abs error (\S+)(?: \((\S+) quantization steps\))?, "
                    r"scale \S+, error (\S+) of the scale \((ok|MISMATCH)\)$", re.M)


def three_outputs() -> onnx.ModelProto:
    """y = x + 0.5 (float), the argmax of each row (int64), x > 0.5 (bool)."""
    tensor = helper.make_tensor_value_info
    nodes = [helper.make_node("Add", ["x", "half"], ["y"]), helper.make_node("ArgMax", ["x"], ["a"], axis=1),
             helper.make_node("Greater", ["x", "half"], ["g"])]
    graph = helper.make_graph(nodes, "g", [tensor("x", TensorProto.FLOAT, [3, 5])],
                              [tensor("y", TensorProto.FLOAT, [3, 5]), tensor("a", TensorProto.INT64, [3, 1]),
                               tensor("g", TensorProto.BOOL, [3, 5])],
                              [helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def two_inputs() -> onnx.ModelProto:
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    return helper.make_model(helper.make_graph([helper.make_node("Sub", ["a", "b"], ["y"])], "g", [a, b], [y]),
                             opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def run(capsys, *args: str) -> tuple[int, str, str]:
    status = cli.main(["check", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_passes_and_prints_every_output(tmp_path, capsys):
    need_tool("cc")
    status, out, err = run(capsys, save(three_outputs(), tmp_path / "m.onnx"))
    assert status == 0 and not err, err
    rows = ERRORS.findall(out)
    assert [(name, dtype, shape) for name, dtype, shape, *_ in rows] == [
        ("y", "float32", "3,5"), ("a", "int64", "3,1"), ("g", "bool", "3,5")]
    for *_, absolute, steps, relative, verdict in rows:
        assert verdict == "ok" and not steps and float(absolute) <= 1e-6 and float(relative) <= 1e-4
    assert "seeded random inputs (seed 0)" in out and "reference onnxruntime" in out
    assert out.splitlines()[-1].startswith("check: passed")


def test_a_float16_output_within_one_of_its_steps(tmp_path, capsys):
    """cglow rounds each op's float32 result to float16 where onnxruntime may compute a chain in float16: a float16
    output is ok within one float16 step at its scale (2^-10), beyond the default tolerance of 1e-4."""
    need_tool("cc")
    tensor = helper.make_tensor_value_info
    nodes = [helper.make_node("Mul", ["a", "b"], ["m"]), helper.make_node("Add", ["m", "c"], ["y"])]
    graph = helper.make_graph(nodes, "g", [tensor(n, TensorProto.FLOAT16, [64]) for n in "abc"],
                              [tensor("y", TensorProto.FLOAT16, [64])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    status, out, err = run(capsys, save(model, tmp_path / "m.onnx"))
    assert status == 0 and not err, out
    ((_, dtype, _, _, _, relative, verdict),) = ERRORS.findall(out)
    assert dtype == "float16" and verdict == "ok" and float(relative) <= 2 ** -10


def miscompiled(monkeypatch, right: str, wrong: str) -> None:
    """cglow check builds C in which the one place that says `right` says `wrong`."""
    compile_model = check.compile_model

    def compile_wrong(*args, **kwargs):
        compiled = compile_model(*args, **kwargs)
        assert compiled.c_source.count(right) == 1
        return replace(compiled, c_source=compiled.c_source.replace(right, wrong))
    monkeypatch.setattr(check, "compile_model", compile_wrong)


def test_wrong_c_is_a_mismatch(tmp_path, capsys, monkeypatch):
    """The C computes x + 0.75 where the model says x + 0.5: exit status 1, the output named."""
    need_tool("cc")
    miscompiled(monkeypatch, "+ 0.5f", "+ 0.75f")
    status, out, _ = run(capsys, save(three_outputs(), tmp_path / "m.onnx"))
    assert status == 1
    rows = {name: (float(absolute), verdict) for name, _, _, absolute, _, _, verdict in ERRORS.findall(out)}
    assert rows == {"y": (0.25, "MISMATCH"), "a": (0.0, "ok"), "g": (0.0, "ok")}
    assert out.splitlines()[-1].startswith("check: MISMATCH on 'y'")


def test_inputs_from_npy_files(tmp_path, capsys, monkeypatch):
    need_tool("cc")
    a = np.arange(6, dtype=np.float64).reshape(2, 3)  # float64 is converted to the input's float32
    b = np.full((2, 3), 0.25, np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    seen = {}
    reference_outputs = check.reference_outputs

    def spy(model, feeds):
        seen.update(feeds)
        return reference_outputs(model, feeds)
    monkeypatch.setattr(check, "reference_outputs", spy)
    path = save(two_inputs(), tmp_path / "sub.onnx")
    status, out, err = run(capsys, path, "--input", str(tmp_path / "a.npy"), "--input", str(tmp_path / "b.npy"))
    assert status == 0 and not err, err
    assert seen["a"].dtype == np.float32 and np.array_equal(seen["a"], a) and np.array_equal(seen["b"], b)
    assert f"inputs from {tmp_path / 'a.npy'}, {tmp_path / 'b.npy'}" in out
    np.save(tmp_path / "wrong.npy", np.zeros((3, 2), np.float32))
    np.save(tmp_path / "ints.npy", np.zeros((2, 3), np.complex64))
    for args, message in ((["--input", str(tmp_path / "a.npy")], "--input given 1 times; the model's inputs are 'a', "
                                                                  "'b'"),
                          (["--input", str(tmp_path / "wrong.npy"), "--input", str(tmp_path / "b.npy")],
                           "shape [3,2] for the input 'a' float32[2,3]"),
                          (["--input", str(tmp_path / "ints.npy"), "--input", str(tmp_path / "b.npy")],
                           "complex64 values for the input 'a'"),
                          (["--input", str(tmp_path / "none.npy"), "--input", str(tmp_path / "b.npy")],
                           "not a readable .npy file")):
        status, out, err = run(capsys, path, *args)
        assert status == 2 and not out and len(err.splitlines()) == 1 and message in err, err


def test_quantized_model_in_steps(tmp_path, capsys):
    """int8 inputs and outputs: the reference gets real values; a float .npy input is quantized."""
    need_tool("cc")
    calib = {"input": np.random.default_rng(0).standard_normal((8, 1, 640)).astype(np.float32)}
    path = save(quantize_model(zoo.build("autoencoder"), calib), tmp_path / "q.onnx")
    np.save(tmp_path / "x.npy", np.random.default_rng(1).standard_normal((1, 640)).astype(np.float32))
    for args in ([], ["--input", str(tmp_path / "x.npy")]):
        status, out, err = run(capsys, path, *args)
        assert status == 0 and not err, err
        ((name, dtype, shape, _, steps, _, verdict),) = ERRORS.findall(out)
        assert (name, dtype, shape, verdict) == ("output", "int8", "1,640", "ok") and float(steps) <= 2
        assert "scale " in out and "zero point " in out


def test_int8_io_of_the_model_itself(tmp_path, capsys, monkeypatch):
    """A model whose graph input and output are int8 (tf2onnx's form): the C and onnxruntime take the same
    integers, drawn over their whole range, and the outputs are compared in quantization steps; with
    --float-io the C takes floats, which the reference gets quantized as the model's DequantizeLinear reads
    them. A C one step off passes; three steps off is a mismatch."""
    need_tool("cc")
    model = dense_int8((640, 32, 8, 32, 64))
    path = save(model, tmp_path / "int8.onnx")
    (x,) = check.seeded_inputs(check.compile_model(model), 0)
    assert x.dtype == np.int8 and x.min() == -128 and x.max() == 127
    for args, dtype in (([], "int8"), (["--float-io"], "float32")):
        status, out, err = run(capsys, path, *args)
        assert status == 0 and not err, err
        ((name, out_dtype, shape, _, steps, _, verdict),) = ERRORS.findall(out)
        assert (name, out_dtype, shape, verdict) == ("output", dtype, "1,64", "ok") and float(steps) <= 1
    for off, verdict in ((1, "ok"), (3, "MISMATCH")):  # the last layer's output zero point (0), moved
        monkeypatch.undo()
        miscompiled(monkeypatch, "7, 0, -128, 127)", f"7, {off}, -128, 127)")
        status, out, _ = run(capsys, path)
        ((*_, steps, _, found),) = ERRORS.findall(out)
        assert (status, float(steps), found) == (int(verdict != "ok"), off, verdict)


def test_cortex_m4_under_qemu(tmp_path, capsys):
    need_target("cortex-m4")
    status, out, err = run(capsys, save(three_outputs(), tmp_path / "m.onnx"), "--target", "cortex-m4")
    assert status == 0 and not err, err
    assert "arm-none-eabi-gcc" in out and "under qemu-system-arm" in out
    assert [row[-1] for row in ERRORS.findall(out)] == ["ok", "ok", "ok"]


def test_missing_cross_tools_and_compiler(tmp_path, capsys, monkeypatch):
    path = save(three_outputs(), tmp_path / "m.onnx")
    status, out, err = run(capsys, path, "--cc", "no-such-cc")
    assert status == 2 and err == "cglow: error: C compiler 'no-such-cc' not found; install one or pass --cc\n"
    monkeypatch.setattr(check.shutil, "which", lambda tool: None)
    status, out, err = run(capsys, path, "--target", "cortex-m4")
    assert status == 2 and not out and len(err.splitlines()) == 1
    assert "--target cortex-m4 builds with arm-none-eabi-gcc" in err and "not found" in err


def test_command_line_exit_status(tmp_path):
    need_tool("cc")
    path = save(zoo.build("kws"), tmp_path / "kws.onnx")
    result = cglow_cmd("check", path)
    assert result.returncode == 0 and "output 'output' float32[1,12]" in result.stdout, result.stderr
    result = cglow_cmd("check", path, "--tolerance", "0")  # the C's rounding differs from onnxruntime's
    assert result.returncode == 1 and "(MISMATCH)" in result.stdout


def test_reference_evaluator_when_onnxruntime_refuses(tmp_path, capsys):
    """A model of an IR version onnxruntime does not know yet is checked against the ONNX reference evaluator."""
    need_tool("cc")
    model = two_inputs()
    model.ir_version = 99
    status, out, err = run(capsys, save(model, tmp_path / "new.onnx"))
    assert status == 0 and not err, err
    assert "reference the ONNX reference evaluator (onnxruntime" in out and "cannot run the model: " in out
    assert "IR version" in out.splitlines()[0] and "onnxruntime::" not in out  # the reason, not where in its C++
    assert [row[-1] for row in ERRORS.findall(out)] == ["ok"]


def test_reference_evaluator_without_onnxruntime(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` raises ImportError
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((2, 3), np.float32)
    name, (y,) = check.reference_outputs(two_inputs(), {"a": a, "b": b})
    assert name == "the ONNX reference evaluator" and np.array_equal(y, a - b)


def scaled(factor: float) -> onnx.ModelProto:
    """y = x * factor."""
    tensor = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Mul", ["x", "factor"], ["y"])], "g",
                              [tensor("x", TensorProto.FLOAT, [4, 5])], [tensor("y", TensorProto.FLOAT, [4, 5])],
                              [helper.make_tensor("factor", TensorProto.FLOAT, [], [factor])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_tiny_outputs_are_judged_on_their_own_scale(tmp_path, capsys, monkeypatch):
    """Outputs of 1e-12 computed 1% wrong: a mismatch (over a scale floored at 1e-6 it was a 1e-8 error)."""
    need_tool("cc")
    miscompiled(monkeypatch, "* 1e-12f", "* 1.01e-12f")
    status, out, _ = run(capsys, save(scaled(1e-12), tmp_path / "m.onnx"))
    ((*_, absolute, _, relative, verdict),) = ERRORS.findall(out)
    assert status == 1 and verdict == "MISMATCH" and float(absolute) < 1e-13 and 0.005 < float(relative) < 0.02


def chain() -> onnx.ModelProto:
    """x [2,8] -> Tanh -> Softmax -> MatMul with a [8,3] weight: three values that kernels write whole."""
    tensor = helper.make_tensor_value_info
    nodes = [helper.make_node("Tanh", ["x"], ["t"], name="tanh"),
             helper.make_node("Softmax", ["t"], ["s"], name="softmax", axis=1),
             helper.make_node("MatMul", ["s", "w"], ["y"], name="matmul")]
    w = np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32)
    graph = helper.make_graph(nodes, "g", [tensor("x", TensorProto.FLOAT, [2, 8])],
                              [tensor("y", TensorProto.FLOAT, [2, 3])], [onnx.numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


TENSORS = re.compile(r"^  (\w+) (\w+) '(\w+)' -> '(\w+)' (\w+)\[([\d,]*)\]: .*\((ok|MISMATCH)\)$", re.M)


def test_all_tensors_lists_every_tensor_a_kernel_writes(tmp_path, capsys):
    need_tool("cc")
    status, out, err = run(capsys, save(chain(), tmp_path / "m.onnx"), "--all-tensors")
    assert status == 0 and not err, err
    rows = TENSORS.findall(out)
    assert [(op, node, value, verdict) for _, op, node, value, _, _, verdict in rows] == [
        ("Tanh", "tanh", "t", "ok"), ("Softmax", "softmax", "s", "ok"), ("MatMul", "matmul", "y", "ok")]
    assert all(function.startswith("net_") for function, *_ in rows)
    assert out.splitlines()[-1] == "check: passed: every tensor and output within 0.0001 of its scale"


def test_all_tensors_names_the_span_in_tiles(tmp_path, capsys):
    """Values computed in tiles are never whole: the listing says which span holds them, and how to trace them."""
    need_tool("cc")
    path = save(zoo.build("vww"), tmp_path / "m.onnx")
    status, out, err = run(capsys, path, "--all-tensors")
    assert status == 0 and "or computed in tiles from 'stem/conv' to " in out.splitlines()[1], out
    status, out, err = run(capsys, path, "--all-tensors", "--ram-budget", "1G")
    assert status == 0 and "in tiles" not in out and len(TENSORS.findall(out)) > 0


def wrong_tanh():
    return call("tanhf", 1.01 * Input(0))


def test_all_tensors_names_the_first_node_that_departs(tmp_path, capsys, monkeypatch):
    """A wrong Tanh kernel: its tensor and every one after it depart; the first is named, with its kernel."""
    need_tool("cc")
    monkeypatch.setitem(OPS, "Tanh", elementwise.float_map(wrong_tanh))
    status, out, _ = run(capsys, save(chain(), tmp_path / "m.onnx"), "--all-tensors")
    assert status == 1
    assert [verdict for *_, verdict in TENSORS.findall(out)] == ["MISMATCH"] * 3
    function = TENSORS.findall(out)[0][0]
    assert re.fullmatch(rf"check: MISMATCH: the first tensor that departs is 't' of node 'tanh' \(Tanh\), written by "
                        rf"{function}: max abs error \S+, scale \S+, error \S+ of the scale \(tolerance: within "
                        rf"0.0001 of its scale\)", out.splitlines()[-1]), out.splitlines()[-1]


def test_all_tensors_on_the_cortex_m4(tmp_path, capsys, monkeypatch):
    """The wrong Tanh kernel found the same way in the image that QEMU runs."""
    need_target("cortex-m4")
    monkeypatch.setitem(OPS, "Tanh", elementwise.float_map(wrong_tanh))
    status, out, _ = run(capsys, save(chain(), tmp_path / "m.onnx"), "--all-tensors", "--target", "cortex-m4")
    assert status == 1 and "under qemu-system-arm" in out.splitlines()[0]
    assert [(node, verdict) for _, _, node, _, _, _, verdict in TENSORS.findall(out)] == [
        ("tanh", "MISMATCH"), ("softmax", "MISMATCH"), ("matmul", "MISMATCH")]
    assert out.splitlines()[-1].startswith("check: MISMATCH: the first tensor that departs is 't' of node 'tanh'")


def test_differences_where_the_reference_is_not_finite():
    """Infinities and NaNs where the reference has them count as agreeing; elsewhere the error is infinite."""
    from cglow.tools.reference import float_difference
    want = np.array([1.0, np.inf, np.nan, -2.0], np.float32)
    agreeing = float_difference(want + np.float32(0.001), want)
    assert abs(agreeing.absolute - 0.001) < 1e-6 and agreeing.scale == 2.0
    assert abs(agreeing.relative - agreeing.absolute / 2.0) < 1e-12 and agreeing.ok(1e-3)
    assert float_difference(np.array([1.0, 5.0, np.nan, -2.0], np.float32), want).relative == np.inf
