"""Random integer nodes on every integer type: bit shifts, bitwise logic, Mod (either sign convention), Max, Min and
Where, of exact values cast to the type (small: no overflow, no undefined conversion) and cast back to float. The
results stay below 2^24, exact in float."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T

from .builder import Builder, Value

SIGNED = [(T.INT8, np.int8), (T.INT16, np.int16), (T.INT32, np.int32), (T.INT64, np.int64)]
UNSIGNED = [(T.UINT8, np.uint8), (T.UINT16, np.uint16), (T.UINT32, np.uint32), (T.UINT64, np.uint64)]


def integers(b: Builder, elem: int, signed: bool) -> Value:
    """An exact value clipped to [-15, 15] ([0, 15] unsigned), times 8, cast to `elem` (truncated alike)."""
    (clipped,) = b.node("Clip", [b.pick(exact=True).name, b.const(np.float32(-15 if signed else 0)),
                                 b.const(np.float32(15))], exact=True)
    (scaled,) = b.node("Mul", [clipped.name, b.const(np.float32(8))], exact=True)
    return b.node("Cast", [scaled.name], to=elem, exact=True)[0]


def bit_shift(b: Builder) -> None:
    """BitShift (unsigned types only) by constant amounts or by another value's, from 0 to 11 bits: a left shift
    of a uint8 or uint16 wraps around."""
    elem, dtype = b.choice(UNSIGNED)
    x = integers(b, elem, False)
    if b.chance(0.5):
        amounts = b.const(b.rng.integers(0, 12, b.broadcast_shape(x.shape)).astype(dtype))
    else:
        (amount,) = b.node("Div", [integers(b, elem, False).name, b.const(np.array(11, dtype))], exact=True)
        amounts = amount.name  # 0 to 10
    (r,) = b.node("BitShift", [x.name, amounts], direction=b.choice(["LEFT", "RIGHT"]), exact=True)
    b.node("Cast", [r.name], to=T.FLOAT, exact=True)


def bitwise(b: Builder) -> None:
    """BitwiseAnd, Or, Xor of two values or a value and a constant mask, or BitwiseNot."""
    signed = b.chance(0.5)
    elem, dtype = b.choice(SIGNED if signed else UNSIGNED)
    x = integers(b, elem, signed)
    op = b.choice(["BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"])
    if op == "BitwiseNot":
        (r,) = b.node(op, [x.name], exact=True)
    else:
        other = integers(b, elem, signed).name if b.chance(0.5) else \
            b.const(b.rng.integers(-128 if signed else 0, 128, b.broadcast_shape(x.shape)).astype(dtype))
        (r,) = b.node(op, [x.name, other][::b.choice([1, -1])], exact=True)
    b.node("Cast", [r.name], to=T.FLOAT, exact=True)


def modulo(b: Builder) -> None:
    """Mod with the divisor's sign (fmod=0) or the dividend's (fmod=1), by constant divisors of either sign, none
    zero."""
    signed = b.chance(0.7)
    elem, dtype = b.choice(SIGNED if signed else UNSIGNED)
    x = integers(b, elem, signed)
    shape = b.broadcast_shape(x.shape)
    divisors = b.rng.integers(1, 20, shape) * (b.rng.choice([-1, 1], shape) if signed else 1)
    (r,) = b.node("Mod", [x.name, b.const(divisors.astype(dtype))],
                  fmod=b.int(0, 1), exact=True)
    b.node("Cast", [r.name], to=T.FLOAT, exact=True)


def select(b: Builder) -> None:
    """Max or Min of two integer values (or a value and a constant), or Where between them on a comparison of the
    integers."""
    signed = b.chance(0.5)
    elem, dtype = b.choice(SIGNED if signed else UNSIGNED)
    x, y = integers(b, elem, signed), integers(b, elem, signed)
    op = b.choice(["Max", "Min", "Where"])
    if op == "Where":
        (cond,) = b.node(b.choice(["Greater", "Less", "Equal"]), [x.name, b.const(np.array(b.int(0, 40), dtype))],
                         exact=True)
        (r,) = b.node(op, [cond.name, x.name, y.name], exact=True)
    else:
        operands = [x.name, y.name] + ([b.const(np.array(b.int(0, 60), dtype))] if b.chance(0.3) else [])
        (r,) = b.node(op, operands, exact=True)
    b.node("Cast", [r.name], to=T.FLOAT, exact=True)


GENERATORS = [(bit_shift, 1), (bitwise, 1), (modulo, 1), (select, 1)]
