"""float16 arithmetic in the target's half type (`--half-math native`): the last pass over the instruction list.

Every op on a float16 tensor reads it through cglow_half_to_float and rounds its result back with cglow_float_to_half
(graph/stored_types.py), so a fused chain of them is a float expression between those conversions. Here they become
runtime_c's cglow_half_load and cglow_half_store, over cglow_half: _Float16 where the compiler says the target
computes in it (__ARM_FEATURE_FP16_SCALAR_ARITHMETIC: the conversions are register moves or one instruction, where
the float path calls the software ones), float elsewhere (those software conversions: the default's results, bit for
bit). A half value stays one through C's + - * /, negation, comparisons and selects, with the float literals it
meets that float16 holds (cglow_half_of; with another, the arithmetic stays float32); a rounding to float16 between
two ops is cglow_half_round (nothing in a half type, whose every operation rounds). Any other use of it (a math
function, a helper, a cast, an operand that is neither, an expression's value: a reduction's float32 accumulator, a
kernel's epilogue, a float buffer) takes it converted to float, as the default computes there. An op's result is
the default's: + - * / of float16 operands in float32, rounded to float16, is the correctly rounded float16 result;
an op lowered into several rounds after each, as a half kernel does. The buffers between the kernels hold float16
bits (instr/stored_floats.py), which the convolutions, matrix products and pools convert as they load them
(runtime_c/half_to_float.c: one instruction on these targets) and sum in float32."""
from __future__ import annotations

from dataclasses import fields, replace

import numpy as np

from .expr import COMPARISONS, F32, Binary, Call, Cast, Const, Expr, Select, Unary, bottom_up, call, cast, nodes
from .ir import Epilogue, Instr, Program

# what a rewritten node is: a cglow_half, a float literal that float16 holds, a half value's float16 bits, else
HALF, LITERAL, STORED, OTHER = "half", "literal", "stored", "other"
HALF_OPS = ("+", "-", "*", "/", *COMPARISONS)  # the binary operators that a half type computes
Kind = tuple[Expr, str]
HALF_BITS = np.dtype(np.float16)  # the element type of float16 values, whose C type is their bits' (uint16_t)


def native_half(prog: Program) -> Program:
    """The program with every expression's float16 conversions and the arithmetic between them in cglow_half."""
    return replace(prog, instrs=tuple(_rewritten(i) for i in prog.instrs))


def _rewritten(instr: Instr) -> Instr:
    changes = {}
    for f in fields(instr):
        value = getattr(instr, f.name)
        if isinstance(value, Expr):
            changes[f.name] = in_half(value)
        elif isinstance(value, Epilogue):
            changes[f.name] = replace(value, expr=in_half(value.expr))
    return replace(instr, **changes)


def in_half(e: Expr) -> Expr:
    """e with its float16 conversions and the arithmetic between them in cglow_half; its value of the same type."""
    if not any(isinstance(n, Call) and n.fn in ("cglow_half_to_float", "cglow_float_to_half") for n in nodes(e)):
        return e
    return _as_float(bottom_up(e, _visit))


def _visit(node: Expr, operands: list[Kind]) -> Kind:
    if not operands:
        return node, LITERAL if isinstance(node, Const) and node.dtype == F32 and _in_half(node.value) else OTHER
    kinds = [k for _, k in operands]
    if isinstance(node, Call) and node.fn == "cglow_half_to_float":
        (x, kind), = operands
        if kind == STORED:  # a half value rounded to float16: nothing to do in half arithmetic
            return call("cglow_half_round", x.args[0]), HALF
        return call("cglow_half_load", x), HALF
    if isinstance(node, Call) and node.fn == "cglow_float_to_half":
        y, kind = operands[0]  # a float one converted as cglow_half_store's argument
        return call("cglow_half_store", y), STORED if kind == HALF else OTHER
    if isinstance(node, Cast) and (node.dtype, kinds) in ((HALF_BITS, [STORED]), (F32, [HALF])):
        return operands[0]  # a fused map's stored result; a half value as a float (exact), converted where used
    if isinstance(node, Unary) and node.op == "-" and kinds == [HALF]:
        return node.with_operands([operands[0][0]]), HALF
    values = operands[1:] if isinstance(node, Select) else operands
    if (isinstance(node, Select) or isinstance(node, Binary) and node.op in HALF_OPS) and \
            HALF in [k for _, k in values] and all(k in (HALF, LITERAL) for _, k in values):
        new = [_half_literal(x) if k == LITERAL else x for x, k in values]
        if isinstance(node, Select):
            new = [_as_float(operands[0])] + new
        return node.with_operands(new), OTHER if isinstance(node, Binary) and node.op in COMPARISONS else HALF
    return node.with_operands([_as_float(o) for o in operands]), OTHER


def _as_float(operand: Kind) -> Expr:
    """A rewritten node where the default's float stands: a half value converted."""
    x, kind = operand
    return cast(F32, x) if kind == HALF else x


def _in_half(value: float) -> bool:
    """Whether float16 holds a float32 value exactly (a model's float16 constant, Relu's 0): arithmetic with any
    other stays in float32, whose result the default rounds once."""
    return bool(np.isnan(value)) or float(np.float16(value)) == value


def _half_literal(c: Const) -> Expr:
    """A float literal that float16 holds as a cglow_half."""
    return call("cglow_half_of", c)
