"""ResNet-8 image classifier (MLPerf Tiny): CIFAR-10 image [1,3,32,32] -> 10-class softmax."""

import onnx

from ._helpers import Builder


def _stack(b: Builder, x: str, name: str, cin: int, cout: int, stride: int) -> str:
    """Two 3x3 conv-BN layers plus an identity (or strided 1x1 conv) shortcut, then Relu."""
    y = b.conv_bn(x, f"{name}/conv1", cin, cout, 3, stride)
    y = b.conv_bn(y, f"{name}/conv2", cout, cout, 3, act=None)
    shortcut = x if stride == 1 else b.conv(x, f"{name}/shortcut", cin, cout, 1, stride)
    return b.node("Relu", [b.node("Add", [y, shortcut], f"{name}/add")], f"{name}/relu")


def build(seed: int = 0) -> onnx.ModelProto:
    b = Builder(seed)
    x = b.conv_bn("input", "stem", 3, 16, 3)
    x = _stack(b, x, "stack1", 16, 16, 1)  # -> [1,16,32,32]
    x = _stack(b, x, "stack2", 16, 32, 2)  # -> [1,32,16,16]
    x = _stack(b, x, "stack3", 32, 64, 2)  # -> [1,64,8,8]
    x = b.node("AveragePool", [x], "pool", kernel_shape=[8, 8])
    x = b.node("Flatten", [x], "flatten")
    x = b.dense(x, "fc", 64, 10, form="gemm_transb")
    b.node("Softmax", [x], "softmax", axis=-1)
    return b.model("resnet8", [1, 3, 32, 32], [1, 10])
