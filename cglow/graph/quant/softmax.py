"""Softmax along the last axis between a DequantizeLinear and a QuantizeLinear on 8-bit values (tf2onnx writes a
fully-integer TFLite model's SOFTMAX so) as cglow's IntSoftmax, which computes what LiteRT's reference kernel
computes (graph/tflite/softmax.py): no float, and no float tensor in the arena. Its output is in LiteRT's
units, so the QuantizeLinear must take those: a scale of 1/256 and the type's least value as zero point (the
TFLite converter's, and so tf2onnx's). LiteRT's fixed-point exponential and reciprocal put a value within a
step of the exact softmax that onnxruntime quantizes."""
from __future__ import annotations

import numpy as np

from ..ir import Node
from ..tflite.softmax import DIFF_BITS, MAX_ROW, scaling
from .params import QParams, dequantized

UNIT = np.float32(1 / 256)  # the output's scale


def int_softmax(b, op: Node, out: QParams, bounds) -> Node | None:
    """`b`: fold.py's builder state (its site)."""
    x = dequantized(b.site, op.inputs[0])
    if x is None or not x.p.per_tensor or x.p.dtype.itemsize != 1 or out.dtype != x.p.dtype:
        return None
    shape = b.site.shape(x.source)
    info = np.iinfo(out.dtype)
    default = -1 if b.site.graph.opset >= 13 else 1
    if not shape or op.attr("axis", default) % len(shape) != len(shape) - 1 or shape[-1] > MAX_ROW or \
            np.float32(out.scale[0]) != UNIT or int(out.zero[0]) != info.min or \
            not x.p.scale[0] * (1 << (31 - DIFF_BITS)) > 1:  # scaling's least scale
        return None
    mult, shift, diff_min = scaling(1.0, float(x.p.scale[0]))
    attrs = dict(mult=mult, shift=shift, diff_min=diff_min, y_zero=int(info.min), lo=int(info.min), hi=int(info.max))
    return Node("IntSoftmax", op.name, (x.source,), (), attrs)
