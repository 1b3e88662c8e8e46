"""4-bit integer constants packed two per byte in flash, unpacked by the kernels that read them or by maps.

A DequantizeLinear of constant int4 or uint4 values (which graph/stored_types.py widens to 8 bits) reads them so
(lower/ops/quant.py): each pair of elements along the last dim in one byte, the first in its low nibble as ONNX
packs int4. The map becomes two maps over the same bytes, one writing the even elements from the low nibbles, one
the odd elements from the high nibbles; every other view takes every other element of its last dim (a stride
twice its own).

The integer kernels' weights that fit signed nibbles (an int4 DequantizeLinear's values, or an uint4 one's of zero
point 8, folded into IntGemm or IntConv) are stored so by default, once every other pass has laid them out for
their kernel, and unpacked a chunk of Tiles.chunk_columns output channels at a time into a scratch buffer, which
every kernel variant reads as it read the whole: a matrix product's kernel unpacks them itself, eight values a
word (nibble_gemms; Gemm.chunks, kernels/gemm.c.j2, runtime_c/nibbles8.c); a convolution runs as convolutions of a
chunk each, after maps that unpack its weights (nibble_convs). Flash for half their bytes against RAM for one
chunk, and one pass over the weights a run.

With --nibble-weights, the other integer kernels' weights that fit 4 bits (signed, or unsigned above each output
channel's least value: uint4 of any zero points; grouped convolutions', a patched span's) are stored so too, by the
last pass (unpack_nibbles): their buffer's values are packed, and maps unpack them into an arena buffer of the same
type and layout just before the first kernel that reads them. Flash for half their bytes (an eighth of int32
weights'), against RAM for the largest such layer's weights, alive from the maps to their last reader, and one pass
over them a run."""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from .expr import Expr, Input, binary, substitute
from .ir import OCTET, Buffer, Chunks, Conv, Gemm, Map, Program, View
from .vector_dots import BLOCK_COLUMNS, column_bytes

X = Input(0)
MIN_WEIGHTS = 256  # fewer would save less flash than the unpacking maps' code takes


def packable(data: np.ndarray | None) -> bool:
    """Whether a constant is 8-bit integers that fit 4 bits (int8 in [-8, 7], uint8 in [0, 15]) in pairs along its
    last dim."""
    if data is None or data.dtype not in (np.int8, np.uint8) or not data.ndim or data.shape[-1] % 2:
        return False
    low, high = (-8, 7) if data.dtype == np.int8 else (0, 15)
    return bool(data.size) and int(data.min()) >= low and int(data.max()) <= high


def pack(data: np.ndarray) -> np.ndarray:
    """The pairs along the last dim, two per byte (uint8), the first element in the low nibble."""
    nibbles = data.astype(np.uint8) & 15
    return nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)


def pack_octets(data: np.ndarray) -> np.ndarray:
    """Flat values in octets of four bytes (uint8; zeros pad the last): values 0-3 of each in the low nibbles of its
    bytes, values 4-7 in their high nibbles, as runtime_c/nibbles8.c unpacks them."""
    nibbles = np.append(data.reshape(-1), np.zeros(-data.size % OCTET, data.dtype)).astype(np.uint8) & 15
    octets = nibbles.reshape(-1, OCTET)
    return (octets[:, :4] | (octets[:, 4:] << 4)).reshape(-1)


def unpacked_maps(x: View, out: View, ins: tuple[View, ...], expr: Expr, signed: bool, name: str) -> list[Map]:
    """The maps computing `expr` of each 4-bit value (its Input(0)) into out: x is a view of the packed buffer with
    the unpacked elements' geometry (an even offset and last dim, the last dim's stride 1, the others even),
    `ins` the map's other inputs."""
    assert x.offset % 2 == 0 and x.shape[-1] % 2 == 0 and x.strides[-1] == 1 and \
        all(s % 2 == 0 for s in x.strides[:-1]), x
    packed = View(x.buf, x.offset // 2, x.shape[:-1] + (x.shape[-1] // 2,),
                  tuple(s // 2 for s in x.strides[:-1]) + (1,))
    maps = []
    for first, nibble in ((0, binary("&", X, 15)), (1, binary(">>", X, 4))):
        value = _signed(nibble) if signed else nibble
        maps.append(Map(_every_other(out, first), (packed,) + tuple(_every_other(v, first) for v in ins),
                        substitute(expr, [value]), name))
    return maps


def _signed(nibble: Expr) -> Expr:
    """A 4-bit two's complement value (in [0, 15]) as the integer it stands for, in [-8, 7], without a shift of a
    negative value."""
    return binary("-", binary("^", nibble, 8), 8)


def _every_other(view: View, first: int) -> View:
    """The view's elements `first`, first + 2... along its last dim."""
    stride = view.strides[-1]
    return View(view.buf, view.offset + first * stride, view.shape[:-1] + (view.shape[-1] // 2,),
                view.strides[:-1] + (2 * stride,))


def chunks_of(g: Gemm, old: Buffer, width: int) -> Chunks | None:
    """How g's kernel reads its weights (old, their buffer) `width` columns at a time, where they are constants that
    fit signed nibbles (MIN_WEIGHTS of them at least) and each chunk's runs start at whole octets (OCTET): in column
    blocks (Gemm.blocks), k innermost (dot products, channel pairs), or columns innermost in rows whose stride is
    octets. None otherwise."""
    b, k = g.b, g.b.shape[-2]
    if old.kind != "const" or old.data is None or old.dtype.kind != "i" or old.size < MIN_WEIGHTS or \
            b.offset or any(b.strides[:-2]) or int(old.data.min()) < -8 or int(old.data.max()) > 7:
        return None
    if g.blocks:
        return Chunks(width, 1, 0, column_bytes(k), BLOCK_COLUMNS, old.size, b)
    if b.strides[-2] == 1:
        return Chunks(width, 1, 0, b.strides[-1], 2, old.size, b)
    if b.strides[-1] == 1 and b.strides[-2] % OCTET == 0:
        return Chunks(width, k, b.strides[-2], 1, 2, old.size, b)
    return None


def nibble_gemms(prog: Program, columns: int) -> Program:
    """The integer matrix products whose constant weights fit signed nibbles (chunks_of) read them two per byte
    (pack_octets; one buffer however many read it), unpacked by the kernel `columns` columns at a time
    (Gemm.chunks; all of them where there are fewer) into a scratch buffer of their type (Gemm.unpacked) that holds
    one chunk's runs."""
    instrs, buffers = list(prog.instrs), list(prog.buffers)
    packed: dict[int, int] = {}  # weights buffer -> its packed copy
    for j, g in enumerate(instrs):
        chunks = isinstance(g, Gemm) and not g.chunks and \
            chunks_of(g, buffers[g.b.buf], min(columns, g.b.shape[-1]))
        if not chunks:
            continue
        old = buffers[g.b.buf]
        if old.id not in packed:
            data = pack_octets(old.data)
            packed[old.id] = len(buffers)
            buffers.append(Buffer(len(buffers), "const", data.size, f"{old.label} two per byte", data=data,
                                  dtype=data.dtype))
        scratch = Buffer(len(buffers), "arena", chunks.runs * chunks.length(0, chunks.width),
                         f"{g.node} unpacked weights", dtype=old.dtype)
        buffers.append(scratch)
        instrs[j] = replace(g, b=View.of(packed[old.id], (buffers[packed[old.id]].size,)),
                            unpacked=View.of(scratch.id, (scratch.size,)), chunks=chunks)
    return replace(prog, buffers=tuple(buffers), instrs=tuple(instrs))


def nibble_convs(prog: Program, columns: int) -> Program:
    """The integer convolutions, dense or depthwise and not in place, whose constant weights fit signed nibbles
    (MIN_WEIGHTS of them at least) with their output channels outermost or innermost in memory, in an even count
    where innermost: their weights stored two per byte (pack; one buffer however many read it), and each
    convolution run as convolutions of `columns` output channels (the last, the rest), each after maps that unpack
    its channels' weights into a scratch buffer, in the layout the kernel reads. Flash for half the weights against
    RAM for one chunk of them; kernels of one chunk shape share their code, and each chunk reads the whole input.
    Not weights that several convolutions read (the tiles of a patched span, instr/patches.py), which each would
    unpack again."""
    instrs, buffers = [], list(prog.buffers)
    packed: dict[int, int] = {}  # weights buffer -> its packed copy
    readers = Counter(c.w.buf for c in prog.instrs if isinstance(c, Conv))
    for c in prog.instrs:
        outer = _channels_outer(c, buffers) if isinstance(c, Conv) and readers[c.w.buf] == 1 else None
        if outer is None:
            instrs.append(c)
            continue
        old = buffers[c.w.buf]
        if old.id not in packed:
            data = pack(np.append(old.data, np.zeros(old.size % 2, old.dtype)))
            packed[old.id] = len(buffers)
            buffers.append(Buffer(len(buffers), "const", data.size, f"{old.label} two per byte", data=data,
                                  dtype=data.dtype))
        m = c.w.shape[0]
        width = min(columns, m)
        per_channel = c.w.strides[0] if outer else c.w.size // m
        scratch = Buffer(len(buffers), "arena", width * per_channel, f"{c.node} unpacked weights", dtype=old.dtype)
        buffers.append(scratch)
        for first in range(0, m, width):
            instrs += _chunk(c, packed[old.id], old.size, scratch.id, first, min(width, m - first), outer)
    return replace(prog, buffers=tuple(buffers), instrs=tuple(instrs))


def _channels_outer(c: Conv, buffers: list[Buffer]) -> bool | None:
    """Whether nibble_convs takes c, and how its weights lie: each output channel's a run (True; channel pairs'
    too, instr/passes.py pair_weights) or the output channels innermost (False); None where it does not take it."""
    w, old = c.w, buffers[c.w.buf]
    m = w.shape[0]
    if c.ring is not None or old.kind != "const" or old.data is None or old.dtype.kind != "i" or \
            old.size < MIN_WEIGHTS or w.offset or int(old.data.min()) < -8 or int(old.data.max()) > 7 or \
            not (c.group == 1 or c.group == m == c.x.shape[1] and w.shape[1] == 1):
        return None
    if all(s <= w.strides[0] for s in w.strides) and w.strides[0] * m <= old.size:
        return True
    return False if w.strides[0] == 1 and m % 2 == 0 and w.order() is not None else None


def _chunk(c: Conv, packed: int, size: int, scratch: int, first: int, count: int, outer: bool) -> list:
    """The maps unpacking output channels [first, first + count) of c's weights (packed, `size` values) into the
    scratch buffer, and the convolution of those channels reading them there (the output's value on the last
    one). Runs of channels: a pair's two whole (the last one's second the padding, pair_weights)."""
    w, label = c.w, f"{c.node} unpacked weights"
    shape = (count,) + w.shape[1:]
    if outer:
        step = w.strides[0]
        maps = _flat_maps(packed, first * step, scratch, min(-(-count // 2) * 2 * step, size - first * step), label)
        weights = View(scratch, 0, shape, w.strides)
    else:
        order = w.order()
        weights = View.laid_out(scratch, shape, order)
        inner = tuple(d for d in order if d != 0) + (0,)  # the channels last, as the maps pair them
        maps = unpacked_maps(_unit_strides(View(packed, first, shape, w.strides).permute(inner)),
                             _unit_strides(weights.permute(inner)), (), X, True, label)
    chunk = replace(c, out=c.out.slice(1, first, count), w=weights,
                    epi=replace(c.epi, ins=tuple(v.slice(1, first, count) for v in c.epi.ins)),
                    x=c.x.slice(1, first, count) if c.group > 1 else c.x, group=count if c.group > 1 else 1,
                    value=c.value if first + count == w.shape[0] else None)
    return maps + [chunk]


def _unit_strides(v: View) -> View:
    """The view with its unit dims' strides 0 (any stride serves them; unpacked_maps wants even ones)."""
    return replace(v, strides=tuple(0 if d == 1 else s for d, s in zip(v.shape, v.strides)))


def _flat_maps(packed: int, start: int, to: int, size: int, label: str) -> list[Map]:
    """The maps writing `size` values of the packed buffer (signed nibbles, flat pairs) from value `start` (even)
    into buffer `to` from its first element: the pairs, then an odd last value from its byte alone."""
    pairs = size - size % 2
    maps = unpacked_maps(View(packed, start, (pairs,), (1,)), View.of(to, (pairs,)), (), X, True, label) \
        if pairs else []
    if size % 2:
        maps.append(Map(View(to, pairs, (1,), (1,)), (View(packed, (start + pairs) // 2, (1,), (1,)),),
                        _signed(binary("&", X, 15)), label))
    return maps


def _weights(instr) -> tuple[str, int] | None:
    """The field of a kernel's weights and the dim of their output channels: a convolution's w [M, C, KH, KW],
    a matrix product's b [..., K, N]."""
    return ("w", 0) if isinstance(instr, Conv) else ("b", -1) if isinstance(instr, Gemm) else None


def _matrix(buf: Buffer, v: View, axis: int) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The buffer as a matrix of its output channels (rows, or columns) where the view covers it whole with the
    channels' dim outermost or innermost in memory: its shape and the strides of a view of one value per channel
    over it, else None."""
    order = v.order() if v.offset == 0 and v.size == buf.size else None
    channels = v.shape[axis]
    if order is None or channels == 1 or axis % len(v.shape) not in (order[0], order[-1]):
        return None
    outer = axis % len(v.shape) == order[0]
    return ((channels, buf.size // channels), (1, 0)) if outer else ((buf.size // channels, channels), (0, 1))


def _packing(buf: Buffer, v: View, axis: int) -> tuple[np.ndarray, np.ndarray | None, tuple | None] | None:
    """How a kernel's constant integer weights fit 4 bits, if they do: signed nibbles (offsets None) where they all
    fit [-8, 7] (int4 weights of zero point 0, uint4 of zero point 8); else unsigned nibbles above each output
    channel's least value (the offsets), where each channel spans 16 values at most (uint4 weights, any zero
    points) and the buffer is a matrix of them (_matrix) with pairs whole in its rows. The values to pack, flat or
    as that matrix, and the matrix's shape and strides."""
    data = buf.data
    if data is None or data.dtype.kind not in "iu" or data.size < MIN_WEIGHTS:
        return None
    if int(data.min()) >= -8 and int(data.max()) <= 7:
        return np.append(data, np.zeros(data.size % 2, data.dtype)), None, None
    matrix = _matrix(buf, v, axis)
    if matrix is None or matrix[0][1] % 2:
        return None
    values = data.reshape(matrix[0]).astype(np.int64)
    least = values.min(axis=1 if matrix[1][0] else 0, keepdims=True)
    return (values - least, least.reshape(-1), matrix) if int((values - least).max()) <= 15 else None


def unpack_nibbles(prog: Program) -> Program:
    """The constant weights of the convolutions and matrix products that fit 4 bits (_packing; MIN_WEIGHTS of them
    at least) that no chunks unpack (nibble_gemms, nibble_convs) stored two per byte and unpacked into an arena
    buffer of their type and layout before the first kernel that reads them."""
    instrs, buffers = [], list(prog.buffers)
    unpacked: dict[int, int] = {}  # const buffer -> its arena copy
    for instr in prog.instrs:
        field = _weights(instr)
        v = field and getattr(instr, field[0])
        if v is not None and buffers[v.buf].kind == "const" and v.buf not in unpacked and \
                not (isinstance(instr, Gemm) and instr.chunks):
            old = buffers[v.buf]
            found = _packing(old, v, field[1])
            if found is not None:
                unpacked[v.buf] = len(buffers)
                buffers.append(Buffer(len(buffers), "arena", old.size, f"{old.label} unpacked", dtype=old.dtype))
                instrs += _unpacking(buffers, old, *found)
        if v is not None and v.buf in unpacked:
            instr = replace(instr, **{field[0]: replace(v, buf=unpacked[v.buf])})
        instrs.append(instr)
    return replace(prog, buffers=tuple(buffers), instrs=tuple(instrs))


def _unpacking(buffers: list[Buffer], old: Buffer, values: np.ndarray, least: np.ndarray | None, matrix) -> list[Map]:
    """The maps writing the last buffer (old's unpacked copy) from `values` packed into a new const buffer: signed
    nibbles, the flat values (one more, 0, where old's count is odd); or unsigned ones plus their channel's
    `least` value (`matrix`: old as its matrix of channels, _matrix)."""
    packed = pack(values.astype(old.dtype))
    buffers.append(Buffer(len(buffers), "const", packed.size, f"{old.label} two per byte", data=packed.reshape(-1),
                          dtype=packed.dtype))
    label = f"{old.label} unpacked"
    if least is None:
        return _flat_maps(len(buffers) - 1, 0, len(buffers) - 2, old.size, label)
    buffers.append(Buffer(len(buffers), "const", least.size, f"{old.label} channel offsets",
                          data=least.astype(old.dtype), dtype=old.dtype))
    shape, strides = matrix
    x, out = View.of(len(buffers) - 2, shape), View.of(len(buffers) - 3, shape)
    return unpacked_maps(x, out, (View(len(buffers) - 1, 0, shape, strides),), X + Input(1), False, label)
