"""Lowering of comparisons, logical ops, Where, the NaN/infinity tests and the type conversions to maps.

Bool values are 0 or 1 in a uint8_t; C comparisons and logical operators give exactly that.
"""
from __future__ import annotations

import numpy as np

from ...graph.ir import Node
from ..context import Context, lowering
from .elementwise import identity, kind

COMPARISONS = {
    "Equal": "({0} == {1})",
    "Less": "({0} < {1})",
    "Greater": "({0} > {1})",
    "LessOrEqual": "({0} <= {1})",
    "GreaterOrEqual": "({0} >= {1})",
}
EXPRS = {
    **COMPARISONS,
    "And": "({0} && {1})",
    "Or": "({0} || {1})",
    "Xor": "({0} != {1})",
    "Not": "(!{0})",
    "Where": "({0} ? {1} : {2})",
    "IsNaN": "(isnan({0}) != 0)",
}
IS_INF = {(1, 1): "(fabsf({0}) == INFINITY)", (1, 0): "({0} == INFINITY)", (0, 1): "({0} == -INFINITY)"}
CASTS = {  # (from kind, to kind) -> expression; ctx.elementwise adds the final cast to an integer type
    ("float", "bool"): "({0} != 0.0f)",
    ("signed", "bool"): "({0} != 0)",
    ("unsigned", "bool"): "({0} != 0)",
    **{(k, "float"): "((float){0})" for k in ("signed", "unsigned", "bool")},
    **{(k, t): "{0}" for k in ("signed", "unsigned", "bool") for t in ("signed", "unsigned")},
}
# float to an integer type truncates toward zero; the unsigned and narrow types go through a wider signed
# type, so that negative and out-of-range values wrap (as onnxruntime's do on common targets)
VIA = {**dict.fromkeys(map(np.dtype, ("int8", "uint8", "int16", "uint16")), "int32_t"), np.dtype("uint32"): "int64_t"}


@lowering(*EXPRS)
def _logic(ctx: Context, node: Node) -> None:
    ctx.elementwise(node, EXPRS[node.op], compares=node.op in COMPARISONS)


@lowering("IsInf")
def _is_inf(ctx: Context, node: Node) -> None:
    detect = (node.attr("detect_positive", 1), node.attr("detect_negative", 1))
    ctx.elementwise(node, IS_INF.get(detect, "0"), node.inputs[:1] if detect in IS_INF else [])


@lowering("Cast", "CastLike")
def _cast(ctx: Context, node: Node) -> None:
    source, target = ctx.dtype(node.inputs[0]), ctx.dtype(node.outputs[0])
    if source == target:
        return identity(ctx, node)
    expr = CASTS.get((kind(source), kind(target)), f"({VIA[target]}){{0}}" if target in VIA else "{0}")
    ctx.elementwise(node, expr, node.inputs[:1])
