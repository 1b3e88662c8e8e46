"""What every kernel is rendered from: the Kernel a render returns, the Jinja2 environment of the templates
(kernels/*.j2), the kernel's head (comment, prototype, the pointers derived from its parameters), the C index
expressions (linear sums, views over loop variables, collapsed loops), the accumulator type and the epilogue's
text, and the register tiles' runs and orientation that the matrix products and convolutions share.

All index arithmetic happens in Python and reaches the templates as expressions over loop variables with
integer-literal strides, the primitives' expression trees as C (instr/expr.py); the templates hold loops only.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
import re

import jinja2

import numpy as np

from ..c_text import c_literal, c_type
from ..instr.expr import Call, Expr, to_c
from ..instr.ir import Epilogue, Instr, View, reads
from ..tiles import Tiles

ENV = jinja2.Environment(loader=jinja2.PackageLoader("cglow", "kernels"), trim_blocks=True, lstrip_blocks=True,
                         keep_trailing_newline=True,
                         undefined=jinja2.StrictUndefined, autoescape=False)


@dataclass(frozen=True)
class Kernel:
    """A kernel's C function and the views its parameters take."""
    text: str
    params: tuple[View, ...]     # in parameter order; the first is the output


def comment(text: str, limit: int = 60) -> str:
    """Model text made safe for a C comment: printable ASCII only, no comment delimiters."""
    clean = re.sub(r"[^A-Za-z0-9_ .:,/\-\[\]()#=+]", "?", text)[:limit]
    return clean.replace("*/", "?/").replace("/*", "/?")


def linear(terms, constant: int = 0) -> str:
    """A C sum of (variable, factor) terms plus a constant: "oh * 2 + kh - 1", "32 - o0 * 3"."""
    pieces = [(f > 0, v if abs(f) == 1 else f"{v} * {abs(f)}") for v, f in terms if f]
    if constant:
        const = (constant > 0, str(abs(constant)))
        pieces = [const] + pieces if constant > 0 and pieces and not pieces[0][0] else pieces + [const]
    if not pieces:
        return "0"
    (first_positive, first), rest = pieces[0], pieces[1:]
    return "".join([first if first_positive else f"-{first}"] + [f" {'+' if p else '-'} {t}" for p, t in rest])


def index(view: View, variables) -> str:
    terms = [v if s == 1 else f"{v} * {s}" for v, d, s in zip(variables, view.shape, view.strides) if s and d != 1]
    return " + ".join(terms) or "0"


def join(*terms: str) -> str:
    """A C sum of index expressions, without the zero ones."""
    return " + ".join(t for t in terms if t != "0") or "0"


def collapse(shape, views) -> tuple[list[int], list[tuple[int, ...]]]:
    """Drop unit dims and merge dims that are contiguous in every view: fewer, longer loops."""
    dims = [(d, [v.strides[i] for v in views]) for i, d in enumerate(shape) if d != 1]
    merged: list[tuple[int, list[int]]] = []
    for d, strides in dims:
        if merged and all(ps == s * d for ps, s in zip(merged[-1][1], strides)):
            merged[-1] = (merged[-1][0] * d, strides)
        else:
            merged.append((d, strides))
    sizes = [d for d, _ in merged]
    per_view = [tuple(strides[k] for _, strides in merged) for k in range(len(views))]
    return sizes, per_view


def collapsed(views, shape, dims: slice, prefix: str):
    """Loops over `dims` of `shape` and each view re-expressed over those loops."""
    sub = [View(v.buf, 0, v.shape[dims], v.strides[dims]) for v in views]
    sizes, strides = collapse(shape[dims], sub)
    loops = [(f"{prefix}{i}", n) for i, n in enumerate(sizes)]
    return loops, [View(v.buf, 0, tuple(sizes), s) for v, s in zip(views, strides)]


def from_template(template: str, fn: str, instr: Instr, names: list[str], dtypes, scratch: int = 0,
                  **context) -> Kernel:
    """The kernel function from its template: `head` (see kernel_head) then the template's loops over `context`."""
    head, params = kernel_head(fn, instr, names, dtypes, scratch)
    return Kernel(ENV.get_template(template).render(head=head, **context), params)


def kernel_head(fn: str, instr: Instr, names: list[str], dtypes, scratch: int = 0) -> tuple[str, tuple[View, ...]]:
    """The kernel's node comment, prototype and opening brace; and the views its parameters take, in order.

    `names` name the output, then each view that instr reads; the last `scratch` of them are written too.
    These qualifiers tell the compiler what it otherwise learned only by specializing a kernel for the constant
    arena addresses of its calls, which runtime_c/kernel.c forbids (gcc 12 got it wrong):
    - one parameter per buffer, restrict-qualified: buffers that one instruction touches never share a byte
      (their lifetimes overlap, so the allocator keeps them apart; the caller's inputs and outputs must not
      overlap by the C API);
    - another view of a buffer (the input of an in-place kernel, another slice) is a pointer derived from that
      parameter, `const float *x = y + 64;`: the compiler sees the exact distance between the two;
    - except the output and the ring of an in-place kernel, which stay unqualified: knowing the ring apart
      from the output, gcc turns the copy of each finished row into a memcpy call, a byte loop in picolibc
      (Cortex-M4 kws +14% instructions). Its panel (a tile's inputs, gathered) is restrict: without it gcc copied
      each window into it a byte at a time, reloading the input after every store (int8 resnet8's residual
      convolutions on x86-64 AVX-512: 91 us where the same convolution not in place took 47).
    Time against the kernels gcc specialized (x86-64 AVX-512, gcc 12, with this file's other changes of the time):
    -O2 kws / mobilenetv2 0.59 / 0.84, -O2 -march=native 0.52 / 0.48, -O3 -march=native 0.88 / 0.94 (no model
    above 1.00); clang -O3 -march=native unet 0.26."""
    views = (instr.out,) + tuple(reads(instr))
    assert len(views) == len(names)
    written = {0} | set(range(len(views) - scratch, len(views)))
    leader: dict[int, int] = {}  # buffer id -> the position of its parameter
    for i, v in enumerate(views):
        leader.setdefault(v.buf, i)
    params, derived = [], []
    in_place = any(v.buf == views[0].buf for v in views[1:])
    for i, (v, name) in enumerate(zip(views, names)):
        first = leader[v.buf]
        t = c_type(dtypes[v.buf])
        if first == i:
            shared = [k for k, w in enumerate(views) if w.buf == v.buf]
            const = "" if written & set(shared) else "const "
            plain = in_place and i in written and name != "panel"
            params.append(f"{const}{t} *{'' if plain else 'restrict '}{name}")
        else:
            step = v.offset - views[first].offset
            at = names[first] + (f" + {step}" if step > 0 else f" - {-step}" if step else "")
            derived.append(f"    {'' if i in written else 'const '}{t} *{name} = {at};\n")
    kept = tuple(v for i, v in enumerate(views) if leader[v.buf] == i)
    return (f"/* {comment(instr.node)} */\nCGLOW_KERNEL void {fn}({', '.join(params)})\n{{\n{''.join(derived)}",
            kept)


def minus(zero: int) -> str:
    """The subtraction of an integer zero point from a loaded value, or nothing."""
    return f" - {c_literal(zero, np.int32)}" if zero else ""


def epilogue_at(epi: Epilogue, variables, acc: str = "acc") -> str:
    """The epilogue's expression as C over the accumulator `acc`, its inputs read at the output's `variables`."""
    return to_c(epi.expr, [f"e{i}[{index(v, variables)}]" for i, v in enumerate(epi.ins)], acc)


def memory_order(view: View) -> tuple[int, ...]:
    """The view's dims sorted by decreasing stride: loops in this order walk its memory forwards."""
    return tuple(sorted(range(len(view.shape)), key=lambda d: -abs(view.strides[d])))


TILE_LOOP = "CGLOW_TILE_LOOP"  # runtime_c/tile_loop.c: how gcc should treat a register tile's innermost loop
TILE_UNROLL = "CGLOW_TILE_UNROLL"  # runtime_c/tile_unroll.c: the same, clang to unroll it (a plain epilogue)


def tile_loop(acc_t: np.dtype, epi: Epilogue) -> str:
    """How a matrix product's register tile's innermost loops are marked: TILE_UNROLL in a float tile whose epilogue
    calls no function but exp (unrolled, clang left GELU's erf and a recurrent cell's tanh scalar); else TILE_LOOP.
    Not in convolutions: clang took twice gcc's time to compile MobileNetV2 (-O2: 40 s where gcc takes 20) with their
    tiles unrolled too, 25 s without, and ran it in the same time (7.4 and 7.8 ms, single runs)."""
    def calls(e: Expr) -> bool:
        return isinstance(e, Call) and e.fn != "cglow_exp" or any(calls(o) for o in e.operands())
    return TILE_UNROLL if acc_t == np.float32 and not calls(epi.expr) else TILE_LOOP


def steps(size: int, step: int) -> list[tuple[int, int, int]]:
    """[0, size) as (lo, hi, step) runs: the whole steps, then the remainder as a step of its own (empty runs
    left out)."""
    whole = size - size % step
    return [(lo, hi, s) for lo, hi, s in ((0, whole, step), (whole, size, size % step)) if s and hi > lo]


def oriented(tiles: Tiles, rows: int, columns: int) -> Tiles:
    """A float multiply-and-add tile (Tiles.float_mac "mul_add") turned on its side where that leaves less of the
    operation to the edge tiles (smaller, slower per multiply-add): the rows x columns padded to whole tiles."""
    if tiles.float_mac != "mul_add" or tiles.rows == tiles.columns:
        return tiles

    def padded(r: int, c: int) -> int:
        return -(-rows // r) * r * (-(-columns // c) * c)
    turned = replace(tiles, rows=tiles.columns, columns=tiles.rows)
    return turned if padded(turned.rows, turned.columns) < padded(tiles.rows, tiles.columns) else tiles


def starting(epi: Epilogue, is_float: bool, scalar: bool) -> Epilogue:
    """The epilogue as a tile kernel takes it: its accumulators start at Epilogue.init's input where they are
    integers, or on a target whose accumulators are a register each (Tiles.scalar: the bias loaded once per
    channel of a tile; Cortex-M4F float kws 3.14 -> 3.10 estimated cycles per MAC); on vector targets a float
    bias is added at the end (x86-64 AVX-512 float kws: 0.87 of onnxruntime's time that way, 0.90 starting at
    it)."""
    return epi if not is_float or scalar else epi.folded()
