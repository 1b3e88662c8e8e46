"""Shape rules of the neural-network ops: conv, dense, pooling, normalization, softmax."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from ..geometry import axis, broadcast, window
from ..ir import TensorType
from ..registry import F32, Args, require_float, same_as_input


def _spatial(args: Args, most: int) -> tuple[int, ...]:
    shape = args.shape(0)
    if not 3 <= len(shape) <= 2 + most:
        raise CglowError(f"{args.node.describe()}: input rank {len(shape)} is not supported (1 to {most} spatial "
                         f"dims after N and C)")
    return shape[2:]


def volumetric(args: Args) -> None:
    """3-D convolutions have no kernel: graph/volumetric.py makes 2-D ones of those it can tell before import."""
    if len(args.shape(0)) == 5:
        raise CglowError(f"{args.node.describe()}: a 3-D convolution is supported as a Conv or ConvTranspose whose "
                         f"kernel_shape or weights' rank is known before import (declared, or found by ONNX's shape "
                         f"inference)")


def conv(args: Args) -> list[TensorType]:
    require_float(args, 0, 1, 2)
    n, c = args.shape(0)[:2]
    w = args.shape(1)
    group = args.node.attr("group", 1)
    volumetric(args)
    spatial = _spatial(args, 3)  # 3-D: decomposed before import (graph/volumetric.py)
    kernel = tuple(args.node.attr("kernel_shape", w[2:]))
    if len(w) != len(args.shape(0)) or tuple(w[2:]) != kernel or c != w[1] * group or w[0] % group:
        raise CglowError(f"{args.node.describe()}: weight shape {w} does not match input {args.shape(0)} "
                         f"with group={group}")
    if args.has(2) and args.shape(2) != (w[0],):
        raise CglowError(f"{args.node.describe()}: bias shape {args.shape(2)} is not ({w[0]},)")
    return [TensorType(F32, (n, w[0]) + window(args.node, spatial, kernel).out)]


def pool(args: Args) -> list[TensorType]:
    if args.node.op == "AveragePool" or args.types[0].dtype not in (np.int8, np.uint8):  # MaxPool: also 8-bit ints
        require_float(args, 0)
    kernel = tuple(args.node.attr("kernel_shape", ()))
    win = window(args.node, _spatial(args, 3), kernel, bool(args.node.attr("ceil_mode", 0)))
    out = args.shape(0)[:2] + win.out
    return [TensorType(args.types[0].dtype, out), TensorType(np.dtype(np.int64), out)][:len(args.node.outputs)]


def global_pool(args: Args) -> list[TensorType]:
    require_float(args, 0)
    shape = args.shape(0)
    if len(shape) < 3:
        raise CglowError(f"{args.node.describe()}: input rank {len(shape)} must be at least 3")
    return [TensorType(F32, shape[:2] + (1,) * (len(shape) - 2))]


def gemm(args: Args) -> list[TensorType]:
    require_float(args, 0, 1, 2)
    a, b = args.shape(0), args.shape(1)
    if len(a) != 2 or len(b) != 2:
        raise CglowError(f"{args.node.describe()}: Gemm needs 2-D A and B, got {a} and {b}")
    m, k = a[::-1] if args.node.attr("transA", 0) else a
    k2, n = b[::-1] if args.node.attr("transB", 0) else b
    if k != k2:
        raise CglowError(f"{args.node.describe()}: inner dimensions {k} and {k2} differ")
    if args.has(2) and broadcast(args.node, args.shape(2), (m, n)) != (m, n):
        raise CglowError(f"{args.node.describe()}: C of shape {args.shape(2)} does not broadcast to {(m, n)}")
    return [TensorType(F32, (m, n))]


def matmul_shape(args: Args) -> tuple[int, ...]:
    a, b = args.shape(0), args.shape(1)
    if not a or not b:
        raise CglowError(f"{args.node.describe()}: MatMul of a scalar")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise CglowError(f"{args.node.describe()}: inner dimensions of {a} and {b} differ")
    out = broadcast(args.node, a2[:-2], b2[:-2]) + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def matmul(args: Args) -> list[TensorType]:
    require_float(args, 0, 1)
    return [TensorType(F32, matmul_shape(args))]


def batchnorm(args: Args) -> list[TensorType]:
    """Inference mode (training mode is decomposed before import, graph/decompose.py)."""
    require_float(args, 0)
    shape = args.shape(0)
    if len(shape) < 2 or any(args.shape(i) != (shape[1],) for i in range(1, 5)):
        raise CglowError(f"{args.node.describe()}: scale, bias, mean and var must have shape ({shape[1]},)")
    statistics = TensorType(F32, (shape[1],))  # training outputs: typed, refused if used
    return same_as_input(args) + [statistics] * (len(args.node.outputs) - 1)


def softmax(args: Args) -> list[TensorType]:
    require_float(args, 0)
    axis(args.node, args.node.attr("axis", -1 if args.opset >= 13 else 1), len(args.shape(0)))
    return same_as_input(args)


def layernorm(args: Args) -> list[TensorType]:
    require_float(args, 0, 1, 2)
    shape = args.shape(0)
    first = axis(args.node, args.node.attr("axis", -1), len(shape))
    norm = shape[first:]
    for i in (1, 2):
        if args.has(i) and broadcast(args.node, args.shape(i), norm) != norm:
            raise CglowError(f"{args.node.describe()}: input {i} of shape {args.shape(i)} does not broadcast "
                             f"to the normalized shape {norm}")
    statistics = TensorType(F32, shape[:first] + (1,) * len(norm))  # Mean, InvStdDev: refused if used
    return same_as_input(args) + [statistics] * (len(args.node.outputs) - 1)
