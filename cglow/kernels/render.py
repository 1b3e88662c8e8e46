"""Render each primitive into one static C function from its template.

All index arithmetic happens here and reaches the templates as expressions over loop variables
with integer-literal strides; the templates hold loops only.
"""
from __future__ import annotations

import numpy as np

from ..instr.passes import channels_contiguous, dot_operands, gemm_dot_products, taps_contiguous
from ..instr.ir import (Conv, Epilogue, channels_innermost, Gather, Gemm, Instr, Map, Pool, Reduce, View, contiguous_strides,
                        substitute)
from ..c_text import c_highest, c_literal, c_lowest, c_type
from ..tiles import TILES, Tiles
from .arm_steps import dot_step, float_loop, pair_step
from .kernel import (TILE_LOOP, Kernel, accumulator, collapsed, epilogue_at, from_template, index, join, linear,
                     memory_order, minus, oriented, starting, steps)


def _map(fn: str, m: Map, dtypes) -> Kernel:
    perm = memory_order(m.out)
    loops, (out, *ins) = collapsed(tuple(v.permute(perm) for v in (m.out,) + m.ins), m.out.permute(perm).shape,
                                   slice(None), "i")
    variables = [v for v, _ in loops]
    expr = substitute(m.expr, {str(i): f"x{i}[{index(v, variables)}]" for i, v in enumerate(ins)})
    names = ["y"] + [f"x{i}" for i in range(len(ins))]
    return from_template(
        "map.c.j2", fn, m, names, dtypes, loops=loops,
        out=index(out, variables), expr=expr)


def _reduce(fn: str, r: Reduce, dtypes) -> Kernel:
    rank = len(r.out.shape)
    full = r.ins[0].shape
    outer, (out, *ins_o) = collapsed((View(r.out.buf, 0, full, r.out.strides + (0,) * (len(full) - rank)),)
                                     + r.ins, full, slice(0, rank), "o")
    inner, ins_i = collapsed(r.ins, full, slice(rank, None), "r")
    ov, iv = [v for v, _ in outer], [v for v, _ in inner]
    terms = {}
    for i, (a, b) in enumerate(zip(ins_o, ins_i)):
        terms[str(i)] = f"x{i}[{join(index(a, ov), index(b, iv))}]"
    pre = substitute(r.pre, terms)
    acc = accumulator(dtypes[r.ins[0].buf], dtypes[r.out.buf]) if r.kind == "sum" else dtypes[r.out.buf]
    init = {"sum": c_literal(0, acc), "prod": c_literal(1, acc), "max": c_lowest(acc), "min": c_highest(acc)}
    combine = {"max": f"acc = ({pre} > acc) ? {pre} : acc", "min": f"acc = ({pre} < acc) ? {pre} : acc",
               "sum": f"acc += {pre}", "prod": f"acc *= {pre}"}
    names = ["y"] + [f"x{i}" for i in range(len(r.ins))]
    return from_template(
        "reduce.c.j2", fn, r, names, dtypes, outer=outer, inner=inner, out=index(out, ov), acc_t=c_type(acc),
        init=init[r.kind], combine=combine[r.kind], post=substitute(r.post, {"acc": "acc"}))


def _arg_reduce(fn: str, r: Reduce, dtypes) -> Kernel:
    """argmax / argmin over the one reduced dim, which is kept whole (never collapsed away)."""
    rank = len(r.out.shape)
    full = r.ins[0].shape
    outer, (out, *ins_o) = collapsed((View(r.out.buf, 0, full, r.out.strides + (0,)),) + r.ins, full,
                                     slice(0, rank), "o")
    ov = [v for v, _ in outer]
    at = {str(i): f"x{i}[{join(index(a, ov), linear([('r', v.strides[rank])]))}]"
          for i, (a, v) in enumerate(zip(ins_o, r.ins))}
    first = {str(i): f"x{i}[{index(a, ov)}]" for i, a in enumerate(ins_o)}
    better = {"argmax": ">", "argmin": "<"}[r.kind] + ("=" if r.last else "")
    return from_template(
        "argreduce.c.j2", fn, r, ["y"] + [f"x{i}" for i in range(len(r.ins))], dtypes, outer=outer,
        out=index(out, ov), value_t=c_type(dtypes[r.ins[0].buf]), first=substitute(r.pre, first),
        value=substitute(r.pre, at), better=better, length=full[rank])


def _gather(fn: str, g: Gather, dtypes) -> Kernel:
    loops, (out, data, idx) = collapsed((g.out, g.data, g.index), g.out.shape, slice(None), "i")
    variables = [v for v, _ in loops]
    return from_template(
        "gather.c.j2", fn, g, ["y", "x", "index"], dtypes, loops=loops, out=index(out, variables),
        data=join(index(data, variables), linear([("j", g.axis_stride)])), idx=index(idx, variables),
        length=g.axis_len)


# A Gemm whose b is larger than this and than a loops over b's column panels outermost: each panel comes
# from memory once and serves every row tile while in cache. Measured at gcc -O3 on AVX-512 with b out of
# cache: 49 x 320 x 1280 (MobileNetV2's head) 421 -> 314 us, 49 x 960 x 320 240 -> 218 us; no change
# with b of 600 KB or less (49 x 160 x 960, the transformer's 64 x 128 x 512).
B_OUTERMOST_BYTES = 1 << 20


def _gemm(fn: str, g: Gemm, dtypes, tiles: Tiles) -> Kernel:
    acc_t = accumulator(dtypes[g.a.buf], dtypes[g.out.buf])
    is_float = acc_t == np.float32
    if acc_t == np.int32:
        tiles = tiles.for_integer.for_panel if g.panel else tiles.for_integer
    else:
        tiles = oriented(tiles, g.out.shape[-2], g.out.shape[-1])
    tile_m, tile_n = tiles.rows, tiles.columns
    nb = len(g.out.shape) - 2
    views = (g.out, g.a, g.b) + g.epi.ins
    loops, batched = collapsed(views, g.out.shape, slice(0, nb), "t")
    bv = [v for v, _ in loops]
    m, n = g.out.shape[-2:]
    cols = "(n0 + j)"

    def m_at(i: int) -> str:
        return f"(m0 + {i})" if i else "m0"

    def idx(full: View, batch: View, last2) -> str:
        tail = View(full.buf, 0, full.shape[-2:], full.strides[-2:])
        return join(index(batch, bv), index(tail, last2))

    def column_runs(mr: int):
        """Tiles of mr rows and tiles.columns columns; with scalar accumulators, a tile of fewer rows (a
        matrix-vector product) takes proportionally more columns, up to the tile's number of registers."""
        nr = min(tile_n * max(1, tile_m // mr), -(-n // tile_n) * tile_n) if tiles.scalar else tile_n
        return steps(n, nr)

    row_runs = steps(m, tile_m)

    def loop(var: str, lo: int, hi: int, step: int, **more) -> dict:
        return dict(var=var, lo=lo, hi=hi, step=step, **more)
    a_step, b_step = g.a.strides[-2], g.b.strides[-1]
    operands = _dot_operands(dtypes[g.a.buf], dtypes[g.b.buf], g.zeros[0])

    def a_rows(i: int = 0) -> str:
        """The first row of a's tile, or its row i."""
        return f"a + {join(index(batched[1], bv), linear([('m0', a_step)], i * a_step))}"
    b_columns = f"b + {join(index(batched[2], bv), linear([('n0', b_step)]))}"  # the first of b's tile
    panel = g.panel and _panel(operands, g.a.shape[-1], b_columns, b_step,
                               [dict(nr=nr) for mr in {r[2] for r in row_runs} for _, _, nr in column_runs(mr)], a_rows)
    if not tiles.scalar and not panel and n > m and g.a.shape[-1] * n * dtypes[g.b.buf].itemsize > B_OUTERMOST_BYTES:
        nests = [loop("n0", n_lo, n_hi, nr, inner=[loop("m0", lo, hi, mr, tile=dict(mr=mr, nr=nr))
                                                for lo, hi, mr in row_runs], widen=None)
                 for n_lo, n_hi, nr in column_runs(tile_m)]
    else:
        nests = [loop("m0", lo, hi, mr, inner=[loop("n0", n_lo, n_hi, nr, tile=dict(mr=mr, nr=nr))
                                                for n_lo, n_hi, nr in column_runs(mr)],
                      widen=panel and panel["widen"](mr))
                 for lo, hi, mr in row_runs]

    epi = starting(g.epi, is_float, tiles.scalar)

    def inputs(i: int) -> dict[str, str]:
        """The epilogue's inputs at row i of a tile, column j."""
        return {str(e): f"e{e}[{idx(v, batched[3 + e], (m_at(i), cols))}]" for e, v in enumerate(epi.ins)}

    def epilogue(i: int) -> str:
        return substitute(epi.expr, {"acc": f"acc[{i}][j]", **inputs(i)})

    def init(i: int) -> str:
        """Row i's first value of its accumulators (Epilogue.init: a bias per column), else zero."""
        return c_literal(0, acc_t) if epi.init is None else inputs(i)[str(epi.init)]
    names = ["y", "a", "b"] + [f"e{i}" for i in range(len(g.epi.ins))] + (["panel"] if g.panel else [])
    right = f"row[{linear([('j', g.b.strides[-1])])}]"
    if g.zeros[1]:
        right = f"({right}{minus(g.zeros[1])})"

    def mac(i: int) -> str:
        return f"acc[{i}][j] = cglow_{tiles.float_mac}(left, {right}, acc[{i}][j]);" if is_float else \
            f"acc[{i}][j] += left * {right};"

    def a_at(i: int) -> str:
        return idx(g.a, batched[1], (m_at(i), "k"))
    dot = tiles.dual_mac and gemm_dot_products(g, dtypes[g.a.buf], dtypes[g.b.buf])

    def dot_products(mr: int) -> dict:
        return dict(operands, length=g.a.shape[-1], left=a_rows(), right=b_columns,
                    lefts=[(i, i * a_step) for i in range(mr)],
                    asm=_dot_asm(operands, [(i, i * a_step) for i in range(mr)]))
    return from_template(
        "gemm.c.j2", fn, g, names, dtypes, scratch=1 if g.panel else 0, loops=loops, nests=nests,
        K=g.a.shape[-1], panel=panel, y_t=c_type(dtypes[g.out.buf]),
        acc_t=c_type(acc_t), init=init, mac=mac, b_t=c_type(dtypes[g.b.buf]),
        a_minus=minus(g.zeros[0]), a=a_at, dot_products=dot and dot_products,
        float_asm=tiles.float_mac == "mul_add" and is_float and not g.zeros[1] and g.a.strides[-1] == 1 and (
            lambda mr, nr: float_loop(mr, nr, [(i, i * a_step * 4) for i in range(mr)], g.a.shape[-1], 4,
                                      g.b.strides[-2] * 4, g.b.strides[-1] * 4)),
        rights=lambda nr: [(j, j * b_step) for j in range(nr)], b_row=idx(g.b, batched[2], ("k", "n0")),
        tile_loop=TILE_LOOP,
        out=lambda i: idx(g.out, batched[0], (m_at(i), cols)), epilogue=epilogue)


def _window_args(win) -> dict:
    return dict(KH=win.kernel[0], KW=win.kernel[1], OH=win.out[0], OW=win.out[1],
                ih=linear([("oh", win.strides[0]), ("kh", win.dilations[0])], -win.pads_begin[0]))


def _columns(win, width: int) -> tuple[str, str]:
    """For tap kw, the output columns whose input column ow * SW + kw * DW - PL lies in [0, width): lo..hi."""
    s, d, p = win.strides[1], win.dilations[1], win.pads_begin[1]
    first = linear([("kw", -d)], p)           # lo = ceil(first / s) when first > 0, else 0
    last = linear([("kw", -d)], width - 1 + p)  # hi = last / s + 1 when last >= 0, capped at OW
    lo = f"({first} > 0 ? ({first} + {s - 1}) / {s} : 0)" if s > 1 else f"({first} > 0 ? {first} : 0)"
    reach = f"({last}) / {s} + 1" if s > 1 else f"{last} + 1"
    hi = f"({last} < 0 ? 0 : {reach} < {win.out[1]} ? {reach} : {win.out[1]})"
    return lo, hi


def _dot_operands(left: np.dtype, right: np.dtype, zero: int) -> dict:
    """What the dot macro (kernels/dot.j2) needs to know of its operands' types and the left one's zero point."""
    flip = np.dtype(left) == np.uint8
    return dict(left_t=c_type(left), right_t=c_type(right), flip=flip, offset=c_literal(128 * flip - zero, np.int32),
                minus=minus(zero), offset_value=128 * flip - zero)


def _shifted(pairs: list[tuple[int, int]], at: int) -> list[tuple[int, int]]:
    """(index, byte offset) pairs, each offset `at` bytes further."""
    return [(i, offset + at) for i, offset in pairs]


def _dot_asm(operands: dict, lefts: list[tuple[int, int]]):
    """The dot macro's hand-scheduled step (kernels/arm_steps.py) for a tile of `lefts` and the macro's `rights`
    ((index, byte offset) pairs), `at` bytes past the pointers."""
    return lambda rights, at: dot_step(_shifted(lefts, at), _shifted(rights, at), operands["offset_value"],
                                       operands["flip"])


def _panel(operands: dict, length: int, right: str, right_step: int, column_tiles, source) -> dict:
    """What the widen and pair_dot macros (kernels/dot.j2) need for a kernel with a panel of widened inputs:
    `length` values per row (length / 2 words), row j read from source(j); the weights in channel pairs
    (instr/passes.py pair_weights) from `right`, a pair every 2 * right_step bytes, for each tile of
    `column_tiles` its pairs as (index, byte offset, channels) triples."""
    words = length // 2
    return dict(widen=lambda mr: dict(operands, rows=[(j, source(j)) for j in range(mr)], length=length),
                dot=lambda mr: dict(operands, lefts=[(j, j * words) for j in range(mr)], words=words, right=right,
                                    asm=lambda pairs, at: pair_step([(j, (j * words + at) * 4) for j in range(mr)],
                                                                    [(q, b + at * 4, n) for q, b, n in pairs])),
                pairs={t["nr"]: [(q, 2 * q * right_step, min(2, t["nr"] - 2 * q)) for q in range(-(-t["nr"] // 2))]
                       for t in column_tiles})


TILE_OC, TILE_OW = 4, 16  # a convolution's register tile: output channels x output columns


def _conv(fn: str, c: Conv, dtypes, tiles: Tiles) -> Kernel:
    """Channels innermost: register tiles vectorized over output channels (in place through the ring).
    Otherwise, in place: row by row through the ring; else register tiles vectorized over columns."""
    if channels_innermost(c):
        return _conv_nhwc(fn, c, dtypes, tiles)
    return _conv_rows(fn, c, dtypes) if c.ring else _conv_tiles(fn, c, dtypes)


def _column_runs(win, width: int, mr: int, sliding: int | None = None) -> list[dict]:
    """The output columns in tiles of mr (the last one shorter), grouped into runs of tiles of one width
    that read inside the image for every tap; a tile that would read outside it is a run of its own, whose
    reads outside are left out. Each run lists what its tiles read: with `sliding` (a depthwise kernel; the
    input's column stride), its input columns (a pointer offset from the tile's first one) with the (output
    column, tap) pairs that read each; else its taps (None: a loop over all of them) with the output columns
    that read inside for each."""
    s, d, p, out, kw = win.strides[1], win.dilations[1], win.pads_begin[1], win.out[1], win.kernel[1]
    first_inside = -(-p // s)                           # ow * s - p >= 0
    last_inside = (width - 1 + p - (kw - 1) * d) // s  # ow * s + (KW - 1) * d - p < width
    runs: list[dict] = []
    for lo in range(0, out, mr):
        hi = min(lo + mr, out)
        checked = lo < first_inside or hi - 1 > last_inside
        if runs and runs[-1]["mr"] == hi - lo and not runs[-1]["checked"] and not checked:
            runs[-1]["hi"] = hi
        else:
            runs.append(dict(lo=lo, hi=hi, mr=hi - lo, checked=checked))

    def inside(run: dict, t: int) -> bool:
        """Whether the input column t of a run's tile (counted from the tile's first one) is in the image."""
        return not run["checked"] or 0 <= run["lo"] * s + t - p < width

    for run in runs:
        tile = range(run["mr"])
        if sliding is not None:
            pairs = [[(j, k) for j in tile for k in range(kw) if j * s + k * d == t]
                     for t in range((run["mr"] - 1) * s + (kw - 1) * d + 1)]
            run["columns"] = [(linear([("ow0", s * sliding)], (t - p) * sliding), at)
                              for t, at in enumerate(pairs) if at and inside(run, t)]
        elif run["checked"]:
            taps = [(k, [j for j in tile if inside(run, j * s + k * d)]) for k in range(kw)]
            run["taps"] = [(k, columns) for k, columns in taps if columns]
        else:
            run["taps"] = [(None, list(tile))]
    return runs


def _im2col(c: Conv, runs: list[dict], x_dtype: np.dtype) -> dict:
    """What the im2col macro (kernels/conv_nhwc.c.j2) needs to gather a tile's windows into its panel rows, each
    row's K values in the weights' order [KH, KW, C] (padded to K4, panel.shape[1] * 2), staged as input bytes
    in the upper half of the row's words (widened in place from there, runtime_c/widen4.c): per run, for each
    row j of a tile and tap kw, the offset of its channels from the kernel row's input pointer, None where they
    are padding; padding reads as the zero point, which widens to 0."""
    _, cg, _, kw = c.w.shape
    xs, (sw, dw), pw = c.x.strides, (c.win.strides[1], c.win.dilations[1]), c.win.pads_begin[1]
    k4 = c.panel.shape[1] * 2
    for r in runs:
        inside = {(j, k) for k, columns in r["taps"] for j in columns} if r["checked"] else None
        r["fill"] = [(j, [(k, j * 2 * k4 + k * cg,
                           None if inside is not None and (j, k) not in inside else (j * sw + k * dw - pw) * xs[3])
                          for k in range(kw)]) for j in range(r["mr"])]
    zero = c_literal(c.x_zero, x_dtype)

    def read(source: int | None, channel: int | str) -> str:
        """Channel `channel` (a number, or the loop variable) of a tap's input, at source from the pointer."""
        if source is None:
            return zero
        return f"in[{linear([(channel, xs[1])], source) if isinstance(channel, str) else source + channel * xs[1]}]"
    return dict(row=2 * k4, K4=k4, K=cg * c.win.kernel[0] * kw, L=cg * kw, C=cg, zero=zero, read=read,
                x_row=linear([("n", xs[0]), ("ih", xs[2]), ("ow0", sw * xs[3])]))


def _conv_nhwc(fn: str, c: Conv, dtypes, tiles: Tiles) -> Kernel:
    """Register tiles of tiles.rows output columns x tiles.columns output channels."""
    n, _, h, w = c.x.shape
    m, cg = c.w.shape[:2]
    mg = m // c.group
    depthwise = cg == 1 and mg == 1
    scalar = tiles.scalar  # the target's, whichever tile this kernel takes
    acc_t = accumulator(dtypes[c.x.buf], dtypes[c.out.buf])
    is_float = acc_t == np.float32
    if acc_t == np.int32:
        tiles = tiles.for_integer.for_panel if c.panel else tiles.for_integer
    xs, ws = c.x.strides, c.w.strides
    operands = dot_operands(dtypes[c.x.buf], dtypes[c.w.buf]) and \
        _dot_operands(dtypes[c.x.buf], dtypes[c.w.buf], c.x_zero)
    # depthwise on a dual-MAC target: four channels a word, one 16-bit multiply-accumulate each (mac2.c)
    lanes = operands if tiles.dual_mac and depthwise and xs[1] == ws[0] == 1 else None
    tiles = tiles.for_depthwise if depthwise else oriented(tiles, c.win.out[1], m) if c.group == 1 else tiles
    nr = tiles.columns if c.group == 1 or depthwise else \
        max(t for t in (16, 8, 4, 2, 1) if mg % t == 0 and t <= tiles.columns)
    oc_tiles = [dict(lo=lo, hi=hi, nr=t) for lo, hi, t in steps(m, nr)]
    # a grouped tile's first input channel, unless no input channel is read (one, or a broadcast view)
    c0 = None if c.group == 1 or depthwise or c.x.strides[1] == 0 or c.x.shape[1] == 1 else f"(oc0 / {mg}) * {cg}"
    channel = "c" if c0 is None else "(c0 + c)"

    def mac(value: str, j: int, kw: int = 0) -> str:
        weight = f"tap[{linear([('i', c.w.strides[0])], kw * c.w.strides[3])}]"
        if is_float:
            return f"acc[{j}][i] = cglow_{tiles.float_mac}({value}, {weight}, acc[{j}][i]);"
        return f"acc[{j}][i] += {value} * {weight};"

    def iw(j: int) -> str:
        s, d, p = c.win.strides[1], c.win.dilations[1], c.win.pads_begin[1]
        return linear([("ow0", s), ("kw", d)], j * s - p)

    oh_, ow_ = c.win.out
    delay = c.win.pads_begin[0] if c.ring else 0

    def out_vars(j: int, half: int | None = None) -> tuple[str, ...]:
        """The output's index variables of a tile's column j, channel i (of a depthwise tile's `half` of its
        lanes: half + 2 i)."""
        channel = "(oc0 + i)" if half is None else f"(oc0 + {linear([('i', 2)], half)})"
        return "n", channel, "oh", f"(ow0 + {j})" if j else "ow0"

    def store(j: int, half: int | None = None) -> str:
        step, at = (1, j * m) if c.ring else (c.out.strides[1], j * c.out.strides[3])
        if half is not None:  # channel half + 2 i
            step, at = 2 * step, at + half * step
        return f"out[{linear([('i', step)], at)}]"
    out_tile = f"ring + (oh % {delay + 1}) * {ow_ * m} + ow0 * {m} + oc0" if c.ring else \
        f"y + {index(c.out, ('n', 'oc0', 'oh', 'ow0'))}"

    epi = starting(c.epi, is_float, scalar)

    def epilogue(j: int, half: int | None = None) -> str:
        return epilogue_at(Epilogue(substitute(epi.expr, {"acc": f"acc[{j}][i]"}), epi.ins), out_vars(j, half))

    def init(j: int, half: int | None = None) -> str:
        """Row j's first value of its accumulators (Epilogue.init: a bias per channel), else zero."""
        return c_literal(0, acc_t) if epi.init is None else \
            epilogue_at(Epilogue("{%d}" % epi.init, epi.ins), out_vars(j, half))
    scratch = [name for name, v in (("ring", c.ring), ("panel", c.panel)) if v]
    names = ["y", "x", "w"] + [f"e{i}" for i in range(len(c.epi.ins))] + scratch
    runs = _column_runs(c.win, w, tiles.rows, c.x.strides[3] if depthwise else None)
    sh, sw = c.win.strides
    im2col = c.panel and c.win.kernel != (1, 1) and _im2col(c, runs, dtypes[c.x.buf])
    panel = c.panel and _panel(operands, c.panel.shape[1] * 2, "w + " + linear([("oc0", ws[0])]), ws[0], oc_tiles,
                               (lambda j: "stage" + (f" + {j * im2col['row']}" if j else "")) if im2col else
                               lambda j: "x + " + linear([("n", xs[0]), ("oh", sh * xs[2]), ("ow0", sw * xs[3])],
                                                         j * sw * xs[3]))
    dot = tiles.dual_mac and not depthwise and c.group == 1 and operands and channels_contiguous(c)
    if dot:
        s, d, p, kw_ = c.win.strides[1], c.win.dilations[1], c.win.pads_begin[1], c.win.kernel[1]
        x_row = linear([("n", xs[0]), ("ih", xs[2]), ("ow0", s * xs[3])], -p * xs[3])
        w_row = linear([("oc0", ws[0]), ("kh", ws[2])])
        taps_run = taps_contiguous(c)  # a kernel row's taps are one run
        for r in runs:
            r["dots"] = []
            for k, columns in r["taps"]:
                tap_x, tap_w = (linear([("kw", d * xs[3])]), linear([("kw", ws[3])])) if k is None else \
                    (str(k * d * xs[3]), str(k * ws[3]))
                whole = k is None and taps_run
                r["dots"].append(dict(
                    operands, kw_loop=k is None and not whole, length=cg * (kw_ if whole else 1),
                    left=f"x + {x_row if whole else join(x_row, tap_x)}",
                    right=f"w + {w_row if whole else join(w_row, tap_w)}",
                    lefts=[(j, j * s * xs[3]) for j in columns],
                    rights={t["nr"]: [(i, i * ws[0]) for i in range(t["nr"])] for t in oc_tiles},
                    asm=_dot_asm(operands, [(j, j * s * xs[3]) for j in columns])))
    reads_x = any(r.get("taps") or r.get("columns") for r in runs)  # not when every window is padding
    # a kernel row's taps and channels are one run in the input and in the weights: one loop over both
    merged = not depthwise and not dot and c.group == 1 and c.win.dilations[1] == 1 and xs[1] == 1 and \
        xs[3] == cg and ws[3] == cg * ws[1]
    row_bytes = ow_ * m * dtypes[c.out.buf].itemsize  # a ring row, copied out a word at a time where contiguous
    return from_template(
        "conv_nhwc.c.j2", fn, c, names, dtypes, scratch=len(scratch), N=n, OH=oh_, OW=ow_, M=m, CG=cg,
        KH=c.win.kernel[0], KW=c.win.kernel[1], H=h, DELAY=delay, ring=bool(c.ring), oc_tiles=oc_tiles,
        runs=runs, c0=c0, depthwise=depthwise, dot_products=dot, lanes=lanes, w_kw=ws[3], panel=panel, im2col=im2col,
        reads_iw=c.x.strides[3] != 0, reads_x=reads_x,
        acc_t=c_type(acc_t), init=init, mac=mac, tile_loop=TILE_LOOP,
        x_t=c_type(dtypes[c.x.buf]), w_t=c_type(dtypes[c.w.buf]), y_t=c_type(dtypes[c.out.buf]),
        x_minus=minus(c.x_zero),
        ih=linear([("oh", c.win.strides[0]), ("kh", c.win.dilations[0])], -c.win.pads_begin[0]), iw=iw,
        x_at=join(index(View(c.x.buf, 0, c.x.shape[:3], c.x.strides[:3]), ("n", channel, "ih")),
        linear([("iw", c.x.strides[3])])),
        x_row=linear([(v, st) for v, st, size in zip(("n", "oc0", "ih"), c.x.strides, c.x.shape) if size > 1]),
        x_i=linear([("i", c.x.strides[1])]), w_at=index(c.w, ("oc0", "c", "kh", "kw")),
        merged=merged and dict(K=c.win.kernel[1] * cg, w=linear([("oc0", ws[0]), ("kh", ws[2]), ("k", ws[1])]),
        x=lambda j: linear([("n", xs[0]), ("ih", xs[2]), ("ow0", sw * xs[3]), ("k", 1)],
        (j * sw - c.win.pads_begin[1]) * xs[3]),
        asm=lambda mr, nr, columns: tiles.float_mac == "mul_add" and is_float and float_loop(
            mr, nr, [(j, (j - columns[0]) * sw * xs[3] * 4) for j in columns], c.win.kernel[1] * cg, 4, ws[1] * 4,
            ws[0] * 4)),
        w_row=linear([("oc0", c.w.strides[0]), ("kh", c.w.strides[2])]), out_tile=out_tile, store=store,
        epilogue=epilogue, out_done=index(c.out, ("n", "oc", "done", "ow")),
        row_words=row_bytes // 4 if row_bytes % 4 == 0 and c.out.strides[1] == 1 and c.out.strides[3] == m
        else 0,
        row_start=linear([("n", c.out.strides[0]), ("done", c.out.strides[2])]))


def _conv_tiles(fn: str, c: Conv, dtypes) -> Kernel:
    n, _, h, w = c.x.shape
    m, cg = c.w.shape[:2]
    mg = m // c.group
    ocb = TILE_OC if mg % TILE_OC == 0 else 1  # a tile of output channels stays inside one group
    start = None if c.group == 1 or c.x.strides[1] == 0 or c.x.shape[1] == 1 else \
        linear([("oc0", cg)]) if mg == 1 else f"(oc0 / {mg}) * {cg}"
    channel = "c" if start is None else "(c0 + c)"
    ow = c.win.out[1]
    tiles = [dict(oc_lo=0, oc_hi=m, ocb=ocb, ow_lo=lo, ow_hi=hi, owb=owb) for lo, hi, owb in steps(ow, TILE_OW)]
    sw, xs = c.win.strides[1], c.x.strides[3]

    def column(at: str) -> str:
        return f"({at}) * {xs}" if xs != 1 else at

    row = index(c.x, ("n", channel, "ih"))
    out_vars = ("n", "(oc0 + i)", "oh", "(ow0 + j)")
    epi = epilogue_at(Epilogue(substitute(c.epi.folded().expr, {"acc": "acc[i][j]"}), c.epi.ins), out_vars)
    names = ["y", "x", "w"] + [f"e{i}" for i in range(len(c.epi.ins))]
    acc_t = accumulator(dtypes[c.x.buf], dtypes[c.out.buf])
    return from_template(
        "conv_tiled.c.j2", fn, c, names, dtypes, acc_t=c_type(acc_t), zero=c_literal(0, acc_t),
        load=lambda at: f"(x[{at}]{minus(c.x_zero)})" if c.x_zero else f"x[{at}]", N=n, CG=cg, H=h, W=w, SW=sw, c0=start, tiles=tiles,
        first=linear([("ow0", sw), ("kw", c.win.dilations[1])], -c.win.pads_begin[1]),
        x_at=join(row, column(linear([("first", 1), ("j", sw)]))), x_clamped=join(row, column("at")),
        w=index(c.w, ("(oc0 + i)", "c", "kh", "kw")), out=index(c.out, out_vars), epilogue=epi,
        **_window_args(c.win))


def _conv_rows(fn: str, c: Conv, dtypes) -> Kernel:
    """In place: each output row accumulated tap by tap in the ring, then copied over a dead input row."""
    n, _, h, w = c.x.shape
    m, cg = c.w.shape[:2]
    mg = m // c.group
    first = None if c.group == 1 else linear([("oc", cg)]) if mg == 1 else f"(oc / {mg}) * {cg}"
    channel = "c" if first is None else "(c0 + c)"
    names = ["y", "x", "w"] + [f"e{i}" for i in range(len(c.epi.ins))] + ["ring"]
    row_at = "ow"
    lo, hi = _columns(c.win, w)
    iw = linear([("ow", c.win.strides[1]), ("kw", c.win.dilations[1])], -c.win.pads_begin[1])
    out_vars = ("n", "oc", "oh", "ow")
    epi = epilogue_at(Epilogue(substitute(c.epi.folded().expr, {"acc": f"row[{row_at}]"}), c.epi.ins), out_vars)
    return from_template(
        "conv_in_place.c.j2", fn, c, names, dtypes, scratch=1, N=n, M=m, CG=cg, H=h, W=w, c0=first,
        x=join(index(c.x, ("n", channel, "ih")), f"({iw}) * {c.x.strides[3]}" if c.x.strides[3] != 1 else iw),
        w=index(c.w, ("oc", "c", "kh", "kw")), row_at=row_at,
        zero=c_literal(0, dtypes[c.out.buf]), lo=lo, hi=hi, epilogue=epi, DELAY=c.win.pads_begin[0],
        out_done=index(c.out, ("n", "oc", "done", "ow")), **_window_args(c.win))


def _pool(fn: str, p: Pool, dtypes) -> Kernel:
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
    value_t = dtypes[p.x.buf]
    x = f"x[{index(p.x, ['n', 'c'] + [t['i'] for t in taps])}]"
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


RENDER = {Map: _map, Gemm: _gemm, Conv: _conv, Pool: _pool, Gather: _gather}
PRIMITIVE_NAMES = {Map: "map", Reduce: "reduce", Gemm: "gemm", Conv: "conv", Pool: "pool", Gather: "gather"}


def render(fn: str, instr: Instr, dtypes: dict[int, np.dtype], tiles: Tiles = TILES["generic"]) -> Kernel:
    """dtypes: the element type of every buffer, by id; tiles: the target's register tile."""
    if isinstance(instr, Reduce):
        return (_arg_reduce if instr.kind.startswith("arg") else _reduce)(fn, instr, dtypes)
    if isinstance(instr, (Conv, Gemm)):
        return RENDER[type(instr)](fn, instr, dtypes, tiles)
    return RENDER[type(instr)](fn, instr, dtypes)
