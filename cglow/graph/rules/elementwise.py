"""Shape rules of elementwise ops: broadcasting binaries and shape-preserving unaries."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from ..geometry import broadcast
from ..ir import TensorType
from ..registry import Args, require_float, same_as_input, shape_rule

BINARY = ("Add", "Sub", "Mul", "Div", "Pow")
UNARY = ("Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Exp", "LeakyRelu", "Clip", "Identity")


@shape_rule(*BINARY)
def _binary(args: Args) -> list[TensorType]:
    require_float(args, 0)
    if args.node.op != "Pow" or args.consts[1] is None:  # Pow's exponent may be an integer constant
        require_float(args, 1)
    return [TensorType(args.types[0].dtype, broadcast(args.node, args.shape(0), args.shape(1)))]


@shape_rule(*UNARY)
def _unary(args: Args) -> list[TensorType]:
    if args.node.op != "Identity":
        require_float(args, 0)
    return same_as_input(args)


@shape_rule("Dropout")
def _dropout(args: Args) -> list[TensorType]:
    if args.has(2) and bool(args.const(2, "training_mode").item()):
        raise CglowError(f"{args.node.describe()}: training_mode=1 is not supported; export the model in eval mode")
    mask = TensorType(np.dtype(np.bool_), args.shape(0))
    return same_as_input(args) + [mask] * (len(args.node.outputs) - 1)
