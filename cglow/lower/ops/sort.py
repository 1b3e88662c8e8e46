"""Lowering of TopK: each element's rank by a Reduce over a broadcast comparison, the indices by a Reduce
over the ranks, then a Gather of the values. O(n^2) per row."""
from __future__ import annotations

import numpy as np

from ...graph.geometry import axis
from ...graph.ir import Node
from ...graph.registry import OpSpec, declare
from ...graph.rules import sort as rules
from ...instr.expr import ACC, and_, binary, eq, inputs, lt, or_, select
from ...instr.ir import Gather, Reduce
from ..context import Context
from .reduce import last_axis, positions, repeat_rows, spread


def _topk(ctx: Context, node: Node) -> None:
    shape = ctx.shape(node.inputs[0])
    at = axis(node, node.attr("axis", -1), len(shape))
    n, k = shape[at], int(ctx.const(node.inputs[1]).reshape(-1)[0])
    last = last_axis(len(shape), at)
    x = ctx.view(node.inputs[0]).permute(last)
    values, indices = (ctx.new(name).permute(last) for name in node.outputs)
    outer = x.shape[:-1]
    pos = positions(ctx, n, node.name)
    # rank[o, i]: how many x[o, j] come first: larger (smaller if not largest), or equal at a lower index
    rank = ctx.temp(x.shape, f"{node.name} rank", np.int32)
    pairs = outer + (n, n)  # [outer..., i, j]
    beats = ">" if node.attr("largest", 1) else "<"
    ins = (spread(x, n), repeat_rows(x, n), spread(pos, n).broadcast_to(pairs), pos.broadcast_to(pairs))
    a, b, i, j = inputs(4)
    ctx.emit(Reduce(rank, ins, "sum", or_(binary(beats, b, a), and_(eq(b, a), lt(j, i))), ACC, node.name))
    # indices[o, r]: the i of rank r, for r < k
    slots = outer + (k, n)  # [outer..., r, i]
    ins = (repeat_rows(rank, k), spread(pos.slice(0, 0, k), n).broadcast_to(slots), pos.broadcast_to(slots))
    rank_at, r, i = inputs(3)
    ctx.emit(Reduce(indices, ins, "sum", select(eq(rank_at, r), i, 0), ACC, node.name))
    ctx.emit(Gather(values, x.slice(len(outer), 0, 1).broadcast_to(values.shape), indices, n, x.strides[-1],
                    node.name))


declare({
    "TopK": OpSpec(rules.topk, _topk, shape_inputs=(1,)),
})
