"""The integer kernels of quantized models, bit-exact against a NumPy integer reference.

Each test builds a small QDQ graph by hand (8-bit graph inputs -> DequantizeLinear, the float op, [Relu or
Clip,] QuantizeLinear -> 8-bit graph output), checks that cglow folds it into the integer op it promises
(IntConv, IntGemm, IntAdd, IntMul, IntAvgPool, IntTable, or a data-movement op on the integers), runs the C,
and compares every output element with the integer semantics the compiler documents, computed here in
Python integers:

- convolution and matrix products: acc = bias_q + sum (x - x_zero)(w - w_zero) (zero padding is real 0, so a
  padded tap adds nothing), bias_q = round(real_bias / (x_scale * w_scale)) in float64;
  y = clamp(y_zero + round_half_to_even(acc * mult / 2**shift)), (mult, shift) = float32_multipliers(x_scale *
  w_scale / y_scale in float32) per output channel (cglow.graph.quant.params: nudged to round as float32 does;
  one shift for all channels where every multiplier keeps 24 bits),
  the clamp the output type's range narrowed by a fused Relu / Clip (its real bounds quantized as
  QuantizeLinear does);
- Add: round_half_to_even(((a - za) fa + (b - zb) fb) * unit), fa and fb the exact ratios sa / sy, sb / sy of
  the float32 scales in units of unit, rounded; unit a power of two (the larger factor in [2**21, 2**22]) if
  that makes either factor exact, else the larger ratio / 2**22 (as a 31-bit multiplier); Mul: one
  requantization of (a - za)(b - zb) at sa sb / sy;
- average pools: the window's sum of (x - x_zero), requantized at x_scale / y_scale / count;
- tables (Sigmoid, a bare requantization, Concat's rescaled inputs): quantize(op(dequantize(x))) in float32.

Each kernel also runs on seeded random shapes and parameters; each compiled graph runs on a few inputs,
one of them the extremes of the input type (saturation). Compiled libraries are cached by hash.
"""
from __future__ import annotations

from fractions import Fraction
import math
import re
import shutil
import subprocess

import numpy as np
import pytest

import cglow
from cglow.graph.quant.params import NUDGE, SHARED_BITS, SHIFT_STEP, float32_multipliers, multipliers
from cglow.tools.host import STRICT_FLAGS
from cglow.options import Options
from tests.qdq import (INT8, UINT8, QGraph, bias_q, clamp_range, conv_acc, conv_chain, conv_layer, dequantize_f32,
                       folded_ops, input_sets, quantize_f32, rand_q, requantize, requantize_product, run)


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


# --- convolution ------------------------------------------------------------------------------------


def conv_case(rng, *, x_shape, x_dtype=INT8, x_zero=0, **kwargs):
    """A QDQ Conv graph with seeded weights and scales, and its integer reference (a function of x)."""
    g = QGraph()
    x_scale = np.float32(rng.uniform(0.005, 0.05))
    y, *_, reference = conv_layer(g, rng, g.input("x", x_dtype, x_shape), x_shape, x_scale=x_scale,
                                  x_zero=x_zero, x_dtype=x_dtype, **kwargs)
    return g.model([y]), reference


def check_conv(seed=0, expect="IntConv", **kwargs):
    rng = np.random.default_rng(seed)
    model, reference = conv_case(rng, **kwargs)
    assert expect in folded_ops(model) and "Conv" not in folded_ops(model), folded_ops(model)
    for (x,) in input_sets(rng, [(kwargs["x_shape"], kwargs.get("x_dtype", INT8))]):
        (got,) = run(model, x)
        want = reference(x)
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
        assert np.array_equal(got, want), f"{np.sum(got != want)} of {got.size} differ; max " \
                                          f"{np.abs(got.astype(int) - want).max()} steps"


CONV_CASES = {
    "padded, input zero point": dict(x_shape=(1, 3, 7, 6), m=5, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=7),
    "asymmetric padding": dict(x_shape=(1, 2, 6, 7), m=4, kernel=(3, 2), pads=[2, 0, 1, 1], x_zero=-11),
    "unpadded, input zero point": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), x_zero=-9),
    "stride 2": dict(x_shape=(1, 3, 9, 8), m=6, kernel=(3, 3), pads=[1, 1, 1, 1], strides=[2, 2], x_zero=3),
    "dilation": dict(x_shape=(1, 2, 9, 9), m=3, kernel=(3, 3), pads=[2, 2, 2, 2], dilations=[2, 2], x_zero=5),
    "depthwise": dict(x_shape=(1, 6, 7, 7), m=6, kernel=(3, 3), group=6, pads=[1, 1, 1, 1], x_zero=-4),
    "depthwise, multiplier 2, stride 2": dict(x_shape=(1, 3, 8, 8), m=6, kernel=(3, 3), group=3,
                                              pads=[1, 1, 1, 1], strides=[2, 2], x_zero=2),
    "grouped": dict(x_shape=(1, 4, 6, 6), m=6, kernel=(3, 3), group=2, pads=[1, 1, 1, 1], x_zero=1),
    "1x1": dict(x_shape=(1, 8, 5, 5), m=7, kernel=(1, 1), x_zero=-3),
    "1x1, stride 2": dict(x_shape=(1, 4, 6, 6), m=3, kernel=(1, 1), strides=[2, 2], x_zero=12),
    "1-D": dict(x_shape=(1, 4, 17), m=5, kernel=(3,), pads=[1, 1], x_zero=6),
    "1-D, stride 2, unpadded": dict(x_shape=(1, 3, 16), m=2, kernel=(5,), strides=[2], x_zero=-6),
    "per-tensor weight scale": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), pads=[1, 1, 1, 1],
                                    per_channel=False, x_zero=4),
    "weights with zero points": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=-2,
                                     w_zero=[5, -7, 0, 100]),
    "weights with one zero point": dict(x_shape=(1, 2, 5, 5), m=3, kernel=(3, 3), per_channel=False,
                                        w_zero=-30, x_zero=8),
    "uint8 activations": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], x_dtype=UINT8,
                              x_zero=128),
    "uint8 activations, unpadded": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), x_dtype=UINT8, x_zero=131),
    "uint8 weights": dict(x_shape=(1, 3, 5, 5), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], x_dtype=UINT8,
                          w_dtype=UINT8, x_zero=120, w_zero=[128, 120, 135, 0]),
    "fused Relu": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=3, act="relu"),
    "fused Relu, uint8": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], x_dtype=UINT8,
                              x_zero=100, act="relu", y_zero=0),
    "fused Clip (Relu6)": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=-5,
                               act=(0.0, 6.0)),
    "fused Clip, narrow": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), x_zero=-5, act=(-1.0, 1.5)),
    "one output channel": dict(x_shape=(1, 3, 6, 6), m=1, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=9),
    "one output channel, per-tensor": dict(x_shape=(1, 5, 4, 4), m=1, kernel=(2, 2), per_channel=False),
    "int32 bias (dequantized)": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], bias="int32",
                                     x_zero=-6),
    "int32 bias, per-tensor": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), bias="int32", per_channel=False),
    "no bias, batch 2": dict(x_shape=(2, 3, 5, 5), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], bias=False,
                             x_zero=-1),
    "many channels": dict(x_shape=(1, 19, 5, 4), m=13, kernel=(3, 3), pads=[1, 0, 1, 2], x_zero=17),
    "auto_pad SAME_UPPER, stride 2": dict(x_shape=(1, 3, 7, 6), m=4, kernel=(3, 3), strides=[2, 2],
                                          auto_pad="SAME_UPPER", x_zero=7),
    "auto_pad SAME_LOWER, even kernel": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(2, 2), auto_pad="SAME_LOWER",
                                             x_zero=-7),
    "int8 in, uint8 out": dict(x_shape=(1, 3, 5, 5), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=5,
                               y_dtype=UINT8),
    "uint8 in, int8 out, fused Relu": dict(x_shape=(1, 3, 5, 5), m=4, kernel=(3, 3), pads=[1, 1, 1, 1],
                                           x_dtype=UINT8, x_zero=140, y_dtype=INT8, act="relu"),
}


@pytest.mark.parametrize("case", list(CONV_CASES))
def test_conv(case):
    check_conv(**CONV_CASES[case])


@pytest.mark.parametrize("case, kernel", [("1x1", "gemm"), ("1x1, stride 2", "conv"),
                                          ("padded, input zero point", "conv")])
def test_pointwise_conv_runs_as_a_gemm(case, kernel):
    """An unpadded stride-1 1x1 integer conv is computed by the matrix-product kernel (its input zero point
    folded into the bias); others by a conv kernel."""
    model, _ = conv_case(np.random.default_rng(0), **CONV_CASES[case])
    source = cglow.compile_model(model, name="net").c_source
    kernels = [n for n in functions(source) if re.fullmatch(r"net_\d+_\w+", n)]
    assert [re.sub(r"net_\d+_", "", n) for n in kernels] == [kernel], kernels


def random_conv_kwargs(seed: int) -> dict:
    rng = np.random.default_rng(100 + seed)
    spatial = int(rng.integers(1, 3))
    kernel = tuple(int(k) for k in rng.integers(1, 4, spatial))
    dilations = [int(d) for d in rng.integers(1, 3, spatial)]
    strides = [int(s) for s in rng.integers(1, 3, spatial)]
    pads = [int(p) for p in rng.integers(0, 3, 2 * spatial)]
    group = int(rng.choice([1, 2]))
    c, m = group * int(rng.integers(1, 5)), group * int(rng.integers(1, 5))
    size = [int(d * (k - 1) + 1 + rng.integers(0, 6)) for k, d in zip(kernel, dilations)]
    x_dtype = INT8 if rng.integers(0, 2) else UINT8
    per_channel = bool(rng.integers(0, 2))
    return dict(x_shape=(int(rng.integers(1, 3)), c) + tuple(size), m=m, kernel=kernel, group=group, pads=pads,
                strides=strides, dilations=dilations, x_dtype=x_dtype, per_channel=per_channel,
                x_zero=int(rng.integers(-20, 21)) + (128 if x_dtype == UINT8 else 0),
                w_zero=[int(z) for z in rng.integers(-3, 4, m)] if per_channel else int(rng.integers(-3, 4)),
                act=[None, "relu", (-0.5, 2.0)][int(rng.integers(0, 3))])


@pytest.mark.parametrize("seed", range(4))
def test_conv_random(seed):
    check_conv(seed=seed, **random_conv_kwargs(seed))


def functions(source: str) -> dict[str, str]:
    """Every function defined in generated C (static helpers, kernels, net_run): name -> text."""
    pattern = r"^(?:static |CGLOW_KERNEL )?\w+ \**(\w+)\([^;{]*?\)\n\{.*?^\}\n"
    return {m.group(1): m.group(0) for m in re.finditer(pattern, source, re.M | re.S)}


@pytest.mark.parametrize("case", ["one conv", "seven convs"])
def test_conv_kernels_are_integer_only_and_build_warning_free(case, tmp_path):
    """The C of int8 conv models (int8 in and out) computes in integers only: no float or double and no
    math library call in any function (the conv kernels requantize through cglow_requant or, where it gives
    the same, cglow_requant_high); and the file
    builds with no message at all under the strict flags, with each C compiler at hand, -O0 and -O2."""
    rng = np.random.default_rng(12)
    if case == "one conv":
        model, _ = conv_case(rng, **CONV_CASES["padded, input zero point"])
    else:
        model, _ = conv_chain(rng, CHAIN, (1, 4, 10, 9))
    compiled = cglow.compile_model(model, name="net")
    found = functions(compiled.c_source)
    convs = [name for name in found if re.fullmatch(r"net_\d+_conv\w*", name)]
    assert convs and "net_run" in found and {"cglow_requant", "cglow_requant_high"} & set(found), sorted(found)
    for name in convs:
        assert re.search(r"cglow_requant(_high)?\(", found[name]), found[name]
    for name, text in found.items():
        assert not re.search(r"\b(float|double)\b|\b[a-z]+f\(|\.[0-9]", text), f"{name}:\n{text}"
    (tmp_path / "net.c").write_text(compiled.c_source)
    (tmp_path / "net.h").write_text(compiled.h_source)
    compilers = [cc for cc in ("cc", "gcc", "clang") if shutil.which(cc)]
    assert compilers
    for cc in compilers:
        for opt in ("-O0", "-O2"):
            result = subprocess.run([cc, opt, *STRICT_FLAGS, "-c", "net.c", "-o", f"net-{cc}{opt}.o"],
                                    cwd=tmp_path, capture_output=True, text=True)
            assert result.returncode == 0 and result.stderr == "", f"{cc} {opt}: {result.stderr}"


def test_a_layers_channels_share_one_literal_shift():
    """Per-channel weight scales within a factor 10 (shifts 4 apart at most): the convolution requantizes with
    one shift, a literal of its kernel (no array of shifts among the weights); this one, its output planar,
    adds its bias in the expression (Epilogue.folded), and gives the reference's integers."""
    model, reference = conv_case(np.random.default_rng(31), **CONV_CASES["stride 2"])
    compiled = cglow.compile_model(model, name="net", options=Options(target="cortex-m4"))
    source = compiled.c_source
    assert re.search(r"cglow_requant_high\(acc\[i\]\[j\] \+ e\d+\[[^\]]+\], e\d+\[[^\]]+\], \d+, ", source)
    assert "shifts less 33" not in source
    x = rand_q(np.random.default_rng(32), (1, 3, 9, 8), INT8)
    assert np.array_equal(cglow.build(compiled)(x)[0], reference(x))


# --- Gemm and MatMul --------------------------------------------------------------------------------

def check_outputs(model, reference, shapes_dtypes, rng, count: int = 2):
    for inputs in input_sets(rng, shapes_dtypes, count):
        got = run(model, *inputs)
        want = reference(*inputs)
        want = want if isinstance(want, (list, tuple)) else [want]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
            assert np.array_equal(g, w), f"{np.sum(g != w)} of {g.size} differ; max " \
                                         f"{np.abs(g.astype(int) - w).max()} steps"


def y_params(rng, acc_scale: float, terms: int, dtype):
    """An output scale for accumulators of `terms` products (a few saturate) and a zero point."""
    scale = np.float32(acc_scale * 75.0 * 75.0 * math.sqrt(terms) / rng.uniform(40, 90))
    return scale, int(rng.integers(-20, 21)) + (128 if dtype == UINT8 else 0)


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


# --- Add and Mul ------------------------------------------------------------------------------------

def add_reference(a, b, za, zb, sa, sb, sy, zy, bounds, dtype):
    """The documented IntAdd: factors of the exact scale ratios, requantized at `unit`, halves to even."""
    ratios = [Fraction(float(np.float32(s))) / Fraction(float(np.float32(sy))) for s in (sa, sb)]
    unit = Fraction(1, 2 ** (21 - (math.frexp(float(max(ratios)))[1] - 1)))
    if not any((r / unit).denominator == 1 for r in ratios):
        unit = max(ratios) / 2 ** 22
    fa, fb = (round(r / unit) for r in ratios)
    assert 1 << 21 <= max(fa, fb) <= 1 << 22
    acc = (a.astype(np.int64) - za) * fa + (b.astype(np.int64) - zb) * fb
    return requantize(acc, float(unit), zy, bounds, dtype)


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


# --- tables -----------------------------------------------------------------------------------------

def all_codes(dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.arange(info.min, int(info.max) + 1).astype(dtype).reshape(1, 256)


def near_tie(real: np.ndarray, scale) -> np.ndarray:
    """Where real / scale (float32) lies within 1e-6 of a rounding tie (an odd multiple of 1/2)."""
    ratio = (np.asarray(real, np.float32) / np.float32(scale)).astype(np.float64)
    return np.abs(ratio - np.floor(ratio) - 0.5) <= 1e-6


def unary_case(op, x_params, y_params, dtype=INT8, y_dtype=None, **attrs):
    y_dtype = y_dtype or dtype
    g = QGraph()
    xf = g.dq(g.input("x", dtype, (1, 256)), *x_params, dtype)
    yf = xf if op is None else g.node(op, [xf], **attrs)
    return g.model([g.q(yf, *y_params, y_dtype)])


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


# --- chains: channels-last intermediates, depthwise and pointwise kernels, register tiles of targets -----


CHAIN = [dict(m=8, kernel=(3, 3), pads=[1, 1, 1, 1], act="relu"),
         dict(m=8, kernel=(3, 3), pads=[1, 1, 1, 1], y_zero=9),
         dict(m=8, kernel=(3, 3), group=8, pads=[1, 1, 1, 1], act=(0.0, 6.0)),
         dict(m=12, kernel=(1, 1), w_zero=[1] * 6 + [-2] * 6),
         dict(m=12, kernel=(3, 3), group=12, pads=[1, 1, 1, 1], strides=[2, 2], y_dtype=UINT8, y_zero=130),
         dict(m=6, kernel=(3, 3), pads=[0, 1, 1, 0], y_dtype=INT8),
         dict(m=5, kernel=(1, 1))]


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
