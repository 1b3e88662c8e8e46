"""Shape rules of data-movement ops: reshape family, transpose, concat."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from ..geometry import axis
from ..ir import Node, TensorType
from ..registry import Args, shape_rule


def reshape_target(node: Node, shape: tuple[int, ...], spec: np.ndarray, allowzero: bool) -> tuple[int, ...]:
    spec = [int(v) for v in spec.reshape(-1)]
    if not allowzero:
        spec = [shape[i] if v == 0 and i < len(shape) else v for i, v in enumerate(spec)]
    known = int(np.prod([v for v in spec if v != -1], dtype=np.int64))
    total = int(np.prod(shape, dtype=np.int64))
    if spec.count(-1) > 1 or any(v < -1 for v in spec):
        raise CglowError(f"{node.describe()}: invalid target shape {spec}")
    if -1 in spec:
        if known == 0 or total % known:
            raise CglowError(f"{node.describe()}: cannot reshape {shape} to {spec}")
        spec[spec.index(-1)] = total // known
    if int(np.prod(spec, dtype=np.int64)) != total:
        raise CglowError(f"{node.describe()}: cannot reshape {shape} ({total} elements) to {spec}")
    return tuple(spec)


def _axes(args: Args, attr_until: int) -> list[int] | None:
    """Squeeze/Unsqueeze axes: an attribute before opset 13, an optional input since."""
    if args.opset < attr_until:
        axes = args.node.attr("axes")
    else:
        axes = args.const(1, "axes").tolist() if args.has(1) else None
    return None if axes is None else [int(a) for a in axes]


@shape_rule("Reshape")
def _reshape(args: Args) -> list[TensorType]:
    target = reshape_target(args.node, args.shape(0), args.const(1, "the target shape"),
                            bool(args.node.attr("allowzero", 0)))
    return [TensorType(args.types[0].dtype, target)]


@shape_rule("Flatten")
def _flatten(args: Args) -> list[TensorType]:
    shape = args.shape(0)
    value = args.node.attr("axis", 1)  # in [-rank, rank]; a negative axis counts from rank, not rank + 1
    at = axis(args.node, value, len(shape) + 1 if value >= 0 else len(shape))
    outer = int(np.prod(shape[:at], dtype=np.int64))
    return [TensorType(args.types[0].dtype, (outer, int(np.prod(shape[at:], dtype=np.int64))))]


@shape_rule("Squeeze")
def _squeeze(args: Args) -> list[TensorType]:
    shape = args.shape(0)
    axes = _axes(args, 13)
    axes = [i for i, d in enumerate(shape) if d == 1] if axes is None else \
        [axis(args.node, a, len(shape)) for a in axes]
    if any(shape[a] != 1 for a in axes):
        raise CglowError(f"{args.node.describe()}: cannot squeeze axes {axes} of shape {shape}")
    return [TensorType(args.types[0].dtype, tuple(d for i, d in enumerate(shape) if i not in axes))]


@shape_rule("Unsqueeze")
def _unsqueeze(args: Args) -> list[TensorType]:
    axes = _axes(args, 13)
    if not axes:
        raise CglowError(f"{args.node.describe()}: Unsqueeze needs axes")
    shape = list(args.shape(0))
    rank = len(shape) + len(axes)
    for a in sorted(axis(args.node, a, rank) for a in axes):
        shape.insert(a, 1)
    return [TensorType(args.types[0].dtype, tuple(shape))]


@shape_rule("Transpose")
def _transpose(args: Args) -> list[TensorType]:
    shape = args.shape(0)
    perm = tuple(args.node.attr("perm", range(len(shape) - 1, -1, -1)))
    if sorted(perm) != list(range(len(shape))):
        raise CglowError(f"{args.node.describe()}: perm {list(perm)} is not a permutation of rank {len(shape)}")
    return [TensorType(args.types[0].dtype, tuple(shape[p] for p in perm))]


@shape_rule("Concat")
def _concat(args: Args) -> list[TensorType]:
    first = args.shape(0)
    at = axis(args.node, args.node.attr("axis", 0), len(first))
    total = 0
    for t in args.types:
        if len(t.shape) != len(first) or any(d != e for i, (d, e) in enumerate(zip(t.shape, first)) if i != at) \
                or t.dtype != args.types[0].dtype:
            raise CglowError(f"{args.node.describe()}: input {t} does not match {args.types[0]} outside axis {at}")
        total += t.shape[at]
    return [TensorType(args.types[0].dtype, first[:at] + (total,) + first[at + 1:])]
