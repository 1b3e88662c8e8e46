"""Elementwise operators: arithmetic, the RELU family, QUANTIZE and DEQUANTIZE (the other activations are in
activations.py). Float32 ones become the ONNX op; 8-bit ones cglow's integer ops with TFLite's arithmetic:
IntAdd and IntMul (rounding "tflite"), and for a function of one 8-bit input, a table of its 256 results
computed here as TFLite's reference kernel computes each (IntTable). DEQUANTIZE of a float16 constant (a model
whose weights are stored at half size) is that constant widened to float32 at compile time."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ...errors import CglowError
from ..ir import TensorType
from . import arith
from .build import Build, activation_bounds, float_activation, translator

_FLOAT_OPS = {"ADD": "Add", "SUB": "Sub", "MUL": "Mul"}
LEFT_SHIFT = 20  # ADD and SUB scale 8-bit inputs by 2^20 before their factors


def one_scale(b: Build, i: int) -> tuple[float, int]:
    """The scale and zero point of tensor i (an input, or -1 - j for output j), which must be per tensor."""
    q = b.quant(i)
    if q.axis is not None:
        raise CglowError(f"{b.op.describe()}: input {i} is quantized per channel; the operator takes one scale")
    return float(q.scale[0]), int(q.zero[0])


@translator("ADD", "SUB", "MUL")
def _binary(b: Build, op) -> None:
    if not b.quantized():
        out = float_activation(b, b.add(_FLOAT_OPS[op.op], [b.value(0), b.value(1)]))
        return b.finish(out)
    (sa, za), (sb, zb), (sy, zy) = one_scale(b, 0), one_scale(b, 1), one_scale(b, -1)
    lo, hi = activation_bounds(b, b.quant(-1), b.tensor(-1).dtype)
    attrs = dict(a_zero=za, b_zero=zb, y_zero=zy, lo=lo, hi=hi, rounding="tflite")
    f32 = np.float32
    if op.op == "MUL":
        mult, shift = arith.quantize_multiplier(float(f32(sa) * f32(sb) / f32(sy)))  # Prepare's float arithmetic
        attrs.update(mult=mult, shift=shift)
    else:  # LiteRT's Prepare: the scales' ratios to twice the larger one (float32 arithmetic where it has it)
        twice = float(f32(2) * max(f32(sa), f32(sb)))
        for key, s in (("a", sa), ("b", sb)):
            attrs[f"{key}_mult"], attrs[f"{key}_shift"] = arith.quantize_multiplier(float(f32(s)) / twice)
        mult, shift = arith.quantize_multiplier(twice / float(f32(1 << LEFT_SHIFT) * f32(sy)))
        attrs.update(mult=mult, shift=shift, left=LEFT_SHIFT, subtract=op.op == "SUB")
    out_type = TensorType(b.tensor(-1).dtype, np.broadcast_shapes(b.tensor(0).shape, b.tensor(1).shape))
    b.finish(b.add("IntAdd" if op.op != "MUL" else "IntMul", [b.value(0), b.value(1)], attrs, out_type=out_type))


def table(b: Build, values: Callable[[np.ndarray], np.ndarray]) -> None:
    """The output as a table of the input's 256 values (indexed by the input's bits, as IntTable reads it)."""
    dtype = b.tensor(-1).dtype
    x = np.arange(256).astype(np.uint8).view(b.tensor(0).dtype).astype(np.int64)
    table = b.const("table", values(x).astype(dtype))
    b.finish(b.add("IntTable", [b.value(0), table], out_type=TensorType(dtype, b.tensor(0).shape)))


def requantized(b: Build, lo: int, hi: int, ratio=np.float64):
    """x -> TFLite's Requantize / ReluX: the output's zero point plus x less the input's, times the ratio of
    the scales as a fixed-point factor, clamped to [lo, hi]. The scales are divided in `ratio`: QUANTIZE's
    Prepare divides them as doubles, ReluPrepare as floats (a multiplier apart in the last bits, which moves
    a rounding now and then)."""
    (sx, zx), (sy, zy) = one_scale(b, 0), one_scale(b, -1)
    mult, shift = arith.quantize_multiplier(float(ratio(sx) / ratio(sy)))
    return lambda x: np.clip(zy + arith.scale(x - zx, mult, shift), lo, hi)


@translator("RELU", "RELU6", "RELU_N1_TO_1")
def _relu(b: Build, op) -> None:
    """The fused activation's own operators: a Relu or Clip on floats; on 8-bit values ReluX, the input
    requantized and clamped to the range's integer bounds."""
    if not b.quantized():
        return b.finish(float_activation(b, b.value(0), op.op))
    table(b, requantized(b, *activation_bounds(b, b.quant(-1), b.tensor(-1).dtype, op.op), np.float32))


@translator("QUANTIZE")
def _quantize(b: Build, op) -> None:
    dtype = b.tensor(-1).dtype
    info = np.iinfo(dtype)
    if b.tensor(0).dtype == np.float32:
        s, z = one_scale(b, -1)
        scale, zero = b.const("scale", np.array(s, np.float32)), b.const("zero", np.array(z, dtype))
        return b.finish(b.add("QuantizeLinear", [b.value(0), scale, zero], {"rounding": "tflite"},
                              out_type=TensorType(dtype, b.tensor(0).shape)))
    if b.tensor(0).dtype.itemsize != 1:
        raise CglowError(f"{op.describe()}: requantizing {b.tensor(0).dtype.name} is not supported")
    table(b, requantized(b, int(info.min), int(info.max)))


@translator("DEQUANTIZE")
def _dequantize(b: Build, op) -> None:
    if b.tensor(0).dtype == np.float16:
        return _float16(b, op)
    q = b.quant(0)
    axis = {} if q.axis is None else {"axis": q.axis}
    scale = b.const("scale", q.scale.astype(np.float32) if q.axis is not None else np.array(q.scale[0], np.float32))
    zero_data = q.zero if q.axis is not None else np.array(q.zero[0])
    zero = b.const("zero", zero_data.astype(b.tensor(0).dtype))
    b.finish(b.add("DequantizeLinear", [b.value(0), scale, zero], axis))


def _float16(b: Build, op) -> None:
    """A float16 constant (weights stored at half size) widened to float32 now: its output is that constant. Into a
    variable tensor, zeros are the state's value before the first run (LiteRT dequantizes a constant once, and the
    operators after update the state from run to run)."""
    t = b.tensor(0)
    if t.data is None:
        raise CglowError(f"{op.describe()}: '{t.name}' is a float16 activation; cglow computes in float32 and reads "
                         f"float16 constants only")
    out = b.tensor(-1)
    if out.dtype != np.float32 or out.shape != t.shape:
        raise CglowError(f"{op.describe()}: the file declares its output '{out.name}' "
                         f"{TensorType(out.dtype, out.shape)}, the float16 constant widens to "
                         f"{TensorType(np.dtype(np.float32), t.shape)}")
    if out.variable:  # a state's first value (an LSTM's, in a converted float16 file): its state starts at zero
        if np.any(t.data):
            raise CglowError(f"{op.describe()}: the variable tensor '{out.name}' starts at non-zero values; cglow "
                             f"starts every variable at zero, as LiteRT resets it")
        return
    b.consts[b.out()] = t.data.astype(np.float32)
    b.types[b.out()] = TensorType(np.dtype(np.float32), t.shape)
