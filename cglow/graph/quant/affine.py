"""A per-channel affine map y = s * x + t on 8-bit values (a BatchNormalization that onnxruntime's quantizer
left in float between a DequantizeLinear and a QuantizeLinear, when its pre-processing did not fold it into
the layer before) as integer arithmetic: no float, and no float tensor in the arena.

In quantization steps of the output, q_y = z_y + round(f * (q_x - z_x) + g) with f = s * scale_x / scale_y
and g = t / scale_y, per channel. Each channel's f and g are integers P and Q in a unit u, a power of two
that puts the largest |P (q_x - z_x) + Q| just below 2**30 (int32), and the requantization multiplies by u:
exact but for the rounding of P and Q, below 2**-21 of a step over the 8-bit range. A negative s (a
negative BatchNormalization scale) is a negative P: nothing else changes."""
from __future__ import annotations

import math

import numpy as np

from .params import QParams

SUM_BITS = 30  # |P (q_x - z_x) + Q| < 2**30


def integer_affine(s: np.ndarray, t: np.ndarray, x: QParams, out: QParams,
                   reach: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P, Q (int32) and the unit u per channel, for inputs with |q_x - z_x| <= reach."""
    f = s * x.scale[0] / out.scale[0]
    g = t / out.scale[0]
    largest = np.abs(f) * reach + np.abs(g)
    unit = np.array([math.ldexp(1.0, math.frexp(v)[1] - SUM_BITS) if v > 0 else 1.0 for v in largest])
    return np.rint(f / unit).astype(np.int32), np.rint(g / unit).astype(np.int32), unit
