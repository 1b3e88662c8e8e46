"""TFLite's integer arithmetic, as its reference kernels (LiteRT's and TFLite Micro's) compute it: the
quantized multiplier and shift of a real factor, and the fixed-point product with its two roundings. The
generated C computes the same (runtime_c/requant_tfl.c); these give the compile-time tables and bounds."""
from __future__ import annotations

import math

import numpy as np


def round_away(x):
    """std::round (roundf of float32 values too: exact in float64, where adding the half cannot round): halves
    away from zero, as a float64 array (or scalar) of whole numbers."""
    x = np.asarray(x, np.float64)
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier: real = multiplier * 2^(shift - 31), multiplier a Q31 in [2^30, 2^31) (or 0)."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    fixed = int(round_away(q * (1 << 31)))
    if fixed == 1 << 31:
        fixed, shift = fixed // 2, shift + 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        return (1 << 31) - 1, 30
    return fixed, shift


def quantize_multipliers(reals) -> tuple[np.ndarray, np.ndarray]:
    pairs = [quantize_multiplier(float(r)) for r in np.asarray(reals, np.float64).reshape(-1)]
    return np.array([m for m, _ in pairs], np.int32), np.array([s for _, s in pairs], np.int32)


def high_mul(a: np.ndarray, b: int) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul: a * b / 2^31, rounded half up (b is never INT32_MIN here)."""
    ab = np.asarray(a, np.int64) * np.int64(b)
    nudged = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    return np.where(nudged >= 0, nudged >> 31, -((-nudged) >> 31)).astype(np.int64)  # C division: toward zero


def divide_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    """RoundingDivideByPOT: x / 2^exponent, rounded half away from zero."""
    x = np.asarray(x, np.int64)
    mask = (1 << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)


def scale(x, multiplier: int, shift: int) -> np.ndarray:
    """MultiplyByQuantizedMultiplier (x int32): x * multiplier * 2^(shift - 31) as the reference rounds it."""
    left, right = max(shift, 0), max(-shift, 0)
    shifted = (np.asarray(x, np.int64) << left).astype(np.int32)  # int32 arithmetic, as the kernel's
    return divide_pot(high_mul(shifted, multiplier), right)


def quantize(real, s: float, zero: int):
    """A real value (or an array of them) in a tensor's integers, unsaturated, as TFLite's QUANTIZE and the
    activation ranges compute it: divided by the scale in float32, rounded half away from zero, plus the zero
    point (an int, or an int64 array)."""
    q = zero + round_away(np.float32(real) / np.float32(s)).astype(np.int64)
    return int(q) if np.ndim(q) == 0 else q


def wrap16(x) -> np.ndarray:
    """x stored in an int16_t (C++ wraps it)."""
    return (np.asarray(x, np.int64) + (1 << 15)) % (1 << 16) - (1 << 15)


def high_mul16(a, b, rounding: bool = True) -> np.ndarray:
    """gemmlowp's SaturatingRoundingDoublingHighMul on int16 (a * b / 2^15, rounded half up), or with
    `rounding` off TFLite's SaturatingDoublingHighMul (truncated toward zero); -2^15 * -2^15 saturates."""
    a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
    ab = a * b
    if rounding:
        ab = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    high = np.where(ab >= 0, ab >> 15, -((-ab) >> 15))  # C division: toward zero
    return np.where((a == b) & (a == -(1 << 15)), (1 << 15) - 1, wrap16(high))


def divide_pot16(x, exponent: int) -> np.ndarray:
    """gemmlowp's RoundingDivideByPOT on int16: its mask is (2^exponent - 1) stored in an int16_t, so from
    exponent 16 on it is -1 and the result is 1 for x >= 0, -1 below."""
    x = np.asarray(x, np.int64)
    mask = int(wrap16((1 << exponent) - 1))
    threshold = (mask >> 1) + (x < 0)
    return (x >> min(exponent, 31)) + ((x & mask) > threshold)


def shift_left16(x, amount: int) -> np.ndarray:
    """TFLite's SaturatingLeftShift of an int16: x * 2^amount saturated to int16."""
    return np.clip(np.asarray(x, np.int64) << amount, -(1 << 15), (1 << 15) - 1)
