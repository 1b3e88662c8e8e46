"""Averages of 8-bit values between a DequantizeLinear and a QuantizeLinear as IntAvgPool, the int32 sum of
each window requantized by the input's scale over the output's and the count: AveragePool and
GlobalAveragePool, and ReduceMean (tf2onnx writes TFLite's MEAN so, a Conv1D network's global average pool
among them), whose reduced axes become a window as graph/tflite/tensor.py's MEAN makes them."""
from __future__ import annotations

import math

import numpy as np

from ..geometry import reduced_as_window
from ..ir import Node, TensorType
from .params import QParams, dequantized, requant_attrs


def _attrs(x: QParams, out: QParams, kernel: tuple[int, ...], strides: tuple[int, ...], bounds) -> dict:
    count = math.prod(kernel)
    return {"kernel_shape": kernel, "strides": strides, "x_zero": int(x.zero[0]),
            **requant_attrs(out, np.array([x.scale[0] / out.scale[0] / count]), bounds)}


def int_average(b, op: Node, out: QParams, bounds) -> Node | None:
    """GlobalAveragePool, or an AveragePool whose windows all lie inside the input (each the same count);
    `b`: fold.py's builder state."""
    x = dequantized(b.site, op.inputs[0])
    if x is None or not x.p.per_tensor:
        return None
    shape = b.site.shape(x.source)
    if op.op == "GlobalAveragePool":
        kernel, strides = shape[2:], (1,) * (len(shape) - 2)
    else:
        kernel = tuple(op.attr("kernel_shape"))
        strides = tuple(op.attr("strides", (1,) * len(kernel)))
        if any(op.attr("pads", (0,))) or op.attr("auto_pad", "NOTSET") not in ("NOTSET", "VALID") or \
                any(d != 1 for d in op.attr("dilations", (1,))) or \
                (op.attr("ceil_mode", 0) and any((n - k) % s for n, k, s in zip(shape[2:], kernel, strides))):
            return None
    return Node("IntAvgPool", op.name, (x.source,), (), _attrs(x.p, out, kernel, strides, bounds))


def _axes(b, op: Node, rank: int) -> list[int] | None:
    """ReduceMean's axes, sorted (all when it names none); None when they are not constant or it reduces
    nothing."""
    if b.site.graph.opset >= 18:
        name = op.inputs[1] if len(op.inputs) > 1 else ""
        axes = b.site.const(name) if name else None
        if name and axes is None or (axes is None or axes.size == 0) and op.attr("noop_with_empty_axes", 0):
            return None
    else:
        axes = op.attr("axes")
    axes = range(rank) if axes is None or len(axes) == 0 else np.asarray(axes).reshape(-1)
    return sorted({int(a) % rank for a in axes})


def int_mean(b, op: Node, out: QParams, bounds) -> tuple[list[Node], Node] | None:
    """ReduceMean: the kept axes, then the reduced ones (a Transpose), as [1, kept, reduced...] (a Reshape),
    an IntAvgPool over the reduced ones, and a Reshape to the output's shape."""
    x = dequantized(b.site, op.inputs[0])
    shape = b.site.shape(x.source) if x else ()
    axes = _axes(b, op, len(shape)) if x and x.p.per_tensor and shape else None
    if axes is None:
        return None
    perm, rows = reduced_as_window(shape, axes)
    window = rows[2:]
    value, now, extra = x.source, shape, []
    if perm is not None:
        now = tuple(shape[a] for a in perm)
        moved = b.value(f"{op.name}/moved", TensorType(x.p.dtype, now))
        extra.append(Node("Transpose", f"{op.name}/transpose", (value,), (moved,), {"perm": perm}))
        value = moved
    if now != rows:
        flat = b.value(f"{op.name}/rows", TensorType(x.p.dtype, rows))
        extra.append(Node("Reshape", f"{op.name}/rows", (value, b.const(f"{op.name}/rows", np.array(rows, np.int64))),
                          (flat,)))
        value = flat
    pooled = b.value(f"{op.name}/pooled", TensorType(out.dtype, rows[:2] + (1,) * len(window)))
    extra.append(Node("IntAvgPool", op.name, (value,), (pooled,), _attrs(x.p, out, window, (1,) * len(window), bounds)))
    result = b.const(f"{op.name}/shape", np.array(b.site.shape(op.outputs[0]), np.int64))
    return extra, Node("Reshape", f"{op.name}/reshape", (pooled, result), ())
