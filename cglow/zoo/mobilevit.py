"""A MobileViT-class network as torch.onnx.export writes one (BatchNorm folded into the convolutions, SiLU as
Sigmoid and Mul): [1,3,64,64] -> [1,10]. Inverted residual blocks, then two MobileViT blocks: a local 3x3 and 1x1
convolution, the feature map unfolded into 2x2 patches (Reshape, Transpose), two transformer layers whose
attention splits q, k and v with Gather and transposes the keys before q @ k^T, the patches folded back, and a
3x3 convolution over the input concatenated with the result."""

import numpy as np
import onnx

from ._helpers import Builder

PATCH = 2


def _conv(b: Builder, x: str, name: str, cin: int, cout: int, kernel: int, stride: int = 1, group: int = 1,
          act: bool = True) -> str:
    y = b.conv(x, f"{name}/Conv", cin, cout, kernel, stride, group=group)
    return b.node("Mul", [y, b.node("Sigmoid", [y], f"{name}/Sigmoid")], f"{name}/Mul") if act else y


def _inverted(b: Builder, x: str, name: str, cin: int, cout: int, stride: int) -> str:
    hidden = 4 * cin
    y = _conv(b, x, f"{name}/expand", cin, hidden, 1)
    y = _conv(b, y, f"{name}/dw", hidden, hidden, 3, stride, group=hidden)
    y = _conv(b, y, f"{name}/project", hidden, cout, 1, act=False)
    return b.node("Add", [x, y], f"{name}/Add") if stride == 1 and cin == cout else y


def _shape(b: Builder, name: str, dims) -> str:
    return b.const(name, dims, np.int64)


def _layernorm(b: Builder, x: str, name: str, width: int) -> str:
    scale = b.const(f"{name}/scale", b.rng.uniform(0.5, 1.5, width))
    bias = b.const(f"{name}/bias", b.rng.normal(0.0, 0.1, width))
    return b.node("LayerNormalization", [x, scale, bias], f"{name}/LayerNormalization", axis=-1, epsilon=1e-5)


def _attention(b: Builder, x: str, name: str, batch: int, tokens: int, width: int, heads: int = 4) -> str:
    head = width // heads
    qkv = b.dense(x, f"{name}/qkv", width, 3 * width)
    qkv = b.node("Reshape", [qkv, _shape(b, f"{name}/Constant", [batch, tokens, 3, heads, head])], f"{name}/Reshape")
    qkv = b.node("Transpose", [qkv], f"{name}/Transpose", perm=[2, 0, 3, 1, 4])
    q, k, v = (b.node("Gather", [qkv, b.const(f"{name}/index{i}", i, np.int64)], f"{name}/Gather_{i}", axis=0)
               for i in range(3))
    k = b.node("Transpose", [k], f"{name}/Transpose_1", perm=[0, 1, 3, 2])  # k.transpose(-1, -2).contiguous()
    scores = b.node("MatMul", [q, k], f"{name}/MatMul")
    scores = b.node("Mul", [scores, b.const(f"{name}/scale", head ** -0.5)], f"{name}/Mul")
    context = b.node("MatMul", [b.node("Softmax", [scores], f"{name}/Softmax", axis=-1), v], f"{name}/MatMul_1")
    context = b.node("Transpose", [context], f"{name}/Transpose_2", perm=[0, 2, 1, 3])
    context = b.node("Reshape", [context, _shape(b, f"{name}/Constant_2", [batch, tokens, width])],
                     f"{name}/Reshape_1")
    return b.dense(context, f"{name}/out", width, width)


def _transformer(b: Builder, x: str, name: str, batch: int, tokens: int, width: int) -> str:
    x = b.node("Add", [x, _attention(b, _layernorm(b, x, f"{name}/n1", width), f"{name}/a", batch, tokens, width)],
               f"{name}/Add")
    y = b.dense(_layernorm(b, x, f"{name}/n2", width), f"{name}/f.0", width, 2 * width)
    y = b.node("Mul", [y, b.node("Sigmoid", [y], f"{name}/f.1/Sigmoid")], f"{name}/f.1/Mul")
    return b.node("Add", [x, b.dense(y, f"{name}/f.2", 2 * width, width)], f"{name}/Add_1")


def _mobilevit(b: Builder, x: str, name: str, channels: int, width: int, size: int, depth: int = 2) -> str:
    y = _conv(b, x, f"{name}/local.0", channels, channels, 3)
    y = b.conv(y, f"{name}/local.1/Conv", channels, width, 1, bias=False)
    grid, patches = size // PATCH, PATCH * PATCH
    y = b.node("Reshape", [y, _shape(b, f"{name}/Constant", [1, width, grid, PATCH, grid, PATCH])], f"{name}/Reshape")
    y = b.node("Transpose", [y], f"{name}/Transpose", perm=[0, 3, 5, 2, 4, 1])
    y = b.node("Reshape", [y, _shape(b, f"{name}/Constant_1", [patches, grid * grid, width])], f"{name}/Reshape_1")
    for i in range(depth):
        y = _transformer(b, y, f"{name}/blocks.{i}", patches, grid * grid, width)
    y = _layernorm(b, y, f"{name}/norm", width)
    y = b.node("Reshape", [y, _shape(b, f"{name}/Constant_2", [1, PATCH, PATCH, grid, grid, width])],
               f"{name}/Reshape_2")
    y = b.node("Transpose", [y], f"{name}/Transpose_1", perm=[0, 5, 3, 1, 4, 2])
    y = b.node("Reshape", [y, _shape(b, f"{name}/Constant_3", [1, width, size, size])], f"{name}/Reshape_3")
    y = _conv(b, y, f"{name}/proj", width, channels, 1)
    return _conv(b, b.node("Concat", [x, y], f"{name}/Concat", axis=1), f"{name}/fuse", 2 * channels, channels, 3)


def build(seed: int = 0) -> onnx.ModelProto:
    b = Builder(seed)
    x = _conv(b, "input", "f.0", 3, 16, 3, 2)                      # 32x32
    x = _inverted(b, x, "f.1", 16, 16, 1)
    x = _inverted(b, x, "f.2", 16, 24, 2)                          # 16x16
    x = _inverted(b, x, "f.3", 24, 24, 1)
    x = _inverted(b, x, "f.4", 24, 48, 2)                          # 8x8
    x = _mobilevit(b, x, "f.5", 48, 64, 8)
    x = _inverted(b, x, "f.6", 48, 64, 2)                          # 4x4
    x = _mobilevit(b, x, "f.7", 64, 80, 4)
    x = _conv(b, x, "f.8", 64, 128, 1)
    x = b.node("ReduceMean", [x], "pool", axes=[2, 3], keepdims=0)
    b.dense(x, "fc", 128, 10, form="gemm_transb")
    return b.model("mobilevit", [1, 3, 64, 64], [1, 10])
