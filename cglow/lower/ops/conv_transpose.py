"""Lowering of ConvTranspose to a plain convolution: the input spread out by the strides (zeros between
its elements), then a stride-1 Conv with the kernel flipped and its channel axes swapped per group."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...errors import CglowError
from ...graph.geometry import Window
from ...graph.ir import Node
from ...graph.registry import OpSpec, declare
from ...graph.rules import conv_transpose as rules
from ...graph.rules.conv_transpose import transposed
from ...instr.expr import ACC, Input, lit
from ...instr.ir import Conv, Epilogue, Gemm, Map, View
from ..context import Context
from .nn import CHANNELS_LAST, as_2d


def _lift(values: tuple[int, ...], unit: int) -> tuple[int, ...]:
    """Per-spatial-dim values of a 1-D op as 2-D ones, with a unit height."""
    return (unit,) * (2 - len(values)) + tuple(values)


def _conv_weights(ctx: Context, node: Node) -> View:
    """W [C, M/group, k...] as the equivalent convolution's [M, C/group, k...], spatially flipped (2-D)."""
    group = node.attr("group", 1)
    c, mg, *kernel = ctx.shape(node.inputs[1])
    w = ctx.const(node.inputs[1])
    if w is not None:
        per_group = w.reshape((group, c // group, mg, -1)).swapaxes(1, 2)[..., ::-1]
        return ctx.const_view(per_group.reshape((group * mg, c // group) + _lift(kernel, 1)), f"{node.name} weights")
    # run-time weights: one Gemm against the reversal matrix flips the kernel (exactly: one product by 1.0
    # per element), writing through a permuted view swaps the channel axes
    size = int(np.prod(kernel, dtype=np.int64))
    shape = (group, c // group, mg, size)
    w = ctx.reshaped(node.inputs[1], shape)
    reversal = ctx.const_view(np.eye(size, dtype=np.float32)[::-1], f"{node.name} kernel reversal")
    out = ctx.temp((group, mg, c // group, size), f"{node.name} weights")
    ctx.emit(Gemm(out.permute((0, 2, 1, 3)), w, reversal.broadcast_to(shape[:2] + (size, size)), Epilogue(),
                  node.name))
    return out.reshape((group * mg, c // group) + _lift(kernel, 1))


def _spread(ctx: Context, x: View, strides: tuple[int, int], label: str) -> View:
    """x with strides - 1 zeros between neighbours along each spatial axis."""
    if all(s == 1 or n == 1 for s, n in zip(strides, x.shape[2:])):
        return x
    n, c, h, w = x.shape
    full = ctx.temp((n, c, (h - 1) * strides[0] + 1, (w - 1) * strides[1] + 1), label, order=x.order())
    ctx.emit(Map(full, (), lit(0.0, np.float32), label))
    lattice = replace(full, shape=x.shape, strides=full.strides[:2] + (full.strides[2] * strides[0],
                                                                       full.strides[3] * strides[1]))
    ctx.emit(Map(lattice, (x,), Input(0), label))
    return full


def _conv_transpose(ctx: Context, node: Node) -> None:
    geo = transposed(node, ctx.shape(node.inputs[0])[2:], ctx.shape(node.inputs[1])[2:])
    x = _spread(ctx, as_2d(ctx.view(node.inputs[0])), _lift(geo.strides, 1), f"{node.name} spread")
    # the convolution's pads: the kernel's reach less the transposed pads; a negative one crops the input
    begin, end = [], []
    for axis, k, d, pb, pe, extra in zip((2, 3), _lift(geo.kernel, 1), _lift(geo.dilations, 1),
                                         _lift(geo.pads_begin, 0), _lift(geo.pads_end, 0),
                                         _lift(geo.output_padding, 0)):
        first, last = d * (k - 1) - pb, d * (k - 1) - pe + extra
        length = x.shape[axis] + min(first, 0) + min(last, 0)
        if length < 1:
            raise CglowError(f"{node.describe()}: the pads crop away the whole input")
        x = x.slice(axis, max(-first, 0), length)
        begin.append(max(first, 0))
        end.append(max(last, 0))
    out = as_2d(ctx.new(node.outputs[0], CHANNELS_LAST.get(len(ctx.shape(node.outputs[0])))))
    weights = _conv_weights(ctx, node)
    epi = Epilogue()
    if len(node.inputs) > 2 and node.inputs[2]:
        bias = ctx.view(node.inputs[2]).reshape((out.shape[1], 1, 1)).broadcast_to(out.shape)
        epi = Epilogue(ACC + Input(0), (bias,))
    win = Window(_lift(geo.kernel, 1), (1, 1), _lift(geo.dilations, 1), tuple(begin), tuple(end), out.shape[2:])
    ctx.emit(Conv(out, x, weights, win, node.attr("group", 1), epi, node.name))


declare({
    "ConvTranspose": OpSpec(rules.conv_transpose, _conv_transpose),
})
