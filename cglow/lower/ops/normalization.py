"""Lowering of the normalizations (BatchNormalization, LayerNormalization, InstanceNormalization,
LpNormalization, LRN) and of the softmax family (Softmax, LogSoftmax, Hardmax) to reduce, map and pool
primitives."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from ...graph.geometry import axis
from ...graph.ir import Node
from ...graph.registry import OpSpec, declare
from ...graph.rules import nn as nn_rules
from ...graph.rules import reduce as reduce_rules
from ...instr.expr import F32, ACC, Input, call, eq, inputs, lit, select
from ...instr.ir import Map, Reduce, View
from ..context import Context
from .reduce import last_axis, positions, spread

X, Y, Z = inputs(3)


def _batchnorm(ctx: Context, node: Node) -> None:
    shape = ctx.shape(node.inputs[0])
    channel = (shape[1],) + (1,) * (len(shape) - 2)
    eps = node.attr("epsilon", 1e-5)
    params = [ctx.const(n) for n in node.inputs[1:5]]
    if all(p is not None for p in params):  # fold into one scale and shift per channel
        gamma, beta, mean, var = (p.astype(np.float32) for p in params)
        scale = gamma / np.sqrt(var + np.float32(eps))
        folded = [(scale, "scale"), (beta - mean * scale, "shift")]
        views = [ctx.const_view(p.reshape(channel), f"{node.name} {what}").broadcast_to(shape) for p, what in folded]
        expr = X * Y + Z
    else:
        views = [ctx.view(n).reshape(channel).broadcast_to(shape) for n in node.inputs[1:5]]
        expr = (X - Input(3)) / call("sqrtf", Input(4) + lit(eps, F32)) * Y + Z
    x = ctx.view(node.inputs[0])
    ctx.emit(Map(ctx.new_like(node.outputs[0], [x]), (x, *views), expr, node.name))


def _split(ctx: Context, name: str, first: int) -> tuple[View, tuple[int, ...], int]:
    """The value as [outer..., inner] with the dims from `first` on flattened into one."""
    shape = ctx.shape(name)
    inner = int(np.prod(shape[first:], dtype=np.int64))
    view = ctx.view(name).reshape(shape[:first] + (inner,)) or \
        ctx.contiguous(name).reshape(shape[:first] + (inner,))
    return view, shape[:first], inner


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


def _moments(ctx: Context, node: Node, x: View, mean: View | None = None,
             rstd: View | None = None) -> tuple[View, View]:
    """The mean and 1 / sqrt(variance + epsilon) of each row of x [outer..., inner], spread along the rows;
    written into `mean` and `rstd` when given (views of shape [outer...])."""
    outer, inner = x.shape[:-1], x.shape[-1]
    mean = mean or ctx.temp(outer, f"{node.name} mean")
    rstd = rstd or ctx.temp(outer, f"{node.name} rstd")
    n, eps = lit(inner, F32), lit(node.attr("epsilon", 1e-5), F32)
    ctx.emit(Reduce(mean, (x,), "sum", X, ACC / n, node.name))
    ctx.emit(Reduce(rstd, (x, spread(mean, inner)), "sum", (X - Y) * (X - Y), 1.0 / call("sqrtf", ACC / n + eps),
                    node.name))
    return spread(mean, inner), spread(rstd, inner)


def _layernorm(ctx: Context, node: Node) -> None:
    shape = ctx.shape(node.inputs[0])
    first = axis(node, node.attr("axis", -1), len(shape))
    x, outer, inner = _split(ctx, node.inputs[0], first)
    statistics = [ctx.new(name).reshape(outer) if name else None for name in node.outputs[1:3]]  # Mean, InvStdDev
    views = [x, *_moments(ctx, node, x, *statistics)]
    expr = (X - Y) * Z
    for i in (1, 2):  # times the scale, plus the bias
        if len(node.inputs) > i and node.inputs[i]:
            views.append(_affine(ctx, node.inputs[i], shape[first:], outer, inner))
            expr = expr * Input(len(views) - 1) if i == 1 else expr + Input(len(views) - 1)
    out = ctx.new(node.outputs[0]).reshape(outer + (inner,))
    ctx.emit(Map(out, tuple(views), expr, node.name))


def _instance_norm(ctx: Context, node: Node) -> None:
    x, outer, inner = _split(ctx, node.inputs[0], 2)
    scale, bias = (ctx.view(name).reshape((outer[1], 1)).broadcast_to(outer + (inner,)) for name in node.inputs[1:3])
    views = (x, *_moments(ctx, node, x), scale, bias)
    out = ctx.new(node.outputs[0]).reshape(outer + (inner,))
    ctx.emit(Map(out, views, (X - Y) * Z * Input(3) + Input(4), node.name))


def _along(ctx: Context, node: Node, at: int) -> tuple[View, View, tuple[int, ...], int]:
    """The input and output as [outer..., inner] rows, inner being the axis `at` moved last."""
    shape = ctx.shape(node.inputs[0])
    last = last_axis(len(shape), at)
    x, out = ctx.view(node.inputs[0]).permute(last), ctx.new(node.outputs[0]).permute(last)
    return x, out, x.shape[:-1], shape[at]


def _rows(ctx: Context, node: Node) -> tuple[View, View, tuple[int, ...], int]:
    """The rows a softmax-like op normalizes: along one axis since opset 13, before it the input coerced
    to 2-D at axis."""
    shape = ctx.shape(node.inputs[0])
    at = axis(node, node.attr("axis", -1 if ctx.graph.opset >= 13 else 1), len(shape))
    if ctx.graph.opset >= 13:
        return _along(ctx, node, at)
    x, outer, inner = _split(ctx, node.inputs[0], at)
    return x, ctx.new(node.outputs[0]).reshape(outer + (inner,)), outer, inner


def _softmax(ctx: Context, node: Node) -> None:
    x, out, outer, inner = _rows(ctx, node)
    peak = ctx.temp(outer, f"{node.name} max")
    total = ctx.temp(outer, f"{node.name} sum")
    ctx.emit(Reduce(peak, (x,), "max", X, ACC, node.name))
    ctx.emit(Map(out, (x, spread(peak, inner)), call("cglow_exp", X - Y), node.name))
    ctx.emit(Reduce(total, (out,), "sum", X, 1.0 / ACC, node.name))
    ctx.emit(Map(out, (out, spread(total, inner)), X * Y, node.name))


def _log_softmax(ctx: Context, node: Node) -> None:
    x, out, outer, inner = _rows(ctx, node)
    peak = ctx.temp(outer, f"{node.name} max")
    log_total = ctx.temp(outer, f"{node.name} log sum")
    ctx.emit(Reduce(peak, (x,), "max", X, ACC, node.name))
    ctx.emit(Reduce(log_total, (x, spread(peak, inner)), "sum", call("cglow_exp", X - Y), call("logf", ACC), node.name))
    ctx.emit(Map(out, (x, spread(peak, inner), spread(log_total, inner)), X - Y - Z, node.name))


def _hardmax(ctx: Context, node: Node) -> None:
    """1 at the first maximum of each row, 0 elsewhere."""
    x, out, outer, inner = _rows(ctx, node)
    first = ctx.temp(outer, f"{node.name} argmax", np.int64)
    ctx.emit(Reduce(first, (x,), "argmax", X, ACC, node.name))
    pos = positions(ctx, inner, node.name).broadcast_to(outer + (inner,))
    ctx.emit(Map(out, (spread(first, inner), pos), select(eq(X, Y), 1.0, 0.0), node.name))


LP_NORMS = {1: (call("fabsf", X), ACC), 2: (X * X, call("sqrtf", ACC))}  # p: (pre, norm from Acc)


def _lp_normalization(ctx: Context, node: Node) -> None:
    """x / norm along the axis (0 where the norm is 0)."""
    x, out, outer, inner = _along(ctx, node, axis(node, node.attr("axis", -1), len(ctx.shape(node.inputs[0]))))
    pre, norm = LP_NORMS[node.attr("p", 2)]
    scale = ctx.temp(outer, f"{node.name} 1/norm")
    ctx.emit(Reduce(scale, (x,), "sum", pre, select(eq(ACC, 0.0), 0.0, 1.0 / norm), node.name))
    ctx.emit(Map(out, (x, spread(scale, inner)), X * Y, node.name))


def _lrn_windows(c: int, size: int) -> list[tuple[int, int, int, int]]:
    """The channels of an LRN in runs (first channel, channels, window's first channel, window's channels):
    the channels whose window [c - (size - 1) // 2, c + size // 2] lies whole inside the channels in one
    run, each other channel alone with its window cut at the edges."""
    runs: list[tuple[int, int, int, int]] = []
    for k in range(c):
        lo, hi = max(0, k - (size - 1) // 2), min(c, k + size // 2 + 1)
        if runs and hi - lo == size and runs[-1][3] == size and runs[-1][0] + runs[-1][1] == k:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1, runs[-1][2], size)
        else:
            runs.append((k, 1, lo, hi - lo))
    return runs


def _lrn(ctx: Context, node: Node) -> None:
    """x / (bias + alpha / size * sum of x^2 over a window of channels) ^ beta. The window sums are
    reductions of x squared over views in which each channel's window is a last dim (a run of channels
    with whole windows at once, each edge channel alone): x, the sums and the result are all it keeps,
    and the result takes the sums' place (reuse_dying_inputs), so it needs no more than its input and
    output (a squared copy of x, as a pooled input, took a third activation: the peak of Inception-v1's
    stem, over its naive floor)."""
    shape = ctx.shape(node.inputs[0])
    size = node.attr("size")
    x = ctx.view(node.inputs[0])
    total = ctx.temp(shape, f"{node.name} window sum")
    scale = lit(node.attr("alpha", 1e-4) / size, F32)  # the sum's factor: alpha over the window's size
    beta, bias = (lit(node.attr(k, d), F32) for k, d in (("beta", 0.75), ("bias", 1.0)))
    for first, count, lo, n in _lrn_windows(shape[1], size):
        window = View(x.buf, x.offset + lo * x.strides[1], (shape[0], count) + shape[2:] + (n,),
                      x.strides + (x.strides[1],))
        ctx.emit(Reduce(total.slice(1, first, count), (window,), "sum", X * X, bias + scale * ACC, node.name))
    ctx.emit(Map(ctx.new(node.outputs[0]), (x, total), X / call("powf", Y, beta), node.name))


declare({
    "BatchNormalization": OpSpec(nn_rules.batchnorm, _batchnorm, int8="batchnorm"),
    "Hardmax": OpSpec(nn_rules.softmax, _hardmax),
    "InstanceNormalization": OpSpec(reduce_rules.instance_normalization, _instance_norm),
    "LRN": OpSpec(reduce_rules.lrn, _lrn),
    "LayerNormalization": OpSpec(nn_rules.layernorm, _layernorm),
    "LogSoftmax": OpSpec(nn_rules.softmax, _log_softmax),
    "LpNormalization": OpSpec(reduce_rules.lp_normalization, _lp_normalization),
    "Softmax": OpSpec(nn_rules.softmax, _softmax, int8="softmax"),
})
