"""MobileNetV2 1.0 (Sandler et al. 2018): ImageNet image [1,3,224,224] -> 1000-class softmax.

The real architecture, with BatchNormalization kept as separate nodes (exporters fold them) and
convolutions without bias as in the reference implementation."""

import onnx

from ._helpers import Builder

# (expansion t, output channels c, repeats n, first stride s) of the inverted-residual stages.
STAGES = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
          (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def _inverted_residual(b: Builder, x: str, name: str, cin: int, cout: int, stride: int, expand: int) -> str:
    """[1x1 expand conv-BN-ReLU6] -> 3x3 depthwise conv-BN-ReLU6 -> 1x1 linear projection conv-BN (+ x)."""
    hidden = cin * expand
    y = x if expand == 1 else b.conv_bn(x, f"{name}/expand", cin, hidden, 1, act="relu6", bias=False)
    y = b.conv_bn(y, f"{name}/dw", hidden, hidden, 3, stride, group=hidden, act="relu6", bias=False)
    y = b.conv_bn(y, f"{name}/project", hidden, cout, 1, act=None, bias=False)
    return b.node("Add", [x, y], f"{name}/add") if stride == 1 and cin == cout else y


def build(seed: int = 0) -> onnx.ModelProto:
    b = Builder(seed)
    x = b.conv_bn("input", "stem", 3, 32, 3, stride=2, act="relu6", bias=False)  # -> [1,32,112,112]
    cin, i = 32, 0
    for t, c, n, s in STAGES:
        for j in range(n):
            i += 1
            x = _inverted_residual(b, x, f"block{i}", cin, c, s if j == 0 else 1, t)
            cin = c
    x = b.conv_bn(x, "head", cin, 1280, 1, act="relu6", bias=False)  # -> [1,1280,7,7]
    x = b.node("GlobalAveragePool", [x], "pool")
    x = b.node("Flatten", [x], "flatten")
    x = b.dense(x, "classifier", 1280, 1000, form="gemm_transb")
    b.node("Softmax", [x], "softmax", axis=-1)
    return b.model("mobilenetv2", [1, 3, 224, 224], [1, 1000])
