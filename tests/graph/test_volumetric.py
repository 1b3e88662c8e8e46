"""3-D Conv and ConvTranspose (cglow/graph/volumetric.py: sums of 2-D ones over the kernel's depth) against
onnxruntime: strides, dilations, pads (explicit and automatic), groups, output_padding and output_shape, bias,
constant and run-time weights."""
from __future__ import annotations

from onnx import TensorProto, helper, numpy_helper
import pytest

import cglow
from cglow.errors import CglowError

from tests.onnx_ops import check, ids, make_model, node_model, rand

CONV = [  # id, x shape, w shape, bias, constant weights, attrs
    ("plain", (1, 2, 4, 5, 6), (3, 2, 2, 3, 3), False, True, {}),
    ("strides-pads-bias", (2, 3, 6, 5, 7), (4, 3, 3, 2, 3), True, True,
     dict(strides=[2, 1, 2], pads=[1, 0, 1, 2, 1, 0])),
    ("dilations-groups", (1, 4, 7, 6, 6), (6, 2, 2, 2, 3), True, False, dict(dilations=[3, 1, 2], group=2)),
    ("same-upper", (1, 2, 5, 4, 6), (2, 2, 3, 3, 2), False, True, dict(auto_pad="SAME_UPPER", strides=[2, 1, 2])),
    ("pads-beyond-the-kernel", (1, 1, 2, 3, 3), (2, 1, 2, 2, 2), True, False, dict(pads=[3, 0, 0, 2, 1, 1])),
]


@pytest.mark.parametrize("case", CONV, ids=ids(CONV))
def test_conv_3d(case):
    _, x, w, bias, constant, attrs = case
    ins = [("x", x), ("w", rand(*w, seed=2) if constant else w), ("b", rand(w[0], seed=3) if bias else None)]
    check(node_model("Conv", ins[:3 if bias else 2], opset=13, **attrs))


TRANSPOSED = [  # id, x shape, w shape, bias, constant weights, attrs
    ("plain", (1, 1, 3, 4, 5), (1, 2, 3, 3, 3), False, False, {}),
    ("strides-pads-bias", (2, 3, 3, 4, 3), (3, 2, 2, 3, 3), True, True,
     dict(strides=[2, 1, 3], pads=[1, 0, 1, 0, 2, 1])),
    ("dilations-groups-output-padding", (1, 4, 3, 3, 4), (4, 3, 2, 2, 3), True, False,
     dict(dilations=[2, 1, 2], group=2, strides=[3, 2, 2], output_padding=[1, 1, 0])),
    ("output-shape", (1, 2, 3, 3, 3), (2, 2, 3, 2, 2), False, True, dict(strides=[2, 2, 2], output_shape=[6, 6, 5])),
    ("same-lower", (1, 2, 3, 4, 2), (2, 1, 3, 3, 3), True, True, dict(strides=[2, 1, 2], auto_pad="SAME_LOWER")),
]


@pytest.mark.parametrize("case", TRANSPOSED, ids=ids(TRANSPOSED))
def test_conv_transpose_3d(case):
    _, x, w, bias, constant, attrs = case
    group = attrs.get("group", 1)
    ins = [("x", x), ("w", rand(*w, seed=2) if constant else w), ("b", rand(w[1] * group, seed=3) if bias else None)]
    check(node_model("ConvTranspose", ins[:3 if bias else 2], opset=13, **attrs))


def test_conv_3d_weights_of_an_undeclared_shape():
    """No kernel_shape, weights computed by a node without a declared shape: ONNX's shape inference tells their
    rank."""
    nodes = [helper.make_node("Identity", ["w0"], ["w"]), helper.make_node("Conv", ["x", "w"], ["y"])]
    check(make_model(nodes, {"x": (1, 2, 3, 4, 3), "w0": (3, 2, 2, 2, 2)}, ["y"]))


def test_a_3d_kernel_over_a_2d_input_is_refused():
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[2, 2, 2])], "bad",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(rand(3, 2, 2, 2, 2), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(CglowError, match="needs static 5-D shapes of positive dims"):
        cglow.compile_model(model)
