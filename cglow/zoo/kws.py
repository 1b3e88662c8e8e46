"""Keyword spotting DS-CNN (MLPerf Tiny): MFCC features [1,1,49,10] -> 12-class softmax."""

import onnx

from ._helpers import Builder


def build(seed: int = 0) -> onnx.ModelProto:
    b = Builder(seed)
    x = b.conv_bn("input", "stem", 1, 64, (10, 4), stride=2, pads=[4, 1, 5, 1])  # -> [1,64,25,5]
    for i in range(1, 5):
        x = b.separable(x, f"block{i}", 64, 64)
    x = b.node("AveragePool", [x], "pool", kernel_shape=[25, 5])
    x = b.node("Flatten", [x], "flatten")
    x = b.dense(x, "fc", 64, 12, form="gemm_transb")
    b.node("Softmax", [x], "softmax", axis=-1)
    return b.model("kws", [1, 1, 49, 10], [1, 12])
