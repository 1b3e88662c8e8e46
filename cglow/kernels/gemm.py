"""The matrix product (gemm.c.j2): register tiles of rows x columns of its output over loops of its batch dims,
and what its dot products share with the channels-last convolution's (conv.py): the dot macro's operand types
and hand-scheduled steps, and the panel of widened inputs (dot.j2)."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..c_text import c_literal, c_type
from ..instr.expr import to_c
from ..instr.ir import Chunks, Gemm, View, accumulator, gemm_dot_products
from ..instr.narrow_weights import DECODE
from ..instr.stored_floats import loaded
from ..instr.vector_dots import column_bytes, plain_dots
from ..tiles import Tiles
from .arm_steps import dot_step, float_loop, nibble_step, pair_step
from .kernel import (Kernel, collapsed, from_template, index, join, linear, minus, oriented, tile_loop,
                     starting, steps)


# A Gemm whose b is larger than this and than a loops over b's column panels outermost: each panel comes
# from memory once and serves every row tile while in cache. Measured at gcc -O3 on AVX-512 with b out of
# cache: 49 x 320 x 1280 (MobileNetV2's head) 421 -> 314 us, 49 x 960 x 320 240 -> 218 us; no change
# with b of 600 KB or less (49 x 160 x 960, the transformer's 64 x 128 x 512).
B_OUTERMOST_BYTES = 1 << 20


def gemm_kernel(fn: str, g: Gemm, dtypes, tiles: Tiles) -> Kernel:
    """Register tiles of rows x columns of the output (the target's `tiles`, see _gemm_tiles), the columns
    innermost so that they vectorize, over loops of the batch dims. With b two values a byte (Gemm.unpacked), a
    loop over its chunks of columns unpacks each into the scratch, and the tiles of its columns read it there."""
    instr, g = g, replace(g, b=g.chunks.weights) if g.chunks else g  # the kernel's parameters; what its tiles read
    if g.nibbles:  # bytes: the words of a column's nibbles, k of them contiguous
        batch = g.out.shape[:-2]
        shape, strides = batch + g.a.shape[-1:] + g.out.shape[-1:], (0,) * len(batch) + (1, g.nibbles)
        g = replace(g, b=View(g.b.buf, 0, shape, strides))
    acc_t = accumulator(dtypes[g.a.buf], dtypes[g.out.buf])
    a_t, b_t = dtypes[g.a.buf], dtypes[g.b.buf]
    vector = bool(tiles.vector_dot) and gemm_dot_products(g, a_t, b_t) and \
        plain_dots(a_t, b_t, g.zeros[0], tiles.signed_dots)
    operands = dict(dot_macro_operands(a_t, b_t, g.zeros[0]), vector=vector, **vector_reads(a_t, tiles.signed_dots))
    tiles = tiles.column_blocks if g.blocks else tiles.vector_dot if vector else _gemm_tiles(g, acc_t, tiles)
    where = _Where.of(g)
    panel, runs = _gemm_nests(g, tiles, b_t.itemsize, operands, where, dtypes[instr.b.buf])
    names = ["y", "a", "b"] + [f"e{i}" for i in range(len(g.epi.ins))] + (["panel"] if g.panel else []) + \
        (["unpacked"] if g.unpacked else [])
    return from_template(
        "gemm.c.j2", fn, instr, names, dtypes, scratch=bool(g.panel) + bool(g.unpacked), loops=where.loops, runs=runs,
        K=g.a.shape[-1], panel=panel, y_t=c_type(dtypes[g.out.buf]), acc_t=c_type(acc_t),
        b_t=c_type(b_t), tile_loop=tile_loop(acc_t, g.epi), **_gemm_sums(g, a_t, b_t, tiles, acc_t, operands, where),
        **_gemm_epilogue(g, tiles, acc_t, where))


def _gemm_tiles(g: Gemm, acc_t: np.dtype, tiles: Tiles) -> Tiles:
    """The register tile: the target's integer one for int32 accumulators (its variant for a panel of widened
    inputs with g.panel); else its float one, turned on its side where that suits the output (kernel.py
    oriented)."""
    if acc_t == np.int32:
        return tiles.for_integer.for_panel if g.panel else tiles.for_integer
    return oriented(tiles, g.out.shape[-2], g.out.shape[-1])


def _row(i: int) -> str:
    """Row i of a tile (the tile's first row is m0)."""
    return f"(m0 + {i})" if i else "m0"


_COLUMN = "(n0 + j)"  # column j of a tile


@dataclass(frozen=True)
class _Where:
    """Where a tile reads and writes: the batch dims as loops t0, t1... (collapsed) and each view over them (out,
    a, b, then the epilogue's inputs, in `views`), the matrices' last two dims on top. b is read from `b_name` from
    its column `b_column`: with b two values a byte (Gemm.chunks), from the scratch its chunk is unpacked into, at
    the column less the chunk's first, nc (a run per k there holding the chunk's columns)."""
    views: tuple[View, ...]
    loops: list[tuple[str, int]]
    batched: list[View]
    b_name: str = "b"
    b_column: str = "n0"

    @staticmethod
    def of(g: Gemm) -> _Where:
        views = (g.out, g.a, g.b) + g.epi.ins
        loops, batched = collapsed(views, g.out.shape, slice(0, len(g.out.shape) - 2), "t")
        c = g.chunks
        if c is None:
            return _Where(views, loops, batched)
        b = g.b if c.runs == 1 else replace(g.b, strides=g.b.strides[:-2] + (c.length(0, c.width), 1))
        return _Where((g.out, g.a, b) + g.epi.ins, loops, batched, "unpacked", "(n0 - nc)")

    def batch(self, k: int) -> str:
        """The offset of view k's matrix in the batch."""
        return index(self.batched[k], [v for v, _ in self.loops])

    def at(self, k: int, last2) -> str:
        """View k at the (row, column) expressions last2 of its matrix in the batch."""
        full = self.views[k]
        return join(self.batch(k), index(View(full.buf, 0, full.shape[-2:], full.strides[-2:]), last2))

    def a_rows(self, i: int = 0) -> str:
        """The first row of a's tile, or its row i."""
        a_step = self.views[1].strides[-2]
        return f"a + {join(self.batch(1), linear([('m0', a_step)], i * a_step))}"

    def b_columns(self) -> str:
        """The first of b's tile columns."""
        return f"{self.b_name} + {join(self.batch(2), linear([(self.b_column, self.views[2].strides[-1])]))}"


def _gemm_nests(g: Gemm, tiles: Tiles, b_itemsize: int, operands: dict, where: _Where, packed_t: np.dtype):
    """The panel of widened inputs (with g.panel; kernels/dot.j2's macros) and the runs of loop nests over the
    output's tiles: one, or with b stored narrow (Gemm.chunks; `packed_t`), one per width of its chunks of columns,
    each a loop over those chunks (nc) that unpacks each (`unpack`) before the nests over its columns. Each loop
    runs over its whole tiles and then its edge: rows outermost, unless b's column panels are (B_OUTERMOST_BYTES: b
    larger than a and than that, on a target with vector units and no panel, not in chunks)."""
    m, n = g.out.shape[-2:]
    tile_m, tile_n = tiles.rows, tiles.columns
    c = g.chunks

    def row_sums(mr: int) -> dict:
        """What the nibble_sums macro (kernels/dot.j2) needs for a tile's mr rows of a."""
        k = g.a.shape[-1]
        return dict(rows=[(i, where.a_rows(i)) for i in range(mr)], left_t=operands["left_t"], length=k,
                    minus=minus(g.zeros[0] * k))
    chunk_runs = [(0, n, n)] if c is None else steps(n, c.width)

    def column_runs(mr: int, width: int):
        """Tiles of mr rows and tiles.columns columns over `width` columns; with scalar accumulators, a tile of fewer
        rows (a matrix-vector product) takes proportionally more columns, up to the tile's number of registers.
        With b in blocks of columns (Gemm.blocks), each tile begins at a block's first column."""
        nr = min(tile_n * max(1, tile_m // mr), -(-width // tile_n) * tile_n) if tiles.scalar else tile_n
        return steps(width, nr) if tiles.scalar or g.blocks else _halved(steps(width, nr))

    row_runs = steps(m, tile_m)

    def loop(var: str, lo, hi, step: int, **more) -> dict:
        return dict(var=var, lo=lo, hi=hi, step=step, **more)
    column_tiles = [dict(nr=nr) for _, _, width in chunk_runs for mr in {r[2] for r in row_runs}
                    for _, _, nr in column_runs(mr, width)]
    panel = g.panel and panel_macros(operands, g.a.shape[-1], where.b_columns(), g.b.strides[-1], column_tiles,
                                     where.a_rows)

    def nests(width: int, first: str | None) -> list[dict]:
        """The nests over `width` columns from the column `first` (None: the first)."""
        def at(column: int):
            return linear([(first, 1)], column) if first else column
        if c is None and not g.nibbles and not tiles.scalar and not panel and n > m and \
                g.a.shape[-1] * n * b_itemsize > B_OUTERMOST_BYTES:
            return [loop("n0", n_lo, n_hi, nr, inner=[loop("m0", lo, hi, mr, tile=dict(mr=mr, nr=nr))
                                                      for lo, hi, mr in row_runs], widen=None, sums=None)
                    for n_lo, n_hi, nr in column_runs(tile_m, width)]
        return [loop("m0", lo, hi, mr, inner=[loop("n0", at(n_lo), at(n_hi), nr, tile=dict(mr=mr, nr=nr))
                                              for n_lo, n_hi, nr in column_runs(mr, width)],
                     widen=panel and panel["widen"](mr), sums=g.nibbles and row_sums(mr))
                for lo, hi, mr in row_runs]
    if c is None:
        return panel, [dict(chunks=None, nests=nests(n, None))]
    return panel, [dict(chunks=loop("nc", lo, hi, width), unpack=_unpack(c, lo, width, packed_t),
                        nests=nests(width, "nc")) for lo, hi, width in chunk_runs]


def _unpack(c: Chunks, first: int, width: int, packed_t: np.dtype) -> dict:
    """What the unpack macro (gemm.c.j2) needs for the chunks of `width` columns from `first` on (the loop's nc) of
    weights stored as packed_t (instr/narrow_weights.py): its C type and the function that makes a float of one
    (none for nibbles, uint8 words of eight); each run's first packed element (a C expression over nc), the packed
    elements between runs and the elements between their copies in the scratch, and the elements of a run."""
    decode = DECODE.get(np.dtype(packed_t))
    if decode:
        start, run_step = linear([("nc", c.column)]), c.run_step
    else:  # two values a byte: nc is even
        start = linear([("nc", c.column // 2)]) if c.column % 2 == 0 else linear([("nc / 2", c.column)])
        run_step = c.run_step // 2
    return dict(runs=c.runs, start=start, run_step=run_step, to_step=c.length(0, c.width),
                length=c.length(first, width), packed_t=c_type(packed_t), decode=decode)


def _halved(runs: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Column runs with their last tile, of a width above 8 that is no power of two (24), split into powers of two
    (16, 8): clang vectorized a 24-wide tile's rows as 16-wide vectors across rows, gathered and shuffled (x86-64
    AVX-512, mobilenetv2's 24-channel projections)."""
    out = []
    for lo, hi, nr in runs:
        while hi - lo == nr and nr & (nr - 1) and nr > 8:
            half = 1 << (nr.bit_length() - 1)
            out.append((lo, lo + half, half))
            lo, nr = lo + half, nr - half
        out.append((lo, hi, nr))
    return out


def _gemm_sums(g: Gemm, a_t: np.dtype, b_t: np.dtype, tiles: Tiles, acc_t: np.dtype, operands: dict,
               where: _Where) -> dict:
    """How a tile sums over k: a multiply-accumulate per row and column in C (the target's float_mac for
    floats); as 4-lane dot products (8-bit values by int8 weights on a dual-MAC target, instr/passes.py
    gemm_dot_products); as dot products in C (operands["vector"], Tiles.vector_dot); as outer products of b in
    blocks of columns (`blocked`, Gemm.blocks: kernels/dot.j2 block_dot); or in
    the Cortex-M4F's hand-scheduled float loop (Tiles.float_mac "mul_add", beside the C)."""
    is_float = acc_t == np.float32
    a_step, b_step = g.a.strides[-2], g.b.strides[-1]
    right = loaded(b_t, f"row[{linear([('j', g.b.strides[-1])])}]")
    if g.zeros[1]:
        right = f"({right}{minus(g.zeros[1])})"

    def mac(i: int) -> str:
        return f"acc[{i}][j] = cglow_{tiles.float_mac}(left, {right}, acc[{i}][j]);" if is_float else \
            f"acc[{i}][j] += left * {right};"

    def lefts(mr: int) -> list[tuple[int, int]]:
        return [(i, i * a_step) for i in range(mr)]

    def dot_products(mr: int) -> dict:
        return dict(operands, length=g.a.shape[-1], left=where.a_rows(), right=where.b_columns(), lefts=lefts(mr),
                    asm=dot_asm(operands, lefts(mr), g.nibbles), nibbles=g.nibbles)

    def blocked(mr: int) -> dict:
        k, column = g.a.shape[-1], column_bytes(g.a.shape[-1])
        return dict(operands, left=where.a_rows(), lefts=lefts(mr), quads=k // 4, tail=k % 4,
                    block=column * g.blocks, right=f"{where.b_name} + " + linear([(where.b_column, column)]))
    dot = operands["vector"] or tiles.dual_mac and (g.nibbles or gemm_dot_products(g, a_t, b_t))
    return dict(
        mac=mac, a_load=lambda ref: loaded(a_t, ref, minus(g.zeros[0])), a=lambda i: where.at(1, (_row(i), "k")),
        dot_products=dot and dot_products,
        blocked=g.blocks and blocked,
        float_asm=tiles.float_mac == "mul_add" and is_float and a_t == b_t == np.float32 and not g.zeros[1] and
        g.a.strides[-1] == 1 and (
            lambda mr, nr: float_loop(mr, nr, [(i, i * a_step * 4) for i in range(mr)], g.a.shape[-1], 4,
                                      where.views[2].strides[-2] * 4, where.views[2].strides[-1] * 4)),
        rights=lambda nr: [(j, j * b_step) for j in range(nr)],
        b_row=f"{where.b_name} + {where.at(2, ('k', where.b_column))}")


def _gemm_epilogue(g: Gemm, tiles: Tiles, acc_t: np.dtype, where: _Where) -> dict:
    """What a tile's accumulators start at (Epilogue.init's input, a bias per column, where kernel.py starting
    keeps it; else zero), and what row i's become at its store to the output."""
    epi = starting(g.epi, acc_t == np.float32, tiles.scalar)

    def inputs(i: int) -> list[str]:
        """The epilogue's inputs at row i of a tile, column j."""
        return [f"e{e}[{where.at(3 + e, (_row(i), _COLUMN))}]" for e in range(len(epi.ins))]

    def epilogue(i: int) -> str:
        return to_c(epi.expr, inputs(i), f"acc[{i}][j]")

    def init(i: int) -> str:
        """Row i's first value of its accumulators (Epilogue.init: a bias per column), else zero."""
        return c_literal(0, acc_t) if epi.init is None else inputs(i)[epi.init]

    def out(i: int) -> str:
        """Row i, column j of the tile, from `out` (its first element). clang vectorizes a tile's sums only where
        it sees its stores as runs (a pointer plus literals): indexed from y at (m0 + i, n0 + j), they were not
        when a row had more than one tile (clang 14 -O3 AVX-512: scalar multiply-adds in mobilenetv2)."""
        rows, columns = g.out.shape[-2:]
        row_step, column_step = g.out.strides[-2] if rows > 1 else 0, g.out.strides[-1] if columns > 1 else 0
        return linear([("j", column_step)], i * row_step)
    return dict(init=init, epilogue=epilogue, out=out, out_tile=where.at(0, ("m0", "n0")))


def dot_macro_operands(left: np.dtype, right: np.dtype, zero: int) -> dict:
    """What the dot macro (kernels/dot.j2) needs to know of its operands' types and the left one's zero point (the
    right one's words of 8-bit values: a matrix product of nibbles says so, Gemm.nibbles)."""
    flip = np.dtype(left) == np.uint8
    return dict(left_t=c_type(left), right_t=c_type(right), flip=flip, offset=c_literal(128 * flip - zero, np.int32),
                minus=minus(zero), offset_value=128 * flip - zero, nibbles=0)


def vector_reads(left: np.dtype, signed: bool) -> dict:
    """How a dot product in C (kernels/dot.j2 reduce) reads its 8-bit left operand as the target's dot products take
    it (instr/vector_dots.py dot_zero): the type its pointer reads, `read_t`, and the C of the value at lp[k%s],
    `read`: the byte itself where it is of their type; else with its top bit flipped, an int8 byte read as unsigned
    (x86-64), 128 more, or an uint8 byte as int8 where they are `signed` (Tiles.signed_dots), 128 less. The latter
    is read as int8 and flipped as such: gcc 12.2 makes Arm's sdot of a product of two int8 loads, but takes an uint8
    byte converted to int8, (int8_t)(lp[k] ^ 0x80), for an unsigned by signed product: under -march=armv8.2-a+dotprod
    it summed 16-bit products (smull, saddw), and with +i8mm it made usdot of the flipped bytes read as unsigned,
    which is wrong (a 64-value sum: -7200 where it is 23520, under qemu-aarch64)."""
    if np.dtype(left) == (np.int8 if signed else np.uint8):
        reads = dict(read_t=c_type(left), read="lp[k%s]")
    else:
        reads = dict(read_t="int8_t", read="(int8_t)(lp[k%s] ^ -128)") if signed else \
            dict(read_t=c_type(left), read="(uint8_t)(lp[k%s] ^ 0x80)")
    return dict(reads, vnni=None if signed else dict(flip=np.dtype(left) == np.int8))


def _shifted(pairs: list[tuple[int, int]], at: int) -> list[tuple[int, int]]:
    """(index, byte offset) pairs, each offset `at` bytes further."""
    return [(i, offset + at) for i, offset in pairs]


def dot_asm(operands: dict, lefts: list[tuple[int, int]], nibbles: bool = False):
    """The dot macro's hand-scheduled step (kernels/arm_steps.py) for a tile of `lefts` and the macro's `rights`
    ((index, byte offset) pairs), `at` values past the pointers: as many bytes of both operands, or with `nibbles`
    (Gemm.nibbles) half as many of the weights."""
    if nibbles:
        return lambda rights, at: nibble_step(_shifted(lefts, at), _shifted(rights, at // 2), operands["offset_value"],
                                              operands["flip"])
    return lambda rights, at: dot_step(_shifted(lefts, at), _shifted(rights, at), operands["offset_value"],
                                       operands["flip"])


def panel_macros(operands: dict, length: int, right: str, right_step: int, column_tiles, source) -> dict:
    """What the widen and pair_dot macros (kernels/dot.j2) need for a kernel with a panel of widened inputs:
    `length` values per row (length / 2 words), row j read from source(j); the weights in channel pairs
    (instr/passes.py pair_weights) from `right`, a pair every 2 * right_step bytes, for each tile of
    `column_tiles` its pairs as (index, byte offset, channels) triples."""
    words = length // 2
    return dict(vector=False, widen=lambda mr: dict(operands, rows=[(j, source(j)) for j in range(mr)], length=length),
                dot=lambda mr: dict(operands, lefts=[(j, j * words) for j in range(mr)], words=words, right=right,
                                    asm=lambda pairs, at: pair_step([(j, (j * words + at) * 4) for j in range(mr)],
                                                                    [(q, b + at * 4, n) for q, b, n in pairs])),
                pairs={t["nr"]: [(q, 2 * q * right_step, min(2, t["nr"] - 2 * q)) for q in range(-(-t["nr"] // 2))]
                       for t in column_tiles})
