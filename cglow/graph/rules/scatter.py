"""Shape rules of the ops that write elements by index: ScatterElements (and Scatter, its old name), ScatterND,
TensorScatter, MaxUnpool and Col2Im."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from ..geometry import axis
from ..ir import Node, TensorType
from ..registry import Args, same_as_input
from .indexing import integer_indices

REDUCTIONS = ("none", "add", "mul", "max", "min")


def reduction(node: Node) -> str:
    kind = node.attr("reduction", "none")
    if kind not in REDUCTIONS:
        raise CglowError(f"{node.describe()}: reduction '{kind}' is not one of {', '.join(REDUCTIONS)}")
    return kind


def _same_type(args: Args, i: int) -> None:
    if args.types[i].dtype != args.types[0].dtype:
        raise CglowError(f"{args.node.describe()}: updates are {args.types[i].dtype.name}, data "
                         f"{args.types[0].dtype.name}")


def scatter_elements(args: Args) -> list[TensorType]:
    integer_indices(args, 1)
    _same_type(args, 2)
    reduction(args.node)
    shape, indices = args.shape(0), args.shape(1)
    at = axis(args.node, args.node.attr("axis", 0), len(shape))
    if args.shape(2) != indices or len(indices) != len(shape) or \
            any(i > d for k, (i, d) in enumerate(zip(indices, shape)) if k != at):
        raise CglowError(f"{args.node.describe()}: indices {indices} and updates {args.shape(2)} do not fit data of "
                         f"shape {shape}")
    return same_as_input(args)


def scatter_nd(args: Args) -> list[TensorType]:
    integer_indices(args, 1)
    _same_type(args, 2)
    reduction(args.node)
    shape, indices = args.shape(0), args.shape(1)
    if not indices or indices[-1] > len(shape) or args.shape(2) != indices[:-1] + shape[indices[-1]:]:
        raise CglowError(f"{args.node.describe()}: indices {indices} and updates {args.shape(2)} do not fit data of "
                         f"shape {shape}")
    return same_as_input(args)


def sequence_axis(node: Node, rank: int) -> int:
    """TensorScatter's sequence axis, never the batch axis."""
    at = axis(node, node.attr("axis", -2), rank)
    if at == 0:
        raise CglowError(f"{node.describe()}: the sequence axis cannot be the batch axis 0")
    return at


def tensor_scatter(args: Args) -> list[TensorType]:
    _same_type(args, 1)
    shape, update = args.shape(0), args.shape(1)
    at = sequence_axis(args.node, len(shape))
    if args.node.attr("mode", "linear") not in ("linear", "circular"):
        raise CglowError(f"{args.node.describe()}: mode '{args.node.attr('mode')}' is not linear or circular")
    if len(update) != len(shape) or update[at] > shape[at] or \
            any(u != d for k, (u, d) in enumerate(zip(update, shape)) if k != at):
        raise CglowError(f"{args.node.describe()}: an update of shape {update} does not fit a cache of shape {shape}")
    if args.has(2):
        integer_indices(args, 2)
        if args.shape(2) != shape[:1]:
            raise CglowError(f"{args.node.describe()}: write_indices must have one index per batch ({shape[0]})")
    return same_as_input(args)


def unpooled_shape(node: Node, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape MaxUnpool's indices count in: the input of the pooling it undoes, from its window."""
    spatial = len(shape) - 2
    kernel = node.attr("kernel_shape")
    strides = node.attr("strides", [1] * spatial)
    pads = node.attr("pads", [0] * 2 * spatial)
    return shape[:2] + tuple((n - 1) * s + k - pads[d] - pads[d + spatial]
                             for d, (n, s, k) in enumerate(zip(shape[2:], strides, kernel)))


def max_unpool(args: Args) -> list[TensorType]:
    integer_indices(args, 1)
    shape = args.shape(0)
    if args.shape(1) != shape or len(shape) < 3:
        raise CglowError(f"{args.node.describe()}: X {shape} and I {args.shape(1)} must have one shape, N x C x ...")
    unpooled = unpooled_shape(args.node, shape)
    if not args.has(2):
        return [TensorType(args.types[0].dtype, unpooled)]
    out = tuple(int(d) for d in args.const(2, "output_shape").reshape(-1))
    if len(out) != len(shape) or any(o < u for o, u in zip(out, unpooled)) or out[:2] != shape[:2]:
        raise CglowError(f"{args.node.describe()}: output_shape {out} does not hold the unpooled shape {unpooled}")
    return [TensorType(args.types[0].dtype, out)]


def col2im_window(node: Node, image: tuple[int, ...], block: tuple[int, ...]) -> tuple[list[int], ...]:
    """Col2Im's dilations, pads (begins then ends), strides, and the count of blocks along each image dim."""
    rank = len(image)
    dilations, pads = node.attr("dilations", [1] * rank), node.attr("pads", [0] * 2 * rank)
    strides = node.attr("strides", [1] * rank)
    counts = [(n + pads[d] + pads[d + rank] - dilations[d] * (b - 1) - 1) // strides[d] + 1
              for d, (n, b) in enumerate(zip(image, block))]
    return dilations, pads, strides, counts


def col2im(args: Args) -> list[TensorType]:
    image = tuple(int(d) for d in args.const(1, "image_shape").reshape(-1))
    block = tuple(int(d) for d in args.const(2, "block_shape").reshape(-1))
    shape = args.shape(0)
    per_block = int(np.prod(block))
    counts = col2im_window(args.node, image, block)[3] if len(image) == len(block) else [0]
    if len(shape) != 3 or shape[1] % per_block or shape[2] != int(np.prod(counts)) or min(counts) < 1:
        raise CglowError(f"{args.node.describe()}: input {shape} is not [N, C x {per_block} block elements, "
                         f"one column per block] for image_shape {image} and block_shape {block}")
    return [TensorType(args.types[0].dtype, (shape[0], shape[1] // per_block) + image)]
