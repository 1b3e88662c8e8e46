"""The matrix product (gemm.c.j2): register tiles of rows x columns of its output over loops of its batch dims,
and what its dot products share with the channels-last convolution's (conv.py): the dot macro's operand types
and hand-scheduled steps, and the panel of widened inputs (dot.j2)."""
from __future__ import annotations

import numpy as np

from ..c_text import c_literal, c_type
from ..instr.ir import Gemm, View, substitute
from ..instr.passes import gemm_dot_products
from ..tiles import Tiles
from .arm_steps import dot_step, float_loop, pair_step
from .kernel import (TILE_LOOP, Kernel, accumulator, collapsed, from_template, index, join, linear, minus, oriented,
                     starting, steps)


# A Gemm whose b is larger than this and than a loops over b's column panels outermost: each panel comes
# from memory once and serves every row tile while in cache. Measured at gcc -O3 on AVX-512 with b out of
# cache: 49 x 320 x 1280 (MobileNetV2's head) 421 -> 314 us, 49 x 960 x 320 240 -> 218 us; no change
# with b of 600 KB or less (49 x 160 x 960, the transformer's 64 x 128 x 512).
B_OUTERMOST_BYTES = 1 << 20


def gemm_kernel(fn: str, g: Gemm, dtypes, tiles: Tiles) -> Kernel:
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
    operands = dot_macro_operands(dtypes[g.a.buf], dtypes[g.b.buf], g.zeros[0])

    def a_rows(i: int = 0) -> str:
        """The first row of a's tile, or its row i."""
        return f"a + {join(index(batched[1], bv), linear([('m0', a_step)], i * a_step))}"
    b_columns = f"b + {join(index(batched[2], bv), linear([('n0', b_step)]))}"  # the first of b's tile
    panel = g.panel and panel_macros(operands, g.a.shape[-1], b_columns, b_step,
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
                    asm=dot_asm(operands, [(i, i * a_step) for i in range(mr)]))
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


def dot_macro_operands(left: np.dtype, right: np.dtype, zero: int) -> dict:
    """What the dot macro (kernels/dot.j2) needs to know of its operands' types and the left one's zero point."""
    flip = np.dtype(left) == np.uint8
    return dict(left_t=c_type(left), right_t=c_type(right), flip=flip, offset=c_literal(128 * flip - zero, np.int32),
                minus=minus(zero), offset_value=128 * flip - zero)


def _shifted(pairs: list[tuple[int, int]], at: int) -> list[tuple[int, int]]:
    """(index, byte offset) pairs, each offset `at` bytes further."""
    return [(i, offset + at) for i, offset in pairs]


def dot_asm(operands: dict, lefts: list[tuple[int, int]]):
    """The dot macro's hand-scheduled step (kernels/arm_steps.py) for a tile of `lefts` and the macro's `rights`
    ((index, byte offset) pairs), `at` bytes past the pointers."""
    return lambda rights, at: dot_step(_shifted(lefts, at), _shifted(rights, at), operands["offset_value"],
                                       operands["flip"])


def panel_macros(operands: dict, length: int, right: str, right_step: int, column_tiles, source) -> dict:
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
