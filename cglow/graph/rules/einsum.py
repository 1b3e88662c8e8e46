"""Shape rule of Einsum, and the equation parser its lowering shares."""
from __future__ import annotations

from dataclasses import dataclass
import re

from ...errors import CglowError
from ..geometry import broadcast
from ..ir import Node, TensorType
from ..registry import F32, Args, require_float

_TERM = re.compile(r"[A-Za-z]*(\.\.\.)?[A-Za-z]*")
_ELLIPSIS = "0123456789"  # stand-ins for the dims an ellipsis covers; no equation letter is a digit


@dataclass(frozen=True)
class Equation:
    terms: tuple[str, ...]      # one letter per dim of each operand, ellipses spelled out as digits; a letter twice
                                # in one term takes its diagonal
    out: str
    sizes: dict[str, int]


def parse(node: Node, shapes: list[tuple[int, ...]]) -> Equation:
    text = node.attr("equation", "").replace(" ", "")
    left, arrow, right = text.partition("->")
    terms = left.split(",")
    if len(terms) != len(shapes) or not all(_TERM.fullmatch(t) for t in terms + [right]):
        raise CglowError(f"{node.describe()}: cannot read equation '{text}' for {len(shapes)} operands")
    spans = [len(shape) - len(t.replace("...", "")) for t, shape in zip(terms, shapes)]
    if any(n < 0 or n and "..." not in t for n, t in zip(spans, terms)):
        raise CglowError(f"{node.describe()}: equation '{text}' does not match the operand ranks")
    width = max(spans, default=0)
    terms = [t.replace("...", _ELLIPSIS[width - n:width]) for t, n in zip(terms, spans)]
    if not arrow:  # implicit output: the ellipsis dims, then the letters used once, alphabetically
        letters = "".join(terms)
        right = "..." * bool(width) + "".join(sorted(c for c in set(letters) if c.isalpha() and letters.count(c) == 1))
    out = right.replace("...", _ELLIPSIS[:width])
    if len(set(out)) != len(out):
        raise CglowError(f"{node.describe()}: a letter repeated in the output of '{text}'")
    if not set(out) <= set("".join(terms)):
        raise CglowError(f"{node.describe()}: output letters of '{text}' missing from the inputs")
    sizes: dict[str, int] = {}
    for t, shape in zip(terms, shapes):
        for c, d in zip(t, shape):
            if c in sizes and sizes[c] != d and not c.isdigit() or t.count(c) > 1 and d != shape[t.index(c)]:
                raise CglowError(f"{node.describe()}: letter '{c}' of '{text}' has sizes {sizes[c]} and {d}")
            sizes[c] = broadcast(node, (sizes.get(c, d),), (d,))[0]
    return Equation(tuple(terms), out, sizes)


def einsum(args: Args) -> list[TensorType]:
    require_float(args, *range(len(args.node.inputs)))
    eq = parse(args.node, [args.shape(i) for i in range(len(args.node.inputs))])
    return [TensorType(F32, tuple(eq.sizes[c] for c in eq.out))]
