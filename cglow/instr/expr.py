"""The scalar meaning of the primitives as data: expression trees over a closed set of C operations.

A Map's expression, a Reduce's pre and post and an Epilogue's expression are trees of these frozen nodes
(hashable, comparable): Input(i) is the primitive's input i, Acc a kernel's accumulator, Const a literal;
Unary, Binary and Select are C's operators, Cast a conversion to an element type's C type, and Call a
call of a runtime helper (runtime_c/NAME.c's cglow_NAME, HELPERS) or of a C math function (MATH), each of
a fixed arity. The integer requantization and clamp are the helpers cglow_requant* and cglow_clamp.

Fusion replaces inputs by trees (substitute); to_c prints a tree as C, with the parentheses that C's
precedence and the compilers' -Wparentheses need and no others; cost says whether a tree is cheap enough to
be computed twice, helpers which runtime helpers it calls. Python's arithmetic operators build trees
(`x * 0.5 + y`); C's comparisons and logical operators are functions here (lt, eq, and_...), as a frozen
dataclass's == compares trees.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Callable, TypeVar

import numpy as np

from ..c_text import c_literal, c_type

# runtime_c helpers that an expression may call, with their arity
HELPERS = {
    "cglow_bfloat_to_float": 1, "cglow_float_to_bfloat": 1, "cglow_float_to_half": 1, "cglow_half_to_float": 1,
    "cglow_half_finite_to_float": 1,
    "cglow_half_load": 1, "cglow_half_of": 1, "cglow_half_round": 1, "cglow_half_store": 1,
    "cglow_float8_to_float": 2, "cglow_float_to_float8": 3, "cglow_float4_to_float": 1, "cglow_float_to_float4": 1,
    "cglow_e8m0_to_float": 1, "cglow_float_to_e8m0": 3, "cglow_float_bits": 1, "cglow_bits_float": 1,
    "cglow_double_bits": 1, "cglow_bits_double": 1,
    "cglow_clamp": 3, "cglow_divide_pot_tfl": 2, "cglow_erf": 1, "cglow_exp": 1, "cglow_exp_tfl": 4,
    "cglow_high_mul_tfl": 2, "cglow_hybrid_zero": 2, "cglow_inv_sqrt_exp_tfl": 1, "cglow_inv_sqrt_tfl": 1,
    "cglow_ipow": 2, "cglow_leading_zeros": 1, "cglow_logistic16": 2, "cglow_normalize_tfl": 6,
    "cglow_quantize": 4, "cglow_quantize_tfl": 4, "cglow_reciprocal_tfl": 1, "cglow_requant": 6,
    "cglow_requant_high": 6, "cglow_requant_tfl": 6, "cglow_requant_tfl_high": 6, "cglow_requant_up": 6,
    "cglow_scale_tfl": 3, "cglow_scale_up_tfl": 3, "cglow_tanh": 1, "cglow_tanh16": 2, "cglow_variance_tfl": 4,
    "cglow_wrap16": 1,
}
# C99 <math.h> functions (float ones: a float model computes in float only) and macros, with their arity
MATH = {
    "acosf": 1, "acoshf": 1, "asinf": 1, "asinhf": 1, "atanf": 1, "atanhf": 1, "ceilf": 1, "copysignf": 2,
    "cosf": 1, "coshf": 1, "expf": 1, "expm1f": 1, "fabsf": 1, "floorf": 1, "fmaxf": 2, "fmodf": 2, "isnan": 1,
    "log1pf": 1, "logf": 1, "powf": 2, "rintf": 1, "sinf": 1, "sinhf": 1, "sqrtf": 1, "tanf": 1, "tanhf": 1,
}

# the <math.h> functions that the C library may compute an ulp away from the correctly rounded value that a
# compiler computes for a constant argument: their first argument is read through cglow_opaque (runtime_c/opaque.c),
# so that every optimization level calls the library
INEXACT = {"acosf", "acoshf", "asinf", "asinhf", "atanf", "atanhf", "cosf", "coshf", "expf", "expm1f", "log1pf", "logf",
           "powf", "sinf", "sinhf", "tanf", "tanhf"}

# C's precedence levels, tighter binding higher
ASSIGN, TERNARY, UNARY, PRIMARY = 2, 3, 14, 15
BINARY = {"||": 4, "&&": 5, "|": 6, "^": 7, "&": 8, "==": 9, "!=": 9, "<": 10, ">": 10, "<=": 10, ">=": 10,
          "<<": 11, ">>": 11, "+": 12, "-": 12, "*": 13, "/": 13, "%": 13}
UNARY_OPS = ("-", "!", "~")
COMPARISONS = ("==", "!=", "<", ">", "<=", ">=")
ARITHMETIC = ("+", "-", "*", "/", "%", "<<", ">>", "&", "^", "|")


class Expr:
    """A node of an expression tree. Python's + - * / and unary - build C's (a Python number becomes a
    Const: an int C's int literal, a float a float32 one)."""

    def __add__(self, other): return Binary("+", self, lift(other))
    def __radd__(self, other): return Binary("+", lift(other), self)
    def __sub__(self, other): return Binary("-", self, lift(other))
    def __rsub__(self, other): return Binary("-", lift(other), self)
    def __mul__(self, other): return product(self, lift(other))
    def __rmul__(self, other): return product(lift(other), self)
    def __truediv__(self, other): return Binary("/", self, lift(other))
    def __rtruediv__(self, other): return Binary("/", lift(other), self)
    def __neg__(self): return Unary("-", self)

    def __str__(self) -> str:
        """The C text with {i} for input i and {acc} for the accumulator (the IR dumps show it)."""
        return to_c(self)

    def __post_init__(self):
        # the Input and Acc nodes below this one, kept with the node (not a field: equality ignores it) so that
        # substitution passes over the subtrees it leaves alone
        object.__setattr__(self, "leaves", frozenset().union(*(x.leaves for x in self.operands())))

    OPERANDS: tuple[str, ...] = ()  # the fields that hold the node's operands, in order (a leaf has none)

    def operands(self) -> tuple[Expr, ...]:
        return tuple(getattr(self, name) for name in self.OPERANDS)

    def with_operands(self, operands: Sequence[Expr]) -> Expr:
        """The same operation over other operands."""
        return replace(self, **dict(zip(self.OPERANDS, operands)))


@dataclass(frozen=True)
class Input(Expr):
    """The element of the primitive's input `index` (of an Epilogue's inputs) at the current position."""
    index: int

    def __post_init__(self):
        object.__setattr__(self, "leaves", frozenset((self,)))


@dataclass(frozen=True)
class Acc(Expr):
    """A reducing kernel's accumulator."""

    def __post_init__(self):
        object.__setattr__(self, "leaves", frozenset((self,)))


@dataclass(frozen=True)
class Const(Expr):
    """A literal, spelled as c_text.c_literal spells a value of `dtype`: float32 with the f suffix (INFINITY,
    NAN), unsigned types with u, the others in decimal (C's type for that literal, int where it fits)."""
    value: int | float
    dtype: np.dtype


@dataclass(frozen=True)
class Unary(Expr):
    op: str  # one of UNARY_OPS
    x: Expr

    OPERANDS = ("x",)

    def __post_init__(self):
        assert self.op in UNARY_OPS, self.op
        super().__post_init__()


@dataclass(frozen=True)
class Binary(Expr):
    op: str  # a key of BINARY
    a: Expr
    b: Expr

    OPERANDS = ("a", "b")

    def __post_init__(self):
        assert self.op in BINARY, self.op
        super().__post_init__()

    def with_operands(self, operands: Sequence[Expr]) -> Expr:
        """The same operation over other operands (a product, as `product` makes it)."""
        return product(*operands) if self.op == "*" else super().with_operands(operands)


@dataclass(frozen=True)
class Select(Expr):
    """cond ? then : other."""
    cond: Expr
    then: Expr
    other: Expr
    OPERANDS = ("cond", "then", "other")


@dataclass(frozen=True)
class Cast(Expr):
    """x converted to the C type of an element type."""
    dtype: np.dtype
    x: Expr
    OPERANDS = ("x",)


@dataclass(frozen=True)
class Call(Expr):
    """A runtime helper (HELPERS) or a C math function (MATH) applied to args."""
    fn: str
    args: tuple[Expr, ...]

    def __post_init__(self):
        arity = HELPERS.get(self.fn, MATH.get(self.fn))
        assert arity == len(self.args), f"{self.fn}: {len(self.args)} arguments, not {arity}"
        super().__post_init__()

    def operands(self) -> tuple[Expr, ...]:
        return self.args

    def with_operands(self, operands: Sequence[Expr]) -> Expr:
        return Call(self.fn, tuple(operands))


ACC = Acc()
F32 = np.dtype(np.float32)
T = TypeVar("T")


def lift(value) -> Expr:
    """A tree as it is, a Python float as a float32 literal, an int as an integer literal."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, (float, np.floating)):
        return Const(float(np.float32(value)), F32)
    assert isinstance(value, (int, np.integer)), value
    value = int(value)
    return Const(value, np.dtype(np.int32 if -(1 << 31) < value < 1 << 31 else np.int64))


def inputs(count: int) -> tuple[Input, ...]:
    return tuple(Input(i) for i in range(count))


def lit(value, dtype) -> Const:
    """The literal of a value of an element type (a NumPy scalar, or a Python number)."""
    dtype = np.dtype(dtype)
    value = float(np.float32(value)) if dtype == F32 else bool(value) if dtype == np.bool_ else int(value)
    return Const(value, dtype)


def cast(dtype, x) -> Cast:
    return Cast(np.dtype(dtype), lift(x))


def call(fn: str, *args) -> Call:
    return Call(fn, tuple(lift(a) for a in args))


def select(cond, then, other) -> Select:
    return Select(lift(cond), lift(then), lift(other))


def product(a: Expr, b: Expr) -> Expr:
    """a * b; a float times a reciprocal, a * (1 / d), as a / d: one division and one rounding where the two
    took a division, a multiply and two roundings (a SiLU, x times its Sigmoid once fused: the EfficientNet-style
    zoo model 567 -> 540 us under gcc 12 -O3 -march=native, AVX-512)."""
    for x, y in ((a, b), (b, a)):
        if isinstance(y, Binary) and y.op == "/" and y.a == Const(1.0, F32):
            return Binary("/", x, y.b)
    return Binary("*", a, b)


def binary(op: str, a, b) -> Binary:
    return Binary(op, lift(a), lift(b))


def lt(a, b): return binary("<", a, b)
def gt(a, b): return binary(">", a, b)
def le(a, b): return binary("<=", a, b)
def ge(a, b): return binary(">=", a, b)
def eq(a, b): return binary("==", a, b)
def ne(a, b): return binary("!=", a, b)
def and_(a, b): return binary("&&", a, b)
def or_(a, b): return binary("||", a, b)
def not_(x): return Unary("!", lift(x))


def clamp(x, lo, hi) -> Call:
    """x clamped to [lo, hi] in int32 (runtime_c/clamp.c)."""
    return call("cglow_clamp", x, lo, hi)


def bottom_up(e: Expr, visit: Callable[[Expr, list], T], settled: Callable[[Expr], bool] = lambda node: False) -> T:
    """visit(node, the results at its operands) at every node of e, operands first, except that a node
    `settled` is its own result; the result at e. No recursion: a fused chain of elementwise ops can be a
    thousand levels deep."""
    done: dict[int, T] = {}  # by id: a node may stand at several places of the tree (Relu reads its input twice)
    stack = [e]
    while stack:
        node = stack[-1]
        if id(node) in done:
            stack.pop()
        elif settled(node):
            done[id(stack.pop())] = node
        elif pending := [x for x in node.operands() if id(x) not in done]:
            stack += pending
        else:
            done[id(stack.pop())] = visit(node, [done[id(x)] for x in node.operands()])
    return done[id(e)]


def nodes(e: Expr) -> Iterator[Expr]:
    """Every node of the tree (one that stands at several places, at each), parents before their operands."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack += reversed(node.operands())


def substitute(e: Expr, values: Mapping[int, Expr] | Sequence[Expr] = (), acc: Expr | None = None) -> Expr:
    """e with each Input(i) replaced by values[i] (where values has it) and Acc by acc (where given), all at
    once."""
    given: dict[Expr, Expr] = {Input(i): v for i, v in (values.items() if isinstance(values, Mapping) else
                                                          enumerate(values)) if v != Input(i)}
    if acc is not None:
        given[ACC] = acc

    def visit(node: Expr, operands: list[Expr]) -> Expr:
        if isinstance(node, (Input, Acc)):  # a leaf not left alone (hashing a deep tree would recur)
            return given[node]
        return node if all(new is old for new, old in zip(operands, node.operands())) else node.with_operands(operands)
    return bottom_up(e, visit, settled=lambda node: node.leaves.isdisjoint(given))


def depth(e: Expr) -> int:
    """The most nodes on a path from e down to a leaf (the leaf too)."""
    return bottom_up(e, lambda node, below: 1 + max(below, default=0))


def uses(e: Expr, index: int) -> int:
    """How many times e reads its input `index`."""
    x = Input(index)
    return sum(1 for n in nodes(e) if n == x) if x in e.leaves else 0


# the conversions of stored float16 and bfloat16 values: pure, and each read or store of such a value has one, so
# that a value computed twice converts twice (an optimizing compiler computes it once)
CONVERSIONS = {"cglow_half_to_float", "cglow_float_to_half", "cglow_bfloat_to_float", "cglow_float_to_bfloat"}


def cost(e: Expr) -> int | None:
    """What computing e once more costs: its number of nodes (leaves too: each is a load or a literal), or
    None where it calls a function (a helper, or a library call that keeps a loop from vectorizing) other than
    the CONVERSIONS."""
    count = 0
    for n in nodes(e):
        if isinstance(n, Call) and n.fn not in CONVERSIONS:
            return None
        count += 1
    return count


def helpers(e: Expr) -> set[str]:
    """The runtime helpers that e calls (their C names)."""
    return {n.fn for n in nodes(e) if isinstance(n, Call) and n.fn in HELPERS}


def to_c(e: Expr, values: Sequence[str] | None = None, acc: str = "{acc}", operand_of: str | None = None) -> str:
    """e as C: Input(i) spelled values[i] (default {i}), Acc spelled acc, each a primary expression (a name,
    an array element). `operand_of`: e is pasted as an operand of that binary operator (parenthesized unless
    it binds tighter); by default e stands where an assignment's value does."""
    return _wrap(bottom_up(e, _printer(values, acc)), ASSIGN if operand_of is None else BINARY[operand_of] + 1)


Printed = tuple[str, int]  # a node's text and the precedence of its outermost operator


def _wrap(printed: Printed, need: int) -> str:
    """The text parenthesized where it binds less tightly than its place needs."""
    text, prec = printed
    return f"({text})" if prec < need else text


def _printer(values: Sequence[str] | None, acc: str) -> Callable[[Expr, list[Printed]], Printed]:
    def visit(e: Expr, operands: list[Printed]) -> Printed:
        if isinstance(e, Input):
            return ("{%d}" % e.index if values is None else values[e.index]), PRIMARY
        if isinstance(e, Acc):
            return acc, PRIMARY
        if isinstance(e, Const):
            text = c_literal(e.value, e.dtype)
            if text.startswith("(-"):  # c_literal's parentheses, which the precedence gives where needed
                return text[1:-1], UNARY
            return text, PRIMARY
        if isinstance(e, Call):
            args = [_wrap(a, ASSIGN) for a in operands]
            if e.fn in INEXACT:
                args[0] = f"cglow_opaque({args[0]})"
            return f"{e.fn}({', '.join(args)})", PRIMARY
        if isinstance(e, Cast):
            return f"({c_type(e.dtype)}){_wrap(operands[0], UNARY)}", UNARY
        if isinstance(e, Unary):
            x = _wrap(operands[0], UNARY)
            return e.op + (f"({x})" if x.startswith("-") else x), UNARY  # not --x
        if isinstance(e, Select):
            bounds = _clamp(e)
            if bounds:
                return f"CGLOW_CLIP({', '.join(_wrap(bottom_up(b, visit), ASSIGN) for b in bounds)})", PRIMARY
            cond, then, other = operands
            return f"{_wrap(cond, PRIMARY if _arithmetic(e.cond) else TERNARY + 1)} ? {_wrap(then, TERNARY + 1)} : " \
                   f"{_wrap(other, TERNARY)}", TERNARY
        p = BINARY[e.op]
        a = _wrap(operands[0], PRIMARY if _confusing(e.op, e.a, left=True) else p)
        b = _wrap(operands[1], PRIMARY if _confusing(e.op, e.b, left=False) else p + 1)
        return f"{a} {e.op} {b}", p
    return visit


def _clamp(e: Select) -> tuple[Expr, Expr, Expr] | None:
    """(x, lo, hi) where e is x < lo ? lo : x > hi ? hi : x to literal bounds lo <= hi (Clip's CLAMP, lower/ops/
    elementwise.py), which C writes as runtime_c/clip.c's macro: clang turned that text into branches, and left the
    register tiles that end in it scalar (x86-64 AVX-512 vww, clang 14 -O3: 3x gcc's time)."""
    inner, test = e.other, e.cond
    if not (isinstance(test, Binary) and test.op == "<" and isinstance(inner, Select) and
            isinstance(inner.cond, Binary) and inner.cond.op == ">"):
        return None
    x, lo, hi = test.a, test.b, inner.cond.b
    if not (isinstance(lo, Const) and isinstance(hi, Const) and e.then == lo and inner.then == hi and
            inner.cond.a == x and inner.other == x and lo.value <= hi.value):
        return None
    return x, lo, hi


def _arithmetic(e: Expr) -> bool:
    return isinstance(e, Binary) and e.op in ARITHMETIC


def _confusing(op: str, child: Expr, left: bool) -> bool:
    """Whether an operand that precedence leaves bare draws -Wparentheses (gcc and clang -Wall), so
    takes parentheses: + or - in a shift, && in ||, anything but the same operator in a bitwise operator, a
    comparison in a comparison, and !x as a comparison's left operand (-Wlogical-not-parentheses)."""
    if isinstance(child, Unary):
        return child.op == "!" and left and op in COMPARISONS
    if not isinstance(child, Binary):
        return False
    return (op in ("<<", ">>") and child.op in ("+", "-")) or (op == "||" and child.op == "&&") or \
        (op in ("&", "^", "|") and child.op != op) or (op in COMPARISONS and child.op in COMPARISONS)
