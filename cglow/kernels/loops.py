"""The kernels that are plain loop nests, one template each: elementwise maps (map.c.j2), reductions
(reduce.c.j2, argreduce.c.j2), gathers (gather.c.j2), scatters (scatter.c.j2), pools (pool.c.j2) and greedy selections
(compact.c.j2). Their loops walk the output in memory order, with the dims that are contiguous in every view merged
into one (kernel.py collapse)."""
from __future__ import annotations

import numpy as np

from ..c_text import c_highest, c_literal, c_lowest, c_type
from ..instr.expr import Input, to_c
from ..instr.ir import Compact, Gather, Map, Pool, Reduce, Scatter, View, accumulator, contiguous_strides
from ..instr.stored_floats import READS, loaded
from .kernel import Kernel, collapsed, from_template, index, join, linear, memory_order


def map_kernel(fn: str, m: Map, dtypes) -> Kernel:
    perm = memory_order(m.out)
    loops, (out, *ins) = collapsed(tuple(v.permute(perm) for v in (m.out,) + m.ins), m.out.permute(perm).shape,
                                   slice(None), "i")
    variables = [v for v, _ in loops]
    expr = to_c(m.expr, [f"x{i}[{index(v, variables)}]" for i, v in enumerate(ins)])
    names = ["y"] + [f"x{i}" for i in range(len(ins))]
    return from_template(
        "map.c.j2", fn, m, names, dtypes, loops=loops,
        out=index(out, variables), expr=expr, words=_copied_words(m, loops, (out, *ins), dtypes))


def _copied_words(m: Map, loops, views: tuple[View, ...], dtypes) -> int:
    """The 32-bit words a map copies, where it copies one run of memory to another (a tile's kept rows), a
    whole number of words; else 0."""
    if m.expr != Input(0) or len(loops) != 1 or dtypes[m.out.buf] != dtypes[m.ins[0].buf] or \
            any(v.strides != (1,) for v in views):
        return 0
    size = loops[0][1] * np.dtype(dtypes[m.out.buf]).itemsize
    return size // 4 if size % 4 == 0 else 0


def reduce_kernel(fn: str, r: Reduce, dtypes, vectors: bool = False) -> Kernel:
    """An accumulator per output element over the reduced loops; with `vectors` (a target with vector registers),
    down columns where they suit (_column_sums)."""
    rank = len(r.out.shape)
    full = r.ins[0].shape
    outer, (out, *ins_o) = collapsed((View(r.out.buf, 0, full, r.out.strides + (0,) * (len(full) - rank)),)
                                     + r.ins, full, slice(0, rank), "o")
    inner, ins_i = collapsed(r.ins, full, slice(rank, None), "r")
    ov, iv = [v for v, _ in outer], [v for v, _ in inner]
    terms = [f"x{i}[{join(index(a, ov), index(b, iv))}]" for i, (a, b) in enumerate(zip(ins_o, ins_i))]
    pre, compared = to_c(r.pre, terms), to_c(r.pre, terms, operand_of=">")
    acc = accumulator(dtypes[r.ins[0].buf], dtypes[r.out.buf]) if r.kind == "sum" else dtypes[r.out.buf]
    init = {"sum": c_literal(0, acc), "prod": c_literal(1, acc), "max": c_lowest(acc), "min": c_highest(acc)}
    columns = vectors and _column_sums(outer, inner, out, ins_o)
    column = columns and outer[-1][0]
    a = f"acc[{column}]" if columns else "acc"  # the accumulator of this output element
    combine = {"max": f"{a} = ({compared} > {a}) ? {compared} : {a}",
               "min": f"{a} = ({compared} < {a}) ? {compared} : {a}", "sum": f"{a} += {pre}", "prod": f"{a} *= {pre}"}
    names = ["y"] + [f"x{i}" for i in range(len(r.ins))]
    return from_template(
        "reduce.c.j2", fn, r, names, dtypes, outer=outer[:-1] if columns else outer, inner=inner, out=index(out, ov),
        acc_t=c_type(acc), init=init[r.kind], columns=columns, column=column, combine=combine[r.kind],
        post=to_c(r.post, acc=a))


COLUMN_SUMS = 64  # the most accumulators a reduction down columns keeps (256 bytes of int32 or float)


def _column_sums(outer, inner, out: View, ins_o) -> int:
    """The kept elements a reduction sums at once, one accumulator each, where its innermost kept dim is contiguous
    in the output and every input and the reduced ones are not (a global pool over channels last), so that the sums
    run down columns, a vector of them at a time, not each down a strided column (kws int8, 125 x 64, x86-64 AVX-512
    gcc 12: 3.5 us, 7% of the model); else 0. Not on scalar targets: there an accumulator is a register, and an
    array of them a load and a store per value."""
    if not outer or not inner or outer[-1][1] > COLUMN_SUMS or out.strides[-1] != 1 or \
            any(v.strides[-1] != 1 for v in ins_o):
        return 0
    return outer[-1][1]


def arg_reduce_kernel(fn: str, r: Reduce, dtypes) -> Kernel:
    """argmax / argmin over the one reduced dim, which is kept whole (never collapsed away)."""
    rank = len(r.out.shape)
    full = r.ins[0].shape
    outer, (out, *ins_o) = collapsed((View(r.out.buf, 0, full, r.out.strides + (0,)),) + r.ins, full,
                                     slice(0, rank), "o")
    ov = [v for v, _ in outer]
    at = [f"x{i}[{join(index(a, ov), linear([('r', v.strides[rank])]))}]" for i, (a, v) in enumerate(zip(ins_o, r.ins))]
    first = [f"x{i}[{index(a, ov)}]" for i, a in enumerate(ins_o)]
    better = {"argmax": ">", "argmin": "<"}[r.kind] + ("=" if r.last else "")
    return from_template(
        "argreduce.c.j2", fn, r, ["y"] + [f"x{i}" for i in range(len(r.ins))], dtypes, outer=outer,
        out=index(out, ov), value_t=c_type(dtypes[r.ins[0].buf]), first=to_c(r.pre, first),
        value=to_c(r.pre, at), better=better, length=full[rank])


def gather_kernel(fn: str, g: Gather, dtypes) -> Kernel:
    loops, (out, data, idx) = collapsed((g.out, g.data, g.index), g.out.shape, slice(None), "i")
    variables = [v for v, _ in loops]
    return from_template(
        "gather.c.j2", fn, g, ["y", "x", "index"], dtypes, loops=loops, out=index(out, variables),
        data=join(index(data, variables), linear([("j", g.axis_stride)])), idx=index(idx, variables),
        length=g.axis_len)


def scatter_kernel(fn: str, s: Scatter, dtypes) -> Kernel:
    """The copy of data in out's memory order, then the updates in their own order, each to its place."""
    perm = memory_order(s.out)
    copy, (out, data) = collapsed((s.out.permute(perm), s.data.permute(perm)), s.out.permute(perm).shape,
                                  slice(None), "i")
    places, length, stride = s.places()
    loops, (place, updates, idx) = collapsed((places, s.updates, s.index), s.updates.shape, slice(None), "u")
    variables = [v for v, _ in loops]
    at = f"y[{join(index(place, variables), linear([('j', stride)]))}]"
    value = f"u[{index(updates, variables)}]"
    store = {"none": f"{at} = {value}", "add": f"{at} += {value}", "mul": f"{at} *= {value}",
             "max": f"{at} = ({value} > {at}) ? {value} : {at}",
             "min": f"{at} = ({value} < {at}) ? {value} : {at}"}[s.kind]
    copy_vars = [v for v, _ in copy]
    return from_template(
        "scatter.c.j2", fn, s, ["y", "x", "u", "index"], dtypes, copy=copy, out=index(out, copy_vars),
        data=index(data, copy_vars), loops=loops, idx=index(idx, variables), length=length, store=store)


def pool_kernel(fn: str, p: Pool, dtypes) -> Kernel:
    """Pooling over any number of spatial dims; taps outside the input are skipped. With
    count_include_pad the divisor counts the taps inside the input plus its pads, per axis in closed form. An
    integer average (TFLite's) divides the int32 sum by the count of taps inside, rounding halves away from zero.
    "argmax" stores the flat index of the first maximum (row- or column-major over the spatial dims)."""
    win, spatial = p.win, p.x.shape[2:]
    outs = [f"o{d}" for d in range(len(spatial))]
    taps, divisor = [], []
    for d, size in enumerate(spatial):
        s, k, dil, begin, end = win.strides[d], win.kernel[d], win.dilations[d], win.pads_begin[d], win.pads_end[d]
        taps.append(dict(k=f"k{d}", n=k, i=f"i{d}", size=size, at=linear([(outs[d], s), (f"k{d}", dil)], -begin)))
        room = linear([(outs[d], -s)], size + begin + end)  # padded extent left from the window's start
        reach = f"(({room}) + {dil - 1}) / {dil}" if dil > 1 else f"({room})"
        divisor.append(f"({reach} < {k} ? {reach} : {k})")
    stored = dtypes[p.x.buf]  # a float16 or bfloat16 input compares and sums as float (instr/stored_floats.py)
    value_t = np.dtype(np.float32) if stored in READS else stored
    x = loaded(stored, f"x[{index(p.x, ['n', 'c'] + [t['i'] for t in taps])}]")
    larger = f"acc = ({x} > acc) ? {x} : acc;"  # not fmaxf: a library call that does not vectorize
    if p.kind == "max":
        init, combine, result = [f"{c_type(value_t)} acc = {c_lowest(value_t)};"], [larger], "acc"
    elif p.kind == "argmax":
        order = list(range(len(spatial)))[::-1] if p.column_major else list(range(len(spatial)))
        strides = dict(zip(order, contiguous_strides(tuple(spatial[d] for d in order))))
        flat = linear([("n", p.x.shape[1] * int(np.prod(spatial))), ("c", int(np.prod(spatial)))] +
                      [(f"i{d}", strides[d]) for d in range(len(spatial))])
        init = [f"{c_type(value_t)} best = {c_lowest(value_t)};", "int64_t arg = -1;"]
        combine = [f"if (arg < 0 || {x} > best) {{", f"    best = {x};", f"    arg = {flat};", "}"]
        result = "arg"
    elif value_t.kind in "iu":  # TFLite's integer average: the count of taps inside, halves away from zero
        assert not p.count_include_pad, "an integer average divides by the taps inside the input"
        init, combine = ["int32_t acc = 0;", "int32_t count = 0;"], [f"acc += {x};", "count += 1;"]
        result = "(acc > 0 ? acc + count / 2 : acc - count / 2) / count"
    elif p.count_include_pad:
        init, combine, result = ["float acc = 0.0f;"], [f"acc += {x};"], f"acc / (float)({' * '.join(divisor)})"
    else:
        init, combine, result = ["float acc = 0.0f;", "int32_t count = 0;"], [f"acc += {x};", "count += 1;"], \
            "acc / (float)count"
    return from_template(
        "pool.c.j2", fn, p, ["y", "x"], dtypes, init=init, combine=combine, result=result, taps=taps,
        outer=[([("n", p.x.shape[0]), ("c", p.x.shape[1])] + list(zip(outs, win.out)))[d] for d in memory_order(p.out)],
        out=index(p.out, ["n", "c"] + outs))


def compact_kernel(fn: str, c: Compact, dtypes) -> Kernel:
    """A greedy selection (Compact) over the outer dims of keep, each row scanned in order: a conflict with a kept
    candidate is read at the position that the output holds for it."""
    rank = len(c.out.shape) - 1
    views = (c.out, c.keep) + ((c.conflict,) if c.conflict else ())
    outer, (out, keep, *conflict) = collapsed(views, c.keep.shape, slice(0, rank), "o")
    ov = [v for v, _ in outer]
    kept = join(index(out, ov), linear([("k", c.out.strides[-1])]))
    at = None
    if c.conflict:
        chosen = f"y[{join(index(out, ov), linear([('s', c.out.strides[-1])]))}]"
        at = join(index(conflict[0], ov), f"{chosen} * {c.conflict.strides[-2]}" if c.conflict.strides[-2] != 1
                  else chosen, linear([("i", c.conflict.strides[-1])]))
    return from_template(
        "compact.c.j2", fn, c, ["y", "keep"] + ["conflict"] * bool(c.conflict), dtypes, outer=outer,
        length=c.keep.shape[-1], capacity=c.out.shape[-1], kept=kept, conflict=at,
        keep=join(index(keep, ov), linear([("i", c.keep.strides[-1])])))
