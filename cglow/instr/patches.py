"""Patch-based execution of a span of the program (MCUNetV2's idea): the span's convolutions, pools and maps
run tile by tile over the rows of the span's output, so that only a tile's rows of each value inside the span
are alive at one time, never the whole tensors that set the arena's floor in a CNN's first, high-resolution
layers.

A span is a run of instructions (in program order, after fusion) with one output, the last one's: every other
value it writes is read only inside it. It may end with a global pool's sum over the rows and columns: each
tile then sums its rows, and the sums add up (_RowSum, _Sums). Its output (or the image that sum reads) is split
into `tiles` runs of rows; walking the span
backwards, each value gets the rows its readers need for the tile (a window's rows: out rows [lo, hi) read
input rows [lo s - pad, (hi - 1) s - pad + (k - 1) d + 1), clipped to the image, the rest padding). Each tile
computes each value's rows into a buffer of its own, so the allocator reuses those bytes tile after tile.

Two ways to treat the rows two tiles share (the halo):
- patches (`recompute`): each tile computes every row it needs, its halo again (extra multiply-accumulates);
- streamed rows: each tile computes only the rows no tile computed before; once it has last read a value, the
  rows of it the next tile needs are copied into a small buffer (so that the tile's buffer dies), and from
  there into the next tile's buffer: no recomputation, two copies of a few rows per value and tile.

Every instruction of a tile is an ordinary primitive over views (a tile's own window pads: the image's at its
top and bottom edges, none inside), so every kernel variant runs unchanged; tiles of equal shapes share one C
function. The pass runs before the pointwise convolutions' pixels are regrouped (instr/passes.py
regroup_pixels), which then regroups each tile's.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
import math

from ..graph.geometry import Window
from .expr import ACC, Input, substitute
from .ir import Buffer, Conv, Instr, Map, Pool, Program, Reduce, View, accumulator, reads


KEPT = " (rows kept)"  # ends the node name of a copy of rows one tile keeps for the next


@dataclass(frozen=True)
class PatchPlan:
    first: int        # the span: instructions first..last of the program as fused
    last: int
    tiles: int        # runs of rows of the span's output
    recompute: bool   # patches (each tile computes its halo again), else streamed rows (halo rows copied)


def _images(prog: Program) -> dict[int, View]:
    """Each buffer's view in the image's shape [N, C, H, W]: where a convolution's or a pool's window reads or
    writes it whole (none where two such views differ); then across the maps, whose operands of the output's
    shape are images where one of them is."""
    found: dict[int, View | None] = {}
    for instr in prog.instrs:
        if isinstance(instr, (Conv, Pool)):
            for v in (instr.out, instr.x):
                if len(v.shape) == 4 and v.whole(prog.buffer(v.buf).size):
                    found[v.buf] = v if found.get(v.buf, v) == v else None
    changed = True
    while changed:
        changed = False
        for instr in prog.instrs:
            for v in _same_rows(prog, instr, found):
                if v.buf not in found:
                    found[v.buf] = v
                    changed = True
    return {b: v for b, v in found.items() if v is not None}


def _same_rows(prog: Program, instr: Instr, found: dict[int, View | None]):
    """The operands of a map that the image of another operand places: those whole in the output's shape."""
    if isinstance(instr, Map) and len(instr.out.shape) == 4:
        views = (instr.out,) + instr.ins
        if any(found.get(v.buf) == v for v in views):
            yield from (v for v in views if v.whole(prog.buffer(v.buf).size))


@dataclass(frozen=True)
class _RowSum:
    """A sum over the rows and columns of an image (a global average pool's), as a span's last instruction: each
    tile sums its rows, the sums add up, and the reduction's post expression runs once at the end."""
    reduce: Reduce
    x: View      # the image it sums

    @property
    def out(self) -> View:
        return self.reduce.out

    @property
    def node(self) -> str:
        return self.reduce.node


def _row_sum(r: Reduce, images: dict[int, View]) -> _RowSum | None:
    image = images.get(r.ins[0].buf) if len(r.ins) == 1 and r.kind == "sum" else None
    if image is None or r.out.shape[:2] != image.shape[:2] or any(d != 1 for d in r.out.shape[2:]):
        return None
    reduced = r.ins[0].shape[len(r.out.shape):]
    if math.prod(reduced) != math.prod(image.shape[2:]) or len(reduced) not in (1, 2):
        return None
    whole = image.reshape(r.out.shape + reduced)
    return _RowSum(r, image) if whole is not None and (whole.buf, whole.offset) == (r.ins[0].buf, r.ins[0].offset) \
        and whole.same_layout(r.ins[0]) else None


def span_height(form) -> int:
    """The rows a span ending with this instruction splits into tiles."""
    return form.x.shape[2] if isinstance(form, _RowSum) else form.out.shape[2]


def _tileable(prog: Program, instr: Instr, images: dict[int, View]) -> Instr | None:
    """The instruction (a global pool's sum as a _RowSum), or None where it is not a row-tileable primitive: a
    convolution (no ring or panel yet), a max or average pool over 2 spatial dims, a map of rank 4, writing a
    whole arena buffer in its image view."""
    if isinstance(instr, Reduce):
        return _row_sum(instr, images)
    ok = len(instr.out.shape) == 4 and instr.out == images.get(instr.out.buf) and \
        prog.buffer(instr.out.buf).kind == "arena" and (
            isinstance(instr, Map) or
            isinstance(instr, Conv) and not instr.ring and not instr.panel and len(instr.win.kernel) == 2 or
            isinstance(instr, Pool) and instr.kind in ("max", "avg") and len(instr.win.kernel) == 2)
    return instr if ok else None


class Spans:
    """Which runs of a program's instructions may run in patches. A span [first, last] qualifies when each of
    its instructions is tileable and every value it writes but its last one's is written once, read only
    inside the span, in its image view (the rows of another view, a reshape or a broadcast, are not the
    image's), and is no graph output; its output must be at least 2 rows high."""

    def __init__(self, prog: Program):
        images = _images(prog)
        self.forms = [_tileable(prog, i, images) for i in prog.instrs]
        n = len(prog.instrs)
        writers: dict[int, list[int]] = {}
        readers: dict[int, list[int]] = {}
        for i, instr in enumerate(prog.instrs):
            writers.setdefault(instr.out.buf, []).append(i)
            for b in dict.fromkeys(v.buf for v in reads(instr)):
                readers.setdefault(b, []).append(i)
        self.read_until = [n] * n  # per instruction, the last one that reads its output (n: it may not end inside)
        for i, form in enumerate(self.forms):
            b = prog.instrs[i].out.buf
            if form is None or isinstance(form, _RowSum) or writers[b] != [i] or b in prog.outputs:
                continue
            if all(self.forms[j] is not None and _reads_image(self.forms[j], form.out) for j in readers.get(b, ())):
                self.read_until[i] = max(readers.get(b, ()), default=i)

    def qualifies(self, first: int, last: int) -> bool:
        form = self.forms[last]
        return form is not None and span_height(form) >= 2 and all(
            self.forms[i] is not None and not isinstance(self.forms[i], _RowSum) and self.read_until[i] <= last
            for i in range(first, last))

    def all(self) -> list[tuple[int, int]]:
        """Every qualifying span that starts a run of tileable instructions (a span starting later leaves the
        run's first values whole)."""
        found = []
        for first, form in enumerate(self.forms):
            if form is None or first and self.forms[first - 1] is not None:
                continue
            found += [(first, last) for last in range(first, len(self.forms)) if self.qualifies(first, last)]
        return found


def _reads_image(instr: Instr, image: View) -> bool:
    """Whether the instruction reads the value of image's buffer only in that view."""
    return all(v == image for v, _ in _input_rows(instr, _Rows(0, 1)) if v.buf == image.buf)


@dataclass(frozen=True)
class _Rows:
    """Rows [lo, hi) of a value."""
    lo: int
    hi: int

    def hull(self, other: "_Rows | None") -> "_Rows":
        return self if other is None else _Rows(min(self.lo, other.lo), max(self.hi, other.hi))


def _window_rows(win: Window, height: int, rows: _Rows) -> tuple[_Rows, int, int]:
    """The input rows a window reads for output rows `rows` of an input `height` rows high, and the padding
    rows above and below them."""
    (kh, _), (s, _), (d, _), (pt, _) = win.kernel, win.strides, win.dilations, win.pads_begin
    start = rows.lo * s - pt
    end = (rows.hi - 1) * s - pt + (kh - 1) * d + 1
    lo, hi = max(0, start), min(height, end)
    return _Rows(lo, max(lo, hi)), lo - start, end - max(lo, hi)


def _input_rows(instr: Instr, rows: _Rows) -> list[tuple[View, _Rows]]:
    """Each view the instruction reads with the rows of it that output rows `rows` need (all rows of a view
    broadcast along the rows: their stride is 0, so any slice of them is the same)."""
    if isinstance(instr, _RowSum):
        return [(instr.x, rows)]
    if isinstance(instr, (Conv, Pool)):
        found = [(instr.x, _window_rows(instr.win, instr.x.shape[2], rows)[0])]
        return found + ([(v, rows) for v in instr.epi.ins] if isinstance(instr, Conv) else [])
    return [(v, rows) for v in instr.ins]


def _needs(span: list[Instr], written: set[int], final: int, out: _Rows,
           streamed: dict[int, int] | None) -> tuple[dict, dict]:
    """For one tile: the rows each instruction computes (by index in the span) and the rows each buffer the
    span writes (`written`) must hold. With `streamed` (each buffer's first row not yet computed by an earlier tile), an
    instruction computes only rows from there on."""
    need: dict[int, _Rows] = {final: out}
    computes: dict[int, _Rows] = {}
    for k in range(len(span) - 1, -1, -1):
        instr = span[k]
        rows = need.get(instr.out.buf)
        if rows is None:
            continue
        if streamed is not None:
            rows = _Rows(max(rows.lo, streamed.get(instr.out.buf, 0)), rows.hi)
        if rows.hi <= rows.lo:
            continue
        computes[k] = rows
        for v, r in _input_rows(instr, rows):
            if v.buf in written and v.shape[2] > 1 and v.strides[2]:
                need[v.buf] = r.hull(need.get(v.buf))
    return computes, need


class _Tile:
    """Where one tile keeps each value the span writes: the span's output in place, each other value in a
    buffer of the tile's own holding its rows [lo, hi)."""

    def __init__(self, images: dict[int, View], final: int):
        self.images, self.final = images, final
        self.held: dict[int, tuple[View, _Rows]] = {}

    def fresh(self, buffers: list[Buffer], b: int, rows: _Rows, label: str) -> View:
        """A new arena buffer for rows `rows` of value b, laid out as the value is."""
        image = self.images[b]
        shape = image.shape[:2] + (rows.hi - rows.lo,) + image.shape[3:]
        old = buffers[b]
        buffers.append(Buffer(len(buffers), "arena", math.prod(shape),
                              f"{old.label} {label} {rows.lo}-{rows.hi}", dtype=old.dtype))
        return View.laid_out(len(buffers) - 1, shape, image.order())

    def at(self, v: View, rows: _Rows) -> View:
        """The view of rows `rows` of what v reads or writes, where this tile keeps them."""
        n = rows.hi - rows.lo
        if v.buf in self.held:
            tile, held = self.held[v.buf]
            return tile.slice(2, rows.lo - held.lo, n)
        return v.slice(2, rows.lo, n)


def _window(win: Window, height: int, rows: _Rows) -> tuple[Window, _Rows]:
    """A tile's window (its own padding rows: the image's at its edges, none inside) and its input rows."""
    inputs, top, bottom = _window_rows(win, height, rows)
    pads_begin = (min(top, win.pads_begin[0]),) + win.pads_begin[1:]
    pads_end = (min(bottom, win.pads_end[0]),) + win.pads_end[1:]
    return replace(win, pads_begin=pads_begin, pads_end=pads_end, out=(rows.hi - rows.lo,) + win.out[1:]), inputs


def _tiled(instr: Instr, rows: _Rows, tile: _Tile) -> Instr:
    """The instruction computing output rows `rows` only, on the tile's buffers."""
    out = tile.at(instr.out, rows)
    if isinstance(instr, Map):
        return replace(instr, out=out, ins=tuple(tile.at(v, rows) for v in instr.ins), value=None)
    win, inputs = _window(instr.win, instr.x.shape[2], rows)
    more = {"epi": replace(instr.epi, ins=tuple(tile.at(v, rows) for v in instr.epi.ins))} \
        if isinstance(instr, Conv) else {}
    return replace(instr, out=out, x=tile.at(instr.x, inputs), win=win, value=None, **more)


def _tiling(spans: Spans, plan: PatchPlan) -> tuple[list[Instr], int, int, list[tuple[dict, dict]]]:
    """The plan's span, its output's rows, the rows each tile computes of them, and per tile what _needs gives:
    the rows each instruction computes and the rows each buffer holds."""
    span = spans.forms[plan.first:plan.last + 1]
    height = span_height(span[-1])
    step = -(-height // max(1, min(plan.tiles, height)))
    written = {i.out.buf for i in span}
    streamed: dict[int, int] | None = None if plan.recompute else {}
    tiles = []
    for lo in range(0, height, step):
        computes, need = _needs(span, written, span[-1].out.buf, _Rows(lo, min(height, lo + step)), streamed)
        tiles.append((computes, need))
        if streamed is not None:
            streamed.update((span[k].out.buf, rows.hi) for k, rows in computes.items())
    return span, height, step, tiles


def patch(prog: Program, plan: PatchPlan, spans: Spans | None = None) -> Program | None:
    """The program with the plan's span run in tiles, or None where the span does not qualify (Spans)."""
    spans = spans or Spans(prog)
    if not spans.qualifies(plan.first, plan.last):
        return None
    span, _, _, tiles = _tiling(spans, plan)
    final = span[-1].out.buf
    producers = {i.out.buf: i.node for i in span}
    buffers = list(prog.buffers)
    tile = _Tile({i.out.buf: i.out for i in span}, final)
    sums = _Sums(buffers, span[-1]) if isinstance(span[-1], _RowSum) else None
    tiled: list[Instr] = []
    kept: dict[int, tuple[View, _Rows]] = {}  # per value, the rows the next tile takes over, in a buffer of their own
    for t, (computes, need) in enumerate(tiles):
        after = tiles[t + 1][1] if t + 1 < len(tiles) and not plan.recompute else {}
        readers = {v.buf: k for k in sorted(computes) for v, _ in _input_rows(span[k], computes[k])}
        tile.held = {}
        for k, instr in enumerate(span):
            b = instr.out.buf
            if b != final and b in need:
                tiled += _tile_buffer(buffers, tile, b, need[b], kept.pop(b, None), instr.node)
            if k in computes:
                tiled += sums.add(tile, computes[k]) if instr is span[-1] and sums else \
                    [_tiled(instr, computes[k], tile)]
            for r in [b] * (b not in readers) + [r for r, last in readers.items() if last == k]:
                tiled += _keep(buffers, tile, r, need.get(r), after.get(r), kept, producers.get(r, ""))
    tiled += sums.result() if sums else []
    instrs = prog.instrs[:plan.first] + tuple(tiled) + prog.instrs[plan.last + 1:]
    return replace(prog, buffers=tuple(buffers), instrs=instrs)


class _Sums:
    """A row sum's running total over the tiles (in the type its kernel accumulates in): the first tile sums into
    it, each later one into a buffer of its own that a map adds; then the post expression, once."""

    def __init__(self, buffers: list[Buffer], form: _RowSum):
        self.buffers, self.form = buffers, form
        r = form.reduce
        self.dtype = accumulator(buffers[r.ins[0].buf].dtype, buffers[r.out.buf].dtype)
        self.total: View | None = None

    def _buffer(self, label: str) -> View:
        r = self.form.reduce
        self.buffers.append(Buffer(len(self.buffers), "arena", r.out.size, f"{self.buffers[r.out.buf].label} {label}",
                                   dtype=self.dtype))
        return View.of(len(self.buffers) - 1, r.out.shape)

    def add(self, tile: _Tile, rows: _Rows) -> list[Instr]:
        r = self.form.reduce
        image = tile.at(self.form.x, rows)
        reduced = r.ins[0].shape[len(r.out.shape):]
        x = image.reshape(r.out.shape + ((image.shape[2], image.shape[3]) if len(reduced) == 2 else
                                         (image.shape[2] * image.shape[3],)))
        assert x is not None, rows
        if self.total is None:
            self.total = self._buffer("sum")
            return [Reduce(self.total, (x,), "sum", r.pre, ACC, r.node)]
        part = self._buffer(f"sum of rows {rows.lo}-{rows.hi}")
        return [Reduce(part, (x,), "sum", r.pre, ACC, r.node), Map(self.total, (self.total, part),
                                                                    Input(0) + Input(1), r.node)]

    def result(self) -> list[Instr]:
        r = self.form.reduce
        return [Map(r.out, (self.total,), substitute(r.post, acc=Input(0)), r.node, r.value)]


def _tile_buffer(buffers: list[Buffer], tile: _Tile, b: int, rows: _Rows, kept: tuple[View, _Rows] | None,
                 node: str) -> list[Instr]:
    """The tile's buffer for rows `rows` of value b; with `kept` (streamed rows: the rows the tile before left
    for this one), those rows copied into it: the instructions doing that."""
    tile.held[b] = (tile.fresh(buffers, b, rows, "rows"), rows)
    if kept is None:
        return []
    view, held = kept
    return [Map(tile.at(tile.images[b], held), (view,), Input(0), node + KEPT)]


def _keep(buffers: list[Buffer], tile: _Tile, b: int, rows: _Rows | None, then: _Rows | None,
          kept: dict[int, tuple[View, _Rows]], node: str) -> list[Instr]:
    """Streamed rows: once the tile has last read value b, the rows of it the next tile needs too are copied
    into a buffer of their own, so that the tile's buffer dies now."""
    if rows is None or then is None or b == tile.final or then.lo >= rows.hi:
        return []
    held = _Rows(then.lo, min(then.hi, rows.hi))
    view = tile.fresh(buffers, b, held, "kept rows")
    kept[b] = (view, held)
    return [Map(view, (tile.at(tile.images[b], held),), Input(0), node + KEPT)]


def tiles_of(prog: Program, plan: PatchPlan, spans: Spans | None = None) -> tuple[int, int, int]:
    """The span output's rows, the rows of it each tile computes (the last one: what remains) and the halo: the
    most rows of one value that two neighbouring tiles both hold (kept for the next tile, or computed twice)."""
    _, height, step, tiles = _tiling(spans or Spans(prog), plan)
    halo = max((min(a[b].hi, later[b].hi) - later[b].lo for (_, a), (_, later) in zip(tiles, tiles[1:])
                for b in a if b in later), default=0)
    return height, step, max(0, halo)
