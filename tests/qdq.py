"""What the integer-kernel tests share: a QDQ graph built by hand (QGraph: 8-bit graph inputs, constants,
DequantizeLinear / QuantizeLinear pairs), seeded 8-bit inputs, and the NumPy integer reference of the kernels
(requantization with Python integers, the convolution's accumulator, a Conv layer and a chain of them).

The integer-kernel tests (tests/kernels/test_quant_kernels_*.py) each build a small QDQ graph by hand (8-bit
graph inputs -> DequantizeLinear, the float op, [Relu or Clip,] QuantizeLinear -> 8-bit graph output), check
that cglow folds it into the integer op it promises (IntConv, IntGemm, IntAdd, IntMul, IntAvgPool, IntTable, or
a data-movement op on the integers), run the C, and compare every output element with the integer semantics
the compiler documents, computed here in Python integers:

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
"""
from __future__ import annotations

from fractions import Fraction
import itertools
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import cglow
from cglow.options import Options
from cglow.tiles import host_target
from cglow.tools.host import HOST_FLAGS
from cglow.graph import passes as graph_passes
from cglow.graph.onnx_import import import_model
from cglow.graph.quant.params import float32_multipliers, multipliers
from tests.util import checked_model


INT8, UINT8 = np.dtype(np.int8), np.dtype(np.uint8)
ONNX_TYPE = {INT8: TensorProto.INT8, UINT8: TensorProto.UINT8, np.dtype(np.float32): TensorProto.FLOAT,
             np.dtype(np.int32): TensorProto.INT32}


# --- graph building ---------------------------------------------------------------------------------

class QGraph:
    """A hand-made QDQ graph: 8-bit graph inputs, constants, DequantizeLinear / QuantizeLinear pairs."""

    def __init__(self):
        self.nodes, self.inits, self.inputs, self.count = [], [], [], 0

    def fresh(self, base: str) -> str:
        self.count += 1
        return f"{base}{self.count}"

    def input(self, name: str, dtype, shape) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, ONNX_TYPE[np.dtype(dtype)], list(shape)))
        return name

    def const(self, value: np.ndarray, base: str = "c") -> str:
        name = self.fresh(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs, **attrs) -> str:
        out = self.fresh(op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=self.fresh(op), **attrs))
        return out

    def dq(self, x: str, scale, zero, dtype, axis: int | None = None) -> str:
        """DequantizeLinear of x (of `dtype`) with float32 scale(s) and zero point(s)."""
        scale = np.asarray(scale, np.float32)
        zero = np.asarray(zero, dtype)
        extra = {} if axis is None else {"axis": axis}
        return self.node("DequantizeLinear", [x, self.const(scale, "scale"), self.const(zero, "zero")], **extra)

    def q(self, x: str, scale, zero, dtype) -> str:
        return self.node("QuantizeLinear", [x, self.const(np.asarray(scale, np.float32), "scale"),
                                            self.const(np.asarray(zero, dtype), "zero")])

    def activation(self, x: str, act) -> tuple[str, float | None, float | None]:
        """x followed by act (None, "relu" or a Clip's (lo, hi)), and the real range it clamps to."""
        if act is None:
            return x, None, None
        if act == "relu":
            return self.node("Relu", [x]), 0.0, None
        lo, hi = act
        return self.node("Clip", [x, self.const(np.float32(lo), "lo"), self.const(np.float32(hi), "hi")]), lo, hi

    def model(self, outputs, opset: int = 13) -> onnx.ModelProto:
        outs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs]
        graph = helper.make_graph(self.nodes, "qdq", self.inputs, outs, initializer=self.inits)
        return checked_model(graph, opset, ir_version=8)


def folded_ops(model: onnx.ModelProto) -> list[str]:
    """The ops of the graph after cglow's graph passes (QDQ folding included)."""
    graph = import_model(model)
    for rewrite in graph_passes.PIPELINE:
        graph = rewrite(graph)
    return [n.op for n in graph.nodes]


def run(model: onnx.ModelProto, *inputs: np.ndarray) -> list[np.ndarray]:
    net = cglow.build(cglow.compile_model(model, name="net"))
    return net(*inputs)


def rand_q(rng, shape, dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)


def extreme_q(rng, shape, dtype) -> np.ndarray:
    """Only the type's lowest and highest values: accumulators at their largest, outputs saturated."""
    info = np.iinfo(dtype)
    return np.where(rng.integers(0, 2, shape) == 1, info.max, info.min).astype(dtype)


def input_sets(rng, shapes_dtypes, count: int = 2):
    """`count` random draws of every input, then one of extremes."""
    for _ in range(count):
        yield [rand_q(rng, s, d) for s, d in shapes_dtypes]
    yield [extreme_q(rng, s, d) for s, d in shapes_dtypes]


# --- the integer reference --------------------------------------------------------------------------

def _round_shift(value, mult, shift):
    """round_half_to_even(value * mult / 2**shift), Python integers."""
    q, r = divmod(int(value) * int(mult), 1 << int(shift))
    twice = 2 * r
    if twice > (1 << int(shift)) or (twice == (1 << int(shift)) and q & 1):
        q += 1
    return q


_round_shift_array = np.frompyfunc(_round_shift, 3, 1)


def requantize(acc: np.ndarray, real, y_zero: int, bounds, dtype, axis: int | None = None) -> np.ndarray:
    """y_zero + round_half_to_even(acc * mult / 2**shift), clamped; real (the factors) per tensor, or per
    index of `axis` of acc."""
    return _requantized(acc, multipliers(np.asarray(real, np.float64).reshape(-1), shared=True), y_zero, bounds,
                        dtype, axis)


def requantize_product(acc: np.ndarray, a_scale, b_scale, y_scale, y_zero: int, bounds, dtype,
                       axis: int | None = None) -> np.ndarray:
    """requantize() of a product of a and b (a convolution, a matrix product) as cglow does it: by the float32
    factors a_scale * b_scale / y_scale, multipliers nudged to round as float32 does (float32_multipliers)."""
    factors = np.float32(a_scale) * np.asarray(b_scale, np.float32).reshape(-1) / np.float32(y_scale)
    fixed = float32_multipliers(factors, bounds[0] - y_zero, bounds[1] - y_zero, shared=True)
    return _requantized(acc, fixed, y_zero, bounds, dtype, axis)


def _requantized(acc: np.ndarray, fixed, y_zero: int, bounds, dtype, axis: int | None) -> np.ndarray:
    mult, shift = fixed
    shape = [1] * acc.ndim
    if mult.size > 1:
        shape[axis] = -1
    mult = mult.astype(object).reshape(shape)
    shift = shift.astype(object).reshape(shape)
    y = _round_shift_array(acc.astype(object), mult, shift) + int(y_zero)
    return np.clip(np.asarray(y).astype(np.int64), bounds[0], bounds[1]).astype(dtype)


def quantize_f32(real, scale, zero, dtype) -> np.ndarray:
    """QuantizeLinear: float32 division, round half to even, saturate."""
    info = np.iinfo(dtype)
    q = np.rint(np.asarray(real, np.float32) / np.float32(scale)).astype(np.float64) + int(zero)
    return np.clip(q, info.min, info.max).astype(dtype)


def dequantize_f32(q, scale, zero) -> np.ndarray:
    return ((np.asarray(q, np.int64) - int(zero)) * np.float32(scale)).astype(np.float32)


def clamp_range(dtype, y_scale, y_zero, lo=None, hi=None) -> tuple[int, int]:
    """The output type's range narrowed by a real clamp [lo, hi] (quantized as QuantizeLinear does)."""
    info = np.iinfo(dtype)
    qlo, qhi = int(info.min), int(info.max)
    if lo is not None:
        qlo = max(qlo, int(quantize_f32(lo, y_scale, y_zero, dtype)))
    if hi is not None:
        qhi = min(qhi, int(quantize_f32(hi, y_scale, y_zero, dtype)))
    return qlo, qhi


def bias_q(real_bias: np.ndarray, acc_scale: np.ndarray) -> np.ndarray:
    return np.rint(np.asarray(real_bias, np.float64) / acc_scale).astype(np.int64)


def conv_acc(x: np.ndarray, w: np.ndarray, pads, strides, dilations, group: int) -> np.ndarray:
    """sum over each window of x * w (int64; x already minus its zero point: zero padding is real zero)."""
    spatial = x.ndim - 2
    half = len(pads) // 2
    xp = np.pad(x.astype(np.int64), [(0, 0), (0, 0)] + [(pads[i], pads[i + half]) for i in range(spatial)])
    kernel = w.shape[2:]
    outs = [(xp.shape[2 + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1 for i in range(spatial)]
    n, m = x.shape[0], w.shape[0]
    cg, mg = x.shape[1] // group, m // group
    acc = np.zeros([n, m] + outs, np.int64)
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg]
        ws = w[g * mg:(g + 1) * mg].astype(np.int64)
        for k in itertools.product(*[range(s) for s in kernel]):
            index = tuple(slice(k[i] * dilations[i], k[i] * dilations[i] + (outs[i] - 1) * strides[i] + 1,
                                strides[i]) for i in range(spatial))
            patch = xs[(slice(None), slice(None)) + index]           # [n, cg, *outs]
            tap = ws[(slice(None), slice(None)) + k]                 # [mg, cg]
            acc[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", patch, tap)
    return acc


def same_pads(auto_pad, size, kernel, strides, dilations) -> list[int]:
    """The explicit pads of auto_pad SAME_UPPER / SAME_LOWER (begins, then ends)."""
    begins, ends = [], []
    for n, k, s, d in zip(size, kernel, strides, dilations):
        total = max((-(-n // s) - 1) * s + d * (k - 1) + 1 - n, 0)
        small, big = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else big)
        ends.append(big if auto_pad == "SAME_UPPER" else small)
    return begins + ends


def conv_layer(g: QGraph, rng, x: str, x_shape, *, x_scale, x_zero, x_dtype, m, kernel, group=1, pads=None,
               strides=None, dilations=None, auto_pad=None, w_dtype=INT8, y_dtype=None, w_zero=0,
               per_channel=True, bias=True, act=None, y_zero=None):
    """DequantizeLinear(x) -> Conv (seeded weights) [-> Relu / Clip] -> QuantizeLinear, added to g; returns
    the output's name, shape, scale, zero point and type, and the layer's integer reference."""
    y_dtype = y_dtype or x_dtype
    spatial = len(x_shape) - 2
    strides = strides or [1] * spatial
    dilations = dilations or [1] * spatial
    if auto_pad:
        pads = same_pads(auto_pad, x_shape[2:], kernel, strides, dilations)
    pads = pads or [0] * (2 * spatial)
    c = x_shape[1]
    w = rand_q(rng, (m, c // group) + tuple(kernel), w_dtype)
    w_scale = rng.uniform(0.002, 0.02, m if per_channel else ()).astype(np.float32)
    w_zeros = np.broadcast_to(np.asarray(w_zero, np.int64), (m,) if per_channel else ())
    real_bias = (rng.standard_normal(m) * 2).astype(np.float32)
    taps = c // group * int(np.prod(kernel))
    spread = 75.0 * 75.0 * math.sqrt(taps)  # typical |acc|
    y_scale = np.float32(x_scale * float(np.max(w_scale)) * spread / rng.uniform(40, 90))
    if y_zero is None:
        y_zero = int(rng.integers(-20, 21)) + (128 if y_dtype == UINT8 else 0)

    xf = g.dq(x, x_scale, x_zero, x_dtype)
    wf = g.dq(g.const(w, "w"), w_scale, w_zeros, w_dtype, axis=0 if per_channel else None)
    if bias == "int32":  # as quantizers write it: int32 at scale x_scale * w_scale (float32), zero point 0
        bias_int = rng.integers(-5000, 5000, m).astype(np.int32)
        bias_scale = (np.float32(x_scale) * np.broadcast_to(w_scale, (m,))).astype(np.float32)
        ins = [xf, wf, g.node("DequantizeLinear", [g.const(bias_int, "bias"), g.const(bias_scale, "bias_scale")],
                              axis=0)]
    else:
        ins = [xf, wf] + ([g.const(real_bias, "bias")] if bias else [])
    attrs = dict(kernel_shape=list(kernel), strides=list(strides), dilations=list(dilations), group=group)
    attrs.update(auto_pad=auto_pad) if auto_pad else attrs.update(pads=list(pads))
    yf = g.node("Conv", ins, **attrs)
    yf, lo, hi = g.activation(yf, act)
    y = g.q(yf, y_scale, y_zero, y_dtype)

    acc_scale = np.float64(x_scale) * np.broadcast_to(w_scale.astype(np.float64), (m,))
    w_int = w.astype(np.int64) - np.broadcast_to(w_zeros, (m,)).reshape((m,) + (1,) * (w.ndim - 1))
    b = bias_int.astype(np.int64) if bias == "int32" else \
        bias_q(real_bias, acc_scale) if bias else np.zeros(m, np.int64)
    bounds = clamp_range(y_dtype, y_scale, y_zero, lo, hi)

    def reference(xq: np.ndarray) -> np.ndarray:
        acc = conv_acc(xq.astype(np.int64) - x_zero, w_int, pads, strides, dilations, group)
        acc += b.reshape((1, m) + (1,) * spatial)
        return requantize_product(acc, x_scale, np.broadcast_to(w_scale, (m,)), y_scale, y_zero, bounds, y_dtype,
                                  axis=1)

    size = [(n + pads[i] + pads[i + spatial] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1
            for i, n in enumerate(x_shape[2:])]
    return y, (x_shape[0], m) + tuple(size), y_scale, y_zero, y_dtype, reference


def conv_chain(rng, layers, x_shape, x_dtype=INT8, x_zero=5):
    """Convolutions one after the other (each DequantizeLinear -> Conv -> QuantizeLinear), and the
    composition of their references."""
    g = QGraph()
    name, shape, scale, zero, dtype = g.input("x", x_dtype, x_shape), x_shape, np.float32(0.03), x_zero, x_dtype
    references = []
    for kwargs in layers:
        name, shape, scale, zero, dtype, reference = conv_layer(g, rng, name, shape, x_scale=scale, x_zero=zero,
                                                                x_dtype=dtype, **kwargs)
        references.append(reference)

    def reference(x):
        for r in references:
            x = r(x)
        return x

    return g.model([name]), reference


# The C built both ways on x86-64 (runtime_c/vnni.c): its loops (the default flags) and, where this machine has AVX-512
# VNNI, its intrinsics (-march=native); None where it has not: no machine runs them otherwise (QEMU does not emulate
# AVX-512).
BUILDS = {"C loops": HOST_FLAGS,
          "VNNI intrinsics": ("-march=native", *HOST_FLAGS) if host_target() == "x86-avx512-vnni" else None}


def check_outputs(model, reference, shapes_dtypes, rng, count: int = 2, target: str = "generic",
                  cflags=HOST_FLAGS) -> str:
    """The model's outputs against the reference on `count` random input sets and one of extremes, compiled for
    `target`'s tiles and built with `cflags`; its C."""
    compiled = cglow.compile_model(model, name="net", options=Options(target=target))
    net = cglow.build(compiled, cflags=cflags)
    for inputs in input_sets(rng, shapes_dtypes, count):
        got = net(*inputs)
        want = reference(*inputs)
        want = want if isinstance(want, (list, tuple)) else [want]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
            assert np.array_equal(g, w), f"{np.sum(g != w)} of {g.size} differ; max " \
                                         f"{np.abs(g.astype(int) - w).max()} steps"
    return compiled.c_source


def y_params(rng, acc_scale: float, terms: int, dtype):
    """An output scale for accumulators of `terms` products (a few saturate) and a zero point."""
    scale = np.float32(acc_scale * 75.0 * 75.0 * math.sqrt(terms) / rng.uniform(40, 90))
    return scale, int(rng.integers(-20, 21)) + (128 if dtype == UINT8 else 0)


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


# A chain of seven convolutions: NHWC, depthwise and pointwise layers, fused activations, output types.
CHAIN = [dict(m=8, kernel=(3, 3), pads=[1, 1, 1, 1], act="relu"),
         dict(m=8, kernel=(3, 3), pads=[1, 1, 1, 1], y_zero=9),
         dict(m=8, kernel=(3, 3), group=8, pads=[1, 1, 1, 1], act=(0.0, 6.0)),
         dict(m=12, kernel=(1, 1), w_zero=[1] * 6 + [-2] * 6),
         dict(m=12, kernel=(3, 3), group=12, pads=[1, 1, 1, 1], strides=[2, 2], y_dtype=UINT8, y_zero=130),
         dict(m=6, kernel=(3, 3), pads=[0, 1, 1, 0], y_dtype=INT8),
         dict(m=5, kernel=(1, 1))]
