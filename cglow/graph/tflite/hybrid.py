"""Hybrid layers: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED and UNIDIRECTIONAL_SEQUENCE_LSTM with float32
inputs and outputs and int8 weights, as TFLite's converter writes a model optimized for size without a
representative dataset (dynamic range quantization). They become cglow's HybridConv and HybridGemm (lowered in
lower/ops/hybrid.py), which keep the weights int8 in flash and compute what LiteRT's hybrid kernels compute;
which of its kernels runs decides how the input is quantized at run time and in which order the scales multiply
the accumulator:

- FULLY_CONNECTED: per input row, symmetric, or asymmetric with asymmetric_quantize_inputs; the accumulator
  times (input scale x weight scale), the weights' scale per tensor or per output channel.
- UNIDIRECTIONAL_SEQUENCE_LSTM: each gate's product with the step's input and with the output state as
  FULLY_CONNECTED's, the gate's weights of one scale (lstm.py stacks the gates: a scale per row).
- CONV_2D with one weight scale (or per-channel scales all equal) and one group: per batch item, symmetric;
  the accumulator times (input scale x weight scale).
- CONV_2D with per-channel scales that differ, or grouped: per batch item, asymmetric; the accumulator times
  the channel's weight scale, then times the input scale.
- DEPTHWISE_CONV_2D: per batch item, asymmetric; the accumulator times (weight scale x input scale).

The bias, float32, is added last. LiteRT reads one weight scale per output channel where it takes them per
channel, and refuses a per-tensor depthwise filter: so does cglow."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from ..ir import TensorType
from .build import Build

F32 = np.dtype(np.float32)


def takes(b: Build) -> bool:
    """Whether the operator is hybrid: float32 input, 8-bit weights."""
    return b.tensor(0).dtype == F32 and b.tensor(1).dtype.kind in "iu" and b.tensor(1).dtype.itemsize == 1


def weight_scales(b: Build, channels: int, axis: int, per_channel: bool, i: int = 1) -> np.ndarray:
    """The scales of the int8 weights, input i: symmetric, per tensor or (`per_channel`) one per output channel."""
    t, q = b.tensor(i), b.quant(i)
    if t.dtype != np.int8:
        raise CglowError(f"{b.op.describe()}: hybrid layers take int8 weights; '{t.name}' is {t.dtype.name}")
    if np.any(q.zero):
        raise CglowError(f"{b.op.describe()}: the weights' zero points are not 0 (LiteRT's hybrid kernels take "
                         f"symmetric weights)")
    if q.axis is not None and q.axis != axis:
        raise CglowError(f"{b.op.describe()}: the weights are quantized along dimension {q.axis}; TFLite's kernels "
                         f"take per-channel scales along dimension {axis}")
    if per_channel and q.scale.size != channels:
        raise CglowError(f"{b.op.describe()}: LiteRT's hybrid kernel reads one weight scale per output channel "
                         f"({channels}); '{t.name}' has {q.scale.size}")
    return q.scale.astype(np.float32)


def _bias(b: Build, channels: int) -> list[str]:
    if not b.has(2):
        return []
    t = b.tensor(2)
    if t.dtype != F32 or t.shape != (channels,):
        raise CglowError(f"{b.op.describe()}: a hybrid layer's bias is float32 [{channels}]; '{t.name}' is "
                         f"{TensorType(t.dtype, t.shape)}")
    return [b.value(2)]


def dense(b: Build, rows: str, weights: np.ndarray) -> str:
    """The HybridGemm of rows [M, K] (float32) with weights [N, K]: its output [M, N] before the activation."""
    n = weights.shape[0]
    scales = weight_scales(b, n, 0, b.quant(1).scale.size > 1)
    return gemm(b, rows, b.const("weights", weights), scales, _bias(b, n))


def gemm(b: Build, rows: str, weights: str, scales: np.ndarray, bias: list[str]) -> str:
    """The HybridGemm of rows [M, K] (float32) with the constant int8 weights [N, K] of these scales (one, or one
    per row of the weights), plus the bias if given: [M, N]. The rows are quantized as the operator's
    asymmetric_quantize_inputs says."""
    attrs = {"w_scales": tuple(float(s) for s in scales), "weights_first": 0,
             "asymmetric": int(bool(b.option("AsymmetricQuantizeInputs")))}
    return b.add("HybridGemm", [rows, weights] + bias, attrs,
                 out_type=TensorType(F32, (b.types[rows].shape[0], b.types[weights].shape[0])))


def conv(b: Build, x: str, weights: np.ndarray, attrs: dict, out_type: TensorType) -> str:
    """The HybridConv of x (NCHW) with weights [M, C / group, KH, KW]: its output before the activation."""
    m = weights.shape[0]
    depthwise = b.op.op == "DEPTHWISE_CONV_2D"
    scales = b.quant(1).scale
    per_channel = depthwise or attrs["group"] != 1 or bool(np.any(scales != scales[0]))
    scales = weight_scales(b, m, 3 if depthwise else 0, per_channel)
    attrs = {**attrs, "w_scales": tuple(float(s) for s in (scales if per_channel else scales[:1])),
             "asymmetric": int(per_channel), "weights_first": int(per_channel and not depthwise)}
    return b.add("HybridConv", [x, b.const("filter", weights)] + _bias(b, m), attrs, out_type=out_type)
