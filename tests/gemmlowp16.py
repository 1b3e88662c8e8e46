"""gemmlowp's int16 fixed-point logistic and tanh (fixedpoint.h, FixedPoint<int16_t, integer_bits>), written
again in plain Python integers, step by step as gemmlowp stores each int16 result: the reference that
tests/tflite/test_tflite_lstm.py holds cglow's runtime_c/logistic16.c and tanh16.c to, on every int16 input. (Through
the whole 8-bit LSTM, both agree with LiteRT to the bit.)"""
from __future__ import annotations


def wrap(x: int) -> int:
    return ((x + 32768) & 0xFFFF) - 32768


def _div(x: int, d: int) -> int:
    """C's integer division: toward zero."""
    return x // d if x >= 0 else -((-x) // d)


def mul(a: int, b: int) -> int:
    """SaturatingRoundingDoublingHighMul."""
    if a == b == -32768:
        return 32767
    ab = a * b
    return wrap(_div(ab + ((1 << 14) if ab >= 0 else 1 - (1 << 14)), 1 << 15))


def divide_pot(x: int, exponent: int) -> int:
    """RoundingDivideByPOT."""
    mask = (1 << exponent) - 1
    return (x >> exponent) + ((x & mask) > (mask >> 1) + (x < 0))


def shift_left(x: int, exponent: int) -> int:
    """SaturatingRoundingMultiplyByPOT, exponent >= 0."""
    threshold = (1 << (15 - exponent)) - 1
    return 32767 if x > threshold else -32768 if x < -threshold else wrap(x << exponent)


def constant(raw32: int) -> int:
    """RescaleConstantInitializer: a 32-bit constant rounded to 16 bits."""
    return wrap(divide_pot(raw32, 16))


def _exp_quarter(a: int) -> int:
    x = wrap(a + (1 << 12))
    x2 = mul(x, x)
    x3, x4 = mul(x2, x), mul(x2, x2)
    series = divide_pot(wrap(mul(wrap(divide_pot(x4, 2) + x3), constant(715827883)) + x2), 1)
    c = constant(1895147668)
    return min(32767, c + mul(c, wrap(x + series)))


def exp_negative(a: int, integer_bits: int) -> int:
    fractional = 15 - integer_bits
    quarter = 1 << (fractional - 2)
    reduced = wrap((a & (quarter - 1)) - quarter)
    result = _exp_quarter(shift_left(reduced, integer_bits))
    remainder = wrap(reduced - a)
    for k, m in ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401),
                 (4, 242)):
        if integer_bits > k and remainder & (1 << (fractional + k)):
            result = mul(result, constant(m))
    if integer_bits > 5 and a < constant(-(1 << (36 - integer_bits))):
        result = 0
    return 32767 if a == 0 else result


def _newton(half_denominator: int) -> int:
    x = wrap(constant(1515870810) + mul(half_denominator, constant(-1010580540)))
    for _ in range(3):
        x = wrap(x + shift_left(mul(x, wrap((1 << 13) - mul(half_denominator, x))), 2))
    return x


def _half_sum(a: int, b: int) -> int:
    s = a + b
    return wrap(_div(s + (1 if s >= 0 else -1), 2))


def logistic(a: int, integer_bits: int) -> int:
    magnitude = a if a > 0 else wrap(-a)
    positive = shift_left(_newton(_half_sum(exp_negative(wrap(-magnitude), integer_bits), 32767)), 1)
    return 16384 if a == 0 else positive if a > 0 else wrap(32767 - positive)


def tanh(a: int, integer_bits: int) -> int:
    negative = a if a < 0 else wrap(-a)
    t = shift_left(wrap(_newton(_half_sum(exp_negative(negative, integer_bits + 1), 32767)) - (1 << 13)), 2)
    return 0 if a == 0 else wrap(-t) if a < 0 else t
