"""3-D Conv and ConvTranspose (rank-5 inputs, N C D H W) as sums of 2-D ones over the kernel's depth, built per
node before import (graph/decompose.py applies them): the Conv primitive is 2-D. Depth index kd of the kernel
pairs input depth i with output depth o where o stride + kd dilation - pad = i (Conv) or i stride + kd dilation -
pad = o (ConvTranspose): that pairing is a constant one-hot matrix, a MatMul along the depth axis (exact: each
value times 1, plus zeros), which also pads, crops and spreads by the stride. The depth slices then run as the
batch of a 2-D convolution with the kernel's slice kd."""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnx

from ..errors import CglowError
from .builder import Builder, attrs_of, named
from .geometry import window
from .ir import Node
from .rules.conv_transpose import transposed


def ir_node(node: onnx.NodeProto) -> Node:
    """The node as cglow's graph IR holds it (strings decoded), for the geometry of graph/geometry.py."""
    attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs_of(node).items()}
    return Node(node.op_type, node.name or node.op_type, tuple(node.input), tuple(node.output), attrs)


def _shapes(b: Builder, shapes: dict) -> tuple[tuple[int, ...], tuple[int, ...]]:
    x, w = shapes.get(b.node.input[0]), shapes.get(b.node.input[1])
    if x is None or w is None or len(x) != 5 or len(w) != 5 or min(x + w) < 1:
        raise CglowError(f"{named(b.node)}: a 3-D convolution needs static 5-D shapes of positive dims of its input "
                         f"and weights, not {list(x) if x else 'unknown'} and {list(w) if w else 'unknown'}")
    return x, w


def _i(b: Builder, values) -> str:
    return b.const(np.array(values, np.int64))


def _kernel_slice(b: Builder, kd: int) -> str:
    """The weights' 2-D kernel at depth kd: W[:, :, kd]."""
    return b.add("Gather", [b.node.input[1], b.const(np.array(kd, np.int64))], axis=2)


def _conv_3d(b: Builder, shapes: dict, consts: dict) -> None:
    """Y = the sum over kd of Conv2D(X's depths o stride + kd dilation - pad, as a batch; W[:, :, kd]), the
    bias added by the first."""
    node = b.node
    (n, c, depth, height, width), w_shape = _shapes(b, shapes)
    ir = ir_node(node)
    win = window(ir, (depth, height, width), tuple(ir.attr("kernel_shape", w_shape[2:])))
    m, out = w_shape[0], win.out
    x = b.add("Reshape", [node.input[0], _i(b, [n, c, depth, height * width])])
    total = None
    for kd in range(win.kernel[0]):
        pick = np.zeros((out[0], depth), np.float32)
        for o in range(out[0]):
            i = o * win.strides[0] + kd * win.dilations[0] - win.pads_begin[0]
            if 0 <= i < depth:
                pick[o, i] = 1.0
        if not pick.any():
            continue
        picked = b.add("MatMul", [b.const(pick), x])  # [n, c, out depth, h w]
        picked = b.add("Transpose", [b.add("Reshape", [picked, _i(b, [n, c, out[0], height, width])])],
                       perm=[0, 2, 1, 3, 4])
        inputs = [b.add("Reshape", [picked, _i(b, [n * out[0], c, height, width])]), _kernel_slice(b, kd)]
        if total is None and len(node.input) > 2 and node.input[2]:
            inputs.append(node.input[2])
        y = b.add("Conv", inputs, kernel_shape=list(win.kernel[1:]), strides=list(win.strides[1:]),
                  dilations=list(win.dilations[1:]), pads=list(win.pads_begin[1:] + win.pads_end[1:]),
                  group=ir.attr("group", 1))
        total = y if total is None else b.add("Add", [total, y])
    if total is None:
        raise CglowError(f"{named(node)}: the pads leave no output depth any input reaches")
    total = b.add("Reshape", [total, _i(b, [n, out[0], m, out[1], out[2]])])
    b.add("Transpose", [total], node.output[0], perm=[0, 2, 1, 3, 4])


def _conv_transpose_3d(b: Builder, shapes: dict, consts: dict) -> None:
    """Each kd's ConvTranspose2D of X's depths (as a batch) by W[:, :, kd] (its height and width attributes),
    all concatenated along depth and placed by one MatMul: input depth i of slice kd lands on output depth
    i stride + kd dilation - pad (nowhere if that is outside); then the bias."""
    node = b.node
    (n, c, depth, height, width), w_shape = _shapes(b, shapes)
    ir = ir_node(node)
    geo = transposed(ir, (depth, height, width), tuple(ir.attr("kernel_shape", w_shape[2:])))
    group, m = ir.attr("group", 1), w_shape[1] * ir.attr("group", 1)
    flat = b.add("Transpose", [node.input[0]], perm=[0, 2, 1, 3, 4])
    flat = b.add("Reshape", [flat, _i(b, [n * depth, c, height, width])])
    plane = {k: list(v[1:]) for k, v in (("strides", geo.strides), ("dilations", geo.dilations),
                                         ("output_padding", geo.output_padding))}
    pads = list(geo.pads_begin[1:] + geo.pads_end[1:])
    if min(pads) < 0:  # an output_shape beyond the natural one: the 2-D op takes it as such
        plane.update(output_shape=list(geo.out[1:]), auto_pad=ir.attr("auto_pad", "NOTSET"))
    else:
        plane["pads"] = pads
    slices = []
    for kd in range(geo.kernel[0]):
        y = b.add("ConvTranspose", [flat, _kernel_slice(b, kd)], kernel_shape=list(geo.kernel[1:]), group=group,
                  **plane)
        slices.append(b.add("Reshape", [y, _i(b, [n, depth, m * geo.out[1] * geo.out[2]])]))
    place = np.zeros((geo.out[0], geo.kernel[0] * depth), np.float32)
    for kd in range(geo.kernel[0]):
        for i in range(depth):
            o = i * geo.strides[0] + kd * geo.dilations[0] - geo.pads_begin[0]
            if 0 <= o < geo.out[0]:
                place[o, kd * depth + i] = 1.0
    stacked = b.add("Concat", slices, axis=1) if len(slices) > 1 else slices[0]
    placed = b.add("Reshape", [b.add("MatMul", [b.const(place), stacked]),
                               _i(b, [n, geo.out[0], m, geo.out[1], geo.out[2]])])
    bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
    y = b.add("Transpose", [placed], None if bias else node.output[0], perm=[0, 2, 1, 3, 4])
    if bias:
        b.add("Add", [y, b.add("Reshape", [bias, _i(b, [1, m, 1, 1, 1])])], node.output[0])


def declared_ranks(model: onnx.ModelProto) -> dict[str, int]:
    """The rank of every value whose shape the model declares (an initializer, a graph input, a value_info)."""
    g = model.graph
    ranks = {t.name: len(t.dims) for t in g.initializer}
    ranks.update({v.name: len(v.type.tensor_type.shape.dim) for v in list(g.input) + list(g.value_info)
                  if v.type.tensor_type.HasField("shape")})
    return ranks


def volumetric(node: onnx.NodeProto, ranks: dict[str, int]) -> bool | None:
    """Whether a node is a Conv or ConvTranspose over 3 spatial dims, from its kernel_shape or its weights' rank
    in `ranks`; None where neither tells."""
    if node.op_type not in VOLUMETRIC or len(node.input) < 2 or node.domain not in ("", "ai.onnx"):
        return False
    for a in node.attribute:
        if a.name == "kernel_shape":
            return len(a.ints) == 3
    return ranks[node.input[1]] == 5 if node.input[1] in ranks else None


VOLUMETRIC: dict[str, Callable[[Builder, dict, dict], None]] = {"Conv": _conv_3d,
                                                               "ConvTranspose": _conv_transpose_3d}
