"""QLinearConv, QLinearMatMul, QGemm, ConvInteger and MatMulInteger: each a single-node model compiled by cglow and run
as C, against onnxruntime running the same model (tests/qlinear.py: the builders, the comparison and its criterion)."""
from __future__ import annotations

import numpy as np
import pytest

import cglow
from tests.qdq import INT8, UINT8, conv_acc
from tests.qlinear import (I32, MAX_OFF_SHARE, MS, assert_close, assert_exact, compare, f32, output_scale, q, 
                           qgemm, qlinear_conv, qlinear_matmul, random_inputs, single_node, weights, zero_for)


QLINEAR_CONV = {
    "int8, padded": dict(x_dtype=INT8, w_dtype=INT8, pads=[1, 1, 1, 1]),
    "int8, per channel, stride 2": dict(x_dtype=INT8, w_dtype=INT8, per_channel=True, pads=[1, 1, 1, 1],
                                        strides=[2, 2]),
    "int8, unpadded, no bias": dict(x_dtype=INT8, w_dtype=INT8, bias=False),
    "int8, depthwise": dict(x_dtype=INT8, w_dtype=INT8, x_shape=(1, 4, 7, 7), m=4, group=4, per_channel=True,
                            pads=[1, 1, 1, 1]),
    "int8, dilated 1-D": dict(x_dtype=INT8, w_dtype=INT8, x_shape=(1, 3, 15), kernel=(3,), dilations=[2],
                              pads=[2, 2]),
    "uint8 x, int8 w": dict(x_dtype=UINT8, w_dtype=INT8, pads=[1, 1, 1, 1], per_channel=True),
    "uint8 x, uint8 w": dict(x_dtype=UINT8, w_dtype=UINT8, pads=[0, 1, 1, 0], w_zero=128),
    "uint8 x, uint8 w, per channel, grouped": dict(x_dtype=UINT8, w_dtype=UINT8, x_shape=(1, 4, 6, 6), m=6, group=2,
                                                   per_channel=True, w_zero=120, pads=[1, 1, 1, 1]),
    "1x1": dict(x_dtype=INT8, w_dtype=INT8, x_shape=(1, 8, 5, 5), m=6, kernel=(1, 1), per_channel=True),
    "int8, auto_pad SAME_UPPER, stride 2, w zero point": dict(x_dtype=INT8, w_dtype=INT8, auto_pad="SAME_UPPER",
                                                              strides=[2, 2], w_zero=3),
    "uint8, opset 10 (its DequantizeLinear takes no axis)": dict(x_dtype=UINT8, w_dtype=UINT8, opset=10,
                                                                 pads=[1, 1, 1, 1]),
}


@pytest.mark.parametrize("case", list(QLINEAR_CONV))
def test_qlinear_conv(case):
    model = qlinear_conv(np.random.default_rng(1), **QLINEAR_CONV[case])
    assert_close(compare(model), MAX_OFF_SHARE["QLinearConv"])


@pytest.mark.parametrize("dtype", [INT8, UINT8], ids=["int8", "uint8"])
def test_qlinear_conv_and_mul_at_rounding_ties(dtype):
    """Power-of-two scales: many requantized values exactly halfway between two steps, rounded to even by
    both (QLinearConv per channel at factors 2**-7 .. 2**-4, QLinearMul at 1/8)."""
    rng = np.random.default_rng(11)
    ins = [("x", (dtype, (1, 3, 6, 6))), ("x_scale", f32(0.25)), ("x_zero", zero_for(dtype)),
           ("w", weights(rng, (4, 3, 3, 3), INT8) // 8), ("w_scale", f32([0.125, 0.25, 0.0625, 0.5])),
           ("w_zero", q([0] * 4, INT8)), ("y_scale", f32(4.0)), ("y_zero", zero_for(dtype, 1)),
           ("bias", rng.integers(-300, 300, 4).astype(np.int32))]
    conv = single_node("QLinearConv", ins, dtype, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    assert_exact(compare(conv, runs=4))
    ins = [("a", (dtype, (16, 1))), ("a_scale", f32(0.5)), ("a_zero", zero_for(dtype)), ("b", (dtype, (16, 16))),
           ("b_scale", f32(0.25)), ("b_zero", zero_for(dtype)), ("y_scale", f32(1.0)), ("y_zero", zero_for(dtype))]
    assert_exact(compare(single_node("QLinearMul", ins, dtype, domain=MS), runs=4))


QLINEAR_MATMUL = {
    "int8, constant B": dict(a_dtype=INT8, b_dtype=INT8),
    "int8, constant B per column": dict(a_dtype=INT8, b_dtype=INT8, per_column=True),
    "int8, run-time B": dict(a_dtype=INT8, b_dtype=INT8, b_const=False),
    "int8, batched A": dict(a_dtype=INT8, b_dtype=INT8, a_shape=(2, 3, 12)),
    "uint8 A, int8 B": dict(a_dtype=UINT8, b_dtype=INT8),
    "uint8, constant B": dict(a_dtype=UINT8, b_dtype=UINT8),
    "uint8, run-time B": dict(a_dtype=UINT8, b_dtype=UINT8, b_const=False, a_shape=(4, 9)),
    "int8, opset 21": dict(a_dtype=INT8, b_dtype=INT8, opset=21),
    "uint8, opset 10": dict(a_dtype=UINT8, b_dtype=UINT8, opset=10),
}


@pytest.mark.parametrize("case", list(QLINEAR_MATMUL))
def test_qlinear_matmul(case):
    model = qlinear_matmul(np.random.default_rng(2), **QLINEAR_MATMUL[case])
    assert_close(compare(model), MAX_OFF_SHARE["QLinearMatMul"])


@pytest.mark.parametrize("a_zero", [0, 5])
def test_qlinear_matmul_batched_constant_b(a_zero):
    """A constant B of one matrix per batch, [2, 6, 4]."""
    rng = np.random.default_rng(9)
    ins = [("a", (INT8, (2, 3, 6))), ("a_scale", f32(0.03)), ("a_zero", q(a_zero, INT8)),
           ("b", weights(rng, (2, 6, 4), INT8)), ("b_scale", f32(0.01)), ("b_zero", q(0, INT8)),
           ("y_scale", output_scale(0.03, 0.01, 6)), ("y_zero", q(1, INT8))]
    assert_close(compare(single_node("QLinearMatMul", ins, INT8)), MAX_OFF_SHARE["QLinearMatMul"])


QGEMM = {
    "int8": dict(a_dtype=INT8, b_dtype=INT8),
    "int8, transB, per column": dict(a_dtype=INT8, b_dtype=INT8, trans_b=1, per_column=True),
    "int8, per column, no bias": dict(a_dtype=INT8, b_dtype=INT8, per_column=True, bias=False),
    "int8, transA": dict(a_dtype=INT8, b_dtype=INT8, trans_a=1),
    "int8, alpha 0.5": dict(a_dtype=INT8, b_dtype=INT8, alpha=0.5),
    "uint8 A, int8 B": dict(a_dtype=UINT8, b_dtype=INT8, trans_b=1),
    "uint8": dict(a_dtype=UINT8, b_dtype=UINT8),
}


@pytest.mark.parametrize("case", list(QGEMM))
def test_qgemm(case):
    model = qgemm(np.random.default_rng(3), **QGEMM[case])
    assert_close(compare(model), MAX_OFF_SHARE["QGemm"])


@pytest.mark.parametrize("a_dtype", [INT8, UINT8])
def test_qgemm_with_float_output(a_dtype):
    """Without y_scale QGemm gives the float product: within float rounding of onnxruntime's."""
    model = qgemm(np.random.default_rng(4), a_dtype, INT8, per_column=True, float_out=True)
    for g, w in compare(model):
        assert np.allclose(g, w, rtol=1e-5, atol=1e-5 * float(np.abs(w).max())), np.abs(g - w).max()


CONV_INTEGER = {
    "uint8 x, uint8 w, both zero points": dict(x_dtype=UINT8, w_dtype=UINT8, pads=[1, 1, 1, 1]),
    "uint8 x, int8 w, both zero points": dict(x_dtype=UINT8, w_dtype=INT8, pads=[1, 0, 0, 1], strides=[2, 1]),
    "int8 x, int8 w, both zero points": dict(x_dtype=INT8, w_dtype=INT8),
    "int8 x, uint8 w, grouped, both zero points": dict(x_dtype=INT8, w_dtype=UINT8, group=2, pads=[1, 1, 1, 1]),
    "uint8, x zero point only": dict(x_dtype=UINT8, w_dtype=UINT8, zeros="x", pads=[1, 1, 1, 1]),
    "uint8, run-time w, both zero points": dict(x_dtype=UINT8, w_dtype=UINT8, w_input=True, pads=[1, 1, 1, 1]),
    "uint8, w zero point only, padded": dict(x_dtype=UINT8, w_dtype=UINT8, zeros="w", pads=[1, 1, 1, 1]),
    "int8 x, uint8 w, w zero point only, grouped": dict(x_dtype=INT8, w_dtype=UINT8, zeros="w", group=2,
                                                        strides=[2, 2], pads=[1, 1, 1, 1]),
    "int8, run-time w, w zero point only": dict(x_dtype=INT8, w_dtype=INT8, zeros="w", w_input=True),
    "uint8, no zero points": dict(x_dtype=UINT8, w_dtype=UINT8, zeros="", pads=[1, 1, 1, 1]),
    "int8 x, int8 w, no zero points, dilated": dict(x_dtype=INT8, w_dtype=INT8, zeros="", dilations=[2, 1]),
    "uint8 1x1, w zero point only": dict(x_dtype=UINT8, w_dtype=UINT8, zeros="w", kernel=(1, 1)),
    "uint8, run-time zero points, padded": dict(x_dtype=UINT8, w_dtype=UINT8, zero_inputs=True, pads=[1, 1, 1, 1]),
    "int8, run-time w and zero points, grouped": dict(x_dtype=INT8, w_dtype=INT8, w_input=True, zero_inputs=True,
                                                       group=2, pads=[0, 1, 1, 0]),
}


@pytest.mark.parametrize("case", list(CONV_INTEGER))
def test_conv_integer(case):
    """int32 results: exact. Zero points: x's, w's, both or none, constants or graph inputs (random values)."""
    kw = dict(CONV_INTEGER[case])
    rng = np.random.default_rng(5)
    x_dtype, w_dtype = kw.pop("x_dtype"), kw.pop("w_dtype")
    kernel, group, m = kw.pop("kernel", (3, 3)), kw.get("group", 1), 4
    w_shape = (m, 4 // group) + tuple(kernel)
    w_zero = zero_for(w_dtype, 9)
    zeros = kw.pop("zeros", "xw")
    w = ("w", (w_dtype, w_shape)) if kw.pop("w_input", False) else ("w", weights(rng, w_shape, w_dtype))
    ins = [("x", (x_dtype, (1, 4, 7, 6))), w]
    if kw.pop("zero_inputs", False):
        ins += [("x_zero", (x_dtype, ())), ("w_zero", (w_dtype, ()))]
    elif zeros:
        ins += [("x_zero", zero_for(x_dtype, -11) if "x" in zeros else None)]
        ins += [("w_zero", w_zero)] if "w" in zeros else []
    model = single_node("ConvInteger", ins, I32, opset=10, kernel_shape=list(kernel), **kw)
    assert_exact(compare(model))


@pytest.mark.parametrize("given", ["constant", "input"])
@pytest.mark.parametrize("x_dtype, w_dtype", [(UINT8, UINT8), (INT8, INT8), (UINT8, INT8)])
def test_conv_integer_per_channel_weight_zero_points(x_dtype, w_dtype, given):
    """onnxruntime takes only one weight zero point ('Non per-tensor quantization is not supported'): against
    the NumPy integer reference instead; the zero points a constant or a graph input."""
    rng = np.random.default_rng(8)
    w = weights(rng, (5, 3, 3, 3), w_dtype)
    w_zero = q(int(zero_for(w_dtype)) + np.arange(5) * 3 - 5, w_dtype)
    model = single_node("ConvInteger", [("x", (x_dtype, (1, 3, 6, 7))), ("w", w), ("x_zero", None),
                                        ("w_zero", w_zero if given == "constant" else (w_dtype, (5,)))], I32,
                        opset=10, kernel_shape=[3, 3], pads=[1, 0, 1, 2])
    net = cglow.build(cglow.compile_model(model, name="net"))
    for f in [random_inputs(model, rng), random_inputs(model, rng, extremes=True)]:
        (got,) = net(f["x"]) if given == "constant" else net(f["x"], w_zero)
        want = conv_acc(f["x"].astype(np.int64), w.astype(np.int64) - w_zero.astype(np.int64).reshape(5, 1, 1, 1),
                        [1, 0, 1, 2], [1, 1], [1, 1], 1)
        assert got.dtype == I32 and np.array_equal(got, want)


MATMUL_INTEGER = {
    "uint8 x uint8": dict(a_dtype=UINT8, b_dtype=UINT8),
    "uint8 x int8": dict(a_dtype=UINT8, b_dtype=INT8),
    "int8 x int8": dict(a_dtype=INT8, b_dtype=INT8),
    "int8 x uint8": dict(a_dtype=INT8, b_dtype=UINT8),
    "uint8, per-column b zero points": dict(a_dtype=UINT8, b_dtype=UINT8, per_column=True),
    "int8, run-time b": dict(a_dtype=INT8, b_dtype=INT8, b_input=True),
    "uint8, run-time b, batched": dict(a_dtype=UINT8, b_dtype=UINT8, b_input=True, a_shape=(2, 3, 9),
                                       b_shape=(2, 9, 5)),
    "uint8, batched a": dict(a_dtype=UINT8, b_dtype=UINT8, a_shape=(2, 2, 9)),
    "int8, no zero points": dict(a_dtype=INT8, b_dtype=INT8, zeros=False),
    "uint8, run-time zero points": dict(a_dtype=UINT8, b_dtype=UINT8, zero_inputs=True),
    "int8, run-time b and zero points, batched": dict(a_dtype=INT8, b_dtype=INT8, b_input=True, zero_inputs=True,
                                                       a_shape=(2, 3, 9), b_shape=(2, 9, 5)),
}


@pytest.mark.parametrize("case", list(MATMUL_INTEGER))
def test_matmul_integer(case):
    kw = MATMUL_INTEGER[case]
    rng = np.random.default_rng(6)
    a_dtype, b_dtype = kw["a_dtype"], kw["b_dtype"]
    a_shape, b_shape = kw.get("a_shape", (3, 9)), kw.get("b_shape", (9, 5))
    b = ("b", (b_dtype, b_shape)) if kw.get("b_input") else ("b", weights(rng, b_shape, b_dtype))
    b_zero = q(int(zero_for(b_dtype)) + np.arange(5) * 4 - 9, b_dtype) if kw.get("per_column") else \
        zero_for(b_dtype, 6)
    ins = [("a", (a_dtype, a_shape)), b]
    if kw.get("zero_inputs"):
        ins += [("a_zero", (a_dtype, ())), ("b_zero", (b_dtype, ()))]
    elif kw.get("zeros", True):
        ins += [("a_zero", zero_for(a_dtype, -13)), ("b_zero", b_zero)]
    model = single_node("MatMulInteger", ins, I32, opset=10)
    assert_exact(compare(model))
