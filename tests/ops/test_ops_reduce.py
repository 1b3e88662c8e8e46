"""Reductions and the ops lowered onto them, as single-node models against onnxruntime: Reduce*, ArgMax,
ArgMin, LogSoftmax, Hardmax, GlobalMaxPool, LpNormalization, InstanceNormalization, LRN, CumSum, TopK.
Float outputs within TOL (tests/ops/test_ops_nn.py), integer outputs exact."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from tests.onnx_ops import TOL, check, i64, ids, make_model, node_model, pos, rand
from tests.util import cglow_run, checked_model, ort_run, rel_error

REDUCE = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum")
AXES_INPUT_SINCE = {"ReduceSum": 13}  # the others take axes as an input from opset 18


def typed_model(op: str, x: tuple[int, ...], dtype=np.float32, inits=(), opset: int = 18, outputs=("y",),
                **attrs) -> onnx.ModelProto:
    """One node over the graph input x (a shape, of `dtype`) and initializers (name, array; a None array is
    an omitted input); output types and shapes come from ONNX shape inference."""
    node = helper.make_node(op, ["x"] + [n if a is not None else "" for n, a in inits], list(outputs), **attrs)
    graph = helper.make_graph(
        [node], "test", [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), x)],
        [helper.make_value_info(o, onnx.TypeProto()) for o in outputs],
        initializer=[numpy_helper.from_array(a, n) for n, a in inits if a is not None])
    return checked_model(graph, opset)


def ints(shape, dtype, low: int = -5, high: int = 6, seed: int = 0) -> np.ndarray:
    low = max(low, 0) if np.dtype(dtype).kind in "ub" else low
    high = min(high, 2) if np.dtype(dtype) == np.bool_ else high
    return np.random.default_rng(seed).integers(low, high, shape).astype(dtype)


def check_typed(model: onnx.ModelProto, x: np.ndarray) -> None:
    """check() with the input x: exact for an integer input."""
    check(model, tol=TOL if x.dtype == np.float32 else 0.0, feeds={"x": x})


def reduce_model(op: str, shape, axes, opset: int, dtype=np.float32, **attrs) -> onnx.ModelProto:
    """axes: a list (attribute or input by opset), or None for none given."""
    if opset >= AXES_INPUT_SINCE.get(op, 18):
        return typed_model(op, shape, dtype, [("axes", None if axes is None else np.array(axes, np.int64))],
                           opset, **attrs)
    return typed_model(op, shape, dtype, opset=opset, **({} if axes is None else dict(axes=axes)), **attrs)


def reduce_input(op: str, shape) -> np.ndarray:
    """Positive for the logarithm of a sum, magnitudes near 1 for a product, standard normal otherwise."""
    if op == "ReduceLogSum":
        return pos(*shape, seed=4)
    if op == "ReduceProd":
        return pos(*shape, seed=4) * np.sign(rand(*shape, seed=5))
    return rand(*shape, seed=4)


REDUCE_CASES = [  # id, shape, axes, keepdims, opset, extra attributes
    ("attr-axis1-keepdims", (2, 3, 4), [1], 1, 11, {}),
    ("attr-negative-axis", (2, 3, 4), [-1], 0, 11, {}),
    ("attr-two-axes", (2, 3, 4, 5), [0, 2], 0, 11, {}),
    ("attr-all-axes", (2, 3, 4), None, 1, 11, {}),
    ("opset13-all-axes-scalar", (2, 3, 4), None, 0, 13, {}),
    ("input-axes-keepdims", (2, 3, 4, 5), [0, 2], 1, 18, {}),
    ("input-axes-unsorted", (2, 3, 4, 5), [3, -3], 0, 18, {}),
    ("input-empty-axes-all", (2, 3, 4), [], 1, 18, {}),
    ("input-no-axes-all", (3, 5), None, 0, 18, {}),
    ("noop-empty-axes", (2, 3, 4), [], 1, 18, dict(noop_with_empty_axes=1)),
    ("noop-with-axes", (2, 3, 4), [0, 1], 0, 18, dict(noop_with_empty_axes=1)),
]


@pytest.mark.parametrize("case", REDUCE_CASES, ids=ids(REDUCE_CASES))
@pytest.mark.parametrize("op", REDUCE)
def test_reduce(op, case):
    _, shape, axes, keepdims, opset, attrs = case
    check_typed(reduce_model(op, shape, axes, opset, keepdims=keepdims, **attrs), reduce_input(op, shape))


def test_reduce_log_sum_exp_large_inputs():
    """Inputs far beyond exp's range: the max subtraction keeps the result finite."""
    check_typed(reduce_model("ReduceLogSumExp", (2, 3, 8), [2], 18), rand(2, 3, 8, seed=4, scale=40.0))


def test_reduce_of_transpose():
    """A reduction reading a strided view."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
             helper.make_node("ReduceMax", ["t"], ["y"], axes=[0, 2], keepdims=0)]
    check(make_model(nodes, {"x": (2, 3, 4)}, ["y"]))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("op", REDUCE)
def test_reduce_integers(op, dtype):
    low = 1 if op == "ReduceLogSum" else -5
    check_typed(reduce_model(op, (2, 3, 4), [1], 18, dtype, keepdims=0), ints((2, 3, 4), dtype, low))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.bool_])
@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_reduce_max_min_small_types(op, dtype):
    check_typed(reduce_model(op, (3, 4), [1], 20, dtype), ints((3, 4), dtype))


def test_reduce_integer_logsumexp_truncates():
    """onnxruntime truncates each exponential and the logarithm to the integer type."""
    x = np.array([[1, 1, 0, 0, 0, 0, 0, 0], [-7, 0, 1, 0, -1, 0, 0, 0]], np.int32)
    check_typed(reduce_model("ReduceLogSumExp", (2, 8), [1], 18, np.int32), x)


# --- ArgMax, ArgMin ----------------------------------------------------------------------------------

ARG_CASES = [  # id, shape, dtype, opset, attributes
    ("default-axis", (3, 4), np.float32, 13, {}),
    ("axis1-no-keepdims", (2, 3, 4), np.float32, 13, dict(axis=1, keepdims=0)),
    ("negative-axis", (2, 3, 4), np.float32, 13, dict(axis=-1)),
    ("opset11", (2, 3, 4), np.float32, 11, dict(axis=2, keepdims=0)),
    ("ties-first", (4, 6), np.int32, 13, dict(axis=1)),
    ("ties-last", (4, 6), np.int32, 13, dict(axis=1, select_last_index=1)),
    ("ties-last-axis0", (6, 4), np.int64, 12, dict(axis=0, keepdims=0, select_last_index=1)),
    ("uint8", (3, 5), np.uint8, 13, dict(axis=-1)),
    ("int8-ties-last", (3, 5), np.int8, 13, dict(axis=1, select_last_index=1)),
]


@pytest.mark.parametrize("case", ARG_CASES, ids=ids(ARG_CASES))
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg(op, case):
    _, shape, dtype, opset, attrs = case
    x = rand(*shape, seed=4) if dtype == np.float32 else ints(shape, dtype, -2, 3)
    check_typed(typed_model(op, shape, dtype, opset=opset, **attrs), x)


def test_arg_float_ties():
    x = np.round(rand(4, 6, seed=4)).astype(np.float32)
    for last in (0, 1):
        check_typed(typed_model("ArgMax", (4, 6), opset=13, axis=1, select_last_index=last), x)


# --- LogSoftmax, Hardmax -----------------------------------------------------------------------------

ROWS = [  # id, shape, axis (None: the default), opset
    ("opset11-default", (2, 3, 4), None, 11),
    ("opset11-axis0", (2, 3, 4), 0, 11),
    ("opset11-axis2-4d", (2, 3, 4, 5), 2, 11),
    ("opset13-default", (2, 3, 4), None, 13),
    ("opset13-axis0", (2, 3, 4), 0, 13),
    ("opset13-axis1-4d", (2, 3, 4, 5), 1, 13),
    ("opset13-axis-2", (2, 3, 4, 5), -2, 13),
]


@pytest.mark.parametrize("case", ROWS, ids=ids(ROWS))
@pytest.mark.parametrize("op", ["LogSoftmax", "Hardmax"])
def test_softmax_family(op, case):
    _, shape, at, opset = case
    attrs = {} if at is None else dict(axis=at)
    check(node_model(op, [("x", shape)], opset=opset, **attrs), scale=3.0)


def test_log_softmax_large_inputs():
    check(node_model("LogSoftmax", [("x", (2, 3, 16))]), scale=40.0)


@pytest.mark.parametrize("opset", [11, 13])
def test_hardmax_ties_first(opset):
    x = np.round(rand(3, 4, 5, seed=4)).astype(np.float32)
    check(node_model("Hardmax", [("x", (3, 4, 5))], opset=opset, axis=1), feeds={"x": x})


# --- GlobalMaxPool, LpNormalization, InstanceNormalization, LRN --------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (2, 4, 9), (1, 3, 1, 1)], ids=["2d", "1d", "1x1"])
def test_global_max_pool(shape):
    check(node_model("GlobalMaxPool", [("x", shape)]))


@pytest.mark.parametrize("at", [-1, 0, 1])
@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization(p, at):
    x = rand(3, 4, 5, seed=4)
    x[1] = 0.0  # norms of zero along every axis give zeros
    check(node_model("LpNormalization", [("x", (3, 4, 5))], p=p, axis=at), feeds={"x": x})


def test_lp_normalization_defaults():
    check(node_model("LpNormalization", [("x", (3, 4, 5))]))


@pytest.mark.parametrize("shape,eps", [((2, 3, 4, 5), 1e-5), ((2, 3, 7), 1e-2), ((1, 2, 3, 4, 2), 1e-5)],
                         ids=["2d", "1d-epsilon", "3d"])
def test_instance_normalization(shape, eps):
    ins = [("x", shape), ("scale", pos(shape[1], seed=2)), ("bias", rand(shape[1], seed=3))]
    feeds = {"x": (rand(*shape, seed=7) * 2 + 1.5).astype(np.float32)}  # non-zero mean
    check(node_model("InstanceNormalization", ins, epsilon=eps), feeds=feeds)


def test_instance_normalization_runtime_scale():
    ins = [("x", (2, 3, 4, 5)), ("scale", (3,)), ("bias", (3,))]
    check(node_model("InstanceNormalization", ins))


LRN = [  # id, attributes
    ("size1", dict(size=1)),
    ("size3-defaults", dict(size=3)),
    ("size5", dict(size=5, alpha=0.1, beta=0.75, bias=1.0)),
    ("size-over-channels", dict(size=9, alpha=0.3)),
]


@pytest.mark.parametrize("case", LRN, ids=ids(LRN))
def test_lrn(case):
    check(node_model("LRN", [("x", (2, 6, 3, 4))], **case[1]), scale=2.0)


@pytest.mark.parametrize("size", [2, 4])
def test_lrn_even_size(size):
    """onnxruntime takes odd sizes only (and the ONNX reference evaluator sums the wrong channels): against
    the spec's formula, the window of channel c being [c - (size - 1) // 2, c + size // 2]."""
    alpha, beta, bias = 0.01, 0.5, 2.0
    x = rand(2, 6, 3, 4, seed=4, scale=2.0)
    square = np.stack([np.sum(x[:, max(0, c - (size - 1) // 2):c + size // 2 + 1] ** 2, axis=1) for c in range(6)], 1)
    want = x / (bias + alpha / size * square) ** beta
    model = node_model("LRN", [("x", x.shape)], size=size, alpha=alpha, beta=beta, bias=bias)
    assert rel_error(cglow_run(model, {"x": x})[0], want) <= TOL


# --- CumSum ------------------------------------------------------------------------------------------

CUMSUM = [  # id, shape, axis, dtype, attributes
    ("axis0", (3, 4), 0, np.float32, {}),
    ("axis1", (3, 4), 1, np.float32, {}),
    ("1d-exclusive", (7,), 0, np.float32, dict(exclusive=1)),
    ("reverse", (2, 3, 4), 1, np.float32, dict(reverse=1)),
    ("reverse-exclusive", (2, 3, 4), -1, np.float32, dict(reverse=1, exclusive=1)),
    ("int32-axis-negative", (2, 3, 4), -3, np.int32, {}),
    ("int64-exclusive-reverse", (3, 5), 1, np.int64, dict(exclusive=1, reverse=1)),
]


@pytest.mark.parametrize("axis_type", [np.int32, np.int64])
@pytest.mark.parametrize("case", CUMSUM, ids=ids(CUMSUM))
def test_cumsum(case, axis_type):
    _, shape, at, dtype, attrs = case
    x = rand(*shape, seed=4) if dtype == np.float32 else ints(shape, dtype, -50, 50)
    check_typed(typed_model("CumSum", shape, dtype, [("axis", np.array(at, axis_type))], 14, **attrs), x)


# --- TopK --------------------------------------------------------------------------------------------

TOPK = [  # id, shape, k, dtype, attributes
    ("last-axis", (3, 5), 2, np.float32, {}),
    ("axis0", (5, 3), 3, np.float32, dict(axis=0)),
    ("smallest", (3, 5), 2, np.float32, dict(largest=0)),
    ("k-all-3d-middle", (2, 4, 3), 4, np.float32, dict(axis=1)),
    ("k1", (2, 4, 3), 1, np.float32, dict(axis=-3, largest=0)),
    ("int32-ties", (3, 8), 5, np.int32, {}),
    ("int64-ties-smallest", (8, 3), 6, np.int64, dict(axis=0, largest=0)),
]


@pytest.mark.parametrize("case", TOPK, ids=ids(TOPK))
def test_topk(case):
    _, shape, k, dtype, attrs = case
    x = rand(*shape, seed=4) if dtype == np.float32 else ints(shape, dtype, -2, 3)
    check_typed(typed_model("TopK", shape, dtype, [("k", i64(k))], 11, ("values", "indices"), **attrs), x)


def test_topk_float_ties():
    x = np.round(rand(3, 8, seed=4)).astype(np.float32)
    check_typed(typed_model("TopK", (3, 8), np.float32, [("k", i64(4))], 11, ("values", "indices")), x)


def test_topk_unsorted():
    """sorted=0 leaves the order unspecified (onnxruntime's is a heap's): the same elements, in any order."""
    model = typed_model("TopK", (3, 8), np.float32, [("k", i64(4))], 11, ("values", "indices"), sorted=0)
    x = rand(3, 8, seed=4)
    (values, indices), (want_values, want_indices) = cglow_run(model, {"x": x}), ort_run(model, {"x": x})
    assert np.array_equal(np.sort(indices), np.sort(want_indices))
    assert np.array_equal(np.sort(values), np.sort(want_values))
