"""Lowering of arithmetic and activation ops to fused-map primitives, and of the identity ops to views.

Each op is a C expression template per element-type kind ("float", "signed", "unsigned"). Float expressions
use float math only and let NaN through, as onnxruntime does; integer ones test against 0 only with >, ==
and !=, which no type makes constant.
"""
from __future__ import annotations

import numpy as np

from ...c_text import c_float
from ...graph.ir import Node
from ...instr.ir import Map, substitute
from ..context import Context, lowering


def kind(dtype: np.dtype) -> str:
    return {"f": "float", "i": "signed", "u": "unsigned", "b": "bool"}[np.dtype(dtype).kind]


def _every_kind(expr: str) -> dict[str, str]:
    return dict.fromkeys(("float", "signed", "unsigned"), expr)


EXPRS = {  # op -> element-type kind -> expression
    "Add": _every_kind("({0} + {1})"),
    "Sub": _every_kind("({0} - {1})"),
    "Mul": _every_kind("({0} * {1})"),
    "Div": _every_kind("({0} / {1})"),  # C integer division truncates toward zero, as onnxruntime's
    "Relu": {"float": "({0} < 0.0f ? 0.0f : {0})", "signed": "({0} > 0 ? {0} : 0)"},
    "Neg": {"float": "(-{0})", "signed": "(-{0})"},
    "Abs": {"float": "fabsf({0})", "signed": "({0} > 0 ? {0} : -{0})", "unsigned": "{0}"},
    "Sign": {"float": "({0} > 0.0f ? 1.0f : {0} < 0.0f ? -1.0f : {0})", "signed": "({0} > 0 ? 1 : {0} == 0 ? 0 : -1)",
             "unsigned": "({0} != 0)"},
    "PRelu": {"float": "({0} < 0.0f ? {0} * {1} : {0})", "signed": "({0} > 0 ? {0} : {0} * {1})"},
}
AT_LEAST = "({a} < {b} ? {b} : {a})"  # max(a, b) of any type, a NaN a kept: Clip's bounds
AT_MOST = "({a} > {b} ? {b} : {a})"
MAX = {"float": "({a} < {b} || isnan({b}) ? {b} : {a})", "signed": AT_LEAST, "unsigned": AT_LEAST}  # NaN wins
MIN = {"float": "({a} > {b} || isnan({b}) ? {b} : {a})", "signed": AT_MOST, "unsigned": AT_MOST}

CLAMP01 = "({v} < 0.0f ? 0.0f : {v} > 1.0f ? 1.0f : {v})"
SELU_ALPHA, SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875
FLOAT_EXPRS = {  # float32-only ops; {name} is the float attribute `name` (defaults in ATTRS)
    "Sigmoid": "(1.0f / (1.0f + cglow_exp(-{0})))",
    "Tanh": "tanhf({0})",
    "Erf": "cglow_erf({0})",
    "Sqrt": "sqrtf({0})",
    "Exp": "cglow_exp({0})",
    "Log": "logf({0})",
    "Sin": "sinf({0})",
    "Cos": "cosf({0})",
    "Reciprocal": "(1.0f / {0})",
    "Floor": "floorf({0})",
    "Ceil": "ceilf({0})",
    "Round": "rintf({0})",  # the default rounding mode: halves to even
    "LeakyRelu": "({0} < 0.0f ? {0} * {alpha} : {0})",
    "Elu": "({0} < 0.0f ? {alpha} * expm1f({0}) : {0})",
    "Selu": "({gamma} * ({0} > 0.0f ? {0} : {alpha} * expm1f({0})))",
    "HardSigmoid": substitute(CLAMP01, {"v": "{alpha} * {0} + {beta}"}),
    "HardSwish": "({0} * %s)" % substitute(CLAMP01, {"v": "{0} * 0.16666667f + 0.5f"}),
    "Softplus": "(fmaxf({0}, 0.0f) + log1pf(expf(-fabsf({0}))))",
    "Softsign": "({0} / (1.0f + fabsf({0})))",
    "Mish": "({0} * tanhf(fmaxf({0}, 0.0f) + log1pf(expf(-fabsf({0})))))",
}
GELU = {  # by the approximate attribute
    "none": "(0.5f * {0} * (1.0f + cglow_erf({0} * 0.70710677f)))",
    "tanh": "(0.5f * {0} * (1.0f + tanhf(0.7978846f * ({0} + 0.044715f * {0} * {0} * {0}))))",
}
ATTRS = {"LeakyRelu": {"alpha": 0.01}, "Elu": {"alpha": 1.0}, "Selu": {"alpha": SELU_ALPHA, "gamma": SELU_GAMMA},
         "HardSigmoid": {"alpha": 0.2, "beta": 0.5}}
POWERS = {1.0: "{0}", 2.0: "({0} * {0})", 3.0: "({0} * {0} * {0})", 0.5: "sqrtf({0})", -1.0: "(1.0f / {0})"}
INTEGER_POWERS = (1.0, 2.0, 3.0)


@lowering(*EXPRS)
def _by_kind(ctx: Context, node: Node) -> None:
    expr = EXPRS[node.op].get(kind(ctx.dtype(node.inputs[0])))
    if expr is None:  # PRelu of an unsigned type: nothing is negative
        return identity(ctx, node)
    ctx.elementwise(node, expr)


@lowering(*FLOAT_EXPRS)
def _float(ctx: Context, node: Node) -> None:
    attrs = {name: c_float(node.attr(name, default)) for name, default in ATTRS.get(node.op, {}).items()}
    ctx.elementwise(node, substitute(FLOAT_EXPRS[node.op], attrs))


@lowering("Gelu")
def _gelu(ctx: Context, node: Node) -> None:
    ctx.elementwise(node, GELU[node.attr("approximate", "none")])


@lowering("Pow")
def _pow(ctx: Context, node: Node) -> None:
    exponent = ctx.const(node.inputs[1])
    power = float(exponent.reshape(-1)[0]) if exponent is not None and exponent.size == 1 else None
    integer = kind(ctx.dtype(node.inputs[0])) != "float"
    if power in POWERS and (not integer or power in INTEGER_POWERS):
        ctx.elementwise(node, POWERS[power], node.inputs[:1])
    elif integer and kind(ctx.dtype(node.inputs[1])) != "float":
        ctx.elementwise(node, "cglow_ipow((int64_t){0}, (int64_t){1})")  # exact: runtime_c/ipow.c
    elif integer:
        ctx.elementwise(node, "powf((float){0}, {1})")
    else:
        ctx.elementwise(node, "powf({0}, {1})")


def _fold(pair: dict[str, str], dtype: np.dtype, count: int) -> str:
    """pair(pair(pair({0}, {1}), {2}), ...) over `count` inputs."""
    expr = "{0}"
    for i in range(1, count):
        expr = substitute(pair[kind(dtype)], {"a": expr, "b": "{%d}" % i})
    return expr


@lowering("Min", "Max", "Sum", "Mean")
def _variadic(ctx: Context, node: Node) -> None:
    count = len(node.inputs)
    if count == 1:
        return identity(ctx, node)
    if node.op in ("Sum", "Mean"):
        expr = "(" + " + ".join("{%d}" % i for i in range(count)) + ")"
        ctx.elementwise(node, expr if node.op == "Sum" else f"({expr} / {c_float(count)})")
    else:
        ctx.elementwise(node, _fold(MAX if node.op == "Max" else MIN, ctx.dtype(node.inputs[0]), count), compares=True)


# Clip to constant bounds lo <= hi, each test on the value itself: what AT_MOST over AT_LEAST computes there (a NaN
# kept), which gcc 12 vectorizes into fewer instructions: x86-64 AVX-512 -O3 vww (ReLU6 everywhere) 1.04 -> 0.92 of
# the time. Other bounds keep that composition, which gives hi everywhere when lo > hi, as ONNX says.
CLAMP = "({0} < {1} ? {1} : ({0} > {2} ? {2} : {0}))"


@lowering("Clip")
def _clip(ctx: Context, node: Node) -> None:
    expr, names = "{0}", [node.inputs[0]]
    for pair, i in ((AT_LEAST, 1), (AT_MOST, 2)):
        if len(node.inputs) > i and node.inputs[i]:
            expr = substitute(pair, {"a": expr, "b": "{%d}" % len(names)})
            names.append(node.inputs[i])
    if len(names) == 1:
        return identity(ctx, node)
    bounds = [ctx.const(name) for name in names[1:]]
    if len(bounds) == 2 and all(b is not None and b.size == 1 for b in bounds) and bounds[0].item() <= bounds[1].item():
        expr = CLAMP
    ctx.elementwise(node, expr, names, compares=True)


@lowering("Identity")
def identity(ctx: Context, node: Node) -> None:
    ctx.bind(node.outputs[0], ctx.view(node.inputs[0]))


@lowering("Dropout")
def _dropout(ctx: Context, node: Node) -> None:
    """Inference (or a ratio of 0): the identity, and a mask that keeps everything."""
    identity(ctx, node)
    if len(node.outputs) > 1 and node.outputs[1]:
        ctx.emit(Map(ctx.new(node.outputs[1]), (), "1", node.name))
