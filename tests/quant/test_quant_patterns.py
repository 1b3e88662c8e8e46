"""Quantized patterns that converters write and cglow folds into integer kernels: tf2onnx's dense layer
(DequantizeLinear -> MatMul -> Add of an int32 bias through DequantizeLinear -> Relu -> QuantizeLinear), a
Conv followed by an Add of its per-channel bias, against onnxruntime running the same model."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import cglow
from cglow.options import Options
from tests.tf2onnx_style import dense_int8
from tests.quantized import float_kernels, int8_steps_off
from tests.util import ort_run

pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("per_column,float_bias", [(True, False), (False, False), (True, True)])
def test_tf2onnx_dense_autoencoder_is_integer(per_column, float_bias):
    """The MLPerf Tiny autoencoder's shape as tf2onnx writes it from a fully-integer TFLite model: integer
    kernels only, one byte per weight (within 5% of the parameters, biases counted), the arena of int8
    activations (3072 bytes of float ones before), within a step of onnxruntime."""
    model = dense_int8(per_column=per_column, float_bias=float_bias)
    compiled = cglow.compile_model(model)
    assert float_kernels(compiled) == []
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer if t.name.endswith(("/w", "/b", "/bias")))
    assert params <= compiled.weights_bytes <= 1.05 * params
    assert compiled.arena_bytes <= 1024
    assert int8_steps_off(model, compiled) <= 1


def conv_add_model(per_channel: bool, float_bias: bool):
    """Conv without a bias, then Add of a [1, M, 1, 1] bias (int32 through DequantizeLinear, or float), Relu,
    QuantizeLinear: a convolution whose bias the converter kept as a separate add."""
    rng = np.random.default_rng(3)
    m, c = 8, 4
    w = rng.integers(-127, 128, (m, c, 3, 3)).astype(np.int8)
    w_scale = rng.uniform(0.005, 0.02, m).astype(np.float32) if per_channel else np.float32(0.01)
    x_scale = np.float32(0.03)
    acc = (x_scale * w_scale).astype(np.float32)
    bias = rng.integers(-2000, 2000, m).astype(np.int32)
    inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in [
        ("x_scale", x_scale), ("x_zero", np.int8(5)), ("w", w), ("w_scale", w_scale),
        ("w_zero", np.zeros_like(w_scale, np.int8)), ("y_scale", np.float32(0.05)), ("y_zero", np.int8(-128))]]
    if float_bias:
        inits.append(numpy_helper.from_array((bias * acc).astype(np.float32).reshape(1, m, 1, 1), "b_real"))
        bias_nodes = []
    else:
        inits += [numpy_helper.from_array(bias.reshape(1, m, 1, 1), "b"),
                  numpy_helper.from_array(acc, "b_scale"),
                  numpy_helper.from_array(np.zeros_like(acc, np.int32), "b_zero")]
        bias_nodes = [helper.make_node("DequantizeLinear", ["b", "b_scale", "b_zero"], ["b_real"],
                                       **({"axis": 1} if per_channel else {}))]
    nodes = [helper.make_node("DequantizeLinear", ["input", "x_scale", "x_zero"], ["x"]),
             helper.make_node("DequantizeLinear", ["w", "w_scale", "w_zero"], ["wf"], axis=0), *bias_nodes,
             helper.make_node("Conv", ["x", "wf"], ["conv"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Add", ["b_real", "conv"], ["biased"]),
             helper.make_node("Relu", ["biased"], ["relu"]),
             helper.make_node("QuantizeLinear", ["relu", "y_scale", "y_zero"], ["output"])]
    graph = helper.make_graph(nodes, "conv_add",
                              [helper.make_tensor_value_info("input", TensorProto.INT8, [1, c, 6, 6])],
                              [helper.make_tensor_value_info("output", TensorProto.INT8, [1, m, 6, 6])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("per_channel,float_bias", [(True, False), (False, False), (True, True)])
def test_conv_then_add_of_its_bias_is_one_integer_conv(per_channel, float_bias):
    model = conv_add_model(per_channel, float_bias)
    compiled = cglow.compile_model(model)
    assert [type(i).__name__ for i in compiled.program.instrs] == ["Conv"] and float_kernels(compiled) == []
    assert int8_steps_off(model, compiled) <= 1


def test_int8_io_takes_the_parameters_of_its_dequantize_and_quantize():
    """The model's own int8 input and output (read by a DequantizeLinear, written by a QuantizeLinear) get
    their scale and zero point in the header; with float_io the C takes and gives floats, converted inside
    net_run, within a step of onnxruntime on the same values quantized."""
    model = dense_int8((64, 32, 8, 32, 64))
    scales = {t.name: float(numpy_helper.to_array(t)) for t in model.graph.initializer if t.name.endswith("y_scale")
              or t.name == "input_scale"}
    compiled = cglow.compile_model(model)
    (x,), (y,) = compiled.inputs, compiled.outputs
    assert (x.dtype, x.scale, x.zero_point) == (np.int8, scales["input_scale"], 0)
    assert (y.dtype, y.scale, y.zero_point) == (np.int8, scales["dense_3/y_scale"], 0)
    assert "#define NET_INPUT_0_ZERO_POINT 0" in compiled.h_source and "NET_OUTPUT_0_SCALE" in compiled.h_source
    floats = cglow.compile_model(model, options=Options(float_io=True))
    assert "int net_run(const float *input_0, float *output_0);" in floats.h_source
    assert "SCALE" not in floats.h_source and float_kernels(floats) == ["Map"]  # the output dequantized
    real = np.random.default_rng(2).standard_normal((1, 64)).astype(np.float32)
    (got,) = cglow.build(floats)(real)
    q = np.clip(np.rint(real / np.float32(x.scale)), -128, 127).astype(np.int8)
    (want,) = ort_run(model, {"input": q})
    assert np.abs(got / np.float32(y.scale) - want).max() <= 1 + 1e-4


def batchnorm_island(shape, scale_sign: float):
    """DequantizeLinear -> BatchNormalization -> Relu -> QuantizeLinear over int8 values, some channels'
    scale of sign `scale_sign` (a negative scale flips the order of the values)."""
    rng = np.random.default_rng(5)
    c = shape[1]
    gamma = rng.uniform(0.5, 2.0, c).astype(np.float32)
    gamma[::2] *= scale_sign
    inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in [
        ("x_scale", np.float32(0.04)), ("x_zero", np.int8(-7)), ("gamma", gamma),
        ("beta", rng.standard_normal(c).astype(np.float32)), ("mean", rng.standard_normal(c).astype(np.float32)),
        ("var", rng.uniform(0.5, 2, c).astype(np.float32)), ("y_scale", np.float32(0.03)), ("y_zero", np.int8(-128))]]
    nodes = [helper.make_node("DequantizeLinear", ["input", "x_scale", "x_zero"], ["x"]),
             helper.make_node("BatchNormalization", ["x", "gamma", "beta", "mean", "var"], ["bn"], name="bn"),
             helper.make_node("Relu", ["bn"], ["relu"]),
             helper.make_node("QuantizeLinear", ["relu", "y_scale", "y_zero"], ["output"])]
    graph = helper.make_graph(nodes, "bn", [helper.make_tensor_value_info("input", TensorProto.INT8, shape)],
                              [helper.make_tensor_value_info("output", TensorProto.INT8, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("shape,sign", [((1, 8, 5, 5), 1.0), ((1, 8, 5, 5), -1.0), ((1, 16), -1.0)])
def test_batchnorm_between_dequantize_and_quantize_is_integer(shape, sign):
    """One Map of integers, no float: within a step of onnxruntime's float BatchNormalization, negative
    scales included."""
    model = batchnorm_island(shape, sign)
    compiled = cglow.compile_model(model)
    assert [type(i).__name__ for i in compiled.program.instrs] == ["Map"] and float_kernels(compiled) == []
    assert int8_steps_off(model, compiled, inputs=8) <= 1
