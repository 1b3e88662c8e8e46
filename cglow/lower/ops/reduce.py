"""Lowering of the reductions to the Reduce primitive, the reduced axes permuted last: Reduce*, ArgMax,
ArgMin, GlobalMaxPool, and CumSum and CumProd (a masked sum or product over the axis)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ...graph.geometry import axis
from ...graph.ir import Node
from ...graph.registry import F32, OpSpec, declare
from ...graph.rules import nn as nn_rules
from ...graph.rules import reduce as reduce_rules
from ...graph.rules.reduce import reduced_axes
from ...instr.expr import ACC, Expr, Input, binary, call, cast, lit, lt, select
from ...instr.ir import Map, Reduce, View
from ..context import Context

X = Input(0)


class Types:
    """The element-type-dependent parts of the reductions' expressions: a float tensor's are float
    arithmetic; an integer tensor's mean divides by at least 1 (a mean over nothing: 0 rather than C's undefined
    x / 0), and its float functions take a float and give back the type."""

    def __init__(self, dtype: np.dtype, count: int = 1):
        self.dtype, self.is_float = dtype, dtype == F32
        self.n = lit(count if self.is_float else max(count, 1), dtype)  # the number of reduced elements
        self.abs = call("fabsf", X) if self.is_float else X if dtype.kind == "u" else select(lt(X, 0), -X, X)

    def float(self, e: Expr) -> Expr:
        return e if self.is_float else cast(F32, e)

    def back(self, e: Expr) -> Expr:
        return e if self.is_float else cast(self.dtype, e)


Over = Callable[[Types], Expr]
# op: (kind, pre over Input(0) (an input element), post over Acc), each of the element type's Types
REDUCTIONS: dict[str, tuple[str, Over, Over]] = {
    "ReduceSum": ("sum", lambda t: X, lambda t: ACC),
    "ReduceMean": ("sum", lambda t: X, lambda t: ACC / t.n),
    "ReduceMax": ("max", lambda t: X, lambda t: ACC),
    "ReduceMin": ("min", lambda t: X, lambda t: ACC),
    "ReduceProd": ("prod", lambda t: X, lambda t: ACC),
    "ReduceL1": ("sum", lambda t: t.abs, lambda t: ACC),
    "ReduceSumSquare": ("sum", lambda t: X * X, lambda t: ACC),
    "ReduceL2": ("sum", lambda t: X * X, lambda t: t.back(call("sqrtf", t.float(ACC)))),
    "ReduceLogSum": ("sum", lambda t: X, lambda t: t.back(call("logf", t.float(ACC)))),
}
# CumSum, CumProd: which j are summed (multiplied) into out[i], by (exclusive, reverse)
CUMULATIVE_TAKES = {(0, 0): "<=", (1, 0): "<", (0, 1): ">=", (1, 1): ">"}


def last_axis(rank: int, at: int) -> tuple[int, ...]:
    """The permutation that moves axis `at` last."""
    return tuple(d for d in range(rank) if d != at) + (at,)


def positions(ctx: Context, n: int, label: str) -> View:
    """A constant [0, 1, ..., n-1] (int32): element indices for the expressions that compare them."""
    return ctx.const_view(np.arange(n, dtype=np.int32), f"{label} positions")


def spread(view: View, *dims: int) -> View:
    """view [outer...] seen as [outer..., *dims], each element repeated over the new dims."""
    return view.reshape(view.shape + (1,) * len(dims)).broadcast_to(view.shape + dims)


def repeat_rows(view: View, n: int) -> View:
    """view [outer..., m] seen as [outer..., n, m]: each row repeated n times."""
    return view.reshape(view.shape[:-1] + (1, view.shape[-1])).broadcast_to(view.shape[:-1] + (n, view.shape[-1]))


def reduce_over(ctx: Context, node: Node, axes: tuple[int, ...]) -> tuple[View, View]:
    """The input as [kept..., reduced...] and the output as [kept...]."""
    shape = ctx.shape(node.inputs[0])
    kept = tuple(d for d in range(len(shape)) if d not in axes)
    x = ctx.view(node.inputs[0]).permute(kept + tuple(axes))
    return x, ctx.new(node.outputs[0]).reshape(tuple(shape[d] for d in kept))


def _axes(ctx: Context, node: Node) -> tuple[int, ...]:
    given = len(node.inputs) > 1 and node.inputs[1]
    return reduced_axes(node, ctx.graph.opset, len(ctx.shape(node.inputs[0])),
                        ctx.const(node.inputs[1]) if given else None)


def _reduce(ctx: Context, node: Node) -> None:
    x, out = reduce_over(ctx, node, _axes(ctx, node))
    kind, pre, post = REDUCTIONS[node.op]
    types = Types(ctx.dtype(node.inputs[0]), int(np.prod(x.shape[len(out.shape):], dtype=np.int64)))
    ctx.emit(Reduce(out, (x,), kind, pre(types), post(types), node.name))


def _reduce_log_sum_exp(ctx: Context, node: Node) -> None:
    """log(sum(exp(x - max))) + max: no overflow for large inputs. For integers, as onnxruntime does,
    each exponential and the logarithm are truncated to the type."""
    x, out = reduce_over(ctx, node, _axes(ctx, node))
    dtype = ctx.dtype(node.inputs[0])
    t = Types(dtype)
    peak, total = (ctx.temp(out.shape, f"{node.name} {what}", dtype) for what in ("max", "sum"))
    ctx.emit(Reduce(peak, (x,), "max", X, ACC, node.name))
    ctx.emit(Reduce(total, (x, spread(peak, *x.shape[len(out.shape):])), "sum",
                    t.back(call("expf", t.float(X - Input(1)))), ACC, node.name))
    ctx.emit(Map(out, (total, peak), t.back(call("logf", t.float(X))) + Input(1), node.name))


def _arg(ctx: Context, node: Node) -> None:
    at = axis(node, node.attr("axis", 0), len(ctx.shape(node.inputs[0])))
    x, out = reduce_over(ctx, node, (at,))
    ctx.emit(Reduce(out, (x,), node.op.lower(), X, ACC, node.name, bool(node.attr("select_last_index", 0))))


def _global_max_pool(ctx: Context, node: Node) -> None:
    x, out = reduce_over(ctx, node, tuple(range(2, len(ctx.shape(node.inputs[0])))))
    ctx.emit(Reduce(out, (x,), "max", X, ACC, node.name))


def _cumulative(ctx: Context, node: Node) -> None:
    """out[..., i] = the sum (CumProd: the product) over j of x[..., j] for the j before i (after, reversed; i too
    unless exclusive): the others count as 0 (as 1)."""
    shape = ctx.shape(node.inputs[0])
    at = axis(node, int(ctx.const(node.inputs[1]).reshape(-1)[0]), len(shape))
    last = last_axis(len(shape), at)
    x = ctx.view(node.inputs[0]).permute(last)
    out = ctx.new(node.outputs[0]).permute(last)
    n = shape[at]
    pairs = x.shape[:-1] + (n, n)  # [outer..., i, j]
    pos = positions(ctx, n, node.name)
    row, i, j = repeat_rows(x, n), spread(pos, n).broadcast_to(pairs), pos.broadcast_to(pairs)
    takes = CUMULATIVE_TAKES[node.attr("exclusive", 0), node.attr("reverse", 0)]
    kind, neutral = ("prod", 1) if node.op == "CumProd" else ("sum", 0)
    ctx.emit(Reduce(out, (row, i, j), kind, select(binary(takes, Input(2), Input(1)), X,
                                                   lit(neutral, ctx.dtype(node.inputs[0]))), ACC, node.name))


declare({
    "ArgMax": OpSpec(reduce_rules.arg, _arg),
    "ArgMin": OpSpec(reduce_rules.arg, _arg),
    "CumSum": OpSpec(reduce_rules.cumsum, _cumulative, shape_inputs=(1,)),
    "CumProd": OpSpec(reduce_rules.cumsum, _cumulative, shape_inputs=(1,)),
    "GlobalMaxPool": OpSpec(nn_rules.global_pool, _global_max_pool),
    "ReduceL1": OpSpec(reduce_rules.reduction, _reduce, shape_inputs=(1,)),
    "ReduceL2": OpSpec(reduce_rules.reduction, _reduce, shape_inputs=(1,)),
    "ReduceLogSum": OpSpec(reduce_rules.reduction, _reduce, shape_inputs=(1,)),
    "ReduceLogSumExp": OpSpec(reduce_rules.reduction, _reduce_log_sum_exp, shape_inputs=(1,)),
    "ReduceMax": OpSpec(reduce_rules.reduction, _reduce, shape_inputs=(1,)),
    "ReduceMean": OpSpec(reduce_rules.reduction, _reduce, int8="mean", shape_inputs=(1,)),
    "ReduceMin": OpSpec(reduce_rules.reduction, _reduce, shape_inputs=(1,)),
    "ReduceProd": OpSpec(reduce_rules.reduction, _reduce, shape_inputs=(1,)),
    "ReduceSum": OpSpec(reduce_rules.reduction, _reduce, shape_inputs=(1,)),
    "ReduceSumSquare": OpSpec(reduce_rules.reduction, _reduce, shape_inputs=(1,)),
})
