"""Per-operator conformance of the float data-movement ops (Flatten, Reshape, Transpose, Squeeze, Unsqueeze,
Concat, Dropout) and of transposes read as strided views, compiled by cglow and run as C, against
onnxruntime.

Float32 inputs and weights, seeded; every output within TOL = 1e-5 (tests/ops/test_ops_nn.py says why).
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.onnx_ops import check, f32, i64, ids, make_model, node_model, pos, rand, transpose_node


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

STRIDED = {  # id -> (nodes, inputs, initializers)
    "transpose-matmul-a": ([transpose_node("x", "t", (0, 2, 1)), helper.make_node("MatMul", ["t", "w"], ["y"])],
                           {"x": (2, 5, 3)}, {"w": rand(5, 4, seed=2)}),
    "transpose-matmul-b": ([transpose_node("k", "kt", (0, 2, 1)), helper.make_node("MatMul", ["q", "kt"], ["y"])],
                           {"q": (2, 3, 4), "k": (2, 6, 4)}, {}),
    "transpose-matmul-2d": ([transpose_node("x", "t", (1, 0)), helper.make_node("MatMul", ["t", "w"], ["y"])],
                            {"x": (5, 3)}, {"w": rand(5, 4, seed=2)}),
    "transpose-reshape-copy": ([transpose_node("x", "t", (0, 2, 1, 3)), helper.make_node("Reshape", ["t", "s"], ["y"])],
                               {"x": (2, 3, 4, 5)}, {"s": i64(2, 4, 15)}),
    "transpose-reshape-view": ([transpose_node("x", "t", (0, 2, 3, 1)), helper.make_node("Reshape", ["t", "s"], ["r"]),
                                helper.make_node("Relu", ["r"], ["y"])],
                               {"x": (2, 3, 4, 5)}, {"s": i64(2, 20, 3)}),
    "transpose-flatten": ([transpose_node("x", "t", (0, 2, 3, 1)), helper.make_node("Flatten", ["t"], ["y"])],
                          {"x": (2, 3, 4, 5)}, {}),
    "transpose-transpose": ([transpose_node("x", "t", (0, 2, 3, 1)), transpose_node("t", "u", (2, 0, 3, 1)),
                             helper.make_node("Relu", ["u"], ["y"])], {"x": (2, 3, 4, 5)}, {}),
    "transpose-conv": ([transpose_node("x", "t", (0, 3, 1, 2)),
                        helper.make_node("Conv", ["t", "w", "b"], ["y"], pads=[1] * 4)],
                       {"x": (1, 6, 6, 3)}, {"w": rand(4, 3, 3, 3, seed=2), "b": rand(4, seed=3)}),
    "transpose-add-broadcast": ([transpose_node("x", "t", (0, 2, 1)), helper.make_node("Add", ["t", "z"], ["y"])],
                                {"x": (2, 4, 3), "z": (3, 1)}, {}),
    "transpose-add-transpose": ([transpose_node("x", "t", (1, 0)), transpose_node("z", "u", (1, 0)),
                                 helper.make_node("Add", ["t", "u"], ["y"])], {"x": (3, 4), "z": (3, 4)}, {}),
    "transpose-softmax13": ([transpose_node("x", "t", (0, 2, 1)), helper.make_node("Softmax", ["t"], ["y"], axis=-1)],
                            {"x": (2, 5, 3)}, {}),
    "transpose-layernorm": ([transpose_node("x", "t", (0, 2, 1)),
                             helper.make_node("LayerNormalization", ["t", "g", "bb"], ["y"], axis=-1)],
                            {"x": (2, 6, 3)}, {"g": pos(6, seed=2), "bb": rand(6, seed=3)}),
    "transpose-concat": ([transpose_node("x", "t", (0, 2, 1)), helper.make_node("Concat", ["t", "z"], ["y"], axis=1)],
                         {"x": (2, 4, 3), "z": (2, 2, 4)}, {}),
    "transpose-global-avgpool": ([transpose_node("x", "t", (0, 3, 1, 2)),
                                  helper.make_node("GlobalAveragePool", ["t"], ["y"])],
                                 {"x": (2, 4, 5, 3)}, {}),
    "transpose-maxpool": ([transpose_node("x", "t", (0, 3, 1, 2)),
                           helper.make_node("MaxPool", ["t"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                          {"x": (1, 6, 6, 3)}, {}),
    "transpose-avgpool": ([transpose_node("x", "t", (0, 3, 1, 2)),
                           helper.make_node("AveragePool", ["t"], ["y"], kernel_shape=[3, 3], pads=[1] * 4)],
                          {"x": (1, 6, 5, 3)}, {}),
    "transpose-gemm": ([transpose_node("x", "t", (1, 0)), helper.make_node("Gemm", ["t", "w", "c"], ["y"], transB=1)],
                       {"x": (5, 3)}, {"w": rand(4, 5, seed=2), "c": rand(4, seed=3)}),
    "transpose-squeeze": ([transpose_node("x", "t", (2, 0, 1)), helper.make_node("Squeeze", ["t", "ax"], ["y"])],
                          {"x": (3, 4, 1)}, {"ax": i64(0)}),
    "transpose-batchnorm": ([transpose_node("x", "t", (0, 3, 1, 2)),
                             helper.make_node("BatchNormalization", ["t", "g", "bb", "m", "v"], ["y"])],
                            {"x": (1, 4, 4, 3)},
                            {"g": pos(3, seed=2), "bb": rand(3, seed=3), "m": rand(3, seed=4), "v": pos(3, seed=5)}),
    "transpose-maxpool-1d": ([transpose_node("x", "t", (0, 2, 1)),
                              helper.make_node("MaxPool", ["t"], ["y"], kernel_shape=[3], strides=[2])],
                             {"x": (2, 9, 3)}, {}),
    "transpose-conv-1d": ([transpose_node("x", "t", (0, 2, 1)),
                           helper.make_node("Conv", ["t", "w"], ["y"], pads=[1, 1])],
                          {"x": (2, 9, 3)}, {"w": rand(4, 3, 3, seed=2)}),
    "transpose-softmax11": ([transpose_node("x", "t", (0, 2, 1)), helper.make_node("Softmax", ["t"], ["y"], axis=1)],
                            {"x": (2, 5, 3)}, {}),
    "transpose-softmax13-middle": ([transpose_node("x", "t", (2, 0, 1)),
                                    helper.make_node("Softmax", ["t"], ["y"], axis=1)],
                                   {"x": (2, 5, 3)}, {}),
    "transpose-layernorm-2": ([transpose_node("x", "t", (0, 2, 1)),
                               helper.make_node("LayerNormalization", ["t", "g"], ["y"], axis=-2)],
                              {"x": (2, 6, 3)}, {"g": pos(3, 6, seed=2)}),
    "transpose-pow": ([transpose_node("x", "t", (1, 0)), helper.make_node("Pow", ["t", "e"], ["y"])],
                      {"x": (4, 3)}, {"e": f32(2.0)}),
    "heads-split": ([helper.make_node("Reshape", ["x", "s"], ["r"]), transpose_node("r", "t", (0, 2, 1, 3)),
                     helper.make_node("MatMul", ["t", "w"], ["m"]), transpose_node("m", "u", (0, 2, 1, 3)),
                     helper.make_node("Reshape", ["u", "s2"], ["y"])],
                    {"x": (1, 6, 8)}, {"s": i64(1, 6, 2, 4), "w": rand(4, 4, seed=2), "s2": i64(1, 6, 8)}),
}


@pytest.mark.parametrize("case", STRIDED)
def test_strided_views(case):
    nodes, inputs, inits = STRIDED[case]
    check(make_model(nodes, inputs, ["y"], inits, 17))
