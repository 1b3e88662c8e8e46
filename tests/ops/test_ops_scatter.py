"""The ops that write elements by index, one Scatter primitive each (lower/ops/scatter.py), against onnxruntime
(the ONNX reference evaluator where onnxruntime has no kernel): ScatterElements and Scatter, ScatterND,
TensorScatter, MaxUnpool and Col2Im."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from tests.onnx_ops import i64
from tests.ops.test_ops_tensor import Const, check_model, data, model_of
from tests.util import cglow_run, checked_model

REDUCTIONS = ["none", "add", "mul", "max", "min"]


def small(*shape, dtype=np.float32, seed: int = 0) -> np.ndarray:
    """Small whole numbers: sums and products of them are exact in any order, as onnxruntime's may differ."""
    return np.random.default_rng(seed).integers(-3, 4, shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.uint8], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_elements_reductions_with_repeated_indices(reduction, dtype):
    indices = np.array([[[1, -1, 0], [2, 2, 2]], [[0, 0, -3], [1, 1, 0]]], np.int64)  # repeats, negatives
    ins = [("x", small(2, 3, 3, dtype=dtype) % 4), ("i", indices), ("u", small(2, 2, 3, dtype=dtype, seed=1) % 4)]
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction=reduction)
    if reduction == "none":  # repeated places keep an unspecified one of their updates: only distinct ones here
        ins[1] = ("i", np.array([[[1, -1, 0], [2, 0, 2]], [[0, 2, -3], [1, 1, 0]]], np.int64))
    check_model(model_of([node], ins, opset=18), ins)


@pytest.mark.parametrize("at", [0, 1, -1])
def test_scatter_elements_axes_and_int32_indices(at):
    shape = (3, 4, 5)
    order = np.argsort(np.random.default_rng(2).random(shape), axis=at)  # distinct places along the axis
    indices = np.take(order, [0, 2], axis=at).astype(np.int32) - 1  # and one negative index
    ins = [("x", data(*shape)), ("i", indices), ("u", data(*indices.shape, seed=3))]
    check_model(model_of([helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=at)], ins), ins)


def test_scatter_elements_more_updates_than_places():
    """Along the axis, indices may be longer than the data: repeated places, combined."""
    ins = [("x", small(2, 3)), ("i", i64(0, 2, 2, -1, 1, 1, 1, 0, 0, 2).reshape(2, 5)), ("u", small(2, 5, seed=1))]
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="add")
    check_model(model_of([node], ins, opset=18), ins)


def test_scatter_opset_10_and_bool():
    ins = [("x", data(3, 3, dtype=np.bool_)), ("i", i64(1, 0, 2, 0, 2, 1).reshape(2, 3)),
           ("u", data(2, 3, dtype=np.bool_, seed=1))]
    check_model(model_of([helper.make_node("Scatter", ["x", "i", "u"], ["y"])], ins, opset=10), ins)


def test_scatter_elements_out_of_range_index_is_skipped():
    """ONNX leaves an index out of range undefined; the C skips its update rather than write past the tensor."""
    x, u = data(1, 5), data(1, 2, seed=1)
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1)
    model = model_of([node], [("x", x), ("i", i64(1, 7).reshape(1, 2)), ("u", u)])
    (got,) = cglow_run(model, {"x": x, "i": i64(1, 7).reshape(1, 2), "u": u})
    want = x.copy()
    want[0, 1] = u[0, 0]
    np.testing.assert_array_equal(got, want)


def test_scatter_written_into_a_concat_through_a_transpose():
    """Passes move a scatter's output (instr/passes.py): its places follow the view it is given."""
    nodes = [helper.make_node("ScatterElements", ["x", "i", "u"], ["s"], axis=0, reduction="add"),
             helper.make_node("Transpose", ["s"], ["t"], perm=[1, 0]),
             helper.make_node("Concat", ["t", "z"], ["y"], axis=0)]
    ins = [("x", small(3, 4)), ("i", i64(2, 0, 1, 2, 2, 2, 0, 0).reshape(2, 4)), ("u", small(2, 4, seed=1)),
           ("z", small(2, 3, seed=2))]
    check_model(model_of(nodes, ins, opset=18), ins)


SCATTER_ND = [  # id, data shape, indices, updates shape
    ("rows", (4, 3, 2), i64(2, 0).reshape(2, 1), (2, 3, 2)),
    ("slices", (4, 3, 2), i64(1, 2, -1, 0, 0, 1).reshape(3, 2), (3, 2)),
    ("elements", (2, 3), i64(0, 1, 1, -1, 1, 0).reshape(3, 2), (3,)),
    ("batched", (5, 4), i64(4, 1, 0, 3).reshape(2, 2, 1), (2, 2, 4)),
]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", SCATTER_ND, ids=[c[0] for c in SCATTER_ND])
def test_scatter_nd(case, reduction):
    _, shape, indices, updates = case
    ins = [("x", small(*shape, dtype=np.int64)), ("i", indices), ("u", small(*updates, dtype=np.int64, seed=1))]
    check_model(model_of([helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)], ins,
                         opset=18), ins)


@pytest.mark.parametrize("mode, starts, seq", [("linear", i64(0, 3), 2), ("circular", i64(4, 1), 3),
                                               ("linear", None, 3)])
def test_tensor_scatter(mode, starts, seq):
    cache, update = data(2, 3, 5, 4), data(2, 3, seq, 4, seed=1)
    ins = [("past", cache), ("update", update), ("w", starts)]
    node = helper.make_node("TensorScatter", ["past", "update", "w" if starts is not None else ""], ["y"], mode=mode)
    check_model(model_of([node], ins, opset=24), ins)


@pytest.mark.parametrize("output_shape", [None, (1, 2, 7, 10)])
def test_max_unpool_undoes_max_pool(output_shape):
    """The indices count in the unpooled shape, which sits at the start of each dim of a larger output_shape: as
    onnx's reference and its conformance case have it (onnxruntime counts them in output_shape instead)."""
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 3], strides=[2, 3]),
             helper.make_node("MaxUnpool", ["p", "i"] + (["s"] if output_shape else []), ["y"],
                              kernel_shape=[2, 3], strides=[2, 3])]
    x = data(1, 2, 6, 9)
    graph = helper.make_graph(nodes, "unpool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, output_shape or x.shape)],
                              [numpy_helper.from_array(i64(*output_shape), "s")] if output_shape else [])
    model = checked_model(graph, 11)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    (got,) = cglow_run(model, {"x": x})
    np.testing.assert_array_equal(got, want)
    assert np.count_nonzero(got) == x.size // 6


COL2IM = [  # id, input shape, image, block, attributes
    ("2d-all", (2, 3 * 6, 9), (5, 6), (2, 3), dict(pads=[1, 0, 0, 1], strides=[2, 1], dilations=[1, 2])),
    ("3d", (1, 2 * 8, 8), (3, 3, 4), (2, 2, 2), dict(strides=[1, 1, 2])),
    ("1d-pads", (1, 2 * 3, 6), (6,), (3,), dict(pads=[1, 1])),
]


@pytest.mark.parametrize("case", COL2IM, ids=[c[0] for c in COL2IM])
def test_col2im(case):
    _, shape, image, block, attrs = case
    ins = [("x", small(*shape)), ("image", Const(i64(*image))), ("block", Const(i64(*block)))]
    check_model(model_of([helper.make_node("Col2Im", ["x", "image", "block"], ["y"], **attrs)], ins, opset=18), ins)
