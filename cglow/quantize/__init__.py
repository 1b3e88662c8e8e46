"""Post-training quantization: a float32 ONNX model and calibration inputs to a standard QDQ ONNX model
(QuantizeLinear/DequantizeLinear pairs around float ops, opset 13 or later) that onnxruntime runs as it is.

The steps: prepare.py (BatchNorm folded, Identity and Dropout dropped, every tensor typed), calibrate.py (the
float model run on the samples, a range per tensor by min/max, percentile or entropy), qdq.py (int8 weights
per channel, int32 biases, int8 activations, the pairs placed)."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from ..errors import CglowError
from .calibrate import METHODS, check_calibration, check_method, collect_ranges, load_calibration
from .prepare import prepare
from .qdq import plan_qdq, write_qdq

__all__ = ["METHODS", "Quantized", "load_calibration", "quantize", "quantize_model", "weight_bytes"]


@dataclass(frozen=True)
class Quantized:
    model: onnx.ModelProto           # the QDQ model
    quantized_ops: tuple[str, ...]   # op type of each node computed between DequantizeLinear and QuantizeLinear
    float_ops: tuple[str, ...]       # op type of each node kept in float (after BatchNorm folding)


def quantize(model: onnx.ModelProto, calib: dict[str, np.ndarray], method: str = "minmax",
             percentile: float = 99.99, per_channel: bool = True, keep_float: Iterable[str] = ()) -> Quantized:
    """The QDQ model of `model` and what was quantized; see quantize_model."""
    check_method(method, percentile)
    keep = frozenset(keep_float)
    known = {n.op_type for n in model.graph.node} | {n.name for n in model.graph.node}
    if keep - known:
        raise CglowError(f"keep float {', '.join(sorted(map(repr, keep - known)))}: no op type or node of that "
                         f"name in the model")
    calib = check_calibration(calib, model)
    prepared = prepare(model, keep)
    plan = plan_qdq(prepared, keep)
    ranges = collect_ranges(prepared, calib, plan.calibrated, method, percentile)
    nodes = prepared.graph.node
    return Quantized(write_qdq(prepared, plan, ranges, per_channel),
                     tuple(n.op_type for i, n in enumerate(nodes) if i in plan.quantized),
                     tuple(n.op_type for i, n in enumerate(nodes) if i not in plan.quantized))


def quantize_model(model: onnx.ModelProto, calib: dict[str, np.ndarray], method: str = "minmax",
                   percentile: float = 99.99, per_channel: bool = True,
                   keep_float: Iterable[str] = ()) -> onnx.ModelProto:
    """A standard QDQ model of the float model `model`.

    calib maps each graph input's name to S samples stacked on a new leading axis (shape (S, *input shape)),
    the input's element type. method: "minmax", "percentile" (of |x|, `percentile` %) or "entropy" (KL
    divergence, 2048-bin histogram). per_channel=False quantizes weights per tensor. keep_float: op types or
    node names computed in float besides those cglow does not quantize."""
    return quantize(model, calib, method, percentile, per_channel, keep_float).model


def weight_bytes(model: onnx.ModelProto) -> int:
    """The bytes of the model's initializers."""
    return sum(int(np.prod(t.dims)) * helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
               for t in model.graph.initializer)
