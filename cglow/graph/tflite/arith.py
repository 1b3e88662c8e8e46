"""TFLite's integer arithmetic, as its reference kernels (LiteRT's and TFLite Micro's) compute it: the
quantized multiplier and shift of a real factor, and the fixed-point product with its two roundings. The
generated C computes the same (runtime_c/requant_tfl.c); these give the compile-time tables and bounds."""
from __future__ import annotations

import math

import numpy as np


def round_away(x: float) -> int:
    """std::round: halves away from zero."""
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def quantize_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier: real = multiplier * 2^(shift - 31), multiplier a Q31 in [2^30, 2^31) (or 0)."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    fixed = round_away(q * (1 << 31))
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


def quantize(real: float, s: float, zero: int) -> int:
    """A real value in a tensor's integers, as the activation ranges are computed (float division)."""
    return zero + round_away(float(np.float32(real) / np.float32(s)))
