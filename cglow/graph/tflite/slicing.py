"""Operators that take parts of tensors or stack them: STRIDED_SLICE, SPLIT, SPLIT_V, PACK, UNPACK and GATHER.
They become ONNX Slice, Split, Unsqueeze with Concat, and Gather nodes; on 8-bit values they only move the
integers, so every output must keep the input's scale and zero point, as TFLite's converter writes them."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from .build import Build, translator
from .tensor import same_quant

_MASKS = ("BeginMask", "EndMask", "ShrinkAxisMask", "EllipsisMask", "NewAxisMask")


def _axis(b: Build, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise CglowError(f"{b.op.describe()}: axis {axis} is out of range for rank {rank}")
    return axis % rank


def _bits(mask: int, n: int) -> list[bool]:
    return [bool(mask >> i & 1) for i in range(n)]


def _clamped(index: int, size: int, stride: int) -> int:
    """TFLite's StartForAxis / StopForAxis: a negative index counts from the end, then it is clamped into
    [0, size] stepping forward, [-1, size - 1] stepping back."""
    index = index + size if index < 0 else index
    return min(max(index, 0), size) if stride > 0 else min(max(index, -1), size - 1)


@translator("STRIDED_SLICE")
def _strided_slice(b: Build, op) -> None:
    """The file's begin, end and strides run over the input's axes (an ellipsis stands for the axes no index
    names, a new axis inserts one of length 1); each axis becomes a Slice range, and a Reshape drops the
    shrunk axes and inserts the new ones."""
    same_quant(b)
    shape = b.tensor(0).shape
    begin, end, strides = (b.constant(i, what).astype(np.int64).reshape(-1).tolist()
                           for i, what in ((1, "begin"), (2, "end"), (3, "strides")))
    if not len(begin) == len(end) == len(strides):
        raise CglowError(f"{op.describe()}: begin, end and strides differ in length")
    if b.option("Offset"):
        end = [x + e for x, e in zip(begin, end)]
    n = len(begin)
    begun, ended, shrunk, ellipsis, new = (_bits(b.option(m) or 0, n) for m in _MASKS)
    if sum(ellipsis) > 1:
        raise CglowError(f"{op.describe()}: more than one ellipsis (ellipsis_mask)")
    named = sum(1 for i in range(n) if not ellipsis[i] and not new[i])
    if named > len(shape):
        raise CglowError(f"{op.describe()}: {named} indices for an input of rank {len(shape)}")
    ranges, out_shape = [], []  # ranges: (start, count, step) per input axis
    for i in range(n):
        if ellipsis[i]:
            for d in shape[len(ranges):len(ranges) + len(shape) - named]:
                ranges.append((0, d, 1))
                out_shape.append(d)
            continue
        if new[i]:
            if shrunk[i]:
                raise CglowError(f"{op.describe()}: index {i} both inserts an axis and shrinks one")
            out_shape.append(1)
            continue
        d, step = shape[len(ranges)], strides[i]
        if step == 0:
            raise CglowError(f"{op.describe()}: stride {i} is 0")
        if shrunk[i]:
            if step < 0 or begun[i]:
                raise CglowError(f"{op.describe()}: an axis shrunk with a negative stride or with begin_mask "
                                 f"set (index {i}) is not supported")
            start = begin[i] + d if begin[i] < 0 else begin[i]
            if not 0 <= start < d:
                raise CglowError(f"{op.describe()}: index {begin[i]} is out of range for an axis of {d}")
            ranges.append((start, 1, 1))
            continue
        start = (0 if step > 0 else d - 1) if begun[i] else _clamped(begin[i], d, step)
        stop = (d if step > 0 else -1) if ended[i] else _clamped(end[i], d, step)
        count = len(range(start, stop, step))
        ranges.append((start, count, step))
        out_shape.append(count)
    for d in shape[len(ranges):]:
        ranges.append((0, d, 1))
        out_shape.append(d)
    value = b.value(0)
    cut = [(a, r) for a, r in enumerate(ranges) if r != (0, shape[a], 1)]
    if cut:
        # the end one step past the last index kept; stepping back to before index 0 takes -size - 1
        ends = [s + (c - 1) * t + (1 if t > 0 else -1) for _, (s, c, t) in cut]
        ends = [e if e >= 0 else -shape[a] - 1 for (a, _), e in zip(cut, ends)]
        value = b.add("Slice", [value] + [b.const(k, np.array(v, np.int64)) for k, v in (
            ("starts", [s for _, (s, _, _) in cut]), ("ends", ends), ("axes", [a for a, _ in cut]),
            ("steps", [t for _, (_, _, t) in cut]))])
    if tuple(out_shape) != b.types[value].shape:
        value = b.add("Reshape", [value, b.const("shape", np.array(out_shape, np.int64))])
    b.finish(value)


def _split(b: Build, value: int, axis: int, sizes: list[int]) -> None:
    """Input `value` split along `axis` into parts of `sizes`, the operator's outputs in order."""
    same_quant(b, (value,), len(sizes))
    outs = [b.out(i) for i in range(len(sizes))]
    b.add_many("Split", [b.value(value), b.const("split", np.array(sizes, np.int64))], {"axis": axis}, len(sizes),
               outs=outs)
    for i, name in enumerate(outs):
        b.check(name, i)


def _scalar(b: Build, i: int, what: str) -> int:
    data = b.constant(i, what).reshape(-1)
    if data.size != 1:
        raise CglowError(f"{b.op.describe()}: the {what} must be one value, it holds {data.size}")
    return int(data[0])


@translator("SPLIT")
def _split_even(b: Build, op) -> None:
    rank = len(b.tensor(1).shape)
    axis = _axis(b, _scalar(b, 0, "axis"), rank)
    size, parts = b.tensor(1).shape[axis], len(op.outputs)
    if size % parts:
        raise CglowError(f"{op.describe()}: axis {axis} of {size} does not split into {parts} equal parts")
    _split(b, 1, axis, [size // parts] * parts)


@translator("SPLIT_V")
def _split_sizes(b: Build, op) -> None:
    shape = b.tensor(0).shape
    axis = _axis(b, _scalar(b, 2, "axis"), len(shape))
    sizes = [int(s) for s in b.constant(1, "size_splits").reshape(-1)]
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = shape[axis] - sum(s for s in sizes if s != -1)
    if len(sizes) != len(op.outputs) or min(sizes) < 0 or sum(sizes) != shape[axis]:
        raise CglowError(f"{op.describe()}: cannot split axis {axis} of {list(shape)} into {sizes} for "
                         f"{len(op.outputs)} outputs")
    _split(b, 0, axis, sizes)


@translator("PACK")
def _pack(b: Build, op) -> None:
    same_quant(b, range(len(op.inputs)))
    axis = _axis(b, b.option("Axis") or 0, len(b.tensor(0).shape) + 1)
    at = b.const("axes", np.array([axis], np.int64))
    parts = [b.add("Unsqueeze", [b.value(i), at]) for i in range(len(op.inputs))]
    b.finish(b.add("Concat", parts, {"axis": axis}))


@translator("UNPACK")
def _unpack(b: Build, op) -> None:
    shape = b.tensor(0).shape
    axis = _axis(b, b.option("Axis") or 0, len(shape))
    same_quant(b, (0,), len(op.outputs))
    if len(op.outputs) != shape[axis]:
        raise CglowError(f"{op.describe()}: {len(op.outputs)} outputs for an axis of {shape[axis]}")
    parts = b.add_many("Split", [b.value(0), b.const("split", np.ones(shape[axis], np.int64))], {"axis": axis},
                       shape[axis])
    out_shape = b.const("shape", np.array(shape[:axis] + shape[axis + 1:], np.int64))
    for i, part in enumerate(parts):
        b.check(b.add("Reshape", [part, out_shape], out=b.out(i)), i)


@translator("GATHER")
def _gather(b: Build, op) -> None:
    if b.option("BatchDims"):
        raise CglowError(f"{op.describe()}: batch_dims {b.option('BatchDims')} is not supported (only 0)")
    same_quant(b)
    axis = _axis(b, b.option("Axis") or 0, len(b.tensor(0).shape))
    b.finish(b.add("Gather", [b.value(0), b.value(1)], {"axis": axis}))
