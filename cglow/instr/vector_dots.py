"""The passes of a target whose 8-bit kernels sum as dot products in C (Tiles.vector_dot), of unsigned inputs by
int8 weights on x86-64 (gcc's VNNI vpdpbusd) or of int8 inputs by int8 weights where Tiles.signed_dots (AArch64,
gcc's sdot): which kernels do (sums_as_vector_dots), their input zero points made the one under which the input,
less it, is the byte the target's dot products read, with the difference folded into their biases (rebase_inputs),
a convolution's windows gathered into a byte panel (gather_windows), on x86-64 with AVX-512 (Tiles.column_blocks)
the matrix products' weights laid out for outer products (block_weights), and, on x86-64 (Tiles.wide_weights), the
others' weights widened (widen_weights). kernels/dot.j2 reduce and block_dot are the loops."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .constants import laid_out, values
from .ir import Buffer, Conv, Epilogue, Gemm, Instr, Program, View, channels_innermost, dot_operands


def dot_zero(values: np.dtype, signed: bool) -> int:
    """The zero point under which an 8-bit input's values, less it, are its bytes as the target's dot products read
    them, an int8 or uint8 byte with its top bit flipped where its type is not theirs: read as unsigned (x86-64),
    -128 for int8 and 0 for uint8; read as signed (`signed`, Tiles.signed_dots), 0 for int8 and 128 for uint8."""
    int8 = np.dtype(values) == np.int8
    return (0 if int8 else 128) if signed else (-128 if int8 else 0)


def plain_dots(values: np.dtype, weights: np.dtype, zero: int, signed: bool) -> bool:
    """Whether an 8-bit kernel of these operand types and input zero point sums as plain dot products of its
    input's bytes (read as the target's, dot_zero) by int8 weights (Tiles.vector_dot): no correction for the zero
    point left to add."""
    return dot_operands(values, weights) and zero == dot_zero(values, signed)


# The shortest run a vector dot product takes: each output's sum ends in a horizontal reduction of its vector, which a
# short run does not pay for (vww, whose first matrix products sum 8 and 16 channels: int8 gcc 12 -O3 AVX-512 us,
# runs of 16 or more / 32 / 48 / 64: 236 / 240 / 258 / 285; resnet8, whose kernel rows are 48 values and more at
# its borders' taps 16: 311 / 302 / 299 / 494; single runs, +-10%; measured before gather_windows, which made a
# convolution's runs its windows' values).
VECTOR_DOT_LENGTH = 32


def vector_dots(g: Instr, buffers: list[Buffer]) -> bool:
    """Whether g is an 8-bit matrix product or dense channels-last convolution by constant int8 weights (no zero
    point on them) that sums as dot products on a target with Tiles.vector_dot, given its input zero point
    (plain_dots): its input contiguous along the reduced dim (the weights are, once pack_weights has laid them out),
    in runs of at least VECTOR_DOT_LENGTH values (a matrix product's k; a window's values, as gather_windows
    gathers them)."""
    if isinstance(g, Gemm):
        return dot_operands(buffers[g.a.buf].dtype, buffers[g.b.buf].dtype) and not g.zeros[1] and \
            buffers[g.b.buf].kind == "const" and g.a.strides[-1] == 1 and not any(g.b.strides[:-2]) and \
            g.a.shape[-1] >= VECTOR_DOT_LENGTH
    if not (isinstance(g, Conv) and channels_innermost(g) and g.group == 1 and buffers[g.w.buf].kind == "const" and
            dot_operands(buffers[g.x.buf].dtype, buffers[g.w.buf].dtype)):
        return False
    cg = g.w.shape[1]
    return (cg == 1 or g.x.strides[1] == 1) and g.w.size // g.w.shape[0] >= VECTOR_DOT_LENGTH


def _operands(g: Conv | Gemm) -> tuple[View, str, int]:
    """A convolution's or matrix product's input, the name of its weights' field, and the input's zero point."""
    return (g.a, "b", g.zeros[0]) if isinstance(g, Gemm) else (g.x, "w", g.x_zero)


def sums_as_vector_dots(g: Instr, buffers: list[Buffer], signed: bool) -> bool:
    """Whether g, on a target with Tiles.vector_dot (its dot products `signed`, Tiles.signed_dots), sums as plain
    dot products (plain_dots, once rebase_inputs has made its input zero point dot_zero where it could)."""
    if not vector_dots(g, buffers):
        return False
    x, weights, zero = _operands(g)
    return plain_dots(buffers[x.buf].dtype, buffers[getattr(g, weights).buf].dtype, zero, signed)


# A padded convolution rebases its input (its windows gathered, the padding the old zero point) from this many
# input channels: the first layers of kws (1 channel) and vww (3) took longer summed as dot products of gathered
# windows than over output channels (x86-64, gcc 12 -O3 AVX-512: kws int8 48 -> 55 us).
PADDED_REBASE_CHANNELS = 8


def rebase_inputs(prog: Program, signed: bool) -> Program:
    """On a target that sums 8-bit products as dot products in C (Tiles.vector_dot, `signed` as Tiles.signed_dots),
    the matrix products and convolutions that can (vector_dots), whose input zero point z is another one's, take the
    one u under which the input is the bytes the dot products read (dot_zero) and start their accumulators at the
    bias less (z - u) times the sum of each output channel's weights: sum (x - z) w + b = sum (x - u) w + b - (z - u)
    sum w. A padded convolution does where gather_windows gathers its windows (a kernel wider than one value, and
    PADDED_REBASE_CHANNELS input channels or more), with z in the padding (x_pad): there each padded value's share
    of the correction cancels its (z - u) w. Others read no padding, which would take part in the correction."""
    instrs, buffers, stored = list(prog.instrs), list(prog.buffers), {}
    for j, g in enumerate(instrs):
        padded = isinstance(g, Conv) and any(g.win.pads_begin + g.win.pads_end)
        if not vector_dots(g, buffers) or padded and (all(k == 1 for k in g.win.kernel) or
                                                      g.w.shape[1] < PADDED_REBASE_CHANNELS):
            continue
        gemm = isinstance(g, Gemm)
        x, weights, zero = _operands(g)
        w = getattr(g, weights)
        to = dot_zero(buffers[x.buf].dtype, signed)
        channel = len(g.out.shape) - 1 if gemm else 1
        bias = g.epi.ins[g.epi.init] if g.epi.init is not None else None
        if zero == to or bias is not None and any(s and n > 1 for d, (s, n) in enumerate(zip(bias.strides, bias.shape))
                                                  if d != channel):  # a bias per channel
            continue
        if gemm:
            w = View(w.buf, w.offset, w.shape[-2:], w.strides[-2:])
        reduced = (0,) if gemm else (1, 2, 3)

        def lay_out(w=w, bias=bias, zero=zero, to=to, reduced=reduced, channel=channel, n=g.out.shape[channel]):
            weights = values(buffers[w.buf], w).astype(np.int64).sum(axis=reduced)
            start = np.zeros(n, np.int64) if bias is None else \
                values(buffers[bias.buf], View(bias.buf, bias.offset, (n,), (bias.strides[channel],)))
            return (start - (zero - to) * weights).astype(np.int32), \
                f"{g.node} bias for {'signed' if signed else 'unsigned'} inputs"
        key = (w.buf, w.offset, w.shape, w.strides, zero, to, bias and (bias.buf, bias.offset, bias.strides[channel]))
        strides = tuple(int(d == channel) for d in range(len(g.out.shape)))
        start = View(laid_out(buffers, stored, key, lay_out), 0, g.out.shape, strides)
        ins = g.epi.ins + (start,) if bias is None else tuple(start if i == g.epi.init else v
                                                              for i, v in enumerate(g.epi.ins))
        epi = Epilogue(g.epi.expr, ins, len(ins) - 1 if bias is None else g.epi.init)
        instrs[j] = replace(g, epi=epi, zeros=(to, 0)) if gemm else \
            replace(g, epi=epi, x_zero=to, x_pad=zero if padded else None)
    return replace(prog, buffers=tuple(buffers), instrs=tuple(instrs))


# A gathered window's values are padded to a multiple of this, zero weights against the panel's padding: gcc 12
# sums a run in 64-byte vectors and what is left in one of 32 bytes, the rest one by one (16 values by 16 outputs
# at a time: the scalar rest took two thirds of the time). A 4 x 4 tile of reductions, AVX-512, ns per call, gcc /
# clang 14 (which sums in 16 values, each padded value costing its share): 144 values 51.7 / 30.6, padded to 160
# 15.8 / 32.9, to 192 16.7 / 37.3; 72 values 29.3 / 32.3, padded to 96 14.5 / 24.2. (AArch64 sums in 16 bytes.)
GATHERED_STEP = 32


def gather_windows(prog: Program, rows: int, signed: bool) -> Program:
    """On a target with Tiles.vector_dot (`signed` as Tiles.signed_dots), the convolutions that sum as plain dot
    products (sums_as_vector_dots) with a kernel wider than one value, in place too, gather each tile's
    `rows` windows into a scratch panel first (im2col: the input's bytes in the weights' order [KH, KW, C], the
    zero point where they are padding), so that each output is one dot product over all its KH * KW * C values,
    not one per kernel row, or per tap at the image's edges (kernels/conv.py _byte_panel). A panel row holds them
    padded to a multiple of GATHERED_STEP, each output channel's weights too (with zeros). The panel, `rows` x
    that many bytes, takes arena memory while the instruction runs."""
    instrs, buffers, stored = list(prog.instrs), list(prog.buffers), {}
    for j, g in enumerate(instrs):
        if not isinstance(g, Conv) or g.panel or all(k == 1 for k in g.win.kernel) or \
                not sums_as_vector_dots(g, buffers, signed):
            continue
        k, tile = g.w.size // g.w.shape[0], min(rows, g.out.shape[3])
        padded = -(-k // GATHERED_STEP) * GATHERED_STEP
        panel = Buffer(len(buffers), "arena", tile * padded, f"{g.node} gathered windows",
                       dtype=buffers[g.x.buf].dtype)
        buffers.append(panel)
        instrs[j] = replace(g, panel=View.of(panel.id, (tile, padded)), w=_padded(buffers, stored, g.w, padded))
    return replace(prog, buffers=tuple(buffers), instrs=tuple(instrs))


def _padded(buffers: list[Buffer], stored: dict, w: View, padded: int) -> View:
    """Packed weights [M, KH, KW, C] (pack_weights) with each output channel's values padded with zeros to
    `padded`."""
    m, k = w.shape[0], w.size // w.shape[0]
    if padded == k:
        return w
    old = buffers[w.buf]

    def lay_out() -> tuple[np.ndarray, str]:
        data = np.zeros((m, padded), old.dtype)
        data[:, :k] = old.data[w.offset:w.offset + m * k].reshape(m, k)
        return data, f"{old.label} padded"
    return View(laid_out(buffers, stored, ("padded", w.buf, w.offset, padded), lay_out), 0, w.shape,
                (padded, *w.strides[1:]))


WIDE_WEIGHTS = np.dtype(np.int32)


def widen_weights(prog: Program, signed: bool) -> Program:
    """On a target with Tiles.vector_dot and Tiles.wide_weights (x86-64; `signed` as Tiles.signed_dots), the 8-bit
    convolutions and matrix products that do not sum as dot products there (depthwise ones, short runs, a first
    layer's padded input) multiply-add int32 accumulators over output channels: their constant int8 weights are
    stored as WIDE_WEIGHTS, which gcc widens with one instruction where it took several for int8 (x86-64 AVX-512,
    gcc 12 -O3: a 3x3 stride-2 convolution of 3 to 8 channels, vww's first, 56 us with int8 weights, 17 with int16,
    13 with int32). make bench's int8 models, whole tensors, gcc us: int8 -> int16 -> int32 weights kws 53 -> 47 ->
    45, vww 239 -> 202 -> 183, resnet8 231 -> 206 -> 215 (single runs, +-10%); leaving the depthwise ones int8,
    clang's kws took 72 us where it takes 51. Not on AArch64: over int32 weights gcc 12 -O3 vectorized a 16-channel
    tile's multiply-adds as a loop of four 4-lane steps, its accumulators loaded and stored each step, where int8
    weights make it one step of 16 lanes held in registers (int8 resnet8 under qemu-aarch64: 24.8 M instructions
    where int8 weights take 8.1 M)."""
    instrs, buffers, stored = list(prog.instrs), list(prog.buffers), {}
    for j, g in enumerate(instrs):
        if not isinstance(g, (Conv, Gemm)):
            continue
        x, field, _ = _operands(g)
        w = getattr(g, field)
        old = buffers[w.buf]
        if old.kind != "const" or old.dtype != np.int8 or not dot_operands(buffers[x.buf].dtype, old.dtype) or \
                sums_as_vector_dots(g, buffers, signed):
            continue
        wide = laid_out(buffers, stored, ("widened", old.id),
                        lambda old=old: (old.data.astype(WIDE_WEIGHTS), f"{old.label} widened"))
        instrs[j] = replace(g, **{field: replace(w, buf=wide)})
    return replace(prog, buffers=tuple(buffers), instrs=tuple(instrs))


# AVX-512 VNNI's vpdpbusd sums four byte products into each of a vector's 16 int32 lanes.
BLOCK_COLUMNS = 16


def column_bytes(k: int) -> int:
    """The bytes of one column of weights in blocks (block_weights): its k values, rounded up to a group of four."""
    return -(-k // 4) * 4


def block_weights(prog: Program) -> Program:
    """On x86-64 with Tiles.column_blocks, the 8-bit matrix products that sum as plain dot products of unsigned
    inputs (sums_as_vector_dots) take their weights in blocks of BLOCK_COLUMNS columns, [N / 16][K / 4][16][4]
    (both rounded up, zeros in the padding; Gemm.blocks): a tile's sums are then outer products, one vpdpbusd
    multiplying four of a row's inputs, broadcast, by a block's 16 columns, each output summed in a lane of its own
    (kernels/dot.j2 block_dot), where dot products end each output's sum in a reduction of its vector's lanes."""
    instrs, buffers, stored = list(prog.instrs), list(prog.buffers), {}
    for j, g in enumerate(instrs):
        if not isinstance(g, Gemm) or g.blocks or not sums_as_vector_dots(g, buffers, False):
            continue
        k, n = g.b.shape[-2:]
        b = View(g.b.buf, g.b.offset, (k, n), g.b.strides[-2:])

        def lay_out(b=b, k=k, n=n) -> tuple[np.ndarray, str]:
            rows, blocks = column_bytes(k), -(-n // BLOCK_COLUMNS)
            padded = np.zeros((rows, blocks * BLOCK_COLUMNS), buffers[b.buf].dtype)
            padded[:k, :n] = values(buffers[b.buf], b)
            data = padded.reshape(rows // 4, 4, blocks, BLOCK_COLUMNS).transpose(2, 0, 3, 1)
            return np.ascontiguousarray(data), f"{buffers[b.buf].label} in blocks of {BLOCK_COLUMNS} columns"
        blocked = laid_out(buffers, stored, ("blocks", b.buf, b.offset, b.shape, b.strides), lay_out)
        instrs[j] = replace(g, b=View(blocked, 0, g.b.shape, g.b.strides), blocks=BLOCK_COLUMNS)
    return replace(prog, buffers=tuple(buffers), instrs=tuple(instrs))
