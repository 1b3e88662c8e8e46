"""Requantization: the fixed-point multipliers and the shift a layer's channels share, and the IntTable
kernels (Sigmoid and other unary tables, a bare requantization).

Bit-exact against the NumPy integer reference of tests/qdq.py, whose docstring gives the semantics; each
kernel also runs on seeded random shapes and parameters, each compiled graph on a few inputs, one of them
the extremes of the input type (saturation). Compiled libraries are cached by hash.
"""
from __future__ import annotations

import numpy as np
import pytest

from cglow.graph.registry import OPS
from cglow.graph.quant.params import NUDGE, SHARED_BITS, SHIFT_STEP, float32_multipliers, multipliers
from tests.onnx_ops import node_model, ort_run
from tests.qdq import INT8, UINT8, QGraph, dequantize_f32, folded_ops, quantize_f32, run

OPSET = 20  # every table op's newest form (Gelu's first)


def test_multipliers():
    """The fixed-point factors the reference (and cglow) use: multiplier in [2**30, 2**31), shift in [1, 62],
    multiplier / 2**shift the real factor to 2**-31 relative; below 2**-32 the multiplier loses low bits (to
    0: the output is the zero point); 2**30 and above is refused."""
    rng = np.random.default_rng(16)
    reals = np.concatenate([2.0 ** rng.uniform(-31, 29.9, 2000), [1.0, 0.5, 2.0 ** -31, 2.0 ** 29, 1 - 2.0 ** -40,
                                                                  0.1, 1 / 3]])
    mult, shift = multipliers(reals)
    assert mult.dtype == np.int32 and shift.dtype == np.int32
    assert np.all((mult >= 1 << 30) & (mult.astype(np.int64) < 1 << 31)) and np.all((shift >= 1) & (shift <= 62))
    exact = [abs(m / 2.0 ** s - r) / r for m, s, r in zip(mult.tolist(), shift.tolist(), reals.tolist())]
    assert max(exact) <= 2.0 ** -31
    assert multipliers(np.array([1 - 2.0 ** -40]))[0][0] == 1 << 30  # rounds up to the next power of two
    tiny, tiny_shift = multipliers(np.array([2.0 ** -40, 2.0 ** -94]))
    assert list(tiny_shift) == [62, 62] and tiny[0] == 1 << 22 and tiny[1] == 0
    with pytest.raises(ValueError):
        multipliers(np.array([2.0 ** 30]))


def test_multipliers_share_a_layers_shift():
    """A layer's factors take one shift where every multiplier keeps SHARED_BITS significant bits (the
    requantization's shift is then a literal): the smallest of theirs, rounded down to a multiple of SHIFT_STEP
    where the bits allow; each multiplier is its factor times 2**shift, rounded. Factors 2**7 or more apart
    keep a shift each; one factor is as multipliers() makes it."""
    rng = np.random.default_rng(3)
    near = 2.0 ** rng.uniform(-12, -12 + 31 - SHARED_BITS, 64)
    mult, shift = multipliers(near, shared=True)
    assert len(set(shift.tolist())) == 1 and shift[0] == multipliers(near)[1].min()  # no bit to spare
    close = near[near < 2.0 ** -10]
    least = int(multipliers(close)[1].min())
    assert least % SHIFT_STEP and set(multipliers(close, shared=True)[1].tolist()) == {least - least % SHIFT_STEP}
    assert mult.min() >= 1 << (SHARED_BITS - 1) and mult.astype(np.int64).max() < 1 << 31
    assert all(abs(m - r * 2.0 ** shift[0]) <= 0.5 for m, r in zip(mult.tolist(), near.tolist()))
    far = np.array([2.0 ** -12, 2.0 ** -20])
    assert np.array_equal(np.stack(multipliers(far, shared=True)), np.stack(multipliers(far)))
    assert np.array_equal(np.stack(multipliers(near[:1], shared=True)), np.stack(multipliers(near[:1])))
    nudged, shifts = float32_multipliers(near.astype(np.float32), -128, 127, shared=True)
    assert len(set(shifts.tolist())) == 1 and np.all(np.abs(nudged - mult) <= mult * NUDGE + 1)


def test_float32_multipliers_round_as_onnxruntime():
    """onnxruntime requantizes a convolution or a matrix product in float32, rint(float32(acc) * factor): where
    the float32 product rounds onto a half that the exact one is only near, it goes to even. On every
    accumulator of 300 random factors whose result is an int8, the nudged multipliers (by at most NUDGE of
    themselves) round as float32 does except where a factor's halves round both ways (a, 3a, 5a... near
    halves, rounded up, down, up: no multiplier follows that), never worse than the exact multiplier, and in
    all at most a third as often (observed: 20 accumulators where the exact multipliers miss 66)."""
    rng = np.random.default_rng(7)
    factors = (2.0 ** rng.uniform(-10, -6, 300)).astype(np.float32)
    exact, shifts = multipliers(factors.astype(np.float64))
    nudged, same_shifts = float32_multipliers(factors, -128, 127)
    assert np.array_equal(shifts, same_shifts)
    missed = {"exact": 0, "nudged": 0}
    for f, m, n, s in zip(factors, exact.tolist(), nudged.tolist(), shifts.tolist()):
        assert abs(n - m) <= m * NUDGE
        bound = int(np.ceil(128 / f)) + 2
        acc = np.arange(-bound, bound + 1, dtype=np.int64)
        want = np.rint(acc.astype(np.float32) * f).astype(np.int64)
        kept = (want >= -128) & (want <= 127)
        misses = []
        for k in (m, n):  # round_half_to_even(acc * k / 2**s), in int64 (the products stay below 2**50)
            product = acc * k
            floor = product >> s
            rest, half = product - (floor << s), 1 << (s - 1)
            got = floor + (rest > half) + ((rest == half) & (floor % 2 == 1))
            misses.append(int(np.sum((got != want) & kept)))
        assert misses[1] <= misses[0]
        missed["exact"] += misses[0]
        missed["nudged"] += misses[1]
    assert missed["exact"] > 0 and 3 * missed["nudged"] <= missed["exact"], missed


# --- tables -----------------------------------------------------------------------------------------

def all_codes(dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.arange(info.min, int(info.max) + 1).astype(dtype).reshape(1, 256)


def near_tie(real: np.ndarray, scale) -> np.ndarray:
    """Where real / scale (float32) lies within 1e-6 of a rounding tie (an odd multiple of 1/2)."""
    ratio = (np.asarray(real, np.float32) / np.float32(scale)).astype(np.float64)
    return np.abs(ratio - np.floor(ratio) - 0.5) <= 1e-6


def unary_case(op, x_params, y_params, dtype=INT8, y_dtype=None, opset=13, **attrs):
    y_dtype = y_dtype or dtype
    g = QGraph()
    xf = g.dq(g.input("x", dtype, (1, 256)), *x_params, dtype)
    yf = xf if op is None else g.node(op, [xf], **attrs)
    return g.model([g.q(yf, *y_params, y_dtype)], opset)


@pytest.mark.parametrize("dtype, x_params, y_params", [
    (INT8, (0.06, -3), (1 / 256, -128)),
    (INT8, (0.1, 20), (0.004, -100)),
    (UINT8, (0.05, 128), (1 / 256, 0)),
    (UINT8, (0.03, 100), (0.005, 10)),
])
def test_sigmoid_table(dtype, x_params, y_params):
    model = unary_case("Sigmoid", x_params, y_params, dtype)
    assert folded_ops(model) == ["IntTable"]
    x = all_codes(dtype)
    (got,) = run(model, x)
    real = dequantize_f32(x, *x_params)
    sig = (np.float32(1) / (np.float32(1) + np.exp(-real))).astype(np.float32)
    want = quantize_f32(sig, y_params[0], y_params[1], dtype)
    differ = got != want
    assert got.dtype == want.dtype and np.all(~differ | near_tie(sig, y_params[0])), \
        f"differ at codes {x[differ]}: got {got[differ]}, want {want[differ]}"
    assert np.all(np.abs(got.astype(int) - want) <= 1)
    assert len(np.unique(got)) > 40  # the table spans the output range


@pytest.mark.parametrize("op, attrs, fn", [
    ("Tanh", {}, np.tanh),
    ("LeakyRelu", {"alpha": 0.125}, lambda v: np.where(v >= 0, v, v * np.float32(0.125))),
    ("Abs", {}, np.abs),
])
def test_other_unary_tables(op, attrs, fn):
    """Any unary op becomes a table of quantize(op(dequantize(x))) (float32)."""
    x_params, y_params = (0.05, 7), (0.02, -4)
    model = unary_case(op, x_params, y_params, INT8, **attrs)
    assert folded_ops(model) == ["IntTable"]
    x = all_codes(INT8)
    (got,) = run(model, x)
    real = np.asarray(fn(dequantize_f32(x, *x_params)), np.float32)
    want = quantize_f32(real, *y_params, INT8)
    assert np.all((got == want) | near_tie(real, y_params[0])) and np.all(np.abs(got.astype(int) - want) <= 1)


def table_ops() -> list[str]:
    """The ops whose specification says they become a table between DequantizeLinear and QuantizeLinear, and
    that take one input (not DequantizeLinear itself: test_requantization_table)."""
    return sorted(op for op, spec in OPS.items() if spec.int8 == "table" and op != "DequantizeLinear")


@pytest.mark.parametrize("op", table_ops())
def test_every_table_op(op):
    """Each such op folds into one IntTable whose every entry is onnxruntime's float op of the dequantized code,
    quantized (at most a step off where the real value lies on a rounding tie)."""
    x_params, y_params = (0.03, -128 if op in ("Sqrt", "Log", "Reciprocal") else 5), (0.025, -3)  # no NaN
    model = unary_case(op, x_params, y_params, INT8, opset=OPSET)
    assert folded_ops(model) == ["IntTable"]
    x = all_codes(INT8)
    (got,) = run(model, x)
    real = dequantize_f32(x, *x_params)
    (fx,) = ort_run(node_model(op, [("x", real.shape)], opset=OPSET), {"x": real})
    want = quantize_f32(fx, *y_params, INT8)
    assert np.all((got == want) | near_tie(fx, y_params[0])) and np.all(np.abs(got.astype(int) - want) <= 1)


@pytest.mark.parametrize("x_dtype, y_dtype, x_params, y_params", [
    (INT8, INT8, (0.05, 3), (0.11, -9)),
    (INT8, INT8, (0.1, 0), (0.05, 0)),       # saturates
    (UINT8, UINT8, (0.02, 128), (0.03, 120)),
    (INT8, UINT8, (0.04, -2), (0.04, 126)),  # a type change
    (UINT8, INT8, (0.07, 130), (0.02, 5)),
])
def test_requantization_table(x_dtype, y_dtype, x_params, y_params):
    """DequantizeLinear straight into QuantizeLinear of other parameters: a table, exactly the float32
    round trip."""
    model = unary_case(None, x_params, y_params, x_dtype, y_dtype)
    assert folded_ops(model) == ["IntTable"]
    x = all_codes(x_dtype)
    (got,) = run(model, x)
    want = quantize_f32(dequantize_f32(x, *x_params), *y_params, y_dtype)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_same_parameters_fold_to_nothing():
    model = unary_case(None, (0.05, 3), (0.05, 3), INT8)
    assert folded_ops(model) in ([], ["Identity"])
    x = all_codes(INT8)
    assert np.array_equal(run(model, x)[0], x)
