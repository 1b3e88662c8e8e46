"""Softmax along the last axis between a DequantizeLinear and a QuantizeLinear on 8-bit values (tf2onnx writes a
fully-integer TFLite model's SOFTMAX so) as IntSoftmaxTable: no float, and no float tensor in the arena.

An 8-bit row's exponentials exp(s (q - max)) take 256 values at most, one per difference d = max - q: a table
of round(2^30 exp(-s d)), made now. At run time each row's maximum, its elements' table entries and their sum
(int64), and each output zy + round(e / (sum sy)), in int64 as e (2^16 / sy) / (sum 2^16) with 2^16 / sy
rounded: within 2^-20 of a step of the exact softmax that onnxruntime quantizes (in float32), so the same
step but where that lies that close to a half. LiteRT's own fixed-point kernel (IntSoftmax, which a .tflite
file's SOFTMAX becomes) is a step off the exact result now and then."""
from __future__ import annotations

import math

import numpy as np

from ..ir import Node
from .params import QParams, dequantized

ONE = 30           # the table's exp(0)
RATIO_BITS = 16    # 1 / sy in units of 2^-16
MAX_RATIO = 2 ** 15  # 1 / sy below this and rows up to MAX_ROW keep every product and sum within int64
MAX_ROW = 2 ** 15


def table(scale: float) -> np.ndarray:
    """round(2^30 exp(-scale d)) for d in 0..255, int32."""
    return np.array([round(math.ldexp(math.exp(-scale * d), ONE)) for d in range(256)], np.int32)


def int_softmax(b, op: Node, out: QParams, bounds) -> Node | None:
    """`b`: fold.py's builder state (its site and new constants)."""
    x = dequantized(b.site, op.inputs[0])
    if x is None or not x.p.per_tensor or x.p.dtype.itemsize != 1:
        return None
    shape = b.site.shape(x.source)
    default = -1 if b.site.graph.opset >= 13 else 1
    ratio = 1 / float(np.float32(out.scale[0]))
    if not shape or op.attr("axis", default) % len(shape) != len(shape) - 1 or shape[-1] > MAX_ROW or \
            ratio >= MAX_RATIO:
        return None
    exps = b.const(f"{op.name}/exp", table(float(np.float32(x.p.scale[0]))))
    attrs = dict(ratio=round(math.ldexp(ratio, RATIO_BITS)), y_zero=int(out.zero[0]), lo=bounds[0], hi=bounds[1])
    return Node("IntSoftmaxTable", op.name, (x.source, exps), (), attrs)
