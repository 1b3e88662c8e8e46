"""Passes over the instruction list: fuse elementwise chains, fuse maps into kernel epilogues, and
let producers write straight into the destination of a copy (concat slices, graph outputs).

The fusions look for a producer A whose result T (an arena buffer) is written only by A, as a whole,
and read only once, by the map B; they fold A and B into one instruction (A's expression tree, or its
epilogue's, in place of B's input) and drop T.
"""
from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np

from ..graph.geometry import Window
from .liveness import alive, floor, lifetimes, slot
from .patches import PatchPlan, patch
from .schedule import schedule
from .expr import Expr, Input, cast, cost, depth, substitute, uses
from .constants import laid_out, values
from .narrow_weights import narrow_convs, narrow_gemms
from .nibbles import unpack_nibbles
from .ir import (Buffer, Conv, Epilogue, Gemm, Instr, Map, Program, Value, View, accumulator, channels_innermost,
                 dot_operands, extent, gemm_dot_products, map_views, reads)
from .stored_floats import READS, read_where_stored, round_in_writers, rounding
from .vector_dots import block_weights, gather_windows, rebase_inputs, sums_as_vector_dots, widen_weights

# The most nodes of an expression that is computed twice where a fused map reads it twice: a clamp to two
# literals (ReLU6) has 11. (The length of its C text, the test before expression trees, let ReLU6 through and
# refused the same clamp to negative bounds, whose parenthesized literals spelled it longer.)
REPEAT_COST = 11
# The deepest expression that fusing makes: each level of it opens a bracket in C at most (a call, a parenthesized
# operand; a clip two), and C99 compilers need only take 63 nested in one expression (clang refuses more than 256:
# an unrolled Scan of 500 scalar steps fused into one chain of 500 tanhf calls). The int8 GELU is 31 deep.
FUSED_DEPTH = 32


def _may_repeat(expr: Expr) -> bool:
    """Whether an expression is cheap enough to be evaluated twice when fused where it is read twice:
    no function call, and at most REPEAT_COST nodes (a few loads, literals and arithmetic operations)."""
    c = cost(expr)
    return c is not None and c <= REPEAT_COST


def _usage(prog: Program) -> tuple[dict[int, list[int]], dict[int, int]]:
    writers: dict[int, list[int]] = {}
    read_count: dict[int, int] = {}
    for i, instr in enumerate(prog.instrs):
        writers.setdefault(instr.out.buf, []).append(i)
        for v in reads(instr):
            read_count[v.buf] = read_count.get(v.buf, 0) + 1
    return writers, read_count


def _reshaped(views, shape) -> tuple[View, ...] | None:
    out = tuple(v.reshape(shape) for v in views)
    return None if any(v is None for v in out) else out


def _realign(views, src: View, dst: View) -> tuple[View, ...] | None:
    """`views`, indexed like src, re-indexed like dst, where src and dst are two whole views of one
    buffer: element I of a result meets the element of dst at I. Both are walked in memory order
    (each permuted into its buffer's physical order), so the correspondence is a reshape."""
    src_order, dst_order = src.order(), dst.order()
    physical = tuple(dst.shape[d] for d in dst_order)
    back = tuple(dst_order.index(d) for d in range(len(dst_order)))
    out = tuple(v.permute(src_order).reshape(physical) for v in views)
    return None if any(v is None for v in out) else tuple(v.permute(back) for v in out)


def _fuse_map(prog: Program, a: Instr, b: Map, k: int) -> Instr | None:
    """B(..., A(...), ...) as one map over B's shape. A's result keeps the conversion to A's element type
    that storing it made, unless it is plain float arithmetic. Not where A only rounds a float32 value to float16 or
    bfloat16 (stored_floats.py rounding): B would keep the float32 value alive in its place, twice its bytes (int8
    resnet8's residual branch); a convolution's or a matrix product's epilogue takes such a rounding instead, or the
    map that computes the value."""
    if not isinstance(a, Map) or not b.ins[k].whole(a.out.size) or (uses(b.expr, k) > 1 and not _may_repeat(a.expr)) \
            or rounding(a):
        return None
    a_ins = _realign(a.ins, a.out, b.ins[k])
    if a_ins is None:
        return None
    others = [i for i in range(len(b.ins)) if i != k]
    values: dict[int, Expr] = {i: Input(n) for n, i in enumerate(others)}
    inner = substitute(a.expr, [Input(len(others) + i) for i in range(len(a.ins))])
    dtype = prog.buffer(a.out.buf).dtype
    if dtype != np.float32 or any(prog.buffer(v.buf).dtype != np.float32 for v in a.ins):
        inner = cast(dtype, inner)
    values[k] = inner
    expr = substitute(b.expr, values)
    return None if depth(expr) > FUSED_DEPTH else \
        _merge_inputs(replace(b, ins=tuple(b.ins[i] for i in others) + a_ins, expr=expr))


def _merge_inputs(m: Map) -> Map:
    """One input slot per distinct view."""
    unique: list[View] = []
    for v in m.ins:
        if v not in unique:
            unique.append(v)
    return replace(m, ins=tuple(unique), expr=substitute(m.expr, [Input(unique.index(v)) for v in m.ins]))


def _fuse_epilogue(prog: Program, a: Instr, b: Map, k: int) -> Instr | None:
    """The map B applied in A's epilogue, A a conv or matrix product: B's output of A's output type, or a float
    stored narrower that A's float32 sums round to (instr/stored_floats.py)."""
    if not isinstance(a, (Conv, Gemm)) or not b.ins[k].whole(a.out.size) or \
            not _same_sums(prog, a, prog.buffer(b.out.buf).dtype) or \
            (uses(b.expr, k) > 1 and not _may_repeat(a.epi.expr)):
        return None
    others = [i for i in range(len(b.ins)) if i != k]
    moved = _realign([b.out] + [b.ins[i] for i in others], b.ins[k], a.out)
    if moved is None:
        return None
    out, extra = moved[0], moved[1:]
    base = len(a.epi.ins)
    values: dict[int, Expr] = {i: Input(base + n) for n, i in enumerate(others)}
    values[k] = a.epi.expr
    expr = substitute(b.expr, values)
    return None if depth(expr) > FUSED_DEPTH else \
        replace(a, out=out, epi=Epilogue(expr, a.epi.ins + extra, a.epi.init), value=b.value)


def _same_sums(prog: Program, a: Conv | Gemm, out: np.dtype) -> bool:
    """Whether A would sum as it does with its output of type `out`: the same type, or float32 for a float stored
    narrower."""
    values, now = prog.buffer((a.x if isinstance(a, Conv) else a.a).buf).dtype, prog.buffer(a.out.buf).dtype
    return out == now or out in READS and accumulator(values, out) == accumulator(values, now) == np.float32


def _transport(prog: Program, a: Instr, b: Map, k: int) -> Instr | None:
    """A writing directly where the copy B puts each element, even when B reads A's result through a
    permuted view (a transpose before a reshape): A's output becomes the inverse view of B's output."""
    v, size = b.ins[k], a.out.size
    if b.expr != Input(0) or v.offset or prog.buffer(a.out.buf).dtype != prog.buffer(b.out.buf).dtype:
        return None
    dims = sorted(((s, d, i) for i, (d, s) in enumerate(zip(v.shape, v.strides)) if d != 1), reverse=True)
    step = 1
    for s, d, _ in reversed(dims):  # v must visit every element of A's result exactly once
        if s != step:
            return None
        step *= d
    if step != size:
        return None
    layout = View(b.out.buf, b.out.offset, tuple(d for _, d, _ in dims), tuple(b.out.strides[i] for _, _, i in dims))
    order = a.out.order()  # A's result may itself be laid out in another dim order (channels last)
    out = layout.reshape(tuple(a.out.shape[d] for d in order))
    if out is None:
        return None
    out = out.permute(tuple(order.index(d) for d in range(len(order))))
    moved = Value(a.value.name, out) if a.value and a.value.view == a.out else None  # a fused map's value: lost
    return replace(a, out=out, value=moved)


def _touches(instr: Instr, region: View) -> bool:
    """Whether instr may access an element of the map output `region` (element ranges intersect)."""
    lo, hi = extent(region)
    spans = [extent(v, instr) for v in (instr.out,) + reads(instr) if v.buf == region.buf]
    return any(first <= hi and lo <= last for first, last in spans)


def _combine(prog: Program, rule, keep_floor: bool = False) -> Program:
    """Apply `rule` to producer/map pairs until none changes. The combined instruction takes the map's
    place, unless the map reads nothing but the producer's result and nothing in between touches the map's
    destination: then the producer's, as moving a producer later would keep its own inputs alive longer.
    With `keep_floor`, not where that raises the most bytes alive at once (such a pair is not tried again)."""
    instrs = list(prog.instrs)
    refused: set[tuple[int, int]] = set()
    kept: list[Instr] = []  # the refused pairs' instructions, held so that their ids stay theirs
    changed = True
    while changed:
        changed = False
        current = replace(prog, instrs=tuple(i for i in instrs if i is not None))
        instrs = list(current.instrs)
        writers, read_count = _usage(current)
        lowest = floor(lifetimes(current)) if keep_floor else 0
        for j, b in enumerate(instrs):
            if not isinstance(b, Map) or prog.buffer(b.out.buf).kind == "state":
                continue  # a state's copy stays: its producer may read the old state, which it would overwrite
            for k, v in enumerate(b.ins):
                t = prog.buffer(v.buf)
                if t.kind != "arena" or len(writers.get(t.id, ())) != 1 or read_count[t.id] != 1:
                    continue
                i = writers[t.id][0]
                if i >= j or not instrs[i].out.whole(t.size) or (id(instrs[i]), id(b)) in refused:
                    continue
                fused = rule(prog, instrs[i], b, k)
                if fused is None:
                    continue
                early = len(b.ins) == 1 and not any(_touches(x, b.out) for x in instrs[i + 1:j])
                before = instrs[i], instrs[j]
                instrs[i], instrs[j] = (fused, None) if early else (None, fused)
                if keep_floor and _floor(prog, [x for x in instrs if x is not None]) > lowest:
                    instrs[i], instrs[j] = before
                    refused.add((id(before[0]), id(b)))
                    kept += before
                    continue
                changed = True
                break
            if changed:
                break
    return replace(prog, instrs=tuple(i for i in instrs if i is not None))


def fuse_maps(prog: Program) -> Program:
    return _combine(prog, _fuse_map)


def fuse_epilogues(prog: Program) -> Program:
    return _combine(prog, _fuse_epilogue)


def _rename(instr: Instr, old: int, dest: View) -> Instr:
    """instr with every view of buffer `old` moved into the contiguous region that starts at dest."""
    def move(v: View) -> View:
        return replace(v, buf=dest.buf, offset=dest.offset + v.offset) if v.buf == old else v
    return map_views(instr, move)


def forward_copies(prog: Program) -> Program:
    """A producer writes where the copy of its result puts it (a concat's slice, a graph output), unless its
    destination, alive earlier, would raise the floor (a patched span's rows kept for the next tile)."""
    return _combine(prog, _transport, keep_floor=True)


def _floor(prog: Program, instrs) -> int:
    return floor(lifetimes(replace(prog, instrs=tuple(instrs))))


def elide_copies(prog: Program) -> Program:
    """A whole buffer T copied, as its last use, into a contiguous region D (a concat slice, a graph
    output): every instruction that touched T works in D instead, and the copy goes, unless D's buffer,
    alive earlier, would raise the floor. D's region is written by nobody else (each element of a value is
    written once), so this keeps the semantics; a state's region holds its old value until the copy, so
    its copy stays."""
    instrs = list(prog.instrs)
    j = 0
    while j < len(instrs):
        b = instrs[j]
        if isinstance(b, Map) and b.expr == Input(0):
            t = prog.buffer(b.ins[0].buf)
            dest = b.out.reshape((b.out.size,))
            last = max(i for i, x in enumerate(instrs) if t.id in {v.buf for v in (x.out,) + reads(x)})
            if t.kind == "arena" and prog.buffer(b.out.buf).kind != "state" and t.id != b.out.buf \
                    and t.dtype == prog.buffer(b.out.buf).dtype and last == j \
                    and b.ins[0].covers(t.size) \
                    and dest is not None and dest.strides == (1,):
                renamed = [_rename(x, t.id, dest) for x in instrs[:j]] + instrs[j + 1:]
                if _floor(prog, renamed) <= _floor(prog, instrs):  # D alive earlier must not cost more
                    instrs = renamed
                    continue
        j += 1
    return replace(prog, instrs=tuple(instrs))


def reuse_dying_inputs(prog: Program) -> Program:
    """An elementwise map whose input T dies there writes its result over T, index for index, instead
    of into a fresh buffer U: U is renamed to T everywhere."""
    instrs = list(prog.instrs)
    for j in range(len(instrs)):
        b = instrs[j]  # read anew: an earlier rename may have rewritten it
        u = prog.buffer(b.out.buf)
        if not isinstance(b, Map) or u.kind != "arena" or not b.out.whole(u.size):
            continue
        touching = {x.buf: i for i, instr in enumerate(instrs) for x in (instr.out,) + reads(instr)}
        if [i for i, instr in enumerate(instrs) if instr.out.buf == u.id] != [j]:
            continue
        for v in b.ins:
            t = prog.buffer(v.buf)
            same_index = v == View(t.id, 0, b.out.shape, b.out.strides)
            if t.kind == "arena" and t.id != u.id and t.size == u.size and t.dtype == u.dtype and same_index \
                    and touching[t.id] == j \
                    and all(w == v for w in b.ins if w.buf == t.id):
                whole = View.of(t.id, (t.size,))
                instrs = [_rename(x, u.id, whole) for x in instrs]
                break
    return replace(prog, instrs=tuple(instrs))


def drop_empty(prog: Program) -> Program:
    """Instructions that write no element (zero-sized tensors) do nothing."""
    return replace(prog, instrs=tuple(i for i in prog.instrs if i.out.size))


def convolve_in_place(prog: Program) -> Program:
    """A stride-1 convolution whose output has its input's shape and whose input dies there writes its
    output over the input, row by row, keeping (top pad + 1) pending output rows in a scratch ring: memory
    for one activation plus a few rows instead of two activations (TinyEngine's in-place depthwise idea,
    which holds for any such convolution computed a whole row of all channels at a time)."""
    instrs, buffers = list(prog.instrs), list(prog.buffers)
    for j in range(len(instrs)):
        a = instrs[j]  # read anew: an earlier rename may have rewritten it
        if not isinstance(a, Conv) or a.ring or a.win.strides[0] != 1 or a.x.shape != a.out.shape or \
                (not channels_innermost(a) and prog.buffer(a.x.buf).dtype != np.float32):  # rows accumulate in float
            continue
        t, u = buffers[a.x.buf], buffers[a.out.buf]
        n, m, _, w = a.out.shape
        rows = a.win.pads_begin[0] + 1
        last = max(i for i, x in enumerate(instrs) if t.id in {v.buf for v in (x.out,) + reads(x)})
        writers = [i for i, x in enumerate(instrs) if x.out.buf == u.id]
        if t.kind != "arena" or u.kind != "arena" or t.id == u.id or t.dtype != u.dtype or last != j \
                or writers != [j] or not a.x.whole(t.size) or not a.out.whole(u.size) or not a.x.same_layout(a.out) \
                or any(v.buf in (t.id, u.id) for v in a.epi.ins) or rows * m * w >= u.size:
            continue
        ring = Buffer(len(buffers), "arena", rows * m * w, f"{a.node} rows", dtype=u.dtype)
        buffers.append(ring)
        instrs = [_rename(x, u.id, View.of(t.id, (t.size,))) for x in instrs]
        instrs[j] = replace(instrs[j], ring=View.of(ring.id, (rows, m, w)))
    return replace(prog, buffers=tuple(buffers), instrs=tuple(instrs))


ROW = 64  # the longest pixel row a pointwise convolution is regrouped into


def regroup_pixels(prog: Program) -> Program:
    """A 1x1, stride-1, unpadded convolution sees each pixel alone, so its H x W pixels may be regrouped into
    rows of any width T dividing H * W: the longest T up to ROW (if longer than a row of the image) makes the
    kernel's innermost loop longer, and keeps in-place rows short. After the patch pass, so that the tiles of a
    span (a few rows of the image each) are regrouped too."""
    instrs = list(prog.instrs)
    for j, c in enumerate(instrs):
        if not isinstance(c, Conv) or not c.win.pointwise or len(c.out.shape) != 4:
            continue
        pixels = c.out.shape[2] * c.out.shape[3]
        width = max(t for t in range(1, min(pixels, ROW) + 1) if pixels % t == 0)
        if width <= c.out.shape[3]:
            continue
        shape = (pixels // width, width)
        views = [v.reshape(v.shape[:2] + shape) for v in (c.out, c.x) + c.epi.ins]
        if all(v is not None for v in views):
            win = Window((1, 1), (1, 1), c.win.dilations, (0, 0), (0, 0), shape)
            instrs[j] = replace(c, out=views[0], x=views[1], win=win, epi=replace(c.epi, ins=tuple(views[2:])))
    return replace(prog, instrs=tuple(instrs))


def pointwise_as_gemm(prog: Program) -> Program:
    """A 1x1, stride-1, unpadded, ungrouped convolution not running in place is the matrix product
    out [N, M, pixels] = w [M, C] x [N, C, pixels]: the register-tiled Gemm kernel computes it faster."""
    instrs = list(prog.instrs)
    for j, c in enumerate(instrs):
        if not isinstance(c, Conv) or c.ring or c.group != 1 or not c.win.pointwise:
            continue
        (n, m), k = c.out.shape[:2], c.x.shape[1]
        pixels = c.out.shape[2] * c.out.shape[3]
        w = c.w.reshape((m, k))
        if channels_innermost(c):  # out [N, pixels, M] = x [N, pixels, K] x w^T [K, M]
            last = (0, 2, 3, 1)
            out, x = c.out.permute(last).reshape((n, pixels, m)), c.x.permute(last).reshape((n, pixels, k))
            ins = _reshaped([v.permute(last) for v in c.epi.ins], (n, pixels, m))
            a, b = x, w and w.permute((1, 0)).broadcast_to((n, k, m))
        else:  # out [N, M, pixels] = w [M, K] x x [N, K, pixels]
            out, x = c.out.reshape((n, m, pixels)), c.x.reshape((n, k, pixels))
            ins = _reshaped(c.epi.ins, (n, m, pixels))
            a, b = w and w.broadcast_to((n, m, k)), x
        if any(v is None for v in (out, a, b, ins)):
            continue
        zeros = (c.x_zero, 0) if channels_innermost(c) else (0, c.x_zero)
        instrs[j] = Gemm(out, a, b, replace(c.epi, ins=ins), c.node, zeros, value=c.value)
    return replace(prog, instrs=tuple(instrs))


def _packed(buffers: list[Buffer], packed: dict, v: View, order: tuple[int, ...]) -> View:
    """A constant view re-laid out with its dims in memory in `order` (outermost first)."""
    old = buffers[v.buf]

    def lay_out() -> tuple[np.ndarray, str]:
        return np.ascontiguousarray(values(old, v).transpose(order)), f"{old.label} packed"
    return View.laid_out(laid_out(buffers, packed, (old.id, v.offset, v.shape, v.strides, order), lay_out),
                         v.shape, order)


TRANSPOSE_ROWS = 4  # a run-time right operand read across rows is copied first when this many rows reuse it


def copy_run_time_operands(prog: Program) -> Program:
    """A Gemm whose run-time right operand is read across rows (attention's Q x K^T) reads a row-major
    copy instead, made just before it: one pass over b, against rows x one strided gather per element."""
    instrs, buffers = [], list(prog.buffers)
    for g in prog.instrs:
        if isinstance(g, Gemm) and buffers[g.b.buf].kind != "const" and g.b.strides[-1] not in (0, 1) and \
                g.out.shape[-2] >= TRANSPOSE_ROWS:
            copy = Buffer(len(buffers), "arena", g.b.size, f"{g.node} right operand", dtype=buffers[g.b.buf].dtype)
            buffers.append(copy)
            b = View.of(copy.id, g.b.shape)
            instrs += [Map(b, (g.b,), Input(0), g.node), replace(g, b=b)]
        else:
            instrs.append(g)
    return replace(prog, buffers=tuple(buffers), instrs=tuple(instrs))


def pack_weights(prog: Program, dot_products: bool = False, vector_dot: bool = False,
                 signed: bool = False) -> Program:
    """Constant matrices that a Gemm reads across rows (a transposed weight, as Gemm transB=1 gives) are
    re-laid out at compile time so that the kernel's innermost loop reads them contiguously; so are the
    filters of the convolutions that vectorize over output channels, [KH, KW, C/group, M]. With
    `dot_products` (a target with dual 16-bit multiply-accumulates), the weights of 8-bit convolutions and
    matrix products are laid out with the reduced dim innermost instead: [M, KH, KW, C/group] and [N, K]; with
    `vector_dot` (Tiles.vector_dot, its dot products `signed` as Tiles.signed_dots), those that sum as dot
    products in C (sums_as_vector_dots)."""
    instrs, buffers = list(prog.instrs), list(prog.buffers)
    packed: dict[tuple, int] = {}  # buffer ids of the packed copies
    for j, g in enumerate(instrs):
        if isinstance(g, Conv) and channels_innermost(g) and buffers[g.w.buf].kind == "const":
            x_t, w_t = buffers[g.x.buf].dtype, buffers[g.w.buf].dtype
            dot = g.group == 1 and dot_products and dot_operands(x_t, w_t) or \
                vector_dot and sums_as_vector_dots(g, buffers, signed)
            instrs[j] = replace(g, w=_packed(buffers, packed, g.w, (0, 2, 3, 1) if dot else (2, 3, 1, 0)))
            continue
        if not isinstance(g, Gemm) or buffers[g.b.buf].kind != "const":
            continue
        dot = dot_products and dot_operands(buffers[g.a.buf].dtype, buffers[g.b.buf].dtype) or \
            vector_dot and sums_as_vector_dots(g, buffers, signed)
        if g.b.strides[-2 if dot else -1] in (0, 1):
            continue
        shared = all(s == 0 for s in g.b.strides[:-2])  # one matrix for every batch: pack it once
        b = View(g.b.buf, g.b.offset, g.b.shape[-2:], g.b.strides[-2:]) if shared else g.b
        inner = (len(b.shape) - 1, len(b.shape) - 2) if dot else (len(b.shape) - 2, len(b.shape) - 1)
        b = _packed(buffers, packed, b, tuple(range(len(b.shape) - 2)) + inner)
        instrs[j] = replace(g, b=b.broadcast_to(g.b.shape))
    return replace(prog, buffers=tuple(buffers), instrs=tuple(instrs))


PANEL_MIN_K = 16  # a shorter sum gains too little from widened inputs to take scratch memory for them


def channels_contiguous(c: Conv) -> bool:
    """Whether a convolution's input channels are contiguous in both its input and its weights: the dot path
    (kernels/conv.py) then sums over a tap's channels at once."""
    return c.w.shape[1] == 1 or c.x.strides[1] == c.w.strides[1] == 1


def taps_contiguous(c: Conv) -> bool:
    """Whether a kernel row's taps (their channels innermost) are one run in both the input and the weights:
    the dot path then sums over a whole kernel row at once."""
    cg, kw = c.w.shape[1], c.win.kernel[1]
    return c.win.dilations[1] == 1 and (kw == 1 or c.x.strides[3] == c.w.strides[3] == cg)


def pair_weights(buffers: list[Buffer], paired: dict, w: View, rows: int, k: int, k4: int) -> int:
    """The buffer of a panel kernel's weights (`rows` output channels of k values, row r at w.offset + r * k),
    each row padded with zeros to k4 values, a multiple of 4 (a panel's sums run over whole words), in channel
    pairs as kernels/arm_steps.py pair_step reads them: pair p (channels 2p and 2p + 1, the second zero where
    rows is odd) is k4 / 2 words from 2p * k4, its word 2g + a the weights of the values 4g + a and 4g + 2 + a,
    which the panel's word 2g + a holds (runtime_c/widen4.c): the first channel's in bytes 0 and 2, the
    second's in 1 and 3. One SXTB16 of the word, and one of it rotated by a byte, make each channel's 16-bit
    pair. Stored once (constants.laid_out, `paired`)."""
    old = buffers[w.buf]

    def lay_out() -> tuple[np.ndarray, str]:
        data = np.zeros((rows + rows % 2, k4), old.dtype)
        data[:rows, :k] = old.data[w.offset:w.offset + rows * k].reshape(rows, k)
        pairs = data.reshape(-1, 2, k4 // 4, 2, 2).transpose(0, 2, 4, 3, 1)  # [p, c, g, half, a] -> [p, g, a, half, c]
        return np.ascontiguousarray(pairs), f"{old.label}{' padded' if k4 != k else ''} in channel pairs"
    return laid_out(buffers, paired, (w.buf, w.offset, rows, k, k4), lay_out)


def _conv_panel(c: Conv, buffers: list[Buffer]) -> int:
    """The values a row of a convolution's panel holds, or 0 where it takes none: the channels of a 1x1
    convolution, contiguous; or a whole window (im2col)."""
    x, w, (kh, kw) = c.x, c.w, c.win.kernel
    if not channels_innermost(c) or c.group != 1 or not dot_operands(buffers[x.buf].dtype, buffers[w.buf].dtype) \
            or w.strides[1] != 1:
        return 0
    if (kh, kw) == (1, 1):
        return x.shape[1] if x.shape[1] % 4 == 0 and x.strides[1] == 1 and w.strides[0] == x.shape[1] and \
            buffers[w.buf].kind == "const" and not any(c.win.pads_begin + c.win.pads_end) else 0
    cg, k = w.shape[1], w.size // w.shape[0]
    packed = w.same_layout(View(w.buf, w.offset, w.shape, (k, 1, kw * cg, cg)))  # [M, KH, KW, C] (pack_weights)
    k4 = -(-k // 4) * 4
    return k4 if packed and buffers[w.buf].kind == "const" and not c.ring else 0


def widen_inputs(prog: Program, rows: int) -> Program:
    """The 8-bit convolutions and matrix products that run as dot products (pack_weights' `dot_products`)
    and sum over a long run of inputs contiguous in memory (a 1x1 convolution's channels, a row of a)
    widen each register tile's `rows` input runs to 16-bit pairs in a scratch panel first, so that each
    value is widened once, not once per tile of output channels (CMSIS-NN's idea). So do the other
    convolutions, unless they run in place: each tile of output columns gathers its windows into the panel
    (im2col), their values in the weights' order, the weights padded to a multiple of 4 (a planar input, or few
    channels as in a first layer, would else be summed in short runs; int8 resnet8 on a Cortex-M4, where the
    dot path's runs are 48 values or more: 1.58 -> 1.55 estimated cycles per MAC). The panel, a tile's rows
    (`rows`, fewer for a narrower output) x K 16-bit values as int32 words, lives in the arena while the
    instruction runs, and only where it fits under the most bytes alive at one time without it: it costs no
    RAM. A 1x1 convolution running in place (convolve_in_place) drops its ring
    of output rows for it. The weights, constant, are laid out in channel pairs to match the panel's words
    (pair_weights)."""
    instrs, buffers, paired = list(prog.instrs), list(prog.buffers), {}
    live = alive(lifetimes(prog), len(instrs))
    peak = max(live, default=0)
    for j, g in enumerate(instrs):
        if isinstance(g, Conv):
            k = _conv_panel(g, buffers)
        elif isinstance(g, Gemm):
            k = g.a.shape[-1]
            k *= gemm_dot_products(g, buffers[g.a.buf].dtype, buffers[g.b.buf].dtype) and k % 4 == 0 and \
                buffers[g.b.buf].kind == "const" and g.b.strides[-1] == k and not any(g.b.strides[:-2])
        else:
            continue
        # a 1x1 convolution in place needs no ring with a panel: a tile's inputs are in the panel before its
        # outputs overwrite them
        ring = slot(buffers[g.ring.buf].nbytes) if isinstance(g, Conv) and g.ring else 0
        tile = min(rows, g.out.shape[3] if isinstance(g, Conv) else g.out.shape[-2])  # a tile's rows, at most
        size = slot(tile * k * 2)
        if g.panel or k < PANEL_MIN_K or live[j] - ring + size > peak:
            continue
        live[j] += size - ring
        panel = Buffer(len(buffers), "arena", tile * k // 2, f"{g.node} widened inputs", dtype=np.dtype(np.int32))
        buffers.append(panel)
        more = {"ring": None} if ring else {}
        if isinstance(g, Conv):  # a channel pair every 2 k values
            pairs = pair_weights(buffers, paired, g.w, g.w.shape[0], g.w.size // g.w.shape[0], k)
            more["w"] = View(pairs, 0, g.w.shape, (k,) + g.w.strides[1:])
        else:
            more["b"] = View(pair_weights(buffers, paired, g.b, g.b.shape[-1], k, k), 0, g.b.shape, g.b.strides)
        instrs[j] = replace(g, panel=View.of(panel.id, (tile, k // 2)), **more)
    return replace(prog, buffers=tuple(buffers), instrs=tuple(instrs))


# the pipeline's first passes: a patch plan indexes their program
FUSING = (drop_empty, read_where_stored, round_in_writers, fuse_maps, fuse_epilogues)


def run_in_patches(prog: Program, plan: PatchPlan) -> Program:
    """The plan's span run tile by tile (instr/patches.py); the planner gives only spans that qualify."""
    patched = patch(prog, plan)
    assert patched is not None, plan
    return patched


def after_fusing(dot_products: bool = False, panel_rows: int = 0, patches: PatchPlan | None = None,
                 vector_rows: int = 0, signed_dots: bool = False, wide_weights: bool = False,
                 column_blocks: bool = False, chunk_columns: int = 16, nibbles: bool = False) -> tuple:
    """The passes after FUSING, in order; `dot_products` as pack_weights takes it, and with it `panel_rows` (a
    register tile's rows) as widen_inputs does; `patches`, a span to run in tiles; `vector_rows`, on a target with
    Tiles.vector_dot, its tile's rows, and `signed_dots` (Tiles.signed_dots): rebase_inputs, pack_weights'
    `vector_dot`, gather_windows, with `column_blocks` (Tiles.column_blocks) block_weights, and with `wide_weights`
    (Tiles.wide_weights) widen_weights; then, unless `chunk_columns` is 0 (--unpacked-weights), narrow_gemms and
    narrow_convs, chunks of `chunk_columns` output channels of weights at most unpacked at a time
    (Tiles.chunk_columns, instr/narrow_weights.py); last, with `nibbles`
    (--nibble-weights), unpack_nibbles (instr/nibbles.py)."""
    widen = (partial(widen_inputs, rows=panel_rows),) if dot_products and panel_rows else ()
    tiled = (partial(run_in_patches, plan=patches),) if patches else ()
    vector = bool(vector_rows)
    return tiled + (regroup_pixels, schedule, forward_copies, elide_copies, reuse_dying_inputs, convolve_in_place,
                    pointwise_as_gemm) + ((partial(rebase_inputs, signed=signed_dots),) if vector else ()) + (
        partial(pack_weights, dot_products=dot_products, vector_dot=vector, signed=signed_dots),
        copy_run_time_operands) + widen + ((partial(gather_windows, rows=vector_rows, signed=signed_dots),)
                                           if vector else ()) + (
        (block_weights,) if vector and column_blocks else ()) + (
        (partial(widen_weights, signed=signed_dots),) if vector and wide_weights else ()) + ((
            partial(narrow_gemms, columns=chunk_columns, dots=dot_products),
            partial(narrow_convs, columns=chunk_columns)) if chunk_columns else ()) + (
        (unpack_nibbles,) if nibbles else ())


def pipeline(dot_products: bool = False, panel_rows: int = 0, patches: PatchPlan | None = None,
             vector_rows: int = 0, signed_dots: bool = False, wide_weights: bool = False) -> tuple:
    """Every pass in order (after_fusing's arguments)."""
    return FUSING + after_fusing(dot_products, panel_rows, patches, vector_rows, signed_dots, wide_weights)


PIPELINE = pipeline()
