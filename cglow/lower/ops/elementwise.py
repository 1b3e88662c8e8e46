"""Lowering of arithmetic and activation ops to fused-map primitives, and of the identity ops to views.

Each op is an expression over Input(0), Input(1)... per element-type kind ("float", "signed", "unsigned").
Float expressions use float math only and let NaN through, as onnxruntime does; integer ones test against 0
only with >, == and !=, which no type makes constant.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ...graph.ir import Node
from ...graph.registry import OpSpec, ShapeRule, declare
from ...graph.rules import elementwise as rules
from ...instr.expr import F32, Expr, Input, Unary, and_, binary, call, cast, eq, ge, gt, lit, lt, ne, or_, select
from ...instr.ir import Map
from ..context import Context

X, Y = Input(0), Input(1)


def kind(dtype: np.dtype) -> str:
    return {"f": "float", "i": "signed", "u": "unsigned", "b": "bool"}[np.dtype(dtype).kind]


def every_kind(expr: Expr) -> dict[str, Expr]:
    return dict.fromkeys(("float", "signed", "unsigned"), expr)


def arithmetic(shape: ShapeRule, exprs: dict[str, Expr], int8: str = "float") -> OpSpec:
    """An op of several element types: its expression for each kind of its first input's type (a kind it lacks:
    the identity, as PRelu of an unsigned type, where nothing is negative)."""
    def lower(ctx: Context, node: Node) -> None:
        expr = exprs.get(kind(ctx.dtype(node.inputs[0])))
        if expr is None:
            return identity(ctx, node)
        ctx.elementwise(node, expr)
    return OpSpec(shape, lower, int8)


def float_map(expr: Callable[..., Expr], **defaults: float) -> OpSpec:
    """A float32 activation: its expression of X and of the node's float attributes, each given with its ONNX
    default. Between DequantizeLinear and QuantizeLinear it becomes a table (graph/quant/table.py)."""
    def lower(ctx: Context, node: Node) -> None:
        attrs = {name: lit(node.attr(name, default), F32) for name, default in defaults.items()}
        ctx.elementwise(node, expr(**attrs))
    return OpSpec(rules.float_unary, lower, "table")


Pair = Callable[[Expr, Expr], Expr]


def at_least(a: Expr, b: Expr) -> Expr:
    """max(a, b) of any type, a NaN a kept: Clip's bounds."""
    return select(lt(a, b), b, a)


def at_most(a: Expr, b: Expr) -> Expr:
    return select(gt(a, b), b, a)


MAX: dict[str, Pair] = {"float": lambda a, b: select(or_(lt(a, b), call("isnan", b)), b, a),  # NaN wins
                        "signed": at_least, "unsigned": at_least}
MIN: dict[str, Pair] = {"float": lambda a, b: select(or_(gt(a, b), call("isnan", b)), b, a),
                        "signed": at_most, "unsigned": at_most}


def clamp01(v: Expr) -> Expr:
    return select(lt(v, 0.0), 0.0, select(gt(v, 1.0), 1.0, v))


SELU_ALPHA, SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875
SOFTPLUS = call("fmaxf", X, 0.0) + call("log1pf", call("expf", -call("fabsf", X)))
GELU = {  # by the approximate attribute
    "none": 0.5 * X * (1.0 + call("cglow_erf", X * 0.70710677)),
    "tanh": 0.5 * X * (1.0 + call("tanhf", 0.7978846 * (X + 0.044715 * X * X * X))),
}
POWERS = {1.0: X, 2.0: X * X, 3.0: X * X * X, 0.5: call("sqrtf", X), -1.0: 1.0 / X}
INTEGER_POWERS = (1.0, 2.0, 3.0)


def _gelu(ctx: Context, node: Node) -> None:
    ctx.elementwise(node, GELU[node.attr("approximate", "none")])


def _pow(ctx: Context, node: Node) -> None:
    exponent = ctx.const(node.inputs[1])
    power = float(exponent.reshape(-1)[0]) if exponent is not None and exponent.size == 1 else None
    integer = kind(ctx.dtype(node.inputs[0])) != "float"
    if power in POWERS and (not integer or power in INTEGER_POWERS):
        ctx.elementwise(node, POWERS[power], node.inputs[:1])
    elif integer and kind(ctx.dtype(node.inputs[1])) != "float":
        ctx.elementwise(node, call("cglow_ipow", cast(np.int64, X), cast(np.int64, Y)))  # exact: runtime_c/ipow.c
    elif integer:
        ctx.elementwise(node, call("powf", cast(F32, X), Y))
    else:
        ctx.elementwise(node, call("powf", X, Y))


def _fold(pair: dict[str, Pair], dtype: np.dtype, count: int) -> Expr:
    """pair(pair(pair(Input(0), Input(1)), Input(2)), ...) over `count` inputs."""
    expr: Expr = X
    for i in range(1, count):
        expr = pair[kind(dtype)](expr, Input(i))
    return expr


def _variadic(ctx: Context, node: Node) -> None:
    count = len(node.inputs)
    if count == 1:
        return identity(ctx, node)
    if node.op in ("Sum", "Mean"):
        total = sum((Input(i) for i in range(1, count)), start=X)
        ctx.elementwise(node, total if node.op == "Sum" else total / lit(count, F32))
    else:
        ctx.elementwise(node, _fold(MAX if node.op == "Max" else MIN, ctx.dtype(node.inputs[0]), count), compares=True)


# Clip to constant bounds lo <= hi, each test on the value itself: what at_most over at_least computes there (a NaN
# kept), which gcc 12 vectorizes into fewer instructions: x86-64 AVX-512 -O3 vww (ReLU6 everywhere) 1.04 -> 0.92 of
# the time. Other bounds keep that composition, which gives hi everywhere when lo > hi, as ONNX says.
CLAMP = select(lt(X, Y), Y, select(gt(X, Input(2)), Input(2), X))


def _clip(ctx: Context, node: Node) -> None:
    expr, names = X, [node.inputs[0]]
    for pair, i in ((at_least, 1), (at_most, 2)):
        if len(node.inputs) > i and node.inputs[i]:
            expr = pair(expr, Input(len(names)))
            names.append(node.inputs[i])
    if len(names) == 1:
        return identity(ctx, node)
    bounds = [ctx.const(name) for name in names[1:]]
    if len(bounds) == 2 and all(b is not None and b.size == 1 for b in bounds) and bounds[0].item() <= bounds[1].item():
        expr = CLAMP
    ctx.elementwise(node, expr, names, compares=True)


def identity(ctx: Context, node: Node) -> None:
    ctx.bind(node.outputs[0], ctx.view(node.inputs[0]))


def _bit_shift(ctx: Context, node: Node) -> None:
    """X shifted by Y bits (opset 28): a signed X shifted right fills with its sign (~(~X >> Y) where negative:
    defined C), left in its unsigned type (wrapping, as C defines it there). A shift by the type's width or more,
    or by a negative count: the sign fill alone, -1 to the right of a negative X, else 0. An 8- or 16-bit value,
    promoted to int, stays below the int's sign bit."""
    dtype = np.dtype(ctx.dtype(node.inputs[0]))
    bits, signed = 8 * dtype.itemsize, kind(dtype) == "signed"
    inside = and_(ge(Y, 0), lt(Y, bits)) if signed else lt(Y, bits)
    if node.attr("direction") == "LEFT":
        shifted, outside = binary("<<", cast(f"u{dtype.name}", X) if signed else X, Y), 0
    elif signed:
        negative = lt(X, 0)
        shifted = select(negative, Unary("~", binary(">>", Unary("~", X), Y)), binary(">>", X, Y))
        outside = select(negative, -1, 0)
    else:
        shifted, outside = binary(">>", X, Y), 0
    ctx.elementwise(node, select(inside, shifted, outside))


def _mod(ctx: Context, node: Node) -> None:
    """fmod=1: the remainder with the dividend's sign (C's % and fmodf); else the one with the divisor's, as
    Python's % (a float zero takes the divisor's sign)."""
    k = kind(ctx.dtype(node.inputs[0]))
    rest = call("fmodf", X, Y) if k == "float" else binary("%", X, Y)
    if k == "unsigned" or node.attr("fmod", 0):
        return ctx.elementwise(node, rest)
    zero = 0.0 if k == "float" else 0
    moved = select(ne(lt(rest, zero), lt(Y, zero)), rest + Y, rest)
    ctx.elementwise(node, select(ne(rest, zero), moved, call("copysignf", 0.0, Y) if k == "float" else rest))


def _dropout(ctx: Context, node: Node) -> None:
    """Inference (or a ratio of 0): the identity, and a mask that keeps everything."""
    identity(ctx, node)
    if len(node.outputs) > 1 and node.outputs[1]:
        ctx.emit(Map(ctx.new(node.outputs[1]), (), lit(1, np.int32), node.name))


declare({  # op -> its specification; the expressions are over X = Input(0), Y = Input(1)
    "Add": arithmetic(rules.nary, every_kind(X + Y), "binary"),
    "Sub": arithmetic(rules.nary, every_kind(X - Y)),
    "Mul": arithmetic(rules.nary, every_kind(X * Y), "binary"),
    "Div": arithmetic(rules.nary, every_kind(X / Y)),  # C integer division truncates toward zero, as onnxruntime's
    "PRelu": arithmetic(rules.nary, {"float": select(lt(X, 0.0), X * Y, X), "signed": select(gt(X, 0), X, X * Y)}),
    "Relu": arithmetic(rules.numeric_unary, {"float": select(lt(X, 0.0), 0.0, X), "signed": select(gt(X, 0), X, 0)},
                       "table"),
    "Neg": arithmetic(rules.numeric_unary, {"float": -X, "signed": -X}, "table"),
    "Abs": arithmetic(rules.numeric_unary, {"float": call("fabsf", X), "signed": select(gt(X, 0), X, -X),
                                            "unsigned": X}, "table"),
    "Sign": arithmetic(rules.numeric_unary, {"float": select(gt(X, 0.0), 1.0, select(lt(X, 0.0), -1.0, X)),
                                             "signed": select(gt(X, 0), 1, select(eq(X, 0), 0, -1)),
                                             "unsigned": ne(X, 0)}, "table"),
    "Clip": OpSpec(rules.numeric_unary, _clip, "table"),
    **{op: arithmetic(rules.nary, dict.fromkeys(("signed", "unsigned"), binary(c, X, Y)))
       for op, c in (("BitwiseAnd", "&"), ("BitwiseOr", "|"), ("BitwiseXor", "^"))},
    "BitwiseNot": arithmetic(rules.numeric_unary, dict.fromkeys(("signed", "unsigned"), Unary("~", X))),
    "BitShift": OpSpec(rules.bit_shift, _bit_shift),
    "Mod": OpSpec(rules.nary, _mod),
    **dict.fromkeys(("Min", "Max", "Sum", "Mean"), OpSpec(rules.nary, _variadic)),
    "Pow": OpSpec(rules.power, _pow),
    "Sigmoid": float_map(lambda: 1.0 / (1.0 + call("cglow_exp", -X))),
    "Tanh": float_map(lambda: call("tanhf", X)),
    "Erf": float_map(lambda: call("cglow_erf", X)),
    "Sqrt": float_map(lambda: call("sqrtf", X)),
    "Exp": float_map(lambda: call("cglow_exp", X)),
    "Log": float_map(lambda: call("logf", X)),
    "Sin": float_map(lambda: call("sinf", X)),
    "Cos": float_map(lambda: call("cosf", X)),
    **{op: float_map(lambda f=f"{op.lower()}f": call(f, X))
       for op in ("Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh")},
    "Reciprocal": float_map(lambda: 1.0 / X),
    "Floor": float_map(lambda: call("floorf", X)),
    "Ceil": float_map(lambda: call("ceilf", X)),
    "Round": float_map(lambda: call("rintf", X)),  # the default rounding mode: halves to even
    "LeakyRelu": float_map(lambda alpha: select(lt(X, 0.0), X * alpha, X), alpha=0.01),
    "ThresholdedRelu": float_map(lambda alpha: select(gt(X, alpha), X, 0.0), alpha=1.0),
    "Celu": float_map(lambda alpha: select(lt(X, 0.0), alpha * call("expm1f", X / alpha), X), alpha=1.0),
    "Shrink": float_map(lambda bias, lambd: select(lt(X, -lambd), X + bias, select(gt(X, lambd), X - bias, 0.0)),
                        bias=0.0, lambd=0.5),
    "Elu": float_map(lambda alpha: select(lt(X, 0.0), alpha * call("expm1f", X), X), alpha=1.0),
    "Selu": float_map(lambda alpha, gamma: gamma * select(gt(X, 0.0), X, alpha * call("expm1f", X)),
                      alpha=SELU_ALPHA, gamma=SELU_GAMMA),
    "HardSigmoid": float_map(lambda alpha, beta: clamp01(alpha * X + beta), alpha=0.2, beta=0.5),
    "HardSwish": float_map(lambda: X * clamp01(X * 0.16666667 + 0.5)),
    "Softplus": float_map(lambda: SOFTPLUS),
    "Softsign": float_map(lambda: X / (1.0 + call("fabsf", X))),
    "Mish": float_map(lambda: X * call("tanhf", SOFTPLUS)),
    "Gelu": OpSpec(rules.float_unary, _gelu, "table"),
    "Identity": OpSpec(rules.identity, identity, "movement"),
    "Dropout": OpSpec(rules.dropout, _dropout, shape_inputs=(1, 2)),
})
