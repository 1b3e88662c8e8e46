"""Lowering of the ops that write elements by index, each one Scatter primitive (out = data, then each update
combined into its place): ScatterElements (and Scatter, its old name) along an axis, ScatterND at the positions a
map flattens its index tuples to, TensorScatter's rows of a cache from each batch's write index, MaxUnpool's values
into zeros at flat indices, and Col2Im's blocks summed into zeros at constant pixel positions."""
from __future__ import annotations

import numpy as np

from ...graph.geometry import axis
from ...graph.ir import Node
from ...graph.registry import OpSpec, declare
from ...graph.rules import scatter as rules
from ...instr.expr import Input, binary, cast, lift
from ...instr.ir import Map, Scatter, Value, View, contiguous_strides
from ..context import Context
from .indexing import flat_positions


def _zeros(ctx: Context, out: View, name: str) -> View:
    """A constant zero read at every element of out."""
    zero = ctx.const_view(np.zeros(1, ctx.dtype(name)), f"{name} zeros")
    return View(zero.buf, 0, out.shape, (0,) * len(out.shape))


def _scatter_elements(ctx: Context, node: Node) -> None:
    """out[i with its axis coordinate replaced by indices[i]] = updates[i]."""
    data, index, updates = (ctx.view(name) for name in node.inputs[:3])
    at = axis(node, node.attr("axis", 0), len(data.shape))
    dims = tuple(None if d == at else d for d in range(len(data.shape)))
    ctx.emit(Scatter(ctx.new(node.outputs[0]), data, updates, index, at, dims, rules.reduction(node), node.name))


def _scatter_nd(ctx: Context, node: Node) -> None:
    """Each index tuple as a position over the indexed dims taken as one flat axis (indexing.flat_positions); each
    update slice goes to its position along that axis."""
    shape, index_shape = ctx.shape(node.inputs[0]), ctx.shape(node.inputs[1])
    picked, rest = shape[:index_shape[-1]], shape[index_shape[-1]:]
    flat = (int(np.prod(picked, dtype=np.int64)),) + rest
    positions = flat_positions(ctx, node, picked)
    updates = ctx.view(node.inputs[2])
    out = ctx.new(node.outputs[0])
    spread = View(positions.buf, 0, updates.shape, positions.strides + (0,) * len(rest))
    dims = (None,) * (len(index_shape) - 1) + tuple(range(1, len(flat)))
    ctx.emit(Scatter(out.reshape(flat), ctx.reshaped(node.inputs[0], flat), updates, spread, 0, dims,
                     rules.reduction(node), node.name, Value(node.outputs[0], out)))


def _tensor_scatter(ctx: Context, node: Node) -> None:
    """present = past, with update's rows s written at row write_indices[b] + s (modulo the cache's length when
    circular) of each batch b; without write_indices at row s."""
    cache, update = ctx.view(node.inputs[0]), ctx.view(node.inputs[1])
    shape = update.shape
    at = rules.sequence_axis(node, len(shape))
    zeros = (0,) * len(shape)
    rows = ctx.const_view(np.arange(shape[at], dtype=np.int64), f"{node.name} rows")
    index = View(rows.buf, 0, shape, zeros[:at] + (1,) + zeros[at + 1:])
    if len(node.inputs) > 2 and node.inputs[2]:
        start = ctx.view(node.inputs[2])
        firsts = View(start.buf, start.offset, shape, start.strides[:1] + zeros[1:])
        row = cast(np.int64, Input(0)) + Input(1)
        if node.attr("mode", "linear") == "circular":
            row = binary("%", row, lift(cache.shape[at]))
        index = ctx.temp(shape, f"{node.name} rows", np.int64)
        ctx.emit(Map(index, (firsts, View(rows.buf, 0, shape, zeros[:at] + (1,) + zeros[at + 1:])), row, node.name))
    dims = tuple(None if d == at else d for d in range(len(shape)))
    ctx.emit(Scatter(ctx.new(node.outputs[0]), cache, update, index, at, dims, "none", node.name))


def _max_unpool(ctx: Context, node: Node) -> None:
    """Zeros, with X's values at their flat indices I into the unpooled shape, which sits at the start of each
    dim of a larger output_shape (a map moves each index there)."""
    out = ctx.new(node.outputs[0])
    size = out.size
    flat = out.reshape((size,))
    count = int(np.prod(ctx.shape(node.inputs[0]), dtype=np.int64))
    index = ctx.reshaped(node.inputs[1], (count,))
    unpooled = rules.unpooled_shape(node, ctx.shape(node.inputs[0]))
    if unpooled != out.shape:
        moved = ctx.temp((count,), f"{node.name} indices", np.int64)
        place = lift(0)
        for d, (n, step) in enumerate(zip(unpooled, contiguous_strides(unpooled))):
            coordinate = binary("%", binary("/", cast(np.int64, Input(0)), lift(step)), lift(n)) if d else \
                binary("/", cast(np.int64, Input(0)), lift(step))
            place = place + coordinate * out.strides[d]
        ctx.emit(Map(moved, (index,), place, node.name))
        index = moved
    ctx.emit(Scatter(flat, _zeros(ctx, flat, node.outputs[0]), ctx.reshaped(node.inputs[0], (count,)), index, 0,
                     (None,), "none", node.name, Value(node.outputs[0], out)))


def _pixels(node: Node, image: tuple[int, ...], block: tuple[int, ...]) -> np.ndarray:
    """[K, L]: the flat pixel of block element k of block l, or the image's size where it falls in the padding."""
    dilations, pads, strides, counts = rules.col2im_window(node, image, block)
    rank = len(image)
    places = np.zeros(tuple(block) + tuple(counts), np.int64)  # [block dims..., block count dims...]
    inside = np.ones(places.shape, bool)
    for d, n in enumerate(image):
        k = np.arange(block[d]).reshape([-1 if e == d else 1 for e in range(rank)] + [1] * rank)
        column = np.arange(counts[d]).reshape([1] * rank + [-1 if e == d else 1 for e in range(rank)])
        at = column * strides[d] - pads[d] + k * dilations[d]
        inside = inside & (at >= 0) & (at < n)
        places = places + at * int(np.prod(image[d + 1:], dtype=np.int64))
    pixels = int(np.prod(image, dtype=np.int64))
    return np.where(inside, places, pixels).reshape(int(np.prod(block)), int(np.prod(counts)))


def _col2im(ctx: Context, node: Node) -> None:
    """Zeros, plus each column's block element k of block l at its pixel of the image: a constant [K, L] of flat
    pixel positions (past the image where the pixel is in the padding, so skipped), the same for every image and
    channel."""
    n, channels_blocks, _ = ctx.shape(node.inputs[0])
    image = tuple(int(d) for d in ctx.const(node.inputs[1]).reshape(-1))
    places = _pixels(node, image, tuple(int(d) for d in ctx.const(node.inputs[2]).reshape(-1)))
    pixels = int(np.prod(image, dtype=np.int64))
    channels = channels_blocks // places.shape[0]
    out = ctx.new(node.outputs[0])
    flat = out.reshape((n, channels, pixels))
    const = ctx.const_view(places, f"{node.name} places")
    index = View(const.buf, 0, (n, channels) + places.shape, (0, 0) + const.strides)
    updates = ctx.reshaped(node.inputs[0], (n, channels) + places.shape)
    ctx.emit(Scatter(flat, _zeros(ctx, flat, node.outputs[0]), updates, index, 2, (0, 1, None, None), "add",
                     node.name, Value(node.outputs[0], out)))


declare({
    "ScatterElements": OpSpec(rules.scatter_elements, _scatter_elements),
    "Scatter": OpSpec(rules.scatter_elements, _scatter_elements),
    "ScatterND": OpSpec(rules.scatter_nd, _scatter_nd),
    "TensorScatter": OpSpec(rules.tensor_scatter, _tensor_scatter),
    "MaxUnpool": OpSpec(rules.max_unpool, _max_unpool, shape_inputs=(2,)),
    "Col2Im": OpSpec(rules.col2im, _col2im, shape_inputs=(1, 2)),
})
