"""Lowering of NonMaxSuppression, per batch and class: each box's rank by descending score (ties to the lower index,
a Reduce over pairs as TopK's), the boxes' corners in that order (a Gather), which pairs overlap beyond the threshold
(a Map over pairs), the greedy suppression (a Compact with those conflicts, at most max_output_boxes_per_class), then
the selected of every batch and class listed in order (a second Compact, up to the output's capacity, which
--capacity may lower: graph/capacity.py) as (batch, class, box) rows, and counted (all of them). O(boxes^2) per
batch and class."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...graph.ir import Node
from ...graph.registry import OpSpec, declare
from ...graph.rules import selection as rules
from ...instr.expr import ACC, Expr, Input, and_, binary, eq, ge, gt, inputs, lit, lt, or_, select
from ...instr.ir import Gather, Map, Reduce, View
from ..context import Context
from .reduce import positions, repeat_rows, spread
from .selection import I64, count_kept, kept_positions, zero_where_negative
from .tensor import node_args

F32 = np.dtype(np.float32)


def _smaller(a: Expr, b: Expr) -> Expr:
    return select(lt(a, b), a, b)


def _larger(a: Expr, b: Expr) -> Expr:
    return select(gt(a, b), a, b)


def _column(view: View, t: int) -> View:
    """Element t of the last dim of view, that dim dropped."""
    return View(view.buf, view.offset + t * view.strides[-1], view.shape[:-1], view.strides[:-1])


def _corners(ctx: Context, node: Node) -> View:
    """Every box as (y_min, x_min, y_max, x_max), [batches, boxes, 4] float32: from two opposite corners in either
    order, or (center_point_box) from the center and the size."""
    boxes = ctx.view(node.inputs[0])
    corners = ctx.temp(boxes.shape, f"{node.name} corners")
    a, b = inputs(2)
    if node.attr("center_point_box", 0):  # [x_center, y_center, width, height]
        parts = [((1, 3), a - b / 2.0), ((0, 2), a - b / 2.0), ((1, 3), a + b / 2.0), ((0, 2), a + b / 2.0)]
    else:  # [y1, x1, y2, x2]
        parts = [((0, 2), _smaller(a, b)), ((1, 3), _smaller(a, b)), ((0, 2), _larger(a, b)), ((1, 3), _larger(a, b))]
    for t, (pair, expr) in enumerate(parts):
        ctx.emit(Map(corners.slice(2, t, 1), tuple(boxes.slice(2, p, 1) for p in pair), expr, node.name))
    return corners


def _overlaps(threshold: Expr) -> Expr:
    """Whether box j (inputs 0-3: y_min, x_min, y_max, x_max) and box i (inputs 4-7) overlap beyond the threshold:
    intersection over union, in the reference's float32 operations and order."""
    yj0, xj0, yj1, xj1, yi0, xi0, yi1, xi1 = inputs(8)
    x0, x1, y0, y1 = _larger(xj0, xi0), _smaller(xj1, xi1), _larger(yj0, yi0), _smaller(yj1, yi1)
    inter = (x1 - x0) * (y1 - y0)
    area_i, area_j = (xi1 - xi0) * (yi1 - yi0), (xj1 - xj0) * (yj1 - yj0)
    union = area_i + area_j - inter
    tests = [gt(x1, x0), gt(y1, y0), gt(inter, 0.0), gt(area_i, 0.0), gt(area_j, 0.0), gt(union, 0.0),
             gt(inter / union, threshold)]
    result = tests[-1]
    for test in reversed(tests[:-1]):
        result = and_(test, result)
    return result


def _score_order(ctx: Context, node: Node) -> View:
    """order[b, c, r]: the box of rank r in class c of batch b, by descending score, ties to the lower index."""
    scores = ctx.view(node.inputs[1])
    n = scores.shape[-1]
    pos = positions(ctx, n, node.name)
    rank = ctx.temp(scores.shape, f"{node.name} rank", np.int32)
    pairs = scores.shape + (n,)  # [b, c, i, j]
    ins = (spread(scores, n), repeat_rows(scores, n), spread(pos, n).broadcast_to(pairs), pos.broadcast_to(pairs))
    a, b, i, j = inputs(4)
    ctx.emit(Reduce(rank, ins, "sum", or_(gt(b, a), and_(eq(b, a), lt(j, i))), ACC, node.name))
    order = ctx.temp(scores.shape, f"{node.name} order", np.int32)
    ins = (repeat_rows(rank, n), spread(pos, n).broadcast_to(pairs), pos.broadcast_to(pairs))
    rank_at, r, i = inputs(3)
    ctx.emit(Reduce(order, ins, "sum", select(eq(rank_at, r), i, 0), ACC, node.name))
    return order


def _given(node: Node, i: int) -> bool:
    return i < len(node.inputs) and bool(node.inputs[i])


def _scalar(ctx: Context, node: Node, i: int, shape: tuple[int, ...], views: list[View]) -> Expr:
    """Input i (one value; 0 when not given) in an expression over `views`, to which its view is added unless it is
    a constant (a literal)."""
    if not _given(node, i):
        return lit(0.0, F32)
    more, (value,) = ctx.operands([node.inputs[i]], shape, first=len(views))
    views += more
    return value


def _nms(ctx: Context, node: Node) -> None:
    out = ctx.new(node.outputs[0])
    per_class = rules.nms_capacity(node_args(ctx, node))
    if not per_class:
        return
    batches, classes, n = ctx.shape(node.inputs[1])
    order = _score_order(ctx, node)
    corners = ctx.temp((batches, classes, n, 4), f"{node.name} corners by score")
    boxes = _corners(ctx, node)  # the same for every class
    ctx.emit(Gather(corners, View(boxes.buf, boxes.offset, corners.shape, (n * 4, 0, 0, 1)), spread(order, 4), n, 4,
                    node.name))
    pairs = (batches, classes, n, n)  # [b, c, j, i]
    views = [spread(_column(corners, t), n) for t in range(4)] + [repeat_rows(_column(corners, t), n) for t in range(4)]
    iou = _scalar(ctx, node, 3, pairs, views)
    conflict = ctx.temp(pairs, f"{node.name} overlaps", np.bool_)
    ctx.emit(Map(conflict, tuple(views), _overlaps(iou), node.name))
    keep = ctx.const_view(np.ones(1, np.bool_), f"{node.name} every box").broadcast_to((batches, classes, n))
    if _given(node, 4):
        scores = ctx.view(node.inputs[1])
        by_score = ctx.temp((batches, classes, n), f"{node.name} scores by rank")
        ctx.emit(Gather(by_score, replace(scores, strides=scores.strides[:2] + (0,)), order, n, scores.strides[2],
                        node.name))
        views = [by_score]
        least = _scalar(ctx, node, 4, by_score.shape, views)
        keep = ctx.temp((batches, classes, n), f"{node.name} above the score threshold", np.bool_)
        ctx.emit(Map(keep, tuple(views), gt(Input(0), least), node.name))
    chosen = kept_positions(ctx, keep, per_class, node.name, conflict)  # ranks, [b, c, k]
    box = ctx.temp(chosen.shape, f"{node.name} selected boxes", np.int32)
    ctx.emit(Gather(box, replace(order, shape=chosen.shape, strides=order.strides[:2] + (0,)), chosen, n, 1,
                    node.name))
    total = chosen.size
    valid = ctx.temp((total,), f"{node.name} selected", np.bool_)
    ctx.emit(Map(valid, (chosen.reshape((total,)),), ge(Input(0), 0), node.name))
    listed = kept_positions(ctx, valid, out.shape[0], node.name)  # [m]: where in [b, c, k] the m-th selected box is
    box_at = ctx.temp(listed.shape, f"{node.name} box of each", np.int32)
    ctx.emit(Gather(box_at, View(box.buf, box.offset, listed.shape, (0,)), listed, total, 1, node.name))
    p, b, t = inputs(3)
    row = select(eq(t, 0), p / (classes * per_class), select(eq(t, 1), binary("%", p / per_class, classes), b))
    column = positions(ctx, 3, node.name)
    ctx.emit(Map(out, (spread(listed, 3), spread(box_at, 3), column.broadcast_to(out.shape)),
                 zero_where_negative(I64, row, p), node.name))
    ctx.counts[node.outputs[0]] = count_kept(ctx, valid, node.name)


declare({
    "NonMaxSuppression": OpSpec(rules.non_max_suppression, _nms, shape_inputs=(2,)),
})
