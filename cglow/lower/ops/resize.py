"""Lowering of Resize. Interpolation is separable: each resized axis is a constant (out x in) matrix,
built here with the ONNX coordinate transforms and filter taps. Where its rows repeat with a period (a
rational scale: row o + period is row o shifted by `shift` columns), the axis becomes a few maps, one per
run of alike rows, each a weighted sum of the few taps read through strided views (linear and cubic
filters have 2 and 4 taps per row, where a Gemm would multiply whole rows of zeros); other matrices are
applied as a batched Gemm over the axis. A nearest resize whose index maps are strided views (integer
factors) is one copy instead. The output keeps the input's layout (channels last inside conv chains)."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ...errors import CglowError
from ...graph.ir import Node
from ...graph.registry import OpSpec, declare
from ...graph.rules import resize as rules
from ...graph.rules.resize import Axis, cropping, resize_axes
from ...instr.expr import ACC, F32, Expr, Input, lit
from ...instr.ir import Epilogue, Gemm, Map, View
from ..context import Context


def _source(node: Node, ax: Axis, size: int, dtype=np.float64) -> np.ndarray:
    """x_original of each output index, per coordinate_transformation_mode (spec equations; length_resized is
    the integer output length, but for align_corners, Axis.length), computed in dtype."""
    mode = node.attr("coordinate_transformation_mode", "half_pixel")
    y, s, out = np.arange(ax.out, dtype=dtype), dtype(ax.scale), ax.out
    if mode == "half_pixel":
        return (y + 0.5) / s - 0.5
    if mode == "half_pixel_symmetric":
        return size / 2 * (1 - out / (s * size)) + (y + 0.5) / s - 0.5
    if mode == "pytorch_half_pixel":
        return (y + 0.5) / s - 0.5 if out > 1 else np.zeros(out, dtype)
    if mode == "align_corners":
        return y * (size - 1) / dtype(ax.length - 1) if ax.length != 1 else np.zeros(out, dtype)
    if mode == "asymmetric":
        return y / s
    if mode == "tf_half_pixel_for_nearest":
        return (y + 0.5) / s
    if mode == "tf_crop_and_resize":
        start, end = ax.roi
        if out == 1:
            return np.full(out, 0.5 * (start + end) * (size - 1), dtype)
        return start * (size - 1) + y * (end - start) * (size - 1) / (out - 1)
    raise CglowError(f"{node.describe()}: unknown coordinate_transformation_mode '{mode}'")


def _cubic(x: np.ndarray, a: float) -> np.ndarray:
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


def _filter(node: Node, ratio: np.ndarray, scale: float) -> tuple[int, np.ndarray]:
    """The first tap's offset and the weights [out, taps]; tap j sits at x - ratio + first + j."""
    mode = node.attr("mode", "nearest")
    if mode == "nearest":
        if node.attr("antialias", 0):
            raise CglowError(f"{node.describe()}: antialias is not defined for mode 'nearest'")
        rounding = node.attr("nearest_mode", "round_prefer_floor")
        rules = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5, "floor": ratio == 1.0,
                 "ceil": np.ones_like(ratio, bool)}
        if rounding not in rules:
            raise CglowError(f"{node.describe()}: unknown nearest_mode '{rounding}'")
        return 0, np.stack([~rules[rounding], rules[rounding]], axis=1).astype(np.float64)
    kernels = {"linear": (1, lambda x: np.clip(1 - np.abs(x), 0, 1)),
               "cubic": (2, lambda x: _cubic(x, node.attr("cubic_coeff_a", -0.75)))}
    if mode not in kernels:
        raise CglowError(f"{node.describe()}: unknown mode '{mode}'")
    reach, kernel = kernels[mode]
    stretch = min(scale, 1.0) if node.attr("antialias", 0) else 1.0  # antialias widens the filter when shrinking
    first = int(np.floor(-reach / stretch) + 1)
    weights = kernel((np.arange(first, 2 - first)[None, :] - ratio[:, None]) * stretch)
    return first, weights / weights.sum(axis=1, keepdims=True)


def _matrix(node: Node, ax: Axis, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The axis's interpolation matrix [out, in] and the outputs left to extrapolation_value."""
    x = _source(node, ax, size)
    ratio = np.where(x == np.floor(x), 1.0, x - np.floor(x))  # in (0, 1]: an integer x counts as the right tap
    first, weights = _filter(node, ratio, ax.scale)
    taps = np.round(x - ratio).astype(np.int64)[:, None] + first + np.arange(weights.shape[1])
    if node.attr("exclude_outside", 0):
        weights = np.where((taps < 0) | (taps >= size), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    matrix = np.zeros((ax.out, size))
    np.add.at(matrix, (np.arange(ax.out)[:, None], np.clip(taps, 0, size - 1)), weights)  # edges repeat
    outside = (x < 0) | (x > size - 1) if cropping(node) else np.zeros(ax.out, bool)
    matrix[outside] = 0.0
    return matrix, outside


def _strided(matrix: np.ndarray) -> tuple[int, int, int] | None:
    """(start, step, repeat) with row o picking input start + (o // repeat) * step, for a one-hot matrix."""
    picks = matrix.argmax(axis=1)
    repeat = int(np.argmax(picks != picks[0])) or len(picks)
    if len(picks) % repeat:
        return None
    step = int(picks[repeat] - picks[0]) if repeat < len(picks) else 0
    expected = np.repeat(picks[0] + step * np.arange(len(picks) // repeat), repeat)
    return (int(picks[0]), step, repeat) if np.array_equal(picks, expected) else None


def _copy_through_views(ctx: Context, node: Node, x: View, patterns) -> None:
    """out[..., o, ...] = x[..., start + (o // repeat) * step, ...] on every axis, as one map."""
    offset, shape, strides = x.offset, [], []
    for (start, step, repeat), s, out in zip(patterns, x.strides, ctx.shape(node.outputs[0])):
        offset += start * s
        shape += [out // repeat, repeat]
        strides += [step * s, 0]
    source = View(x.buf, offset, tuple(shape), tuple(strides))
    ctx.emit(Map(ctx.new(node.outputs[0]).reshape(tuple(shape)), (source,), Input(0), node.name))


def _along(ctx: Context, x: View, axis: int, matrix: np.ndarray, bias: np.ndarray | None, out: View,
           label: str) -> None:
    """out = matrix applied along `axis` of x (plus bias per output index): one batched Gemm."""
    before, cols = x.shape[:axis], int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    right = x.reshape(before + (x.shape[axis], cols))
    if right is None:  # strides that do not merge: copy to row-major first
        copy = ctx.temp(x.shape, label)
        ctx.emit(Map(copy, (x,), Input(0), label))
        right = copy.reshape(before + (x.shape[axis], cols))
    shape = before + (matrix.shape[0], cols)
    left = ctx.const_view(matrix.astype(np.float32), f"{label} axis {axis}").broadcast_to(before + matrix.shape)
    epi = Epilogue()
    if bias is not None:
        values = ctx.const_view(bias[:, None].astype(np.float32), f"{label} extrapolation")
        epi = Epilogue(ACC + Input(0), (values.broadcast_to(shape),))
    ctx.emit(Gemm(out.reshape(shape), left, right, epi, label))


MAX_PERIOD, MAX_RUNS, MAX_MAPS = 16, 32, 64  # MAX_MAPS: of a 2-D linear resize, one per pair of runs


@dataclass(frozen=True)
class Run:
    """Outputs first, first + period, ... (count of them): output k is the sum of weight * x[tap + k * shift]
    over the taps, plus bias."""
    first: int
    count: int
    period: int
    shift: int
    taps: tuple[int, ...]
    weights: tuple[float, ...]
    bias: float


def _rows(matrix: np.ndarray) -> list[tuple[tuple[int, ...], tuple[float, ...]]]:
    """Each row's taps (its nonzero columns) and their weights."""
    return [(tuple(int(t) for t in np.flatnonzero(row)), tuple(float(w) for w in row[np.flatnonzero(row)]))
            for row in matrix]


def _runs(rows: list[tuple[tuple[int, ...], tuple[float, ...]]], bias: np.ndarray) -> list[Run] | None:
    """The fewest runs of alike rows (taps and weights per output) over the periods tried, or None if even
    they are too many."""
    out = len(rows)
    best: list[Run] | None = None
    for period in range(1, min(out, MAX_PERIOD) + 1):
        middle = (out // 2 // period) * period
        if middle + period >= out or not rows[middle][0] or not rows[middle + period][0]:
            continue
        shift = rows[middle + period][0][0] - rows[middle][0][0]
        runs: list[Run] = []
        for phase in range(period):
            for k, o in enumerate(range(phase, out, period)):
                run = Run(o, 1, period, shift, rows[o][0], rows[o][1], float(bias[o]))
                last = runs[-1] if runs and k else None
                if last and (last.weights, last.bias) == (run.weights, run.bias) and \
                        last.taps == tuple(t - last.count * shift for t in run.taps):
                    runs[-1] = replace(last, count=last.count + 1)
                else:
                    runs.append(run)
        if best is None or len(runs) < len(best):
            best = runs
    return best if best is not None and len(best) <= MAX_RUNS else None


def _stepped(v: View, axis: int, start: int, count: int, step: int) -> View:
    """Elements start, start + step, ... (count of them) of v along axis."""
    return replace(v.slice(axis, start, count), strides=v.strides[:axis] + (v.strides[axis] * step,) + v.strides[axis + 1:])


def _weighted(w: float, x: Expr) -> Expr:
    return x if w == 1 else lit(w, F32) * x


def _through_maps(ctx: Context, x: View, axis: int, runs: list[Run], out: View, label: str) -> None:
    for r in runs:
        terms = [_weighted(w, Input(t)) for t, w in enumerate(r.weights)]
        terms += [lit(r.bias, F32)] if r.bias or not terms else []
        ins = tuple(_stepped(x, axis, tap, r.count, r.shift) for tap in r.taps)
        ctx.emit(Map(_stepped(out, axis, r.first, r.count, r.period), ins, sum(terms[1:], start=terms[0]), label))


def _bilinear_rows(node: Node, ax: Axis, size: int) -> list[tuple[tuple[int, ...], tuple[float, ...]]]:
    """onnxruntime's linear taps and weights per output index, in float32: the coordinate clamped into the
    input, taps floor(x) and the next one (clamped), each weighted by the distance to the other; a clamped
    pair weighs 1/2 twice."""
    x = np.clip(_source(node, ax, size, np.float32), 0, size - 1)
    first = np.minimum(x.astype(np.int64), size - 1)
    second = np.minimum(first + 1, size - 1)
    near, far = np.abs(x - first.astype(np.float32)), np.abs(x - second.astype(np.float32))
    weights = np.where((first == second)[:, None], np.float32(0.5), np.stack([far, near], axis=1))
    return [((int(a), int(b)), (float(u), float(v))) for a, b, (u, v) in zip(first, second, weights)]


def _bilinear(ctx: Context, node: Node, x: View, axes: list[Axis], resized: list[int]) -> bool:
    """A linear resize within the last two axes as onnxruntime computes it, both axes at once: output =
    w11 * x11 + w12 * x12 + w21 * x21 + w22 * x22 in float32, in that order (its rounding, so quantized
    models round their ties alike), each w the product of the axes' weights. One map per pair of runs, no
    temporary. False where this does not apply."""
    rank = len(x.shape)
    if node.attr("mode", "nearest") != "linear" or node.attr("antialias", 0) or node.attr("exclude_outside", 0) \
            or cropping(node) or rank < 2 or min(resized) < rank - 2:
        return False
    rows, cols = rank - 2, rank - 1
    (ys, xs) = runs = [_runs(_bilinear_rows(node, axes[a], x.shape[a]), np.zeros(axes[a].out)) for a in (rows, cols)]
    if None in runs or len(ys) * len(xs) > MAX_MAPS:
        return False
    out = ctx.new(node.outputs[0], x.order())
    for ry in ys:
        for rx in xs:
            terms, ins = [], []
            for ty, wy in zip(ry.taps, ry.weights):
                for tx, wx in zip(rx.taps, rx.weights):
                    w = np.float32(wy) * np.float32(wx)
                    if w:
                        terms.append(_weighted(w, Input(len(ins))))
                        ins.append(_stepped(_stepped(x, rows, ty, ry.count, ry.shift), cols, tx, rx.count, rx.shift))
            target = _stepped(_stepped(out, rows, ry.first, ry.count, ry.period), cols, rx.first, rx.count, rx.period)
            ctx.emit(Map(target, tuple(ins), sum(terms[1:], start=terms[0]), node.name))
    return True


def _given(ctx: Context, node: Node, i: int) -> np.ndarray | None:
    return ctx.const(node.inputs[i]) if len(node.inputs) > i and node.inputs[i] else None


def _resize(ctx: Context, node: Node) -> None:
    if 0 in ctx.shape(node.outputs[0]):  # a scale below one over a short axis: nothing to compute
        ctx.new(node.outputs[0])
        return
    x = ctx.view(node.inputs[0])
    roi = _given(ctx, node, 1) if cropping(node) else None
    axes = resize_axes(node, ctx.graph.opset, x.shape, roi, _given(ctx, node, 2), _given(ctx, node, 3))
    resized = [(a, ax) for a, ax in enumerate(axes)  # as the ONNX reference, axes left as they are are skipped
               if not (ax.out == x.shape[a] and math.isclose(ax.scale, 1.0) and ax.roi == (0.0, 1.0))]
    plans = {a: _matrix(node, ax, x.shape[a]) for a, ax in resized}
    if not plans:
        ctx.bind(node.outputs[0], x)
        return
    if node.attr("mode", "nearest") == "nearest" and not any(outside.any() for _, outside in plans.values()):
        patterns = [_strided(plans[a][0]) if a in plans else (0, 1, 1) for a in range(len(axes))]
        if None not in patterns:
            _copy_through_views(ctx, node, x, patterns)
            return
    if _bilinear(ctx, node, x, axes, list(plans)):
        return
    integer = ctx.dtype(node.inputs[0]) != np.float32  # 8-bit: interpolated in float, stored truncated
    if integer:
        copy = ctx.temp(x.shape, f"{node.name} in float", order=x.order())
        ctx.emit(Map(copy, (x,), Input(0), node.name))
        x = copy
    extrapolation = np.float32(node.attr("extrapolation_value", 0.0))
    for i, (a, ax) in enumerate(resized):
        matrix, outside = plans[a]
        bias = np.where(outside, extrapolation, 0.0) if outside.any() and extrapolation != 0 else None
        shape = x.shape[:a] + (ax.out,) + x.shape[a + 1:]
        last = i == len(resized) - 1 and not integer
        runs = _runs(_rows(matrix), np.zeros(ax.out) if bias is None else bias)
        order = x.order() if runs else None
        out = ctx.new(node.outputs[0], order) if last else ctx.temp(shape, f"{node.name} axis {a}", order=order)
        if runs:
            _through_maps(ctx, x, a, runs, out, node.name)
        else:
            _along(ctx, x, a, matrix, bias, out, node.name)
        x = out
    if integer:
        ctx.emit(Map(ctx.new(node.outputs[0], x.order()), (x,), Input(0), node.name))


declare({
    "Resize": OpSpec(rules.resize, _resize, shape_inputs=(1, 2, 3)),
})
