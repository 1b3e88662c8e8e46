"""RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR over the H and W axes of an NHWC tensor, with TFLite's
align_corners and half_pixel_centers.

Nearest neighbour only picks pixels: the source row and column of each output are computed here as TFLite's
GetNearestNeighbor computes them (float32 arithmetic, its rounding), and become Gather nodes, float32 or 8-bit
alike, so no coordinate formula of ONNX Resize has to agree with TFLite's to the last bit. A float32 bilinear
resize is an ONNX Resize (linear, its coordinate_transformation_mode: align_corners, half_pixel, or asymmetric
for TFLite's default, each clamping the source coordinate into the input as TFLite's bounds do). An 8-bit one
is TFLite's fixed-point arithmetic (reference_ops::ResizeBilinear for int8): coordinates in Q10, four
neighbours weighted by products of Q10 weights, the sum divided by 2^20 halves away from zero; its tables are
computed here and cglow's IntBilinear applies them (lower/ops/quant.py). Both 8-bit resizes move or blend the
integers themselves, so they need the output's scale and zero point to be the input's."""
from __future__ import annotations

import math

import numpy as np

from ...errors import CglowError
from ..ir import TensorType
from .arith import round_away
from .build import Build, translator
from .tensor import same_quant

Q10 = 1 << 10


def _sizes(b: Build) -> tuple[tuple[int, int], tuple[int, int]]:
    x = b.tensor(0)
    size = b.constant(1, "size").reshape(-1)
    if len(x.shape) != 4 or size.size != 2:
        raise CglowError(f"{b.op.describe()}: resizes a 4-D NHWC input to 2 sizes, got {list(x.shape)} and "
                         f"{size.size} sizes")
    if b.option("AlignCorners") and b.option("HalfPixelCenters"):
        raise CglowError(f"{b.op.describe()}: align_corners and half_pixel_centers are both set")
    return x.shape[1:3], (int(size[0]), int(size[1]))


def nearest(n: int, out: int, align: bool, half: bool) -> np.ndarray:
    """GetNearestNeighbor of each output index, in float32 as TFLite computes it."""
    f32 = np.float32
    scale = f32(n - 1) / f32(out - 1) if align and out > 1 else f32(n) / f32(out)
    at = [(f32(o) + f32(0.5 if half else 0.0)) * scale for o in range(out)]
    index = [min(int(round_away(float(v))) if align else math.floor(v), n - 1) for v in at]
    return np.array([max(i, 0) for i in index] if half else index, np.int64)


@translator("RESIZE_NEAREST_NEIGHBOR")
def _nearest(b: Build, op) -> None:
    same_quant(b)
    sizes, outs = _sizes(b)
    value = b.value(0)
    for axis, n, out in zip((1, 2), sizes, outs):
        index = nearest(n, out, bool(b.option("AlignCorners")), bool(b.option("HalfPixelCenters")))
        if not np.array_equal(index, np.arange(n)):
            value = b.add("Gather", [value, b.const("index", index)], {"axis": axis})
    b.finish(value)


def bilinear_taps(n: int, out: int, align: bool, half: bool) -> tuple[tuple[int, ...], ...]:
    """TFLite's 8-bit bilinear taps along one axis: each output's lower and upper source index and their Q10
    weights (which sum to 1024; at the edges both taps are one pixel)."""
    scale = (Q10 * (n - 1) + (out - 1) // 2) // (out - 1) if align and out > 1 else (Q10 * n + out // 2) // out
    lows, highs, w_lows, w_highs = [], [], [], []
    for o in range(out):
        at = o * scale + scale // 2 - Q10 // 2 if half else o * scale
        low = max(int(at / Q10), 0)  # C division, toward zero
        lows.append(low)
        highs.append(min(int((at + Q10 - 1) / Q10), n - 1))
        w_lows.append(Q10 - (at - Q10 * low))
        w_highs.append(at - Q10 * low)
    return tuple(lows), tuple(highs), tuple(w_lows), tuple(w_highs)


@translator("RESIZE_BILINEAR")
def _bilinear(b: Build, op) -> None:
    same_quant(b)
    sizes, outs = _sizes(b)
    align, half = bool(b.option("AlignCorners")), bool(b.option("HalfPixelCenters"))
    x = b.tensor(0)
    shape = (x.shape[0],) + outs + (x.shape[3],)
    if b.quantized():
        rows, cols = (bilinear_taps(n, out, align, half) for n, out in zip(sizes, outs))
        return b.finish(b.add("IntBilinear", [b.value(0)], {"rows": rows, "cols": cols},
                              out_type=TensorType(x.dtype, shape)))
    mode = "align_corners" if align else "half_pixel" if half else "asymmetric"
    b.finish(b.add("Resize", [b.value(0), "", "", b.const("sizes", np.array(shape, np.int64))],
                   {"mode": "linear", "coordinate_transformation_mode": mode}))
