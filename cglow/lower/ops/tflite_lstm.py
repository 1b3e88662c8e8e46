"""Lowering of the integer ops that TFLite's 8-bit LSTM is built of (graph/tflite/lstm_int8.py): IntLogistic and
IntTanh, gemmlowp's int16 fixed-point functions (runtime_c/logistic16.c, tanh16.c: a value in Q(integer_bits) to
Q0.15), and IntLstmCell, the cell state's update. Each is one elementwise map."""
from __future__ import annotations

from ...graph.ir import Node
from ..context import Context, lowering


@lowering("IntLogistic", "IntTanh")
def _function(ctx: Context, node: Node) -> None:
    helper = "cglow_logistic16" if node.op == "IntLogistic" else "cglow_tanh16"
    ctx.elementwise(node, f"{helper}({{0}}, {node.attr('integer_bits')})")


@lowering("IntLstmCell")
def _cell(ctx: Context, node: Node) -> None:
    """Inputs forget gate f, cell state c, cell gate g (Q0.15, Q0.15 and c's scale) and input gate i, absent with
    CIFG (then 1 - f: 32767 - f): c' = f c / 2^15 + i g / 2^shift, each product divided rounding to nearest
    (RoundingDivideByPOT) and kept as int16, the sum saturated and clipped to [lo, hi] (UpdateLstmCellInteger)."""
    i = "{3}" if len(node.inputs) > 3 else "(32767 - {0})"
    forget = "cglow_wrap16(cglow_divide_pot_tfl((int32_t){0} * {1}, 15))"
    update = f"cglow_wrap16(cglow_divide_pot_tfl((int32_t){i} * {{2}}, {node.attr('shift')}))"
    ctx.elementwise(node, f"cglow_clamp({forget} + {update}, {node.attr('lo')}, {node.attr('hi')})")
