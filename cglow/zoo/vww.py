"""Visual wake words MobileNetV1 alpha 0.25 (MLPerf Tiny): image [1,3,96,96] -> 2-class softmax."""

import onnx

from ._helpers import Builder

# (output channels, depthwise stride) of the 13 separable blocks, MobileNetV1 scaled by 0.25.
BLOCKS = [(16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2),
          (128, 1), (128, 1), (128, 1), (128, 1), (128, 1), (256, 2), (256, 1)]


def build(seed: int = 0) -> onnx.ModelProto:
    b = Builder(seed)
    x = b.conv_bn("input", "stem", 3, 8, 3, stride=2, act="relu6")  # -> [1,8,48,48]
    cin = 8
    for i, (cout, stride) in enumerate(BLOCKS, start=1):
        x = b.separable(x, f"block{i}", cin, cout, stride, act="relu6")
        cin = cout
    x = b.node("GlobalAveragePool", [x], "pool")
    x = b.node("Flatten", [x], "flatten")
    x = b.dense(x, "fc", cin, 2, form="gemm_transb")
    b.node("Softmax", [x], "softmax", axis=-1)
    return b.model("vww", [1, 3, 96, 96], [1, 2])
