"""Lowering of conv, dense and pooling ops to the Conv, Gemm, Pool and Reduce primitives."""
from __future__ import annotations

import numpy as np

from ...graph.geometry import Window, window
from ...graph.ir import Node
from ...graph.registry import OpSpec, declare
from ...graph.rules import nn as rules
from ...instr.expr import ACC, Expr, Input, lit
from ...instr.ir import Conv, Epilogue, Gemm, Pool, Reduce, View
from ..context import Context


def as_2d(view: View) -> View:
    """NCW views become NC1W so that one 2-D conv kernel serves 1-D and 2-D windows."""
    return view if len(view.shape) == 4 else view.reshape(view.shape[:2] + (1,) + view.shape[2:])


def _window_2d(win: Window) -> Window:
    if len(win.kernel) == 2:
        return win
    return Window((1,) + win.kernel, (1,) + win.strides, (1,) + win.dilations, (0,) + win.pads_begin,
                  (0,) + win.pads_end, (1,) + win.out)


CHANNELS_LAST = {3: (0, 2, 1), 4: (0, 2, 3, 1)}  # by rank: a convolution's output keeps channels innermost


def _conv(ctx: Context, node: Node) -> None:
    w = ctx.shape(node.inputs[1])
    win = window(node, ctx.shape(node.inputs[0])[2:], tuple(node.attr("kernel_shape", w[2:])))
    out = ctx.new(node.outputs[0], CHANNELS_LAST.get(len(w)))
    x, out, win = as_2d(ctx.view(node.inputs[0])), as_2d(out), _window_2d(win)
    epi = Epilogue()
    if len(node.inputs) > 2 and node.inputs[2]:
        bias = ctx.view(node.inputs[2]).reshape((w[0], 1, 1)).broadcast_to(out.shape)
        epi = Epilogue(ACC, (bias,), init=0)
    w4 = as_2d(ctx.view(node.inputs[1]))
    ctx.emit(Conv(out, x, w4, win, node.attr("group", 1), epi, node.name))


def _scaled(factor: float, expr: Expr) -> Expr:
    return expr if factor == 1.0 else lit(factor, np.float32) * expr


def _gemm(ctx: Context, node: Node) -> None:
    a, b = ctx.view(node.inputs[0]), ctx.view(node.inputs[1])
    a = a.permute((1, 0)) if node.attr("transA", 0) else a
    b = b.permute((1, 0)) if node.attr("transB", 0) else b
    out = ctx.new(node.outputs[0])
    expr = _scaled(node.attr("alpha", 1.0), ACC)
    beta = node.attr("beta", 1.0)
    ins: tuple[View, ...] = ()
    if len(node.inputs) > 2 and node.inputs[2] and beta != 0.0:
        ins, values = ctx.operands(node.inputs[2:3], out.shape)
        expr = expr + _scaled(beta, values[0])
    ctx.emit(Gemm(out, a, b, Epilogue(expr, ins), node.name))


def _matmul(ctx: Context, node: Node) -> None:
    ctx.emit(Gemm(*_product(ctx, node, ctx.view(node.inputs[0]), ctx.view(node.inputs[1])), Epilogue(), node.name))


def _product(ctx: Context, node: Node, a: View, b: View) -> tuple[View, View, View]:
    """The output, a and b of MatMul's product as Gemm takes them: a vector as a matrix of one row (a) or column
    (b), both broadcast over the output's batch dims."""
    a = a.reshape((1,) + a.shape) if len(a.shape) == 1 else a
    b = b.reshape(b.shape + (1,)) if len(b.shape) == 1 else b
    batch = ctx.shape(node.outputs[0])[:max(len(a.shape), len(b.shape)) - 2]
    out = ctx.new(node.outputs[0]).reshape(batch + (a.shape[-2], b.shape[-1]))
    return out, a.broadcast_to(batch + a.shape[-2:]), b.broadcast_to(batch + b.shape[-2:])


def _scaled_gemm(ctx: Context, node: Node) -> None:
    """ScaledGemm (graph/quant/weight_only.py): float a by int8 weights [K, N], each output column times its scale,
    plus beta times the bias where it has one."""
    out, a, b = _product(ctx, node, ctx.view(node.inputs[0]), ctx.view(node.inputs[1]))
    ins, values = ctx.operands(node.inputs[2:], out.shape)
    expr = ACC * values[0]
    if len(values) > 1:
        expr = expr + _scaled(node.attr("beta", 1.0), values[1])
    ctx.emit(Gemm(out, a, b, Epilogue(expr, ins), node.name))


def _pool(ctx: Context, node: Node) -> None:
    win = window(node, ctx.shape(node.inputs[0])[2:], tuple(node.attr("kernel_shape")),
                 bool(node.attr("ceil_mode", 0)))
    kind = "max" if node.op == "MaxPool" else "avg"
    x = ctx.view(node.inputs[0])
    ctx.emit(Pool(ctx.new(node.outputs[0], x.order()), x, kind, win, bool(node.attr("count_include_pad", 0)), node.name))
    if len(node.outputs) > 1 and node.outputs[1]:  # MaxPool's Indices
        ctx.emit(Pool(ctx.new(node.outputs[1]), x, "argmax", win, False, node.name,
                      bool(node.attr("storage_order", 0))))


def _global_average_pool(ctx: Context, node: Node) -> None:
    shape = ctx.shape(node.inputs[0])
    count = 1
    for d in shape[2:]:
        count *= d
    x = ctx.reshaped(node.inputs[0], shape[:2] + (count,))
    out = ctx.new(node.outputs[0]).reshape(shape[:2])
    ctx.emit(Reduce(out, (x,), "sum", Input(0), ACC / lit(count, np.float32), node.name))


declare({
    "AveragePool": OpSpec(rules.pool, _pool, int8="average"),
    "Conv": OpSpec(rules.conv, _conv, int8="conv"),
    "Gemm": OpSpec(rules.gemm, _gemm, int8="gemm"),
    "GlobalAveragePool": OpSpec(rules.global_pool, _global_average_pool, int8="average"),
    "MatMul": OpSpec(rules.matmul, _matmul, int8="gemm"),
    "MaxPool": OpSpec(rules.pool, _pool, int8="movement"),
    "ScaledGemm": OpSpec(None, _scaled_gemm),
})
