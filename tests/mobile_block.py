"""A small network holding what a CNN's first layers hold (tests/instr/test_patches.py and the cross tests run it
in patches): float32, and quantized by cglow."""
from __future__ import annotations

import numpy as np
import onnx

from cglow.quantize import quantize_model
from cglow.zoo._helpers import Builder


def mobile_block(seed: int = 0) -> onnx.ModelProto:
    """[1,3,40,36] through what a CNN's first layers hold: a strided conv, a max pool with ceil mode, an inverted
    residual block (pointwise, depthwise 5x5, pointwise, and the skip Add), a depthwise 3x3 of stride 2 and an
    average pool counting its padding; then a global pool and a classifier."""
    b = Builder(seed)
    x = b.act(b.conv("input", "stem", 3, 8, 3, 2), "stem", "relu6")
    x = b.node("MaxPool", [x], "pool", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], ceil_mode=1)
    y = b.act(b.conv(x, "expand", 8, 24, 1), "expand", "relu6")
    y = b.act(b.conv(y, "dw5", 24, 24, 5, group=24), "dw5", "relu")
    y = b.conv(y, "project", 24, 8, 1)
    x = b.node("Add", [x, y], "skip")
    x = b.act(b.conv(x, "down", 8, 8, 3, 2, group=8), "down", "relu")
    x = b.node("AveragePool", [x], "avg", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
               count_include_pad=1)
    x = b.node("GlobalAveragePool", [b.conv(x, "head", 8, 16, 1)], "gap")
    b.dense(b.node("Flatten", [x], "flatten"), "fc", 16, 5, form="gemm_transb")
    return b.model("mobile_block", [1, 3, 40, 36], [1, 5])


def int8(model: onnx.ModelProto) -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    return quantize_model(model, {"input": rng.standard_normal((4, 1, 3, 40, 36)).astype(np.float32)})
