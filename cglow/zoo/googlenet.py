"""Inception-v1 (GoogLeNet) as its Caffe original lays it out, scaled down: image [1,3,64,64] -> 10 logits.

Stem 7x7/2 conv, 3x3/2 MaxPool (ceil mode, as Caffe and torchvision round), LRN, 1x1 conv, 3x3 conv, LRN,
MaxPool; Inception blocks 3a and 3b (the zoo's `inception` blocks: 1x1; 1x1 -> 3x3; 1x1 -> 5x5; 3x3 MaxPool
-> 1x1; concatenated), MaxPool, block 4a, GlobalAveragePool, Gemm. A quarter of GoogLeNet's channels. Its
RAM peak is in the stem (the LRN of the 3x3 conv's output), where Inception-v1 at 224x224 has it too."""

import onnx

from ._helpers import Builder
from .inception import block, conv_relu


def _pool(b: Builder, x: str, name: str) -> str:
    return b.node("MaxPool", [x], name, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)


def _lrn(b: Builder, x: str, name: str) -> str:
    return b.node("LRN", [x], name, size=5, alpha=1e-4, beta=0.75, bias=1.0)


def build(seed: int = 0) -> onnx.ModelProto:
    b = Builder(seed)
    x = b.act(b.conv("input", "conv1/7x7_s2", 3, 16, 7, stride=2), "conv1", "relu")  # -> [1,16,32,32]
    x = _lrn(b, _pool(b, x, "pool1/3x3_s2"), "pool1/norm1")  # -> [1,16,16,16]
    x = conv_relu(b, x, "conv2/3x3_reduce", 16, 16, 1)
    x = _lrn(b, conv_relu(b, x, "conv2/3x3", 16, 48, 3), "conv2/norm2")  # -> [1,48,16,16]
    x = _pool(b, x, "pool2/3x3_s2")  # -> [1,48,8,8]
    x, c = block(b, x, "inception_3a", 48, 16, (24, 32), (4, 8), 8)  # -> [1,64,8,8]
    x, c = block(b, x, "inception_3b", c, 32, (32, 48), (8, 24), 16)  # -> [1,120,8,8]
    x = _pool(b, x, "pool3/3x3_s2")  # -> [1,120,4,4]
    x, c = block(b, x, "inception_4a", c, 48, (24, 52), (4, 12), 16)  # -> [1,128,4,4]
    x = b.node("GlobalAveragePool", [x], "pool5")
    x = b.node("Flatten", [x], "flatten")
    b.dense(x, "loss3/classifier", c, 10, form="gemm_transb")
    return b.model("googlenet", [1, 3, 64, 64], [1, 10])
