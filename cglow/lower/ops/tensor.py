"""Lowering of data movement: reshapes and transposes are views, concat copies into slices."""
from __future__ import annotations

from ...graph.geometry import axis
from ...graph.ir import Node
from ...instr.ir import Map
from ..context import Context, lowering


@lowering("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def _reshape(ctx: Context, node: Node) -> None:
    shape = ctx.shape(node.outputs[0])
    view = ctx.view(node.inputs[0]).reshape(shape) or ctx.contiguous(node.inputs[0]).reshape(shape)
    ctx.bind(node.outputs[0], view)


@lowering("Transpose")
def _transpose(ctx: Context, node: Node) -> None:
    rank = len(ctx.shape(node.inputs[0]))
    perm = tuple(node.attr("perm", range(rank - 1, -1, -1)))
    ctx.bind(node.outputs[0], ctx.view(node.inputs[0]).permute(perm))


@lowering("Concat")
def _concat(ctx: Context, node: Node) -> None:
    out = ctx.new(node.outputs[0])
    at = axis(node, node.attr("axis", 0), len(out.shape))
    start = 0
    for name in node.inputs:
        length = ctx.shape(name)[at]
        if length:
            ctx.emit(Map(out.slice(at, start, length), (ctx.view(name),), "{0}", node.name))
        start += length
