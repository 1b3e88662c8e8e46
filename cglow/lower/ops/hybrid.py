"""Lowering of HybridGemm and HybridConv, the float layers with int8 weights of a .tflite file
(graph/tflite/hybrid.py), as LiteRT's hybrid kernels compute them (measured against its reference kernels).

The float input is quantized to int8 at run time, per row of a dense layer or per batch item of a
convolution: a Reduce for its range, Maps for the scale (and zero point) and the int8 values; then the int8
product with the weights, which stay int8 in flash, accumulates in int32, and its epilogue scales it back in
float. Symmetric: scale = max |x| / 127, q = round(x * (127 / max |x|)) in [-127, 127]. Asymmetric: scale =
(max(0, max) - min(0, min)) / 255, a zero point (runtime_c/hybrid_zero.c), q = zero + round(x * (1 / scale))
in [-128, 127]; the accumulator less zero x (the channel's weight sum) is the product with q - zero, padding
included (it holds the zero point: a real 0, as LiteRT skips it). Float arithmetic in LiteRT's order: out =
bias + (float)acc * (scale x weight scale), or ((float)acc * weight scale) * scale (`weights_first`)."""
from __future__ import annotations

import numpy as np

from ...graph.geometry import Window, window
from ...graph.ir import Node
from ...graph.registry import OpSpec, declare
from ...instr.expr import ACC, Expr, Input, call, cast, eq, gt, inputs, lit, lt, select
from ...instr.ir import Conv, Epilogue, Gemm, Map, Reduce, View
from ..context import Context
from .nn import CHANNELS_LAST

F32, I32 = np.dtype(np.float32), np.dtype(np.int32)
X, Y, Z = inputs(3)


def _along(view: View, axis: int, shape: tuple[int, ...]) -> View:
    """A 1-D view laid along `axis` of `shape`, broadcast over the other dims."""
    dims = [1] * len(shape)
    dims[axis] = view.size
    return view.reshape(tuple(dims)).broadcast_to(shape)


def _statistics(ctx: Context, node: Node, x: View) -> tuple[View, View, View | None]:
    """Per item of x's first dim: the inverse of the input's scale, the scale, and (asymmetric) the zero point.
    A row of zeros quantizes to zeros, with scale 1 and zero point 0, as LiteRT's does."""
    items = (x.shape[0],)
    inner = sorted(range(1, len(x.shape)), key=lambda d: -abs(x.strides[d]))
    rows = x.permute((0, *inner))  # reduced in memory order

    def temp(label: str, dtype=F32) -> View:
        return ctx.temp(items, f"{node.name} input {label}", dtype)
    if not node.attr("asymmetric"):
        top, inverse, scale = temp("range"), temp("inverse scale"), temp("scale")
        ctx.emit(Reduce(top, (rows,), "max", call("fabsf", X), ACC, node.name))
        ctx.emit(Map(inverse, (top,), select(eq(X, 0.0), 0.0, 127.0 / X), node.name))
        ctx.emit(Map(scale, (top,), select(eq(X, 0.0), 1.0, X / 127.0), node.name))
        return inverse, scale, None
    low, high, scale, inverse, zero = temp("min"), temp("max"), temp("scale"), temp("inverse scale"), \
        temp("zero point", I32)
    ctx.emit(Reduce(low, (rows,), "min", X, select(lt(ACC, 0.0), ACC, 0.0), node.name))
    ctx.emit(Reduce(high, (rows,), "max", X, select(gt(ACC, 0.0), ACC, 0.0), node.name))
    ctx.emit(Map(scale, (low, high), select(eq(X, Y), 1.0, (Y - X) / 255.0), node.name))
    ctx.emit(Map(inverse, (scale,), 1.0 / X, node.name))
    ctx.emit(Map(zero, (low, high), cast(I32, select(eq(X, Y), 0, call("cglow_hybrid_zero", X, Y))), node.name))
    return inverse, scale, zero


def _quantize(ctx: Context, node: Node, x: View, into: View, inverse: View, zero: View | None) -> None:
    """x times the inverse scale rounded to int8 as TFLite rounds (halves away from zero), then the zero point
    added (measured: a product just below a half, -11.499998, rounds to -11 before a zero point of -29 is added;
    added first in float, the sum would be -40.5)."""
    ins = (x, _along(inverse, 0, x.shape))
    if zero is None:
        expr = cast(np.int8, call("cglow_quantize_tfl", X * Y, 0, -127, 127))
    else:
        ins += (_along(zero, 0, x.shape),)
        expr = cast(np.int8, call("cglow_quantize_tfl", X * Y, Z, -128, 127))
    ctx.emit(Map(into, ins, expr, node.name))


def _scaled_back(ctx: Context, node: Node, out: View, scale: View, zero: View | None, weights: np.ndarray) -> Epilogue:
    """The epilogue storing an int32 accumulator as float: output items along dim 0, channels along dim 1."""
    views: list[View] = []

    def operand(view: View, axis: int) -> Expr:
        views.append(_along(view, axis, out.shape))
        return Input(len(views) - 1)

    def per_channel(data: np.ndarray, label: str, dtype: np.dtype) -> Expr:
        data = np.broadcast_to(np.asarray(data, dtype).reshape(-1), (out.shape[1],))
        if np.all(data == data[0]):
            return lit(data[0], dtype)
        return operand(ctx.const_view(data, f"{node.name} {label}"), 1)
    acc: Expr = ACC
    if zero is not None:
        sums = per_channel(weights.astype(np.int64).reshape(weights.shape[0], -1).sum(axis=1), "weight sums", I32)
        acc = ACC - sums * operand(zero, 0)
    w, s = per_channel(np.asarray(node.attr("w_scales")), "weight scales", F32), operand(scale, 0)
    term = cast(F32, acc) * w * s if node.attr("weights_first") else cast(F32, acc) * (s * w)
    if len(node.inputs) > 2 and node.inputs[2]:
        term = operand(ctx.view(node.inputs[2]), 1) + term
    return Epilogue(term, tuple(views))


def _hybrid_gemm(ctx: Context, node: Node) -> None:
    """x [M, K] float times the int8 weights [N, K] transposed."""
    x = ctx.view(node.inputs[0])
    inverse, scale, zero = _statistics(ctx, node, x)
    q = ctx.temp(x.shape, f"{node.name} quantized input", np.int8)
    _quantize(ctx, node, x, q, inverse, zero)
    out = ctx.new(node.outputs[0])
    epi = _scaled_back(ctx, node, out, scale, zero, ctx.const(node.inputs[1]))
    ctx.emit(Gemm(out, q, ctx.view(node.inputs[1]).permute((1, 0)), epi, node.name))


def _hybrid_conv(ctx: Context, node: Node) -> None:
    """x [N, C, H, W] float convolved with the int8 weights [M, C / group, KH, KW]. With a zero point, the
    quantized input goes inside a buffer padded with it, and the convolution pads nothing."""
    x, weights = ctx.view(node.inputs[0]), ctx.const(node.inputs[1])
    win = window(node, x.shape[2:], tuple(node.attr("kernel_shape", weights.shape[2:])))
    inverse, scale, zero = _statistics(ctx, node, x)
    label = f"{node.name} quantized input"
    if zero is not None and any(win.pads_begin + win.pads_end):
        (top, left), (bottom, right) = win.pads_begin, win.pads_end
        n, c, h, w = x.shape
        xq = ctx.temp((n, c, top + h + bottom, left + w + right), label, np.int8, x.order())
        ctx.emit(Map(xq, (_along(zero, 0, xq.shape),), cast(np.int8, X), node.name))
        q = xq.slice(2, top, h).slice(3, left, w)
        win = Window(win.kernel, win.strides, win.dilations, (0, 0), (0, 0), win.out)
    else:
        q = xq = ctx.temp(x.shape, label, np.int8, x.order())
    _quantize(ctx, node, x, q, inverse, zero)
    out = ctx.new(node.outputs[0], CHANNELS_LAST[4])
    epi = _scaled_back(ctx, node, out, scale, zero, weights)
    ctx.emit(Conv(out, xq, ctx.view(node.inputs[1]), win, node.attr("group", 1), epi, node.name))


declare({
    "HybridConv": OpSpec(None, _hybrid_conv),
    "HybridGemm": OpSpec(None, _hybrid_gemm),
})
