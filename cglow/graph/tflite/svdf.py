"""SVDF, the streaming layer of keyword spotters: each invocation adds one frame to a memory of the last few,
kept in a variable tensor between invocations (Build.assign makes it the graph's state).

Per batch row, the frame's feature projection (weights_feature [filters, input]) is shifted into the memory
[filters, memory] as its newest column, the oldest dropping out; each filter's memory is weighed by
weights_time [filters, memory] and summed, and each unit sums its `rank` filters, plus the bias. LiteRT shifts
after the sums and keeps a zero newest column in between; the outputs are the same, and the state here is
the window itself. Float32 operators become ONNX nodes; 8-bit ones compute as TFLite's integer SVDF
(reference_ops::EvalIntegerSVDF, ported): int8 input, int16 state and time weights, int32 bias, the feature
projection requantized into the state's int16 and the sums into the int8 output, each by
MultiplyByQuantizedMultiplier (rounding "tflite") of effective scales formed in float32 as its Prepare does."""
from __future__ import annotations

import numpy as np
from onnx import helper

from ...errors import CglowError
from ..ir import TensorType
from . import arith
from .build import Build, float_activation, translator

I16 = np.iinfo(np.int16)


def _scale(b: Build, i: int) -> float:
    q = b.quant(i)
    if q.axis is not None or np.any(q.zero):
        raise CglowError(f"{b.op.describe()}: input {i} ('{b.tensor(i).name}') must be quantized per tensor with "
                         f"zero point 0, as TFLite's 8-bit SVDF takes it")
    return float(q.scale[0])


def _window(b: Build, newest: str, batch: int, filters: int, memory: int) -> str:
    """The memory [batch, filters, memory] with `newest` [batch, filters] shifted in last; it becomes the state."""
    state = b.state(4)
    column = b.add("Reshape", [newest, b.shape_const(batch, filters, 1)])
    if memory == 1:
        window = column
    else:
        memories = b.add("Reshape", [state, b.shape_const(batch, filters, memory)])
        older = b.add("Slice", [memories, b.shape_const(1), b.shape_const(memory), b.shape_const(2)])
        window = b.add("Concat", [older, column], {"axis": 2})
    b.assign(4, b.add("Reshape", [window, b.shape_const(batch, filters * memory)]))
    return window


def _time_sums(b: Build, window: str, weights: np.ndarray, units: int, dtype) -> str:
    """Each unit's sum over its filters' memories weighed by weights_time: [batch, units], in `dtype`."""
    batch, filters, memory = b.types[window].shape
    per_unit = b.add("Reshape", [window, b.shape_const(batch, units, filters // units * memory)])
    if b.types[per_unit].dtype != dtype:
        per_unit = b.add("Cast", [per_unit], {"to": helper.np_dtype_to_tensor_dtype(np.dtype(dtype))})
    weighed = b.add("Mul", [per_unit, b.const("weights_time", weights.reshape(units, -1).astype(dtype))])
    return b.add("ReduceSum", [weighed, b.shape_const(2)], {"keepdims": 0})


@translator("SVDF")
def _svdf(b: Build, op) -> None:
    features, times = b.weights(1), b.weights(2)
    x, rank = b.tensor(0), b.option("Rank") or 0
    if features.ndim != 2 or times.ndim != 2 or times.shape[0] != features.shape[0]:
        raise CglowError(f"{op.describe()}: weights_feature {list(features.shape)} and weights_time "
                         f"{list(times.shape)} must be [filters, input] and [filters, memory]")
    (filters, size), memory = features.shape, times.shape[1]
    if len(x.shape) != 2 or x.shape[1] != size:
        raise CglowError(f"{op.describe()}: the input must be [batch, {size}], it is {list(x.shape)}")
    if rank <= 0 or filters % rank:
        raise CglowError(f"{op.describe()}: rank {rank} does not divide the {filters} filters")
    batch, units = x.shape[0], filters // rank
    if b.tensor(4).shape != (batch, filters * memory):
        raise CglowError(f"{op.describe()}: the state must be [{batch}, {filters * memory}], it is "
                         f"{list(b.tensor(4).shape)}")
    if x.dtype == np.float32 and features.dtype != np.float32:
        raise CglowError(f"{op.describe()}: hybrid SVDF (float input, {features.dtype.name} weights) is not "
                         f"supported")
    if b.quantized():
        return _int8_svdf(b, batch, filters, memory, units)
    feature = b.add("Gemm", [b.value(0), b.value(1)], {"transB": 1})
    sums = _time_sums(b, _window(b, feature, batch, filters, memory), times, units, np.float32)
    if b.has(3):
        sums = b.add("Add", [sums, b.value(3)])
    b.finish(float_activation(b, sums))


def _int8_svdf(b: Build, batch: int, filters: int, memory: int, units: int) -> None:
    """TFLite's integer SVDF. LiteRT's kernel requires the fused activation RELU and then clamps only to the int8
    range (measured, as its source reads): NONE and RELU both compute so, other activations are refused."""
    if b.activation() not in ("NONE", "RELU"):
        raise CglowError(f"{b.op.describe()}: 8-bit SVDF takes the fused activation RELU (TFLite's kernel then "
                         f"clamps to the int8 range alone), not {b.activation()}")
    kinds = {0: np.int8, 1: np.int8, 2: np.int16, 4: np.int16, -1: np.int8}
    for i, dtype in kinds.items():
        if b.tensor(i).dtype != dtype:
            raise CglowError(f"{b.op.describe()}: TFLite's 8-bit SVDF takes an int8 input, weights_feature and "
                             f"output, int16 weights_time and state; '{b.tensor(i).name}' is "
                             f"{b.tensor(i).dtype.name}")
    f32 = np.float32
    (sx, zx), (sy, zy) = ((float(b.quant(i).scale[0]), int(b.quant(i).zero[0])) for i in (0, -1))
    sf, st, ss = _scale(b, 1), _scale(b, 2), _scale(b, 4)
    m1, s1 = arith.quantize_multiplier(float(f32(sx) * f32(sf) / f32(ss)))
    m2, s2 = arith.quantize_multiplier(float(f32(ss) * f32(st) / f32(sy)))
    tflite = dict(rounding="tflite", lo=int(I16.min), hi=int(I16.max), y_zero=0, mult=m1, shift=s1)
    feature = b.add("IntGemm", [b.value(0), b.value(1), b.const("bias", np.zeros(filters, np.int32))],
                    {"transA": 0, "transB": 1, "a_zero": zx, "b_zero": 0, **tflite},
                    out_type=TensorType(np.dtype(np.int16), (batch, filters)))
    sums = _time_sums(b, _window(b, feature, batch, filters, memory), b.weights(2), units, np.int32)
    if b.has(3):
        if b.tensor(3).dtype != np.int32:
            raise CglowError(f"{b.op.describe()}: the bias must be int32, it is {b.tensor(3).dtype.name}")
        sums = b.add("Add", [sums, b.value(3)])
    attrs = dict(rounding="tflite", lo=-128, hi=127, y_zero=zy, mult=m2, shift=s2, a_zero=0, b_zero=0)
    b.finish(b.add("IntMul", [sums, b.const("one", np.array(1, np.int32))], attrs,
                   out_type=TensorType(np.dtype(np.int8), (batch, units))))
