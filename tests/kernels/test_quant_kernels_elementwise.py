"""The integer kernels of quantized elementwise and data-movement ops: IntAdd, IntMul (rounding ties to even),
IntAvgPool, and Transpose / Reshape / Concat run on the integers,
each from a small QDQ graph built by hand.

Bit-exact against the NumPy integer reference of tests/qdq.py, whose docstring gives the semantics; each
kernel also runs on seeded random shapes and parameters, each compiled graph on a few inputs, one of them
the extremes of the input type (saturation). Compiled libraries are cached by hash.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.qdq import (INT8, UINT8, QGraph, add_reference, check_outputs, clamp_range, conv_acc, dequantize_f32,
                       folded_ops, input_sets, quantize_f32, rand_q, requantize, run)


# --- Add and Mul ------------------------------------------------------------------------------------

def binary_case(rng, *, op, a_shape, b_shape, dtype=INT8, b_const=False, act=None, scales=None, zeros=None):
    """A QDQ Add or Mul of two 8-bit operands (b a graph input or a constant), and its reference."""
    shift = 128 if dtype == UINT8 else 0
    sa, sb = (np.float32(s) for s in (scales[:2] if scales else rng.uniform(0.01, 0.1, 2)))
    za, zb, zy = zeros if zeros else (int(z) + shift for z in rng.integers(-30, 31, 3))
    if scales:
        sy = np.float32(scales[2])
    else:
        sy = np.float32((sa + sb) * rng.uniform(0.6, 1.2)) if op == "Add" else \
            np.float32(sa * sb * 75 * 75 / rng.uniform(60, 120))
    b_value = rand_q(rng, b_shape, dtype) if b_const else None
    g = QGraph()
    af = g.dq(g.input("a", dtype, a_shape), sa, za, dtype)
    bf = g.dq(g.const(b_value, "b") if b_const else g.input("b", dtype, b_shape), sb, zb, dtype)
    yf = g.node(op, [af, bf])
    yf, lo, hi = g.activation(yf, act)
    model = g.model([g.q(yf, sy, zy, dtype)])
    bounds = clamp_range(dtype, sy, zy, lo, hi)

    def reference(a, b=b_value):
        if op == "Add":
            a, b = np.broadcast_arrays(a, b)
            return add_reference(a, b, za, zb, sa, sb, sy, zy, bounds, dtype)
        acc = (a.astype(np.int64) - za) * (b.astype(np.int64) - zb)
        return requantize(acc, np.float64(sa) * np.float64(sb) / np.float64(sy), zy, bounds, dtype)

    return model, reference


BINARY_CASES = {
    "Add": dict(op="Add", a_shape=(1, 3, 4, 4), b_shape=(1, 3, 4, 4)),
    "Add broadcast": dict(op="Add", a_shape=(2, 3, 4, 5), b_shape=(1, 3, 1, 1)),
    "Add broadcast both": dict(op="Add", a_shape=(3, 1), b_shape=(1, 4)),
    "Add scalar constant": dict(op="Add", a_shape=(2, 5, 3), b_shape=(), b_const=True),
    "Add channel constant": dict(op="Add", a_shape=(1, 4, 3, 3), b_shape=(4, 1, 1), b_const=True),
    "Add uint8": dict(op="Add", a_shape=(1, 2, 8), b_shape=(1, 2, 8), dtype=UINT8),
    "Add fused Relu": dict(op="Add", a_shape=(1, 3, 4, 4), b_shape=(1, 3, 4, 4), act="relu"),
    "Add fused Clip": dict(op="Add", a_shape=(1, 3, 4, 4), b_shape=(1, 3, 4, 4), act=(-0.5, 0.75)),
    "Add equal scales": dict(op="Add", a_shape=(4, 8), b_shape=(4, 8), scales=(0.05, 0.05, 0.1),
                             zeros=(3, -3, 1)),
    "Add halving": dict(op="Add", a_shape=(64,), b_shape=(64,), scales=(0.25, 0.25, 0.5), zeros=(0, 0, 0)),
    "Add small output scale": dict(op="Add", a_shape=(4, 8), b_shape=(4, 8), scales=(0.5, 0.03, 0.02)),
    "Mul": dict(op="Mul", a_shape=(1, 3, 4, 4), b_shape=(1, 3, 4, 4)),
    "Mul broadcast": dict(op="Mul", a_shape=(2, 3, 4, 5), b_shape=(3, 1, 5)),
    "Mul scalar constant": dict(op="Mul", a_shape=(2, 5, 3), b_shape=(), b_const=True),
    "Mul uint8": dict(op="Mul", a_shape=(1, 2, 8), b_shape=(1, 2, 8), dtype=UINT8),
    "Mul fused Relu": dict(op="Mul", a_shape=(3, 7), b_shape=(3, 7), act="relu"),
}


@pytest.mark.parametrize("case", list(BINARY_CASES))
def test_add_mul(case):
    kwargs = BINARY_CASES[case]
    rng = np.random.default_rng(3)
    model, reference = binary_case(rng, **kwargs)
    ops = folded_ops(model)
    assert f"Int{kwargs['op']}" in ops and kwargs["op"] not in ops, ops
    dtype = kwargs.get("dtype", INT8)
    shapes = [(kwargs["a_shape"], dtype)] + ([] if kwargs.get("b_const") else [(kwargs["b_shape"], dtype)])
    check_outputs(model, reference, shapes, rng)


@pytest.mark.parametrize("op, scales", [("Add", (0.1, 0.3, 0.4)), ("Mul", (0.02, 0.05, 0.25))])
def test_all_pairs(op, scales):
    """IntAdd and IntMul on every pair of int8 values (256 x 256); the Add's ratios make rounding ties."""
    rng = np.random.default_rng({"Add": 4, "Mul": 5}[op])
    model, reference = binary_case(rng, op=op, a_shape=(256, 1), b_shape=(1, 256), scales=scales, zeros=(5, -7, 2))
    a = np.arange(-128, 128, dtype=np.int8).reshape(256, 1)
    b = a.reshape(1, 256).copy()
    (got,) = run(model, a, b)
    want = reference(a, b)
    assert np.array_equal(got, want), f"{np.sum(got != want)} of {got.size} differ"


def test_add_is_the_real_sum_rounded_at_dyadic_ratios():
    """Scale ratios 3/4 and 1/4 (exact factors): on every pair of int8 values IntAdd gives the real sum rounded
    half to even (NumPy's rint), both signs, and then the zero point."""
    model, _ = binary_case(np.random.default_rng(8), op="Add", a_shape=(256, 1), b_shape=(1, 256),
                           scales=(0.75, 0.25, 1.0), zeros=(3, -5, 1))
    a = np.arange(-128, 128, dtype=np.int8).reshape(256, 1)
    b = a.reshape(1, 256).copy()
    (got,) = run(model, a, b)
    real = 0.75 * (a.astype(np.int64) - 3) + 0.25 * (b.astype(np.int64) + 5)  # exact in float64
    assert np.sum(real % 1 == 0.5) > 10000
    assert np.array_equal(got, np.clip(np.rint(real) + 1, -128, 127))


@pytest.mark.parametrize("seed", range(3))
def test_add_mul_random(seed):
    rng = np.random.default_rng(400 + seed)
    op = ["Add", "Mul"][seed % 2]
    rank = int(rng.integers(1, 5))
    a_shape = tuple(int(d) for d in rng.integers(1, 6, rank))
    b_shape = tuple(d if rng.integers(0, 2) else 1 for d in a_shape)[int(rng.integers(0, rank)):]
    dtype = INT8 if rng.integers(0, 2) else UINT8
    model, reference = binary_case(rng, op=op, a_shape=a_shape, b_shape=b_shape, dtype=dtype,
                                   act=[None, "relu"][int(rng.integers(0, 2))])
    assert f"Int{op}" in folded_ops(model)
    check_outputs(model, reference, [(a_shape, dtype), (b_shape, dtype)], rng)


# --- rounding ties of the requantization ------------------------------------------------------------

def test_requantization_ties_round_half_to_even():
    """Power-of-two factors make many accumulators exactly halfway: they round to even, both signs (the
    Mul of every pair of int8 values at factor 1/8, and a conv at factor 2**-6)."""
    model, reference = binary_case(np.random.default_rng(6), op="Mul", a_shape=(256, 1), b_shape=(1, 256),
                                   scales=(0.5, 0.25, 1.0), zeros=(0, 0, 0))
    a = np.arange(-128, 128, dtype=np.int8).reshape(256, 1)
    b = a.reshape(1, 256).copy()
    (got,) = run(model, a, b)
    product = a.astype(np.int64) * b.astype(np.int64)
    ties = product % 8 == 4
    assert ties.sum() > 1000
    assert np.array_equal(got, reference(a, b))
    inside = ties & (np.abs(product) < 127 * 8)
    assert np.array_equal(got[inside], np.rint(product[inside] / 8))  # NumPy's rint: halves to even
    assert np.all(got[inside] % 2 == 0)

    rng = np.random.default_rng(7)
    g = QGraph()
    w = rand_q(rng, (3, 2, 3, 3), INT8)
    xf = g.dq(g.input("x", INT8, (1, 2, 6, 6)), 0.25, 0, INT8)
    wf = g.dq(g.const(w, "w"), [0.125, 0.25, 0.0625], [0, 0, 0], INT8, axis=0)
    yf = g.node("Conv", [xf, wf], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    conv = g.model([g.q(yf, 1.0, 0, INT8)])
    for x in input_sets(rng, [((1, 2, 6, 6), INT8)], 3):
        x = (x[0] // 16).astype(np.int8)  # small values: few saturate
        (got,) = run(conv, x)
        acc = conv_acc(x.astype(np.int64), w, [1, 1, 1, 1], [1, 1], [1, 1], 1)
        real = np.array([2.0 ** -5, 2.0 ** -4, 2.0 ** -6])
        want = requantize(acc, real, 0, (-128, 127), INT8, axis=1)
        assert np.array_equal(got, want)
        exact = acc * real.reshape(1, 3, 1, 1)
        assert np.array_equal(want, np.clip(np.rint(exact), -128, 127))
        assert np.sum(exact % 1 == 0.5) > 0


# --- average pools ----------------------------------------------------------------------------------

def pool_case(rng, *, x_shape, op="AveragePool", kernel=None, strides=None, dtype=INT8, scales=None,
              zeros=None, ceil_mode=0):
    shift = 128 if dtype == UINT8 else 0
    x_scale, y_scale = (np.float32(s) for s in (scales or (rng.uniform(0.01, 0.1), rng.uniform(0.01, 0.1))))
    x_zero, y_zero = zeros if zeros else (int(z) + shift for z in rng.integers(-30, 31, 2))
    g = QGraph()
    xf = g.dq(g.input("x", dtype, x_shape), x_scale, x_zero, dtype)
    if op == "GlobalAveragePool":
        kernel, strides = tuple(x_shape[2:]), (1,) * (len(x_shape) - 2)
        yf = g.node(op, [xf])
    else:
        strides = strides or (1,) * len(kernel)
        yf = g.node(op, [xf], kernel_shape=list(kernel), strides=list(strides), ceil_mode=ceil_mode)
    model = g.model([g.q(yf, y_scale, y_zero, dtype)])
    count = int(np.prod(kernel))

    def reference(x):
        ones = np.ones((x.shape[1], 1) + tuple(kernel), np.int64)
        acc = conv_acc(x.astype(np.int64) - x_zero, ones, [0] * (2 * len(kernel)), strides, [1] * len(kernel),
                       x.shape[1])
        return requantize(acc, np.float64(x_scale) / np.float64(y_scale) / count, y_zero,
                          clamp_range(dtype, y_scale, y_zero), dtype)

    return model, reference


POOL_CASES = {
    "2x2 stride 2": dict(x_shape=(1, 3, 6, 6), kernel=(2, 2), strides=(2, 2)),
    "2x2 stride 2, same scale (ties)": dict(x_shape=(1, 3, 8, 8), kernel=(2, 2), strides=(2, 2),
                                            scales=(0.05, 0.05), zeros=(3, 3)),
    "3x3 stride 1": dict(x_shape=(2, 2, 5, 6), kernel=(3, 3)),
    "3x2 stride (2, 1)": dict(x_shape=(1, 2, 7, 5), kernel=(3, 2), strides=(2, 1)),
    "1-D": dict(x_shape=(1, 4, 11), kernel=(3,), strides=(2,)),
    "ceil_mode, windows fit": dict(x_shape=(1, 2, 7, 7), kernel=(3, 3), strides=(2, 2), ceil_mode=1),
    "uint8": dict(x_shape=(1, 3, 6, 6), kernel=(2, 2), strides=(2, 2), dtype=UINT8),
    "global": dict(x_shape=(1, 4, 5, 5), op="GlobalAveragePool"),
    "global, same scale": dict(x_shape=(2, 3, 4, 4), op="GlobalAveragePool", scales=(0.02, 0.02), zeros=(0, 0)),
    "global uint8": dict(x_shape=(1, 6, 7, 3), op="GlobalAveragePool", dtype=UINT8),
    "global 1-D": dict(x_shape=(1, 5, 9), op="GlobalAveragePool"),
}


@pytest.mark.parametrize("case", list(POOL_CASES))
def test_average_pool(case):
    kwargs = POOL_CASES[case]
    rng = np.random.default_rng(8)
    model, reference = pool_case(rng, **kwargs)
    ops = folded_ops(model)
    assert ops == ["IntAvgPool"], ops
    check_outputs(model, reference, [(kwargs["x_shape"], kwargs.get("dtype", INT8))], rng)


@pytest.mark.parametrize("seed", range(2))
def test_average_pool_random(seed):
    rng = np.random.default_rng(500 + seed)
    kernel = tuple(int(k) for k in rng.integers(1, 5, 2))
    strides = tuple(int(s) for s in rng.integers(1, 4, 2))
    x_shape = (int(rng.integers(1, 3)), int(rng.integers(1, 6))) + tuple(int(k + rng.integers(0, 7)) for k in kernel)
    dtype = INT8 if rng.integers(0, 2) else UINT8
    model, reference = pool_case(rng, x_shape=x_shape, kernel=kernel, strides=strides, dtype=dtype)
    assert folded_ops(model) == ["IntAvgPool"]
    check_outputs(model, reference, [(x_shape, dtype)], rng)


# --- data movement and Concat -----------------------------------------------------------------------

def test_concat_of_inputs_with_different_scales():
    """Inputs whose parameters differ from the output's are requantized (a table each); the one that shares
    them is copied as it is."""
    rng = np.random.default_rng(9)
    params = [(0.05, 4), (0.02, -10), (0.13, 30)]
    out = (0.05, 4)
    shapes = [(1, 2, 3, 4), (1, 3, 3, 4), (1, 1, 3, 4)]
    g = QGraph()
    parts = [g.dq(g.input(f"x{i}", INT8, s), *p, INT8) for i, (s, p) in enumerate(zip(shapes, params))]
    model = g.model([g.q(g.node("Concat", parts, axis=1), *out, INT8)])
    ops = folded_ops(model)
    assert "Concat" in ops and ops.count("IntTable") == 2 and "QuantizeLinear" not in ops, ops
    for xs in input_sets(rng, [(s, INT8) for s in shapes], 3):
        (got,) = run(model, *xs)
        want = np.concatenate([x if p == out else quantize_f32(dequantize_f32(x, *p), *out, INT8)
                               for x, p in zip(xs, params)], axis=1)
        assert np.array_equal(got, want)


@pytest.mark.parametrize("axis", [0, 2, -1])
def test_concat_uint8_along_axes(axis):
    rng = np.random.default_rng(10)
    params = [(0.03, 128), (0.05, 100)]
    out = (0.04, 110)
    shapes = [(2, 3, 4), (2, 3, 4)]
    g = QGraph()
    parts = [g.dq(g.input(f"x{i}", UINT8, s), *p, UINT8) for i, (s, p) in enumerate(zip(shapes, params))]
    model = g.model([g.q(g.node("Concat", parts, axis=axis), *out, UINT8)])
    assert folded_ops(model).count("IntTable") == 2
    for xs in input_sets(rng, [(s, UINT8) for s in shapes]):
        (got,) = run(model, *xs)
        want = np.concatenate([quantize_f32(dequantize_f32(x, *p), *out, UINT8) for x, p in zip(xs, params)],
                              axis=axis)
        assert np.array_equal(got, want)


def test_data_movement_runs_on_the_integers():
    """Transpose, MaxPool and Reshape between a DequantizeLinear and a QuantizeLinear of the same parameters
    move the integers (no float op remains)."""
    rng = np.random.default_rng(11)
    p = (0.04, -5)
    g = QGraph()
    xf = g.dq(g.input("x", INT8, (1, 5, 6, 3)), *p, INT8)
    t = g.node("Transpose", [xf], perm=[0, 3, 1, 2])
    m = g.node("MaxPool", [t], kernel_shape=[2, 2], strides=[2, 1], pads=[0, 1, 1, 0])
    r = g.node("Reshape", [m, g.const(np.array([1, -1], np.int64), "shape")])
    model = g.model([g.q(r, *p, INT8)])
    ops = folded_ops(model)
    assert not {"QuantizeLinear", "DequantizeLinear"} & set(ops) and "MaxPool" in ops, ops
    for (x,) in input_sets(rng, [((1, 5, 6, 3), INT8)], 3):
        (got,) = run(model, x)
        t = np.pad(x.transpose(0, 3, 1, 2).astype(np.int64), [(0, 0), (0, 0), (0, 1), (1, 0)],
                   constant_values=-1000)
        pooled = np.stack([np.stack([t[:, :, 2 * i:2 * i + 2, j:j + 2].max(axis=(2, 3))
                                     for j in range((t.shape[3] - 2) // 1 + 1)], -1)
                           for i in range((t.shape[2] - 2) // 2 + 1)], -2)
        assert np.array_equal(got, pooled.reshape(1, -1).astype(np.int8))
