"""Quantization parameters as the graph states them, and the integer arithmetic derived from them at compile
time: fixed-point multipliers, zero points folded into weights and biases, clamping bounds."""
from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np

from ..edit import Site
from ..ir import Node


@dataclass(frozen=True)
class QParams:
    """real = (q - zero) * scale, per tensor (axis None, one scale) or along one axis."""
    scale: np.ndarray   # float64, 1-D
    zero: np.ndarray    # int64, 1-D, as long as scale
    dtype: np.dtype     # of q
    axis: int | None

    @property
    def per_tensor(self) -> bool:
        return self.axis is None

    def same(self, other: "QParams") -> bool:
        return self.per_tensor and other.per_tensor and self.dtype == other.dtype and \
            float(self.scale[0]) == float(other.scale[0]) and int(self.zero[0]) == int(other.zero[0])

    @property
    def bounds(self) -> tuple[int, int]:
        info = np.iinfo(self.dtype)
        return int(info.min), int(info.max)


def qparams(site: Site, node: Node) -> QParams | None:
    """A QuantizeLinear's or DequantizeLinear's parameters when they are constants, per tensor or per axis, to or
    from an integer type, else None (blocked or float8 quantization runs as its maps)."""
    if node.attr("block_size", 0):
        return None
    scale = site.const(node.inputs[1])
    zero = site.const(node.inputs[2]) if len(node.inputs) > 2 else None
    if scale is None or (len(node.inputs) > 2 and node.inputs[2] and zero is None):
        return None
    quantized = node.inputs[0] if node.op == "DequantizeLinear" else node.outputs[0]
    dtype = site.graph.types[quantized].dtype
    if dtype.kind not in "iu":
        return None
    rank = len(site.shape(node.inputs[0]))
    axis = None if scale.size == 1 and scale.ndim <= 1 else node.attr("axis", 1) % rank
    zero = np.zeros(scale.size, np.int64) if zero is None else zero.reshape(-1).astype(np.int64)
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        return None
    return QParams(scale.reshape(-1).astype(np.float64), zero, np.dtype(dtype), axis)


@dataclass(frozen=True)
class Dequantized:
    node: Node       # the DequantizeLinear
    p: QParams

    @property
    def source(self) -> str:
        return self.node.inputs[0]


def dequantized(site: Site, name: str) -> Dequantized | None:
    node = site.producer.get(name)
    if node is None or node.op != "DequantizeLinear":
        return None
    p = qparams(site, node)
    return None if p is None else Dequantized(node, p)


SHARED_BITS = 24  # the fewest significant bits a multiplier keeps when the factors of a layer share their shift
SHIFT_STEP = 4    # a shared shift is a multiple of this where the multipliers keep SHARED_BITS bits


def multipliers(real: np.ndarray, shared: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Each positive real factor as multiplier * 2**-shift, multiplier in [2**30, 2**31) (int32) and shift in
    [1, 62], so that a product with an int32 accumulator, rounded, fits in int64 (runtime_c/requant.c). A factor
    too small for the shift range loses low bits of its multiplier (down to zero: the result is then the zero
    point). `shared`: the factors (a layer's, one per output channel) take one shift where that leaves every
    multiplier SHARED_BITS significant bits or more (as many as a float32 factor has): the smallest of theirs,
    rounded down to a multiple of SHIFT_STEP where the bits allow. The shift is then one literal of the
    kernel's requantization, not a number loaded per output, and layers of one shape mostly take the same, so
    that they share their kernel's code (kws: 4.6 KiB of flash)."""
    mults, shifts = _multipliers(real)
    slack = 31 - SHARED_BITS - int(shifts.max() - shifts.min())  # the bits the smallest shift may still lose
    if shared and mults.size > 1 and slack >= 0 and shifts.max() < 62:
        least = int(shifts.min())
        least -= least % SHIFT_STEP if least % SHIFT_STEP <= slack else 0
        mults = np.array([round(math.ldexp(float(r), least)) for r in np.asarray(real, np.float64).reshape(-1)],
                         np.int32)
        shifts = np.full_like(shifts, least)
    return mults, shifts


def requant_attrs(out: QParams, real: np.ndarray, bounds: tuple[int, int]) -> dict:
    """The attributes of a requantization by the positive factors `real` to the output's parameters, clamped."""
    mult, shift = multipliers(real, shared=True)
    return dict(mult=mult, shift=shift, y_zero=int(out.zero[0]), lo=bounds[0], hi=bounds[1])


def _multipliers(real: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mults, shifts = [], []
    for r in np.asarray(real, np.float64).reshape(-1):
        mantissa, exponent = math.frexp(float(r))  # r = mantissa * 2**exponent, mantissa in [0.5, 1)
        m = round(mantissa * (1 << 31))
        if m == 1 << 31:
            m, exponent = 1 << 30, exponent + 1
        shift = 31 - exponent
        if shift > 62:
            m, shift = (m + (1 << (shift - 63))) >> (shift - 62), 62
        if shift < 1:
            raise ValueError(f"requantization factor {r} is too large")
        mults.append(m)
        shifts.append(shift)
    return np.array(mults, np.int32), np.array(shifts, np.int32)


NUDGE = 2.0 ** -22  # the largest relative change of a multiplier that makes it round as float32 does


def float32_multipliers(factors: np.ndarray, lo: int, hi: int,
                        shared: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """multipliers() of float32 factors (sharing their shift as it says, `shared`), each nudged (by at most
    NUDGE of itself) so that the rounding of acc * multiplier / 2**shift equals onnxruntime's in float32,
    rint(float32(acc) * factor), for as many as can be of the accumulators whose result lies in [lo, hi]
    (before the zero point). The float32 product
    rounds onto a half that the exact one is only near, one result in about 2**24, and then to even; those
    accumulators lie within the nudge of a half. Each of them rounds as float32 does for an interval of
    multipliers: the one chosen lies in all of them, or where one factor's halves round both ways (which no
    multiplier follows) in those of the accumulators nearest zero (the likeliest ones, each weighing 1 / |acc|);
    then an odd one (a float32 factor's exact multiplier ends in 7 zero bits, so that large accumulators can
    land exactly on a half, which only the slower cglow_requant rounds), nearest the exact one."""
    mults, shifts = multipliers(factors, shared)
    f = np.asarray(factors, np.float32).reshape(-1)
    halves = np.arange(lo, hi, dtype=np.float64) + 0.5  # between the results lo, ..., hi
    reach = (np.abs(halves) + 1) * NUDGE
    first = np.ceil((halves - reach) / f[:, None])
    counts = np.maximum(np.floor((halves + reach) / f[:, None]) - first + 1, 0).astype(np.int64)
    unsure = (counts.sum(axis=1) > 256) | (shifts >= 62)  # factors too small to nudge
    counts[unsure] = 0
    counts = counts.reshape(-1)
    channel = np.repeat(np.arange(f.size).repeat(halves.size), counts)
    offset = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    acc = np.repeat(first.reshape(-1), counts).astype(np.int64) + offset
    target = np.rint(acc.astype(np.float32) * f[channel]).astype(np.int64)
    shift = shifts[channel].astype(np.int64)

    def missed(step: int) -> np.ndarray:
        """Per factor, how many of its accumulators multiplier + step rounds otherwise than float32."""
        trial = mults[channel].astype(np.int64) + step
        floor = (acc * trial) >> shift
        rest, half = acc * trial - (floor << shift), np.int64(1) << (shift - 1)
        return np.bincount(channel, floor + (rest > half) + ((rest == half) & (floor % 2 == 1)) != target,
                           minlength=f.size)

    chosen = mults.copy()
    for step in (-1, 1):  # odd where that still rounds every accumulator as float32 does (+1 before -1)
        chosen = np.where((missed(step) == 0) & ~unsure, mults + step, chosen)
    for c in np.flatnonzero(missed(0)):
        mine = (channel == c) & (acc != 0)
        chosen[c] = _nudged(acc[mine].tolist(), target[mine].tolist(), int(mults[c]), int(shifts[c]))
    return chosen.astype(np.int32), shifts


def _nudged(accs: list[int], targets: list[int], m: int, s: int) -> int:
    low, high = max(math.ceil(m * (1 - NUDGE)), 1), min(math.floor(m * (1 + NUDGE)), (1 << 31) - 1)
    spans = []
    for a, r in zip(accs, targets):
        below, above = (2 * r - 1) << (s - 1), (2 * r + 1) << (s - 1)  # a * multiplier between, ends if r is even
        if a < 0:
            below, above = above, below
        least, most = -(-below // a), above // a
        least += r % 2 and least * a == below
        most -= r % 2 and most * a == above
        spans.append((max(least, low), min(most, high), 1 / abs(a)))
    points = [p + d for p in [m] + [p for least, most, _ in spans for p in (least, most)] for d in (-1, 0, 1)]
    return max((p for p in points if low <= p <= high),
               key=lambda p: (sum(w for least, most, w in spans if least <= p <= most), p % 2, -abs(p - m)))


def quantize(real: np.ndarray, p: QParams) -> np.ndarray:
    """QuantizeLinear as onnxruntime computes it: float32 division, round half to even, saturate."""
    scale = np.float32(p.scale[0])
    q = np.rint(np.asarray(real, np.float32) / scale).astype(np.float64) + int(p.zero[0])
    lo, hi = p.bounds
    return np.clip(q, lo, hi).astype(p.dtype)


def clamp_bounds(out: QParams, lo: float | None, hi: float | None) -> tuple[int, int]:
    """The integer output range of a requantization followed by clamping the real value to [lo, hi]: the
    quantized bounds (quantization is monotone, so clamping before or after it is the same)."""
    qlo, qhi = out.bounds
    if lo is not None:
        qlo = max(qlo, int(quantize(np.array([lo]), out)[0]))
    if hi is not None:
        qhi = min(qhi, int(quantize(np.array([hi]), out)[0]))
    return qlo, qhi


def narrow(values: np.ndarray) -> np.ndarray:
    """Integer values in the narrowest of int8, int16, int32 that holds them all."""
    for dtype in (np.int8, np.int16, np.int32):
        info = np.iinfo(dtype)
        if values.size == 0 or (values.min() >= info.min and values.max() <= info.max):
            return values.astype(dtype)
    raise ValueError("values beyond int32")
