"""Shape rule of TopK (with a constant k)."""
from __future__ import annotations

from ...errors import CglowError
from ..geometry import axis
from ..ir import TensorType
from ..registry import Args
from .reduce import ALL_NUMBERS, I64, require


def topk(args: Args) -> list[TensorType]:
    require(args, ALL_NUMBERS)
    shape = args.shape(0)
    at = axis(args.node, args.node.attr("axis", -1), len(shape))
    k = int(args.const(1, "k").reshape(-1)[0])
    if not 0 <= k <= shape[at]:
        raise CglowError(f"{args.node.describe()}: k={k} is not in [0, {shape[at]}] (axis {at} of {shape})")
    out = shape[:at] + (k,) + shape[at + 1:]
    return [TensorType(args.types[0].dtype, out), TensorType(I64, out)]
