"""The scalar expression trees (cglow/instr/expr.py): printing with C's precedence, substitution, the cost
of computing one twice, and the helpers one calls."""
from __future__ import annotations

import re

import numpy as np
import pytest

from cglow.instr.expr import (ACC, F32, HELPERS, Binary, Call, Const, Input, and_, binary, call, cast, clamp, cost, eq,
                              gt, helpers, inputs, lift, lit, lt, ne, not_, or_, select, substitute, to_c, uses)
from cglow.runtime_files import RUNTIME_C

X, Y, Z = inputs(3)


@pytest.mark.parametrize("expr, text", [
    (X + Y * Z, "{0} + {1} * {2}"),
    ((X + Y) * Z, "({0} + {1}) * {2}"),
    (X - Y - Z, "{0} - {1} - {2}"),
    (X - (Y - Z), "{0} - ({1} - {2})"),                   # right operands of one level keep their group
    (X + (Y + Z), "{0} + ({1} + {2})"),                   # float addition is not associative
    (X / (Y * Z), "{0} / ({1} * {2})"),
    (-(X + Y), "-({0} + {1})"),
    (-lit(-1.0, F32), "-(-1.0f)"),                         # never --
    (-(-X), "-(-{0})"),
    (X * -1.0, "{0} * -1.0f"),
    (cast(np.int8, X + Y), "(int8_t)({0} + {1})"),
    (cast(np.int8, cast(np.int32, X)), "(int8_t)(int32_t){0}"),
    (cast(F32, X) * Y, "(float){0} * {1}"),
    (select(lt(X, 0.0), 0.0, X), "{0} < 0.0f ? 0.0f : {0}"),
    (select(gt(X, 0.0), 1.0, select(lt(X, 0.0), -1.0, X)), "{0} > 0.0f ? 1.0f : {0} < 0.0f ? -1.0f : {0}"),
    (select(X, select(Y, 1, 2), 3), "{0} ? ({1} ? 1 : 2) : 3"),
    (select(select(X, Y, Z), 1, 2), "({0} ? {1} : {2}) ? 1 : 2"),
    (X * select(X, Y, Z), "{0} * ({0} ? {1} : {2})"),
    (select(X + Y, 1, 2), "({0} + {1}) ? 1 : 2"),        # clang: ?: below + in the condition
    (call("fmaxf", X + Y, select(X, Y, Z)), "fmaxf({0} + {1}, {0} ? {1} : {2})"),
    (ACC / 7.0 + X, "{acc} / 7.0f + {0}"),
    (select(lt(X + Y, 0.0), 0.0, select(gt(X + Y, 6.0), 6.0, X + Y)), "CGLOW_CLIP({0} + {1}, 0.0f, 6.0f)"),
    (select(lt(X, 6.0), 6.0, select(gt(X, 0.0), 0.0, X)), "{0} < 6.0f ? 6.0f : {0} > 0.0f ? 0.0f : {0}"),  # lo > hi
    (select(lt(X, Y), Y, select(gt(X, Z), Z, X)), "{0} < {1} ? {1} : {0} > {2} ? {2} : {0}"),  # bounds not literals
])
def test_printing_takes_the_parentheses_precedence_needs(expr, text):
    assert to_c(expr) == text


@pytest.mark.parametrize("expr, text", [
    (or_(and_(X, Y), Z), "({0} && {1}) || {2}"),         # && within ||
    (and_(or_(X, Y), Z), "({0} || {1}) && {2}"),         # precedence
    (binary("<<", X + Y, 2), "({0} + {1}) << 2"),         # + inside <<
    (binary("<<", X * Y, 2), "{0} * {1} << 2"),
    (binary("&", X, eq(Y, 1)), "{0} & ({1} == 1)"),       # a comparison in &
    (binary("|", binary("&", X, Y), Z), "({0} & {1}) | {2}"),
    (binary("|", binary("|", X, Y), Z), "{0} | {1} | {2}"),
    (ne(lt(X, Y), 0), "({0} < {1}) != 0"),                # comparisons like X < Y != Z
    (eq(not_(X), Y), "(!{0}) == {1}"),                    # -Wlogical-not-parentheses
    (eq(Y, not_(X)), "{1} == !{0}"),
])
def test_printing_avoids_what_wparentheses_warns_of(expr, text):
    assert to_c(expr) == text


def test_literals_are_spelled_as_c_text_spells_them():
    assert [to_c(lit(v, t)) for v, t in ((0.5, F32), (3, np.uint8), (-2, np.int32), (True, np.bool_),
                                         (float("inf"), F32), (-(2 ** 31), np.int32))] == \
        ["0.5f", "3u", "-2", "1", "INFINITY", "INT32_MIN"]
    assert to_c(X - lit(-128, np.int32)) == "{0} - -128"
    assert to_c(eq(X, -float("inf"))) == "{0} == -INFINITY"
    assert lift(0.1) == Const(float(np.float32(0.1)), F32) and lift(7) == Const(7, np.dtype(np.int32))
    assert lift(1 << 40).dtype == np.int64


def test_inputs_and_accumulator_take_their_spelling():
    assert to_c(ACC * X + Y, ["x0[i]", "e1[i * 4]"], "acc[0][j]") == "acc[0][j] * x0[i] + e1[i * 4]"
    assert to_c(X - Y, ["a", "b"], operand_of=">") == "a - b"
    assert to_c(select(X, Y, Z), ["a", "b", "c"], operand_of=">") == "(a ? b : c)"
    assert to_c(lt(X, Y), ["a", "b"], operand_of="<") == "(a < b)"


def test_substitution_replaces_inputs_and_the_accumulator_by_trees():
    relu = select(lt(X, 0.0), 0.0, X)
    assert substitute(relu, {0: Y + Z}) == select(lt(Y + Z, 0.0), 0.0, Y + Z)
    assert to_c(substitute(X * 0.44, [0.5 * X + 0.5 * Y])) == "(0.5f * {0} + 0.5f * {1}) * 0.44f"
    assert substitute(X + Y, [Y, X]) == Y + X   # all at once, not one after the other
    assert substitute(call("fmaxf", ACC, X), acc=ACC + X) == call("fmaxf", ACC + X, X)
    assert substitute(X + Y, {1: Z}) == X + Z  # inputs not given stay
    assert uses(select(lt(X, 0.0), 0.0, X), 0) == 2 and uses(X + Y, 2) == 0


def test_a_float_product_by_a_reciprocal_is_a_division():
    """x * (1 / d), as x times its Sigmoid becomes once fused (a SiLU), is x / d, built or substituted; an integer
    1 / d (C's integer division) is not a reciprocal."""
    sigmoid = 1.0 / (1.0 + call("cglow_exp", -X))
    assert to_c(X * sigmoid) == "{0} / (1.0f + cglow_exp(-{0}))" and to_c(sigmoid * X) == to_c(X * sigmoid)
    assert to_c(substitute(X * Y, [Z, sigmoid])) == "{2} / (1.0f + cglow_exp(-{0}))"
    assert to_c(X * (1 / Y)) == "{0} * (1 / {1})"


def test_cost_counts_nodes_and_refuses_calls():
    assert cost(X) == 1
    assert cost(X * Y + Z) == 5
    assert cost(cast(np.int8, X + 1)) == 4
    assert cost(select(lt(X, 0.0), 0.0, X)) == 6
    assert cost(X + call("tanhf", Y)) is None


def test_helpers_are_the_runtime_helpers_a_tree_calls():
    expr = cast(np.int8, call("cglow_requant", ACC, X, 3, -128, -128, 127)) + clamp(call("expf", Y), 0, 1)
    assert helpers(expr) == {"cglow_requant", "cglow_clamp"}
    assert helpers(call("sqrtf", X)) == set()


def test_calls_are_a_closed_set_of_fixed_arity():
    with pytest.raises(AssertionError):
        call("printf", X)
    with pytest.raises(AssertionError):
        call("cglow_clamp", X, 0)
    with pytest.raises(AssertionError):
        Binary("**", X, Y)
    assert Call("fmaxf", (X, Y)) == call("fmaxf", X, Y)


def test_the_helpers_arities_are_their_definitions():
    for name, arity in HELPERS.items():
        text = (RUNTIME_C / f"{name.removeprefix('cglow_')}.c").read_text()
        params = re.search(rf"static (?:inline )?\w+ {name}\(([^)]*)\)", text).group(1)
        assert params.count(",") + 1 == arity, name


def test_trees_are_hashable_values():
    assert len({X + Y, Input(0) + Input(1), X - Y}) == 2
    assert str(select(X, 1.0, ACC)) == "{0} ? 1.0f : {acc}"


def test_a_deep_tree_takes_no_recursion():
    """A fused chain of elementwise ops can be thousands of levels deep."""
    expr = X
    for _ in range(3000):
        expr = call("sqrtf", expr) * Y
    expr = substitute(expr, [Z, lift(2.0)])
    assert to_c(expr).startswith("sqrtf(" * 3000 + "{2}) * 2.0f") and uses(expr, 2) == 1
    assert cost(substitute(expr, {2: ACC})) is None and helpers(expr) == set()


def test_an_inexact_library_function_reads_an_opaque_argument():
    """tanhf's argument through cglow_opaque, so that no compiler computes it for a constant (runtime_c/opaque.c);
    sqrtf, exact, as it is."""
    assert to_c(call("tanhf", X) + call("sqrtf", Y)) == "tanhf(cglow_opaque({0})) + sqrtf({1})"
    assert to_c(call("powf", X, Y)) == "powf(cglow_opaque({0}), {1})"
