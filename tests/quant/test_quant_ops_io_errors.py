"""Quantized models with float inputs and outputs, and the quantized models cglow refuses: each a single-node model
compiled by cglow and run as C, against onnxruntime running the same model (tests/qlinear.py: the builders, the
comparison and its criterion)."""
from __future__ import annotations

from pathlib import Path
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cglow
from cglow.errors import CglowError
from cglow.options import Options
from tests.qdq import INT8, UINT8
from tests.qlinear import F32, MS, compare, f32, q, qbinary, qlinear_conv, qlinear_matmul, qunary, single_node


def with_float_io(model: onnx.ModelProto, in_params: dict, out_params: tuple) -> onnx.ModelProto:
    """The model with each named 8-bit input quantized from a float input (QuantizeLinear) and its 8-bit
    output dequantized into a float output."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    nodes = []
    for v in g.input:
        if v.name in in_params:
            scale, zero = in_params[v.name]
            g.initializer.extend([numpy_helper.from_array(f32(scale), f"{v.name}_fscale"),
                                  numpy_helper.from_array(zero, f"{v.name}_fzero")])
            nodes.append(helper.make_node("QuantizeLinear", [f"{v.name}_float", f"{v.name}_fscale",
                                                             f"{v.name}_fzero"], [v.name]))
            v.name = f"{v.name}_float"
            v.type.tensor_type.elem_type = TensorProto.FLOAT
    g.initializer.extend([numpy_helper.from_array(f32(out_params[0]), "y_fscale"),
                          numpy_helper.from_array(out_params[1], "y_fzero")])
    old = list(g.node)
    old[-1].output[0] = "y_int"
    del g.node[:]
    g.node.extend(nodes + old + [helper.make_node("DequantizeLinear", ["y_int", "y_fscale", "y_fzero"], ["y"])])
    g.output[0].type.tensor_type.elem_type = TensorProto.FLOAT
    return out


def float_cases():
    rng = np.random.default_rng(7)
    conv = qlinear_conv(rng, INT8, INT8, per_channel=True, pads=[1, 1, 1, 1])
    consts = {t.name: numpy_helper.to_array(t) for t in conv.graph.initializer}
    yield "QLinearConv", with_float_io(conv, {"x": (consts["x_scale"], consts["x_zero"])},
                                       (consts["y_scale"], consts["y_zero"])), 0.02
    add = qbinary("QLinearAdd", UINT8, (1, 3, 4, 4), (1, 3, 4, 4))
    consts = {t.name: numpy_helper.to_array(t) for t in add.graph.initializer}
    yield "QLinearAdd", with_float_io(add, {"a": (consts["a_scale"], consts["a_zero"]),
                                            "b": (consts["b_scale"], consts["b_zero"])},
                                      (consts["y_scale"], consts["y_zero"])), 0.05
    mm = qlinear_matmul(rng, INT8, INT8, per_column=True)
    consts = {t.name: numpy_helper.to_array(t) for t in mm.graph.initializer}
    yield "QLinearMatMul", with_float_io(mm, {"a": (consts["a_scale"], consts["a_zero"])},
                                         (consts["y_scale"], consts["y_zero"])), 0.02


FLOAT_CASES = {name: (model, share) for name, model, share in float_cases()}


@pytest.mark.parametrize("case", list(FLOAT_CASES))
def test_float_io(case):
    """Float input -> QuantizeLinear -> the op -> DequantizeLinear -> float output: with float_io cglow takes
    and gives floats (the conversions in net_run), at most 1 output step off onnxruntime; by default it takes
    and gives the integers, with the parameters in compiled.inputs / outputs."""
    model, share = FLOAT_CASES[case]
    y_scale = float(numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "y_fscale")))
    compiled = cglow.compile_model(model, options=Options(float_io=True))
    assert all(t.dtype == F32 and t.scale is None for t in compiled.inputs + compiled.outputs)
    pairs = compare(model, options=Options(float_io=True), runs=3)
    off = np.concatenate([(np.abs(g.astype(np.float64) - w) / y_scale).reshape(-1) for g, w in pairs])
    assert off.max() <= 1 + 1e-5 and np.mean(off > 0.5) <= share, (off.max(), np.mean(off > 0.5))

    compiled = cglow.compile_model(model, name="net")
    assert all(t.dtype in (INT8, UINT8) and t.scale is not None for t in compiled.inputs + compiled.outputs)
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for t in compiled.inputs:
        base = t.name.removesuffix("_float")
        assert t.scale == pytest.approx(float(consts[f"{base}_fscale"]), rel=1e-7)
        assert t.zero_point == int(consts[f"{base}_fzero"])
    assert compiled.outputs[0].scale == pytest.approx(y_scale, rel=1e-7)


def bad_concat() -> onnx.ModelProto:
    """QLinearConcat with one triple short of an input (Y_scale, Y_zero_point, then X, X_scale only)."""
    ins = [("y_scale", f32(0.1)), ("y_zero", q(0, INT8)), ("x0", (INT8, (1, 2))), ("s0", f32(0.1)),
           ("z0", q(0, INT8)), ("x1", (INT8, (1, 2))), ("s1", f32(0.1))]
    return single_node("QLinearConcat", ins, INT8, domain=MS, axis=1)


def bad_concat_no_inputs() -> onnx.ModelProto:
    """QLinearConcat with an X but neither its scale nor its zero point."""
    ins = [("y_scale", f32(0.1)), ("y_zero", q(0, INT8)), ("x0", (INT8, (1, 2)))]
    return single_node("QLinearConcat", ins, INT8, domain=MS, axis=1)


def quantize_block_size() -> onnx.ModelProto:
    ins = [("x", (F32, (2, 4))), ("scale", f32(np.full((2, 3), 0.1))), ("zero", q(np.zeros((2, 3)), INT8))]
    return single_node("QuantizeLinear", ins, INT8, opset=21, axis=1, block_size=2)


def softmax_opset12_axis1() -> onnx.ModelProto:
    ins = [("x", (INT8, (2, 3, 4))), ("x_scale", f32(0.1)), ("x_zero", q(0, INT8)), ("y_scale", f32(1 / 256)),
           ("y_zero", q(-128, INT8))]
    return single_node("QLinearSoftmax", ins, INT8, domain=MS, attrs={"axis": 1, "opset": 12})


def pool_channels_last() -> onnx.ModelProto:
    return qunary("QLinearGlobalAveragePool", INT8, (1, 4, 4, 3), channels_last=1)


def dequantize_block_size() -> onnx.ModelProto:
    ins = [("x", (INT8, (2, 4))), ("scale", f32(np.full((2, 3), 0.1))), ("zero", q(np.zeros((2, 3)), INT8))]
    return single_node("DequantizeLinear", ins, F32, opset=21, axis=1, block_size=2)


def qlinear_conv_opset10_per_channel() -> onnx.ModelProto:
    return qlinear_conv(np.random.default_rng(0), INT8, INT8, per_channel=True, opset=10)


ERRORS = {
    "QLinearConv of opset 10 per channel": (qlinear_conv_opset10_per_channel, ("QLinearConv", "opset 13")),
    "QLinearConcat with a bad input count": (bad_concat, ("QLinearConcat", "7 inputs")),
    "QLinearConcat with no inputs to join": (bad_concat_no_inputs, ("QLinearConcat",)),
    "QuantizeLinear with too many blocks": (quantize_block_size, ("QuantizeLinear", "blocks of 2")),
    "DequantizeLinear with too many blocks": (dequantize_block_size, ("DequantizeLinear", "blocks of 2")),
    "QLinearSoftmax of opset 12 over axis 1": (softmax_opset12_axis1, ("QLinearSoftmax", "axis")),
    "QLinearGlobalAveragePool channels_last": (pool_channels_last, ("QLinearGlobalAveragePool", "channels_last")),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_bad_quantized_models_are_one_line_errors(case):
    make, words = ERRORS[case]
    with pytest.raises(CglowError) as info:
        cglow.compile_model(make(), name="net")
    message = str(info.value)
    assert "\n" not in message and message.strip() == message and message
    for word in words:
        assert word in message, message


@pytest.mark.parametrize("case", list(ERRORS))
def test_bad_quantized_models_on_the_command_line(case, tmp_path):
    make, words = ERRORS[case]
    onnx.save(make(), str(tmp_path / "model.onnx"))
    result = subprocess.run([sys.executable, "-m", "cglow", "emit", str(tmp_path / "model.onnx"), "-o",
                             str(tmp_path / "out" / "net.c")], capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cglow: error:"), result.stderr
    assert "Traceback" not in result.stderr and all(w in lines[0] for w in words)
    assert result.stdout == ""
    assert [p.name for p in Path(tmp_path).rglob("*") if not p.is_dir()] == ["model.onnx"]
