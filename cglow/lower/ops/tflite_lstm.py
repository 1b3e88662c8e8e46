"""Lowering of the integer ops that TFLite's 8-bit LSTM is built of (graph/tflite/lstm_int8.py): IntLogistic and
IntTanh, gemmlowp's int16 fixed-point functions (runtime_c/logistic16.c, tanh16.c: a value in Q(integer_bits) to
Q0.15), IntLstmCell, the cell state's update, and IntPeephole, a gate's peephole term, each elementwise maps;
IntLayerNorm, the gates' integer layer normalization, reductions over each row and maps."""
from __future__ import annotations

import numpy as np

from ...graph.ir import Node
from ...graph.registry import OpSpec, declare
from ...instr.expr import ACC, Input, call, cast, clamp, inputs
from ...instr.ir import Map, Reduce
from ..context import Context
from .reduce import spread

X, Y, Z = inputs(3)
I16, I32, I64 = np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.int64)


def _function(ctx: Context, node: Node) -> None:
    helper = "cglow_logistic16" if node.op == "IntLogistic" else "cglow_tanh16"
    ctx.elementwise(node, call(helper, X, node.attr("integer_bits")))


def _cell(ctx: Context, node: Node) -> None:
    """Inputs forget gate f, cell state c, cell gate g (Q0.15, Q0.15 and c's scale) and input gate i, absent with
    CIFG (then 1 - f: 32767 - f): c' = f c / 2^15 + i g / 2^shift, each product divided rounding to nearest
    (RoundingDivideByPOT) and kept as int16, the sum saturated and clipped to [lo, hi] (UpdateLstmCellInteger)."""
    i = Input(3) if len(node.inputs) > 3 else 32767 - X
    forget = call("cglow_wrap16", call("cglow_divide_pot_tfl", cast(I32, X) * Y, 15))
    update = call("cglow_wrap16", call("cglow_divide_pot_tfl", cast(I32, i) * Z, node.attr("shift")))
    ctx.elementwise(node, clamp(forget + update, node.attr("lo"), node.attr("hi")))


def _peephole(ctx: Context, node: Node) -> None:
    """Gate [rows, n] plus cell state times weights [n] (int16 each), requantized by (mult, shift) and saturated to
    int16 (VectorBatchVectorCwiseProductAccumulate). LiteRT's kernel is Neon's (on x86 too, through NEON_2_SSE):
    whole blocks of 16 columns go four lanes at a time, their division by a power of two rounding halves up
    (runtime_c/scale_up_tfl.c), the columns left one by one, rounding them away from zero (scale_tfl.c)."""
    gate, cell = ctx.view(node.inputs[0]), ctx.view(node.inputs[1])
    rows, n = gate.shape
    views = (ctx.new(node.outputs[0]), gate, cell, ctx.view(node.inputs[2]).broadcast_to((rows, n)))
    blocks = n // 16 * 16
    for helper, start, stop in (("cglow_scale_up_tfl", 0, blocks), ("cglow_scale_tfl", blocks, n)):
        if stop > start:
            product = call(helper, cast(I32, Y) * Z, node.attr("mult"), node.attr("shift"))
            out, *ins = (v.slice(1, start, stop - start) for v in views)
            ctx.emit(Map(out, tuple(ins), cast(I16, clamp(X + product, -32768, 32767)), node.name))


def _layer_norm(ctx: Context, node: Node) -> None:
    """Each row of x [rows, n] (int16) normalized as TFLite's integer kernel does (ApplyLayerNorm): the row's mean
    times 2^10 (truncated), its variance (runtime_c/variance_tfl.c: from the sum of squares, the guard below 1)
    and the inverse standard deviation's multiplier and shift (inv_sqrt_tfl.c, inv_sqrt_exp_tfl.c), then each
    value normalized, times its coefficient plus its bias (normalize_tfl.c: inputs 1 and 2, int16 and int32 per
    column), requantized by the coefficients' scale (mult, shift) times 2^12 into Q3.12 and saturated."""
    x = ctx.view(node.inputs[0])
    rows, n = x.shape
    stats = {name: ctx.temp((rows,), f"{node.name} {name}", dtype)
             for name, dtype in (("mean", np.int32), ("squares", np.int64), ("variance", np.int32),
                                 ("multiplier", np.int32), ("shift", np.int32))}
    ctx.emit(Reduce(stats["mean"], (x,), "sum", X, cast(I32, cast(I64, ACC) * 1024 / n), node.name))
    ctx.emit(Reduce(stats["squares"], (x,), "sum", cast(I64, X) * X, ACC, node.name))
    ctx.emit(Map(stats["variance"], (stats["squares"], stats["mean"]),
                 call("cglow_variance_tfl", X, Y, n, node.attr("guard")), node.name))
    ctx.emit(Map(stats["multiplier"], (stats["variance"],), call("cglow_inv_sqrt_tfl", X), node.name))
    ctx.emit(Map(stats["shift"], (stats["variance"],), -clamp(call("cglow_inv_sqrt_exp_tfl", X), 0, 31), node.name))
    columns = [ctx.view(name).broadcast_to((rows, n)) for name in node.inputs[1:3]]
    per_row = [spread(stats[name], n) for name in ("mean", "multiplier", "shift")]
    normalized = call("cglow_normalize_tfl", *inputs(6))
    ctx.emit(Map(ctx.new(node.outputs[0]), (x, *per_row, *columns),
                 cast(I16, call("cglow_requant_tfl", normalized, node.attr("mult"), node.attr("shift") + 12, 0, -32768,
                                32767)), node.name))


declare({
    "IntLayerNorm": OpSpec(None, _layer_norm),
    "IntLogistic": OpSpec(None, _function),
    "IntLstmCell": OpSpec(None, _cell),
    "IntPeephole": OpSpec(None, _peephole),
    "IntTanh": OpSpec(None, _function),
})
