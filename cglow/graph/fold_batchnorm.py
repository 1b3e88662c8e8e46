"""BatchNormalization folded into the weights and bias of the Conv, ConvTranspose, Gemm or MatMul before it.

Inference BatchNormalization is y = x * s + t per channel (axis 1), with s = scale / sqrt(var + epsilon) and
t = bias - mean * s. When x is the output of a linear layer with constant weights, read by nothing else, s
scales the weights along the output channel and t joins the bias: one node and no extra pass over the
data. An Add of a per-channel constant between them (MatMul + Add as exporters write a dense layer) goes
into the bias too. The new constants are computed in float64 and stored as float32."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .edit import Site, rewrite_each
from .ir import Graph, Node

F32 = np.dtype(np.float32)


def fold_batchnorm(graph: Graph) -> Graph:
    return rewrite_each(graph, _fold)


def _fold(site: Site, bn: Node) -> Graph | None:
    if bn.op != "BatchNormalization" or any(bn.outputs[1:]):
        return None
    params = [site.const(n) for n in bn.inputs[1:5]]
    if any(p is None for p in params):
        return None
    gamma, beta, mean, var = (p.astype(np.float64) for p in params)
    var = var + np.float64(bn.attr("epsilon", 1e-5))
    if not (var > 0).all():
        return None
    scale = gamma / np.sqrt(var)
    shift = beta - mean * scale
    x = bn.inputs[0]
    layer = site.producer.get(x)
    if layer is None or site.sole_reader(x) is not bn:
        return None
    dropped = [bn]
    if layer.op == "Add":
        split = _per_channel_add(site, layer)
        if split is None:
            return None
        dropped.append(layer)
        layer, bias = split
        shift = shift + bias * scale
    folded = _scaled(site, layer, scale, shift, f"{bn.name}/folded")
    if folded is None:
        return None
    node, consts = folded
    changes = [(layer, replace(node, outputs=(bn.outputs[0],)))] + [(n, None) for n in dropped]
    return site.rewritten(changes, consts)


def _per_channel_add(site: Site, add: Node) -> tuple[Node, np.ndarray] | None:
    """(the layer, the bias per channel) when the Add adds a constant that varies along axis 1 at most to
    the output of a layer that nothing else reads and that has the Add's shape."""
    out_shape = site.shape(add.outputs[0])
    for value, const in ((add.inputs[0], add.inputs[1]), (add.inputs[1], add.inputs[0])):
        c = site.const(const)
        layer = site.producer.get(value)
        if c is None or c.dtype != F32 or layer is None or site.sole_reader(value) is not add or \
                site.shape(value) != out_shape:
            continue
        dims = (1,) * (len(out_shape) - c.ndim) + c.shape
        if all(d == 1 for i, d in enumerate(dims) if i != 1):
            return layer, np.broadcast_to(c.reshape(-1).astype(np.float64), (out_shape[1],))
    return None


def _scaled(site: Site, layer: Node, scale: np.ndarray, shift: np.ndarray,
            base: str) -> tuple[Node, dict[str, np.ndarray]] | None:
    """The layer computing its output times `scale` plus `shift` along axis 1, and its new constants; None
    when its weights are not constant or other layers share them (the copy would grow the flash)."""
    weights = site.const(layer.inputs[1]) if len(layer.inputs) > 1 else None
    bias_name = layer.inputs[2] if len(layer.inputs) > 2 else ""
    bias = site.const(bias_name)
    if weights is None or weights.dtype != F32 or len(site.readers[layer.inputs[1]]) != 1 or \
            (bias_name and bias is None):
        return None
    w = weights.astype(np.float64)
    b = np.float64(0.0) if bias is None else bias.astype(np.float64)
    if layer.op == "Conv":  # W [M, C/group, k...]
        w = w * scale.reshape((-1,) + (1,) * (w.ndim - 1))
    elif layer.op == "ConvTranspose":  # W [C, M/group, k...]: output channel g * M/group + j is W[g's C, j]
        group = layer.attr("group", 1)
        c, per_group = w.shape[:2]
        w = (w.reshape((group, c // group, per_group, -1)) * scale.reshape((group, 1, per_group, 1))).reshape(w.shape)
    elif layer.op == "Gemm":  # alpha * A' B' + beta * C, B' [K, N]
        w = w * (scale[:, None] if layer.attr("transB", 0) else scale[None, :])
        b = b * layer.attr("beta", 1.0)
    elif layer.op == "MatMul" and len(site.shape(layer.inputs[0])) == 2 and w.ndim == 2:
        w = w * scale[None, :]  # A [M, K] x W [K, N] becomes Gemm(A, W, bias)
    else:
        return None
    b = b * scale + shift
    limit = np.finfo(F32).max
    if not ((np.abs(w) <= limit).all() and (np.abs(b) <= limit).all()):  # x * inf is no sum of products by inf
        return None
    taken: set[str] = set()
    consts = {site.fresh(f"{base}_weights", taken): w.astype(F32), site.fresh(f"{base}_bias", taken): b.astype(F32)}
    attrs = {k: v for k, v in layer.attrs.items() if k != "beta"}
    op = "Gemm" if layer.op == "MatMul" else layer.op
    return replace(layer, op=op, inputs=(layer.inputs[0], *consts), attrs=attrs), consts
