"""EfficientNet-style classifier (Tan & Le 2019, B0's block pattern at reduced width and depth): image
[1,3,96,96] -> 10-class softmax.

MBConv blocks: 1x1 expansion, 3x3 or 5x5 depthwise, squeeze-and-excitation (GlobalAveragePool -> 1x1 conv ->
SiLU -> 1x1 conv -> Sigmoid -> Mul broadcast over H x W), 1x1 linear projection (+ the block's input). SiLU is
Sigmoid + Mul and BatchNormalization is folded into the convolutions' biases, as torch.onnx.export writes them.
The last blocks run at 6 x 6 and 3 x 3."""

import onnx

from ._helpers import Builder

# (expansion, depthwise kernel, first stride, output channels, repeats) of the MBConv stages.
STAGES = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 2), (6, 5, 1, 96, 1),
          (6, 5, 2, 128, 1)]
SE_RATIO = 4  # squeeze channels = block input channels / 4
HEAD, CLASSES = 256, 10


def _silu(b: Builder, x: str, name: str) -> str:
    return b.node("Mul", [x, b.node("Sigmoid", [x], f"{name}/sigmoid")], f"{name}/silu")


def _squeeze_excite(b: Builder, x: str, name: str, channels: int, squeeze: int) -> str:
    s = b.node("GlobalAveragePool", [x], f"{name}/pool")
    s = _silu(b, b.conv(s, f"{name}/reduce", channels, squeeze, 1), f"{name}/reduce")
    s = b.node("Sigmoid", [b.conv(s, f"{name}/expand", squeeze, channels, 1)], f"{name}/gate")
    return b.node("Mul", [x, s], f"{name}/scale")


def _mbconv(b: Builder, x: str, name: str, cin: int, cout: int, kernel: int, stride: int, expand: int) -> str:
    hidden = cin * expand
    y = x if expand == 1 else _silu(b, b.conv(x, f"{name}/expand", cin, hidden, 1), f"{name}/expand")
    y = _silu(b, b.conv(y, f"{name}/dw", hidden, hidden, kernel, stride, group=hidden), f"{name}/dw")
    y = _squeeze_excite(b, y, f"{name}/se", hidden, max(1, cin // SE_RATIO))
    y = b.conv(y, f"{name}/project", hidden, cout, 1)
    return b.node("Add", [x, y], f"{name}/add") if stride == 1 and cin == cout else y


def build(seed: int = 0) -> onnx.ModelProto:
    b = Builder(seed)
    x = _silu(b, b.conv("input", "stem", 3, 16, 3, stride=2), "stem")  # -> [1,16,48,48]
    cin, i = 16, 0
    for expand, kernel, stride, cout, repeats in STAGES:
        for j in range(repeats):
            i += 1
            x = _mbconv(b, x, f"block{i}", cin, cout, kernel, stride if j == 0 else 1, expand)
            cin = cout
    x = _silu(b, b.conv(x, "head", cin, HEAD, 1), "head")  # -> [1,256,3,3]
    x = b.node("GlobalAveragePool", [x], "pool")
    x = b.node("Flatten", [x], "flatten")
    # The pooled features are small (rms ~0.1); the gain brings the logits to O(1).
    x = b.dense(x, "classifier", HEAD, CLASSES, gain=32.0, form="gemm_transb")
    b.node("Softmax", [x], "softmax", axis=-1)
    return b.model("efficientnet", [1, 3, 96, 96], [1, CLASSES])
