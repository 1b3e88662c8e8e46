"""Per-operator conformance: single-node (or tiny) ONNX models, compiled by cglow and run as C, compared
with onnxruntime (the reference).

Tolerance: every output within TOL = 1e-5 by tests/util.rel_error (max absolute difference over the
reference output's max magnitude), transcendental ops (Sigmoid, Tanh, Erf, Exp, Pow, Softmax) included:
cglow's exp and erf (runtime_c, 1e-7 and 6e-7), the C library's tanhf/powf and onnxruntime's
approximations agree far closer than that (the largest error seen is about 4e-7).
Inputs and weights are float32, seeded; inputs are graph inputs with static shapes, weights initializers.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import cglow
from cglow.options import Options

from tests.onnx_ops import TOL, check, f32, i64, ids, make_model, node_model, pos, rand
from tests.util import cglow_run, ort_run, random_feeds as feeds_for, rel_error


# --- Conv ---------------------------------------------------------------------------------------------

CONV = [  # id, x shape, w shape, bias, attrs
    ("3x3", (1, 3, 8, 8), (4, 3, 3, 3), True, {}),
    ("3x3-pad1", (1, 3, 8, 8), (4, 3, 3, 3), True, dict(pads=[1, 1, 1, 1])),
    ("pads-asym", (1, 3, 8, 9), (4, 3, 3, 3), True, dict(pads=[0, 1, 2, 1])),
    ("pads-asym-2", (1, 2, 6, 6), (3, 2, 3, 3), True, dict(pads=[2, 0, 1, 2])),
    ("stride2-pad1", (1, 3, 9, 8), (4, 3, 3, 3), True, dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    ("stride-2x1", (1, 3, 8, 8), (4, 3, 3, 3), True, dict(strides=[2, 1])),
    ("dilation2", (1, 3, 9, 9), (4, 3, 3, 3), True, dict(dilations=[2, 2], pads=[2, 2, 2, 2])),
    ("dilation-stride-pads", (1, 3, 10, 9), (4, 3, 3, 2), True,
     dict(dilations=[2, 1], strides=[1, 2], pads=[1, 0, 2, 1])),
    ("group2", (1, 4, 7, 7), (6, 2, 3, 3), True, dict(group=2, pads=[1, 1, 1, 1])),
    ("depthwise", (1, 4, 7, 7), (4, 1, 3, 3), True, dict(group=4, pads=[1, 1, 1, 1])),
    ("depthwise-mult2", (1, 4, 7, 7), (8, 1, 3, 3), True, dict(group=4, pads=[1, 1, 1, 1])),
    ("depthwise-stride2", (1, 4, 8, 8), (4, 1, 3, 3), True, dict(group=4, strides=[2, 2], pads=[0, 0, 1, 1])),
    ("same-upper-s2", (1, 3, 7, 8), (4, 3, 3, 3), True, dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    ("same-lower-s2", (1, 3, 7, 8), (4, 3, 3, 3), True, dict(auto_pad="SAME_LOWER", strides=[2, 2])),
    ("same-upper-k4", (1, 3, 6, 6), (4, 3, 4, 4), True, dict(auto_pad="SAME_UPPER")),
    ("same-lower-k4", (1, 3, 6, 6), (4, 3, 4, 4), True, dict(auto_pad="SAME_LOWER")),
    ("same-upper-dw", (1, 4, 7, 7), (4, 1, 3, 3), True, dict(auto_pad="SAME_UPPER", group=4, strides=[2, 2])),
    ("valid-s2", (1, 3, 8, 7), (4, 3, 3, 3), True, dict(auto_pad="VALID", strides=[2, 2])),
    ("no-bias", (1, 3, 6, 6), (4, 3, 3, 3), False, dict(pads=[1, 1, 1, 1])),
    ("1x1", (1, 8, 5, 5), (6, 8, 1, 1), True, {}),
    ("kernel-3x1", (1, 3, 6, 6), (4, 3, 3, 1), True, dict(pads=[1, 0, 1, 0])),
    ("kernel_shape-attr", (1, 3, 6, 6), (4, 3, 3, 3), True, dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ("batch2", (2, 3, 6, 6), (4, 3, 3, 3), True, dict(pads=[1, 1, 1, 1])),
    ("1d", (1, 3, 16), (4, 3, 3), True, {}),
    ("1d-pads-asym", (1, 3, 16), (4, 3, 3), True, dict(pads=[1, 2])),
    ("1d-stride2-dilation2", (2, 3, 17), (4, 3, 3), True, dict(strides=[2], dilations=[2], pads=[1, 1])),
    ("1d-same-upper", (1, 3, 15), (4, 3, 4), True, dict(auto_pad="SAME_UPPER", strides=[2])),
    ("1d-same-lower", (1, 3, 15), (4, 3, 4), True, dict(auto_pad="SAME_LOWER", strides=[2])),
    ("1d-valid", (1, 3, 15), (4, 3, 4), False, dict(auto_pad="VALID", strides=[3])),
    ("1d-depthwise", (1, 4, 12), (4, 1, 5), True, dict(group=4, pads=[2, 2])),
    ("1d-group2-batch2", (2, 4, 9), (6, 2, 3), True, dict(group=2, strides=[2])),
    ("kernel-covers-input", (1, 3, 4, 4), (5, 3, 4, 4), True, {}),
]


@pytest.mark.parametrize("case", CONV, ids=ids(CONV))
def test_conv(case):
    _, x, w, bias, attrs = case
    ins = [("x", x), ("w", rand(*w, seed=2))] + ([("b", rand(w[0], seed=3))] if bias else [])
    check(node_model("Conv", ins, **attrs))


# --- pooling ----------------------------------------------------------------------------------------

POOL = [  # id, op, x shape, attrs, opset
    ("max-2x2-s2", "MaxPool", (1, 3, 8, 8), dict(kernel_shape=[2, 2], strides=[2, 2]), 13),
    ("max-3x3-s2-pad1", "MaxPool", (1, 3, 9, 9), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), 13),
    ("max-pads-asym", "MaxPool", (1, 2, 7, 6), dict(kernel_shape=[3, 3], pads=[0, 1, 2, 0]), 13),
    ("max-stride-default", "MaxPool", (1, 2, 6, 6), dict(kernel_shape=[3, 2]), 13),
    ("max-ceil", "MaxPool", (1, 2, 7, 7), dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1), 13),
    ("max-ceil-pad", "MaxPool", (1, 2, 8, 8),
     dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1), 13),
    ("max-dilation2", "MaxPool", (1, 2, 9, 9), dict(kernel_shape=[2, 2], dilations=[2, 2], strides=[2, 2]), 13),
    ("max-same-upper", "MaxPool", (1, 2, 7, 8), dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"), 13),
    ("max-same-lower", "MaxPool", (1, 2, 7, 8), dict(kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_LOWER"), 13),
    ("max-valid", "MaxPool", (1, 2, 7, 8), dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="VALID"), 13),
    ("max-1d", "MaxPool", (2, 3, 11), dict(kernel_shape=[3], strides=[2], pads=[1, 1]), 13),
    ("max-1d-ceil", "MaxPool", (1, 3, 10), dict(kernel_shape=[3], strides=[2], ceil_mode=1), 13),
    ("avg-2x2-s2", "AveragePool", (1, 3, 8, 8), dict(kernel_shape=[2, 2], strides=[2, 2]), 13),
    ("avg-pad1-exclude", "AveragePool", (1, 3, 7, 7), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]), 13),
    ("avg-pad1-include", "AveragePool", (1, 3, 7, 7),
     dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1), 13),
    ("avg-pads-asym-exclude", "AveragePool", (1, 2, 7, 6),
     dict(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 1, 2, 0]), 13),
    ("avg-pads-asym-include", "AveragePool", (1, 2, 7, 6),
     dict(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 1, 2, 0], count_include_pad=1), 13),
    ("avg-ceil", "AveragePool", (1, 2, 7, 7), dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1), 13),
    ("avg-ceil-pad-exclude", "AveragePool", (1, 2, 8, 8),
     dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1), 13),
    ("avg-ceil-pad-include", "AveragePool", (1, 2, 8, 8),
     dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1), 13),
    ("avg-same-upper", "AveragePool", (1, 2, 7, 8),
     dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"), 13),
    ("avg-same-lower", "AveragePool", (1, 2, 7, 8),
     dict(kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_LOWER"), 13),
    ("avg-valid", "AveragePool", (1, 2, 7, 8), dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="VALID"), 13),
    ("avg-1d-pad-exclude", "AveragePool", (2, 3, 11), dict(kernel_shape=[3], strides=[2], pads=[1, 1]), 13),
    ("avg-1d-pad-include", "AveragePool", (2, 3, 11),
     dict(kernel_shape=[3], strides=[2], pads=[1, 1], count_include_pad=1), 13),
    ("avg-kernel-over-input-include", "AveragePool", (1, 2, 3, 3),
     dict(kernel_shape=[4, 4], pads=[1, 1, 1, 1], count_include_pad=1), 13),
    ("avg-dilation2-opset19", "AveragePool", (1, 2, 9, 9),
     dict(kernel_shape=[2, 2], dilations=[2, 2], pads=[1, 1, 1, 1]), 19),
]


@pytest.mark.parametrize("case", POOL, ids=ids(POOL))
def test_pool(case):
    _, op, x, attrs, opset = case
    check(node_model(op, [("x", x)], opset=opset, **attrs))


@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (2, 4, 9), (1, 3, 1, 1)], ids=["2d", "1d", "1x1"])
def test_global_average_pool(shape):
    check(node_model("GlobalAveragePool", [("x", shape)]))


# --- Gemm and MatMul --------------------------------------------------------------------------------

M, K, N = 3, 5, 4
GEMM = [  # id, transA, transB, C (None: omitted), attrs
    ("plain", 0, 0, None, {}),
    ("transA", 1, 0, None, {}),
    ("transB", 0, 1, rand(N, seed=4), {}),
    ("transA-transB", 1, 1, rand(N, seed=4), {}),
    ("alpha-beta", 0, 1, rand(N, seed=4), dict(alpha=0.5, beta=2.0)),
    ("C-N", 0, 0, rand(N, seed=4), {}),
    ("C-1xN", 0, 0, rand(1, N, seed=4), {}),
    ("C-Mx1", 0, 0, rand(M, 1, seed=4), {}),
    ("C-MxN", 0, 0, rand(M, N, seed=4), {}),
    ("C-scalar", 0, 0, f32(0.75), {}),
    ("C-1", 0, 1, f32([-0.5]), dict(beta=0.5)),
    ("C-uniform", 0, 0, np.full((N,), 0.25, np.float32), dict(alpha=2.0)),
    ("C-Mx1-transA-alpha", 1, 0, rand(M, 1, seed=4), dict(alpha=-1.5, beta=0.25)),
    ("beta0", 0, 0, rand(M, N, seed=4), dict(beta=0.0)),
]


@pytest.mark.parametrize("case", GEMM, ids=ids(GEMM))
def test_gemm(case):
    _, ta, tb, c, attrs = case
    ins = [("a", (K, M) if ta else (M, K)), ("b", rand(*((N, K) if tb else (K, N)), seed=2))]
    ins += [("c", c)] if c is not None else []
    check(node_model("Gemm", ins, transA=ta, transB=tb, **attrs))


@pytest.mark.parametrize("a,b,c", [((1, K), (K, N), (1, N)), ((1, K), (K, N), (N,)), ((M, K), (K, 1), (M, 1)),
                                   ((M, K), (K, 1), (1, 1))], ids=["M1-C1xN", "M1-CN", "N1-CMx1", "N1-C1x1"])
def test_gemm_degenerate(a, b, c):
    """M or N of 1: the C shapes (1,N), (M,1) and (N,) meet."""
    check(node_model("Gemm", [("a", a), ("b", rand(*b, seed=2)), ("c", rand(*c, seed=3))]))


@pytest.mark.parametrize("target", ["generic", "x86-avx512"])
def test_gemm_with_a_large_weight_loops_over_its_panels_outermost(target):
    """B of 300 x 1000 floats (1.2 MB, larger than A): column panels outermost, every row tile inside, the
    edge rows (9 = 8 + 1 or 4 + 4 + 1) and edge columns (1000 = 31 x 32 + 8) at their own sizes."""
    model = node_model("Gemm", [("a", (9, 300)), ("b", rand(300, 1000, seed=2)), ("c", rand(1000, seed=3))])
    options = Options(target=target)
    kernel = cglow.compile_model(model, options=options).c_source.split("_gemm(")[1]
    assert kernel.index("for (int32_t n0 = 0;") < kernel.index("for (int32_t m0 = 0;")
    feeds = feeds_for(model)
    (got,), (want,) = cglow_run(model, feeds, options=options), ort_run(model, feeds)
    assert rel_error(got, want) <= TOL


@pytest.mark.parametrize("c_shape", [(M, N), (1, N)], ids=["MxN", "1xN"])
def test_gemm_runtime_operands(c_shape):
    """B and C computed at run time (graph inputs), as in attention blocks."""
    check(node_model("Gemm", [("a", (M, K)), ("b", (N, K)), ("c", c_shape)], transB=1, alpha=0.5))


MATMUL = [  # id, a shape, b shape, b is a weight
    ("2d-weights", (3, 5), (5, 4), True),
    ("2d-inputs", (3, 5), (5, 4), False),
    ("1d-x-2d", (5,), (5, 4), True),
    ("2d-x-1d", (3, 5), (5,), True),
    ("1d-x-2d-inputs", (5,), (5, 4), False),
    ("2d-x-1d-inputs", (3, 5), (5,), False),
    ("batched-3d", (2, 3, 5), (2, 5, 4), False),
    ("3d-x-2d-weights", (2, 3, 5), (5, 4), True),
    ("2d-x-3d", (3, 5), (2, 5, 4), False),
    ("broadcast-batch", (2, 1, 3, 5), (1, 3, 5, 4), False),
    ("broadcast-batch-rank", (4, 3, 5), (2, 1, 5, 4), False),
    ("4d-x-4d", (2, 2, 3, 5), (2, 2, 5, 4), False),
    ("1d-x-3d", (5,), (2, 5, 4), False),
    ("3d-x-1d", (2, 3, 5), (5,), False),
    ("4d-x-2d-weights", (2, 3, 4, 5), (5, 6), True),
    ("1d-x-1d", (5,), (5,), False),
    ("k1", (3, 1), (1, 4), False),
    ("row-x-column", (1, 5), (5, 1), False),
]


@pytest.mark.parametrize("case", MATMUL, ids=ids(MATMUL))
def test_matmul(case):
    _, a, b, weight = case
    check(node_model("MatMul", [("a", a), ("b", rand(*b, seed=2) if weight else b)]))


@pytest.mark.parametrize("b", [(3, 4), (2, 3, 4)], ids=["2d", "3d"])
def test_matmul_weights_left(b):
    check(node_model("MatMul", [("w", rand(5, 3, seed=2)), ("x", b)]))


def test_matmul_same_input():
    check(make_model([helper.make_node("MatMul", ["x", "x"], ["y"])], {"x": (2, 4, 4)}, ["y"]))


def test_gemm_constant_a():
    check(node_model("Gemm", [("a", rand(M, K, seed=2)), ("b", (K, N)), ("c", rand(N, seed=3))]))


# --- elementwise --------------------------------------------------------------------------------------

BROADCAST = [  # id, first operand, second operand: a tuple is a graph input, an ndarray a constant
    ("same", (2, 3, 4, 5), (2, 3, 4, 5)),
    ("trailing-vector", (2, 3, 4, 5), (5,)),
    ("vector-first", (5,), (2, 3, 4, 5)),
    ("both-directions", (2, 1, 4, 1), (1, 3, 1, 5)),
    ("rank-differing-channel", (2, 3, 4, 5), (3, 1, 1)),
    ("channel-first", (3, 1, 1), (2, 3, 4, 5)),
    ("rank-differing-both", (3, 1, 5), (2, 1, 4, 1)),
    ("scalar-input", (2, 3, 4), ()),
    ("const-scalar", (2, 3, 4), f32(1.25)),
    ("const-scalar-first", f32(1.25), (2, 3, 4)),
    ("const-1-elem", (2, 3, 4), f32([0.75])),
    ("const-channel", (2, 3, 4, 5), pos(3, 1, 1, seed=5)),
    ("const-vector-first", pos(5, seed=5), (2, 3, 4, 5)),
    ("const-uniform", (2, 3, 4, 5), np.full((4, 5), 1.5, np.float32)),
]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("case", BROADCAST, ids=ids(BROADCAST))
def test_binary(op, case):
    _, a, b = case
    # Div: positive operands keep the quotient well scaled
    check(node_model(op, [("a", a), ("b", b)]), positive=op == "Div")


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_binary_same_input(op):
    node = helper.make_node(op, ["x", "x"], ["y"])
    check(make_model([node], {"x": (2, 3, 4)}, ["y"]), positive=True)


@pytest.mark.parametrize("divisor", [f32(3.0), f32(-0.7), pos(4, 1, seed=6)], ids=["scalar", "negative", "tensor"])
def test_div_by_constant(divisor):
    check(node_model("Div", [("x", (2, 4, 5)), ("d", divisor)]))


UNARY = [  # id, op, attrs, input scale (to reach the saturating ranges)
    ("Relu", "Relu", {}, 1.0),
    ("Sigmoid", "Sigmoid", {}, 4.0),
    ("Tanh", "Tanh", {}, 3.0),
    ("Erf", "Erf", {}, 2.0),
    ("Exp", "Exp", {}, 2.0),
    ("LeakyRelu-default", "LeakyRelu", {}, 1.0),
    ("LeakyRelu-alpha0.2", "LeakyRelu", dict(alpha=0.2), 1.0),
    ("Identity", "Identity", {}, 1.0),
]


@pytest.mark.parametrize("case", UNARY, ids=ids(UNARY))
def test_unary(case):
    _, op, attrs, scale = case
    check(node_model(op, [("x", (2, 3, 4, 5))], **attrs), scale=scale)


def test_sqrt():
    check(node_model("Sqrt", [("x", (2, 3, 4, 5))]), positive=True)


CLIP = [  # id, min, max, opset (None: omitted; a tuple: graph input)
    ("relu6", f32(0.0), f32(6.0), 13),
    ("min-only", f32(-0.5), None, 13),
    ("max-only", None, f32(0.5), 13),
    ("both", f32(-1.0), f32(0.25), 13),
    ("neither", None, None, 13),
    ("relu6-opset11", f32(0.0), f32(6.0), 11),
    ("max-only-opset11", None, f32(1.0), 11),
    ("runtime-bounds", (), (), 13),
]


@pytest.mark.parametrize("case", CLIP, ids=ids(CLIP))
def test_clip(case):
    _, lo, hi, opset = case
    ins = [("x", (2, 3, 4, 5)), ("lo", lo), ("hi", hi)]
    while ins[-1][1] is None:
        ins.pop()
    check(node_model("Clip", ins, opset=opset), scale=4.0)


POW = [  # id, exponent (ndarray constant or tuple graph input)
    ("2", f32(2.0)),
    ("0.5", f32(0.5)),
    ("3", f32(3.0)),
    ("1.7", f32(1.7)),
    ("-1", f32(-1.0)),
    ("1", f32(1.0)),
    ("2-shape1", f32([2.0])),
    ("-0.5", f32(-0.5)),
    ("tensor", np.array([0.5, 1.0, 2.0, 3.0, 1.7], np.float32)),
    ("runtime", (4, 5)),
]


@pytest.mark.parametrize("case", POW, ids=ids(POW))
def test_pow(case):
    _, exponent = case
    check(node_model("Pow", [("x", (2, 4, 5)), ("e", exponent)]), positive=True)


# --- normalization and softmax ----------------------------------------------------------------------

@pytest.mark.parametrize("shape,eps", [((2, 3, 5, 5), 1e-5), ((2, 3, 7), 1e-3), ((4, 3), 1e-5)],
                         ids=["nchw", "ncw", "nc"])
def test_batchnorm(shape, eps):
    c = shape[1]
    ins = [("x", shape), ("scale", pos(c, seed=2)), ("bias", rand(c, seed=3)), ("mean", rand(c, seed=4)),
           ("var", pos(c, seed=5))]
    check(node_model("BatchNormalization", ins, epsilon=eps))


SOFTMAX = [  # id, shape, axis (None: default), opset
    ("opset11-default", (2, 3, 4), None, 11),
    ("opset11-axis1", (2, 3, 4), 1, 11),
    ("opset11-axis-1", (2, 3, 4), -1, 11),
    ("opset11-axis0", (2, 3, 4), 0, 11),
    ("opset11-axis2-4d", (2, 3, 4, 5), 2, 11),
    ("opset13-default", (2, 3, 4), None, 13),
    ("opset13-axis1-middle", (2, 3, 4), 1, 13),
    ("opset13-axis0", (2, 3, 4), 0, 13),
    ("opset13-axis-2-4d", (2, 3, 4, 5), -2, 13),
    ("opset13-axis1-4d", (2, 3, 4, 5), 1, 13),
    ("opset13-2d", (3, 7), 1, 13),
]


@pytest.mark.parametrize("case", SOFTMAX, ids=ids(SOFTMAX))
def test_softmax(case):
    _, shape, at, opset = case
    attrs = {} if at is None else dict(axis=at)
    check(node_model("Softmax", [("x", shape)], opset=opset, **attrs), scale=3.0)


def test_softmax_large_inputs():
    """Inputs far beyond exp's range: the max subtraction must keep the result finite."""
    check(node_model("Softmax", [("x", (2, 3, 16))]), scale=40.0)


LAYERNORM = [  # id, x shape, axis, bias, attrs
    ("axis-1-bias", (2, 3, 8), -1, True, {}),
    ("axis-1-no-bias", (2, 3, 8), -1, False, {}),
    ("axis-2-bias", (2, 3, 8), -2, True, {}),
    ("axis-2-no-bias", (2, 3, 8), -2, False, {}),
    ("axis2-positive", (2, 3, 8), 2, True, {}),
    ("axis0", (2, 3, 4), 0, True, {}),
    ("4d-epsilon", (2, 3, 4, 6), -1, True, dict(epsilon=1e-3)),
]


@pytest.mark.parametrize("param_shape", [(8,), (1, 8)], ids=["8", "1x8"])
def test_layernorm_broadcast_params(param_shape):
    """Scale and bias that broadcast to the normalized shape (3, 8) of axis -2."""
    ins = [("x", (2, 3, 8)), ("scale", pos(*param_shape, seed=2)), ("bias", rand(*param_shape, seed=3))]
    check(node_model("LayerNormalization", ins, opset=17, axis=-2))


@pytest.mark.parametrize("case", LAYERNORM, ids=ids(LAYERNORM))
def test_layernorm(case):
    _, shape, at, bias, attrs = case
    norm = shape[at:]
    ins = [("x", shape), ("scale", pos(*norm, seed=2))] + ([("bias", rand(*norm, seed=3))] if bias else [])
    feeds = {"x": (rand(*shape, seed=7) * 2 + 1.5).astype(np.float32)}  # non-zero mean
    check(node_model("LayerNormalization", ins, opset=17, axis=at, **attrs), feeds=feeds)


# --- data movement ------------------------------------------------------------------------------------

@pytest.mark.parametrize("at", [0, 1, 2, 4, -1, -3])
def test_flatten(at):
    node = helper.make_node("Flatten", ["x"], ["t"], axis=at)
    relu = helper.make_node("Relu", ["t"], ["y"])
    check(make_model([node, relu], {"x": (2, 3, 4, 5)}, ["y"]))


@pytest.mark.parametrize("target", [(0, -1), (-1,), (2, 0, -1), (-1, 5), (0, 0, 20), (6, 20), (2, 3, 4, 5, 1),
                                    (1, -1, 0)], ids=lambda t: "[" + ",".join(map(str, t)) + "]")
def test_reshape(target):
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 4, 5)}, ["y"], {"shape": i64(*target)}))


def test_reshape_allowzero():
    """allowzero=1 (opset 14): a target without zeros behaves as before."""
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["t"], allowzero=1), helper.make_node("Relu", ["t"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 4)}, ["y"], {"shape": i64(4, -1)}, 14))


@pytest.mark.parametrize("perm", [None, (0, 2, 3, 1), (1, 0, 2, 3), (0, 3, 1, 2), (3, 2, 1, 0)],
                         ids=lambda p: "default" if p is None else "".join(map(str, p)))
def test_transpose_relu(perm):
    attrs = {} if perm is None else dict(perm=list(perm))
    nodes = [helper.make_node("Transpose", ["x"], ["t"], **attrs), helper.make_node("Relu", ["t"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 4, 5)}, ["y"]))


SQUEEZE = [  # id, op, x shape, axes, opset (axes an attribute before opset 13, an input since)
    ("squeeze-attr", "Squeeze", (2, 1, 4, 1), [1], 11),
    ("squeeze-attr-two", "Squeeze", (2, 1, 4, 1), [1, 3], 11),
    ("squeeze-attr-negative", "Squeeze", (2, 1, 4, 1), [-1], 11),
    ("squeeze-attr-none", "Squeeze", (1, 3, 1, 4), None, 11),
    ("squeeze-input", "Squeeze", (2, 1, 4, 1), [1], 13),
    ("squeeze-input-negative", "Squeeze", (2, 1, 4, 1), [-3, -1], 13),
    ("squeeze-input-none", "Squeeze", (1, 3, 1, 4), None, 13),
    ("unsqueeze-attr", "Unsqueeze", (2, 3, 4), [0], 11),
    ("unsqueeze-attr-two", "Unsqueeze", (2, 3, 4), [1, 4], 11),
    ("unsqueeze-attr-negative", "Unsqueeze", (2, 3, 4), [-1], 11),
    ("unsqueeze-input", "Unsqueeze", (2, 3, 4), [0, 3], 13),
    ("unsqueeze-input-negative", "Unsqueeze", (2, 3, 4), [-1, 1], 13),
    ("unsqueeze-input-middle", "Unsqueeze", (2, 3, 4), [2], 13),
]


@pytest.mark.parametrize("case", SQUEEZE, ids=ids(SQUEEZE))
def test_squeeze_unsqueeze(case):
    _, op, shape, axes, opset = case
    inits = {}
    if opset >= 13:
        node = helper.make_node(op, ["x"] + (["axes"] if axes is not None else []), ["t"])
        if axes is not None:
            inits["axes"] = i64(*axes)
    else:
        node = helper.make_node(op, ["x"], ["t"], **({} if axes is None else dict(axes=axes)))
    nodes = [node, helper.make_node("Relu", ["t"], ["y"])]
    check(make_model(nodes, {"x": shape}, ["y"], inits, opset))


CONCAT = [  # id, axis, input shapes (an ndarray is a constant input)
    ("axis0", 0, [(1, 3, 4), (2, 3, 4), (3, 3, 4)]),
    ("axis1", 1, [(2, 1, 4), (2, 3, 4), (2, 2, 4)]),
    ("axis-1", -1, [(2, 3, 1), (2, 3, 4), (2, 3, 2)]),
    ("axis2-const-middle", 2, [(2, 3, 2), rand(2, 3, 3, seed=8), (2, 3, 1)]),
    ("axis1-const-first", 1, [rand(2, 2, 4, seed=8), (2, 3, 4), (2, 1, 4)]),
    ("axis-3-const-last", -3, [(1, 3, 4), (2, 3, 4), rand(1, 3, 4, seed=8)]),
    ("axis1-4d", 1, [(1, 2, 3, 3), (1, 4, 3, 3), (1, 1, 3, 3)]),
]


@pytest.mark.parametrize("case", CONCAT, ids=ids(CONCAT))
def test_concat(case):
    _, at, shapes = case
    inputs = {f"x{i}": s for i, s in enumerate(shapes) if isinstance(s, tuple)}
    inits = {f"x{i}": s for i, s in enumerate(shapes) if isinstance(s, np.ndarray)}
    node = helper.make_node("Concat", [f"x{i}" for i in range(len(shapes))], ["y"], axis=at)
    check(make_model([node], inputs, ["y"], inits))


def test_concat_same_input_twice():
    node = helper.make_node("Concat", ["x", "x", "z"], ["y"], axis=1)
    check(make_model([node], {"x": (2, 3), "z": (2, 2)}, ["y"]))


@pytest.mark.parametrize("case", [("opset11-attr", 11, None), ("opset12-ratio", 12, f32(0.1)),
                                  ("opset13-ratio-training-false", 13, f32(0.3)),
                                  ("opset13-mask-unused", 13, f32(0.5))], ids=lambda c: c[0])
def test_dropout(case):
    name, opset, ratio = case
    inits = {}
    if opset < 12:
        drop = helper.make_node("Dropout", ["r"], ["t"], ratio=0.2)
    elif "training" in name:
        drop = helper.make_node("Dropout", ["r", "ratio", "training"], ["t"])
        inits = {"ratio": ratio, "training": np.array(False)}
    else:
        drop = helper.make_node("Dropout", ["r", "ratio"], ["t", "mask"] if "mask" in name else ["t"])
        inits = {"ratio": ratio}
    nodes = [helper.make_node("Relu", ["x"], ["r"]), drop, helper.make_node("Sigmoid", ["t"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 4)}, ["y"], inits, opset))


@pytest.mark.parametrize("opset", [12, 13])
def test_dropout_last_node(opset):
    check(node_model("Dropout", [("x", (2, 3, 4)), ("ratio", f32(0.25))], opset=opset))


# --- transposes read as strided views ---------------------------------------------------------------

def _t(x, out, perm):
    return helper.make_node("Transpose", [x], [out], perm=list(perm))


STRIDED = {  # id -> (nodes, inputs, initializers)
    "transpose-matmul-a": ([_t("x", "t", (0, 2, 1)), helper.make_node("MatMul", ["t", "w"], ["y"])],
                           {"x": (2, 5, 3)}, {"w": rand(5, 4, seed=2)}),
    "transpose-matmul-b": ([_t("k", "kt", (0, 2, 1)), helper.make_node("MatMul", ["q", "kt"], ["y"])],
                           {"q": (2, 3, 4), "k": (2, 6, 4)}, {}),
    "transpose-matmul-2d": ([_t("x", "t", (1, 0)), helper.make_node("MatMul", ["t", "w"], ["y"])],
                            {"x": (5, 3)}, {"w": rand(5, 4, seed=2)}),
    "transpose-reshape-copy": ([_t("x", "t", (0, 2, 1, 3)), helper.make_node("Reshape", ["t", "s"], ["y"])],
                               {"x": (2, 3, 4, 5)}, {"s": i64(2, 4, 15)}),
    "transpose-reshape-view": ([_t("x", "t", (0, 2, 3, 1)), helper.make_node("Reshape", ["t", "s"], ["r"]),
                                helper.make_node("Relu", ["r"], ["y"])],
                               {"x": (2, 3, 4, 5)}, {"s": i64(2, 20, 3)}),
    "transpose-flatten": ([_t("x", "t", (0, 2, 3, 1)), helper.make_node("Flatten", ["t"], ["y"])],
                          {"x": (2, 3, 4, 5)}, {}),
    "transpose-transpose": ([_t("x", "t", (0, 2, 3, 1)), _t("t", "u", (2, 0, 3, 1)),
                             helper.make_node("Relu", ["u"], ["y"])], {"x": (2, 3, 4, 5)}, {}),
    "transpose-conv": ([_t("x", "t", (0, 3, 1, 2)), helper.make_node("Conv", ["t", "w", "b"], ["y"], pads=[1] * 4)],
                       {"x": (1, 6, 6, 3)}, {"w": rand(4, 3, 3, 3, seed=2), "b": rand(4, seed=3)}),
    "transpose-add-broadcast": ([_t("x", "t", (0, 2, 1)), helper.make_node("Add", ["t", "z"], ["y"])],
                                {"x": (2, 4, 3), "z": (3, 1)}, {}),
    "transpose-add-transpose": ([_t("x", "t", (1, 0)), _t("z", "u", (1, 0)),
                                 helper.make_node("Add", ["t", "u"], ["y"])], {"x": (3, 4), "z": (3, 4)}, {}),
    "transpose-softmax13": ([_t("x", "t", (0, 2, 1)), helper.make_node("Softmax", ["t"], ["y"], axis=-1)],
                            {"x": (2, 5, 3)}, {}),
    "transpose-layernorm": ([_t("x", "t", (0, 2, 1)),
                             helper.make_node("LayerNormalization", ["t", "g", "bb"], ["y"], axis=-1)],
                            {"x": (2, 6, 3)}, {"g": pos(6, seed=2), "bb": rand(6, seed=3)}),
    "transpose-concat": ([_t("x", "t", (0, 2, 1)), helper.make_node("Concat", ["t", "z"], ["y"], axis=1)],
                         {"x": (2, 4, 3), "z": (2, 2, 4)}, {}),
    "transpose-global-avgpool": ([_t("x", "t", (0, 3, 1, 2)), helper.make_node("GlobalAveragePool", ["t"], ["y"])],
                                 {"x": (2, 4, 5, 3)}, {}),
    "transpose-maxpool": ([_t("x", "t", (0, 3, 1, 2)),
                           helper.make_node("MaxPool", ["t"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                          {"x": (1, 6, 6, 3)}, {}),
    "transpose-avgpool": ([_t("x", "t", (0, 3, 1, 2)),
                           helper.make_node("AveragePool", ["t"], ["y"], kernel_shape=[3, 3], pads=[1] * 4)],
                          {"x": (1, 6, 5, 3)}, {}),
    "transpose-gemm": ([_t("x", "t", (1, 0)), helper.make_node("Gemm", ["t", "w", "c"], ["y"], transB=1)],
                       {"x": (5, 3)}, {"w": rand(4, 5, seed=2), "c": rand(4, seed=3)}),
    "transpose-squeeze": ([_t("x", "t", (2, 0, 1)), helper.make_node("Squeeze", ["t", "ax"], ["y"])],
                          {"x": (3, 4, 1)}, {"ax": i64(0)}),
    "transpose-batchnorm": ([_t("x", "t", (0, 3, 1, 2)),
                             helper.make_node("BatchNormalization", ["t", "g", "bb", "m", "v"], ["y"])],
                            {"x": (1, 4, 4, 3)},
                            {"g": pos(3, seed=2), "bb": rand(3, seed=3), "m": rand(3, seed=4), "v": pos(3, seed=5)}),
    "transpose-maxpool-1d": ([_t("x", "t", (0, 2, 1)),
                              helper.make_node("MaxPool", ["t"], ["y"], kernel_shape=[3], strides=[2])],
                             {"x": (2, 9, 3)}, {}),
    "transpose-conv-1d": ([_t("x", "t", (0, 2, 1)), helper.make_node("Conv", ["t", "w"], ["y"], pads=[1, 1])],
                          {"x": (2, 9, 3)}, {"w": rand(4, 3, 3, seed=2)}),
    "transpose-softmax11": ([_t("x", "t", (0, 2, 1)), helper.make_node("Softmax", ["t"], ["y"], axis=1)],
                            {"x": (2, 5, 3)}, {}),
    "transpose-softmax13-middle": ([_t("x", "t", (2, 0, 1)), helper.make_node("Softmax", ["t"], ["y"], axis=1)],
                                   {"x": (2, 5, 3)}, {}),
    "transpose-layernorm-2": ([_t("x", "t", (0, 2, 1)),
                               helper.make_node("LayerNormalization", ["t", "g"], ["y"], axis=-2)],
                              {"x": (2, 6, 3)}, {"g": pos(3, 6, seed=2)}),
    "transpose-pow": ([_t("x", "t", (1, 0)), helper.make_node("Pow", ["t", "e"], ["y"])],
                      {"x": (4, 3)}, {"e": f32(2.0)}),
    "heads-split": ([helper.make_node("Reshape", ["x", "s"], ["r"]), _t("r", "t", (0, 2, 1, 3)),
                     helper.make_node("MatMul", ["t", "w"], ["m"]), _t("m", "u", (0, 2, 1, 3)),
                     helper.make_node("Reshape", ["u", "s2"], ["y"])],
                    {"x": (1, 6, 8)}, {"s": i64(1, 6, 2, 4), "w": rand(4, 4, seed=2), "s2": i64(1, 6, 8)}),
}


@pytest.mark.parametrize("case", STRIDED)
def test_strided_views(case):
    nodes, inputs, inits = STRIDED[case]
    check(make_model(nodes, inputs, ["y"], inits, 17))


# --- graph structure ------------------------------------------------------------------------------

def test_output_is_transpose_of_input():
    check(make_model([_t("x", "y", (0, 2, 3, 1))], {"x": (2, 3, 4, 5)}, ["y"]))


def test_output_is_reshape_of_input():
    node = helper.make_node("Reshape", ["x", "s"], ["y"])
    check(make_model([node], {"x": (2, 3, 4, 5)}, ["y"], {"s": i64(6, -1)}))


def test_output_is_identity_of_input():
    check(node_model("Identity", [("x", (2, 3, 4))]))


def test_identity_last_node():
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Identity", ["r"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 4)}, ["y"]))


def test_one_value_two_outputs():
    """One node's output is a graph output and, through Identity, a second one."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Identity", ["r"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 4)}, ["r", "y"]))


def test_same_value_listed_twice():
    """One node's output named twice among the graph outputs."""
    model = make_model([helper.make_node("Relu", ["x"], ["r"])], {"x": (2, 3, 4)}, [("r", [2, 3, 4])] * 2)
    check(model)


def test_two_views_as_outputs():
    """A transpose and a reshape of one value, both graph outputs."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), _t("r", "y1", (1, 0)),
             helper.make_node("Reshape", ["r", "s"], ["y2"])]
    check(make_model(nodes, {"x": (2, 3)}, ["y1", "y2"], {"s": i64(-1)}))


def test_output_also_consumed():
    """A graph output that later nodes read too."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 4), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Sigmoid", ["r"], ["s"])]
    check(make_model(nodes, {"x": (1, 2, 5, 5)}, ["s", "c", "r"], {"w": rand(3, 2, 3, 3, seed=2)}))


def test_softmax_output_also_concatenated():
    """Softmax (written in place over several instructions) is a graph output and a concat input."""
    nodes = [helper.make_node("Softmax", ["x"], ["s"]), helper.make_node("Concat", ["s", "x"], ["y"], axis=0)]
    check(make_model(nodes, {"x": (2, 3)}, ["y", "s"]))


def test_input_is_output():
    """A graph input returned as it is, next to a computed output."""
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    check(make_model(nodes, {"x": (2, 3)}, ["y", ("x", [2, 3])]))


@pytest.mark.parametrize("order", ["unused-first", "unused-last"])
def test_unused_input(order):
    inputs = {"unused": (3, 2), "x": (2, 3, 4)} if order == "unused-first" else {"x": (2, 3, 4), "unused": (3, 2)}
    check(make_model([helper.make_node("Relu", ["x"], ["y"])], inputs, ["y"]))


def test_initializers_listed_as_inputs():
    """Weights also declared as graph inputs (keep_initializers_as_inputs=True exports)."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1] * 4)]
    model = make_model(nodes, {"x": (1, 2, 5, 5), "w": (3, 2, 3, 3), "b": (3,)}, ["y"],
                       {"w": rand(3, 2, 3, 3, seed=2), "b": rand(3, seed=3)})
    check(model)


def test_dead_branch():
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Exp", ["x"], ["dead"])]
    check(make_model(nodes, {"x": (2, 3, 4)}, ["y"]))


def test_constant_output():
    """An output computed from initializers only (folded at import), next to a computed one."""
    nodes = [helper.make_node("Add", ["p", "q"], ["c"]), helper.make_node("Mul", ["x", "c"], ["y"])]
    check(make_model(nodes, {"x": (2, 3)}, ["c", "y"], {"p": rand(2, 3, seed=2), "q": rand(3, seed=3)}))


def test_constant_nodes():
    """Constant nodes (as PyTorch exports them) for Clip bounds, a Pow exponent and a Reshape target."""
    def const(name, value):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value))
    nodes = [const("lo", f32(0.0)), const("hi", f32(6.0)), const("two", f32(2.0)), const("shape", i64(0, -1)),
             helper.make_node("Clip", ["x", "lo", "hi"], ["c"]), helper.make_node("Pow", ["c", "two"], ["p"]),
             helper.make_node("Reshape", ["p", "shape"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 4)}, ["y"]), scale=4.0)


def test_constant_subgraph_folded():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as PyTorch exports a flatten."""
    nodes = [helper.make_node("Shape", ["x"], ["shp"]), helper.make_node("Gather", ["shp", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 4)}, [("y", [2, 12])], {"zero": np.array(0, np.int64), "ax": i64(0),
                                                       "minus1": i64(-1)}))


# --- chains (fusion passes) ---------------------------------------------------------------------------

def test_elementwise_chain():
    """Several maps in a row, with broadcasts and constants: one fused map."""
    nodes = [helper.make_node("Mul", ["x", "two"], ["a"]), helper.make_node("Add", ["a", "bias"], ["b"]),
             helper.make_node("Sub", ["b", "z"], ["c"]), helper.make_node("Relu", ["c"], ["d"]),
             helper.make_node("Div", ["d", "three"], ["e"]), helper.make_node("Sigmoid", ["e"], ["f"]),
             helper.make_node("Mul", ["f", "x"], ["y"])]
    inits = {"two": f32(2.0), "bias": rand(3, 1, seed=2), "three": f32(3.0)}
    check(make_model(nodes, {"x": (2, 3, 5), "z": (5,)}, ["y"], inits))


def test_gelu_chain():
    """x * 0.5 * (1 + erf(x / sqrt 2)), as PyTorch exports GELU: x is read by two maps."""
    nodes = [helper.make_node("Div", ["x", "sqrt2"], ["a"]), helper.make_node("Erf", ["a"], ["b"]),
             helper.make_node("Add", ["b", "one"], ["c"]), helper.make_node("Mul", ["x", "c"], ["d"]),
             helper.make_node("Mul", ["d", "half"], ["y"])]
    inits = {"sqrt2": f32(np.sqrt(2.0)), "one": f32(1.0), "half": f32(0.5)}
    check(make_model(nodes, {"x": (2, 8, 16)}, ["y"], inits), scale=2.0)


def test_chain_intermediate_read_twice():
    """A map result read twice by the next map (x*x pattern on an intermediate)."""
    nodes = [helper.make_node("Add", ["x", "one"], ["a"]), helper.make_node("Mul", ["a", "a"], ["b"]),
             helper.make_node("Sqrt", ["b"], ["y"])]
    check(make_model(nodes, {"x": (3, 7)}, ["y"], {"one": f32(1.0)}))


def test_chain_through_reshape():
    """Map, reshape, map: the fusion must see through the reshape, not through a broadcast."""
    nodes = [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Reshape", ["a", "s"], ["r"]),
             helper.make_node("Mul", ["r", "z"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    inits = {"b": rand(3, 1, 1, seed=2), "s": i64(2, -1)}
    check(make_model(nodes, {"x": (2, 3, 4, 5), "z": (2, 60)}, ["y"], inits))


def test_chain_into_transpose():
    """A map whose result is read through a transpose by the next map."""
    nodes = [helper.make_node("Mul", ["x", "k"], ["a"]), _t("a", "t", (0, 2, 1)),
             helper.make_node("Add", ["t", "z"], ["s"]), helper.make_node("Tanh", ["s"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 4), "z": (4, 3)}, ["y"], {"k": f32(0.5)}))


@pytest.mark.parametrize("divide", ["Div", "Pow-1"])
@pytest.mark.parametrize("producer", ["gemm-alpha", "gemm-alpha-beta0", "layernorm-no-bias", "layernorm-bias"])
def test_fused_divisor(producer, divide):
    """A Gemm epilogue or LayerNormalization map fused into a divisor: the expression must stay grouped
    (z / (0.5 * acc), not z / 0.5 * acc). The producers' outputs are kept away from zero."""
    rng = np.random.default_rng(3)
    if producer.startswith("gemm"):
        extra = dict(beta=0.0) if producer.endswith("beta0") else {}
        node = helper.make_node("Gemm", ["x", "w"] + (["c"] if extra else []), ["p"], alpha=0.5, **extra)
        inits, shape = {"w": pos(5, 4, seed=2), "c": pos(4, seed=3)}, (3, 4)
        x = rng.uniform(0.5, 1.5, (3, 5))
    else:
        bias = ["b"] if producer == "layernorm-bias" else []
        node = helper.make_node("LayerNormalization", ["x", "s"] + bias, ["p"], axis=-1)
        inits, shape = {"s": pos(8, seed=2), "b": np.full(8, 0.25, np.float32)}, (2, 3, 8)
        signs = np.array([rng.permutation([1.0, -1.0] * 4) for _ in range(6)]).reshape(shape)
        x = rng.standard_normal((2, 3, 1)) + rng.uniform(0.5, 2.0, (2, 3, 1)) * signs  # normalizes to +-1
        inits = {k: v for k, v in inits.items() if k != "b" or bias}
    if divide == "Div":
        last, inputs = helper.make_node("Div", ["z", "p"], ["y"]), {"x": x.shape, "z": shape}
    else:
        last, inputs = helper.make_node("Pow", ["p", "e"], ["y"]), {"x": x.shape}
        inits["e"] = f32(-1.0)
    model = make_model([node, last], inputs, ["y"], inits, 17)
    feeds = {"x": x.astype(np.float32), "z": rand(*shape, seed=4)}
    check(model, feeds={k: v for k, v in feeds.items() if k in inputs})


def _conv_bn(x: str, out: str, cin: int, cout: int, seed: int, inits: dict, bias: bool = True, **attrs):
    inits[f"{out}_w"] = rand(cout, cin // attrs.get("group", 1), 3, 3, seed=seed, scale=0.5)
    conv_in = [x, f"{out}_w"]
    if bias:
        inits[f"{out}_b"] = rand(cout, seed=seed + 1)
        conv_in.append(f"{out}_b")
    for i, (k, v) in enumerate([("g", pos(cout, seed=seed + 2)), ("bb", rand(cout, seed=seed + 3)),
                                ("m", rand(cout, seed=seed + 4)), ("v", pos(cout, seed=seed + 5))]):
        inits[f"{out}_{k}"] = v
    return [helper.make_node("Conv", conv_in, [f"{out}_c"], pads=[1] * 4, **attrs),
            helper.make_node("BatchNormalization", [f"{out}_c"] + [f"{out}_{k}" for k in ("g", "bb", "m", "v")],
                             [out])]


@pytest.mark.parametrize("act", ["relu", "relu6", "none"])
def test_conv_bn_act(act):
    inits: dict = {}
    nodes = _conv_bn("x", "bn", 3, 4, 2, inits)
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["bn"], ["y"]))
    elif act == "relu6":
        inits.update(lo=f32(0.0), hi=f32(6.0))
        nodes.append(helper.make_node("Clip", ["bn", "lo", "hi"], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", ["bn"], ["y"]))
    check(make_model(nodes, {"x": (1, 3, 7, 7)}, ["y"], inits), scale=2.0)


def test_depthwise_bn_relu_residual():
    """Depthwise conv without bias, BN, residual Add, Relu (MobileNet block tail)."""
    inits: dict = {}
    nodes = _conv_bn("x", "bn", 4, 4, 2, inits, bias=False, group=4)
    nodes += [helper.make_node("Add", ["bn", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    check(make_model(nodes, {"x": (1, 4, 6, 6)}, ["y"], inits))


def test_conv1d_bn_relu():
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1], strides=[2]),
             helper.make_node("BatchNormalization", ["c", "g", "bb", "m", "v"], ["n"]),
             helper.make_node("Relu", ["n"], ["y"])]
    inits = {"w": rand(4, 3, 3, seed=2), "b": rand(4, seed=3), "g": pos(4, seed=4), "bb": rand(4, seed=5),
             "m": rand(4, seed=6), "v": pos(4, seed=7)}
    check(make_model(nodes, {"x": (2, 3, 11)}, ["y"], inits))


def test_conv_scale_shift_residual():
    """Conv, then per-channel Mul and Add constants and a residual Add of a run-time input."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 4), helper.make_node("Mul", ["c", "k"], ["m"]),
             helper.make_node("Add", ["m", "s"], ["a"]), helper.make_node("Add", ["a", "x"], ["y"])]
    inits = {"w": rand(3, 3, 3, 3, seed=2), "k": pos(3, 1, 1, seed=3), "s": rand(3, 1, 1, seed=4)}
    check(make_model(nodes, {"x": (1, 3, 5, 5)}, ["y"], inits))


def test_matmul_residual():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "x"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 4)}, ["y"], {"w": rand(4, 4, seed=2)}))


def test_matmul_bias_relu():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 5)}, ["y"], {"w": rand(5, 4, seed=2), "b": rand(4, seed=3)}))


def test_gemm_relu():
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1), helper.make_node("Relu", ["g"], ["y"])]
    check(make_model(nodes, {"x": (2, 6)}, ["y"], {"w": rand(5, 6, seed=2), "b": rand(5, seed=3)}))


@pytest.mark.parametrize("tail", ["output", "relu"])
def test_concat_of_convs(tail):
    """Conv outputs concatenated along channels: the convs can write straight into the slices."""
    inits = {"w1": rand(2, 3, 3, 3, seed=2), "b1": rand(2, seed=3), "w2": rand(3, 3, 1, 1, seed=4),
             "w3": rand(1, 3, 3, 3, seed=5), "b3": rand(1, seed=6)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1] * 4),
             helper.make_node("Conv", ["x", "w2"], ["c2"]),
             helper.make_node("Conv", ["x", "w3", "b3"], ["c3"], pads=[1] * 4),
             helper.make_node("Relu", ["c3"], ["r3"]),
             helper.make_node("Concat", ["c1", "c2", "r3"], ["cat" if tail == "relu" else "y"], axis=1)]
    if tail == "relu":
        nodes.append(helper.make_node("Relu", ["cat"], ["y"]))
    check(make_model(nodes, {"x": (1, 3, 6, 6)}, ["y"], inits))


def test_concat_of_convs_batch2():
    """Channel slices of a batch-2 tensor are not contiguous: the convs write strided slices, or copy."""
    inits = {"w1": rand(2, 3, 3, 3, seed=2), "w2": rand(3, 3, 1, 1, seed=4)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1] * 4),
             helper.make_node("Conv", ["x", "w2"], ["c2"]),
             helper.make_node("Concat", ["c1", "c2"], ["y"], axis=1)]
    check(make_model(nodes, {"x": (2, 3, 4, 4)}, ["y"], inits))


def test_concat_of_convs_reused():
    """A conv output read by the concat and by a later node."""
    inits = {"w1": rand(2, 3, 3, 3, seed=2), "w2": rand(3, 3, 1, 1, seed=4)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1] * 4),
             helper.make_node("Conv", ["x", "w2"], ["c2"]),
             helper.make_node("Concat", ["c1", "c2", "c1"], ["cat"], axis=1),
             helper.make_node("Relu", ["c1"], ["r"]), helper.make_node("Conv", ["cat", "w3"], ["m"]),
             helper.make_node("Add", ["m", "r"], ["y"])]
    inits["w3"] = rand(2, 7, 1, 1, seed=5)
    check(make_model(nodes, {"x": (1, 3, 4, 4)}, ["y"], inits))


def test_concat_of_gemms():
    """Gemm outputs (with bias epilogues) stacked on axis 0: contiguous slices."""
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["g1"], transB=1),
             helper.make_node("Gemm", ["x", "w2", "b2"], ["g2"], transB=1, alpha=0.5),
             helper.make_node("Concat", ["g1", "g2"], ["y"], axis=0)]
    inits = {"w1": rand(4, 5, seed=2), "b1": rand(4, seed=3), "w2": rand(4, 5, seed=4), "b2": rand(1, 4, seed=5)}
    check(make_model(nodes, {"x": (3, 5)}, ["y"], inits))


def test_concat_of_convs_last_axis():
    """Concat along width (slices not contiguous), one conv output used twice."""
    inits = {"w1": rand(2, 3, 3, 3, seed=2), "w2": rand(2, 3, 1, 1, seed=4)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1] * 4),
             helper.make_node("Conv", ["x", "w2"], ["c2"]),
             helper.make_node("Concat", ["c1", "c2", "c1"], ["y"], axis=-1)]
    check(make_model(nodes, {"x": (1, 3, 4, 5)}, ["y"], inits))


def test_attention():
    """softmax(q k^T / sqrt d) v with q, k, v from one input."""
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"]), helper.make_node("MatMul", ["x", "wk"], ["k"]),
             helper.make_node("MatMul", ["x", "wv"], ["v"]), _t("k", "kt", (0, 2, 1)),
             helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Div", ["s", "d"], ["sd"]),
             helper.make_node("Softmax", ["sd"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
    inits = {"wq": rand(8, 8, seed=2), "wk": rand(8, 8, seed=3), "wv": rand(8, 8, seed=4), "d": f32(np.sqrt(8.0))}
    check(make_model(nodes, {"x": (2, 5, 8)}, ["y"], inits))


@pytest.mark.parametrize("opset", [11, 17, 21])
def test_small_cnn(opset):
    """Conv-Relu-MaxPool-Flatten-Gemm at the ends of the supported opset range."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1] * 4), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]), helper.make_node("Gemm", ["f", "fc", "fb"], ["y"], transB=1)]
    inits = {"w": rand(4, 2, 3, 3, seed=2), "b": rand(4, seed=3), "fc": rand(3, 36, seed=4), "fb": rand(3, seed=5)}
    check(make_model(nodes, {"x": (2, 2, 6, 6)}, ["y"], inits, opset))


@pytest.mark.parametrize("exponent", [np.array(2, np.int64), np.array([3, 1, 2], np.int32)], ids=["int64-2", "int32-vector"])
def test_pow_with_integer_exponent(exponent):
    check(node_model("Pow", [("x", (2, 3)), ("e", exponent)]), positive=True)


def test_unused_extra_outputs_are_fine():
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "idx"], kernel_shape=[2, 2]),
             helper.make_node("LayerNormalization", ["p", "g"], ["y", "mean", "rstd"], axis=-1)]
    check(make_model(nodes, {"x": (1, 2, 4, 4)}, ["y"], {"g": pos(3)}, opset=17))


def test_used_extra_output_is_refused():
    from cglow import CglowError
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "running_mean"]),
             helper.make_node("Add", ["y", "running_mean"], ["z"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])],
                              initializer=[numpy_helper.from_array(pos(3), n) for n in "sbmv"])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(CglowError, match="output 1 \\('running_mean'\\) is not supported"):
        cglow_run(model, feeds_for(model))


def test_layernorm_statistics_outputs():
    nodes = [helper.make_node("LayerNormalization", ["x", "g"], ["y", "mean", "rstd"], axis=-2)]
    check(make_model(nodes, {"x": (2, 3, 4)}, ["y", "mean", "rstd"], {"g": pos(3, 4)}, opset=17))


def test_batchnorm_with_run_time_parameters():
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)
    model = make_model([node], {"x": (2, 3, 4, 4), "s": (3,), "b": (3,), "m": (3,), "v": (3,)}, ["y"])
    feeds = feeds_for(model)
    feeds["v"] = np.abs(feeds["v"]) + 0.5
    check(model, feeds=feeds)
