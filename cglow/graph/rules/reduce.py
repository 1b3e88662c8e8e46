"""Shape rules of the reductions and of the ops lowered onto them: Reduce*, ArgMax/ArgMin, GlobalMaxPool,
CumSum, and the normalizations over axes (LpNormalization, InstanceNormalization, LRN)."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from ..geometry import axis
from ..ir import Node, TensorType
from ..registry import Args, require_float, same_as_input

AXES_INPUT_SINCE = {"ReduceSum": 13}  # the opset from which axes are an input, not an attribute; others 18
NUMBERS = {np.dtype(t) for t in (np.float32, np.int32, np.int64, np.uint32, np.uint64)}  # what reductions take
ALL_NUMBERS = NUMBERS | {np.dtype(t) for t in (np.int8, np.int16, np.uint8, np.uint16)}
DTYPES = {op: NUMBERS | {np.dtype(t) for t in (np.int8, np.uint8, np.bool_)} for op in ("ReduceMax", "ReduceMin")}
I64 = np.dtype(np.int64)


def require(args: Args, allowed: set[np.dtype]) -> None:
    dtype = args.types[0].dtype
    if dtype not in allowed:
        names = ", ".join(sorted(d.name for d in allowed))
        raise CglowError(f"{args.node.describe()}: input '{args.node.inputs[0]}' is {dtype.name}; supported: {names}")


def reduced_axes(node: Node, opset: int, rank: int, axes: np.ndarray | None) -> tuple[int, ...]:
    """The sorted axes a Reduce* node reduces (`axes`: its constant axes input, if any). No axes given means
    all of them, or none with noop_with_empty_axes."""
    if opset < AXES_INPUT_SINCE.get(node.op, 18):
        axes = node.attr("axes")
    axes = [] if axes is None else [int(a) for a in np.reshape(axes, -1)]
    if not axes:
        return () if node.attr("noop_with_empty_axes", 0) else tuple(range(rank))
    return tuple(sorted({axis(node, a, rank) for a in axes}))


def reduced_shape(shape: tuple[int, ...], axes, keepdims: bool) -> tuple[int, ...]:
    return tuple(1 if i in axes else d for i, d in enumerate(shape) if keepdims or i not in axes)


def reduction(args: Args) -> list[TensorType]:
    require(args, DTYPES.get(args.node.op, NUMBERS))
    shape = args.shape(0)
    axes = reduced_axes(args.node, args.opset, len(shape), args.const(1, "axes") if args.has(1) else None)
    return [TensorType(args.types[0].dtype, reduced_shape(shape, axes, bool(args.node.attr("keepdims", 1))))]


def arg(args: Args) -> list[TensorType]:
    require(args, ALL_NUMBERS)
    shape = args.shape(0)
    at = axis(args.node, args.node.attr("axis", 0), len(shape))
    return [TensorType(I64, reduced_shape(shape, (at,), bool(args.node.attr("keepdims", 1))))]


def cumsum(args: Args) -> list[TensorType]:
    require(args, NUMBERS)
    axis(args.node, int(args.const(1, "axis").reshape(-1)[0]), len(args.shape(0)))
    return same_as_input(args)


def lp_normalization(args: Args) -> list[TensorType]:
    require_float(args, 0)
    axis(args.node, args.node.attr("axis", -1), len(args.shape(0)))
    if args.node.attr("p", 2) not in (1, 2):
        raise CglowError(f"{args.node.describe()}: p={args.node.attr('p')} is not supported (1 or 2)")
    return same_as_input(args)


def instance_normalization(args: Args) -> list[TensorType]:
    require_float(args, 0, 1, 2)
    shape = args.shape(0)
    if len(shape) < 3 or args.shape(1) != shape[1:2] or args.shape(2) != shape[1:2]:
        raise CglowError(f"{args.node.describe()}: needs input [N,C,...] (rank >= 3) with scale and bias of "
                         f"shape ({shape[1] if len(shape) > 1 else 'C'},)")
    return same_as_input(args)


def lrn(args: Args) -> list[TensorType]:
    require_float(args, 0)
    if len(args.shape(0)) < 3 or args.node.attr("size", 0) < 1:
        raise CglowError(f"{args.node.describe()}: needs input [N,C,...] (rank >= 3) and a positive size")
    return same_as_input(args)
