"""Activations: LOGISTIC, TANH, LEAKY_RELU, HARD_SWISH and PRELU. Float32 ones become the ONNX op. 8-bit ones
(int8 or uint8) become a table of the input's 256 values, each computed here as LiteRT's reference kernel
(BUILTIN_REF) computes it, except PRELU, whose slope varies along the tensor: its two requantizations are
cglow's IntMul, one chosen per element by the input's sign (the maps fuse into one loop).

LiteRT's reference LOGISTIC and TANH on 8 bits do not use gemmlowp's fixed-point functions (TFLite Micro's
kernels do): their Prepare fills a table from the float function (LUTPopulate): the input value in float32,
the function in float32 (expf, tanhf), times the output's inverse scale, rounded half away from zero. The
functions are taken here correctly rounded to float32; LiteRT's C library (glibc) gives that or misses it by
an ulp, too rarely to move a rounding: the tests find every table equal."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from ..ir import TensorType
from . import arith
from .build import Build, translator
from .elementwise import one_scale, table

f32 = np.float32
HIRES_SHIFT = 7  # HARD_SWISH computes on the input times 2^7 in int16


def _logistic32(x: np.ndarray) -> np.ndarray:
    """1.0f / (1.0f + std::exp(-x)) in float32 (past float32's range the exponential is inf, the result 0)."""
    with np.errstate(over="ignore"):
        e = np.exp(-x.astype(np.float64)).astype(f32)
    return f32(1) / (f32(1) + e)


def _tanh32(x: np.ndarray) -> np.ndarray:
    return np.tanh(x.astype(np.float64)).astype(f32)


def _float_table(b: Build, fn) -> None:
    """LUTPopulate: each input value dequantized in float32, fn, requantized in float32 to the output."""
    (sx, zx), (sy, zy) = one_scale(b, 0), one_scale(b, -1)
    info = np.iinfo(b.tensor(-1).dtype)

    def values(x):
        y = fn(f32(sx) * (x - zx).astype(f32)) * (f32(1) / f32(sy))
        return np.clip((arith.round_away(y) + zy).astype(np.int64), info.min, info.max)
    table(b, values)


@translator("LOGISTIC", "TANH")
def _logistic_tanh(b: Build, op) -> None:
    if not b.quantized():
        return b.finish(b.add("Sigmoid" if op.op == "LOGISTIC" else "Tanh", [b.value(0)]))
    scale = one_scale(b, -1)[0]
    if op.op == "LOGISTIC" and scale != 1 / 256:
        raise CglowError(f"{op.describe()}: the output's scale is {scale!r}; TFLite's 8-bit LOGISTIC takes 1/256")
    _float_table(b, _logistic32 if op.op == "LOGISTIC" else _tanh32)


@translator("LEAKY_RELU")
def _leaky_relu(b: Build, op) -> None:
    alpha = b.option("Alpha") or 0.0
    if not b.quantized():
        return b.finish(b.add("LeakyRelu", [b.value(0)], {"alpha": alpha}))
    (sx, zx), (sy, zy) = one_scale(b, 0), one_scale(b, -1)
    info = np.iinfo(b.tensor(-1).dtype)
    identity = arith.quantize_multiplier(float(f32(sx) / f32(sy)))  # Prepare's float arithmetic
    mult, shift = arith.quantize_multiplier(float(f32(sx) * f32(alpha) / f32(sy)))
    sign = -1 if mult < 0 else 1  # a negative slope's product is the positive one's negated (rounded apart)

    def values(x):
        d = x - zx
        below = sign * arith.scale(d, sign * mult, shift)
        return np.clip(zy + np.where(d >= 0, arith.scale(d, *identity), below), info.min, info.max)
    table(b, values)


def _hard_swish_params(b: Build, sx: float, sy: float) -> tuple[tuple[int, int], tuple[int, int]]:
    """HardSwishPrepare: the output's and the "reluish" factor's int16 multipliers and exponents, from the input
    on its high-resolution scale (sx / 2^7), in float32."""
    hires = f32(1 / (1 << HIRES_SHIFT)) * f32(sx)
    pairs = []
    for real in (hires / f32(sy), hires / f32(3 / 32768)):
        mult, exponent = arith.quantize_multiplier(float(real))
        pairs.append((32767 if mult >= (1 << 31) - 1 - (1 << 15) else (mult + (1 << 15)) >> 16, exponent))
    if pairs[0][1] > 0:
        raise CglowError(f"{b.op.describe()}: the input's scale over the output's is at least {1 << HIRES_SHIFT}; "
                         f"TFLite's 8-bit HARD_SWISH takes a smaller ratio")
    return pairs[0], pairs[1]


@translator("HARD_SWISH")
def _hard_swish(b: Build, op) -> None:
    """reference_ops::HardSwish on 8 bits: x * relu6(x + 3) / 6 in int16 fixed point."""
    if not b.quantized():
        return b.finish(b.add("HardSwish", [b.value(0)]))
    (sx, zx), (sy, zy) = one_scale(b, 0), one_scale(b, -1)
    (out_mult, out_exp), (relu_mult, relu_exp) = _hard_swish_params(b, sx, sy)
    info = np.iinfo(b.tensor(-1).dtype)

    def values(x):
        hires = arith.wrap16((x - zx) << HIRES_SHIFT)
        preshift = arith.high_mul16(hires, out_mult)
        reluish = hires if relu_exp <= 0 else arith.shift_left16(hires, relu_exp - 1)
        reluish = arith.high_mul16(reluish, relu_mult)
        reluish = arith.shift_left16(reluish, 1) if relu_exp > 0 else arith.divide_pot16(reluish, -relu_exp)
        reluish = (reluish + (1 << 15)) >> 1  # from [-1, 1] to [0, 1]
        y = arith.divide_pot16(arith.high_mul16(reluish, preshift, rounding=False), -out_exp)
        return np.clip(arith.wrap16(y + zy), info.min, info.max)
    table(b, values)


@translator("PRELU")
def _prelu(b: Build, op) -> None:
    """Float: ONNX PRelu. 8-bit: where the input is at least its zero point, the input requantized; below, its
    product with the slope (less their zero points) requantized by the other factor."""
    if not b.quantized():
        return b.finish(b.add("PRelu", [b.value(0), b.value(1)]))
    dtype = b.tensor(-1).dtype
    if b.tensor(1).dtype != dtype or b.tensor(0).shape != b.tensor(-1).shape:
        raise CglowError(f"{op.describe()}: TFLite's 8-bit PRELU takes a slope of the input's type and an output "
                         f"of its shape")
    (sx, zx), (sa, za), (sy, zy) = one_scale(b, 0), one_scale(b, 1), one_scale(b, -1)
    info = np.iinfo(dtype)
    out_type = TensorType(dtype, b.tensor(-1).shape)
    common = dict(a_zero=zx, y_zero=zy, lo=int(info.min), hi=int(info.max), rounding="tflite")
    mult, shift = arith.quantize_multiplier(float(f32(sx) / f32(sy)))
    above = b.add("IntMul", [b.value(0), b.const("one", np.array(1, dtype))],
                  dict(common, b_zero=0, mult=mult, shift=shift), out_type=out_type)
    mult, shift = arith.quantize_multiplier(float(f32(sx) * f32(sa) / f32(sy)))
    below = b.add("IntMul", [b.value(0), b.value(1)], dict(common, b_zero=za, mult=mult, shift=shift),
                  out_type=out_type)
    at_least = b.add("GreaterOrEqual", [b.value(0), b.const("zero", np.array(zx, dtype))])
    b.finish(b.add("Where", [at_least, above, below]))
