"""Operators that move values or pool them: RESHAPE, SQUEEZE, EXPAND_DIMS, CONCATENATION, PAD, PADV2,
TRANSPOSE, TILE, MAX_POOL_2D, AVERAGE_POOL_2D, MEAN and REDUCE_PROD; and SHAPE, a constant. On 8-bit values
those that only move them need the output's scale and zero point to be the input's, as TFLite's converter writes
them."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from ..geometry import reduced_as_window
from ..ir import TensorType
from .arith import quantize_multiplier
from .build import TO_NCHW, TO_NHWC, Build, activation_bounds, float_activation, translator, window_pads
from .elementwise import one_scale


def same_quant(b: Build, inputs=(0,), outputs: int = 1) -> None:
    """8-bit values move unchanged: every input shares each output's scale and zero point."""
    for o in range(outputs):
        out = b.tensor(-1 - o).quant
        if out is None:
            continue
        for i in inputs:
            q = b.tensor(i).quant
            if q is None or q.axis is not None or not np.array_equal(q.scale, out.scale) or \
                    not np.array_equal(q.zero, out.zero):
                raise CglowError(f"{b.op.describe()}: input {i} and output {o} have different scales or zero "
                                 f"points (TFLite's converter gives them the same)")


@translator("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def _reshape(b: Build, op) -> None:
    same_quant(b)
    b.finish(b.add("Reshape", [b.value(0), b.shape_const(*_new_shape(b, op))]))


def _new_shape(b: Build, op) -> tuple[int, ...]:
    """The output's shape as LiteRT computes it from the input's (the file's may hold placeholders): a RESHAPE's
    from its shape input (one -1 standing for the rest) where that is known now, else the file's."""
    shape = b.tensor(0).shape
    if op.op == "EXPAND_DIMS":
        axis = int(b.constant(1, "axis").reshape(-1)[0])
        if not -len(shape) - 1 <= axis <= len(shape):
            raise CglowError(f"{op.describe()}: axis {axis} is out of range for rank {len(shape)}")
        axis %= len(shape) + 1
        return shape[:axis] + (1,) + shape[axis:]
    if op.op == "SQUEEZE":
        listed = op.options is not None and op.options.SqueezeDimsLength()
        dims = {int(d) % len(shape) for d in op.options.SqueezeDimsAsNumpy()} if listed else \
            {a for a, d in enumerate(shape) if d == 1}
        if any(shape[a] != 1 for a in dims):
            raise CglowError(f"{op.describe()}: squeezes dimensions {sorted(dims)} of {list(shape)}, not all 1")
        return tuple(d for a, d in enumerate(shape) if a not in dims)
    new = b.known(1) if b.has(1) else None
    if new is None or new.ndim != 1:
        return b.tensor(-1).shape
    dims = [int(d) for d in new]
    count, rest = int(np.prod(shape, dtype=np.int64)), int(np.prod([d for d in dims if d != -1], dtype=np.int64))
    if dims.count(-1) == 1 and rest > 0:
        dims[dims.index(-1)] = count // rest
    if min(dims, default=0) < 0 or int(np.prod(dims, dtype=np.int64)) != count:
        raise CglowError(f"{op.describe()}: cannot reshape {list(shape)} to {[int(d) for d in new]}")
    return tuple(dims)


@translator("SHAPE")
def _shape(b: Build, op) -> None:
    """The input's shape: a constant (cglow's shapes are static), which the operators after compute on now."""
    b.finish(b.const("shape", np.array(b.tensor(0).shape, b.tensor(-1).dtype)))


@translator("CONCATENATION")
def _concat(b: Build, op) -> None:
    same_quant(b, range(len(op.inputs)))
    y = b.add("Concat", [b.value(i) for i in range(len(op.inputs))], {"axis": b.option("Axis")})
    if b.quantized():
        if b.activation() != "NONE":
            raise CglowError(f"{op.describe()}: a fused activation on 8-bit values is not supported")
        return b.finish(y)
    b.finish(float_activation(b, y))


@translator("PAD", "PADV2")
def _pad(b: Build, op) -> None:
    same_quant(b)
    widths = b.weights(1).astype(np.int64)
    image = widths.shape[0] == 4  # an NHWC image is padded as NCHW, so that a convolution after takes the pads
    if image:
        widths = widths[list(TO_NCHW)]
    x = b.transpose(b.value(0), TO_NCHW) if image else b.value(0)
    inputs = [x, b.const("pads", np.concatenate([widths[:, 0], widths[:, 1]]))]
    if b.has(2):
        inputs.append(b.value(2))
    elif b.quantized():  # TFLite pads 8-bit values with the zero point
        inputs.append(b.const("value", np.array(b.quant(0).zero[0], b.tensor(0).dtype)))
    y = b.add("Pad", inputs)
    b.finish(b.transpose(y, TO_NHWC) if image else y)


@translator("TILE")
def _tile(b: Build, op) -> None:
    same_quant(b)
    repeats = b.constant(1, "multiples").astype(np.int64).reshape(-1)
    b.finish(b.add("Tile", [b.value(0), b.const("repeats", repeats)]))


@translator("TRANSPOSE")
def _transpose(b: Build, op) -> None:
    same_quant(b)
    b.finish(b.transpose(b.value(0), tuple(int(p) for p in b.weights(1))))


@translator("MAX_POOL_2D", "AVERAGE_POOL_2D")
def _pool(b: Build, op) -> None:
    x = b.tensor(0)
    same_quant(b)
    kernel = (b.option("FilterHeight"), b.option("FilterWidth"))
    strides = (b.option("StrideH"), b.option("StrideW"))
    pads = window_pads(x.shape[1:3], kernel, strides, (1, 1), b.padding())
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": pads}
    xt = b.transpose(b.value(0), TO_NCHW)
    out = b.tensor(-1)
    nchw = TensorType(out.dtype, (out.shape[0], out.shape[3]) + out.shape[1:3])
    if not b.quantized():
        kind = "MaxPool" if op.op == "MAX_POOL_2D" else "AveragePool"
        y = float_activation(b, b.add(kind, [xt], attrs if kind == "MaxPool" else {**attrs, "count_include_pad": 0}))
        return b.finish(b.transpose(y, TO_NHWC))
    lo, hi = activation_bounds(b, b.quant(-1), out.dtype)
    if op.op == "MAX_POOL_2D":
        y = _clip(b, b.add("MaxPool", [xt], attrs), lo, hi)
    elif any(pads):  # each window divides by the taps inside the input; the activation clamps after it
        y = _clip(b, b.add("IntAvgPool", [xt], {**attrs, "x_zero": 0, "rounding": "tflite"}, out_type=nchw), lo, hi)
    else:
        y = b.add("IntAvgPool", [xt], {"kernel_shape": kernel, "strides": strides, "x_zero": 0, "lo": lo, "hi": hi,
                                       "rounding": "tflite"}, out_type=nchw)
    b.finish(b.transpose(y, TO_NHWC))


def _clip(b: Build, y: str, lo: int, hi: int) -> str:
    """y clamped to [lo, hi] when that is narrower than its type (an 8-bit fused activation)."""
    dtype = b.types[y].dtype
    if (lo, hi) == (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)):
        return y
    return b.add("Clip", [y, b.const("min", np.array(lo, dtype)), b.const("max", np.array(hi, dtype))])


def _axes(b: Build) -> list[int]:
    """A reduction's axes (input 1), sorted, without repeats."""
    rank = len(b.tensor(0).shape)
    return sorted({int(a) % rank for a in b.constant(1, "axes").reshape(-1)})


@translator("REDUCE_PROD")
def _reduce_prod(b: Build, op) -> None:
    if b.quantized():
        raise CglowError(f"{op.describe()}: a product of 8-bit values is not supported")
    attrs = {"axes": tuple(_axes(b)), "keepdims": int(bool(b.option("KeepDims")))}
    b.finish(b.add("ReduceProd", [b.value(0)], attrs))


@translator("MEAN")
def _mean(b: Build, op) -> None:
    shape = b.tensor(0).shape
    axes = _axes(b)
    keep = bool(b.option("KeepDims"))
    if not b.quantized():
        return b.finish(b.add("ReduceMean", [b.value(0)], {"axes": tuple(axes), "keepdims": int(keep)}))
    # the kept axes, then the reduced ones: an IntAvgPool's channels and window
    perm, rows = reduced_as_window(shape, axes)
    channels, window = rows[1], rows[2:]
    x = b.value(0) if perm is None else b.transpose(b.value(0), perm)
    if b.types[x].shape != rows:
        x = b.add("Reshape", [x, b.const("rows", np.array(rows, np.int64))])
    (sx, zx), (sy, zy) = (one_scale(b, i) for i in (0, -1))
    mult, shift = mean_multiplier(sx, sy, int(np.prod(window, dtype=np.int64)))
    info = np.iinfo(b.tensor(-1).dtype)
    y = b.add("IntAvgPool", [x], {"kernel_shape": window, "strides": (1,) * len(window), "x_zero": zx,
                                  "mult": np.array([mult], np.int32), "shift": np.array([shift], np.int32),
                                  "y_zero": zy, "lo": int(info.min), "hi": int(info.max), "rounding": "tflite"},
              out_type=TensorType(b.tensor(-1).dtype, (1, channels) + (1,) * len(window)))
    out_shape = [1 if a in axes else d for a, d in enumerate(shape) if keep or a not in axes]
    b.finish(b.add("Reshape", [y, b.shape_const(*out_shape)]))


def mean_multiplier(sx: float, sy: float, count: int) -> tuple[int, int]:
    """TFLite's QuantizedMeanOrSum: the multiplier of sx / sy takes 1 / count in, shifted up by floor(log2
    count) (at most 32, and no further than a total right shift of 31 allows) before the integer division."""
    mult, shift = quantize_multiplier(float(np.float64(sx) / np.float64(sy)))
    up = min(count.bit_length() - 1, 32, 31 + shift)
    return (mult << up) // count, shift - up
