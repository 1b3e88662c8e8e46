"""A DequantizeLinear of integer weights that a data-movement op reads: the op applied to the integers now,
the per-channel parameters following their axis to where the op moves it. tf2onnx writes a TFLite layer's
weights so (FULLY_CONNECTED's [N, K] matrix through a Transpose to MatMul's [K, N], CONV_2D's OHWI kernel
through one to Conv's OIHW) and folds the op into the constant with its own optimizer, except where that
declines (a DequantizeLinear with several readers) or is not run: the integer folds then find their weights
dequantized, as they take them."""
from __future__ import annotations

import numpy as np
from onnx import helper

from ..edit import Site
from ..evaluate_node import evaluate_node
from ..ir import Graph, Node
from .params import dequantized


def _moved(site: Site, op: Node, data: np.ndarray) -> np.ndarray:
    """The op's output for `data` as its data input, its other inputs the graph's constants."""
    inputs = ["data"] + [f"in{i}" if name else "" for i, name in enumerate(op.inputs[1:], 1)]
    feeds = {"data": data, **{f"in{i}": site.const(name) for i, name in enumerate(op.inputs[1:], 1) if name}}
    (result,) = evaluate_node(helper.make_node(op.op, inputs, ["out"], **op.attrs), feeds, site.graph.opset)
    return np.asarray(result)


def _channels(moved: np.ndarray) -> tuple[int | None, np.ndarray]:
    """The axis of the moved channel indices and the index at each place along it (None: one channel left
    everywhere), or (-1, ...) where the indices vary along several axes."""
    varying = [a for a in range(moved.ndim) if not np.all(moved == moved.take([0], axis=a))]
    if len(varying) > 1:
        return -1, moved
    if not varying:
        return None, moved.reshape(-1)[:1]
    axis = varying[0]
    return axis, moved[tuple(slice(None) if a == axis else 0 for a in range(moved.ndim))]


def moved_weights(site: Site, op: Node) -> Graph | None:
    """`op`: a data-movement op with one output."""
    d = dequantized(site, op.inputs[0])
    q = site.const(d.source) if d else None
    if q is None or any(name and site.const(name) is None for name in op.inputs[1:]) or op.inputs[0] in op.inputs[1:]:
        return None
    try:
        ints = _moved(site, op, q)
        if d.p.per_tensor:
            axis, index = None, np.zeros(1, np.int64)
        else:
            shape = [1] * q.ndim
            shape[d.p.axis] = -1
            axis, index = _channels(_moved(site, op, np.broadcast_to(np.arange(q.shape[d.p.axis]).reshape(shape),
                                                                     q.shape)))
    except Exception:  # an op or attribute the evaluator does not take: the op stays as it is
        return None
    if axis == -1:
        return None
    taken: set[str] = set()
    consts = {site.fresh(f"{op.outputs[0]}/{what}", taken): value for what, value in
              (("quantized", ints), ("scale", d.p.scale[index].astype(np.float32)),
               ("zero_point", d.p.zero[index].astype(q.dtype)))}
    names = tuple(consts)
    if axis is None:  # one channel: per-tensor parameters, scalars
        consts = {n: v.reshape(()) if n != names[0] else v for n, v in consts.items()}
    node = Node("DequantizeLinear", op.name, names, op.outputs, {} if axis is None else {"axis": axis})
    return site.rewritten([(op, node)], consts)
