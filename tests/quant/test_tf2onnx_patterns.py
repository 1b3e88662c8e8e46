"""What tf2onnx writes around the quantized layers of a fully-integer TFLite model, beyond the dense chain of
test_quant_patterns.py, each on a small hand-built graph against onnxruntime: the NHWC int8 input moved to
NCHW before it is dequantized, TFLite's 8-bit SOFTMAX and MEAN, weights in TFLite's layout moved to ONNX's by
a Transpose after their DequantizeLinear, --dequantize's input conversion, and the requantization between a
uint8 input or output and the int8 layers."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import cglow
from cglow.options import Options
from tests.quantized import float_kernels, int8_steps_off
from tests.util import ort_run

pytest.importorskip("onnxruntime")


class Builder:
    """Nodes and initializers of a hand-built int8 graph."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []

    def const(self, name: str, value) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs, output: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, list(inputs), [output], name=output, **attrs))
        return output

    def dq(self, x: str, scale: float, zero: int, name: str) -> str:
        return self.node("DequantizeLinear", [x, self.const(f"{name}/scale", np.float32(scale)),
                                              self.const(f"{name}/zero", np.int8(zero))], name)

    def q(self, x: str, scale: float, zero: int, name: str) -> str:
        return self.node("QuantizeLinear", [x, self.const(f"{name}/scale", np.float32(scale)),
                                            self.const(f"{name}/zero", np.int8(zero))], name)

    def weights(self, name: str, shape, axis: int) -> str:
        """int8 weights dequantized per channel along `axis`, as tf2onnx writes them."""
        n = shape[axis]
        w = self.const(f"{name}/q", self.rng.integers(-127, 128, shape).astype(np.int8))
        scale = self.const(f"{name}/scale", self.rng.uniform(0.004, 0.02, n).astype(np.float32))
        return self.node("DequantizeLinear", [w, scale, self.const(f"{name}/zero", np.zeros(n, np.int8))], name,
                         axis=axis)

    def bias(self, name: str, x_scale: float, weights: str) -> str:
        """An int32 bias per channel at scale x_scale * the weights' scale, as tf2onnx writes it."""
        scale = next(numpy_helper.to_array(t) for t in self.inits if t.name == f"{weights}/scale")
        return self.node("DequantizeLinear", [
            self.const(f"{name}/q", self.rng.integers(-500, 500, scale.size).astype(np.int32)),
            self.const(f"{name}/scale", (np.float32(x_scale) * scale).astype(np.float32)),
            self.const(f"{name}/zero", np.zeros(scale.size, np.int32))], name, axis=0)

    def model(self, input_shape, output_shape, opset: int = 13):
        graph = helper.make_graph(self.nodes, "tf2onnx",
                                  [helper.make_tensor_value_info("input", TensorProto.INT8, input_shape)],
                                  [helper.make_tensor_value_info("output", TensorProto.INT8, output_shape)],
                                  self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def nhwc_conv(g: Builder, x: str, m: int) -> str:
    """Conv (per-channel weights, no bias) -> Relu -> QuantizeLinear on dequantized NCHW values."""
    c = 2
    conv = g.node("Conv", [x, g.weights("w", (m, c, 3, 3), 0)], "conv", pads=[1, 1, 1, 1])
    return g.q(g.node("Relu", [conv], "relu"), 0.05, -128, "y")


def test_int8_io_through_transpose_takes_the_parameters_of_its_dequantize_and_quantize():
    """An NHWC int8 input that a Transpose moves to NCHW before its DequantizeLinear, an output that one moves
    back after its QuantizeLinear: the header has their scales and zero points, and with float_io the C takes
    and gives floats, within a step of onnxruntime on the same values quantized."""
    g = Builder()
    x = g.dq(g.node("Transpose", ["input"], "nchw", perm=[0, 3, 1, 2]), 0.03, 5, "x")
    g.node("Transpose", [nhwc_conv(g, x, 3)], "output", perm=[0, 2, 3, 1])
    model = g.model([1, 5, 5, 2], [1, 5, 5, 3])
    compiled = cglow.compile_model(model)
    (i,), (o,) = compiled.inputs, compiled.outputs
    assert (i.scale, i.zero_point, o.scale, o.zero_point) == (np.float32(0.03), 5, np.float32(0.05), -128)
    assert float_kernels(compiled) == [] and int8_steps_off(model, compiled) <= 1
    floats = cglow.build(cglow.compile_model(model, options=Options(float_io=True)))
    real = np.random.default_rng(2).standard_normal((1, 5, 5, 2)).astype(np.float32)
    (got,) = floats(real)
    (want,) = ort_run(model, {"input": np.clip(np.rint(real / np.float32(0.03)) + 5, -128, 127).astype(np.int8)})
    assert np.abs(got / np.float32(0.05) - 128 - want).max() <= 1 + 1e-4


def softmax_model(dtype, out_scale: float, axis: int = -1, opset: int = 13):
    """DequantizeLinear -> Softmax -> QuantizeLinear on [4, 10] 8-bit values (of type `dtype`), the output's
    zero point the type's least value."""
    proto = TensorProto.INT8 if dtype == np.int8 else TensorProto.UINT8
    least = int(np.iinfo(dtype).min)
    g = Builder()
    x = g.node("DequantizeLinear", ["input", g.const("x_scale", np.float32(0.07)), g.const("x_zero", dtype(3))], "x")
    soft = g.node("Softmax", [x], "softmax", axis=axis)
    g.node("QuantizeLinear", [soft, g.const("y_scale", np.float32(out_scale)), g.const("y_zero", dtype(least))],
           "output")
    model = g.model([4, 10], [4, 10], opset)
    model.graph.input[0].type.tensor_type.elem_type = model.graph.output[0].type.tensor_type.elem_type = proto
    return model


@pytest.mark.parametrize("dtype,scale,axis,opset", [(np.int8, 1 / 256, -1, 13), (np.uint8, 1 / 256, 1, 13),
                                                    (np.int8, 1 / 200, 1, 11)])
def test_softmax_between_dequantize_and_quantize_is_integer(dtype, scale, axis, opset):
    """tf2onnx's form of TFLite's 8-bit SOFTMAX (output scale 1/256, zero point the least value), or another
    output scale: a table of exponentials, integer sums, the same steps as onnxruntime's float softmax
    quantized, on flat rows and peaked ones."""
    model = softmax_model(dtype, scale, axis, opset)
    compiled = cglow.compile_model(model)
    assert float_kernels(compiled) == []
    net = cglow.build(compiled)
    info = np.iinfo(dtype)
    rng = np.random.default_rng(4)
    x = rng.integers(info.min, info.max + 1, (64, 4, 10)).astype(dtype)
    x[::2] = np.clip(x[::2] // 8 + 100, info.min, info.max)
    worst = max(int(np.abs(net(row)[0].astype(np.int64) - ort_run(model, {"input": row})[0]).max()) for row in x)
    assert worst == 0


def test_softmax_along_another_axis_stays_in_float():
    """A Softmax along the first axis has no integer form: it runs in float, named by info."""
    compiled = cglow.compile_model(softmax_model(np.int8, 1 / 256, axis=0))
    assert "Reduce" in float_kernels(compiled)


def mean_model(shape, axes, keepdims: int, opset: int = 13):
    """DequantizeLinear -> ReduceMean -> QuantizeLinear on int8 values (axes an attribute before opset 18,
    an input from it)."""
    g = Builder()
    x = g.dq("input", 0.05, -3, "x")
    if opset >= 18:
        mean = g.node("ReduceMean", [x, g.const("axes", np.array(axes, np.int64))], "mean", keepdims=keepdims)
    else:
        mean = g.node("ReduceMean", [x], "mean", axes=axes, keepdims=keepdims)
    g.q(mean, 0.02, -10, "output")
    out = [1 if a in [i % len(shape) for i in axes] else d for a, d in enumerate(shape)]
    return g.model(list(shape), out if keepdims else [d for d, o in zip(shape, out) if o == d or d == 1], opset)


@pytest.mark.parametrize("shape,axes,keepdims,opset", [((1, 28, 16), [1], 0, 13), ((1, 8, 5, 5), [2, 3], 1, 13),
                                                       ((2, 6, 4), [-1, 0], 0, 18)])
def test_reduce_mean_between_dequantize_and_quantize_is_integer(shape, axes, keepdims, opset):
    """tf2onnx's form of TFLite's MEAN (a Conv1D network's global average pool: [N, T, C] averaged over T): an
    IntAvgPool over the reduced axes, within a step of onnxruntime's float ReduceMean quantized."""
    model = mean_model(shape, axes, keepdims, opset)
    compiled = cglow.compile_model(model)
    assert float_kernels(compiled) == [] and int8_steps_off(model, compiled, inputs=8) <= 1


def transposed_weights_model(layer: str, shared: bool = False):
    """A layer whose int8 weights reach it through DequantizeLinear (per output channel) -> Transpose, in
    TFLite's layout: FULLY_CONNECTED's [N, K] to MatMul's [K, N] (then an int32 bias, Relu, QuantizeLinear),
    or CONV_2D's OHWI to Conv's OIHW. `shared`: two dense layers read the same transposed weights."""
    g = Builder(7)
    x = g.dq("input", 0.03, 2, "x")
    if layer == "conv":
        w = g.node("Transpose", [g.weights("w", (4, 3, 3, 2), 0)], "w_oihw", perm=[0, 3, 1, 2])
        g.q(g.node("Relu", [g.node("Conv", [x, w], "conv", pads=[1, 1, 1, 1])], "relu"), 0.05, -128, "output")
        return g.model([1, 2, 5, 5], [1, 4, 5, 5])
    w = g.node("Transpose", [g.weights("w", (16, 16), 0)], "w_kn", perm=[1, 0])
    for i in range(2 if shared else 1):
        if i:
            x = g.dq("y0", 0.05, -128, "y_dq")
        bias = g.bias(f"b{i}", 0.05 if i else 0.03, "w")
        g.q(g.node("Relu", [g.node("Add", [g.node("MatMul", [x, w], f"mm{i}"), bias], f"add{i}")], f"relu{i}"),
            0.05, -128, "output" if i == shared else f"y{i}")
    return g.model([1, 16], [1, 16])


@pytest.mark.parametrize("layer,shared", [("dense", False), ("dense", True), ("conv", False)])
def test_weights_through_a_transpose_are_integer(layer, shared):
    """DequantizeLinear -> Transpose -> MatMul or Conv (the per-channel axis moved by the Transpose): the
    Transpose applied to the int8 weights at compile time, integer kernels only, one byte per weight (each
    layer has its own copy of shared weights), within a step of onnxruntime."""
    model = transposed_weights_model(layer, shared)
    compiled = cglow.compile_model(model)
    assert float_kernels(compiled) == [] and int8_steps_off(model, compiled) <= 1
    sizes = {t.name: int(np.prod(t.dims)) for t in model.graph.initializer}
    weights = (1 + shared) * (sizes["w/q"] + 4 * 16 + 4 * 16)  # the int32 biases, 4-byte multipliers
    assert compiled.weights_bytes <= weights


@pytest.mark.parametrize("zero", [2, 0])
def test_dequantize_written_as_cast_sub_mul_gives_the_input_parameters(zero):
    """tf2onnx's --dequantize writes the int8 input's DEQUANTIZE as Cast -> Sub (the zero point; none for 0)
    -> Mul (the scale), the layers in float: a DequantizeLinear, whose parameters reach the header, and the
    same outputs as onnxruntime."""
    g = Builder(9)
    x = g.node("Cast", ["input"], "cast", to=TensorProto.FLOAT)
    if zero:
        x = g.node("Sub", [x, g.const("zero", np.float32(zero))], "sub")
    x = g.node("Mul", [g.const("scale", np.float32(0.03)), x], "mul")
    y = g.node("MatMul", [x, g.const("w", g.rng.standard_normal((8, 4)).astype(np.float32))], "mm")
    g.q(y, 0.02, 1, "output")
    model = g.model([1, 8], [1, 4])
    compiled = cglow.compile_model(model)
    (i,) = compiled.inputs
    assert (i.scale, i.zero_point) == (np.float32(0.03), zero) and int8_steps_off(model, compiled) == 0


def uint8_io_model(int8_zero: int):
    """A uint8 NHWC input requantized to int8 (DequantizeLinear -> QuantizeLinear, zero point 126 to
    `int8_zero`, the same scale), moved to NCHW, a Conv, and its int8 output requantized to uint8 the same way:
    the TFLite converter's uint8 I/O as tf2onnx writes it."""
    g = Builder(11)

    def requantized(x: str, name: str, scale: float, zeros, dtypes) -> str:
        real = g.node("DequantizeLinear", [x, g.const(f"{name}/s", np.float32(scale)),
                                           g.const(f"{name}/z0", dtypes[0](zeros[0]))], f"{name}/real")
        return g.node("QuantizeLinear", [real, f"{name}/s", g.const(f"{name}/z1", dtypes[1](zeros[1]))], name)

    x = requantized("input", "in_q", 0.03, (126, int8_zero), (np.uint8, np.int8))
    x = g.dq(g.node("Transpose", [x], "nchw", perm=[0, 3, 1, 2]), 0.03, int8_zero, "x")
    requantized(nhwc_conv(g, x, 3), "output", 0.05, (-128, 0), (np.int8, np.uint8))
    model = g.model([1, 5, 5, 2], [1, 3, 5, 5])
    for value in (*model.graph.input, *model.graph.output):
        value.type.tensor_type.elem_type = TensorProto.UINT8
    return model


@pytest.mark.parametrize("int8_zero", [-2, 0])
def test_uint8_io_requantized_to_int8_by_a_zero_point_shift_folds_away(int8_zero):
    """A requantization that only moves the zero point by 128 (uint8 to int8 and back) is no kernel: the
    Conv reads the uint8 input and writes the uint8 output, as exact as before. One that would clamp (126 to
    0) stays a table."""
    model = uint8_io_model(int8_zero)
    compiled = cglow.compile_model(model)
    kernels = [type(i).__name__ for i in compiled.program.instrs]
    assert kernels == (["Conv"] if int8_zero == -2 else ["Gather", "Conv"]) and float_kernels(compiled) == []
    assert [(t.dtype, t.zero_point) for t in compiled.inputs + compiled.outputs] == [(np.uint8, 126), (np.uint8, 0)]
    net = cglow.build(compiled)
    for x in np.random.default_rng(3).integers(0, 256, (4, 1, 5, 5, 2)).astype(np.uint8):
        (got,), (want,) = net(x), ort_run(model, {"input": x})
        assert np.array_equal(got, want)
