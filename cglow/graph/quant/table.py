"""Unary ops on 8-bit quantized values as tables: the op runs at compile time on the 256 dequantized
inputs (onnx's reference evaluator, float32 as onnxruntime computes it) and each result is quantized; at run
time one load per element (a Gather, lower/ops/quant.py)."""
from __future__ import annotations

import numpy as np
from onnx import helper

from ..edit import Site
from ..evaluate_node import evaluate_node
from ..ir import Node
from .params import QParams, quantize

def codes(dtype: np.dtype) -> np.ndarray:
    """The 256 values of an 8-bit type in table order: a Gather index, negative ones counted from the end."""
    index = np.arange(256)
    return index - 256 * (index >= 128) if np.dtype(dtype) == np.int8 else index


def _apply(site: Site, op: Node, real: np.ndarray) -> np.ndarray | None:
    if op.op == "DequantizeLinear":
        return real
    feeds = {"x": real}
    inputs = ["x"]
    for i, name in enumerate(op.inputs[1:], 1):
        value = site.const(name) if name else None
        if name and value is None:
            return None
        inputs.append(f"in{i}" if name else "")
        if name:
            feeds[f"in{i}"] = value
    node = helper.make_node(op.op, inputs, ["y"], **op.attrs)
    try:
        (result,) = evaluate_node(node, feeds, site.graph.opset)
    except Exception:  # an op or attribute the evaluator does not take: the op stays in float
        return None
    return np.asarray(result, np.float32)


def table(site: Site, op: Node, x: QParams, out: QParams) -> np.ndarray | None:
    """The table of quantize(op(dequantize(q))) over q in table order, of the output's type."""
    q = codes(x.dtype)
    real = ((q - int(x.zero[0])) * np.float32(x.scale[0])).astype(np.float32)
    result = _apply(site, op, real)
    return None if result is None or result.shape != real.shape else quantize(result, out)
