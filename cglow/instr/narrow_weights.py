"""Constant weights stored narrower than their kernel reads them, and unpacked a chunk of output channels at a time
into a scratch buffer in the arena, in the layout that every other pass has given them, which every kernel variant
then reads as it read the whole: integers that fit signed nibbles (an int4 DequantizeLinear's values, or an uint4
one's of zero point 8, folded into IntGemm or IntConv), two per byte, eight values a word (nibbles.pack_octets);
float32 values that bfloat16 holds exactly (their low 16 bits zero), or else float16, as those (weights given in
those types, which import widens to float32).

A matrix product's kernel unpacks its chunks of columns itself (narrow_gemms; Gemm.chunks, kernels/gemm.c.j2,
runtime_c/nibbles8.c, half_finite_to_float.c, bfloat_to_float.c); a convolution runs as convolutions of a chunk of
output channels each, after maps that unpack theirs (narrow_convs); a matrix-vector product reads float16 and
bfloat16 weights as stored, each converted as it is loaded (HALF_READ_ROWS). Flash for half the weights (an eighth of
the int32 ones that x86 widens 8-bit weights to), against RAM for one chunk of them and one pass over them a run."""
from __future__ import annotations

import math
from dataclasses import replace

import ml_dtypes
import numpy as np

from .expr import Input, call
from .ir import OCTET, Buffer, Chunks, Conv, Gemm, Map, Program, View, channels_innermost, gemm_dot_products
from .nibbles import MIN_WEIGHTS, flat_maps, pack, pack_octets, unpacked_maps
from .vector_dots import BLOCK_COLUMNS, column_bytes

X = Input(0)
NIBBLES = np.dtype(np.uint8)  # the packed type of signed nibbles, eight values a word (nibbles.pack_octets)
DECODE = {np.dtype(np.float16): "cglow_half_finite_to_float", np.dtype(ml_dtypes.bfloat16): "cglow_bfloat_to_float"}
LABELS = {NIBBLES: "two per byte", **{t: f"as {t.name}" for t in DECODE}}


def narrowest(old: Buffer) -> np.dtype | None:
    """The narrow type that holds a constant's values exactly, MIN_WEIGHTS of them at least: signed nibbles
    (NIBBLES) for integers in [-8, 7]; bfloat16 for float32 values whose low 16 bits are all zero, else float16
    where it holds them all and they are finite (runtime_c/half_finite_to_float.c); None otherwise."""
    data = old.data
    if old.kind != "const" or data is None or old.size < MIN_WEIGHTS:
        return None
    if data.dtype.kind == "i":
        return NIBBLES if int(data.min()) >= -8 and int(data.max()) <= 7 else None
    if data.dtype != np.float32:
        return None
    if not np.any(data.view(np.uint32) & 0xFFFF):
        return np.dtype(ml_dtypes.bfloat16)
    with np.errstate(over="ignore"):
        half = data.astype(np.float16)
    exact = np.all(np.isfinite(data)) and np.array_equal(half.astype(np.float32), data)
    return np.dtype(np.float16) if exact else None


def _packed(buffers: list[Buffer], done: dict[int, int], old: Buffer, narrow: np.dtype, octets: bool) -> int:
    """The id of old's values stored in the narrow type, once per buffer: nibbles in octets (a matrix product's
    kernel unpacks them so) or in pairs (the maps do, nibbles.pack); zeros pad them to whole octets, and one more
    octet (the last run of a chunk of rows may read that far, Chunks.length)."""
    if old.id not in done:
        padded = np.append(old.data, np.zeros(-old.size % OCTET + OCTET, old.dtype))
        data = padded.astype(narrow) if narrow != NIBBLES else pack_octets(padded) if octets else pack(padded)
        done[old.id] = len(buffers)
        buffers.append(Buffer(len(buffers), "const", data.size, f"{old.label} {LABELS[narrow]}", data=data,
                              dtype=data.dtype))
    return done[old.id]


def chunks_of(g: Gemm, old: Buffer, width: int, narrow: np.dtype) -> Chunks | None:
    """How g's kernel reads its weights (old, their buffer) `width` columns at a time where each chunk's runs start
    at whole octets (OCTET) for nibbles: in column blocks (Gemm.blocks), k innermost (dot products, channel pairs;
    one column: all k of it, whatever its view's stride says), or columns innermost in rows. None otherwise
    (another view of them, a batch of matrices)."""
    b, (k, n) = g.b, g.b.shape[-2:]
    unit = OCTET if narrow == NIBBLES else 1
    if b.offset or any(b.strides[:-2]):
        return None
    if g.blocks:
        return Chunks(width, 1, 0, column_bytes(k), BLOCK_COLUMNS, old.size, b, unit)
    if b.strides[-2] == 1 or n == 1:
        return Chunks(width, 1, 0, b.strides[-1] if n > 1 else old.size, 2, old.size, b, unit)
    if b.strides[-1] == 1 and (narrow != NIBBLES or b.strides[-2] % OCTET == 0):
        return Chunks(width, k, b.strides[-2], 1, 2, old.size, b, unit)
    return None


# The most scratch a chunk takes where it holds more than one unit of output channels (chunk_width): a tenth or
# so of a small microcontroller's RAM
CHUNK_BYTES = 4096


def chunk_width(channels: int, columns: int, channel_bytes: int, unit: int) -> int:
    """The output channels of a chunk: `columns` (all where there are fewer), fewer where their scratch
    (`channel_bytes` each) would take more than CHUNK_BYTES, in whole units (octets of nibbles, whose runs then
    start at whole words; a block of columns; pairs of channels, pair_weights; whole groups), one unit at least."""
    width = min(columns, channels, CHUNK_BYTES // channel_bytes)
    return min(max(unit, width // unit * unit), channels)


# The most rows of a matrix product whose dot products unpack nibbles in registers (nibble_dots): beyond, chunks
# unpacked once for all of them cost less than the unpacking in each tile. Estimated Cortex-M4 cycles per MAC of an
# int4 m x 128 by 128 x 64 QDQ MatMul, in registers against chunks: m = 2: 1.73 / 2.73; 6: 1.72 / 1.90; 12:
# 1.72 / 1.69; 24: 1.72 / 1.58
NIBBLE_DOT_ROWS = 8
# The most rows of a matrix product that reads float16 or bfloat16 weights as stored, each converted as it is loaded
# (instr/stored_floats.py loaded), with no scratch: a matrix-vector product, which reads each weight once, where
# unpacking them takes a pass of its own. Estimated Cortex-M4 cycles per MAC of a float16 1 x 256 by 256 x 256
# MatMul: 19.42 in chunks (arena 4096), 16.37 so (0); with 3 rows, each converted once per row, 7.78 and 9.33
HALF_READ_ROWS = 1


def narrow_gemms(prog: Program, columns: int, dots: bool = False) -> Program:
    """The matrix products whose constant weights have a narrower type (narrowest) and chunks (chunks_of) read them
    in it, unpacked by the kernel a chunk of columns at a time (Gemm.chunks; chunk_width) into a scratch buffer of
    their type (Gemm.unpacked) that holds one chunk's runs. Each product unpacks them anew (the tiles of a patched
    span, a recurrent layer's steps): one pass over the weights for its rows, which a matrix-vector product pays
    in full. On a target whose 8-bit products are dot products (`dots`), those of nibbles read by rows of a, not
    by a panel of them, unpack them in registers instead (nibble_dots)."""
    instrs, buffers = list(prog.instrs), list(prog.buffers)
    packed: dict[int, int] = {}  # weights buffer -> its narrow copy
    for j, g in enumerate(instrs):
        if not isinstance(g, Gemm) or g.chunks or g.nibbles:
            continue
        old = buffers[g.b.buf]
        narrow = narrowest(old)
        if dots and narrow == NIBBLES and _rows_by_one_matrix(g, NIBBLE_DOT_ROWS) and \
                gemm_dot_products(g, buffers[g.a.buf].dtype, old.dtype):
            instrs[j] = nibble_dots(g, old, buffers)
            continue
        if narrow in DECODE and _rows_by_one_matrix(g, HALF_READ_ROWS):
            instrs[j] = replace(g, b=replace(g.b, buf=_packed(buffers, packed, old, narrow, octets=True)))
            continue
        k, n = g.b.shape[-2:]
        unit = max(OCTET if narrow == NIBBLES else 2, BLOCK_COLUMNS if g.blocks else 1)
        chunks = narrow and chunks_of(g, old, chunk_width(n, columns, k * old.dtype.itemsize, unit), narrow)
        if not chunks:
            continue
        scratch = Buffer(len(buffers), "arena", chunks.runs * chunks.length(0, chunks.width),
                         f"{g.node} unpacked weights", dtype=old.dtype)
        buffers.append(scratch)
        narrow_id = _packed(buffers, packed, old, narrow, octets=True)
        instrs[j] = replace(g, b=View.of(narrow_id, (buffers[narrow_id].size,)),
                            unpacked=View.of(scratch.id, (scratch.size,)), chunks=chunks)
    return replace(prog, buffers=tuple(buffers), instrs=tuple(instrs))


def _rows_by_one_matrix(g: Gemm, most: int) -> bool:
    """Whether g multiplies `most` rows at most, not through a panel, by one matrix of weights as its own buffer
    holds them (not in column blocks)."""
    return math.prod(g.out.shape[:-1]) <= most and not g.panel and not g.blocks and not g.b.offset and \
        not any(g.b.strides[:-2])


def nibble_dots(g: Gemm, old: Buffer, buffers: list[Buffer]) -> Gemm:
    """g with its weights (old, k innermost) stored as nibbles 8 more than their values, [0, 15], each column's k
    in whole octets (pack_octets, the last one's padding 8: zeros) in a new buffer appended to `buffers`, for its
    dot products to unpack in registers (Gemm.nibbles, kernels/dot.j2 nibble_dot): a word's nibbles are the
    unsigned 8-bit lanes of the words of values they multiply (runtime_c/dot4.c), and the 8 times the sum of each
    row of a that this adds to every product is taken off. No scratch, and each weight unpacked where it is used,
    where chunks unpack a matrix-vector product's weights in a pass of their own."""
    k, n = g.b.shape[-2:]
    step = g.b.strides[-1] if n > 1 else k
    words = -(-k // OCTET)
    biased = np.full((n, words * OCTET), 8, np.int16)
    biased[:, :k] = old.data[np.arange(n)[:, None] * step + np.arange(k)] + 8
    data = pack_octets(biased)
    buffers.append(Buffer(len(buffers), "const", data.size, f"{old.label} two per byte, 8 more", data=data,
                          dtype=data.dtype))
    return replace(g, b=View.of(len(buffers) - 1, (data.size,)), nibbles=words * OCTET // 2)


def narrow_convs(prog: Program, columns: int) -> Program:
    """The convolutions not in place whose constant weights have a narrower type (narrowest) and their output channels
    outermost or innermost in memory (in an even count there for nibbles): their weights stored in it, and each
    convolution run as convolutions of a chunk of output channels (chunk_width, whole groups; the last, the rest),
    each after maps that unpack its channels' weights into a scratch buffer, in the layout the kernel reads. Kernels
    of one chunk shape share their code, and each chunk reads the whole input; each convolution (a tile of a patched
    span) unpacks its weights anew. A convolution in place (channels last), whose rows take every output channel at
    once, reads float16 or bfloat16 weights as stored, each converted as its tile loads it (DECODE)."""
    instrs, buffers = [], list(prog.buffers)
    packed: dict[int, int] = {}  # weights buffer -> its narrow copy
    for c in prog.instrs:
        narrow = narrowest(buffers[c.w.buf]) if isinstance(c, Conv) else None
        if narrow in DECODE and c.ring is not None and channels_innermost(c):
            instrs.append(replace(c, w=replace(c.w, buf=_packed(buffers, packed, buffers[c.w.buf], narrow, False))))
            continue
        outer = _channels_outer(c, buffers[c.w.buf], narrow) if narrow else None
        if outer is None:
            instrs.append(c)
            continue
        old = buffers[c.w.buf]
        m = c.w.shape[0]
        per_channel = _channel_step(c.w, old) if outer else c.w.size // m
        width = chunk_width(m, columns, per_channel * old.dtype.itemsize,
                            math.lcm(2, m // c.group) if c.group > 1 else 2)
        scratch = Buffer(len(buffers), "arena", -(-width // 2) * 2 * per_channel, f"{c.node} unpacked weights",
                         dtype=old.dtype)
        buffers.append(scratch)
        narrow_id = _packed(buffers, packed, old, narrow, octets=False)
        for first in range(0, m, width):
            instrs += _chunk(c, narrow_id, narrow, old, scratch.id, first, min(width, m - first), outer)
    return replace(prog, buffers=tuple(buffers), instrs=tuple(instrs))


def _channels_outer(c: Conv, old: Buffer, narrow: np.dtype) -> bool | None:
    """How c's weights (old, their buffer) lie, where narrow_convs takes them: each output channel's a run (True;
    channel pairs' too, instr/passes.py pair_weights) or the output channels innermost (False); None where it does
    not take them."""
    w, m = c.w, c.w.shape[0]
    if c.ring is not None or w.offset:
        return None
    if m == 1 or all(s <= w.strides[0] for s in w.strides) and w.strides[0] * m <= old.size:
        return True
    return False if w.strides[0] == 1 and (narrow != NIBBLES or m % 2 == 0) and w.order() is not None else None


def _channel_step(w: View, old: Buffer) -> int:
    """The elements from one output channel's run of weights to the next (all of them where there is one channel,
    whatever its view's stride says)."""
    return w.strides[0] if w.shape[0] > 1 else old.size


def _chunk(c: Conv, packed: int, narrow: np.dtype, old: Buffer, scratch: int, first: int, count: int,
           outer: bool) -> list:
    """The maps unpacking output channels [first, first + count) of c's weights (old's values packed in the narrow
    type) into the scratch buffer, and the convolution of those channels reading them there (the output's value
    on the last one). Runs of channels: a pair's two whole (the last one's second the padding, pair_weights)."""
    w, label = c.w, f"{c.node} unpacked weights"
    shape = (count,) + w.shape[1:]
    if outer:
        step = _channel_step(w, old)
        start, length = first * step, min(-(-count // 2) * 2 * step, old.size - first * step)
        maps = flat_maps(packed, start, scratch, length, label) if narrow == NIBBLES else \
            [Map(View.of(scratch, (length,)), (View(packed, start, (length,), (1,)),), call(DECODE[narrow], X), label)]
        weights = View(scratch, 0, shape, w.strides)
    else:
        order = w.order()
        weights = View.laid_out(scratch, shape, order)
        inner = tuple(d for d in order if d != 0) + (0,)  # the channels last, as the maps pair nibbles
        source, to = (_unit_strides(v.permute(inner)) for v in (View(packed, first, shape, w.strides), weights))
        maps = unpacked_maps(source, to, (), X, True, label) if narrow == NIBBLES else \
            [Map(to, (source,), call(DECODE[narrow], X), label)]
    per_group, inputs = w.shape[0] // c.group, w.shape[1]  # output and input channels of a group
    groups = count // per_group if c.group > 1 else 1
    x = c.x.slice(1, first // per_group * inputs, groups * inputs) if c.group > 1 else c.x
    chunk = replace(c, out=c.out.slice(1, first, count), w=weights, x=x, group=groups,
                    epi=replace(c.epi, ins=tuple(v.slice(1, first, count) for v in c.epi.ins)),
                    value=c.value if first + count == w.shape[0] else None)
    return maps + [chunk]


def _unit_strides(v: View) -> View:
    """The view with its unit dims' strides 0 (any stride serves them; unpacked_maps wants even ones)."""
    return replace(v, strides=tuple(0 if d == 1 else s for d, s in zip(v.shape, v.strides)))
