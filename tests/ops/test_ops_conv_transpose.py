"""ConvTranspose against onnxruntime (tolerance: onnx_ops.TOL, relative 1e-5)."""
from __future__ import annotations

import pytest
from onnx import helper

from tests.onnx_ops import check, ids, make_model, node_model, rand

CASES = [  # id, x shape, w shape [C, M/group, k...], bias, attrs
    ("3x3", (1, 3, 5, 5), (3, 4, 3, 3), True, {}),
    ("stride2", (1, 3, 4, 5), (3, 2, 3, 3), True, dict(strides=[2, 2])),
    ("stride-3x2-pads", (1, 2, 3, 3), (2, 3, 3, 3), True, dict(strides=[3, 2], pads=[1, 2, 1, 2])),
    ("pads-asym", (1, 2, 5, 4), (2, 3, 3, 3), True, dict(pads=[0, 1, 2, 1])),
    ("pads-beyond-reach", (1, 2, 6, 6), (2, 2, 3, 3), True, dict(strides=[2, 2], pads=[3, 3, 4, 2])),
    ("output_padding", (1, 2, 3, 4), (2, 3, 3, 3), True, dict(strides=[3, 2], output_padding=[1, 1])),
    ("dilation2", (1, 2, 4, 4), (2, 3, 3, 3), True, dict(dilations=[2, 2])),
    ("dilation-stride-pads", (1, 2, 4, 5), (2, 3, 3, 2), True,
     dict(dilations=[2, 1], strides=[2, 3], pads=[1, 0, 2, 1])),
    ("group2", (1, 4, 4, 4), (4, 3, 3, 3), True, dict(group=2, strides=[2, 2], pads=[1, 1, 1, 1])),
    ("depthwise", (1, 4, 5, 5), (4, 1, 3, 3), True, dict(group=4, strides=[2, 2])),
    ("same-upper", (1, 2, 4, 5), (2, 3, 3, 3), True, dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    ("same-lower", (1, 2, 4, 5), (2, 3, 3, 3), True, dict(auto_pad="SAME_LOWER", strides=[2, 2])),
    ("same-upper-k4", (1, 2, 4, 4), (2, 3, 4, 4), False, dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    ("valid", (1, 2, 4, 4), (2, 3, 3, 3), True, dict(auto_pad="VALID", strides=[2, 2])),
    ("output_shape-larger", (1, 1, 3, 3), (1, 2, 3, 3), True, dict(strides=[3, 2], output_shape=[10, 8])),
    ("output_shape-smaller-odd", (1, 2, 4, 4), (2, 3, 3, 3), True, dict(strides=[2, 2], output_shape=[8, 7])),
    ("output_shape-same-upper", (1, 2, 4, 4), (2, 3, 3, 3), True,
     dict(strides=[2, 2], output_shape=[7, 8], auto_pad="SAME_UPPER")),
    ("output_shape-output_padding", (1, 1, 3, 3), (1, 2, 3, 3), False,
     dict(strides=[3, 2], output_shape=[10, 8], output_padding=[1, 1], kernel_shape=[3, 3])),
    ("no-bias", (1, 3, 4, 4), (3, 2, 2, 2), False, dict(strides=[2, 2])),
    ("batch2", (2, 3, 4, 4), (3, 2, 3, 3), True, dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    ("1d", (1, 3, 6), (3, 4, 3), True, {}),
    ("1d-stride2-pads", (2, 3, 6), (3, 2, 4), True, dict(strides=[2], pads=[1, 1])),
    ("1d-dilation-output_padding", (1, 2, 5), (2, 2, 3), True, dict(strides=[3], dilations=[2], output_padding=[2])),
    ("1d-group2-same-lower", (1, 4, 5), (4, 1, 3), True, dict(group=2, strides=[2], auto_pad="SAME_LOWER")),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_conv_transpose(case):
    _, x, w, bias, attrs = case
    ins = [("x", x), ("w", rand(*w, seed=2))] + ([("b", rand(w[1] * attrs.get("group", 1), seed=3))] if bias else [])
    check(node_model("ConvTranspose", ins, **attrs))


RUNTIME = [c for c in CASES if c[0] in ("stride-3x2-pads", "group2", "depthwise", "1d-group2-same-lower")]


@pytest.mark.parametrize("case", RUNTIME, ids=ids(RUNTIME))
def test_conv_transpose_runtime_weights(case):
    """Weights computed at run time (graph inputs): flipped and regrouped by a Gemm instead of NumPy."""
    _, x, w, bias, attrs = case
    ins = [("x", x), ("w", w)] + ([("b", (w[1] * attrs.get("group", 1),))] if bias else [])
    check(node_model("ConvTranspose", ins, **attrs))


def test_conv_transpose_relu_input():
    """The input produced by a map: the spreading copy may be fused with it."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("ConvTranspose", ["r", "w", "b"], ["y"], strides=[2, 2], pads=[1, 1, 0, 0])]
    check(make_model(nodes, {"x": (1, 2, 3, 4)}, ["y"], {"w": rand(2, 3, 3, 3, seed=2), "b": rand(3, seed=3)}))
