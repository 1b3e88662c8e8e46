"""Per-operator conformance of the float arithmetic ops: Add, Sub, Mul, Div (broadcasting, constants),
the unary activations, Sqrt, Clip and Pow, single-node models compiled by cglow and run as C, against
onnxruntime.

Float32 inputs and weights, seeded; every output within TOL = 1e-5 (tests/ops/test_ops_nn.py says why).
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.onnx_ops import check, f32, ids, make_model, node_model, pos


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


@pytest.mark.parametrize("exponent", [np.array(2, np.int64), np.array([3, 1, 2], np.int32)], ids=["int64-2", "int32-vector"])
def test_pow_with_integer_exponent(exponent):
    check(node_model("Pow", [("x", (2, 3)), ("e", exponent)]), positive=True)
