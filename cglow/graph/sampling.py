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


def _gather_sum(b: Builder, flat: str, n: int, c: int, count: int,
                reads: list[list[tuple[str, str | None, str | None]]], strides: list[int]) -> str:
    """sum over the neighbour combinations of the product of their weights and masks times flat[n, c, index],
    flat [n, c, spatial] and each axis's reads (index, mask, weight) of shape [n, 1, count]; [n, c, count]."""
    total = None
    for combo in _combinations(reads):
        index, factors = None, []
        for (tap, mask, weight), stride in zip(combo, strides):
            term = b.add("Mul", [tap, _i(b, stride)]) if stride != 1 else tap
            index = term if index is None else b.add("Add", [index, term])
            factors += [f for f in (weight, mask) if f is not None]
        index = b.add("Expand", [index, _i(b, [n, c, count])])
        value = b.add("GatherElements", [flat, index], axis=2)
        for f in factors:
            value = b.add("Mul", [value, f])
        total = value if total is None else b.add("Add", [total, value])
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
    borders, then its neighbours read and weighted per axis."""
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
        if padding == "border":
            beyond = b.add("Or", [b.add("Less", [x, _f(b, lo)]), b.add("Greater", [x, _f(b, hi)])])
            x = b.add("Where", [beyond, b.add("Clip", [x, _f(b, 0.0), _f(b, size - 1.0)]), x])
        elif padding == "reflection":
            x = _reflect(b, x, lo, hi)
        reads.append([(*_read(b, p, size, padding, lo, hi), w) for p, w in _taps(b, x, mode)])
    strides = [math.prod(spatial[a + 1:]) for a in range(k)]
    flat = b.add("Reshape", [node.input[0], _i(b, [n, c, math.prod(spatial)])])
    total = _gather_sum(b, flat, n, c, count, reads, strides)
    b.add("Reshape", [total, _i(b, [n, c, *grid_shape[1:-1]])], node.output[0])


SAMPLING: dict[str, Callable[[Builder, dict, dict], None]] = {"GridSample": _grid_sample}
