"""Shape rules of the standard ONNX quantization ops: QuantizeLinear, DequantizeLinear, ConvInteger,
MatMulInteger. (The QOperator ops are rewritten into QuantizeLinear/DequantizeLinear pairs around float ops at
import, graph/quant/qoperator.py; graph/quant/fold.py turns those pairs into integer ops.)"""
from __future__ import annotations

from dataclasses import replace

import ml_dtypes
import numpy as np
from onnx import TensorProto, helper

from ...c_text import SUB_BYTE_INTS
from ...errors import CglowError
from ..geometry import axis
from ..ir import TensorType
from ..registry import F32, Args
from .nn import conv, matmul_shape

EIGHT_BIT = (np.dtype(np.int8), np.dtype(np.uint8))
QUANTIZED = EIGHT_BIT + (np.dtype(np.int16), np.dtype(np.uint16), np.dtype(np.int32))
# the float types quantized to (float8 and float4), stored as their bits (graph/stored_types.py): the quantizing map
# rounds to them and the dequantizing one reads them
FLOAT_QUANTIZED = tuple(np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2,
                                                ml_dtypes.float8_e5m2fnuz, ml_dtypes.float4_e2m1fn))
I32 = np.dtype(np.int32)


def quant_axis(args: Args) -> int | None:
    """The axis of a per-axis or blocked scale, None for a per-tensor one; the scale and zero point checked."""
    node, shape = args.node, args.shape(0)
    scale = args.types[1]
    if scale.dtype != F32:
        raise CglowError(f"{node.describe()}: the scale is {scale.dtype.name}; cglow takes float32 scales")
    if args.has(2) and args.types[2].shape != scale.shape and not args.types[2].size == scale.size == 1:
        raise CglowError(f"{node.describe()}: zero point shape {args.shape(2)} differs from the scale's "
                         f"{scale.shape}")
    if node.attr("block_size", 0):
        return _block_axis(args)
    if scale.size == 1 and len(scale.shape) <= 1:
        return None
    if len(scale.shape) != 1:
        raise CglowError(f"{node.describe()}: scale of shape {scale.shape}: expected a scalar or a 1-D tensor")
    at = axis(node, node.attr("axis", 1), len(shape))
    if shape[at] != scale.shape[0]:
        raise CglowError(f"{node.describe()}: {scale.shape[0]} scales for axis {at} of size {shape[at]}")
    return at


def _block_axis(args: Args) -> int:
    """Blocked quantization's axis: the scale has the input's shape but along it, where each scale stands for
    block_size elements (the last block may be shorter)."""
    node, shape, scales = args.node, args.shape(0), args.shape(1)
    block = node.attr("block_size")
    at = axis(node, node.attr("axis", 1), len(shape))
    if block < 1 or len(scales) != len(shape) or any(s != n for d, (s, n) in enumerate(zip(scales, shape)) if d != at) \
            or scales[at] != -(-shape[at] // block):
        raise CglowError(f"{node.describe()}: scale of shape {scales} for blocks of {block} along axis {at} of an "
                         f"input of shape {shape}")
    return at


PRECISIONS = (0, TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16)  # QuantizeLinear's (0: unset)


def quantize(args: Args) -> list[TensorType]:
    quant_axis(args)
    if args.node.attr("precision", 0) not in PRECISIONS:
        name = helper.tensor_dtype_to_np_dtype(args.node.attr("precision")).name
        raise CglowError(f"{args.node.describe()}: a division in {name} precision is not supported (float32, "
                         f"float16, bfloat16)")
    if args.types[0].dtype != F32:
        raise CglowError(f"{args.node.describe()}: input is {args.types[0].dtype.name}; cglow quantizes float32")
    out = args.types[2].dtype if args.has(2) else np.dtype(np.uint8)
    if args.node.attr("output_dtype", 0):
        out = np.dtype(helper.tensor_dtype_to_np_dtype(args.node.attr("output_dtype")))
    if out in SUB_BYTE_INTS:  # quantized in 8 bits, then clipped to its range (graph/stored_types.py)
        out = np.dtype(np.uint8 if out.name.startswith("u") else np.int8)
    if out not in QUANTIZED[:4] + FLOAT_QUANTIZED:
        raise CglowError(f"{args.node.describe()}: quantizing to {out.name} is not supported (int8, uint8, int16, "
                         f"uint16, the 4- and 2-bit integers, float8, float4)")
    return [TensorType(out, args.shape(0))]


def dequantize(args: Args) -> list[TensorType]:
    quant_axis(args)
    if args.types[0].dtype not in QUANTIZED + FLOAT_QUANTIZED:
        raise CglowError(f"{args.node.describe()}: dequantizing {args.types[0].dtype.name} is not supported")
    return [TensorType(F32, args.shape(0))]


def zero_point_problem(args: Args, i: int, of: int, per_axis: int | None) -> None:
    """An integer op's optional zero point `i` for input `of`: its type, and scalar (or per_axis long)."""
    if not args.has(i):
        return
    z = args.types[i]
    if z.dtype != args.types[of].dtype:
        raise CglowError(f"{args.node.describe()}: zero point '{args.node.inputs[i]}' is {z.dtype.name}, its input "
                         f"{args.types[of].dtype.name}")
    if z.size != 1 and (per_axis is None or z.shape != (per_axis,)):
        raise CglowError(f"{args.node.describe()}: zero point '{args.node.inputs[i]}' of shape {z.shape}")


def integer_operands(args: Args, per_axis: int | None) -> None:
    """ConvInteger's or MatMulInteger's two 8-bit operands and their zero points: a's scalar, b's scalar or
    per_axis long."""
    for i in (0, 1):
        if args.types[i].dtype not in EIGHT_BIT:
            raise CglowError(f"{args.node.describe()}: input {i} is {args.types[i].dtype.name}; int8 or uint8")
    zero_point_problem(args, 2, 0, None)
    zero_point_problem(args, 3, 1, per_axis)


def conv_integer(args: Args) -> list[TensorType]:
    integer_operands(args, args.shape(1)[0])
    floats = [TensorType(F32, t.shape) for t in args.types[:2]]
    (out,) = conv(Args(replace(args.node, inputs=args.node.inputs[:2]), tuple(floats), args.consts[:2], args.opset))
    return [TensorType(I32, out.shape)]


def matmul_integer(args: Args) -> list[TensorType]:
    integer_operands(args, args.shape(1)[-1] if args.shape(1) else None)
    return [TensorType(I32, matmul_shape(args))]
