"""Lowering of data movement: reshapes, transposes, slices and splits are views; concat, pad, tile, expand
and the depth/space rearrangements copy through views (maps whose expression is the input itself)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...graph.geometry import axis
from ...graph.ir import Node
from ...graph.registry import Args, OpSpec, declare
from ...graph.rules import tensor as rules
from ...graph.rules.tensor import block_layout, pad_widths, slice_ranges, split_sizes
from ...instr.expr import Input, lit
from ...instr.ir import Map, View
from ..context import Context


def node_args(ctx: Context, node: Node) -> Args:
    """What the node's shape rule saw, for the helpers that read its constant operands."""
    return Args(node, tuple(ctx.graph.types.get(n) for n in node.inputs), tuple(ctx.const(n) for n in node.inputs),
                ctx.graph.opset)


def along(view: View, at: int, start: int, length: int, step: int = 1) -> View:
    """`length` elements of axis `at`, from `start` (relative to the view, may be negative) every `step`."""
    stride = view.strides[at]
    return replace(view, offset=view.offset + start * stride, shape=view.shape[:at] + (length,) + view.shape[at + 1:],
                   strides=view.strides[:at] + (stride * step,) + view.strides[at + 1:])


def copy(ctx: Context, node: Node, source: View) -> None:
    """The output, a fresh buffer, is `source` in row-major order (source may have more dims, same size)."""
    out = ctx.new(node.outputs[0])
    ctx.emit(Map(out.reshape(source.shape), (source,), Input(0), node.name))


def _reshape(ctx: Context, node: Node) -> None:
    ctx.bind(node.outputs[0], ctx.reshaped(node.inputs[0], ctx.shape(node.outputs[0])))


def _transpose(ctx: Context, node: Node) -> None:
    rank = len(ctx.shape(node.inputs[0]))
    perm = tuple(node.attr("perm", range(rank - 1, -1, -1)))
    ctx.bind(node.outputs[0], ctx.view(node.inputs[0]).permute(perm))


def _concat(ctx: Context, node: Node) -> None:
    orders = {ctx.view(name).order() for name in node.inputs if name}
    out = ctx.new(node.outputs[0], orders.pop() if len(orders) == 1 else None)  # the inputs' common layout
    at = axis(node, node.attr("axis", 0), len(out.shape))
    start = 0
    for name in node.inputs:
        length = ctx.shape(name)[at]
        if length:
            ctx.emit(Map(out.slice(at, start, length), (ctx.view(name),), Input(0), node.name))
        start += length


def _split(ctx: Context, node: Node) -> None:
    at, sizes = split_sizes(node_args(ctx, node))
    x, start = ctx.view(node.inputs[0]), 0
    for name, length in zip(node.outputs, sizes):
        ctx.bind(name, x.slice(at, start, length))
        start += length


def _slice(ctx: Context, node: Node) -> None:
    view = ctx.view(node.inputs[0])
    for at, kept in enumerate(slice_ranges(node_args(ctx, node))):
        view = along(view, at, kept.start, len(kept), kept.step)
    ctx.bind(node.outputs[0], view)


def _pad(ctx: Context, node: Node) -> None:
    """The input is copied into the interior of the output; then, axis by axis, each border is written:
    a constant, or a copy from the output itself (mirrored with a negative stride, repeated with a zero
    stride, or shifted by the axis length). Borders of axis k span the padded extent of the axes before k,
    which are complete by then, and the interior of the axes after it, which get their borders later."""
    widths = pad_widths(node_args(ctx, node))
    mode = node.attr("mode", "constant")
    value = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
    x = ctx.view(node.inputs[0])
    out = ctx.new(node.outputs[0], x.order())
    inner = out
    for at, (begin, end) in enumerate(widths):  # negative pads crop the input
        x = along(x, at, max(-begin, 0), x.shape[at] - max(-begin, 0) - max(-end, 0))
        inner = along(inner, at, max(begin, 0), x.shape[at])
    ctx.emit(Map(inner, (x,), Input(0), node.name))
    for at, (begin, end) in enumerate(widths):
        begin, end, n = max(begin, 0), max(end, 0), inner.shape[at]
        if not begin and not end:
            continue
        for dest, source in _borders(mode, inner, at, begin, n, end):
            if source is not None:
                ctx.emit(Map(dest, (source,), Input(0), node.name))
            elif value:
                views, values = ctx.operands([value], dest.shape)
                ctx.emit(Map(dest, views, values[0], node.name))
            else:
                ctx.emit(Map(dest, (), lit(0, ctx.dtype(node.outputs[0])), node.name))
        inner = along(inner, at, -begin, begin + n + end)


def _borders(mode: str, inner: View, at: int, begin: int, n: int, end: int) -> list[tuple[View, View | None]]:
    """(destination, source) views of the output for the borders of axis `at` around its n interior
    elements (at offsets 0 to n - 1 of `inner`), ordered so that every source is written before it is read."""
    if mode == "wrap":  # blocks of at most n elements, each a copy of the n elements further in
        pairs = []
        for high in range(0, -begin, -n):
            low = max(high - n, -begin)
            pairs.append((along(inner, at, low, high - low), along(inner, at, low + n, high - low)))
        for low in range(n, n + end, n):
            high = min(low + n, n + end)
            pairs.append((along(inner, at, low, high - low), along(inner, at, low - n, high - low)))
        return pairs
    sources = {"constant": (None, None),
               "edge": (along(inner, at, 0, begin, 0), along(inner, at, n - 1, end, 0)),
               "reflect": (along(inner, at, begin, begin, -1), along(inner, at, n - 2, end, -1))}[mode]
    return [(along(inner, at, -begin, begin), sources[0]), (along(inner, at, n, end), sources[1])]


def _tile(ctx: Context, node: Node) -> None:
    """A copy from a view with an extra stride-0 dim before each dim: (r0, d0, r1, d1, ...)."""
    x = ctx.view(node.inputs[0])
    repeats = [int(r) for r in ctx.const(node.inputs[1]).reshape(-1)]
    shape = sum(((r, d) for r, d in zip(repeats, x.shape)), ())
    copy(ctx, node, View(x.buf, x.offset, shape, sum(((0, s) for s in x.strides), ())))


def _expand(ctx: Context, node: Node) -> None:
    copy(ctx, node, ctx.view(node.inputs[0]).broadcast_to(ctx.shape(node.outputs[0])))


def _depth_space(ctx: Context, node: Node) -> None:
    six, perm, _ = block_layout(node, ctx.shape(node.inputs[0]))
    copy(ctx, node, ctx.reshaped(node.inputs[0], six).permute(perm))


declare({
    "Concat": OpSpec(rules.concat, _concat, int8="movement"),
    "DepthToSpace": OpSpec(rules.depth_space, _depth_space, int8="movement"),
    "Expand": OpSpec(rules.expand, _expand, int8="movement", shape_inputs=(1,)),
    "Flatten": OpSpec(rules.flatten, _reshape, int8="movement"),
    "Pad": OpSpec(rules.pad, _pad, shape_inputs=(1, 2, 3)),
    "Reshape": OpSpec(rules.reshape, _reshape, int8="movement", shape_inputs=(1,)),
    "Slice": OpSpec(rules.sliced, _slice, int8="movement", shape_inputs=(1, 2, 3, 4)),
    "SpaceToDepth": OpSpec(rules.depth_space, _depth_space, int8="movement"),
    "Split": OpSpec(rules.split, _split, shape_inputs=(1,)),
    "Squeeze": OpSpec(rules.squeeze, _reshape, int8="movement", shape_inputs=(1,)),
    "Tile": OpSpec(rules.tile, _tile, int8="movement", shape_inputs=(1,)),
    "Transpose": OpSpec(rules.transpose, _transpose, int8="movement"),
    "Unsqueeze": OpSpec(rules.unsqueeze, _reshape, int8="movement", shape_inputs=(1,)),
})

def _eye_like(ctx: Context, node: Node) -> None:
    """A constant: ones on the diagonal k (the input gives only its shape)."""
    n, m = ctx.shape(node.inputs[0])
    eye = np.eye(n, m, node.attr("k", 0), dtype=ctx.dtype(node.outputs[0]))
    ctx.emit(Map(ctx.new(node.outputs[0]), (ctx.const_view(eye, node.name),), Input(0), node.name))


declare({
    "EyeLike": OpSpec(rules.eye_like, _eye_like),
})

declare({  # always folded at import: their outputs depend on shapes or constant inputs only
    "ConstantOfShape": OpSpec(rules.folded, None, shape_inputs=(0,)),
    **{op: OpSpec(rules.folded, None, shape_inputs=(0,)) for op in rules.WINDOWS},
    "MelWeightMatrix": OpSpec(rules.folded, None, shape_inputs=(0, 1, 2, 3, 4)),
    "Range": OpSpec(rules.folded, None, shape_inputs=(0, 1, 2)),
    "Shape": OpSpec(rules.folded, None),
    "Size": OpSpec(rules.folded, None),
})
