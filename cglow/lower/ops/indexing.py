"""Lowering of the ops that pick elements by index: Gather, GatherElements and GatherND become gather
primitives (Gather a plain view when constant indices step evenly), OneHot and Trilu maps over constant
index-derived operands."""
from __future__ import annotations

import numpy as np

from ...graph.geometry import axis
from ...graph.ir import Node
from ...graph.registry import OpSpec, declare
from ...graph.rules import indexing as rules
from ...graph.rules.indexing import one_hot_depth
from ...instr.expr import Input, binary, cast, eq, lift, lit, lt, select
from ...instr.ir import Gather, Map, View, contiguous_strides
from ..context import Context
from .tensor import node_args


def _steps_evenly(indices: np.ndarray, length: int) -> tuple[int, int] | None:
    """(first, step) when the indices (negatives counted from the end) are first, first + step, ..."""
    flat = indices.reshape(-1).astype(np.int64) % length
    if not flat.size:
        return None
    step = int(flat[1] - flat[0]) if flat.size > 1 else 1
    return (int(flat[0]), step) if np.array_equal(flat, flat[0] + step * np.arange(flat.size)) else None


def _gather(ctx: Context, node: Node) -> None:
    """out[a..., i..., b...] = data[a..., indices[i...], b...]: data's view spans out with a stride 0
    over the index dims, the index view spans it with strides 0 over the others."""
    data, out_name = ctx.view(node.inputs[0]), node.outputs[0]
    at = axis(node, node.attr("axis", 0), len(data.shape))
    index_shape, shape = ctx.shape(node.inputs[1]), ctx.shape(out_name)
    indices = ctx.const(node.inputs[1])
    even = None if indices is None else _steps_evenly(indices, data.shape[at])
    if even is not None:  # a strided view of the data
        first, step = even
        strides = tuple(s * step * data.strides[at] for s in contiguous_strides(index_shape))
        ctx.bind(out_name, View(data.buf, data.offset + first * data.strides[at], shape,
                                data.strides[:at] + strides + data.strides[at + 1:]))
        return
    index = ctx.view(node.inputs[1])
    outer, inner, rest = data.strides[:at], (0,) * len(index_shape), data.strides[at + 1:]
    ctx.emit(Gather(ctx.new(out_name), View(data.buf, data.offset, shape, outer + inner + rest),
                    View(index.buf, index.offset, shape, (0,) * len(outer) + index.strides + (0,) * len(rest)),
                    data.shape[at], data.strides[at], node.name))


def _gather_elements(ctx: Context, node: Node) -> None:
    """out[i] = data[i with its axis coordinate replaced by indices[i]]."""
    data, index = ctx.view(node.inputs[0]), ctx.view(node.inputs[1])
    at = axis(node, node.attr("axis", 0), len(data.shape))
    strides = data.strides[:at] + (0,) + data.strides[at + 1:]
    ctx.emit(Gather(ctx.new(node.outputs[0]), View(data.buf, data.offset, index.shape, strides), index,
                    data.shape[at], data.strides[at], node.name))


def flat_positions(ctx: Context, node: Node, picked: tuple[int, ...]) -> View:
    """A map of the node's index tuples (its input 1, the tuples along its last dim) to positions over the dims
    `picked` taken as one flat axis, negative components counted from their dim: GatherND's and ScatterND's."""
    index, index_shape = ctx.view(node.inputs[1]), ctx.shape(node.inputs[1])
    components = tuple(View(index.buf, index.offset + t * index.strides[-1], index_shape[:-1], index.strides[:-1])
                       for t in range(index_shape[-1]))
    terms = [select(lt(Input(t), 0), Input(t) + d, Input(t)) * m
             for t, (d, m) in enumerate(zip(picked, contiguous_strides(picked)))]
    positions = ctx.temp(index_shape[:-1], f"{node.name} positions", np.int64)
    ctx.emit(Map(positions, components, sum(terms[1:], start=terms[0]) if terms else lift(0), node.name))
    return positions


def _gather_nd(ctx: Context, node: Node) -> None:
    """Each index tuple as a position over the gathered dims taken as one flat axis (flat_positions); one gather
    reads the data at those positions."""
    shape, index_shape = ctx.shape(node.inputs[0]), ctx.shape(node.inputs[1])
    batch, depth = node.attr("batch_dims", 0), index_shape[-1]
    picked, rest = shape[batch:batch + depth], shape[batch + depth:]
    positions = flat_positions(ctx, node, picked)
    data = ctx.reshaped(node.inputs[0], shape[:batch] + (int(np.prod(picked, dtype=np.int64)),) + rest)
    out_shape = ctx.shape(node.outputs[0])
    inner = (0,) * (len(index_shape) - 1 - batch)
    ctx.emit(Gather(ctx.new(node.outputs[0]),
                    View(data.buf, data.offset, out_shape, data.strides[:batch] + inner + data.strides[batch + 1:]),
                    View(positions.buf, 0, out_shape, positions.strides + (0,) * len(rest)),
                    data.shape[batch], data.strides[batch], node.name))


def _one_hot(ctx: Context, node: Node) -> None:
    """out[a..., d, b...] = values[1] if indices[a..., b...] (negatives counted from depth) == d else
    values[0], with d read from a constant 0, 1, ..., depth - 1 spread over the new axis."""
    depth = one_hot_depth(node_args(ctx, node))
    index, values = ctx.view(node.inputs[0]), ctx.view(node.inputs[2])
    shape = ctx.shape(node.outputs[0])
    at = axis(node, node.attr("axis", -1), len(shape))
    zeros = (0,) * len(shape)
    counter = ctx.const_view(np.arange(depth, dtype=np.int64), f"{node.name} positions")
    ins = (View(index.buf, index.offset, shape, index.strides[:at] + (0,) + index.strides[at:]),
           View(counter.buf, 0, shape, zeros[:at] + (1,) + zeros[at + 1:]),
           View(values.buf, values.offset, shape, zeros),
           View(values.buf, values.offset + values.strides[0], shape, zeros))
    j = cast(np.int64, Input(0))
    hot = eq(select(lt(j, 0), j + depth, j), Input(1))
    ctx.emit(Map(ctx.new(node.outputs[0]), ins, select(hot, Input(3), Input(2)), node.name))


def _trilu(ctx: Context, node: Node) -> None:
    """The input where column - row of each matrix (a constant broadcast over the batch dims) is at least
    k (upper) or at most k (lower), else zero."""
    shape = ctx.shape(node.outputs[0])
    rows, cols = shape[-2:]
    diagonal = ctx.const_view(np.arange(cols)[None, :] - np.arange(rows)[:, None], f"{node.name} diagonals")
    k_input = [name for name in node.inputs[1:] if name]
    views, values = ctx.operands(k_input, shape, first=2)  # a constant k becomes a literal
    k = values[0] if k_input else lift(0)
    keep = ">=" if node.attr("upper", 1) else "<="
    zero = lit(0, ctx.dtype(node.outputs[0]))
    ctx.emit(Map(ctx.new(node.outputs[0]), (ctx.view(node.inputs[0]), diagonal.broadcast_to(shape)) + views,
                 select(binary(keep, Input(1), k), Input(0), zero), node.name))


declare({
    "Gather": OpSpec(rules.gather, _gather, int8="movement"),
    "GatherElements": OpSpec(rules.gather_elements, _gather_elements),
    "GatherND": OpSpec(rules.gather_nd, _gather_nd),
    "OneHot": OpSpec(rules.one_hot, _one_hot, shape_inputs=(1,)),
    "Trilu": OpSpec(rules.trilu, _trilu),
})
