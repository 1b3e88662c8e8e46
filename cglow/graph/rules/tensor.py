"""Shape rules of data-movement ops: reshape family, transpose, concat, split, slice, pad, tile, expand,
depth/space rearrangements. The helpers that read an op's constant operands serve the lowering too."""
from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto, helper

from ...errors import CglowError
from ..geometry import axis, broadcast
from ..ir import Node, TensorType
from ..registry import Args


def reshape_target(node: Node, shape: tuple[int, ...], spec: np.ndarray, allowzero: bool) -> tuple[int, ...]:
    spec = [int(v) for v in spec.reshape(-1)]
    if not allowzero:
        spec = [shape[i] if v == 0 and i < len(shape) else v for i, v in enumerate(spec)]
    known = math.prod(v for v in spec if v != -1)
    total = math.prod(shape)
    if spec.count(-1) > 1 or any(v < -1 for v in spec):
        raise CglowError(f"{node.describe()}: invalid target shape {spec}")
    if -1 in spec:
        if known == 0 or total % known:
            raise CglowError(f"{node.describe()}: cannot reshape {shape} to {spec}")
        spec[spec.index(-1)] = total // known
    if math.prod(spec) != total:
        raise CglowError(f"{node.describe()}: cannot reshape {shape} ({total} elements) to {spec}")
    return tuple(spec)


def _axes(args: Args, attr_until: int) -> list[int] | None:
    """Squeeze/Unsqueeze axes: an attribute before opset 13, an optional input since."""
    if args.opset < attr_until:
        axes = args.node.attr("axes")
    else:
        axes = args.const(1, "axes").tolist() if args.has(1) else None
    return None if axes is None else [int(a) for a in axes]


def reshape(args: Args) -> list[TensorType]:
    target = reshape_target(args.node, args.shape(0), args.const(1, "the target shape"),
                            bool(args.node.attr("allowzero", 0)))
    return [TensorType(args.types[0].dtype, target)]


def flatten(args: Args) -> list[TensorType]:
    shape = args.shape(0)
    value = args.node.attr("axis", 1)  # in [-rank, rank]; a negative axis counts from rank, not rank + 1
    at = axis(args.node, value, len(shape) + 1 if value >= 0 else len(shape))
    return [TensorType(args.types[0].dtype, (math.prod(shape[:at]), math.prod(shape[at:])))]


def squeeze(args: Args) -> list[TensorType]:
    shape = args.shape(0)
    axes = _axes(args, 13)
    axes = [i for i, d in enumerate(shape) if d == 1] if axes is None else \
        [axis(args.node, a, len(shape)) for a in axes]
    if any(shape[a] != 1 for a in axes):
        raise CglowError(f"{args.node.describe()}: cannot squeeze axes {axes} of shape {shape}")
    return [TensorType(args.types[0].dtype, tuple(d for i, d in enumerate(shape) if i not in axes))]


def unsqueeze(args: Args) -> list[TensorType]:
    axes = _axes(args, 13)
    if not axes:
        raise CglowError(f"{args.node.describe()}: Unsqueeze needs axes")
    shape = list(args.shape(0))
    rank = len(shape) + len(axes)
    for a in sorted(axis(args.node, a, rank) for a in axes):
        shape.insert(a, 1)
    return [TensorType(args.types[0].dtype, tuple(shape))]


def transpose(args: Args) -> list[TensorType]:
    shape = args.shape(0)
    perm = tuple(args.node.attr("perm", range(len(shape) - 1, -1, -1)))
    if sorted(perm) != list(range(len(shape))):
        raise CglowError(f"{args.node.describe()}: perm {list(perm)} is not a permutation of rank {len(shape)}")
    return [TensorType(args.types[0].dtype, tuple(shape[p] for p in perm))]


def concat(args: Args) -> list[TensorType]:
    first = args.shape(0)
    at = axis(args.node, args.node.attr("axis", 0), len(first))
    total = 0
    for t in args.types:
        if len(t.shape) != len(first) or any(d != e for i, (d, e) in enumerate(zip(t.shape, first)) if i != at) \
                or t.dtype != args.types[0].dtype:
            raise CglowError(f"{args.node.describe()}: input {t} does not match {args.types[0]} outside axis {at}")
        total += t.shape[at]
    return [TensorType(args.types[0].dtype, first[:at] + (total,) + first[at + 1:])]


def split(args: Args) -> list[TensorType]:
    at, sizes = split_sizes(args)
    shape = args.shape(0)
    return [TensorType(args.types[0].dtype, shape[:at] + (n,) + shape[at + 1:]) for n in sizes]


def split_sizes(args: Args) -> tuple[int, list[int]]:
    """The split axis and the length of each part: the `split` attribute before opset 13, an optional
    input since; without it, equal parts: the axis must divide evenly before opset 18, and from 18 on the
    attribute num_outputs says how many (the last one smaller when the axis does not divide evenly)."""
    node, shape = args.node, args.shape(0)
    at = axis(node, node.attr("axis", 0), len(shape))
    split = node.attr("split") if args.opset < 13 else args.const(1, "split").tolist() if args.has(1) else None
    if split is None:
        if args.opset >= 18 and node.attr("num_outputs") is None:
            raise CglowError(f"{node.describe()}: needs a split input or the num_outputs attribute")
        parts = node.attr("num_outputs", len(node.outputs))
        if args.opset < 18 and shape[at] % parts:
            raise CglowError(f"{node.describe()}: axis {at} of {shape} does not split evenly into {parts} parts")
        chunk = -(-shape[at] // parts)
        split = [chunk] * (parts - 1) + [shape[at] - chunk * (parts - 1)]
    split = [int(n) for n in split]
    if len(split) != len(node.outputs) or sum(split) != shape[at] or min(split) < 0:
        raise CglowError(f"{node.describe()}: cannot split axis {at} of {shape} into {split} "
                         f"for {len(node.outputs)} outputs")
    return at, split


def sliced(args: Args) -> list[TensorType]:
    return [TensorType(args.types[0].dtype, tuple(len(r) for r in slice_ranges(args)))]


def slice_ranges(args: Args) -> list[range]:
    """The input indices Slice keeps along each axis. ONNX clamps a start into [0, dim] and an end into
    [0, dim] when stepping forward, into [0, dim - 1] and [-1, dim - 1] when stepping back: unlike a Python
    slice, a start before the first element then keeps the first element."""
    node, shape = args.node, args.shape(0)
    starts, ends = args.const(1, "starts").tolist(), args.const(2, "ends").tolist()
    axes = args.const(3, "axes").tolist() if args.has(3) else list(range(len(starts)))
    steps = args.const(4, "steps").tolist() if args.has(4) else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps) or 0 in steps:
        raise CglowError(f"{node.describe()}: starts {starts}, ends {ends}, axes {axes} and steps {steps} "
                         f"must have one entry per axis, and steps no zero")
    kept = [range(d) for d in shape]
    for a, start, end, step in zip(axes, starts, ends, steps):
        a = axis(node, a, len(shape))
        d = shape[a]
        low, high = (0, d) if step > 0 else (-1, d - 1)
        start, end = (min(max(v + d if v < 0 else v, low), high) for v in (start, end))
        kept[a] = range(max(start, 0), end, step) if d else range(0)
    return kept


PAD_MODES = ("constant", "reflect", "edge", "wrap")


def pad(args: Args) -> list[TensorType]:
    node, shape = args.node, args.shape(0)
    mode = node.attr("mode", "constant")
    if mode not in PAD_MODES:
        raise CglowError(f"{node.describe()}: unknown mode '{mode}' (supported: {', '.join(PAD_MODES)})")
    out = []
    for d, (begin, end) in zip(shape, pad_widths(args)):
        kept = d + min(begin, 0) + min(end, 0)  # negative pads crop
        if kept < 0 or mode != "constant" and max(begin, end) > 0 and \
                (kept == 0 or mode == "reflect" and max(begin, end) >= kept):
            raise CglowError(f"{node.describe()}: cannot pad an axis of {kept} elements by {(begin, end)} "
                             f"in mode '{mode}'")
        out.append(kept + max(begin, 0) + max(end, 0))
    return [TensorType(args.types[0].dtype, tuple(out))]


def pad_widths(args: Args) -> list[tuple[int, int]]:
    """(begin, end) for every axis, from the `pads` input and the optional `axes` input (opset 18)."""
    node, rank = args.node, len(args.shape(0))
    pads = [int(p) for p in args.const(1, "pads").reshape(-1)]
    axes = [axis(node, int(a), rank) for a in args.const(3, "axes").reshape(-1)] if args.has(3) else range(rank)
    if len(pads) != 2 * len(axes):
        raise CglowError(f"{node.describe()}: {len(pads)} pads for {len(axes)} axes")
    widths = [(0, 0)] * rank
    for i, a in enumerate(axes):
        widths[a] = (pads[i], pads[len(axes) + i])
    return widths


def tile(args: Args) -> list[TensorType]:
    shape = args.shape(0)
    repeats = [int(r) for r in args.const(1, "repeats").reshape(-1)]
    if len(repeats) != len(shape) or min(repeats, default=0) < 0:
        raise CglowError(f"{args.node.describe()}: repeats {repeats} do not match rank {len(shape)}")
    return [TensorType(args.types[0].dtype, tuple(d * r for d, r in zip(shape, repeats)))]


def expand(args: Args) -> list[TensorType]:
    target = tuple(int(d) for d in args.const(1, "the target shape").reshape(-1))
    return [TensorType(args.types[0].dtype, broadcast(args.node, args.shape(0), target))]


def depth_space(args: Args) -> list[TensorType]:
    shape, b = args.shape(0), args.node.attr("blocksize", 0)
    divisors = (b * b, 1, 1) if args.node.op == "DepthToSpace" else (1, b, b)
    if len(shape) != 4 or b < 1 or any(d % k for d, k in zip(shape[1:], divisors)) or \
            args.node.attr("mode", "DCR") not in ("DCR", "CRD"):
        raise CglowError(f"{args.node.describe()}: needs a 4-D NCHW input whose dims fit blocksize {b}, and mode "
                         f"DCR or CRD")
    return [TensorType(args.types[0].dtype, block_layout(args.node, shape)[2])]


def block_layout(node: Node, shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """DepthToSpace and SpaceToDepth as a reshape of the input to 6-D, a transpose, and the output shape."""
    n, c, h, w = shape
    b, dcr = node.attr("blocksize"), node.attr("mode", "DCR") == "DCR"  # SpaceToDepth has a mode since opset 28
    if node.op == "SpaceToDepth":
        return (n, c, h // b, b, w // b, b), (0, 3, 5, 1, 2, 4) if dcr else (0, 1, 3, 5, 2, 4), \
            (n, c * b * b, h // b, w // b)
    if dcr:
        six, perm = (n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2)
    else:
        six, perm = (n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3)
    return six, perm, (n, c // (b * b), h * b, w * b)


WINDOWS = ("HannWindow", "HammingWindow", "BlackmanWindow")


def eye_like(args: Args) -> list[TensorType]:
    """EyeLike: a 2-D input's shape, of the dtype attribute's type (else the input's)."""
    if len(args.shape(0)) != 2:
        raise CglowError(f"{args.node.describe()}: the input must be 2-D, not {list(args.shape(0))}")
    dtype = args.node.attr("dtype")
    return [TensorType(args.types[0].dtype if dtype is None else np.dtype(helper.tensor_dtype_to_np_dtype(dtype)),
                       args.shape(0))]


def folded(args: Args) -> list[TensorType]:
    """These ops are folded at import: Shape and Size always (shapes are static); ConstantOfShape, Range, the
    window functions and MelWeightMatrix when their inputs are constants, whose output types are computed here so
    that the importer can check their size before it folds them. A run-time input has no static output shape."""
    node = args.node
    if node.op in ("ConstantOfShape", "Range") and all(c is not None for c in args.consts):
        if node.op == "ConstantOfShape":
            value = node.attr("value", np.zeros(1, np.float32))
            return [TensorType(value.dtype, tuple(int(d) for d in args.consts[0].reshape(-1)))]
        start, limit, delta = (float(c) for c in args.consts)
        if delta == 0 or not math.isfinite((limit - start) / delta):
            raise CglowError(f"{node.describe()}: no finite range from {start} to {limit} by {delta}")
        return [TensorType(args.types[0].dtype, (max(math.ceil((limit - start) / delta), 0),))]
    if node.op in WINDOWS + ("MelWeightMatrix",) and all(c is not None for c in args.consts):
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(node.attr("output_datatype", TensorProto.FLOAT)))
        if node.op != "MelWeightMatrix":
            return [TensorType(dtype, (int(args.consts[0].reshape(-1)[0]),))]
        bins, length = (int(c.reshape(-1)[0]) for c in args.consts[:2])
        return [TensorType(dtype, (length // 2 + 1, bins))]
    raise CglowError(f"{node.describe()}: its output shape depends on run-time values; cglow compiles "
                     f"static graphs, so its inputs must be constants")
