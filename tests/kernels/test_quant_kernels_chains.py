"""Chains of integer kernels: channels-last intermediates, depthwise and pointwise kernels, the register
tiles (widened panels) of each target, a Gemm of two runtime operands and a small network.

Bit-exact against the NumPy integer reference of tests/qdq.py, whose docstring gives the semantics; each
kernel also runs on seeded random shapes and parameters, each compiled graph on a few inputs, one of them
the extremes of the input type (saturation). Compiled libraries are cached by hash.
"""
from __future__ import annotations

import numpy as np
import pytest

import cglow
from cglow.options import Options
from tests.qdq import (CHAIN, INT8, QGraph, add_reference, bias_q, check_outputs, conv_chain, conv_layer, folded_ops,
                       input_sets, rand_q, requantize, requantize_product, y_params)


# --- chains: channels-last intermediates, depthwise and pointwise kernels, register tiles of targets -----
@pytest.mark.parametrize("target", ["generic", "cortex-m4", "x86-avx512"])
def test_conv_chain(target):
    """Seven integer convolutions in a row (the intermediates channels-last in the arena: the NHWC, depthwise
    and pointwise-as-Gemm kernels), with each target's register tiles."""
    rng = np.random.default_rng(12)
    model, reference = conv_chain(rng, CHAIN, (1, 4, 10, 9))
    assert folded_ops(model) == ["IntConv"] * len(CHAIN)
    net = cglow.build(cglow.compile_model(model, name="net", options=Options(target=target)))
    for (x,) in input_sets(rng, [((1, 4, 10, 9), INT8)], 3):
        (got,) = net(x)
        assert np.array_equal(got, reference(x))


@pytest.mark.parametrize("seed", range(3))
def test_conv_chain_random(seed):
    rng = np.random.default_rng(600 + seed)
    layers = []
    x_shape = (1, int(rng.integers(1, 7)), int(rng.integers(8, 14)), int(rng.integers(8, 14)))
    channels, size = x_shape[1], min(x_shape[2:])
    for _ in range(int(rng.integers(2, 5))):
        depthwise = bool(rng.integers(0, 3) == 0)
        m = channels if depthwise else int(rng.integers(1, 10))
        k = int(rng.choice([1, 3]))
        pads = [int(p) for p in rng.integers(0, 2, 4)] if k == 3 else [0, 0, 0, 0]
        stride = int(rng.integers(1, 3)) if size >= 6 else 1
        layers.append(dict(m=m, kernel=(k, k), group=channels if depthwise else 1, pads=pads, strides=[stride] * 2,
                           act=[None, "relu"][int(rng.integers(0, 2))], w_zero=int(rng.integers(-2, 3)),
                           per_channel=bool(rng.integers(0, 2))))
        channels, size = m, (size + min(pads) - k) // stride + 1
    model, reference = conv_chain(rng, layers, x_shape, x_zero=int(rng.integers(-10, 11)))
    check_outputs(model, reference, [(x_shape, INT8)], rng)


@pytest.mark.parametrize("trans_a, trans_b, bias", [(0, 1, True), (0, 0, True), (1, 1, False), (1, 0, True)])
def test_gemm_of_two_runtime_operands(trans_a, trans_b, bias):
    """Gemm with a computed B (per-tensor parameters, both zero points subtracted as loaded), transposes."""
    rng = np.random.default_rng(14)
    m, k, n = 3, 7, 4
    sa, sb, za, zb = np.float32(0.03), np.float32(0.02), 5, -3
    real_bias = rng.standard_normal(n).astype(np.float32)
    y_scale, y_zero = y_params(rng, sa * sb, k, INT8)
    a_shape, b_shape = (k, m) if trans_a else (m, k), (n, k) if trans_b else (k, n)
    g = QGraph()
    af = g.dq(g.input("a", INT8, a_shape), sa, za, INT8)
    bf = g.dq(g.input("b", INT8, b_shape), sb, zb, INT8)
    yf = g.node("Gemm", [af, bf] + ([g.const(real_bias, "bias")] if bias else []), transA=trans_a, transB=trans_b)
    model = g.model([g.q(yf, y_scale, y_zero, INT8)])
    assert folded_ops(model) == ["IntGemm"]
    acc_scale = np.float64(sa) * np.float64(sb)

    def reference(a, b):
        a, b = (a.T if trans_a else a).astype(np.int64) - za, (b.T if trans_b else b).astype(np.int64) - zb
        acc = a @ b + (bias_q(real_bias, np.full(n, acc_scale)) if bias else 0)
        return requantize_product(acc, sa, sb, y_scale, y_zero, (-128, 127), INT8)

    check_outputs(model, reference, [(a_shape, INT8), (b_shape, INT8)], rng)


@pytest.mark.parametrize("target", ["generic", "cortex-m4"])
def test_small_network(target):
    """conv, conv, residual Add of the two (different scales), AveragePool, MaxPool (on the integers),
    GlobalAveragePool, Flatten, Gemm: integer ops in channels-last and channels-first layouts, one after the
    other; both the classifier output and the residual sum are outputs."""
    rng = np.random.default_rng(15)
    g = QGraph()
    x_shape = (1, 3, 8, 8)
    c1, s1, sc1, z1, _, conv1 = conv_layer(g, rng, g.input("x", INT8, x_shape), x_shape, x_scale=np.float32(0.03),
                                           x_zero=4, x_dtype=INT8, m=6, kernel=(3, 3), pads=[1, 1, 1, 1], act="relu")
    c2, _, sc2, z2, _, conv2 = conv_layer(g, rng, c1, s1, x_scale=sc1, x_zero=z1, x_dtype=INT8, m=6, kernel=(3, 3),
                                          pads=[1, 1, 1, 1])
    sy, zy = np.float32((sc1 + sc2) * 0.8), 2
    add = g.q(g.node("Add", [g.dq(c1, sc1, z1, INT8), g.dq(c2, sc2, z2, INT8)]), sy, zy, INT8)
    ps, pz = np.float32(sy * 0.9), -1
    pool = g.q(g.node("AveragePool", [g.dq(add, sy, zy, INT8)], kernel_shape=[2, 2], strides=[2, 2]), ps, pz, INT8)
    mp = g.q(g.node("MaxPool", [g.dq(pool, ps, pz, INT8)], kernel_shape=[2, 2]), ps, pz, INT8)
    gs, gz = np.float32(ps * 0.7), 3
    gap = g.q(g.node("GlobalAveragePool", [g.dq(mp, ps, pz, INT8)]), gs, gz, INT8)
    w, ws = rand_q(rng, (5, 6), INT8), rng.uniform(0.005, 0.02, 5).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    ys = np.float32(gs * float(ws.max()) * 75 * 3)
    fc = g.node("Gemm", [g.dq(g.node("Flatten", [gap]), gs, gz, INT8),
                         g.dq(g.const(w, "w"), ws, np.zeros(5, np.int8), INT8, axis=0), g.const(bias, "b")], transB=1)
    model = g.model([g.q(fc, ys, 0, INT8), add])
    ops = folded_ops(model)
    assert ops.count("IntConv") == 2 and ops.count("IntAvgPool") == 2 and "IntAdd" in ops and "IntGemm" in ops
    assert not {"Conv", "Add", "AveragePool", "GlobalAveragePool", "Gemm", "QuantizeLinear"} & set(ops), ops

    def reference(x):
        a = conv1(x)
        total = add_reference(a, conv2(a), z1, z2, sc1, sc2, sy, zy, (-128, 127), INT8)
        sums = (total.astype(np.int64) - zy).reshape(1, 6, 4, 2, 4, 2).sum(axis=(3, 5))
        p = requantize(sums, np.float64(sy) / np.float64(ps) / 4, pz, (-128, 127), INT8)
        m = np.stack([np.stack([p[:, :, i:i + 2, j:j + 2].max(axis=(2, 3)) for j in range(3)], -1)
                      for i in range(3)], -2)
        gp = requantize((m.astype(np.int64) - pz).sum(axis=(2, 3)), np.float64(ps) / np.float64(gs) / 9, gz,
                        (-128, 127), INT8)
        acc_scale = np.float64(gs) * ws.astype(np.float64)
        acc = (gp.astype(np.int64) - gz) @ w.T.astype(np.int64) + bias_q(bias, acc_scale)
        return [requantize_product(acc, gs, ws, ys, 0, (-128, 127), INT8, axis=1), total]

    net = cglow.build(cglow.compile_model(model, name="net", options=Options(target=target)))
    for (x,) in input_sets(rng, [(x_shape, INT8)], 3):
        got, want = net(x), reference(x)
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
