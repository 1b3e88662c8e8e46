"""Random elementwise nodes: activations, functions on their domains, broadcasting arithmetic with skip connections,
comparisons and Where, Mod and the thresholds of exact values, infinities and NaNs detected, integer excursions
through Cast. A generator adds its node(s) or raises Rejected."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T

from .builder import Builder, Value, broadcastable

SMOOTH = ["Relu", "Neg", "Abs", "Sigmoid", "Tanh", "Erf", "Sin", "Cos", "Atan", "Asinh", "Softsign", "Softplus",
          "HardSwish", "Mish", "Identity", "Dropout", "Celu", "Gelu"]
EXACT = {"Relu", "Neg", "Abs", "Identity", "Dropout"}  # no rounding: exact in, exact out


def unary(b: Builder) -> None:
    x = b.pick(empty=True)
    op = b.choice(SMOOTH + ["LeakyRelu", "Elu", "Selu", "HardSigmoid", "Clip"])
    attrs = {"LeakyRelu": dict(alpha=b.uniform(0.01, 0.5)), "Elu": dict(alpha=b.uniform(0.5, 2)),
             "HardSigmoid": dict(alpha=b.uniform(0.1, 0.5), beta=b.uniform(0.2, 0.8)),
             "Celu": dict(alpha=b.uniform(0.5, 2)), "Gelu": dict(approximate=b.choice(["none", "tanh"]))}.get(op, {})
    inputs = [x.name]
    if op == "Clip":
        low = b.uniform(-2, 0)
        inputs += [b.const(np.float32(low)) if b.chance(0.8) else "", b.const(np.float32(low + b.uniform(0.1, 3)))]
    b.node(op, inputs, exact=x.exact and op in EXACT, **attrs)


def positive(b: Builder, x: Value) -> str:
    """x made positive and away from zero: |x| + c."""
    (a,) = b.node("Abs", [x.name], exact=x.exact)
    return b.node("Add", [a.name, b.const(np.float32(b.uniform(0.2, 1)))])[0].name


def of_positive(b: Builder) -> None:
    b.node(b.choice(["Log", "Sqrt", "Reciprocal"]), [positive(b, b.pick())])


def exp(b: Builder) -> None:
    (clipped,) = b.node("Clip", [b.pick().name, b.const(np.float32(-4)), b.const(np.float32(4))])
    b.node("Exp", [clipped.name])


def of_domain(b: Builder) -> None:
    """A function defined on part of the line, or growing fast, of a value mapped into that part (away from its
    poles and ends) by arithmetic: Tan of (-1.4, 1.4), Asin, Acos and Atanh of (-1, 1) by softsign, Acosh of
    |x| + 1.2 and more, Sinh and Cosh of (-4, 4); a value computed before too, a Clip's bound passed through
    (the regression test library_function_of_a_clip_bound)."""
    op = b.choice(["Tan", "Asin", "Acos", "Atanh", "Acosh", "Sinh", "Cosh"])
    x = b.pick()
    if op == "Acosh":
        (a,) = b.node("Add", [positive(b, x), b.const(np.float32(1))])
    else:
        (t,) = b.node("Softsign", [x.name])
        scale = {"Tan": 1.4, "Atanh": 0.9, "Sinh": 4, "Cosh": 4}.get(op, 0.95)
        (a,) = b.node("Mul", [t.name, b.const(np.float32(scale))])
    b.node(op, [a.name])


def rounding(b: Builder) -> None:
    (scaled,) = b.node("Mul", [b.pick(exact=True).name, b.const(np.float32(4))], exact=True)  # a power of two
    b.node(b.choice(["Floor", "Ceil", "Round", "Sign"]), [scaled.name], exact=True)


def threshold(b: Builder) -> None:
    """The discontinuous activations (a step at their thresholds) and Mod (fmod: exact) of exact values."""
    x = b.pick(exact=True, empty=True)
    op = b.choice(["Shrink", "ThresholdedRelu", "Mod"])
    if op == "Shrink":
        b.node(op, [x.name], bias=b.uniform(-1, 1), lambd=b.uniform(0, 1))
    elif op == "ThresholdedRelu":
        b.node(op, [x.name], alpha=b.uniform(-0.5, 1), exact=True)
    else:  # divisors of either sign, exact in binary
        divisor = b.rng.choice([-2, -1.5, -0.75, 0.5, 1.25, 2], b.broadcast_shape(x.shape)).astype(np.float32)
        b.node(op, [x.name, b.const(divisor)], fmod=1, exact=True)


def infinite(b: Builder) -> None:
    """IsInf (either sign or both) or IsNaN of a value with infinities and NaNs: the log of the zeros of a Relu, the
    quotient of a Relu by itself (0 / 0), or a constant's infinities and NaNs added; as float. No other node reads
    the value with them: the next ops need not agree on infinities and NaNs."""
    x = b.pick(exact=True)
    (r,) = b.node("Relu", [x.name], exact=True)
    how = b.choice(["Log", "Div", "Add"])
    if how == "Log":
        (special,) = b.node("Log", [r.name])
    elif how == "Div":
        (special,) = b.node("Div", [r.name, r.name])
    else:
        c = b.rng.choice(np.array([np.inf, -np.inf, np.nan, 1.5], np.float32), b.broadcast_shape(x.shape))
        (special,) = b.node("Add", [x.name, b.const(c)])
    b.values.remove(special)
    if b.chance(0.5):
        (found,) = b.node("IsNaN", [special.name], exact=True)
    else:
        (found,) = b.node("IsInf", [special.name], detect_negative=b.int(0, 1), detect_positive=b.int(0, 1),
                          exact=True)
    b.node("Cast", [found.name], to=T.FLOAT, exact=True)


def partner(b: Builder, x: Value, exact: bool = False) -> str:
    """Another value that broadcasts with x (a skip connection), or a constant that does."""
    if b.chance(0.6):
        others = [v for v in b.values if v is not x and v.elem == T.FLOAT and broadcastable(v.shape, x.shape)
                  and (v.exact or not exact)]
        if others:
            return b.choice(others).name
    return b.weights(*b.broadcast_shape(x.shape))


def binary(b: Builder) -> None:
    x = b.pick(empty=True)
    pair = [x.name, partner(b, x)]
    b.node(b.choice(["Add", "Sub", "Mul", "Max", "Min", "Add", "Mul"]), pair[::-1] if b.chance(0.3) else pair)


def divide(b: Builder) -> None:
    x = b.pick()
    b.node("Div", [x.name, positive(b, b.pick(lambda v: broadcastable(v.shape, x.shape)))])


def power(b: Builder) -> None:
    x = b.pick()
    if b.chance(0.5):
        b.node("Pow", [x.name, b.const(np.float32(b.choice([2.0, 3.0])))])
    else:
        b.node("Pow", [positive(b, x), b.const(np.float32(b.uniform(-1.5, 1.5)))])


def variadic(b: Builder) -> None:
    x = b.pick()
    b.node(b.choice(["Sum", "Mean", "Max", "Min"]), [x.name] + [partner(b, x) for _ in range(b.int(1, 2))])


def prelu(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 2)
    shape = b.choice([(1,), x.shape[-1:], x.shape[1:2] + (1,) * (x.rank - 2)])
    b.node("PRelu", [x.name, b.const(b.rng.uniform(-0.5, 0.5, shape).astype(np.float32))])


def where(b: Builder) -> None:
    """Where on a comparison of exact values (a condition both sides evaluate alike), maybe through
    Not/And/Or/Xor."""
    a = b.pick(exact=True)
    compare = b.choice(["Greater", "Less", "Equal", "GreaterOrEqual", "LessOrEqual"])
    (cond,) = b.node(compare, [a.name, partner(b, a, exact=True)], exact=True)
    if b.chance(0.3):
        (cond,) = b.node("Not", [cond.name], exact=True)
    elif b.chance(0.3):
        (sign,) = b.node("Greater", [a.name, b.const(np.float32(0))], exact=True)
        (cond,) = b.node(b.choice(["And", "Or", "Xor"]), [cond.name, sign.name], exact=True)
    x = b.pick(lambda v: broadcastable(v.shape, cond.shape))
    b.node("Where", [cond.name, x.name, partner(b, x)])


def integer(b: Builder) -> None:
    """An exact value clipped, scaled and cast to an integer type (in range: no undefined conversion), integer
    arithmetic (int8 may wrap around, alike on both sides), and back to float."""
    elem, dtype = b.choice([(T.INT32, np.int32), (T.INT64, np.int64), (T.INT8, np.int8), (T.INT16, np.int16),
                            (T.UINT8, np.uint8)])
    low = 0 if elem == T.UINT8 else -15
    (clipped,) = b.node("Clip", [b.pick(exact=True).name, b.const(np.float32(low)), b.const(np.float32(15))],
                        exact=True)
    (scaled,) = b.node("Mul", [clipped.name, b.const(np.float32(8))], exact=True)
    (i,) = b.node("Cast", [scaled.name], to=elem, exact=True)
    op = b.choice(["Add", "Sub", "Mul", "Abs"] + (["Neg"] if low else []) +
                  (["Max", "Min"] if elem in (T.INT32, T.INT64) else []))
    operands = [i.name] + ([] if op in ("Abs", "Neg") else
                           [b.const(b.rng.integers(low // 5, 4, b.broadcast_shape(i.shape)).astype(dtype))])
    (r,) = b.node(op, operands, exact=True)
    b.node("Cast", [r.name], to=T.FLOAT, exact=True)


GENERATORS = [(unary, 6), (of_positive, 2), (exp, 1), (of_domain, 1), (rounding, 1), (threshold, 1), (infinite, 1),
              (binary, 6), (divide, 1), (power, 1), (variadic, 1), (prelu, 1), (where, 2), (integer, 1)]
