"""The ops whose output length depends on the data: NonZero, Compress, Unique, NonMaxSuppression, against onnxruntime
on seeded data (none kept, all kept, some; onnx's reference evaluator takes Unique's unsorted slices along axis 0
whatever the axis, and refuses a NonMaxSuppression without iou_threshold). Their outputs come out at their capacity with a
run-time count (docs/c-api.md): the host model cuts them to the count; the padding after it must be zeros."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper
import pytest

import cglow
from cglow.errors import CglowError
from cglow.options import Options

from tests.util import checked_model, ort_run


def one_node(op: str, inputs: dict[str, np.ndarray], outputs=("y",), inits: dict | None = None, opset: int = 21,
             **attrs) -> onnx.ModelProto:
    """One node over graph inputs of the arrays' types and shapes (and initializers); output types from ONNX."""
    inits = inits or {}
    node = helper.make_node(op, [*inputs, *inits], list(outputs), **attrs)
    graph = helper.make_graph(
        [node], "test",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in inputs.items()],
        [helper.make_value_info(o, onnx.TypeProto()) for o in outputs],
        initializer=[numpy_helper.from_array(a, n) for n, a in inits.items()])
    return checked_model(graph, opset)


def check(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[int]:
    """cglow's outputs cut to their counts equal the reference's exactly, and the padding after each count is zero;
    the counts."""
    compiled = cglow.compile_model(model)
    host = cglow.build(compiled)
    args = [feeds[t.name] for t in compiled.inputs]
    want = ort_run(model, feeds)
    for got, w in zip(host(*args), want):
        np.testing.assert_array_equal(got, w)
        assert got.dtype == w.dtype
    whole, counts = host.run_whole(*args)
    counted = [(y, t.counted) for y, t in zip(whole, compiled.outputs) if t.counted is not None]
    for (y, at), count in zip(counted, counts):
        assert not np.any(np.take(y, np.arange(count, y.shape[at]), axis=at))
    return counts


def bits(shape, density: float, seed: int, dtype=np.float32) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * (rng.random(shape) < density)).astype(dtype)


@pytest.mark.parametrize("density", [0.0, 0.4, 1.0])
@pytest.mark.parametrize("shape, dtype", [((7,), np.float32), ((3, 5), np.int32), ((2, 3, 4), np.bool_)])
def test_nonzero(shape, dtype, density):
    x = bits(shape, density, seed=len(shape), dtype=dtype)
    counts = check(one_node("NonZero", {"x": x}, opset=13), {"x": x})
    assert counts == [np.count_nonzero(x)]


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("density", [0.0, 0.5, 1.0])
def test_compress(axis, density):
    x = np.arange(24, dtype=np.float32).reshape(4, 6) - 7
    length = 5  # shorter than axis 1 and the flattened input: the rest is dropped; longer than axis 0
    cond = np.random.default_rng(3).random(length) < density
    if axis == 0:
        cond = cond[:4]
    attrs = {} if axis is None else {"axis": axis}
    check(one_node("Compress", {"x": x, "cond": cond}, **attrs), {"x": x, "cond": cond})


def test_compress_constant_condition_is_static():
    """A constant condition fixes the output's length: no count."""
    x = np.arange(12, dtype=np.int64).reshape(3, 4)
    model = one_node("Compress", {"x": x}, inits={"cond": np.array([True, False, True, True])}, axis=1)
    compiled = cglow.compile_model(model)
    assert compiled.outputs[0].shape == (3, 3) and compiled.outputs[0].counted is None
    assert "count" not in compiled.h_source
    np.testing.assert_array_equal(cglow.build(compiled)(x)[0], x[:, [0, 2, 3]])


UNIQUE = [  # id, input, attributes
    ("flat-sorted", np.array([3, 1, 3, 2, 1, 5, 3], np.int64), {}),
    ("flat-unsorted", np.array([3, 1, 3, 2, 1, 5, 3], np.int64), {"sorted": 0}),
    ("floats-2d", np.round(np.random.default_rng(1).standard_normal((4, 5))).astype(np.float32), {}),
    ("all-equal", np.full(6, 2.5, np.float32), {}),
    ("all-distinct", np.array([5, -1, 3, 0], np.int64), {"sorted": 0}),
    ("axis-0", np.array([[1, 0, 0], [1, 0, 0], [2, 3, 4], [0, 9, 9]], np.float32), {"axis": 0}),
    ("axis-1-unsorted", np.array([[1, 2, 1, 0], [3, 0, 3, 0]], np.float32), {"axis": 1, "sorted": 0}),
    ("axis-middle-3d", np.random.default_rng(2).integers(0, 2, (2, 5, 2)).astype(np.float32), {"axis": 1}),
    ("axis-last-3d", np.random.default_rng(4).integers(0, 2, (2, 2, 6)).astype(np.int64), {"axis": -1}),
]


@pytest.mark.parametrize("x, attrs", [c[1:] for c in UNIQUE], ids=[c[0] for c in UNIQUE])
def test_unique(x, attrs):
    outputs = ("y", "indices", "inverse", "counts")
    counts = check(one_node("Unique", {"x": x}, outputs, **attrs), {"x": x})
    axis = attrs.get("axis")
    distinct = np.unique(x).size if axis is None else np.unique(x, axis=axis).shape[axis]
    assert counts == [distinct] * 3


def nms_model(boxes, scores, limit: int, thresholds: tuple[float | None, float | None], **attrs):
    names = ["boxes", "scores", "limit", "iou", "score"]
    inputs = {"boxes": boxes, "scores": scores}
    inits = {"limit": np.array([limit], np.int64)}
    for name, value in zip(("iou", "score"), thresholds):
        if value is not None:
            inputs[name] = np.array([value], np.float32)
    node_inputs = [n if n in inputs or n in inits else "" for n in names]
    while not node_inputs[-1]:
        node_inputs.pop()
    node = helper.make_node("NonMaxSuppression", node_inputs, ["y"], **attrs)
    graph = helper.make_graph(
        [node], "test",
        [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, a.shape) for n, a in inputs.items()],
        [helper.make_value_info("y", onnx.TypeProto())],
        initializer=[numpy_helper.from_array(a, n) for n, a in inits.items()])
    return checked_model(graph, 11), inputs


def random_boxes(batches: int, n: int, seed: int, center: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    where, size = rng.uniform(0, 4, (batches, n, 2)), rng.uniform(0.5, 2, (batches, n, 2))
    if center:
        return np.concatenate([where, size], -1).astype(np.float32)
    corners = np.concatenate([where, where + size], -1)
    flip = rng.random((batches, n)) < 0.3  # corners in either order
    corners[flip] = corners[flip][:, [2, 3, 0, 1]]
    return corners.astype(np.float32)


NMS = [  # id, batches, classes, boxes, max per class, (iou threshold, score threshold), center_point_box
    ("one-class", 1, 1, 12, 5, (0.3, None), 0),
    ("classes-batches", 2, 3, 9, 4, (0.5, 0.2), 0),
    ("center", 2, 2, 10, 10, (0.2, 0.5), 1),
    ("no-iou-input", 1, 2, 6, 3, (None, None), 0),
    ("none-above-score", 1, 2, 6, 3, (0.5, 2.0), 0),
    ("all-kept", 1, 1, 5, 5, (1.0, None), 0),
]


@pytest.mark.parametrize("case", NMS, ids=[c[0] for c in NMS])
def test_non_max_suppression(case):
    _, batches, classes, n, limit, thresholds, center = case
    boxes = random_boxes(batches, n, seed=n, center=bool(center))
    scores = np.random.default_rng(classes).random((batches, classes, n)).astype(np.float32)
    scores[..., ::4] = scores[..., 1:2]  # ties: the lower index first
    model, feeds = nms_model(boxes, scores, limit, thresholds, center_point_box=center)
    check(model, feeds)


def test_non_max_suppression_limit_zero_is_empty():
    model, feeds = nms_model(random_boxes(1, 4, 0, False), np.ones((1, 1, 4), np.float32), 0, (0.5, None))
    compiled = cglow.compile_model(model)
    assert compiled.outputs[0].shape == (0, 3) and compiled.outputs[0].counted is None


def test_count_passes_through_cast():
    """A Cast keeps the padding zero and the count (as the stored types' casts need)."""
    x = np.array([0, 1, 0, 2], np.float32)
    nodes = [helper.make_node("NonZero", ["x"], ["i"]), helper.make_node("Cast", ["i"], ["y"], to=onnx.TensorProto.INT32)]
    graph = helper.make_graph(nodes, "test", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4])],
                              [helper.make_value_info("y", onnx.TypeProto())])
    model = checked_model(graph, 13)
    compiled = cglow.compile_model(model)
    assert compiled.outputs[0].counted == 1
    np.testing.assert_array_equal(cglow.build(compiled)(x)[0], np.array([[1, 3]], np.int32))


def test_consumer_of_a_run_time_length_is_refused():
    """An op that would compute on the padding is refused by name, never run on it."""
    x = np.array([0, 1, 0, 2], np.float32)
    nodes = [helper.make_node("NonZero", ["x"], ["i"]), helper.make_node("ReduceSum", ["i"], ["y"], keepdims=0)]
    graph = helper.make_graph(nodes, "test", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4])],
                              [helper.make_value_info("y", onnx.TypeProto())])
    with pytest.raises(CglowError, match=r"ReduceSum node .*input 'i' \(int64\[1,<=4\]\) has a length known only at "
                                         r"run time"):
        cglow.compile_model(checked_model(graph, 13))


def check_capacity(model: onnx.ModelProto, feeds: dict[str, np.ndarray], name: str, n: int) -> list[int]:
    """Compiled with --capacity name=n: every output of run-time length of name's node holds the first n entries
    along its counted dim of what the model gives without the option (its zero padding included), the header says
    so, the other outputs are the same, and the counts are the real ones, those of the run without it (the host
    model cuts such an output to n entries where its count is more); the counts."""
    full = cglow.compile_model(model)
    lowered = cglow.compile_model(model, options=Options(capacities=((name, n),)))
    args = [feeds[t.name] for t in full.inputs]
    host = cglow.build(lowered)
    whole, counts = cglow.build(full).run_whole(*args)
    got, got_counts = host.run_whole(*args)
    assert got_counts == counts
    for i, (y, want, t) in enumerate(zip(got, whole, lowered.outputs)):
        if t.counted is not None:
            assert f"#define NET_OUTPUT_{i}_CAPACITY {n} " in lowered.h_source
            want = np.take(want, np.arange(n), axis=t.counted)
        np.testing.assert_array_equal(y, want)
    cut, counted = host(*args), [(i, t.counted) for i, t in enumerate(lowered.outputs) if t.counted is not None]
    assert [cut[i].shape[at] for i, at in counted] == [min(count, n) for count in counts]
    assert lowered.arena_bytes <= full.arena_bytes
    return counts


@pytest.mark.parametrize("n, above", [(30, False), (5, True)])
def test_nonzero_capacity(n, above):
    x = bits((6, 8), 0.4, seed=5)
    (count,) = check_capacity(one_node("NonZero", {"x": x}, opset=13), {"x": x}, "y", n)
    assert count == np.count_nonzero(x) and (count > n) == above


@pytest.mark.parametrize("axis", [None, 1])
@pytest.mark.parametrize("n, above", [(5, False), (2, True)])
def test_compress_capacity(axis, n, above):
    x = np.arange(24, dtype=np.float32).reshape(4, 6) - 7
    cond = np.array([True, False, True, True, False, False])
    attrs = {} if axis is None else {"axis": axis}
    (count,) = check_capacity(one_node("Compress", {"x": x, "cond": cond}, **attrs), {"x": x, "cond": cond}, "y", n)
    assert count == 3 and (count > n) == above


@pytest.mark.parametrize("case", ["flat-sorted", "axis-0"])
@pytest.mark.parametrize("n, above", [(4, False), (2, True)])
def test_unique_capacity(case, n, above):
    """Y, indices and counts share one capacity: naming counts lowers all three; inverse_indices stays whole."""
    x, attrs = next(c[1:] for c in UNIQUE if c[0] == case)
    model = one_node("Unique", {"x": x}, ("y", "indices", "inverse", "counts"), **attrs)
    counts = check_capacity(model, {"x": x}, "counts", n)
    assert counts == [3 if case == "axis-0" else 4] * 3 and (counts[0] > n) == above


@pytest.mark.parametrize("n, above", [(40, False), (5, True)])
def test_non_max_suppression_capacity(n, above):
    """The boxes past the capacity are selected and suppress others as without it: the first rows and the count
    are the same (32 boxes of the 54 that 2 batches x 3 classes x 9 boxes could give)."""
    boxes = random_boxes(2, 9, seed=9, center=False)
    scores = np.random.default_rng(3).random((2, 3, 9)).astype(np.float32)
    model, feeds = nms_model(boxes, scores, 9, (0.1, 0.2))
    (count,) = check_capacity(model, feeds, "y", n)
    assert count == 32 and (count > n) == above
