"""Shape rules of the ops whose output length depends on the data: NonZero, Compress, Unique and NonMaxSuppression.
Each such output gets its capacity (the most there can be) as its static length along one dim, marked
TensorType.counted: the generated C returns the run-time count beside it (docs/c-api.md)."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from ..geometry import axis
from ..ir import TensorType
from ..registry import Args, require_float
from .reduce import ALL_NUMBERS, I64, require

VALUES = ALL_NUMBERS | {np.dtype(np.bool_)}  # what these ops select among: any element type computed in C


def nonzero(args: Args) -> list[TensorType]:
    """[rank, size]: the coordinates of each nonzero element, at most one column per element."""
    require(args, VALUES)
    shape = args.shape(0)
    if not shape:
        raise CglowError(f"{args.node.describe()}: a scalar input is not supported (NonZero takes rank >= 1)")
    return [TensorType(I64, (len(shape), args.types[0].size), counted=1)]


def compress_axis(args: Args) -> tuple[int | None, int]:
    """The axis a Compress selects along (None: the flattened input) and its length."""
    shape = args.shape(0)
    if args.node.attr("axis") is None:
        return None, args.types[0].size
    at = axis(args.node, args.node.attr("axis"), len(shape))
    return at, shape[at]


def compress(args: Args) -> list[TensorType]:
    """The input with the selected slices along the axis (the flattened input without one): as many as the
    condition holds true values when it is a constant, else its capacity, min(length of the condition, of the
    axis)."""
    require(args, VALUES)
    if args.types[1].dtype != np.bool_ or len(args.shape(1)) != 1:
        raise CglowError(f"{args.node.describe()}: the condition '{args.node.inputs[1]}' must be a 1-D bool tensor, "
                         f"not {args.types[1]}")
    at, length = compress_axis(args)
    capacity = min(args.shape(1)[0], length)
    cond = args.consts[1]
    kept = capacity if cond is None else int(np.count_nonzero(cond[:capacity]))
    shape = (kept,) if at is None else args.shape(0)[:at] + (kept,) + args.shape(0)[at + 1:]
    return [TensorType(args.types[0].dtype, shape, counted=None if cond is not None else at or 0)]


def unique_axis(args: Args) -> int | None:
    at = args.node.attr("axis")
    return None if at is None else axis(args.node, at, len(args.shape(0)))


def unique(args: Args) -> list[TensorType]:
    """Y (the distinct values, or slices along the axis), indices and counts: at most one per element (per slice);
    inverse_indices: one per element (per slice)."""
    require(args, VALUES)
    shape = args.shape(0)
    at = unique_axis(args)
    n = args.types[0].size if at is None else shape[at]
    y = (n,) if at is None else shape
    dtype = args.types[0].dtype
    return [TensorType(dtype, y, counted=at or 0), TensorType(I64, (n,), counted=0), TensorType(I64, (n,)),
            TensorType(I64, (n,), counted=0)]


def nms_capacity(args: Args) -> int:
    """The most boxes a NonMaxSuppression selects per batch and class: max_output_boxes_per_class (a constant; 0
    when not given), at most the boxes."""
    if not args.has(2):
        return 0
    limit = args.const(2, "max_output_boxes_per_class").reshape(-1)
    if limit.size != 1:
        raise CglowError(f"{args.node.describe()}: max_output_boxes_per_class must hold one value, not {limit.size}")
    return int(min(max(int(limit[0]), 0), args.shape(0)[1]))


def non_max_suppression(args: Args) -> list[TensorType]:
    """[batches x classes x capacity, 3] (nms_capacity): the (batch, class, box) of each selected box."""
    require_float(args, 0, 1, 3, 4)
    boxes, scores = args.shape(0), args.shape(1)
    if len(boxes) != 3 or boxes[2] != 4 or len(scores) != 3 or scores[0] != boxes[0] or scores[2] != boxes[1]:
        raise CglowError(f"{args.node.describe()}: boxes [batches, boxes, 4] and scores [batches, classes, boxes] "
                         f"expected, not {args.types[0]} and {args.types[1]}")
    for i, what in ((3, "iou_threshold"), (4, "score_threshold")):
        if args.has(i) and args.types[i].size != 1:
            raise CglowError(f"{args.node.describe()}: {what} must hold one value, not {args.types[i]}")
    if args.node.attr("center_point_box", 0) not in (0, 1):
        raise CglowError(f"{args.node.describe()}: center_point_box must be 0 or 1")
    capacity = scores[0] * scores[1] * nms_capacity(args)
    return [TensorType(I64, (capacity, 3), counted=0 if capacity else None)]

