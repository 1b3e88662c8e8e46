"""Lowering of the ops that keep the elements a mask selects, NonZero and Compress: a Compact lists the kept
positions in order, up to the output's capacity (-1 after them), a Reduce counts every one the mask keeps (beyond a
capacity lowered by --capacity too: graph/capacity.py), a Gather reads what they point at, zero beyond the count.
Their outputs have their capacity as static length and the count beside it (graph TensorType.counted); the helpers
here serve NonMaxSuppression and Unique too."""
from __future__ import annotations

import numpy as np

from ...graph.ir import Node
from ...graph.registry import OpSpec, declare
from ...graph.rules import selection as rules
from ...instr.expr import ACC, Input, binary, cast, inputs, lit, lt, ne, select
from ...instr.ir import Compact, Gather, Map, Reduce, View, contiguous_strides
from ..context import Context
from .tensor import node_args

I64 = np.dtype(np.int64)


def kept_positions(ctx: Context, keep: View, capacity: int, label: str, conflict: View | None = None) -> View:
    """The positions along keep's last dim of the candidates kept (instr/ir.py Compact), -1 after the last:
    int64 [*outer, capacity]."""
    positions = ctx.temp(keep.shape[:-1] + (capacity,), f"{label} kept", I64)
    ctx.emit(Compact(positions, keep, label, conflict))
    return positions


def count_kept(ctx: Context, keep: View, label: str) -> View:
    """How many candidates keep's last dim marks (nonzero), kept positions or not: an int64 scalar."""
    count = ctx.temp((), f"{label} count", I64)
    ctx.emit(Reduce(count, (keep,), "sum", ne(Input(0), 0), ACC, label))
    return count


def zero_where_negative(dtype: np.dtype, value, index) -> object:
    """value, or zero where index is negative (past the count), in dtype (an integer keeps its width)."""
    picked = select(lt(index, 0), lit(0, dtype), value)
    return cast(dtype, picked) if dtype.kind in "iu" else picked


def gather_kept(ctx: Context, out: View, data: View, index: View, axis_len: int, axis_stride: int,
                label: str) -> None:
    """out = Gather(data, index) (instr/ir.py Gather's views), zero where the index is -1."""
    dtype = ctx.buffers[data.buf].dtype
    taken = ctx.temp(out.shape, f"{label} taken", dtype)
    ctx.emit(Gather(taken, data, index, axis_len, axis_stride, label))
    ctx.emit(Map(out, (taken, index), zero_where_negative(dtype, Input(0), Input(1)), label))


def along_axis(view: View, at: int, rank: int) -> View:
    """A 1-D view [n] seen as [1..., n, 1...] with n at dim `at` of `rank`."""
    return view.reshape((1,) * at + view.shape + (1,) * (rank - at - 1))


def _nonzero(ctx: Context, node: Node) -> None:
    """The kept positions of the flattened input, each written as its coordinates, one per row."""
    shape = ctx.shape(node.inputs[0])
    n = ctx.graph.types[node.inputs[0]].size
    keep = ctx.reshaped(node.inputs[0], (n,))
    out = ctx.new(node.outputs[0])
    kept = kept_positions(ctx, keep, out.shape[1], node.name)
    strides = ctx.const_view(np.array(contiguous_strides(shape), np.int64).reshape(-1, 1), f"{node.name} strides")
    dims = ctx.const_view(np.array(shape, np.int64).reshape(-1, 1), f"{node.name} dims")
    p, stride, dim = inputs(3)
    ctx.emit(Map(out, tuple(v.broadcast_to(out.shape) for v in (kept, strides, dims)),
                 zero_where_negative(I64, binary("%", p / stride, dim), p), node.name))
    ctx.counts[node.outputs[0]] = count_kept(ctx, keep, node.name)


def _compress(ctx: Context, node: Node) -> None:
    """The slices along the axis (the elements of the flattened input) whose condition is true, in order."""
    at, length = rules.compress_axis(node_args(ctx, node))
    x = ctx.reshaped(node.inputs[0], (length,)) if at is None else ctx.view(node.inputs[0])
    at = at or 0
    out = ctx.new(node.outputs[0])
    candidates = min(ctx.shape(node.inputs[1])[0], length)
    keep = ctx.view(node.inputs[1]).slice(0, 0, candidates)
    kept = kept_positions(ctx, keep, out.shape[at], node.name)
    gather_kept(ctx, out, x.slice(at, 0, 1).broadcast_to(out.shape),
                along_axis(kept, at, len(out.shape)).broadcast_to(out.shape), length, x.strides[at], node.name)
    if ctx.graph.types[node.outputs[0]].counted is not None:
        ctx.counts[node.outputs[0]] = count_kept(ctx, keep, node.name)


declare({
    "NonZero": OpSpec(rules.nonzero, _nonzero),
    "Compress": OpSpec(rules.compress, _compress),
})
