"""float16 and bfloat16 values kept as such between kernels: two bytes an element in the arena, where a float32
copy of each took four (a float16 kws took 60480 bytes of arena against 38400 for float32).

Every op reads such a value through a map to float32 (graph/stored_types.py: a Cast before the op, lowered to
cglow_half_to_float or cglow_bfloat_to_float) and rounds its result back. read_where_stored drops that map where
each instruction that reads its result can convert the values as it loads them: an elementwise map or a reduction
in its expression, a convolution's input, a matrix product's operands, a pool's input and a kernel's epilogue
inputs in their loads (loaded). The fusions after it then fold the rounding of a convolution's or a matrix
product's result into its epilogue, which stores the stored type (its sums stay float32: ir.py accumulator). The
results are the same bits: the conversion to float32 is exact. A read map whose result something else takes (a
gather, a scatter, a convolution's run-time weights, a loop in C) stays; so does its float32 copy."""
from __future__ import annotations

from dataclasses import replace

import ml_dtypes
import numpy as np

from .expr import Expr, Input, call, substitute
from .ir import Conv, Epilogue, Gemm, Instr, Map, Pool, Program, Reduce, View, reads

READS = {np.dtype(np.float16): "cglow_half_to_float", np.dtype(ml_dtypes.bfloat16): "cglow_bfloat_to_float"}
ROUNDINGS = ("cglow_float_to_half", "cglow_float_to_bfloat")
COMBINING = ("sum", "prod", "max", "min")  # the reductions whose accumulator is of the output's type


def loaded(dtype: np.dtype, ref: str, minus: str = "") -> str:
    """The C of a value a kernel reads at `ref`, as it computes with it: a float16 or bfloat16 one converted to
    float; another less the integer zero point `minus` (kernel.py minus)."""
    fn = READS.get(np.dtype(dtype))
    return f"{fn}({ref})" if fn else f"{ref}{minus}"


def read_where_stored(prog: Program) -> Program:
    """The program without the maps that convert a stored float16 or bfloat16 value to float32, where every
    instruction that reads their result converts the stored value as it loads it instead."""
    instrs = list(prog.instrs)
    for m in prog.instrs:
        source = _read_map(prog, instrs, m)
        if source is None:
            continue
        t, fn = m.out.buf, READS[prog.buffer(source.buf).dtype]

        def moved(v: View) -> View:  # m's output and input are laid out alike: the same elements, offset
            return View(source.buf, v.offset + source.offset, v.shape, v.strides)
        rewritten = {k: _reading(x, t, moved, fn) for k, x in enumerate(instrs) if x is not m and
                     any(v.buf == t for v in reads(x))}
        if any(x is None for x in rewritten.values()):
            continue
        for k, x in rewritten.items():
            instrs[k] = x
        instrs.remove(m)
    return replace(prog, instrs=tuple(instrs))


def _read_map(prog: Program, instrs: list[Instr], m: Instr) -> View | None:
    """The stored view that m converts to float32 where m is such a read map: its result an arena buffer written
    only by m, whole, laid out as its input, which nothing writes after m; else None."""
    if not isinstance(m, Map) or len(m.ins) != 1:
        return None
    source, out = m.ins[0], prog.buffer(m.out.buf)
    fn = READS.get(prog.buffer(source.buf).dtype)
    if fn is None or m.expr != call(fn, Input(0)) or out.kind != "arena" or m.out.offset or \
            not m.out.whole(out.size) or source.shape != m.out.shape or source.strides != m.out.strides:
        return None
    at = instrs.index(m)
    if any(x.out.buf == out.id for x in instrs if x is not m) or any(x.out.buf == source.buf for x in instrs[at:]):
        return None
    return source


def _converted(expr: Expr, ins: tuple[View, ...], t: int, fn: str) -> Expr:
    """expr with each of its inputs on buffer t read through fn."""
    return substitute(expr, {k: call(fn, Input(k)) for k, v in enumerate(ins) if v.buf == t})


def _epilogue(epi: Epilogue, t: int, moved, fn: str) -> Epilogue:
    """The epilogue reading its inputs on buffer t where they are stored (one its accumulators start at, added in
    its expression instead)."""
    if not any(v.buf == t for v in epi.ins):
        return epi
    if epi.init is not None and epi.ins[epi.init].buf == t:
        epi = epi.folded()
    return replace(epi, expr=_converted(epi.expr, epi.ins, t, fn), ins=tuple(moved(v) if v.buf == t else v
                                                                              for v in epi.ins))


def _reading(x: Instr, t: int, moved, fn: str) -> Instr | None:
    """x reading the stored value where it read its float32 copy (buffer t), or None where its kernel cannot."""
    def at(v: View) -> View:
        return moved(v) if v.buf == t else v
    if isinstance(x, Map):
        return replace(x, ins=tuple(at(v) for v in x.ins), expr=_converted(x.expr, x.ins, t, fn))
    if isinstance(x, Reduce) and x.kind in COMBINING:
        return replace(x, ins=tuple(at(v) for v in x.ins), pre=_converted(x.pre, x.ins, t, fn))
    if isinstance(x, Conv) and x.w.buf != t and x.ring is None and x.panel is None:
        return replace(x, x=at(x.x), epi=_epilogue(x.epi, t, moved, fn))
    if isinstance(x, Gemm) and x.panel is None and x.unpacked is None and not x.blocks and not x.nibbles:
        return replace(x, a=at(x.a), b=at(x.b), epi=_epilogue(x.epi, t, moved, fn))
    if isinstance(x, Pool):
        return replace(x, x=at(x.x))
    return None


def rounding(m: Instr) -> bool:
    """Whether m is a map that only rounds a float32 value to float16 or bfloat16."""
    return isinstance(m, Map) and len(m.ins) == 1 and any(m.expr == call(fn, Input(0)) for fn in ROUNDINGS)


def round_in_writers(prog: Program) -> Program:
    """The program without the maps that round a float32 value written a slice at a time by several maps (an
    interpolating Resize's runs of alike rows, lower/ops/resize.py) to float16 or bfloat16: each of those maps rounds
    its slice into the stored value itself, and the float32 value is never whole (the fusions take only a value of
    one writer)."""
    instrs = list(prog.instrs)
    for b in prog.instrs:
        writers = _slice_writers(prog, instrs, b)
        if not writers:
            continue
        delta = b.out.offset - b.ins[0].offset
        for k in writers:
            a = instrs[k]
            out = View(b.out.buf, a.out.offset + delta, a.out.shape, a.out.strides)
            instrs[k] = replace(a, out=out, expr=substitute(b.expr, [a.expr]), value=None)
        instrs.remove(b)
    return replace(prog, instrs=tuple(instrs))


def _slice_writers(prog: Program, instrs: list[Instr], b: Instr) -> list[int]:
    """The positions of the maps that write b's float32 input where b is a rounding of it to a stored type, laid out
    as its result, the only instruction that reads it, and its result a buffer that b alone writes; else none."""
    if not rounding(b):
        return []
    v, t = b.ins[0], prog.buffer(b.ins[0].buf)
    if t.kind != "arena" or t.dtype != np.float32 or not v.whole(t.size) or v.shape != b.out.shape or \
            v.strides != b.out.strides:
        return []
    writers = [k for k, x in enumerate(instrs) if x.out.buf == t.id]
    at = instrs.index(b)
    if not writers or any(not isinstance(instrs[k], Map) or k > at for k in writers) or \
            sum(1 for x in instrs for w in reads(x) if w.buf == t.id) != 1 or \
            [x for x in instrs if x.out.buf == b.out.buf] != [b]:
        return []
    return writers

