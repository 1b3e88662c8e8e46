"""SOFTMAX along the last axis. Float32: ONNX Softmax of the input times beta. 8-bit (int8 or uint8; the output
the input's type or int16): cglow's IntSoftmax, which computes per row what LiteRT's reference kernel computes
(reference_ops::Softmax, TFLite Micro's too), in C (runtime_c/exp_tfl.c, reciprocal_tfl.c); its factors come
from the kernel's Prepare (PreprocessSoftmaxScaling, CalculateInputRadius), here."""
from __future__ import annotations

import math

import numpy as np

from ...errors import CglowError
from ..ir import TensorType
from . import arith
from .build import Build, translator
from .elementwise import one_scale

DIFF_BITS = 5          # the scaled differences are Q5.26
MAX_ROW = 4095         # longer rows could take the int32 sum of the row's Q12.19 exponentials past 2^31
INT8_OUT = (1 / 256, -128)


def scaling(beta: float, scale: float) -> tuple[int, int, int]:
    """PreprocessSoftmaxScaling and CalculateInputRadius: the multiplier and left shift taking a difference
    of input values to a Q5.26 of beta times its real value (in double; the factor capped below 2^31), and
    the smallest difference that counts (its Q5.26 above -32). Only the row's maximum counts where the
    factor reaches 2^30 (beta times the scale at least 16): a shift of 31."""
    real = min(beta * scale * (1 << (31 - DIFF_BITS)), (1 << 31) - 1.0)
    if not real > 1:
        raise CglowError(f"beta times the input's scale is {beta * scale!r}; TFLite's 8-bit SOFTMAX takes "
                         f"more than 2^-{31 - DIFF_BITS}")
    mult, shift = arith.quantize_multiplier(real) if real < 1 << 30 else (int(arith.round_away(real)), 31)
    radius = math.floor(((1 << DIFF_BITS) - 1) * (1 << (31 - DIFF_BITS)) / (1 << shift))
    return mult, shift, -radius


@translator("SOFTMAX")
def _softmax(b: Build, op) -> None:
    beta = b.option("Beta")
    beta = 1.0 if beta is None else beta
    x = b.value(0)
    if b.tensor(0).dtype == np.float32:
        if beta != 1.0:
            x = b.add("Mul", [x, b.const("beta", np.array(beta, np.float32))])
        return b.finish(b.add("Softmax", [x], {"axis": -1}))
    dtype = b.tensor(-1).dtype
    if b.tensor(0).dtype.name not in ("int8", "uint8") or dtype not in (b.tensor(0).dtype, np.int16):
        raise CglowError(f"{op.describe()}: a {b.tensor(0).dtype.name} input to a {dtype.name} output is not "
                         f"supported (8-bit inputs give their own type or int16)")
    if dtype == np.int8:  # LiteRT's Prepare checks these; its other outputs take 1/2^bits and the least value
        sy, zy = one_scale(b, -1)
        if zy != INT8_OUT[1] or abs(sy - INT8_OUT[0]) > INT8_OUT[0] / 1000:
            raise CglowError(f"{op.describe()}: the output's scale and zero point are {sy!r} and {zy}; TFLite's "
                             f"int8 SOFTMAX takes 1/256 and -128")
    depth = b.tensor(0).shape[-1]
    if depth > MAX_ROW:
        raise CglowError(f"{op.describe()}: rows of {depth} values; cglow's 8-bit SOFTMAX takes at most {MAX_ROW}")
    mult, shift, diff_min = scaling(float(beta), one_scale(b, 0)[0])
    info = np.iinfo(dtype)
    attrs = dict(mult=mult, shift=shift, diff_min=diff_min, y_zero=int(info.min), lo=int(info.min), hi=int(info.max))
    b.finish(b.add("IntSoftmax", [x], attrs, out_type=TensorType(dtype, b.tensor(-1).shape)))
