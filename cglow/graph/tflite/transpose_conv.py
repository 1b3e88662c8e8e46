"""TRANSPOSE_CONV: each input pixel adds its filter, times its value, to the output at its position times the
stride less the padding (TFLite's scatter). A float32 one is an ONNX ConvTranspose; an 8-bit one is the same
sums as a convolution with the filter flipped over the input spread out by the stride, the gaps holding the
input's zero point, so that it becomes cglow's IntConv with TFLite's per-channel requantization: the int32 sums
are exact, and the bias and requantization are the reference's, so the result is to the bit."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from ..ir import TensorType
from ..quant.params import narrow
from .build import TO_NCHW, TO_NHWC, Build, float_activation, translator, window_pads
from .conv import bias_input, filter_scales, requant_attrs

OUTPUT_SHAPE, FILTER, INPUT, BIAS = 0, 1, 2, 3


@translator("TRANSPOSE_CONV")
def _transpose_conv(b: Build, op) -> None:
    x = b.tensor(INPUT)
    data = b.weights(FILTER)  # [O, KH, KW, I]
    out = tuple(int(d) for d in b.constant(OUTPUT_SHAPE, "output_shape").reshape(-1))
    if len(x.shape) != 4 or data.ndim != 4 or len(out) != 4:
        raise CglowError(f"{op.describe()}: the input, filter and output shape must be 4-D (NHWC, OHWI)")
    if data.shape[3] != x.shape[3] or out[3] != data.shape[0] or out[0] != x.shape[0]:
        raise CglowError(f"{op.describe()}: filter {list(data.shape)} does not take input {list(x.shape)} to "
                         f"output {list(out)}")
    kernel, strides = data.shape[1:3], (b.option("StrideH"), b.option("StrideW"))
    # TFLite pads the output as a convolution with this kernel and stride over it would be padded
    begin = window_pads(out[1:3], kernel, strides, (1, 1), b.padding())[:2]
    if any(p >= k for p, k in zip(begin, kernel)):
        raise CglowError(f"{op.describe()}: a padding of {begin} is not smaller than the filter {kernel}")
    xt = b.transpose(b.value(INPUT), TO_NCHW)
    nchw = TensorType(b.tensor(-1).dtype, (out[0], out[3]) + out[1:3])
    y = _integer(b, xt, data, begin, strides, nchw) if b.quantized() else _float(b, xt, data, begin, strides, out)
    b.finish(b.transpose(y, TO_NHWC))


def _float(b: Build, xt: str, data: np.ndarray, begin, strides, out) -> str:
    """ConvTranspose with the pads that give the file's output shape (output_padding where it is larger)."""
    size = b.tensor(INPUT).shape[1:3]
    natural = [s * (n - 1) + k for s, n, k in zip(strides, size, data.shape[1:3])]
    end = [a - p - o for a, p, o in zip(natural, begin, out[1:3])]
    attrs = {"kernel_shape": data.shape[1:3], "strides": strides, "pads": tuple(begin) + tuple(max(e, 0) for e in end),
             "output_padding": tuple(max(-e, 0) for e in end)}
    inputs = [xt, b.const("filter", data.transpose(3, 0, 1, 2))] + ([b.value(BIAS)] if b.has(BIAS) else [])
    return float_activation(b, b.add("ConvTranspose", inputs, attrs))


def _integer(b: Build, xt: str, data: np.ndarray, begin, strides, nchw: TensorType) -> str:
    """IntConv of the flipped filter over the input spread out by the stride: the output's pixel o reads the
    spread input from o + begin - (k - 1), so the spread input is padded by k - 1 - begin at the start and
    cut (or padded) to o + begin at the end."""
    q = b.quant(INPUT)
    dtype, zero = b.tensor(INPUT).dtype, int(q.zero[0])
    n, c, h, w = b.types[xt].shape
    spread = xt
    if strides != (1, 1):
        sh, sw = strides
        spread = b.add("Reshape", [xt, b.const("cells", np.array([n, c, h, 1, w, 1], np.int64))])
        spread = b.add("Pad", [spread, b.const("gaps", np.array([0] * 6 + [0, 0, 0, sh - 1, 0, sw - 1], np.int64)),
                               b.const("zero", np.array(zero, dtype))])
        spread = b.add("Reshape", [spread, b.const("spread", np.array([n, c, h * sh, w * sw], np.int64))])
    have = b.types[spread].shape[2:]
    need = [o + p for o, p in zip(nchw.shape[2:], begin)]
    if any(nd < hv for nd, hv in zip(need, have)):
        spread = b.add("Slice", [spread, b.const("starts", np.zeros(2, np.int64)),
                                 b.const("ends", np.array([min(nd, hv) for nd, hv in zip(need, have)], np.int64)),
                                 b.const("axes", np.array([2, 3], np.int64))])
    kernel = data.shape[1:3]
    pads = tuple(k - 1 - p for k, p in zip(kernel, begin)) + tuple(max(nd - hv, 0) for nd, hv in zip(need, have))
    channels = data.shape[0]
    scales = float(q.scale[0]) * filter_scales(b, FILTER, channels, 0) / float(b.quant(-1).scale[0])
    attrs = {"kernel_shape": kernel, "strides": (1, 1), "dilations": (1, 1), "group": 1, "pads": pads,
             "x_zero": zero, **requant_attrs(b, scales)}
    flipped = data[:, ::-1, ::-1, :].transpose(0, 3, 1, 2)
    return b.add("IntConv", [spread, b.const("filter", narrow(flipped.astype(np.int64))),
                             bias_input(b, BIAS, channels, np.int32)], attrs, out_type=nchw)
