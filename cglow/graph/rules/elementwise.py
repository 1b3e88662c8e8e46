"""Shape rules of arithmetic and activation ops: broadcasting n-ary ops and shape-preserving unaries."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from ..geometry import broadcast
from ..ir import TensorType
from ..registry import F32, Args, require_float, same_as_input

SIGNED = (F32,) + tuple(np.dtype(f"int{n}") for n in (8, 16, 32, 64))  # the types with negative values
NUMERIC = SIGNED + tuple(np.dtype(f"uint{n}") for n in (8, 16, 32, 64))
INTEGER = NUMERIC[1:]

# op -> the element types of its data inputs (ONNX's, less those cglow has no C type for)
TYPES = {
    **dict.fromkeys(("Add", "Sub", "Mul", "Div", "Abs", "Sign", "Clip", "Min", "Max"), NUMERIC),
    **dict.fromkeys(("Relu", "Neg"), SIGNED),
    "PRelu": (F32, np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.uint32), np.dtype(np.uint64)),
    "Pow": (F32, np.dtype(np.int32), np.dtype(np.int64)),  # the base; the exponent may be any numeric type
    **dict.fromkeys(("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"), INTEGER),
    "BitShift": INTEGER,
    "Mod": NUMERIC,
}


def require(args: Args, allowed: tuple[np.dtype, ...], *indices: int) -> None:
    for i in indices:
        if args.has(i) and args.types[i].dtype not in allowed:
            raise CglowError(f"{args.node.describe()}: input '{args.node.inputs[i]}' is {args.types[i].dtype.name}; "
                             f"this op supports {', '.join(t.name for t in allowed)}")


def broadcast_all(args: Args) -> tuple[int, ...]:
    return broadcast(args.node, *(args.shape(i) for i in range(len(args.node.inputs)) if args.has(i)))


def nary(args: Args) -> list[TensorType]:
    inputs = range(len(args.node.inputs))
    if args.node.op in TYPES:
        require(args, TYPES[args.node.op], *inputs)
    else:  # Sum, Mean
        require_float(args, *inputs)
    return [TensorType(args.types[0].dtype, broadcast_all(args))]


def bit_shift(args: Args) -> list[TensorType]:
    if args.node.attr("direction", "") not in ("LEFT", "RIGHT"):
        raise CglowError(f"{args.node.describe()}: direction must be LEFT or RIGHT")
    return nary(args)


def power(args: Args) -> list[TensorType]:
    require(args, TYPES["Pow"], 0)
    require(args, NUMERIC, 1)
    return [TensorType(args.types[0].dtype, broadcast_all(args))]


def numeric_unary(args: Args) -> list[TensorType]:
    require(args, TYPES[args.node.op], *range(len(args.node.inputs)))
    return same_as_input(args)


def float_unary(args: Args) -> list[TensorType]:
    require_float(args, 0)
    if args.node.op == "Gelu" and args.node.attr("approximate", "none") not in ("none", "tanh"):
        raise CglowError(f"{args.node.describe()}: unknown approximate '{args.node.attr('approximate')}'")
    return same_as_input(args)


def identity(args: Args) -> list[TensorType]:
    return same_as_input(args)


def dropout(args: Args) -> list[TensorType]:
    training = args.has(2) and bool(args.const(2, "training_mode").item())
    if training and (not args.has(1) or float(args.const(1, "ratio").item()) != 0.0):
        raise CglowError(f"{args.node.describe()}: training_mode=1 with a non-zero ratio (random) is not supported; "
                         f"export the model in eval mode")
    mask = TensorType(np.dtype(np.bool_), args.shape(0))
    return same_as_input(args) + [mask] * (len(args.node.outputs) - 1)
