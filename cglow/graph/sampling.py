"""Ops that read their input at positions computed at run time (from a grid, boxes or offsets), built per node
before import as graph/decompose.py builds others: the positions' coordinates computed elementwise (Mul, Add,
Floor, Clip, Where), each neighbour's index into the flattened spatial dims and its weight, the neighbours read
with GatherElements and summed by their weights. GridSample samples the input at a grid's points (nearest,
linear or cubic; zeros, border or reflection padding), RoiAlign averages (or takes the largest of) bilinear
samples over each box's bins, and DeformConv convolves bilinear samples at offset positions (a MatMul with the
weights)."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
from onnx import TensorProto

from ..errors import CglowError
from .builder import Builder, attrs_of, named

CUBIC_A = -0.75  # GridSample's cubic convolution coefficient (the ONNX reference's, PyTorch's)


def _f(b: Builder, value: float) -> str:
    return b.const(np.array(value, np.float32))


def _i(b: Builder, values) -> str:
    return b.const(np.array(values, np.int64))


def _reflect(b: Builder, v: str, lo: float, hi: float) -> str:
    """v folded into [lo, hi] by reflecting it off the border it passed, as often as it takes."""
    span = hi - lo
    if span <= 0:
        return b.add("Mul", [v, _f(b, 0.0)])
    below, above = b.add("Less", [v, _f(b, lo)]), b.add("Greater", [v, _f(b, hi)])
    past = b.add("Where", [below, b.add("Sub", [_f(b, lo), v]), b.add("Sub", [v, _f(b, hi)])])
    folds = b.add("Floor", [b.add("Div", [past, _f(b, span)])])
    rest = b.add("Sub", [past, b.add("Mul", [folds, _f(b, span)])])
    half = b.add("Mul", [folds, _f(b, 0.5)])
    odd = b.add("Less", [b.add("Floor", [half]), half])
    from_lo, from_hi = b.add("Add", [_f(b, lo), rest]), b.add("Sub", [_f(b, hi), rest])
    folded = b.add("Where", [b.add("Xor", [below, odd]), from_lo, from_hi])
    return b.add("Where", [b.add("Or", [below, above]), folded, v])


def _cubic_weights(b: Builder, t: str) -> list[str]:
    """The weights of the taps at -1, 0, 1, 2 from the floor, t the distance past it (Keys' kernel, A = -0.75)."""
    a = CUBIC_A

    def near(d: str) -> str:  # ((A + 2) d - (A + 3)) d d + 1, for |d| <= 1
        inner = b.add("Sub", [b.add("Mul", [d, _f(b, a + 2)]), _f(b, a + 3)])
        return b.add("Add", [b.add("Mul", [b.add("Mul", [inner, d]), d]), _f(b, 1.0)])

    def far(d: str) -> str:  # ((A d - 5 A) d + 8 A) d - 4 A, for 1 < |d| < 2
        inner = b.add("Sub", [b.add("Mul", [d, _f(b, a)]), _f(b, 5 * a)])
        inner = b.add("Add", [b.add("Mul", [inner, d]), _f(b, 8 * a)])
        return b.add("Sub", [b.add("Mul", [inner, d]), _f(b, 4 * a)])
    return [far(b.add("Add", [t, _f(b, 1.0)])), near(t), near(b.add("Sub", [_f(b, 1.0), t])),
            far(b.add("Sub", [_f(b, 2.0), t]))]


def _taps(b: Builder, x: str, mode: str) -> list[tuple[str, str | None]]:
    """The neighbours of coordinate x along one axis: (position, weight), the weight None for nearest's one."""
    if mode == "nearest":
        return [(x, None)]
    low = b.add("Floor", [x])
    t = b.add("Sub", [x, low])
    if mode == "linear":
        return [(low, b.add("Sub", [_f(b, 1.0), t])), (b.add("Add", [low, _f(b, 1.0)]), t)]
    weights = _cubic_weights(b, t)
    return [(b.add("Add", [low, _f(b, float(k))]) if k else low, w) for k, w in zip((-1, 0, 1, 2), weights)]


def _read(b: Builder, position: str, size: int, padding: str, lo: float, hi: float) -> tuple[str, str | None]:
    """A tap's index into an axis of `size` (int64) and its mask (None: always read): zeros padding masks what
    lies outside, border clamps it, reflection folds it into [lo, hi]."""
    mask = None
    if padding == "zeros":
        inside = b.add("And", [b.add("GreaterOrEqual", [position, _f(b, 0.0)]),
                               b.add("Less", [position, _f(b, float(size))])])
        mask = b.add("Cast", [inside], to=TensorProto.FLOAT)
    elif padding == "reflection":
        position = _reflect(b, position, lo, hi)
    inside = b.add("Clip", [position, _f(b, 0.0), _f(b, size - 1.0)])  # in range of the cast, whatever the grid
    return b.add("Cast", [inside], to=TensorProto.INT64), mask  # truncation, as the reference's int()


def _gather(b: Builder, flat: str, channels: int, shape: list[int],
            reads: list[list[tuple[str, str | None, str | None]]], strides: list[int], combine: str = "Add") -> str:
    """The neighbour combinations' values flat[n, c, index] times the product of their weights and masks, summed
    (or the largest taken, combine "Max"): flat is [n, c, spatial], each axis's reads (index, mask, weight)
    broadcast to `shape` ([n, 1, ...]); the result is `shape` with c channels."""
    points = [shape[0], 1, math.prod(shape[2:])]
    total = None
    for combo in _combinations(reads):
        index, factors = None, []
        for (tap, mask, weight), stride in zip(combo, strides):
            term = b.add("Mul", [tap, _i(b, stride)]) if stride != 1 else tap
            index = term if index is None else b.add("Add", [index, term])
            factors += [f for f in (weight, mask) if f is not None]
        index = index if list(shape) == points else b.add("Reshape", [index, _i(b, points)])
        value = b.add("GatherElements", [flat, b.add("Expand", [index, _i(b, [shape[0], channels, points[2]])])],
                      axis=2)
        value = value if list(shape) == points else b.add("Reshape", [value, _i(b, [shape[0], channels, *shape[2:]])])
        for f in factors:
            value = b.add("Mul", [value, f])
        total = value if total is None else b.add(combine, [total, value])
    return total


def _combinations(reads: list[list]) -> list[list]:
    combos: list[list] = [[]]
    for axis in reads:
        combos = [c + [r] for c in combos for r in axis]
    return combos


def _grid_sample(b: Builder, shapes: dict, consts: dict) -> None:
    """Y[n, c, o...] = X[n, c] sampled at grid[n, o...] (x, y[, z] in [-1, 1] across the width, height[, depth]):
    each coordinate unnormalized (align_corners: -1 and 1 are the outer pixels' centres, else their outer
    edges), rounded half to even (nearest), clamped (border) or reflected (reflection) where it lies beyond the
    borders, then its neighbours read and weighted per axis. Cubic border padding clamps each neighbour, not the
    coordinate: onnxruntime's and PyTorch's way (no conformance case has it; onnx's reference clamps the coordinate
    first, 0.3 of the input's scale away from them near the borders)."""
    node, attrs = b.node, attrs_of(b.node)
    x_shape, grid_shape = shapes.get(node.input[0]), shapes.get(node.input[1])
    if x_shape is None or grid_shape is None:
        raise CglowError(f"{named(node)}: the shapes of its input and grid must be static")
    mode = attrs.get("mode", b"linear").decode()
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)  # opset 16's names
    padding, align = attrs.get("padding_mode", b"zeros").decode(), attrs.get("align_corners", 0)
    spatial = x_shape[2:]
    if mode not in ("nearest", "linear", "cubic") or padding not in ("zeros", "border", "reflection"):
        raise CglowError(f"{named(node)}: unknown mode '{mode}' or padding_mode '{padding}'")
    if mode == "cubic" and len(spatial) != 2:
        raise CglowError(f"{named(node)}: cubic mode is defined for 2-D inputs only, not {len(spatial)}-D")
    n, c, k = x_shape[0], x_shape[1], len(spatial)
    count = math.prod(grid_shape[1:-1])
    grid = b.add("Reshape", [node.input[1], _i(b, [n, 1, count, k])])
    reads = []
    for a, size in enumerate(spatial):  # the grid lists the axes innermost first
        g = b.add("Reshape", [b.add("Slice", [grid, _i(b, [k - 1 - a]), _i(b, [k - a]), _i(b, [3])]),
                              _i(b, [n, 1, count])])
        shifted = b.add("Mul", [b.add("Add", [g, _f(b, 1.0)]), _f(b, 0.5)])
        x = b.add("Mul", [shifted, _f(b, size - 1)]) if align else \
            b.add("Sub", [b.add("Mul", [shifted, _f(b, float(size))]), _f(b, 0.5)])
        x = b.add("Round", [x]) if mode == "nearest" else x
        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        if padding == "border" and mode != "cubic":  # cubic clamps each neighbour instead (_read), as PyTorch does
            beyond = b.add("Or", [b.add("Less", [x, _f(b, lo)]), b.add("Greater", [x, _f(b, hi)])])
            x = b.add("Where", [beyond, b.add("Clip", [x, _f(b, 0.0), _f(b, size - 1.0)]), x])
        elif padding == "reflection":
            x = _reflect(b, x, lo, hi)
        reads.append([(*_read(b, p, size, padding, lo, hi), w) for p, w in _taps(b, x, mode)])
    strides = [math.prod(spatial[a + 1:]) for a in range(k)]
    flat = b.add("Reshape", [node.input[0], _i(b, [n, c, math.prod(spatial)])])
    total = _gather(b, flat, c, [n, 1, count], reads, strides)
    b.add("Reshape", [total, _i(b, [n, c, *grid_shape[1:-1]])], node.output[0])


def _roi_axis(b: Builder, start: str, end: str, size: int, bins: int, grid: int, clamp: bool,
              shape: list[int]) -> list[tuple[str, str, str]]:
    """One axis of RoiAlign's samples, each box's [start, end) cut into `bins` bins of `grid` samples at their
    centres: the two taps (index, mask, weight) of each sample, shaped `shape` ([boxes, 1, samples, 1] or
    [boxes, 1, 1, samples]). A sample more than a pixel outside the input weighs nothing; one before the first
    pixel reads it, one past the last pixel's start reads the last."""
    length = b.add("Sub", [end, start])
    length = b.add("Max", [length, _f(b, 1.0)]) if clamp else length  # output_half_pixel: boxes of at least 1
    width = b.add("Div", [length, _f(b, float(bins))])
    steps = np.repeat(np.arange(bins, dtype=np.float32), grid)
    within = np.tile((np.arange(grid, dtype=np.float32) + 0.5), bins)
    at = b.add("Add", [b.add("Add", [start, b.add("Mul", [width, b.const(steps.reshape(shape[1:]))])]),
                       b.add("Div", [b.add("Mul", [width, b.const(within.reshape(shape[1:]))]), _f(b, float(grid))])])
    inside = b.add("And", [b.add("GreaterOrEqual", [at, _f(b, -1.0)]), b.add("LessOrEqual", [at, _f(b, float(size))])])
    at = b.add("Max", [at, _f(b, 0.0)])
    edge = b.add("GreaterOrEqual", [b.add("Floor", [at]), _f(b, size - 1.0)])
    last = _f(b, size - 1.0)
    low = b.add("Where", [edge, last, b.add("Floor", [at])])
    high = b.add("Where", [edge, last, b.add("Add", [low, _f(b, 1.0)])])
    frac = b.add("Sub", [b.add("Where", [edge, last, at]), low])
    mask = b.add("Cast", [inside], to=TensorProto.FLOAT)
    return [(b.add("Cast", [p], to=TensorProto.INT64), mask, w)
            for p, w in ((low, b.add("Sub", [_f(b, 1.0), frac])), (high, frac))]


def _roi_align(b: Builder, shapes: dict, consts: dict) -> None:
    """Y[r, c] = the output_height x output_width bins of box r (x1, y1, x2, y2, times spatial_scale; half a pixel
    less, half_pixel) over X[batch_indices[r], c], each bin the mean (or, mode max, the largest) of its
    sampling_ratio x sampling_ratio bilinear samples (the four taps' weighted sum, or their largest weighted
    value). sampling_ratio 0 (a count per box from its size at run time) is refused."""
    node, attrs = b.node, attrs_of(b.node)
    x_shape, rois_shape = shapes.get(node.input[0]), shapes.get(node.input[1])
    if x_shape is None or rois_shape is None or len(x_shape) != 4:
        raise CglowError(f"{named(node)}: the shapes of its input (N, C, H, W) and boxes must be static")
    mode = attrs.get("mode", b"avg").decode()
    transform = attrs.get("coordinate_transformation_mode",
                          b"half_pixel" if b.opset >= 16 else b"output_half_pixel").decode()
    grid, scale = attrs.get("sampling_ratio", 0), attrs.get("spatial_scale", 1.0)
    bins = attrs.get("output_height", 1), attrs.get("output_width", 1)
    if mode not in ("avg", "max") or transform not in ("half_pixel", "output_half_pixel"):
        raise CglowError(f"{named(node)}: unknown mode '{mode}' or coordinate_transformation_mode '{transform}'")
    if grid <= 0:
        raise CglowError(f"{named(node)}: sampling_ratio {grid} (adaptive: as many samples per bin as the box "
                         f"is long, known at run time only) is not supported; give a positive sampling_ratio")
    boxes, (_, c, height, width) = rois_shape[0], x_shape
    corners = b.add("Sub", [b.add("Mul", [node.input[1], _f(b, scale)]),
                            _f(b, 0.5 if transform == "half_pixel" else 0.0)])

    def coordinate(i: int) -> str:  # [boxes, 1, 1, 1]
        return b.add("Reshape", [b.add("Slice", [corners, _i(b, [i]), _i(b, [i + 1]), _i(b, [1])]),
                                 _i(b, [boxes, 1, 1, 1])])
    clamp = transform == "output_half_pixel"
    rows = _roi_axis(b, coordinate(1), coordinate(3), height, bins[0], grid, clamp, [boxes, 1, bins[0] * grid, 1])
    cols = _roi_axis(b, coordinate(0), coordinate(2), width, bins[1], grid, clamp, [boxes, 1, 1, bins[1] * grid])
    flat = b.add("Gather", [b.add("Reshape", [node.input[0], _i(b, [x_shape[0], c, height * width])]),
                            node.input[2]], axis=0)
    shape = [boxes, 1, bins[0] * grid, bins[1] * grid]
    samples = _gather(b, flat, c, shape, [rows, cols], [width, 1], "Add" if mode == "avg" else "Max")
    samples = b.add("Reshape", [samples, _i(b, [boxes, c, bins[0], grid, bins[1], grid])])
    if mode == "max":
        _reduce(b, "ReduceMax", samples, [3, 5], node.output[0])
    else:
        b.add("Div", [_reduce(b, "ReduceSum", samples, [3, 5]), _f(b, float(grid * grid))], node.output[0])


def _reduce(b: Builder, op: str, x: str, axes: list[int], output: str | None = None) -> str:
    """A reduction over axes, dropped; axes an input from the opset that made it one (13 for ReduceSum, 18 for
    the others), an attribute before."""
    if b.opset >= (13 if op == "ReduceSum" else 18):
        return b.add(op, [x, _i(b, axes)], output, keepdims=0)
    return b.add(op, [x], output, axes=axes, keepdims=0)


def _deform_conv(b: Builder, shapes: dict, consts: dict) -> None:
    """A 2-D convolution whose kernel taps read X at offset positions: tap (u, v) of output (i, j) reads
    (i stride - pad + u dilation + its offset's dy, j stride - pad + v dilation + dx), bilinear with zeros
    outside, one offset per offset_group of channels, times the optional mask; then per group a MatMul of the
    weights [M / group, C / group kh kw] by those samples, plus the bias."""
    node, attrs = b.node, attrs_of(b.node)
    x_shape, w_shape = shapes.get(node.input[0]), shapes.get(node.input[1])
    offset_shape = shapes.get(node.input[2])
    if x_shape is None or w_shape is None or offset_shape is None:
        raise CglowError(f"{named(node)}: the shapes of its input, weights and offsets must be static")
    if len(x_shape) != 4:
        raise CglowError(f"{named(node)}: 2-D convolution (N, C, H, W) is supported, not input rank {len(x_shape)}")
    (n, c, height, width), (m, per_group, *kernel) = x_shape, w_shape
    group, offset_group = attrs.get("group", 1), attrs.get("offset_group", 1)
    strides, dilations = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    pads = attrs.get("pads", [0, 0, 0, 0])
    taps, out = math.prod(kernel), offset_shape[2:]
    if c != per_group * group or m % group or c % offset_group or offset_shape[:2] != (n, 2 * offset_group * taps):
        raise CglowError(f"{named(node)}: weights {list(w_shape)} and offsets {list(offset_shape)} do not match "
                         f"input {list(x_shape)} with group={group}, offset_group={offset_group}")
    points = taps * math.prod(out)
    offsets = b.add("Reshape", [node.input[2], _i(b, [n * offset_group, taps, 2, math.prod(out)])])
    reads = []
    for axis, size in enumerate((height, width)):
        rows = np.arange(out[axis]) * strides[axis] - pads[axis]
        steps = np.arange(kernel[axis]) * dilations[axis]
        base = np.add.outer(steps, rows)  # [k along this axis, out along it]
        base = base[:, None, :, None] if axis == 0 else base[None, :, None, :]
        base = np.broadcast_to(base, (*kernel, *out)).reshape(1, taps, math.prod(out)).astype(np.float32)
        shift = b.add("Reshape", [b.add("Slice", [offsets, _i(b, [axis]), _i(b, [axis + 1]), _i(b, [2])]),
                                  _i(b, [n * offset_group, taps, math.prod(out)])])
        at = b.add("Reshape", [b.add("Add", [shift, b.const(base)]), _i(b, [n * offset_group, 1, points])])
        reads.append([(*_read(b, p, size, "zeros", 0.0, size - 1.0), w) for p, w in _taps(b, at, "linear")])
    flat = b.add("Reshape", [node.input[0], _i(b, [n * offset_group, c // offset_group, height * width])])
    samples = _gather(b, flat, c // offset_group, [n * offset_group, 1, points], reads, [width, 1])
    if len(node.input) > 4 and node.input[4]:
        samples = b.add("Mul", [samples, b.add("Reshape", [node.input[4], _i(b, [n * offset_group, 1, points])])])
    columns = b.add("Reshape", [samples, _i(b, [n, group, per_group * taps, math.prod(out)])])
    weights = b.add("Reshape", [node.input[1], _i(b, [group, m // group, per_group * taps])])
    bias = node.input[3] if len(node.input) > 3 and node.input[3] else None
    product = b.add("Reshape", [b.add("MatMul", [weights, columns]), _i(b, [n, m, *out])],
                    None if bias else node.output[0])
    if bias:
        b.add("Add", [product, b.add("Reshape", [bias, _i(b, [1, m, 1, 1])])], node.output[0])


SAMPLING: dict[str, Callable[[Builder, dict, dict], None]] = {"GridSample": _grid_sample, "RoiAlign": _roi_align,
                                                              "DeformConv": _deform_conv}
