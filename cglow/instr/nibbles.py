"""4-bit integer constants packed two per byte in flash, and the maps that unpack them.

A DequantizeLinear of constant int4 or uint4 values (which graph/stored_types.py widens to 8 bits) reads them so
(lower/ops/quant.py): each pair of elements along the last dim in one byte, the first in its low nibble as ONNX
packs int4. The map becomes two maps over the same bytes, one writing the even elements from the low nibbles, one
the odd elements from the high nibbles; every other view takes every other element of its last dim (a stride
twice its own).

The integer kernels' weights that fit signed nibbles are stored so by default and unpacked a chunk at a time
(instr/narrow_weights.py). With --nibble-weights, the others that fit 4 bits (signed, or unsigned above each output
channel's least value: uint4 of any zero points; layouts that no chunk takes) are stored so too, by the
last pass (unpack_nibbles): their buffer's values are packed, and maps unpack them into an arena buffer of the same
type and layout just before the first kernel that reads them. Flash for half their bytes (an eighth of int32
weights'), against RAM for the largest such layer's weights, alive from the maps to their last reader, and one pass
over them a run."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .expr import Expr, Input, binary, substitute
from .ir import OCTET, Buffer, Conv, Gemm, Map, Program, View

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


def flat_maps(packed: int, start: int, to: int, size: int, label: str) -> list[Map]:
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
    a matrix product's b [..., K, N] (none where its kernel unpacks them itself: Gemm.chunks, Gemm.nibbles)."""
    if isinstance(instr, Conv):
        return "w", 0
    return ("b", -1) if isinstance(instr, Gemm) and not instr.chunks and not instr.nibbles else None


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
    at least) that no chunks unpack (instr/narrow_weights.py) stored two per byte and unpacked into an arena
    buffer of their type and layout before the first kernel that reads them."""
    instrs, buffers = [], list(prog.buffers)
    unpacked: dict[int, int] = {}  # const buffer -> its arena copy
    for instr in prog.instrs:
        field = _weights(instr)
        v = field and getattr(instr, field[0])
        if v is not None and buffers[v.buf].kind == "const" and v.buf not in unpacked:
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
        return flat_maps(len(buffers) - 1, 0, len(buffers) - 2, old.size, label)
    buffers.append(Buffer(len(buffers), "const", least.size, f"{old.label} channel offsets",
                          data=least.astype(old.dtype), dtype=old.dtype))
    shape, strides = matrix
    x, out = View.of(len(buffers) - 2, shape), View.of(len(buffers) - 3, shape)
    return unpacked_maps(x, out, (View(len(buffers) - 1, 0, shape, strides),), X + Input(1), False, label)
