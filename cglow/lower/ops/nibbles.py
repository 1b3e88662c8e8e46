"""4-bit integer constants packed two per byte in flash, unpacked by the map that reads them (a DequantizeLinear of
int4 or uint4 weights, which graph/stored_types.py widens to 8 bits): each pair of elements along the last dim
in one byte, the first in its low nibble as ONNX packs int4. The map becomes two maps over the same bytes, one
writing the even elements from the low nibbles, one the odd elements from the high nibbles; every other view
takes every other element of its last dim (a stride twice its own).

The integer kernels' weights that fit 4 bits (an int4 or uint4 DequantizeLinear's weights less their zero points,
folded into IntConv or IntGemm) are stored so too, in the order the kernel reads them, and unpacked into the arena
just before the kernel (unpacked_copy): flash for half their bytes, against RAM for the largest such layer's
weights, live during its kernel only, and one pass over them a run."""
from __future__ import annotations

import numpy as np

from ...instr.expr import Expr, Input, binary, substitute
from ...instr.ir import Map, View
from ..context import Context

X = Input(0)


def packable(data: np.ndarray | None) -> bool:
    """Whether a constant is 8-bit integers that fit 4 bits (int8 in [-8, 7], uint8 in [0, 15]) in pairs along its
    last dim."""
    if data is None or data.dtype not in (np.int8, np.uint8) or not data.ndim or data.shape[-1] % 2:
        return False
    low, high = (-8, 7) if data.dtype == np.int8 else (0, 15)
    return bool(data.size) and int(data.min()) >= low and int(data.max()) <= high


def offsets(data: np.ndarray | None, axis: int) -> np.ndarray | None:
    """The per-channel (along `axis`) offsets that bring an integer kernel's constant weights (int8, their zero
    points subtracted) to 4 bits, or None where they do not fit: none (all 0) where all fit [-8, 7] (int4 weights
    of zero point 0, uint4 of zero point 8), stored as signed nibbles; else each channel's least value, where
    every channel spans 16 values at most (uint4 weights, any zero points) and pairs of them are whole (a channel's
    values an even count where axis is 0, else an even count of channels), stored as
    unsigned nibbles above it."""
    if data is None or data.dtype != np.int8 or not data.size:
        return None
    if int(data.min()) >= -8 and int(data.max()) <= 7:
        return np.zeros(data.shape[axis], np.int8)
    rows = _as_matrix(data, axis)
    least = rows.min(axis=1 if axis == 0 else 0, keepdims=True)
    fits = int((rows.astype(np.int16) - least).max()) <= 15 and rows.shape[1] % 2 == 0
    return least.reshape(-1).astype(np.int8) if fits else None


def _as_matrix(data: np.ndarray, axis: int) -> np.ndarray:
    """Weights as a matrix whose rows (axis 0) or columns (else: the last axis) are their channels."""
    return data.reshape(data.shape[0], -1) if axis == 0 else data.reshape(-1, data.shape[-1])


def unpacked_copy(ctx: Context, data: np.ndarray, least: np.ndarray, axis: int, label: str) -> View:
    """Weights that fit 4 bits above their channels' `least` values (offsets) stored two per byte and unpacked
    into an int8 arena buffer, which the returned view (data's shape, row-major) reads: as signed nibbles where
    `least` is all 0 (an odd count's last nibble 0), else as unsigned nibbles plus their channel's value."""
    if not least.any():
        flat = np.append(data.reshape(-1), np.int8(0)) if data.size % 2 else data.reshape(-1)
        out = ctx.temp(flat.shape, f"{label} unpacked", np.int8)
        packed, ins, expr, signed = pack(flat), (), X, True
    else:
        flat = _as_matrix(data, axis)
        out = ctx.temp(flat.shape, f"{label} unpacked", np.int8)
        channels = ctx.const_view(least, f"{label} channel offsets").buf
        ins = (View(channels, 0, flat.shape, (1, 0) if axis == 0 else (0, 1)),)
        packed, expr, signed = pack(flat - (least[:, None] if axis == 0 else least)), X + Input(1), False
    buf = ctx.const_view(packed, f"{label} two per byte").buf
    for m in unpacked_maps(View.of(buf, flat.shape), out, ins, expr, signed, f"{label} unpacked"):
        ctx.emit(m)
    return View.of(out.buf, data.shape)


def pack(data: np.ndarray) -> np.ndarray:
    """The pairs along the last dim, two per byte (uint8), the first element in the low nibble."""
    nibbles = data.astype(np.uint8) & 15
    return nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)


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
        value = binary("-", binary("^", nibble, 8), 8) if signed else nibble
        maps.append(Map(_every_other(out, first), (packed,) + tuple(_every_other(v, first) for v in ins),
                        substitute(expr, [value]), name))
    return maps


def _every_other(view: View, first: int) -> View:
    """The view's elements `first`, first + 2... along its last dim."""
    stride = view.strides[-1]
    return View(view.buf, view.offset + first * stride, view.shape[:-1] + (view.shape[-1] // 2,),
                view.strides[:-1] + (2 * stride,))
