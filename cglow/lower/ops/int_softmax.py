"""Lowering of IntSoftmax, TFLite's 8-bit SOFTMAX along the last axis (graph/tflite/softmax.py makes it), to
two reductions and two maps per the reference kernel: each row's maximum; the sum of its elements' exponentials
(runtime_c/exp_tfl.c) as Q12.19s; the sum's reciprocal, once per row (runtime_c/reciprocal_tfl.c); each output,
its exponential times the reciprocal divided by the sum's power of two, from the type's least value. The
exponential is computed twice per element, as the kernel does, which keeps the temporaries to a few per row."""
from __future__ import annotations

import numpy as np

from ...graph.ir import Node
from ...instr.expr import ACC, Input, call, cast, clamp, inputs
from ...instr.ir import Map, Reduce
from ..context import Context, lowering
from .reduce import spread

SUM_BITS = 12  # the row's sum is a Q12.19
I32 = np.dtype(np.int32)


@lowering("IntSoftmax")
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
