"""Lowering of the reductions to the Reduce primitive, the reduced axes permuted last: Reduce*, ArgMax,
ArgMin, GlobalMaxPool, and CumSum (a masked sum over the axis)."""
from __future__ import annotations

import numpy as np

from ...c_text import c_literal, c_type
from ...graph.geometry import axis
from ...graph.ir import Node
from ...graph.registry import F32
from ...graph.rules.reduce import reduced_axes
from ...instr.ir import Map, Reduce, View, substitute
from ..context import Context, lowering

# op: (kind, pre, post), C templates over {0} (an input element) and {acc}; {n} is the number of reduced
# elements, {abs} |{0}|, and {float} / {type} cast to float and back for an integer tensor.
REDUCTIONS = {
    "ReduceSum": ("sum", "{0}", "{acc}"),
    "ReduceMean": ("sum", "{0}", "{acc} / {n}"),
    "ReduceMax": ("max", "{0}", "{acc}"),
    "ReduceMin": ("min", "{0}", "{acc}"),
    "ReduceProd": ("prod", "{0}", "{acc}"),
    "ReduceL1": ("sum", "{abs}", "{acc}"),
    "ReduceSumSquare": ("sum", "{0} * {0}", "{acc}"),
    "ReduceL2": ("sum", "{0} * {0}", "{type}sqrtf({float}{acc})"),
    "ReduceLogSum": ("sum", "{0}", "{type}logf({float}{acc})"),
}
# CumSum: which j are summed into out[i], by (exclusive, reverse)
CUMSUM_TAKES = {(0, 0): "<=", (1, 0): "<", (0, 1): ">=", (1, 1): ">"}


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


def casts(dtype: np.dtype, count: int = 1) -> dict[str, str]:
    """The dtype-dependent parts of the REDUCTIONS templates."""
    if dtype == F32:
        return {"n": c_literal(count, dtype), "abs": "fabsf({0})", "float": "", "type": ""}
    return {"n": c_literal(max(count, 1), dtype),  # an integer mean over nothing: 0 rather than C's undefined x / 0
            "abs": "{0}" if dtype.kind == "u" else "({0} < 0 ? -{0} : {0})",
            "float": "(float)", "type": f"({c_type(dtype)})"}


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


@lowering(*REDUCTIONS)
def _reduce(ctx: Context, node: Node) -> None:
    x, out = reduce_over(ctx, node, _axes(ctx, node))
    kind, pre, post = REDUCTIONS[node.op]
    values = casts(ctx.dtype(node.inputs[0]), int(np.prod(x.shape[len(out.shape):], dtype=np.int64)))
    ctx.emit(Reduce(out, (x,), kind, substitute(pre, values), substitute(post, values), node.name))


@lowering("ReduceLogSumExp")
def _reduce_log_sum_exp(ctx: Context, node: Node) -> None:
    """log(sum(exp(x - max))) + max: no overflow for large inputs. For integers, as onnxruntime does,
    each exponential and the logarithm are truncated to the type."""
    x, out = reduce_over(ctx, node, _axes(ctx, node))
    dtype = ctx.dtype(node.inputs[0])
    values = casts(dtype)
    peak, total = (ctx.temp(out.shape, f"{node.name} {what}", dtype) for what in ("max", "sum"))
    ctx.emit(Reduce(peak, (x,), "max", "{0}", "{acc}", node.name))
    ctx.emit(Reduce(total, (x, spread(peak, *x.shape[len(out.shape):])), "sum",
                    substitute("{type}expf({float}({0} - {1}))", values), "{acc}", node.name))
    ctx.emit(Map(out, (total, peak), substitute("({type}logf({float}{0}) + {1})", values), node.name))


@lowering("ArgMax", "ArgMin")
def _arg(ctx: Context, node: Node) -> None:
    at = axis(node, node.attr("axis", 0), len(ctx.shape(node.inputs[0])))
    x, out = reduce_over(ctx, node, (at,))
    ctx.emit(Reduce(out, (x,), node.op.lower(), "{0}", "{acc}", node.name, bool(node.attr("select_last_index", 0))))


@lowering("GlobalMaxPool")
def _global_max_pool(ctx: Context, node: Node) -> None:
    x, out = reduce_over(ctx, node, tuple(range(2, len(ctx.shape(node.inputs[0])))))
    ctx.emit(Reduce(out, (x,), "max", "{0}", "{acc}", node.name))


@lowering("CumSum")
def _cumsum(ctx: Context, node: Node) -> None:
    """out[..., i] = the sum over j of x[..., j] for the j before i (after, reversed; i too unless exclusive)."""
    shape = ctx.shape(node.inputs[0])
    at = axis(node, int(ctx.const(node.inputs[1]).reshape(-1)[0]), len(shape))
    last = last_axis(len(shape), at)
    x = ctx.view(node.inputs[0]).permute(last)
    out = ctx.new(node.outputs[0]).permute(last)
    n = shape[at]
    pairs = x.shape[:-1] + (n, n)  # [outer..., i, j]
    pos = positions(ctx, n, node.name)
    row, i, j = repeat_rows(x, n), spread(pos, n).broadcast_to(pairs), pos.broadcast_to(pairs)
    takes = CUMSUM_TAKES[node.attr("exclusive", 0), node.attr("reverse", 0)]
    zero = c_literal(0, ctx.dtype(node.inputs[0]))
    ctx.emit(Reduce(out, (row, i, j), "sum", f"({{2}} {takes} {{1}} ? {{0}} : {zero})", "{acc}", node.name))
