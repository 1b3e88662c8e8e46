"""The integer matrix-product kernels (IntGemm: Gemm, MatMul with a constant, batched or runtime second
operand), each from a small QDQ graph built by hand.

Bit-exact against the NumPy integer reference of tests/qdq.py, whose docstring gives the semantics; each
kernel also runs on seeded random shapes and parameters, each compiled graph on a few inputs, one of them
the extremes of the input type (saturation). Compiled libraries are cached by hash.
"""
from __future__ import annotations

import numpy as np
import pytest
from tests.qdq import (BUILDS, INT8, UINT8, QGraph, bias_q, check_outputs, clamp_range, folded_ops, rand_q,
                       requantize, requantize_product, y_params)


# --- Gemm and MatMul --------------------------------------------------------------------------------

def gemm_case(rng, *, m, k, n, op="Gemm", trans_b=0, per_column=True, a_dtype=INT8, a_zero=0, b_zero=0,
              bias=True, alpha=1.0, beta=1.0, act=None, batch=()):
    """A QDQ Gemm (or MatMul) with a constant B, and its reference (a function of A)."""
    b_shape = (n, k) if trans_b else (k, n)
    b = rand_q(rng, b_shape, INT8)
    a_scale = np.float32(rng.uniform(0.005, 0.05))
    b_scale = rng.uniform(0.002, 0.02, n if per_column else ()).astype(np.float32)
    b_zeros = np.broadcast_to(np.asarray(b_zero, np.int64), (n,) if per_column else ())
    real_bias = (rng.standard_normal(n) * 2).astype(np.float32)
    y_scale, y_zero = y_params(rng, alpha * a_scale * float(b_scale.max()), k, a_dtype)

    g = QGraph()
    af = g.dq(g.input("a", a_dtype, batch + (m, k)), a_scale, a_zero, a_dtype)
    bf = g.dq(g.const(b, "b"), b_scale, b_zeros, INT8, axis=(0 if trans_b else 1) if per_column else None)
    if op == "Gemm":
        ins = [af, bf] + ([g.const(real_bias, "bias")] if bias else [])
        yf = g.node("Gemm", ins, transB=trans_b, alpha=alpha, beta=beta)
    else:
        yf = g.node("MatMul", [af, bf])
        if bias:
            yf = g.node("Add", [yf, g.const(real_bias, "bias")])
    yf, lo, hi = g.activation(yf, act)
    model = g.model([g.q(yf, y_scale, y_zero, a_dtype)])

    acc_scale = np.float64(alpha) * np.float64(a_scale) * np.broadcast_to(b_scale.astype(np.float64), (n,))
    b_int = b.astype(np.int64) - (np.broadcast_to(b_zeros, (n,)).reshape(-1, 1) if trans_b else
                                  np.broadcast_to(b_zeros, (n,)).reshape(1, -1))
    b_int = b_int.T if trans_b else b_int
    bias_int = bias_q(real_bias, acc_scale / np.float64(beta)) if bias and op == "Gemm" else np.zeros(n, np.int64)
    bounds = clamp_range(a_dtype, y_scale, y_zero, lo, hi)

    def reference(a):
        acc = np.matmul(a.astype(np.int64) - a_zero, b_int) + bias_int
        if alpha != 1:
            return requantize(acc, acc_scale / np.float64(y_scale), y_zero, bounds, a_dtype, axis=acc.ndim - 1)
        return requantize_product(acc, a_scale, np.broadcast_to(b_scale, (n,)), y_scale, y_zero, bounds, a_dtype,
                                  axis=acc.ndim - 1)

    return model, reference


GEMM_CASES = {
    "Gemm": dict(m=3, k=10, n=5, a_zero=4),
    "Gemm transB": dict(m=2, k=16, n=7, trans_b=1, a_zero=-6),
    "Gemm per-tensor": dict(m=4, k=9, n=3, per_column=False, a_zero=1),
    "Gemm transB per-tensor, no bias": dict(m=1, k=12, n=6, trans_b=1, per_column=False, bias=False),
    "Gemm weights with zero points": dict(m=3, k=8, n=4, b_zero=[3, -2, 0, 9], a_zero=-10),
    "Gemm transB weights with zero points": dict(m=3, k=8, n=4, trans_b=1, b_zero=[3, -2, 0, 9]),
    "Gemm alpha 0.5 beta 2": dict(m=2, k=8, n=4, alpha=0.5, beta=2.0, a_zero=3),
    "Gemm uint8": dict(m=3, k=10, n=5, a_dtype=UINT8, a_zero=130),
    "Gemm fused Relu": dict(m=3, k=10, n=5, a_zero=2, act="relu"),
    "Gemm fused Clip": dict(m=3, k=10, n=5, trans_b=1, act=(-0.25, 1.0)),
    "Gemm one column": dict(m=4, k=7, n=1, a_zero=-1),
    "MatMul": dict(m=3, k=10, n=5, op="MatMul", bias=False, a_zero=5),
    "MatMul per-tensor": dict(m=3, k=10, n=5, op="MatMul", bias=False, per_column=False),
    "MatMul batched A, constant B": dict(m=3, k=6, n=4, op="MatMul", bias=False, batch=(2,), a_zero=-7),
    "MatMul uint8 batched A": dict(m=2, k=5, n=3, op="MatMul", bias=False, batch=(2, 2), a_dtype=UINT8,
                                   a_zero=127),
}


@pytest.mark.parametrize("case", list(GEMM_CASES))
def test_gemm(case):
    kwargs = GEMM_CASES[case]
    rng = np.random.default_rng(1)
    model, reference = gemm_case(rng, **kwargs)
    assert "IntGemm" in folded_ops(model) and not {"Gemm", "MatMul"} & set(folded_ops(model)), folded_ops(model)
    shape = kwargs.get("batch", ()) + (kwargs["m"], kwargs["k"])
    check_outputs(model, reference, [(shape, kwargs.get("a_dtype", INT8))], rng)


# x86-64's tiles: k of 32 or more sums as dot products of unsigned inputs (Tiles.vector_dot), the input zero point
# folded into the bias (whether the weights' zero points, here subtracted at compile time, leave them int8 is the
# importer's business: None).
VECTOR_DOT_CASES = {
    "Gemm, zero point folded": (dict(m=5, k=40, n=20, a_zero=4), True),
    "Gemm transB, no bias, zero point -128": (dict(m=6, k=64, n=33, trans_b=1, bias=False, a_zero=-128), True),
    "MatMul uint8 batched A": (dict(m=3, k=33, n=17, op="MatMul", bias=False, batch=(2,), a_dtype=UINT8,
                                    a_zero=130, act="relu"), True),
    "Gemm weights with zero points": (dict(m=3, k=40, n=4, b_zero=[3, -2, 0, 9], a_zero=-10), None),
}


@pytest.mark.parametrize("build", list(BUILDS))
@pytest.mark.parametrize("case", list(VECTOR_DOT_CASES))
def test_gemm_as_vector_dot_products(case, build):
    """In C and, where this machine has them, in VNNI intrinsics (kernels/dot.j2 vnni_reduce)."""
    if BUILDS[build] is None:
        pytest.skip("this machine has no AVX-512 VNNI")
    kwargs, dots = VECTOR_DOT_CASES[case]
    rng = np.random.default_rng(2)
    model, reference = gemm_case(rng, **kwargs)
    shape = kwargs.get("batch", ()) + (kwargs["m"], kwargs["k"])
    source = check_outputs(model, reference, [(shape, kwargs.get("a_dtype", INT8))], rng, target="x86-avx512",
                           cflags=BUILDS[build])
    assert dots is None or ("int32_t s0_0 = 0;" in source) == dots


# x86-avx512-vnni's: those sum as outer products of the weights in blocks of 16 columns (instr/vector_dots.py
# block_weights): k not a multiple of 4 (its last group read short), n not one of 16 (its last block read and written
# through masks) and above the tile's 64, row tiles' edges, uint8 inputs, batches; in C and in VNNI intrinsics.
BLOCK_CASES = {
    "Gemm, zero point folded": dict(m=5, k=40, n=20, a_zero=4),
    "Gemm transB, no bias, k 66, zero point -128": dict(m=6, k=66, n=33, trans_b=1, bias=False, a_zero=-128),
    "MatMul uint8 batched A, k 33": dict(m=3, k=33, n=17, op="MatMul", bias=False, batch=(2,), a_dtype=UINT8,
                                         a_zero=130, act="relu"),
    "Gemm 9 x 35 x 150": dict(m=9, k=35, n=150, a_zero=-3),
}


@pytest.mark.parametrize("build", list(BUILDS))
@pytest.mark.parametrize("case", list(BLOCK_CASES))
def test_gemm_as_outer_products_of_column_blocks(case, build):
    if BUILDS[build] is None:
        pytest.skip("this machine has no AVX-512 VNNI")
    kwargs = BLOCK_CASES[case]
    rng = np.random.default_rng(3)
    model, reference = gemm_case(rng, **kwargs)
    shape = kwargs.get("batch", ()) + (kwargs["m"], kwargs["k"])
    source = check_outputs(model, reference, [(shape, kwargs.get("a_dtype", INT8))], rng, target="x86-avx512-vnni",
                           cflags=BUILDS[build])
    assert "_mm512_dpbusd_epi32(s0_0, x0, w)" in source and "int32_t s0_0 = 0;" not in source


# AArch64's tiles sum them as dot products of signed inputs (Tiles.signed_dots): no correction for a zero point of 0
# (int8) or 128 (uint8, read as int8 with its top bit flipped); another one folded into the bias.
SIGNED_DOT_CASES = {
    "Gemm, zero point -128 folded": (dict(m=5, k=40, n=20, a_zero=-128), True),
    "Gemm transB, no bias, zero point 0": (dict(m=6, k=64, n=33, trans_b=1, bias=False), True),
    "MatMul uint8 batched A, zero point 128": (dict(m=3, k=33, n=17, op="MatMul", bias=False, batch=(2,),
                                                    a_dtype=UINT8, a_zero=128, act="relu"), True),
    "Gemm uint8, zero point folded": (dict(m=7, k=48, n=9, a_dtype=UINT8, a_zero=0), True),
    "Gemm, short k": (dict(m=4, k=16, n=8, a_zero=0), False),
}


@pytest.mark.parametrize("case", list(SIGNED_DOT_CASES))
def test_gemm_as_signed_dot_products(case):
    kwargs, dots = SIGNED_DOT_CASES[case]
    rng = np.random.default_rng(2)
    model, reference = gemm_case(rng, **kwargs)
    shape = kwargs.get("batch", ()) + (kwargs["m"], kwargs["k"])
    source = check_outputs(model, reference, [(shape, kwargs.get("a_dtype", INT8))], rng, target="aarch64")
    assert ("int32_t s0_0 = 0;" in source) == dots
    assert ("(int8_t)(lp[k] ^ -128)" in source) == (dots and kwargs.get("a_dtype") == UINT8)


@pytest.mark.parametrize("seed", range(3))
def test_gemm_random(seed):
    rng = np.random.default_rng(200 + seed)
    a_dtype = INT8 if rng.integers(0, 2) else UINT8
    per_column = bool(rng.integers(0, 2))
    n = int(rng.integers(1, 9))
    kwargs = dict(m=int(rng.integers(1, 6)), k=int(rng.integers(1, 40)), n=n, trans_b=int(rng.integers(0, 2)),
                  per_column=per_column, a_dtype=a_dtype, bias=bool(rng.integers(0, 2)),
                  a_zero=int(rng.integers(-20, 21)) + (128 if a_dtype == UINT8 else 0),
                  b_zero=[int(z) for z in rng.integers(-3, 4, n)] if per_column else int(rng.integers(-3, 4)),
                  act=[None, "relu"][int(rng.integers(0, 2))])
    model, reference = gemm_case(rng, **kwargs)
    assert "IntGemm" in folded_ops(model)
    check_outputs(model, reference, [((kwargs["m"], kwargs["k"]), a_dtype)], rng)


@pytest.mark.parametrize("a_shape", [(2, 3, 6), (3, 6)])
def test_matmul_constant_batched_b_with_a_zero_point(a_shape):
    """A MatMul of an input with a nonzero zero point by a constant 3-D B (one matrix per batch): each batch
    has its own column sums."""
    rng = np.random.default_rng(13)
    b = rand_q(rng, (2, 6, 4), INT8)
    a_scale, b_scale, a_zero = np.float32(0.02), rng.uniform(0.005, 0.02, 4).astype(np.float32), 5
    y_scale, y_zero = y_params(rng, a_scale * float(b_scale.max()), 6, INT8)
    g = QGraph()
    af = g.dq(g.input("a", INT8, a_shape), a_scale, a_zero, INT8)
    bf = g.dq(g.const(b, "b"), b_scale, np.zeros(4, np.int8), INT8, axis=2)
    model = g.model([g.q(g.node("MatMul", [af, bf]), y_scale, y_zero, INT8)])
    assert folded_ops(model) == ["IntGemm"]

    def reference(a):
        acc = np.matmul(a.astype(np.int64) - a_zero, b.astype(np.int64))
        return requantize_product(acc, a_scale, b_scale, y_scale, y_zero, (-128, 127), INT8, axis=2)

    check_outputs(model, reference, [(a_shape, INT8)], rng)


def test_matmul_constant_batched_b():
    """The same without a zero point on A: nothing to fold, and it works."""
    rng = np.random.default_rng(13)
    b = rand_q(rng, (2, 6, 4), INT8)
    a_scale, b_scale = np.float32(0.02), rng.uniform(0.005, 0.02, 4).astype(np.float32)
    y_scale, y_zero = y_params(rng, a_scale * float(b_scale.max()), 6, INT8)
    g = QGraph()
    af = g.dq(g.input("a", INT8, (2, 3, 6)), a_scale, 0, INT8)
    bf = g.dq(g.const(b, "b"), b_scale, np.zeros(4, np.int8), INT8, axis=2)
    model = g.model([g.q(g.node("MatMul", [af, bf]), y_scale, y_zero, INT8)])

    def reference(a):
        acc = np.matmul(a.astype(np.int64), b.astype(np.int64))
        return requantize_product(acc, a_scale, b_scale, y_scale, y_zero, (-128, 127), INT8, axis=2)

    check_outputs(model, reference, [((2, 3, 6), INT8)], rng)


def matmul2_case(rng, *, a_shape, b_shape, dtype=INT8, a_zero=0, b_zero=0, act=None):
    """A QDQ MatMul of two run-time operands (per-tensor parameters), and its reference."""
    a_scale, b_scale = np.float32(rng.uniform(0.005, 0.05)), np.float32(rng.uniform(0.005, 0.05))
    y_scale, y_zero = y_params(rng, a_scale * b_scale, a_shape[-1], dtype)
    g = QGraph()
    af = g.dq(g.input("a", dtype, a_shape), a_scale, a_zero, dtype)
    bf = g.dq(g.input("b", dtype, b_shape), b_scale, b_zero, dtype)
    yf = g.node("MatMul", [af, bf])
    yf, lo, _ = g.activation(yf, act)
    model = g.model([g.q(yf, y_scale, y_zero, dtype)])
    bounds = clamp_range(dtype, y_scale, y_zero, lo)

    def reference(a, b):
        acc = np.matmul(a.astype(np.int64) - a_zero, b.astype(np.int64) - b_zero)
        return requantize_product(acc, a_scale, b_scale, y_scale, y_zero, bounds, dtype)

    return model, reference


MATMUL2_CASES = {
    "2-D": dict(a_shape=(3, 8), b_shape=(8, 5), a_zero=3, b_zero=-4),
    "2-D, no zero points": dict(a_shape=(4, 17), b_shape=(17, 2)),
    "batched": dict(a_shape=(2, 3, 6), b_shape=(2, 6, 4), a_zero=-9, b_zero=2),
    "broadcast batch": dict(a_shape=(2, 3, 6), b_shape=(6, 4), a_zero=1, b_zero=5),
    "broadcast batch of B": dict(a_shape=(1, 3, 6), b_shape=(3, 6, 2), a_zero=1, b_zero=5),
    "uint8": dict(a_shape=(3, 7), b_shape=(7, 4), dtype=UINT8, a_zero=128, b_zero=120),
    "uint8 batched, fused Relu": dict(a_shape=(2, 2, 5), b_shape=(2, 5, 3), dtype=UINT8, a_zero=100, b_zero=140,
                                      act="relu"),
    "vector times matrix": dict(a_shape=(6,), b_shape=(6, 3), a_zero=2, b_zero=-1),
}


@pytest.mark.parametrize("case", list(MATMUL2_CASES))
def test_matmul_of_two_runtime_operands(case):
    kwargs = MATMUL2_CASES[case]
    rng = np.random.default_rng(2)
    model, reference = matmul2_case(rng, **kwargs)
    assert "IntGemm" in folded_ops(model) and "MatMul" not in folded_ops(model), folded_ops(model)
    dtype = kwargs.get("dtype", INT8)
    check_outputs(model, reference, [(kwargs["a_shape"], dtype), (kwargs["b_shape"], dtype)], rng)


@pytest.mark.parametrize("seed", range(2))
def test_matmul_of_two_runtime_operands_random(seed):
    rng = np.random.default_rng(300 + seed)
    m, k, n, batch = (int(v) for v in rng.integers(1, 7, 4))
    dtype = INT8 if rng.integers(0, 2) else UINT8
    shift = 128 if dtype == UINT8 else 0
    kwargs = dict(a_shape=(batch, m, k), b_shape=(batch, k, n), dtype=dtype,
                  a_zero=int(rng.integers(-30, 31)) + shift, b_zero=int(rng.integers(-30, 31)) + shift)
    model, reference = matmul2_case(rng, **kwargs)
    assert "IntGemm" in folded_ops(model)
    check_outputs(model, reference, [(kwargs["a_shape"], dtype), (kwargs["b_shape"], dtype)], rng)
