"""Lowering of Unique over pairs of elements (of slices along the axis), O(n^2) as TopK's ranks: each one's first
occurrence (an argmax over the equal ones), its rank among the distinct ones (how many first occurrences come before
it: in value order when sorted, lexicographic for slices, else in order of appearance), which is inverse_indices; the
first occurrence of each rank (indices), the values there (Y) and the occurrences of each rank (counts). Y, indices
and counts hold the distinct ones' count of entries, zeros after them (graph TensorType.counted), or their capacity's
first entries when --capacity lowered it below that count (graph/capacity.py)."""
from __future__ import annotations

import numpy as np

from ...graph.ir import Node
from ...graph.registry import OpSpec, declare
from ...graph.rules import selection as rules
from ...instr.expr import ACC, Expr, Input, and_, cast, eq, inputs, lit, lt, ne, select
from ...instr.ir import Gather, Map, Reduce, View
from ..context import Context
from .reduce import positions, repeat_rows, spread
from .selection import I64
from .tensor import node_args


def _rows(ctx: Context, x: View, label: str) -> View:
    """x [n, rest...] as a view [n, m] (m: the elements of a slice), copied first where strides cannot say it."""
    n = x.shape[0]
    m = x.size // n if n else 0
    rows = x.reshape((n, m))
    if rows is None:
        copy = ctx.temp(x.shape, f"{label} slices", ctx.buffers[x.buf].dtype)
        ctx.emit(Map(copy, (x,), Input(0), label))
        rows = copy.reshape((n, m))
    return rows


Test = tuple[tuple[View, ...], Expr]  # views over pairs [n (i), n (j)] and an expression over them


def _pair_tests(ctx: Context, rows: View, label: str) -> tuple[Test, Test]:
    """Whether slice j equals slice i, and whether slice j comes before slice i in sorted order (lexicographic: at
    their first differing element)."""
    n, m = rows.shape
    pairs = (n, n)
    xi, xj = inputs(2)
    if m == 1:
        x = View(rows.buf, rows.offset, (n,), rows.strides[:1])
        views = (spread(x, n), repeat_rows(x, n))
        return (views, eq(xj, xi)), (views, lt(xj, xi))
    slice_i = View(rows.buf, rows.offset, pairs + (m,), (rows.strides[0], 0, rows.strides[1]))
    slice_j = View(rows.buf, rows.offset, pairs + (m,), (0, rows.strides[0], rows.strides[1]))
    differ = ctx.temp(pairs, f"{label} differences", np.int32)
    ctx.emit(Reduce(differ, (slice_i, slice_j), "sum", ne(xj, xi), ACC, label))
    where = ctx.temp(pairs, f"{label} first difference", I64)
    ctx.emit(Reduce(where, (slice_i, slice_j), "argmax", ne(xj, xi), ACC, label))
    at_i, at_j = (ctx.temp(pairs, f"{label} first differing {s}", ctx.buffers[rows.buf].dtype) for s in "ij")
    for out, strides in ((at_i, (rows.strides[0], 0)), (at_j, (0, rows.strides[0]))):
        ctx.emit(Gather(out, View(rows.buf, rows.offset, pairs, strides), where, m, rows.strides[1], label))
    return ((differ,), eq(Input(0), 0)), ((at_i, at_j), lt(xj, xi))


def _output(ctx: Context, node: Node, k: int, shape: tuple[int, ...], dtype) -> View:
    """Output k's buffer, or a temporary when the node leaves it out."""
    if k < len(node.outputs) and node.outputs[k]:
        return ctx.new(node.outputs[k])
    return ctx.temp(shape, f"{node.name} output {k}", dtype)


def _unique(ctx: Context, node: Node) -> None:
    name, label = node.inputs[0], node.name
    at = rules.unique_axis(node_args(ctx, node))
    if at is None:
        x = ctx.reshaped(name, (ctx.graph.types[name].size,))
    else:
        x = ctx.view(name).permute((at,) + tuple(d for d in range(len(ctx.shape(name))) if d != at))
    n = x.shape[0]
    pairs, pos = (n, n), positions(ctx, n, label)
    (same_views, same), (views, before) = _pair_tests(ctx, _rows(ctx, x, label), label)
    first = ctx.temp((n,), f"{label} first occurrence", I64)  # first[i]: the first j equal to i
    ctx.emit(Reduce(first, same_views, "argmax", same, ACC, label))
    # inverse[i]: how many first occurrences j come before i's (by value when sorted, else by position)
    f_j, j, f_i = first.broadcast_to(pairs), pos.broadcast_to(pairs), spread(first, n)
    inverse = _output(ctx, node, 2, (n,), I64)
    if node.attr("sorted", 1):
        k = len(views)
        ctx.emit(Reduce(inverse, views + (f_j, j), "sum", and_(eq(Input(k), Input(k + 1)), before), ACC, label))
    else:
        fj, jj, fi = inputs(3)
        ctx.emit(Reduce(inverse, (f_j, j, f_i), "sum", and_(eq(fj, jj), lt(jj, fi)), ACC, label))
    count = ctx.temp((), f"{label} count", I64)
    ctx.emit(Reduce(count, (first, pos), "sum", eq(Input(0), Input(1)), ACC, label))
    # indices[r]: the first occurrence of rank r (over [r, i]); counts[r]: the occurrences of rank r; r below the
    # capacity (that of Y, indices and counts alike: graph/capacity.py)
    ranks = (ctx.graph.types[node.outputs[0]].shape[at or 0], n)
    f, i, rank = (v.broadcast_to(ranks) for v in (first, pos, inverse))
    r = spread(pos.slice(0, 0, ranks[0]), n)
    indices = _output(ctx, node, 1, ranks[:1], I64)
    fi, ii, ri, rank_i = inputs(4)
    ctx.emit(Reduce(indices, (f, i, r, rank), "sum", select(and_(eq(fi, ii), eq(rank_i, ri)), ii, 0), ACC, label))
    if len(node.outputs) > 3 and node.outputs[3]:
        ctx.emit(Reduce(ctx.new(node.outputs[3]), (rank, r), "sum", eq(Input(0), Input(1)), ACC, label))
    _values(ctx, node, x, at, indices, count, pos)
    for k in (0, 1, 3):
        if k < len(node.outputs) and node.outputs[k]:
            ctx.counts[node.outputs[k]] = count


def _values(ctx: Context, node: Node, x: View, at: int | None, indices: View, count: View, pos: View) -> None:
    """Y: the slices of x [n, rest...] at the indices (one per entry of Y's capacity), zero from the count on."""
    y = ctx.new(node.outputs[0])
    y = y.permute((at,) + tuple(d for d in range(len(y.shape)) if d != at)) if at is not None else y
    dtype = ctx.buffers[x.buf].dtype
    taken = ctx.temp(y.shape, f"{node.name} values", dtype)
    lead = (1,) * (len(y.shape) - 1)
    ctx.emit(Gather(taken, x.slice(0, 0, 1).broadcast_to(y.shape), indices.reshape(y.shape[:1] + lead).broadcast_to(
        y.shape), x.shape[0], x.strides[0], node.name))
    value, k, total = inputs(3)
    kept = select(lt(k, total), value, lit(0, dtype))
    ranks = pos.slice(0, 0, y.shape[0]).reshape(y.shape[:1] + lead).broadcast_to(y.shape)
    ctx.emit(Map(y, (taken, ranks, count.broadcast_to(y.shape)), cast(dtype, kept) if dtype.kind in "iu" else kept,
                 node.name))


declare({
    "Unique": OpSpec(rules.unique, _unique),
})
