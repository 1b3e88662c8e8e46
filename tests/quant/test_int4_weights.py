"""QDQ models whose Conv, MatMul and Gemm weights are 4-bit (a per-channel DequantizeLinear of an int4 or uint4
initializer) and whose activations are int8: they fold into the integer kernels, their weights two per byte in
the C file's constant data (instr/nibbles.py unpack_nibbles), against onnxruntime, on the host and under QEMU
on the Cortex-M4 and M55."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T, helper as h, numpy_helper
import pytest

import cglow
from cglow.options import Options
from cglow.tools import cross

from tests.qdq import folded_ops
from tests.util import checked_model, need_target

ort = pytest.importorskip("onnxruntime")

Y_SCALE = 0.2
# (weight type, its zero point: None for none; the weights' range)
TYPES = {"int4": (T.INT4, None, (-8, 7)), "uint4_zero8": (T.UINT4, 8, (0, 15)), "uint4_zero3": (T.UINT4, 3, (0, 15)),
         "int8": (T.INT8, None, (-128, 127))}


def _model(kind: str, weights: str, seed: int = 0):
    """x (float) -> QuantizeLinear int8 -> DequantizeLinear -> Conv 3x3 (padded, with a bias) or MatMul or Gemm
    (transB) by DequantizeLinear(weights, a scale per output channel) -> QuantizeLinear int8 -> DequantizeLinear."""
    rng = np.random.default_rng(seed)
    w_type, w_zero, (lo, hi) = TYPES[weights]
    shape, x_shape, axis = {"conv": ((16, 6, 3, 3), [1, 6, 7, 7], 0), "matmul": ((40, 24), [5, 40], 1),
                            "gemm": ((24, 40), [5, 40], 0)}[kind]
    channels = shape[axis]
    inits = [h.make_tensor("w", w_type, shape, rng.integers(lo, hi + 1, shape).reshape(-1).tolist()),
             numpy_helper.from_array(rng.uniform(0.01, 0.03, channels).astype(np.float32), "w_scale"),
             numpy_helper.from_array(np.array(0.05, np.float32), "x_scale"),
             numpy_helper.from_array(np.array(3, np.int8), "x_zero"),
             numpy_helper.from_array(np.array(Y_SCALE, np.float32), "y_scale"),
             numpy_helper.from_array(np.array(-2, np.int8), "y_zero"),
             numpy_helper.from_array(rng.uniform(-1, 1, channels).astype(np.float32), "bias")]
    w_inputs = ["w", "w_scale"]
    if w_zero is not None:
        inits.append(h.make_tensor("w_zero", w_type, [channels], [w_zero] * channels))
        w_inputs.append("w_zero")
    op = {"conv": h.make_node("Conv", ["xd", "wd", "bias"], ["y"], pads=[1, 1, 1, 1]),
          "matmul": h.make_node("MatMul", ["xd", "wd"], ["y"]),
          "gemm": h.make_node("Gemm", ["xd", "wd", "bias"], ["y"], transB=1)}[kind]
    nodes = [h.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "x_scale", "x_zero"], ["xd"]),
             h.make_node("DequantizeLinear", w_inputs, ["wd"], axis=axis), op,
             h.make_node("QuantizeLinear", ["y", "y_scale", "y_zero"], ["yq"]),
             h.make_node("DequantizeLinear", ["yq", "y_scale", "y_zero"], ["out"])]
    graph = h.make_graph(nodes, "int4_weights", [h.make_tensor_value_info("x", T.FLOAT, x_shape)],
                         [h.make_tensor_value_info("out", T.FLOAT, None)], inits)
    return checked_model(graph, 21), rng.uniform(-4, 4, x_shape).astype(np.float32)


def _want(model, x):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("weights", ["int4", "uint4_zero8", "uint4_zero3"])
@pytest.mark.parametrize("kind", ["conv", "matmul", "gemm"])
def test_int4_weights_two_per_byte(kind, weights):
    model, x = _model(kind, weights)
    compiled = cglow.compile_model(model, options=Options(float_io=True))
    assert ("IntConv" if kind == "conv" else "IntGemm") in folded_ops(model)
    assert "two per byte" in compiled.c_source
    got = cglow.build(compiled)(x)[0]
    assert np.abs(got - _want(model, x)).max() <= Y_SCALE * 1.001  # within one quantization step


@pytest.mark.parametrize("kind", ["conv", "matmul"])
def test_int4_weights_take_half_the_flash(kind):
    """The same layer with int8 weights (values beyond 4 bits) against int4 ones: the weight bytes about halve."""
    count = 16 * 6 * 9 if kind == "conv" else 40 * 24
    sizes = {w: cglow.compile_model(_model(kind, w)[0]).weights_bytes for w in ("int8", "int4")}
    assert sizes["int8"] - sizes["int4"] >= count // 2 - 16
    assert sizes["int4"] < 0.6 * sizes["int8"]


def test_int8_weights_stay_as_they_are():
    compiled = cglow.compile_model(_model("conv", "int8")[0])
    assert "two per byte" not in compiled.c_source


@pytest.mark.parametrize("target_name", ["cortex-m4", "cortex-m55"])
@pytest.mark.parametrize("kind, weights", [("conv", "int4"), ("matmul", "uint4_zero3"), ("gemm", "int4")])
def test_int4_weights_on_cortex_m(target_name, kind, weights):
    """The image under QEMU gives the host build's integers, and those are onnxruntime's within a step."""
    target = need_target(target_name)
    model, x = _model(kind, weights, seed=4)
    compiled = cglow.compile_model(model, options=Options(target=target.tiles))
    xq = np.clip(np.rint(x / 0.05) + 3, -128, 127).astype(np.int8).reshape(compiled.inputs[0].shape)
    run = cross.run_image(cross.build_image(compiled, [xq], target), compiled, target, count=False)
    host = cglow.build(compiled)(xq)[0]
    assert np.array_equal(run.outputs[0], host)
    assert np.abs((host.astype(np.float32) + 2) * Y_SCALE - _want(model, x)).max() <= Y_SCALE * 1.001
