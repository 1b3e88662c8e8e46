"""Shape rules of comparisons, logical ops, Where, the NaN/infinity tests and the type conversions."""
from __future__ import annotations

import numpy as np
from onnx import helper

from ...c_text import STORED_FLOATS, SUB_BYTE_INTS
from ...errors import CglowError
from ..ir import TensorType
from ..registry import Args, require_float
from .elementwise import NUMERIC, broadcast_all, require

BOOL = np.dtype(np.bool_)
SUB_BYTE_WIDTHS = {"int4": 4, "uint4": 4, "float4_e2m1fn": 4, "int2": 2, "uint2": 2}
ROUND_MODES = ("up", "down", "nearest")  # Cast's round_mode to float8 E8M0 (runtime_c/float_to_e8m0.c's `mode`)
TYPES = {"Equal": NUMERIC + (BOOL,), "Less": NUMERIC, "Greater": NUMERIC, "LessOrEqual": NUMERIC,
         "GreaterOrEqual": NUMERIC, "And": (BOOL,), "Or": (BOOL,), "Xor": (BOOL,), "Not": (BOOL,)}


def logic(args: Args) -> list[TensorType]:
    require(args, TYPES[args.node.op], *range(len(args.node.inputs)))
    return [TensorType(BOOL, broadcast_all(args))]


def float_test(args: Args) -> list[TensorType]:
    require_float(args, 0)
    return [TensorType(BOOL, args.shape(0))]


def where(args: Args) -> list[TensorType]:
    require(args, (BOOL,), 0)
    require(args, NUMERIC + (BOOL,), 1, 2)
    return [TensorType(args.types[1].dtype, broadcast_all(args))]


def bit_width(dtype: np.dtype) -> int:
    """An element type's width in bits (float4 and the 4- and 2-bit integers are stored one a byte, in its low
    bits)."""
    return SUB_BYTE_WIDTHS.get(dtype.name, 8 * dtype.itemsize)


def bit_cast(args: Args) -> list[TensorType]:
    """BitCast: the bits of each element read as another type of the same width."""
    source = args.types[0].dtype
    target = np.dtype(helper.tensor_dtype_to_np_dtype(args.node.attr("to")))
    for dtype in (source, target):
        if dtype not in NUMERIC + (BOOL,) + STORED_FLOATS + SUB_BYTE_INTS:
            raise CglowError(f"{args.node.describe()}: a bit cast of {dtype.name} is not supported")
    if bit_width(source) != bit_width(target):
        raise CglowError(f"{args.node.describe()}: {source.name} and {target.name} differ in width")
    return [TensorType(target, args.shape(0))]


def cast(args: Args) -> list[TensorType]:
    if args.node.op == "Cast":
        target = np.dtype(helper.tensor_dtype_to_np_dtype(args.node.attr("to")))
    else:
        target = args.types[1].dtype
    for what, dtype in (("from", args.types[0].dtype), ("to", target)):
        if dtype not in NUMERIC + (BOOL,) + STORED_FLOATS + SUB_BYTE_INTS:
            name = "string" if dtype.kind in "OSU" else dtype.name
            raise CglowError(f"{args.node.describe()}: a cast {what} {name} is not supported (cglow "
                             f"computes in float32, bool and the 8- to 64-bit integer types, and stores float16, "
                             f"bfloat16, float8, float4, float64 and the 4- and 2-bit integers)")
    if args.node.attr("round_mode", "up") not in ROUND_MODES:
        raise CglowError(f"{args.node.describe()}: round_mode '{args.node.attr('round_mode')}' is not one of "
                         f"{', '.join(ROUND_MODES)}")
    return [TensorType(target, args.shape(0))]
