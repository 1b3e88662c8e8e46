"""CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED: float32 ones become Conv and Gemm nodes, 8-bit ones
cglow's IntConv and IntGemm with TFLite's requantization (rounding "tflite": per output channel, the
quantized multiplier of input scale x filter scale / output scale, as LiteRT's kernels compute it); float ones
with int8 weights, hybrid.py's HybridConv and HybridGemm."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from ..ir import TensorType
from ..quant.params import narrow
from . import hybrid
from .arith import quantize_multipliers
from .build import TO_NCHW, TO_NHWC, Build, activation_bounds, float_activation, translator, window_pads


def requant_attrs(b: Build, real: np.ndarray, single: bool = False) -> dict:
    """An integer op's requantization to the output by TFLite's quantized multipliers of each real factor, with
    the fused activation's bounds: rounded twice, as its convolutions round (MultiplyByQuantizedMultiplier), or
    once, halves up, as LiteRT's fully-connected kernels do (`single`; measured: their ties round so), then as
    cglow's multipliers, acc * mult / 2^(31 - shift)."""
    out = b.quant(-1)
    mult, shift = quantize_multipliers(real)
    lo, hi = activation_bounds(b, out, b.tensor(-1).dtype)
    if single:
        return dict(mult=mult, shift=31 - shift, y_zero=int(out.zero[0]), lo=lo, hi=hi, rounding="half_up")
    return dict(mult=mult, shift=shift, y_zero=int(out.zero[0]), lo=lo, hi=hi, rounding="tflite")


def bias_input(b: Build, i: int, size: int, dtype) -> str:
    """The optional bias input i, or zeros (the integer ops take one)."""
    if b.has(i):
        return b.value(i)
    return b.const("bias", np.zeros(size, dtype))


def filter_scales(b: Build, i: int, channels: int, axis: int) -> np.ndarray:
    """The scale of each output channel's filter, which must be symmetric (zero points 0)."""
    w = b.quant(i)
    if w.axis is not None and w.axis != axis:
        raise CglowError(f"{b.op.describe()}: the filter is quantized along dimension {w.axis}; TFLite's "
                         f"kernels take per-channel parameters along dimension {axis}")
    if np.any(w.zero):
        raise CglowError(f"{b.op.describe()}: the filter's zero points are not 0 (TFLite's 8-bit kernels "
                         f"take symmetric filters)")
    return np.broadcast_to(w.scale.astype(np.float64), (channels,))


@translator("CONV_2D", "DEPTHWISE_CONV_2D")
def _conv(b: Build, op) -> None:
    x = b.tensor(0)
    if len(x.shape) != 4:
        raise CglowError(f"{op.describe()}: the input must be NHWC (4-D), it is {list(x.shape)}")
    data = b.weights(1)
    channels = x.shape[3]
    if op.op == "DEPTHWISE_CONV_2D":  # [1, KH, KW, C x multiplier]
        w = data.transpose(3, 0, 1, 2)
        group, axis = channels, 3
    else:                             # [O, KH, KW, I]
        w = data.transpose(0, 3, 1, 2)
        if channels % data.shape[3]:
            raise CglowError(f"{op.describe()}: {channels} input channels are no multiple of the filter's "
                             f"{data.shape[3]}")
        group, axis = channels // data.shape[3], 0
    kernel = w.shape[2:]
    strides = (b.option("StrideH"), b.option("StrideW"))
    dilations = (b.option("DilationHFactor") or 1, b.option("DilationWFactor") or 1)
    attrs = {"kernel_shape": kernel, "strides": strides, "dilations": dilations, "group": group,
             "pads": window_pads(x.shape[1:3], kernel, strides, dilations, b.padding())}
    xt = b.transpose(b.value(0), TO_NCHW)
    out = b.tensor(-1)
    nchw = TensorType(out.dtype, (out.shape[0], out.shape[3]) + out.shape[1:3])
    if b.quantized():
        scales = float(b.quant(0).scale[0]) * filter_scales(b, 1, w.shape[0], axis) / float(b.quant(-1).scale[0])
        attrs.update(x_zero=int(b.quant(0).zero[0]), **requant_attrs(b, scales))
        y = b.add("IntConv", [xt, b.const("filter", narrow(w.astype(np.int64))),
                              bias_input(b, 2, w.shape[0], np.int32)], attrs, out_type=nchw)
    elif hybrid.takes(b):
        y = float_activation(b, hybrid.conv(b, xt, w, attrs, nchw))
    else:
        y = float_activation(b, b.add("Conv", [xt, b.const("filter", w)] + ([b.value(2)] if b.has(2) else []),
                                      attrs))
    b.finish(b.transpose(y, TO_NHWC))


@translator("FULLY_CONNECTED")
def _dense(b: Build, op) -> None:
    data = b.weights(1)
    if data.ndim != 2:
        raise CglowError(f"{op.describe()}: the weights must be 2-D [outputs, inputs], they are {list(data.shape)}")
    n, k = data.shape
    x = b.tensor(0)
    size = int(np.prod(x.shape))
    if size % k or b.option("KeepNumDims") and x.shape[-1] != k:
        raise CglowError(f"{op.describe()}: an input of {list(x.shape)} is no whole number of rows of {k}")
    rows = b.add("Reshape", [b.value(0), b.const("rows", np.array([size // k, k], np.int64))])
    if b.quantized():
        w = b.quant(1)
        scales = np.float64(np.float32(b.quant(0).scale[0]) * w.scale.astype(np.float32)) \
            if w.axis is None else float(b.quant(0).scale[0]) * filter_scales(b, 1, n, 0)
        attrs = {"transA": 0, "transB": 1, "a_zero": int(b.quant(0).zero[0]), "b_zero": 0,
                 **requant_attrs(b, np.broadcast_to(scales / float(b.quant(-1).scale[0]), (n,)), single=True)}
        weights = narrow(data.astype(np.int64) - (w.zero.reshape(-1, 1) if w.axis is not None else int(w.zero[0])))
        y = b.add("IntGemm", [rows, b.const("weights", weights), bias_input(b, 2, n, np.int32)], attrs,
                  out_type=TensorType(b.tensor(-1).dtype, (size // k, n)))
    elif hybrid.takes(b):
        y = float_activation(b, hybrid.dense(b, rows, data))
    else:
        y = float_activation(b, b.add("Gemm", [rows, b.value(1)] + ([b.value(2)] if b.has(2) else []),
                                      {"transB": 1}))
    # LiteRT's output: the input's leading dimensions kept (keep_num_dims), or one dimension of rows
    out_shape = x.shape[:-1] + (n,) if b.option("KeepNumDims") else (size // k, n)
    b.finish(b.add("Reshape", [y, b.shape_const(*out_shape)]))
