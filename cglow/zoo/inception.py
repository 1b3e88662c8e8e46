"""Inception-v1 (GoogLeNet) style classifier: image [1,3,32,32] -> 10 logits.

Stem 3x3 conv, two Inception blocks of four parallel branches concatenated on channels with a 2x2
MaxPool between them, GlobalAveragePool, Gemm."""

import onnx

from ._helpers import Builder


def conv_relu(b: Builder, x: str, name: str, cin: int, cout: int, kernel: int) -> str:
    return b.act(b.conv(x, f"{name}/conv", cin, cout, kernel), name, "relu")


def block(b: Builder, x: str, name: str, cin: int, c1: int, c3: tuple[int, int],
               c5: tuple[int, int], cpool: int) -> tuple[str, int]:
    """Branches 1x1; 1x1 -> 3x3; 1x1 -> 5x5 (pads 2); 3x3 MaxPool (stride 1, pads 1) -> 1x1."""
    branch1 = conv_relu(b, x, f"{name}/1x1", cin, c1, 1)
    branch3 = conv_relu(b, x, f"{name}/3x3_reduce", cin, c3[0], 1)
    branch3 = conv_relu(b, branch3, f"{name}/3x3", c3[0], c3[1], 3)
    branch5 = conv_relu(b, x, f"{name}/5x5_reduce", cin, c5[0], 1)
    branch5 = conv_relu(b, branch5, f"{name}/5x5", c5[0], c5[1], 5)
    pool = b.node("MaxPool", [x], f"{name}/pool", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    pool = conv_relu(b, pool, f"{name}/pool_proj", cin, cpool, 1)
    out = b.node("Concat", [branch1, branch3, branch5, pool], f"{name}/concat", axis=1)
    return out, c1 + c3[1] + c5[1] + cpool


def build(seed: int = 0) -> onnx.ModelProto:
    b = Builder(seed)
    x = conv_relu(b, "input", "stem", 3, 32, 3)  # -> [1,32,32,32]
    x, c = block(b, x, "inception1", 32, 16, (16, 32), (8, 8), 8)  # -> [1,64,32,32]
    x = b.node("MaxPool", [x], "pool1", kernel_shape=[2, 2], strides=[2, 2])  # -> [1,64,16,16]
    x, c = block(b, x, "inception2", c, 32, (32, 48), (8, 16), 16)  # -> [1,112,16,16]
    x = b.node("GlobalAveragePool", [x], "pool")
    x = b.node("Flatten", [x], "flatten")
    b.dense(x, "fc", c, 10, form="gemm_transb")
    return b.model("inception", [1, 3, 32, 32], [1, 10])
