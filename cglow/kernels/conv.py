"""Convolutions: channels last, an implicit GEMM in register tiles of output columns x output channels
(conv_nhwc.c.j2: direct sums, dot products, a panel of widened inputs filled by im2col, depthwise sliding
windows, in place through a ring of output rows); channels first, register tiles vectorized over output columns
(conv_tiled.c.j2), or row by row in place through the ring (conv_in_place.c.j2)."""
from __future__ import annotations

import numpy as np

from ..c_text import c_literal, c_type
from ..instr.expr import Input
from ..instr.ir import Conv, Epilogue, View, accumulator, channels_innermost
from ..instr.ir import dot_operands
from ..instr.passes import channels_contiguous, taps_contiguous
from ..instr.narrow_weights import DECODE
from ..instr.stored_floats import loaded
from ..instr.vector_dots import plain_dots
from ..tiles import Tiles
from .arm_steps import float_loop
from .gemm import dot_asm, dot_macro_operands, panel_macros, vector_reads
from .kernel import (TILE_LOOP, Kernel, epilogue_at, from_template, index, join, linear, minus, oriented,
                     starting, steps)


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


TILE_OC, TILE_OW = 4, 16  # a convolution's register tile: output channels x output columns


def conv_kernel(fn: str, c: Conv, dtypes, tiles: Tiles) -> Kernel:
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
            read = [t for t, at in enumerate(pairs) if at and inside(run, t)]
            run["columns"] = [(linear([("ow0", s * sliding)], (t - p) * sliding), pairs[t]) for t in read]
            run["offsets"] = [(t - p) * sliding for t in read]  # each column's, from the tile's first
            run["span"] = None  # _widened_spans
        elif run["checked"]:
            taps = [(k, [j for j in tile if inside(run, j * s + k * d)]) for k in range(kw)]
            run["taps"] = [(k, columns) for k, columns in taps if columns]
        else:
            run["taps"] = [(None, list(tile))]
    return runs


def _im2col(c: Conv, runs: list[dict], x_dtype: np.dtype, widened: bool) -> dict:
    """What the im2col macro (kernels/conv_panel.j2 gather) needs to gather a tile's windows into its panel rows,
    each row's K values in the weights' order [KH, KW, C]: `widened` (Arm's dual multiply-accumulates), padded to
    K4 (panel.shape[1] * 2) and staged as input bytes in the upper half of the row's words (widened in place from
    there, runtime_c/widen4.c); else (Tiles.vector_dot) as bytes, the row K of them. Per run, for each row j of a
    tile and tap kw, the offset of its channels from the kernel row's input pointer, None where they are padding;
    padding reads as the zero point (which widens to 0; as the dot products read it, instr/vector_dots.py dot_zero,
    it is 0)."""
    _, cg, _, kw = c.w.shape
    xs, (sw, dw), pw = c.x.strides, (c.win.strides[1], c.win.dilations[1]), c.win.pads_begin[1]
    k4 = c.panel.shape[1] * 2 if widened else c.panel.shape[1]
    row = 2 * k4 if widened else k4
    for r in runs:
        inside = {(j, k) for k, columns in r["taps"] for j in columns} if r["checked"] else None
        r["fill"] = [(j, [(k, j * row + k * cg,
                           None if inside is not None and (j, k) not in inside else (j * sw + k * dw - pw) * xs[3])
                          for k in range(kw)]) for j in range(r["mr"])]
    zero = c_literal(c.x_zero if c.x_pad is None else c.x_pad, x_dtype)

    def read(source: int | None, channel: int | str) -> str:
        """Channel `channel` (a number, or the loop variable) of a tap's input, at source from the pointer."""
        if source is None:
            return zero
        return f"in[{linear([(channel, xs[1])], source) if isinstance(channel, str) else source + channel * xs[1]}]"
    return dict(row=row, K4=k4, stage=k4 if widened else 0, K=cg * c.win.kernel[0] * kw, L=cg * kw, C=cg, zero=zero,
                read=read,
                x_row=linear([("n", xs[0]), ("ih", xs[2]), ("ow0", sw * xs[3])]))


def _conv_nhwc(fn: str, c: Conv, dtypes, tiles: Tiles) -> Kernel:
    """Channels last, an implicit GEMM: register tiles of tiles.rows output columns x tiles.columns output channels
    (see _nhwc_tiles) over the batches and output rows; in place through a ring of output rows with c.ring; over a
    panel of widened inputs with c.panel (gathered by im2col unless the kernel is 1 x 1); as dot products for 8-bit
    values on a target with dual multiply-accumulates, or in C (Tiles.vector_dot) (_dot_runs)."""
    n, _, h, w = c.x.shape
    m, cg = c.w.shape[:2]
    depthwise = _depthwise(c)
    acc_t = accumulator(dtypes[c.x.buf], dtypes[c.out.buf])
    is_float = acc_t == np.float32
    epi = starting(c.epi, is_float, tiles.scalar)  # the target's, whichever tile this kernel takes
    x_t, w_t = dtypes[c.x.buf], dtypes[c.w.buf]
    vector = bool(tiles.vector_dot) and not depthwise and c.group == 1 and \
        plain_dots(x_t, w_t, c.x_zero, tiles.signed_dots) and channels_contiguous(c)
    operands = dot_operands(x_t, w_t) and dict(dot_macro_operands(x_t, w_t, c.x_zero), vector=vector,
                                               **vector_reads(x_t, tiles.signed_dots))
    tiles, lanes = (tiles.vector_dot, None) if vector else _nhwc_tiles(c, acc_t, tiles, operands)
    oc_tiles = _oc_tiles(c, tiles)
    runs = _column_runs(c.win, w, tiles.rows, c.x.strides[3] if depthwise else None)
    if depthwise and acc_t == np.int32 and not lanes and not tiles.scalar:
        _widened_spans(c, runs, oc_tiles)
    im2col = c.panel and c.win.kernel != (1, 1) and _im2col(c, runs, dtypes[c.x.buf], widened=not vector)
    panel = c.panel and (_byte_panel(c, operands, oc_tiles) if vector else _nhwc_panel(c, operands, oc_tiles, im2col))
    dot = vector or tiles.dual_mac and not depthwise and c.group == 1 and operands and channels_contiguous(c)
    if dot:
        _dot_runs(c, runs, operands, oc_tiles)
    reads_x = any(r.get("taps") or r.get("columns") for r in runs)  # not when every window is padding
    scratch = [name for name, v in (("ring", c.ring), ("panel", c.panel)) if v]
    names = ["y", "x", "w"] + [f"e{i}" for i in range(len(c.epi.ins))] + scratch
    return from_template(
        "conv_nhwc.c.j2", fn, c, names, dtypes, scratch=len(scratch), N=n, OH=c.win.out[0], OW=c.win.out[1], M=m,
        CG=cg, KH=c.win.kernel[0], KW=c.win.kernel[1], H=h, ring=bool(c.ring), oc_tiles=oc_tiles, runs=runs,
        depthwise=depthwise, dot_products=dot, lanes=lanes, w_kw=c.w.strides[3], panel=panel, im2col=im2col,
        reads_iw=c.x.strides[3] != 0, reads_x=reads_x, acc_t=c_type(acc_t), tile_loop=TILE_LOOP,
        x_t=c_type(dtypes[c.x.buf]), w_t=c_type(dtypes[c.w.buf]), y_t=c_type(dtypes[c.out.buf]),
        x_minus=minus(c.x_zero), x_load=lambda ref: loaded(x_t, ref, minus(c.x_zero)), **_nhwc_reads(c),
        **_nhwc_sums(c, tiles, is_float, dot, x_t, w_t),
        **_nhwc_outputs(c, dtypes, acc_t, epi))


def _depthwise(c: Conv) -> bool:
    """Whether each group of the convolution is one input channel and one output channel."""
    m, cg = c.w.shape[:2]
    return cg == 1 and m // c.group == 1


def _nhwc_tiles(c: Conv, acc_t: np.dtype, tiles: Tiles, operands) -> tuple[Tiles, dict | None]:
    """The register tile of output columns x output channels: the target's integer one for int32 accumulators (its
    variant for a panel of widened inputs with c.panel); then its depthwise one, or for a dense convolution the tile
    turned on its side where that suits the output (kernel.py oriented). And the dot macro's `operands` where a
    depthwise tile sums four channels a word, one 16-bit multiply-accumulate each (the integer tile's dual
    multiply-accumulates, runtime_c/mac2.c), else nothing."""
    if acc_t == np.int32:
        tiles = tiles.for_integer.for_panel if c.panel else tiles.for_integer
    depthwise = _depthwise(c)
    lanes = operands if tiles.dual_mac and depthwise and c.x.strides[1] == c.w.strides[0] == 1 else None
    tiles = tiles.for_depthwise if depthwise else oriented(tiles, c.win.out[1], c.w.shape[0]) if c.group == 1 \
        else tiles
    return tiles, lanes


def _oc_tiles(c: Conv, tiles: Tiles) -> list[dict]:
    """The output channels in tiles of tiles.columns (the last one shorter); a grouped convolution's tiles, of the
    most channels of 16, 8, 4, 2, 1 that divide a group's and fit tiles.columns, stay inside one group."""
    m = c.w.shape[0]
    mg = m // c.group
    nr = tiles.columns if c.group == 1 or _depthwise(c) else \
        max(t for t in (16, 8, 4, 2, 1) if mg % t == 0 and t <= tiles.columns)
    return [dict(lo=lo, hi=hi, nr=t) for lo, hi, t in steps(m, nr)]


def _nhwc_panel(c: Conv, operands: dict, oc_tiles: list[dict], im2col: dict | None) -> dict:
    """What the panel macros need (gemm.py panel_macros): a tile's rows of K values gathered by `im2col` into its
    stage, or for a 1 x 1 kernel read from the input's columns; the weights from the tile's first output channel."""
    xs, ws = c.x.strides, c.w.strides
    sh, sw = c.win.strides
    source = (lambda j: "stage" + (f" + {j * im2col['row']}" if j else "")) if im2col else \
        lambda j: "x + " + linear([("n", xs[0]), ("oh", sh * xs[2]), ("ow0", sw * xs[3])], j * sw * xs[3])
    return panel_macros(operands, c.panel.shape[1] * 2, "w + " + linear([("oc0", ws[0])]), ws[0], oc_tiles, source)


NARROW_LANES = 16  # an 8-bit depthwise tile of fewer channels widens its input span first (_widened_spans)


def _widened_spans(c: Conv, runs: list[dict], oc_tiles: list[dict]) -> None:
    """For an 8-bit depthwise convolution of fewer than NARROW_LANES channels on a vector target, all in one tile
    and contiguous, each run's `span`: the input its tile reads in a kernel row, one run of bytes, to be widened to
    int32 (less the zero point) in one loop first, and its columns read from there. gcc 12 vectorizes no loop that
    widens 8 bytes to 8 int32 on x86-64 (it does 16): vww's first depthwise convolution, 8 channels, ran scalar
    (AVX-512, 53 us; clang 4)."""
    m = c.w.shape[0]
    if len(oc_tiles) > 1 or oc_tiles[0]["nr"] != m or m >= NARROW_LANES or c.x.strides[1] != 1 or \
            c.x.strides[3] != m:
        return  # a tile of fewer channels than all (a scalar target's 2) would read past them
    for r in runs:
        if r["columns"]:
            first = min(r["offsets"])
            r["span"] = dict(first=first, length=max(r["offsets"]) - first + m,
                             at=linear([("ow0", c.win.strides[1] * m)], first))


def _byte_panel(c: Conv, operands: dict, oc_tiles: list[dict]) -> dict:
    """What the panel path needs for a panel of gathered bytes (instr/vector_dots.py gather_windows): each tile of
    output channels sums its rows' K values (at `stage`, K apart) by each channel's weights as dot products
    (kernels/dot.j2 reduce)."""
    k, ws = c.panel.shape[1], c.w.strides
    return dict(vector=True, rights={t["nr"]: [(i, i * ws[0]) for i in range(t["nr"])] for t in oc_tiles},
                dot=lambda mr: dict(operands, left="stage", lefts=[(j, j * k) for j in range(mr)], length=k,
                                    right="w + " + linear([("oc0", ws[0])])))


def _dot_runs(c: Conv, runs: list[dict], operands: dict, oc_tiles: list[dict]) -> None:
    """Each run's dot products (the dot macro, kernels/dot.j2), in run["dots"]: for each of its taps (None: a loop
    over them all) the sum over the tap's channels, from the input of the tile's columns that read inside the image
    and the weights of its output channels; where a kernel row's taps are one run in both (instr/passes.py
    taps_contiguous), one sum over the whole row."""
    cg = c.w.shape[1]
    xs, ws = c.x.strides, c.w.strides
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
                asm=dot_asm(operands, [(j, j * s * xs[3]) for j in columns])))


def _nhwc_reads(c: Conv) -> dict:
    """Where a tile reads: the input row `ih` of output row oh and kernel row kh, the input column iw(j) of the
    tile's column j and tap kw, the input there (x_at, x_row, x_i; a grouped tile's from its first input channel
    c0) and the weights of the tile's output channels (w_at, w_row)."""
    m, cg = c.w.shape[:2]
    mg = m // c.group
    # a grouped tile's first input channel, unless no input channel is read (one, or a broadcast view)
    c0 = None if c.group == 1 or _depthwise(c) or c.x.strides[1] == 0 or c.x.shape[1] == 1 else \
        f"(oc0 / {mg}) * {cg}"
    channel = "c" if c0 is None else "(c0 + c)"

    def iw(j: int) -> str:
        s, d, p = c.win.strides[1], c.win.dilations[1], c.win.pads_begin[1]
        return linear([("ow0", s), ("kw", d)], j * s - p)
    return dict(
        c0=c0, ih=linear([("oh", c.win.strides[0]), ("kh", c.win.dilations[0])], -c.win.pads_begin[0]), iw=iw,
        x_at=join(index(View(c.x.buf, 0, c.x.shape[:3], c.x.strides[:3]), ("n", channel, "ih")),
                  linear([("iw", c.x.strides[3])])),
        x_row=linear([(v, st) for v, st, size in zip(("n", "oc0", "ih"), c.x.strides, c.x.shape) if size > 1]),
        x_i=linear([("i", c.x.strides[1])]), w_at=index(c.w, ("oc0", "c", "kh", "kw")),
        w_row=linear([("oc0", c.w.strides[0]), ("kh", c.w.strides[2])]))


def _nhwc_sums(c: Conv, tiles: Tiles, is_float: bool, dot, x_t: np.dtype, w_t: np.dtype) -> dict:
    """How a tile sums: mac, a value times a tap's weight into the accumulator of column j, channel i (the tile's
    float_mac for floats); and `merged` where a kernel row's taps and channels are one run in the input and in the
    weights (a dense convolution without dot products or dilation across columns): one loop over both, with the
    Cortex-M4F's hand-scheduled float loop (Tiles.float_mac "mul_add", beside the C) where the input (`x_t`) and the
    weights (`w_t`) are float32, not stored float16 ones."""
    cg = c.w.shape[1]
    xs, ws = c.x.strides, c.w.strides
    sw = c.win.strides[1]

    def mac(value: str, j: int, kw: int = 0) -> str:
        weight = f"tap[{linear([('i', ws[0])], kw * ws[3])}]"
        if w_t in DECODE:  # weights stored narrow, read so in place (instr/narrow_weights.py narrow_convs)
            weight = f"{DECODE[w_t]}({weight})"
        if is_float:
            return f"acc[{j}][i] = cglow_{tiles.float_mac}({value}, {weight}, acc[{j}][i]);"
        return f"acc[{j}][i] += {value} * {weight};"
    merged = not _depthwise(c) and not dot and c.group == 1 and c.win.dilations[1] == 1 and xs[1] == 1 and \
        xs[3] == cg and ws[3] == cg * ws[1]
    hand_scheduled = tiles.float_mac == "mul_add" and is_float and x_t == w_t == np.float32
    return dict(mac=mac, merged=merged and dict(
        K=c.win.kernel[1] * cg, w=linear([("oc0", ws[0]), ("kh", ws[2]), ("k", ws[1])]),
        x=lambda j: linear([("n", xs[0]), ("ih", xs[2]), ("ow0", sw * xs[3]), ("k", 1)],
                           (j * sw - c.win.pads_begin[1]) * xs[3]),
        asm=lambda mr, nr, columns: hand_scheduled and float_loop(
            mr, nr, [(j, (j - columns[0]) * sw * xs[3] * 4) for j in columns], c.win.kernel[1] * cg, 4, ws[1] * 4,
            ws[0] * 4)))


def _nhwc_outputs(c: Conv, dtypes, acc_t: np.dtype, epi: Epilogue) -> dict:
    """What a tile's accumulators start at (Epilogue.init's input, a bias per channel, where kernel.py starting
    keeps it; else zero) and what they become (epilogue), and where they are stored (out_tile, store): the output,
    or with c.ring the ring row that waits DELAY rows for the input row it overwrites, then is copied over it
    (out_done, row_start), a word at a time where the row is contiguous (row_words)."""
    m = c.w.shape[0]
    ow_ = c.win.out[1]
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

    def epilogue(j: int, half: int | None = None) -> str:
        return epilogue_at(epi, out_vars(j, half), f"acc[{j}][i]")

    def init(j: int, half: int | None = None) -> str:
        """Row j's first value of its accumulators (Epilogue.init: a bias per channel), else zero."""
        return c_literal(0, acc_t) if epi.init is None else \
            epilogue_at(Epilogue(Input(epi.init), epi.ins), out_vars(j, half))
    row_bytes = ow_ * m * dtypes[c.out.buf].itemsize  # a ring row, copied out a word at a time where contiguous
    return dict(
        DELAY=delay, init=init, epilogue=epilogue, out_tile=out_tile, store=store,
        out_done=index(c.out, ("n", "oc", "done", "ow")),
        row_words=row_bytes // 4 if row_bytes % 4 == 0 and c.out.strides[1] == 1 and c.out.strides[3] == m else 0,
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
    epi = epilogue_at(c.epi.folded(), out_vars, "acc[i][j]")
    names = ["y", "x", "w"] + [f"e{i}" for i in range(len(c.epi.ins))]
    acc_t = accumulator(dtypes[c.x.buf], dtypes[c.out.buf])
    return from_template(
        "conv_tiled.c.j2", fn, c, names, dtypes, acc_t=c_type(acc_t), zero=c_literal(0, acc_t),
        load=lambda at: f"(x[{at}]{minus(c.x_zero)})" if c.x_zero else loaded(dtypes[c.x.buf], f"x[{at}]"), N=n,
        CG=cg, H=h, W=w, SW=sw, c0=start, tiles=tiles,
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
    epi = epilogue_at(c.epi.folded(), out_vars, f"row[{row_at}]")
    return from_template(
        "conv_in_place.c.j2", fn, c, names, dtypes, scratch=1, N=n, M=m, CG=cg, H=h, W=w, c0=first,
        x=loaded(dtypes[c.x.buf], "x[%s]" % join(index(c.x, ("n", channel, "ih")),
                                                 f"({iw}) * {c.x.strides[3]}" if c.x.strides[3] != 1 else iw)),
        w=index(c.w, ("oc", "c", "kh", "kw")), row_at=row_at,
        zero=c_literal(0, dtypes[c.out.buf]), lo=lo, hi=hi, epilogue=epi, DELAY=c.win.pads_begin[0],
        out_done=index(c.out, ("n", "oc", "done", "ow")), **_window_args(c.win))
