"""Per-operator conformance of the neural-network ops: Conv, pooling, Gemm and MatMul, BatchNormalization,
Softmax and LayerNormalization, single-node (or tiny) ONNX models compiled by cglow and run as C, compared
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
from onnx import helper

import cglow
from cglow.options import Options

from tests.onnx_ops import TOL, check, f32, ids, make_model, node_model, pos, rand
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


def test_layernorm_statistics_outputs():
    nodes = [helper.make_node("LayerNormalization", ["x", "g"], ["y", "mean", "rstd"], axis=-2)]
    check(make_model(nodes, {"x": (2, 3, 4)}, ["y", "mean", "rstd"], {"g": pos(3, 4)}, opset=17))


def test_batchnorm_with_run_time_parameters():
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)
    model = make_model([node], {"x": (2, 3, 4, 4), "s": (3,), "b": (3,), "m": (3,), "v": (3,)}, ["y"])
    feeds = feeds_for(model)
    feeds["v"] = np.abs(feeds["v"]) + 0.5
    check(model, feeds=feeds)
