"""Shape rules of the ops that pick elements by index: Gather, GatherElements, GatherND, OneHot, Trilu."""
from __future__ import annotations

from ...errors import CglowError
from ..geometry import axis
from ..ir import TensorType
from ..registry import Args, same_as_input


def integer_indices(args: Args, i: int) -> None:
    if args.types[i].dtype.kind not in "iu":
        raise CglowError(f"{args.node.describe()}: indices '{args.node.inputs[i]}' are "
                         f"{args.types[i].dtype.name}, not an integer type")


def _in_range(args: Args, i: int, length: int) -> None:
    """Constant indices must lie in [-length, length)."""
    indices = args.consts[i]
    if indices is not None and indices.size and not (-length <= indices.min() and indices.max() < length):
        raise CglowError(f"{args.node.describe()}: an index is out of range for an axis of {length}")


def gather(args: Args) -> list[TensorType]:
    integer_indices(args, 1)
    shape = args.shape(0)
    at = axis(args.node, args.node.attr("axis", 0), len(shape))
    _in_range(args, 1, shape[at])
    return [TensorType(args.types[0].dtype, shape[:at] + args.shape(1) + shape[at + 1:])]


def gather_elements(args: Args) -> list[TensorType]:
    integer_indices(args, 1)
    shape, indices = args.shape(0), args.shape(1)
    at = axis(args.node, args.node.attr("axis", 0), len(shape))
    if len(indices) != len(shape) or any(i > d for k, (i, d) in enumerate(zip(indices, shape)) if k != at):
        raise CglowError(f"{args.node.describe()}: indices of shape {indices} do not fit data of shape {shape}")
    _in_range(args, 1, shape[at])
    return [TensorType(args.types[0].dtype, indices)]


def gather_nd(args: Args) -> list[TensorType]:
    integer_indices(args, 1)
    shape, indices = args.shape(0), args.shape(1)
    batch = args.node.attr("batch_dims", 0)
    if len(indices) <= batch or len(shape) < batch + indices[-1] or indices[:batch] != shape[:batch]:
        raise CglowError(f"{args.node.describe()}: indices of shape {indices} do not fit data of shape {shape} "
                         f"with batch_dims={batch}")
    return [TensorType(args.types[0].dtype, indices[:-1] + shape[batch + indices[-1]:])]


def one_hot_depth(args: Args) -> int:
    depth = args.const(1, "depth")
    if depth.size != 1 or depth.reshape(-1)[0] < 1:
        raise CglowError(f"{args.node.describe()}: depth must be one positive number")
    return int(depth.reshape(-1)[0])


def one_hot(args: Args) -> list[TensorType]:
    shape = args.shape(0)
    at = axis(args.node, args.node.attr("axis", -1), len(shape) + 1)
    if args.shape(2) != (2,):
        raise CglowError(f"{args.node.describe()}: values must hold two elements, [off, on]")
    return [TensorType(args.types[2].dtype, shape[:at] + (one_hot_depth(args),) + shape[at:])]


def trilu(args: Args) -> list[TensorType]:
    if len(args.shape(0)) < 2:
        raise CglowError(f"{args.node.describe()}: the input must have rank 2 or more")
    return same_as_input(args)
