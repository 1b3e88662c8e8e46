"""Shape rule of Resize, and the per-axis geometry (scale, output length, region of interest) its
lowering shares."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import CglowError
from ..geometry import axis
from ..ir import Node, TensorType
from ..registry import Args, require_float


@dataclass(frozen=True)
class Axis:
    scale: float                 # the scale of the coordinate transforms
    out: int
    roi: tuple[float, float]     # start and end, as fractions of the input; tf_crop_and_resize only
    length: float                # the output length align_corners divides by: scale x input length, fractional
                                 # when scales are given (the ONNX reference's, onnx/onnx#2462), else out


def _given(value: np.ndarray | None) -> np.ndarray | None:
    """An optional input, None when omitted or empty (opsets 11 and 12 pass empty tensors)."""
    return None if value is None or value.size == 0 else value.reshape(-1)


def cropping(node: Node) -> bool:
    """Whether the node reads its roi input (tf_crop_and_resize); other modes ignore it."""
    return node.attr("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize"


def resize_axes(node: Node, opset: int, shape: tuple[int, ...], roi, scales, sizes) -> list[Axis]:
    """One Axis per dim of the input; roi (read when cropping), scales and sizes are the constant inputs
    or None."""
    rank = len(shape)
    axes = [axis(node, int(a), rank) for a in node.attr("axes", range(rank))] if opset >= 18 else list(range(rank))
    roi, scales, sizes = _given(roi), _given(scales), _given(sizes)
    if (scales is None) == (sizes is None):
        raise CglowError(f"{node.describe()}: exactly one of scales and sizes must be given")
    given = scales if sizes is None else sizes
    if len(given) != len(axes):
        raise CglowError(f"{node.describe()}: scales or sizes do not match the {len(axes)} resized axes")
    factor, out = [1.0] * rank, list(shape)
    if sizes is None:
        for a, s in zip(axes, scales.astype(np.float64)):
            if s <= 0:
                raise CglowError(f"{node.describe()}: scales must be positive")
            factor[a], out[a] = float(s), int(s * shape[a])
    else:
        for a, s in zip(axes, sizes.astype(np.int64)):
            factor[a], out[a] = int(s) / shape[a], int(s)
        policy = node.attr("keep_aspect_ratio_policy", "stretch")
        if policy in ("not_larger", "not_smaller"):
            common = (min if policy == "not_larger" else max)(factor[a] for a in axes)
            for a in axes:
                factor[a], out[a] = common, int(common * shape[a] + 0.5)
        elif policy != "stretch":
            raise CglowError(f"{node.describe()}: unknown keep_aspect_ratio_policy '{policy}'")
    spans = [(0.0, 1.0)] * rank
    if cropping(node):
        if roi is None or len(roi) != 2 * len(axes):
            raise CglowError(f"{node.describe()}: tf_crop_and_resize needs a roi of {2 * len(axes)} values")
        for i, a in enumerate(axes):
            spans[a] = (float(roi[i]), float(roi[len(axes) + i]))
    lengths = [f * n for f, n in zip(factor, shape)] if sizes is None else out
    return [Axis(f, o, r, float(n)) for f, o, r, n in zip(factor, out, spans, lengths)]


def _optional(args: Args, i: int, what: str) -> np.ndarray | None:
    return args.const(i, what) if args.has(i) else None


EIGHT_BIT = {np.dtype(np.int8), np.dtype(np.uint8)}


def resize(args: Args) -> list[TensorType]:
    dtype, mode = args.types[0].dtype, args.node.attr("mode", "nearest")
    if dtype in EIGHT_BIT and mode == "cubic":  # its overshoot would leave the 8-bit range
        raise CglowError(f"{args.node.describe()}: cubic mode is supported for float32 only, not {dtype.name}")
    if dtype not in EIGHT_BIT:  # quantized models (QOperator) resize int8 directly, nearest or linear
        require_float(args, 0)
    roi = _optional(args, 1, "roi") if cropping(args.node) else None
    axes = resize_axes(args.node, args.opset, args.shape(0), roi, _optional(args, 2, "scales"),
                       _optional(args, 3, "sizes"))
    return [TensorType(dtype, tuple(a.out for a in axes))]
