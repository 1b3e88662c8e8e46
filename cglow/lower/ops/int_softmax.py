"""Lowering of IntSoftmax, TFLite's 8-bit SOFTMAX along the last axis (graph/tflite/softmax.py makes it), to
two reductions and two maps per the reference kernel: each row's maximum; the sum of its elements' exponentials
(runtime_c/exp_tfl.c) as Q12.19s; the sum's reciprocal, once per row (runtime_c/reciprocal_tfl.c); each output,
its exponential times the reciprocal divided by the sum's power of two, from the type's least value. The
exponential is computed twice per element, as the kernel does, which keeps the temporaries to a few per row.

And of IntSoftmaxTable, the exponentials a table lookup (graph/quant/softmax.py makes it): each row's maximum,
each element's difference from it (uint8) and its table entry (a Gather), their sum (int64), each output."""
from __future__ import annotations

import numpy as np

from ...graph.ir import Node
from ...graph.quant.softmax import RATIO_BITS
from ...graph.registry import OpSpec, declare
from ...instr.expr import ACC, Input, binary, call, cast, clamp, inputs
from ...instr.ir import Map, Reduce
from ..context import Context
from .quant import lookup
from .reduce import spread

SUM_BITS = 12  # the row's sum is a Q12.19
I32 = np.dtype(np.int32)
I64 = np.dtype(np.int64)


def _int_softmax(ctx: Context, node: Node) -> None:
    x = ctx.view(node.inputs[0])
    out = ctx.new(node.outputs[0])
    rows, depth = x.shape[:-1], x.shape[-1]
    dtype = ctx.dtype(node.outputs[0])
    peak = ctx.temp(rows, f"{node.name} max", ctx.dtype(node.inputs[0]))
    total = ctx.temp(rows, f"{node.name} sum", I32)
    scale = ctx.temp(rows, f"{node.name} reciprocal", I32)
    value, top, reciprocal, total_at = inputs(4)
    exp = call("cglow_exp_tfl", value - top, node.attr("mult"), node.attr("shift"), node.attr("diff_min"))
    ctx.emit(Reduce(peak, (x,), "max", value, ACC, node.name))
    ctx.emit(Reduce(total, (x, spread(peak, depth)), "sum", call("cglow_divide_pot_tfl", exp, SUM_BITS), ACC,
                    node.name))
    ctx.emit(Map(scale, (total,), call("cglow_reciprocal_tfl", Input(0)), node.name))
    # the sum is x * 2^(SUM_BITS - leading zeros) with x in [1, 2), the reciprocal 1/x; the output, e / sum in
    # units of 2^-bits, is their Q0.31 product divided by 2^(SUM_BITS + 31 - bits - leading zeros)
    shift = SUM_BITS + 31 - 8 * dtype.itemsize - call("cglow_leading_zeros", cast(np.uint32, total_at))
    scaled = call("cglow_divide_pot_tfl", call("cglow_high_mul_tfl", reciprocal, exp), shift)
    ctx.emit(Map(out, (x, spread(peak, depth), spread(scale, depth), spread(total, depth)),
                 cast(dtype, clamp(scaled + node.attr("y_zero"), node.attr("lo"), node.attr("hi"))), node.name))


def _int_softmax_table(ctx: Context, node: Node) -> None:
    x, table = ctx.view(node.inputs[0]), ctx.view(node.inputs[1])
    out = ctx.new(node.outputs[0])
    rows, depth = x.shape[:-1], x.shape[-1]
    peak = ctx.temp(rows, f"{node.name} max", ctx.dtype(node.inputs[0]))
    diff = ctx.temp(x.shape, f"{node.name} differences", np.dtype(np.uint8))
    exp = ctx.temp(x.shape, f"{node.name} exponentials", I32)
    total = ctx.temp(rows, f"{node.name} sum", I64)
    value, other = inputs(2)
    ctx.emit(Reduce(peak, (x,), "max", value, ACC, node.name))
    ctx.emit(Map(diff, (x, spread(peak, depth)), cast(np.uint8, other - value), node.name))
    lookup(ctx, exp, table, diff, node.name)
    ctx.emit(Reduce(total, (exp,), "sum", value, ACC, node.name))
    # e / (sum sy) rounded, halves up: (2 e ratio + sum 2^16) / (sum 2^17), ratio = 2^16 / sy (RATIO_BITS = 16)
    quotient = cast(I32, (cast(I64, value) * (2 * node.attr("ratio")) + binary("<<", other, RATIO_BITS)) /
                    binary("<<", other, RATIO_BITS + 1))
    ctx.emit(Map(out, (exp, spread(total, depth)),
                 cast(ctx.dtype(node.outputs[0]), clamp(quotient + node.attr("y_zero"), node.attr("lo"),
                                                        node.attr("hi"))), node.name))


declare({
    "IntSoftmax": OpSpec(None, _int_softmax),
    "IntSoftmaxTable": OpSpec(None, _int_softmax_table),
})
