"""Data-movement and indexing ops, single-node models against onnxruntime, for several element types.

These ops only move values, so outputs must equal the reference's exactly (same dtype, same bits). The
reference is onnxruntime, or the ONNX reference evaluator where onnxruntime has no kernel for the types
(DepthToSpace on integers, OneHot with int32 values...). A graph input is given as the array fed to it;
`Const(array)` marks an initializer instead.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as NoKernel

from cglow.errors import CglowError

from tests.onnx_ops import i64, ids
from tests.util import assert_shapes_agree_with_onnx, cglow_run, checked_model, ort_run

DTYPES = [np.float32, np.int64, np.int32, np.bool_, np.uint8]
INT64_MAX, INT64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


class Const:
    """An initializer, where a bare array is a graph input fed with that array."""

    def __init__(self, value):
        self.value = np.asarray(value)


def data(*shape, dtype=np.float32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(dtype)


def model_of(nodes, ins, outputs=("y",), opset: int = 13) -> onnx.ModelProto:
    """ins: (name, array | Const | None) in any order; output types come from ONNX shape inference."""
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in ins if isinstance(v, np.ndarray)],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        initializer=[numpy_helper.from_array(v.value, n) for n, v in ins if isinstance(v, Const)])
    return checked_model(graph, opset)


def check_model(model: onnx.ModelProto, ins) -> None:
    feeds = {n: v for n, v in ins if isinstance(v, np.ndarray)}
    assert_shapes_agree_with_onnx(model)
    try:
        want = ort_run(model, feeds)
    except NoKernel:
        want = ReferenceEvaluator(model).run(None, feeds)
    got = cglow_run(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w)


def check_node(op: str, ins, outputs=("y",), opset: int = 13, **attrs) -> None:
    """One node; ins: (name, array | Const | None) in input order, None an omitted optional input."""
    node = helper.make_node(op, [n if v is not None else "" for n, v in ins], list(outputs), **attrs)
    check_model(model_of([node], ins, outputs, opset), ins)


# --- every data-movement op for every element type ---------------------------------------------------

def _movement_cases(dtype):
    x = data(2, 3, 4, dtype=dtype)
    x4 = data(1, 8, 2, 3, dtype=dtype)
    return {
        "reshape": ("Reshape", [("x", x), ("s", Const(i64(4, -1)))], {}, 13),
        "flatten": ("Flatten", [("x", x)], dict(axis=2), 13),
        "squeeze": ("Squeeze", [("x", data(2, 1, 3, dtype=dtype)), ("a", Const(i64(1)))], {}, 13),
        "unsqueeze": ("Unsqueeze", [("x", x), ("a", Const(i64(0, -1)))], {}, 13),
        "transpose": ("Transpose", [("x", x)], dict(perm=[2, 0, 1]), 13),
        "concat": ("Concat", [("x", x), ("z", data(2, 2, 4, dtype=dtype, seed=1))], dict(axis=1), 13),
        "identity": ("Identity", [("x", x)], {}, 13),
        "slice": ("Slice", [("x", x), ("s", Const(i64(3, 1))), ("e", Const(i64(0, 4))), ("a", Const(i64(2, 1))),
                            ("st", Const(i64(-2, 1)))], {}, 13),
        "pad-constant": ("Pad", [("x", x), ("p", Const(i64(0, 1, 2, 1, 0, 1)))], {}, 13),
        "pad-value": ("Pad", [("x", x), ("p", Const(i64(1, 0, 0, 0, 2, 1))), ("v", Const(data(dtype=dtype, seed=5)))],
                      {}, 13),
        "pad-reflect": ("Pad", [("x", x), ("p", Const(i64(0, 2, 1, 0, 0, 2)))], dict(mode="reflect"), 13),
        "pad-edge": ("Pad", [("x", x), ("p", Const(i64(1, 0, 3, 0, 2, 0)))], dict(mode="edge"), 13),
        "tile": ("Tile", [("x", x), ("r", Const(i64(2, 1, 2)))], {}, 13),
        "expand": ("Expand", [("x", data(3, 1, dtype=dtype)), ("s", Const(i64(2, 3, 4)))], {}, 13),
        "depth-to-space": ("DepthToSpace", [("x", x4)], dict(blocksize=2), 13),
        "space-to-depth": ("SpaceToDepth", [("x", data(1, 2, 4, 6, dtype=dtype))], dict(blocksize=2), 13),
        "gather": ("Gather", [("x", x), ("i", i64(2, 0, -1, 0))], dict(axis=1), 13),
        "gather-nd": ("GatherND", [("x", x), ("i", i64(1, 2, 0, 0).reshape(2, 2))], {}, 13),
        "gather-elements": ("GatherElements", [("x", x), ("i", i64(0, 1, 0, 1, 1, 0).reshape(2, 3, 1))],
                            dict(axis=0), 13),
        "trilu": ("Trilu", [("x", x)], {}, 14),
    }


MOVEMENT = list(_movement_cases(np.float32))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("case", MOVEMENT)
def test_movement_dtypes(case, dtype):
    op, ins, attrs, opset = _movement_cases(dtype)[case]
    check_node(op, ins, opset=opset, **attrs)


# --- Slice --------------------------------------------------------------------------------------------

SLICE = [  # id, x shape, starts, ends, axes (None: omitted), steps (None: omitted)
    ("basic", (4, 5, 6), (1, 0), (3, 4), (0, 2), None),
    ("default-axes", (4, 5, 6), (1, 2, 3), (3, 4, 5), None, None),
    ("steps-2", (4, 5, 6), (0, 1), (4, 6), (1, 2), (2, 3)),
    ("negative-indices", (4, 5, 6), (-3, -4), (-1, -1), (0, 2), None),
    ("negative-axes", (4, 5, 6), (1,), (4,), (-1,), None),
    ("clamped", (4, 5, 6), (-100, 2), (100, INT64_MAX), (0, 1), None),
    ("reverse-all", (4, 5), (-1,), (INT64_MIN,), (1,), (-1,)),
    ("reverse-step-2", (4, 7), (5, 3), (0, -10), (1, 0), (-2, -1)),
    ("reverse-clamped-start", (4, 7), (100,), (1,), (1,), (-3,)),
    ("empty", (4, 5), (3,), (1,), (0,), None),
    ("unit-step-negative-start", (6,), (-2,), (INT64_MAX,), None, None),
]


@pytest.mark.parametrize("case", SLICE, ids=ids(SLICE))
def test_slice(case):
    _, shape, starts, ends, axes, steps = case
    ins = [("x", data(*shape)), ("starts", Const(i64(*starts))), ("ends", Const(i64(*ends)))]
    ins += [("axes", Const(i64(*axes)) if axes is not None else None)] if axes or steps else []
    ins += [("steps", Const(i64(*steps)))] if steps else []
    check_node("Slice", ins)


def test_slice_int32_operands_into_relu():
    """A reversed slice read by an elementwise kernel, with int32 starts and ends."""
    nodes = [helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    ins = [("x", data(3, 8)), ("s", Const(np.array([-2], np.int32))), ("e", Const(np.array([0], np.int32))),
           ("a", Const(np.array([1], np.int32))), ("st", Const(np.array([-2], np.int32)))]
    check_model(model_of(nodes, ins), ins)


def test_slice_of_transpose_into_concat():
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Slice", ["t", "s", "e", "a", "st"], ["u"]),
             helper.make_node("Concat", ["u", "z"], ["y"], axis=0)]
    ins = [("x", data(3, 6)), ("z", data(1, 3, seed=1)), ("s", Const(i64(5))), ("e", Const(i64(0))),
           ("a", Const(i64(0))), ("st", Const(i64(-2)))]
    check_model(model_of(nodes, ins), ins)


# --- Split --------------------------------------------------------------------------------------------

SPLIT = [  # id, x shape, axis, split sizes (None: equal parts), outputs, opset
    ("attr", (6, 4), 0, [2, 4], 2, 11),
    ("attr-equal", (6, 4), 1, None, 2, 11),
    ("input", (6, 4), 0, [1, 2, 3], 3, 13),
    ("input-negative-axis", (2, 3, 5), -1, [4, 1], 2, 13),
    ("input-zero-part", (6, 4), 0, [0, 6], 2, 13),
    ("equal-default", (6, 4), 0, None, 3, 13),
    ("num-outputs", (6, 4), 0, None, 3, 18),
    ("num-outputs-uneven", (2, 7), 1, None, 3, 18),
    ("input-18", (2, 7), 1, [3, 4], 2, 18),
]


@pytest.mark.parametrize("case", SPLIT, ids=ids(SPLIT))
def test_split(case):
    _, shape, at, sizes, count, opset = case
    outputs = [f"y{i}" for i in range(count)]
    attrs = dict(axis=at)
    ins = [("x", data(*shape))]
    if sizes is not None and opset < 13:
        attrs["split"] = sizes
    elif sizes is not None:
        ins.append(("split", Const(i64(*sizes))))
    elif opset >= 18:
        attrs["num_outputs"] = count
    check_node("Split", ins, outputs, opset, **attrs)


def test_split_parts_read_by_kernels():
    """Split outputs as views read by a matmul and an add."""
    nodes = [helper.make_node("Split", ["x"], ["a", "b"], axis=1),
             helper.make_node("MatMul", ["a", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])]
    ins = [("x", data(3, 8)), ("w", Const(data(4, 4, seed=2)))]
    check_model(model_of(nodes, ins), ins)


# --- Pad ----------------------------------------------------------------------------------------------

PAD = [  # id, x shape, pads, mode, constant value (None: omitted), axes (None: omitted), opset
    ("constant-zero", (2, 3), [1, 2, 0, 1], "constant", None, None, 13),
    ("constant-value", (2, 3, 4), [0, 1, 1, 0, 2, 3], "constant", 1.5, None, 13),
    ("constant-4d-spatial", (1, 2, 3, 3), [0, 0, 1, 2, 0, 0, 2, 1], "constant", -2.0, None, 11),
    ("crop", (4, 5), [-1, 2, 0, -2], "constant", None, None, 13),
    ("crop-both-sides", (4, 5), [-1, -2, -1, -1], "constant", None, None, 13),
    ("axes", (2, 3, 4), [1, 2, 0, 3], "constant", 7.0, [2, 0], 18),
    ("axes-negative", (2, 3, 4), [1, 1], "constant", None, [-2], 18),
    ("reflect", (3, 4), [2, 3, 1, 2], "reflect", None, None, 13),
    ("reflect-4d", (1, 2, 4, 5), [0, 0, 2, 1, 0, 0, 3, 4], "reflect", None, None, 13),
    ("reflect-crop", (4, 5), [1, -1, -1, 2], "reflect", None, None, 13),
    ("edge", (3, 4), [2, 0, 3, 5], "edge", None, None, 13),
    ("edge-single", (1, 1), [2, 3, 1, 2], "edge", None, None, 13),
    ("edge-axes", (2, 3, 4), [2, 1, 3, 0], "edge", None, [1, 2], 18),
    ("wrap", (3, 4), [1, 2, 2, 3], "wrap", None, None, 19),
    ("wrap-wider-than-axis", (2, 3), [5, 4, 3, 7], "wrap", None, None, 19),
]


@pytest.mark.parametrize("case", PAD, ids=ids(PAD))
def test_pad(case):
    _, shape, pads, mode, value, axes, opset = case
    ins = [("x", data(*shape)), ("pads", Const(i64(*pads))),
           ("value", None if value is None else Const(np.float32(value))), ("axes", axes and Const(i64(*axes)))]
    while ins[-1][1] is None:
        ins.pop()
    check_node("Pad", ins, opset=opset, mode=mode)


def test_pad_value_is_an_input():
    ins = [("x", data(2, 3)), ("pads", Const(i64(1, 0, 0, 2))), ("value", np.array(3.25, np.float32))]
    check_node("Pad", ins)


def test_pad_of_transpose_into_relu():
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Pad", ["t", "p"], ["u"], mode="reflect"), helper.make_node("Relu", ["u"], ["y"])]
    ins = [("x", data(3, 5)), ("p", Const(i64(2, 1, 1, 2)))]
    check_model(model_of(nodes, ins), ins)


def test_pad_reflect_too_wide():
    node = helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")
    ins = [("x", data(2, 3)), ("p", Const(i64(0, 3, 0, 0)))]
    model = model_of([node], ins)
    with pytest.raises(CglowError, match="cannot pad an axis of 3 elements"):
        cglow_run(model, {"x": ins[0][1]})


# --- Gather and GatherElements --------------------------------------------------------------------------

GATHER = [  # id, x shape, indices (an ndarray input, a Const initializer), axis
    ("axis0", (5, 3), i64(4, 0, 2), 0),
    ("axis1", (2, 5, 3), i64(1, 4, 1), 1),
    ("axis-last", (2, 3, 5), i64(-1, 0, -5, 3), -1),
    ("indices-2d", (5, 4), i64(0, 1, 4, 3, -2, 0).reshape(2, 3), 0),
    ("indices-2d-middle", (2, 5, 4), i64(0, 1, 4, 3, -2, 0).reshape(3, 2), 1),
    ("scalar-index", (3, 5), np.array(-2, np.int64), 1),
    ("int32-indices", (5, 3), np.array([3, -1, 0], np.int32), 0),
    ("1d-data", (6,), i64(5, -6, 2), 0),
    ("const-irregular", (6, 3), Const(i64(4, 1, 1)), 0),
    ("const-scalar", (4, 6), Const(np.array(-1, np.int64)), 1),
    ("const-range", (4, 6), Const(i64(1, 2, 3)), 1),
    ("const-repeated", (4, 6), Const(i64(2, 2, 2, 2).reshape(2, 2)), 1),
    ("const-range-step", (8, 3), Const(i64(6, 4, 2, 0).reshape(2, 2)), 0),
    ("const-negative-range", (8, 3), Const(i64(-3, -2, -1)), 0),
]


@pytest.mark.parametrize("case", GATHER, ids=ids(GATHER))
def test_gather(case):
    _, shape, indices, at = case
    check_node("Gather", [("x", data(*shape)), ("i", indices)], axis=at)


def test_gather_from_constant_table():
    """An embedding lookup: constant data, run-time token ids."""
    check_node("Gather", [("table", Const(data(10, 4, seed=3))), ("ids", i64(3, 9, 0, 3).reshape(2, 2))])


def test_gather_slice_of_transpose_into_relu():
    """A constant index picks one row of a transposed value: a view, read by a kernel."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Gather", ["t", "i"], ["g"], axis=0), helper.make_node("Relu", ["g"], ["y"])]
    ins = [("x", data(3, 5)), ("i", Const(np.array(2, np.int64)))]
    check_model(model_of(nodes, ins), ins)


def test_gather_index_out_of_range():
    node = helper.make_node("Gather", ["x", "i"], ["y"])
    ins = [("x", data(3, 2)), ("i", Const(i64(3)))]
    with pytest.raises(CglowError, match="out of range"):
        cglow_run(model_of([node], ins), {"x": ins[0][1]})


GATHER_ELEMENTS = [  # id, x shape, indices, axis
    ("axis0", (3, 4), i64(0, 2, 1, 0, 2, 2, -1, 0).reshape(2, 4), 0),
    ("axis1", (3, 4), i64(3, 0, -1, 1, 2, 2).reshape(3, 2), 1),
    ("axis-last-3d", (2, 3, 4), np.array([[[1], [3], [-4]], [[0], [2], [2]]], np.int32), -1),
    ("smaller-indices", (4, 5), i64(0, 3, 2, 1).reshape(2, 2), 0),
]


@pytest.mark.parametrize("case", GATHER_ELEMENTS, ids=ids(GATHER_ELEMENTS))
def test_gather_elements(case):
    _, shape, indices, at = case
    check_node("GatherElements", [("x", data(*shape)), ("i", indices)], axis=at)


GATHER_ND = [  # id, x shape, indices, batch_dims
    ("full-tuples", (3, 4), i64(0, 1, 2, -1, -3, 0).reshape(3, 2), 0),
    ("partial-tuples", (3, 4, 2), i64(2, 0, -1, 1).reshape(2, 1, 2), 0),
    ("rows", (5, 3), i64(4, 0, -2).reshape(3, 1), 0),
    ("batch1", (2, 3, 4), i64(1, 2, 0, -1, 2, -3).reshape(2, 3, 1), 1),
    ("batch1-tuples", (2, 3, 4, 2), i64(0, 1, 2, 3, 1, 1, -1, 0).reshape(2, 2, 2), 1),
]


@pytest.mark.parametrize("case", GATHER_ND, ids=ids(GATHER_ND))
def test_gather_nd(case):
    _, shape, indices, batch = case
    check_node("GatherND", [("x", data(*shape)), ("i", indices)], batch_dims=batch)


def test_gather_nd_of_transpose_int32():
    """Data whose gathered dims are not contiguous among themselves: copied first."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
             helper.make_node("GatherND", ["t", "i"], ["y"])]
    ins = [("x", data(3, 4, 2, dtype=np.int32)), ("i", i64(1, 2, 0, 1, -1, 0).reshape(3, 2))]
    check_model(model_of(nodes, ins), ins)


# --- Tile, Expand, DepthToSpace, SpaceToDepth ---------------------------------------------------------

@pytest.mark.parametrize("shape,repeats", [((3,), (4,)), ((2, 3), (1, 1)), ((2, 3), (3, 2)),
                                           ((2, 1, 3), (2, 4, 1)), ((2, 3), (0, 2))], ids=str)
def test_tile(shape, repeats):
    check_node("Tile", [("x", data(*shape)), ("r", Const(i64(*repeats)))])


@pytest.mark.parametrize("shape,target", [((3, 1), (3, 4)), ((3, 1), (2, 1, 6)), ((4,), (2, 3, 4)),
                                          ((2, 1, 3), (1, 1)), ((1,), (5,)), ((2, 3), (2, 3))], ids=str)
def test_expand(shape, target):
    check_node("Expand", [("x", data(*shape)), ("s", Const(i64(*target)))])


def test_expand_of_transpose():
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Expand", ["t", "s"], ["y"])]
    ins = [("x", data(3, 4)), ("s", Const(i64(2, 4, 3)))]
    check_model(model_of(nodes, ins), ins)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("shape,block", [((1, 8, 2, 3), 2), ((2, 18, 2, 2), 3), ((1, 4, 1, 1), 2)], ids=str)
def test_depth_to_space(shape, block, mode):
    check_node("DepthToSpace", [("x", data(*shape))], blocksize=block, mode=mode)


@pytest.mark.parametrize("shape,block", [((1, 2, 4, 6), 2), ((2, 3, 6, 3), 3), ((1, 1, 2, 2), 2)], ids=str)
def test_space_to_depth(shape, block):
    check_node("SpaceToDepth", [("x", data(*shape))], blocksize=block)


def test_space_to_depth_after_transpose():
    """NHWC to NCHW then SpaceToDepth: the 6-D view of a transposed value needs a copy first."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
             helper.make_node("SpaceToDepth", ["t"], ["y"], blocksize=2)]
    ins = [("x", data(1, 4, 6, 3))]
    check_model(model_of(nodes, ins), ins)


# --- OneHot and Trilu ------------------------------------------------------------------------------

ONE_HOT = [  # id, indices, depth (a 0-D or 1-D array), values (an ndarray input, a Const initializer), axis
    ("default-axis", i64(0, 2, 1, 4), i64(5), Const(np.array([0, 1], np.float32)), -1),
    ("axis0", i64(1, 2, 0, 3, -1, 2).reshape(2, 3), i64(4), Const(np.array([-1, 3], np.int64)), 0),
    ("axis-middle", i64(1, 2, 0, 3, -1, 2).reshape(2, 3), np.int64(4), Const(np.array([2, 5], np.float32)), 1),
    ("negative-and-out-of-range", i64(-1, -3, 3, 7, -9), np.int64(3), Const(np.array([0, 1], np.int32)), -1),
    ("float-indices", np.array([0.0, 2.0, 1.0, -1.0], np.float32), np.float32(3),
     Const(np.array([0, 1], np.float32)), -1),
    ("values-input", np.array([[2, 0]], np.int32), np.int32(3), np.array([0.5, -1.5], np.float32), -2),
]


@pytest.mark.parametrize("case", ONE_HOT, ids=ids(ONE_HOT))
def test_one_hot(case):
    _, indices, depth, values, at = case
    check_node("OneHot", [("i", indices), ("depth", Const(depth)), ("values", values)], opset=11, axis=at)


TRILU = [  # id, x shape, upper, k (None: omitted; an ndarray input, a Const initializer)
    ("upper", (4, 5), 1, None),
    ("lower", (4, 5), 0, None),
    ("upper-k2", (5, 4), 1, Const(np.array(2, np.int64))),
    ("lower-k-1", (3, 4, 5), 0, Const(np.array(-1, np.int64))),
    ("upper-k-beyond", (3, 3), 1, Const(np.array(-4, np.int64))),
    ("k-input", (2, 4, 4), 1, np.array(1, np.int64)),
]


@pytest.mark.parametrize("case", TRILU, ids=ids(TRILU))
def test_trilu(case):
    _, shape, upper, k = case
    check_node("Trilu", [("x", data(*shape))] + ([("k", k)] if k is not None else []), opset=14, upper=upper)


# --- ops folded at import ------------------------------------------------------------------------------

def test_shape_start_end_folded():
    """Shape with start/end (opset 15), Size, ConstantOfShape and Range fold into a constant operand."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=-1),
             helper.make_node("ConstantOfShape", ["s"], ["c"], value=numpy_helper.from_array(np.array([2], np.int64))),
             helper.make_node("Size", ["c"], ["n"]),
             helper.make_node("Range", ["zero", "n", "one"], ["r"]),
             helper.make_node("Reshape", ["r", "s"], ["t"]),
             helper.make_node("Unsqueeze", ["t", "axes"], ["u"]),
             helper.make_node("Concat", ["x", "u"], ["y"], axis=0)]
    ins = [("x", data(2, 3, 4, 1, dtype=np.int64)), ("zero", Const(np.array(0, np.int64))),
           ("one", Const(np.array(1, np.int64))), ("axes", Const(i64(0, 3)))]
    check_model(model_of(nodes, ins, opset=15), ins)


@pytest.mark.parametrize("op", ["ConstantOfShape", "Range"])
def test_value_dependent_shape_refused(op):
    ins = [("s", i64(2, 3))] if op == "ConstantOfShape" else [("a", i64(0)), ("b", i64(5)), ("c", i64(1))]
    model = model_of([helper.make_node(op, [n for n, _ in ins], ["y"])], ins)
    with pytest.raises(CglowError, match=f"{op} node .*depends on run-time values"):
        cglow_run(model, dict(ins))
