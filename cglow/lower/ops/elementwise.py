"""Lowering of elementwise ops to fused-map primitives, and of the identity ops to views."""
from __future__ import annotations

from ...graph.ir import Node
from ..context import Context, lowering
from ..literals import c_float

EXPRS = {
    "Add": "({0} + {1})",
    "Sub": "({0} - {1})",
    "Mul": "({0} * {1})",
    "Div": "({0} / {1})",
    "Relu": "fmaxf({0}, 0.0f)",
    "Sigmoid": "(1.0f / (1.0f + expf(-{0})))",
    "Tanh": "tanhf({0})",
    "Erf": "erff({0})",
    "Sqrt": "sqrtf({0})",
    "Exp": "expf({0})",
}
POWERS = {1.0: "{0}", 2.0: "({0} * {0})", 3.0: "({0} * {0} * {0})", 0.5: "sqrtf({0})", -1.0: "(1.0f / {0})"}


@lowering(*EXPRS)
def _simple(ctx: Context, node: Node) -> None:
    ctx.elementwise(node, EXPRS[node.op])


@lowering("Pow")
def _pow(ctx: Context, node: Node) -> None:
    exponent = ctx.const(node.inputs[1])
    if exponent is not None and exponent.size == 1 and float(exponent.reshape(-1)[0]) in POWERS:
        ctx.elementwise(node, POWERS[float(exponent.reshape(-1)[0])], node.inputs[:1])
    else:
        ctx.elementwise(node, "powf({0}, {1})")


@lowering("LeakyRelu")
def _leaky_relu(ctx: Context, node: Node) -> None:
    alpha = c_float(node.attr("alpha", 0.01))
    ctx.elementwise(node, f"({{0}} < 0.0f ? {{0}} * {alpha} : {{0}})")


@lowering("Clip")
def _clip(ctx: Context, node: Node) -> None:
    expr, names = "{0}", [node.inputs[0]]
    bounds = [("fmaxf", 1, "min"), ("fminf", 2, "max")]
    for fn, i, attr in bounds:
        if ctx.graph.opset < 11 and attr in node.attrs:
            expr = f"{fn}({expr}, {c_float(node.attrs[attr])})"
        elif len(node.inputs) > i and node.inputs[i]:
            expr = f"{fn}({expr}, {{{len(names)}}})"
            names.append(node.inputs[i])
    ctx.elementwise(node, expr, names)


@lowering("Identity", "Dropout")
def _identity(ctx: Context, node: Node) -> None:
    ctx.bind(node.outputs[0], ctx.view(node.inputs[0]))
