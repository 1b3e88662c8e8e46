"""Lowering of comparisons, logical ops, Where, the NaN/infinity tests and the type conversions to maps.

Bool values are 0 or 1 in a uint8_t; C comparisons and logical operators give exactly that.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ...c_text import NARROW_FLOATS, STORED_FLOATS, SUB_BYTE_INTS
from ...graph.ir import Node
from ...graph.registry import OpSpec, declare
from ...graph.rules import logic as rules
from ...instr.expr import (Expr, Input, and_, binary, call, cast, eq, ge, gt, le, lift, lit, lt, ne, not_, or_,
                           select, substitute)
from ..context import Context
from .elementwise import identity, kind

X, Y = Input(0), Input(1)
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
COMPARISONS = {"Equal": eq(X, Y), "Less": lt(X, Y), "Greater": gt(X, Y), "LessOrEqual": le(X, Y),
               "GreaterOrEqual": ge(X, Y)}
EXPRS = {
    **COMPARISONS,
    "And": and_(X, Y),
    "Or": or_(X, Y),
    "Xor": ne(X, Y),
    "Not": not_(X),
    "Where": select(X, Y, Input(2)),
    "IsNaN": ne(call("isnan", X), 0),
}
IS_INF = {(1, 1): eq(call("fabsf", X), float("inf")), (1, 0): eq(X, float("inf")), (0, 1): eq(X, -float("inf"))}
CASTS = {  # (from kind, to kind) -> expression; ctx.elementwise adds the final cast to an integer type
    ("float", "bool"): ne(X, 0.0),
    ("signed", "bool"): ne(X, 0),
    ("unsigned", "bool"): ne(X, 0),
    **{(k, "float"): cast(F32, X) for k in ("signed", "unsigned", "bool")},
    **{(k, t): X for k in ("signed", "unsigned", "bool") for t in ("signed", "unsigned")},
}
FLOAT8_FORMATS = {t: i for i, t in enumerate(NARROW_FLOATS[2:6])}  # runtime_c/float8_to_float.c's `format`
E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
TO_FLOAT = {"float16": "cglow_half_to_float", "bfloat16": "cglow_bfloat_to_float", "float4_e2m1fn":
            "cglow_float4_to_float", "float8_e8m0fnu": "cglow_e8m0_to_float"}
FROM_FLOAT = {"float16": "cglow_float_to_half", "bfloat16": "cglow_float_to_bfloat", "float4_e2m1fn":
              "cglow_float_to_float4"}
# float to an integer type truncates toward zero; the unsigned and narrow types go through a wider signed
# type, so that negative and out-of-range values wrap (as onnxruntime's do on common targets)
VIA = {**dict.fromkeys(map(np.dtype, ("int8", "uint8", "int16", "uint16")), np.dtype(np.int32)),
       np.dtype("uint32"): np.dtype(np.int64)}


def _logic(ctx: Context, node: Node) -> None:
    ctx.elementwise(node, EXPRS[node.op], compares=node.op in COMPARISONS)


def _is_inf(ctx: Context, node: Node) -> None:
    detect = (node.attr("detect_positive", 1), node.attr("detect_negative", 1))
    ctx.elementwise(node, IS_INF.get(detect, lift(0)), node.inputs[:1] if detect in IS_INF else [])


def to_float(source: np.dtype, value: Expr = X) -> Expr:
    """A value of a stored float type (graph/stored_types.py; a narrow one's bits), Input(0) by default, as a float
    (runtime_c)."""
    if source == np.float64:
        return cast(F32, value)
    if source in FLOAT8_FORMATS:
        return call("cglow_float8_to_float", value, lit(FLOAT8_FORMATS[source], np.int32))
    return call(TO_FLOAT[source.name], value)


def from_float(target: np.dtype, value: Expr, saturate: int, round_mode: str = "up") -> Expr:
    """A float value as a stored float type (a narrow one's bits, rounded; a float8 one saturating as ONNX's Cast
    says, an E8M0 one rounded by round_mode too)."""
    if target == np.float64:
        return cast(target, value)
    if target in FLOAT8_FORMATS:
        return call("cglow_float_to_float8", value, lit(FLOAT8_FORMATS[target], np.int32),
                    lit(int(bool(saturate)), np.int32))
    if target == E8M0:
        return call("cglow_float_to_e8m0", value, lit(rules.ROUND_MODES.index(round_mode), np.int32),
                    lit(int(bool(saturate)), np.int32))
    return call(FROM_FLOAT[target.name], value)


def _sub_byte(dtype: np.dtype) -> tuple[int, int, np.dtype]:
    """A 4- or 2-bit integer type's mask, sign bit (0 unsigned) and computing type (graph/stored_types.py)."""
    bits = 4 if "4" in dtype.name else 2
    signed = not dtype.name.startswith("u")
    return (1 << bits) - 1, (1 << (bits - 1)) if signed else 0, np.dtype(np.int8 if signed else np.uint8)


def _conversion(source: np.dtype, target: np.dtype, saturate: int = 1, round_mode: str = "up") -> Expr:
    """Input(0), of type source, converted to target: through float where either is a stored float type; through
    8 bits where either is a 4- or 2-bit integer (its bits in a byte's low bits, sign-extended when read, wrapped
    when written, as Cast's fixed-point conversions wrap)."""
    if source in SUB_BYTE_INTS:
        mask, sign, wide = _sub_byte(source)
        value = binary("&", X, mask)
        value = binary("-", binary("^", value, sign), sign) if sign else value
        return value if target == wide else substitute(_conversion(wide, target, saturate), [value])
    if target in SUB_BYTE_INTS:
        mask = _sub_byte(target)[0]
        value = _conversion(source, np.dtype(np.int32), saturate)
        return binary("&", cast(np.int32, value) if source in STORED_FLOATS or source == F32 else value, mask)
    if source in STORED_FLOATS or target in STORED_FLOATS:
        value = to_float(source) if source in STORED_FLOATS else _conversion(source, F32)
        if target in STORED_FLOATS:
            return from_float(target, value, saturate, round_mode)
        return value if target == F32 else substitute(_conversion(F32, target), [value])
    return CASTS.get((kind(source), kind(target)), cast(VIA[target], X) if target in VIA else X)


def _bit_cast(ctx: Context, node: Node) -> None:
    """The bits read as the other type: a float's or a double's through cglow_float_bits and cglow_bits_float
    (memcpy; cglow_double_bits, cglow_bits_double), the integer types' (the narrow floats' bits too) by C's
    conversion, which wraps; a 4- or 2-bit type's low bits masked."""
    source, target = ctx.dtype(node.inputs[0]), ctx.dtype(node.outputs[0])
    expr = call("cglow_float_bits", X) if source == F32 else call("cglow_double_bits", X) if source == F64 else X
    if rules.bit_width(source) < 8:
        expr = binary("&", expr, (1 << rules.bit_width(source)) - 1)
    if target in (F32, F64):
        bits = np.dtype(np.uint32 if target == F32 else np.uint64)
        expr = call("cglow_bits_float" if target == F32 else "cglow_bits_double", cast(bits, expr))
    ctx.elementwise(node, expr, node.inputs[:1])


def _cast(ctx: Context, node: Node) -> None:
    source, target = ctx.dtype(node.inputs[0]), ctx.dtype(node.outputs[0])
    if source == target:
        return identity(ctx, node)
    ctx.elementwise(node, _conversion(source, target, node.attr("saturate", 1), node.attr("round_mode", "up")),
                    node.inputs[:1])


declare({
    "And": OpSpec(rules.logic, _logic),
    "BitCast": OpSpec(rules.bit_cast, _bit_cast),
    "Cast": OpSpec(rules.cast, _cast),
    "CastLike": OpSpec(rules.cast, _cast),
    "Equal": OpSpec(rules.logic, _logic),
    "Greater": OpSpec(rules.logic, _logic),
    "GreaterOrEqual": OpSpec(rules.logic, _logic),
    "IsInf": OpSpec(rules.float_test, _is_inf),
    "IsNaN": OpSpec(rules.float_test, _logic),
    "Less": OpSpec(rules.logic, _logic),
    "LessOrEqual": OpSpec(rules.logic, _logic),
    "Not": OpSpec(rules.logic, _logic),
    "Or": OpSpec(rules.logic, _logic),
    "Where": OpSpec(rules.where, _logic),
    "Xor": OpSpec(rules.logic, _logic),
})
