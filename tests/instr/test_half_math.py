"""instr/half_math.py in_half: float16 conversions and the arithmetic between them in cglow_half."""
from __future__ import annotations

from cglow.instr.expr import Input, call, lt, select, to_c
from cglow.instr.half_math import in_half

X, Y = Input(0), Input(1)


def half(x):
    return call("cglow_half_to_float", x)


def rounded(x):
    return call("cglow_float_to_half", x)


def test_a_chain_computes_in_half():
    """Its roundings to float16 are cglow_half_round's (nothing in a half type), its literals cglow_half_of's."""
    s = half(rounded(half(X) + half(Y)))
    assert to_c(in_half(rounded(select(lt(s, 0.0), 0.0, s) * 0.25))) == \
        "cglow_half_store((cglow_half_round(cglow_half_load({0}) + cglow_half_load({1})) < cglow_half_of(0.0f) ? " \
        "cglow_half_of(0.0f) : cglow_half_round(cglow_half_load({0}) + cglow_half_load({1}))) * cglow_half_of(0.25f))"


def test_a_literal_that_float16_does_not_hold_keeps_float32():
    assert to_c(in_half(rounded(half(X) * 0.1))) == "cglow_half_store((float)cglow_half_load({0}) * 0.1f)"
    assert to_c(in_half(lt(half(X), 1e-5))) == "(float)cglow_half_load({0}) < 1e-05f"


def test_other_uses_take_a_float():
    assert to_c(in_half(rounded(call("expf", -half(X))))) == \
        "cglow_half_store(expf(cglow_opaque((float)-cglow_half_load({0}))))"
    assert to_c(in_half(half(X) + Y)) == "(float)cglow_half_load({0}) + {1}"  # a float operand: float arithmetic
    assert to_c(in_half(half(X) * 2.0)) == "(float)(cglow_half_load({0}) * cglow_half_of(2.0f))"  # its value


def test_float_expressions_are_left_alone():
    e = call("expf", X) + Y
    assert in_half(e) is e
