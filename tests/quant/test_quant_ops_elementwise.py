"""Microsoft's QLinear elementwise ops, the quantized pools, Concat, Softmax and Resize on the integers: each a
single-node model compiled by cglow and run as C, against onnxruntime running the same model (tests/qlinear.py: the
builders, the comparison and its criterion)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cglow
from cglow.errors import CglowError
from tests.qdq import INT8, UINT8
from tests.qlinear import (MAX_OFF_SHARE, MS, assert_close, assert_exact, compare, f32, q, qbinary, qunary,
                           single_node, weights, zero_for)


QBINARY = {
    "same shapes": dict(a_shape=(1, 3, 4, 5), b_shape=(1, 3, 4, 5)),
    "broadcast": dict(a_shape=(2, 3, 4), b_shape=(3, 1)),
    "broadcast a": dict(a_shape=(3, 1), b_shape=(2, 3, 4)),
    "equal scales": dict(a_shape=(4, 16), b_shape=(4, 16), scales=(0.05, 0.05, 0.1)),
    "small output scale": dict(a_shape=(4, 16), b_shape=(4, 16), scales=(0.2, 0.03, 0.013)),
}


@pytest.mark.parametrize("dtype", [INT8, UINT8], ids=["int8", "uint8"])
@pytest.mark.parametrize("case", list(QBINARY))
def test_qlinear_add(case, dtype):
    # ratios 1/2 and an odd output zero point: onnxruntime rounds every half (93 of 192) the other way
    share = 0.5 if case == "equal scales" else MAX_OFF_SHARE["QLinearAdd"]
    assert_close(compare(qbinary("QLinearAdd", dtype, **QBINARY[case])), share)


@pytest.mark.parametrize("dtype", [INT8, UINT8], ids=["int8", "uint8"])
@pytest.mark.parametrize("scales, zeros, share", [
    ((0.1, 0.3, 0.4), (5, -7, 2), 0.0),         # ratios 1/4 and 0.75000002: many halves, none differ
    ((0.05, 0.031, 0.06), (3, -9, 1), 0.01),     # 252 (int8) and 414 (uint8) of 65536 differ
    ((0.0123, 0.0456, 0.0789), (1, 2, 3), 0.0),  # none
])
def test_qlinear_add_every_pair(scales, zeros, share, dtype):
    """Every pair of 8-bit values: at most 1 step off (onnxruntime on x86-64 computes in float32 with float32
    ratios of the scales, cglow in fixed point with the exact ratios)."""
    model = qbinary("QLinearAdd", dtype, (256, 1), (1, 256), scales=scales, zeros=zeros)
    codes = every_code(dtype).reshape(256)
    assert_close(compare(model, feeds=[{"a": codes.reshape(256, 1), "b": codes.reshape(1, 256)}]), share)


@pytest.mark.parametrize("dtype", [INT8, UINT8], ids=["int8", "uint8"])
def test_qlinear_add_scalar_constant(dtype):
    model = qbinary("QLinearAdd", dtype, (2, 7), None, b_const=zero_for(dtype, 40))
    assert_close(compare(model), MAX_OFF_SHARE["QLinearAdd"])


def tie_add_model() -> onnx.ModelProto:
    """QDQ: a * 1/4 + b * 1/4 quantized at scale 1/2, zero points 0: every float32 value exact, half of the
    sums exactly halfway between two steps."""
    ins = [helper.make_tensor_value_info(n, TensorProto.INT8, s) for n, s in (("a", [256, 1]), ("b", [1, 256]))]
    consts = [numpy_helper.from_array(f32(0.25), "s"), numpy_helper.from_array(f32(0.5), "sy"),
              numpy_helper.from_array(q(0, INT8), "z")]
    nodes = [helper.make_node("DequantizeLinear", ["a", "s", "z"], ["af"]),
             helper.make_node("DequantizeLinear", ["b", "s", "z"], ["bf"]),
             helper.make_node("Add", ["af", "bf"], ["sum"]),
             helper.make_node("QuantizeLinear", ["sum", "sy", "z"], ["y"])]
    graph = helper.make_graph(nodes, "ties", ins, [helper.make_tensor_value_info("y", TensorProto.INT8, None)],
                              initializer=consts)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)


def test_qdq_add_rounds_ties_to_even():
    """The QDQ Add at exact ties: cglow's integers against the ONNX reference evaluator and onnxruntime
    without graph optimizations (DequantizeLinear, float Add, QuantizeLinear as written)."""
    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator
    model = tie_add_model()
    codes = every_code(INT8).reshape(256)
    feeds = {"a": codes.reshape(256, 1), "b": codes.reshape(1, 256)}
    exact = np.clip(np.rint((feeds["a"].astype(np.int64) + feeds["b"]) / 2), -128, 127).astype(np.int8)
    (reference,) = ReferenceEvaluator(model).run(None, feeds)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    (plain,) = ort.InferenceSession(model.SerializeToString(), options,
                                    providers=["CPUExecutionProvider"]).run(None, feeds)
    assert np.array_equal(reference, exact) and np.array_equal(plain, exact)  # the reference agrees with itself
    (got,) = cglow.build(cglow.compile_model(model, name="net"))(feeds["a"], feeds["b"])
    assert np.array_equal(got, exact), f"{np.sum(got != exact)} of {got.size} differ"


@pytest.mark.parametrize("dtype", [INT8, UINT8], ids=["int8", "uint8"])
@pytest.mark.parametrize("case", ["same shapes", "broadcast", "broadcast a", "scalar constant"])
def test_qlinear_mul(case, dtype):
    kw = dict(a_shape=(2, 7), b_shape=None, b_const=zero_for(dtype, 40)) if case == "scalar constant" else \
        dict(QBINARY[case])
    model = qbinary("QLinearMul", dtype, scales=(0.05, 0.031, 0.02), **kw)
    assert_close(compare(model), MAX_OFF_SHARE["QLinearMul"])


def every_code(dtype) -> np.ndarray:
    return (np.arange(256) - (128 if dtype == INT8 else 0)).astype(dtype).reshape(1, 256)


@pytest.mark.parametrize("dtype", [INT8, UINT8], ids=["int8", "uint8"])
@pytest.mark.parametrize("op, attrs, scales", [
    ("QLinearLeakyRelu", {"alpha": 0.1}, (0.05, 0.03)),
    ("QLinearLeakyRelu", {"alpha": 0.01}, (0.02, 0.02)),
    ("QLinearSigmoid", {}, (0.06, 1 / 256)),
    ("QLinearSigmoid", {}, (0.1, 0.0041)),
])
def test_qlinear_unary_on_every_code(op, attrs, scales, dtype):
    zeros = (3, -128) if scales[1] == 1 / 256 else (3, -4)  # output range [0, 1): zero point -128 (int8), 0 (uint8)
    model = qunary(op, dtype, (1, 256), scales, zeros, **attrs)
    assert_exact(compare(model, feeds=[{"x": every_code(dtype)}]))


POOLS = {
    "2x2 stride 2": dict(shape=(1, 3, 6, 8), kernel_shape=[2, 2], strides=[2, 2]),
    "3x3 stride 1": dict(shape=(2, 2, 5, 5), kernel_shape=[3, 3]),
    "3x2 stride (2, 1)": dict(shape=(1, 4, 7, 5), kernel_shape=[3, 2], strides=[2, 1]),
    "1-D": dict(shape=(1, 3, 10), kernel_shape=[3], strides=[2]),
    "padded, count_include_pad": dict(shape=(1, 2, 6, 6), kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                      count_include_pad=1),
    "padded, pads not counted": dict(shape=(1, 2, 6, 6), kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
    "ceil_mode": dict(shape=(1, 2, 7, 6), kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
    "2x2 stride 2, same scales (ties)": dict(shape=(1, 3, 8, 8), kernel_shape=[2, 2], strides=[2, 2],
                                             scales=(0.05, 0.05), zeros=(3, 3)),
}


@pytest.mark.parametrize("dtype", [INT8, UINT8], ids=["int8", "uint8"])
@pytest.mark.parametrize("case", list(POOLS))
def test_qlinear_average_pool(case, dtype):
    kw = dict(POOLS[case])
    scales, zeros = kw.pop("scales", (0.05, 0.04)), kw.pop("zeros", (3, -4))
    share = 0.3 if "ties" in case else MAX_OFF_SHARE["QLinearAveragePool"]  # ties: about 17 % observed
    assert_close(compare(qunary("QLinearAveragePool", dtype, kw.pop("shape"), scales, zeros, **kw)), share)


@pytest.mark.parametrize("dtype", [INT8, UINT8], ids=["int8", "uint8"])
@pytest.mark.parametrize("shape, scales", [((1, 5, 4, 4), (0.05, 0.02)), ((2, 3, 7, 5), (0.05, 0.05)),
                                           ((1, 4, 9), (0.02, 0.03))])
def test_qlinear_global_average_pool(shape, scales, dtype):
    model = qunary("QLinearGlobalAveragePool", dtype, shape, scales, (3, -4), channels_last=0)
    assert_close(compare(model), MAX_OFF_SHARE["QLinearGlobalAveragePool"])


def qconcat(dtype, shapes, params, out, axis):
    ins = [("y_scale", f32(out[0])), ("y_zero", zero_for(dtype, out[1]))]
    for i, (s, (scale, zero)) in enumerate(zip(shapes, params)):
        ins += [(f"x{i}", (dtype, s)), (f"s{i}", f32(scale)), (f"z{i}", zero_for(dtype, zero))]
    return single_node("QLinearConcat", ins, dtype, domain=MS, axis=axis)


@pytest.mark.parametrize("dtype", [INT8, UINT8], ids=["int8", "uint8"])
@pytest.mark.parametrize("shapes, params, out, axis", [
    ([(1, 2, 3), (1, 4, 3)], [(0.05, 3), (0.02, -8)], (0.05, 3), 1),
    ([(2, 3), (2, 3), (2, 1)], [(0.01, 0), (0.07, 9), (0.03, -20)], (0.04, 2), -1),
    ([(1, 2, 2, 2), (3, 2, 2, 2)], [(0.1, 1), (0.1, 1)], (0.1, 1), 0),
])
def test_qlinear_concat(shapes, params, out, axis, dtype):
    assert_exact(compare(qconcat(dtype, shapes, params, out, axis)))


def test_qlinear_concat_with_a_constant_input():
    rng = np.random.default_rng(10)
    ins = [("y_scale", f32(0.05)), ("y_zero", q(2, INT8)), ("x0", (INT8, (1, 2, 3))), ("s0", f32(0.03)),
           ("z0", q(1, INT8)), ("x1", weights(rng, (1, 1, 3), INT8)), ("s1", f32(0.07)), ("z1", q(-3, INT8))]
    assert_exact(compare(single_node("QLinearConcat", ins, INT8, domain=MS, axis=1)))


@pytest.mark.parametrize("dtype", [INT8, UINT8], ids=["int8", "uint8"])
@pytest.mark.parametrize("shape, axis, opset, x_scale", [
    ((2, 10), -1, 13, 0.1),
    ((1, 3, 8), -1, 13, 0.05),
    ((2, 5, 3), 1, 13, 0.08),
    ((3, 12), -1, 12, 0.2),
])
def test_qlinear_softmax(shape, axis, opset, x_scale, dtype):
    y_zero = -128 if dtype == INT8 else 0
    ins = [("x", (dtype, shape)), ("x_scale", f32(x_scale)), ("x_zero", zero_for(dtype, 2)),
           ("y_scale", f32(1 / 256)), ("y_zero", q(y_zero, dtype))]
    model = single_node("QLinearSoftmax", ins, dtype, domain=MS, attrs={"axis": axis, "opset": opset})
    assert_close(compare(model), MAX_OFF_SHARE["QLinearSoftmax"])


@pytest.mark.parametrize("dtype", [INT8, UINT8], ids=["int8", "uint8"])
@pytest.mark.parametrize("shape, scales, attrs, share", [
    ((1, 3, 4, 5), (1, 1, 2, 2), {}, 0.0),
    ((1, 2, 5, 4), (1, 1, 1.5, 3), dict(mode="nearest", nearest_mode="floor"), 0.0),
    ((1, 3, 4, 5), (1, 1, 2, 2), dict(mode="linear"), 0.0),
    ((1, 2, 6, 5), (1, 1, 1.5, 0.6), dict(mode="linear"), 0.0),
    ((1, 2, 3, 4), (1, 1, 2, 1.5), dict(mode="linear", coordinate_transformation_mode="align_corners"), 0.0),
    ((2, 5, 6), (1, 2, 1.5), dict(mode="linear"), 0.01),
])
def test_resize_on_the_integers(shape, scales, attrs, share, dtype):
    """QOperator models resize 8-bit tensors directly (unet's decoder): nearest copies them, linear
    interpolates in float32 and truncates the result (onnxruntime's static_cast). Over the last two axes
    cglow evaluates onnxruntime's 2-D formula in its order: exact. Other linear resizes are separable passes,
    where onnxruntime (3-D input) takes a trilinear formula: a value its float32 sum puts at an integer (or
    just under) may truncate one lower or higher (observed: 1 element of 540 on int8, none on uint8)."""
    model = single_node("Resize", [("x", (dtype, shape)), ("roi", None), ("scales", f32(scales))], dtype, **attrs)
    assert_close(compare(model), share)


def test_cubic_resize_on_the_integers_is_refused():
    model = single_node("Resize", [("x", (INT8, (1, 1, 4, 4))), ("roi", None), ("scales", f32((1, 1, 2, 2)))],
                        INT8, mode="cubic")
    with pytest.raises(CglowError, match="cubic mode is supported for float32 only, not int8"):
        cglow.compile_model(model)
