"""Lowering of BatchNormalization, LayerNormalization and Softmax to reduce and map primitives."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from ...graph.geometry import axis
from ...graph.ir import Node
from ...instr.ir import Map, Reduce, View, substitute
from ..context import Context, lowering
from ..literals import c_float


@lowering("BatchNormalization")
def _batchnorm(ctx: Context, node: Node) -> None:
    params = [ctx.const(n) for n in node.inputs[1:5]]
    if any(p is None for p in params):
        raise CglowError(f"{node.describe()}: scale, bias, mean and var must be constant")
    gamma, beta, mean, var = (p.astype(np.float32) for p in params)
    scale = gamma / np.sqrt(var + np.float32(node.attr("epsilon", 1e-5)))
    shift = beta - mean * scale
    shape = ctx.shape(node.inputs[0])
    channel = (shape[1],) + (1,) * (len(shape) - 2)
    views = [ctx.view(node.inputs[0])] + [ctx.const_view(p.reshape(channel), f"{node.name} {what}").broadcast_to(shape)
                                          for p, what in ((scale, "scale"), (shift, "shift"))]
    ctx.emit(Map(ctx.new(node.outputs[0]), tuple(views), "({0} * {1} + {2})", node.name))


def _split(ctx: Context, name: str, first: int) -> tuple[View, tuple[int, ...], int]:
    """The value as [outer..., inner] with the dims from `first` on flattened into one."""
    shape = ctx.shape(name)
    inner = int(np.prod(shape[first:], dtype=np.int64))
    view = ctx.view(name).reshape(shape[:first] + (inner,)) or \
        ctx.contiguous(name).reshape(shape[:first] + (inner,))
    return view, shape[:first], inner


def _spread(stat: View, outer: tuple[int, ...], inner: int) -> View:
    """A per-row statistic [outer...] seen as [outer..., inner] (broadcast along the row)."""
    return stat.reshape(outer + (1,)).broadcast_to(outer + (inner,))


def _affine(ctx: Context, name: str, norm_shape: tuple[int, ...], outer: tuple[int, ...], inner: int) -> View:
    """LayerNormalization's scale or bias, seen as [outer..., inner]."""
    view = ctx.view(name).broadcast_to(norm_shape).reshape((inner,))
    if view is None:  # a broadcast that strides cannot flatten: spell the constant out
        data = ctx.const(name)
        if data is None:
            raise CglowError(f"tensor '{name}': a run-time LayerNormalization scale or bias must have the "
                             f"normalized shape {norm_shape}")
        view = ctx.const_view(np.broadcast_to(data, norm_shape).reshape(-1), name)
    return view.broadcast_to(outer + (inner,))


@lowering("LayerNormalization")
def _layernorm(ctx: Context, node: Node) -> None:
    shape = ctx.shape(node.inputs[0])
    first = axis(node, node.attr("axis", -1), len(shape))
    x, outer, inner = _split(ctx, node.inputs[0], first)
    mean = ctx.temp(outer, f"{node.name} mean")
    rstd = ctx.temp(outer, f"{node.name} rstd")
    n, eps = c_float(inner), c_float(node.attr("epsilon", 1e-5))
    ctx.emit(Reduce(mean, (x,), "sum", "{0}", f"{{acc}} / {n}", node.name))
    ctx.emit(Reduce(rstd, (x, _spread(mean, outer, inner)), "sum", "({0} - {1}) * ({0} - {1})",
                    f"1.0f / sqrtf({{acc}} / {n} + {eps})", node.name))
    views = [x, _spread(mean, outer, inner), _spread(rstd, outer, inner)]
    expr = "(({0} - {1}) * {2})"  # parenthesized, as the fusion passes substitute it into other expressions
    for i, template in ((1, "({e} * {v})"), (2, "({e} + {v})")):
        if len(node.inputs) > i and node.inputs[i]:
            views.append(_affine(ctx, node.inputs[i], shape[first:], outer, inner))
            expr = substitute(template, {"e": expr, "v": "{%d}" % (len(views) - 1)})
    out = ctx.new(node.outputs[0]).reshape(outer + (inner,))
    ctx.emit(Map(out, tuple(views), expr, node.name))


@lowering("Softmax")
def _softmax(ctx: Context, node: Node) -> None:
    shape = ctx.shape(node.inputs[0])
    at = axis(node, node.attr("axis", -1 if ctx.graph.opset >= 13 else 1), len(shape))
    out = ctx.new(node.outputs[0])
    if ctx.graph.opset >= 13:  # one axis; move it last
        rest = tuple(d for d in range(len(shape)) if d != at)
        x = ctx.view(node.inputs[0]).permute(rest + (at,))
        out = out.permute(rest + (at,))
        outer, inner = tuple(shape[d] for d in rest), shape[at]
    else:  # before opset 13 the input is coerced to 2-D at axis
        x, outer, inner = _split(ctx, node.inputs[0], at)
        out = out.reshape(outer + (inner,))
    peak = ctx.temp(outer, f"{node.name} max")
    total = ctx.temp(outer, f"{node.name} sum")
    ctx.emit(Reduce(peak, (x,), "max", "{0}", "{acc}", node.name))
    ctx.emit(Map(out, (x, _spread(peak, outer, inner)), "expf({0} - {1})", node.name))
    ctx.emit(Reduce(total, (out,), "sum", "{0}", "1.0f / {acc}", node.name))
    ctx.emit(Map(out, (out, _spread(total, outer, inner)), "({0} * {1})", node.name))
