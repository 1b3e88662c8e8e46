"""BatchNormalization folded into the weights and bias of the Conv, ConvTranspose, Gemm or MatMul before it.

Inference BatchNormalization is y = x * s + t per channel (axis 1), with s = scale / sqrt(var + epsilon) and
t = bias - mean * s. When x is the output of a linear layer with constant weights, read by nothing else, s
scales the weights along the output channel and t joins the bias: one node and no extra pass over the
data. An Add of a per-channel constant between them (MatMul + Add as exporters write a dense layer) goes
into the bias too. The new constants are computed in float64 and stored as float32.

affine() and scaled() are the one BatchNorm fold: the quantizer's preparation (cglow/quantize/prepare.py) takes
them too, and the integer BatchNormalization (graph/quant/fold.py) takes affine()."""
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
    found = affine(*params, bn.attr("epsilon", 1e-5))
    if found is None:
        return None
    scale, shift = found
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


def affine(gamma, beta, mean, var, epsilon: float) -> tuple[np.ndarray, np.ndarray] | None:
    """BatchNormalization's y = x * s + t per channel in float64: s = gamma / sqrt(var + epsilon), t = beta -
    mean * s; None where var + epsilon is not positive."""
    gamma, beta, mean, var = (np.asarray(p, np.float64).reshape(-1) for p in (gamma, beta, mean, var))
    var = var + np.float64(epsilon)
    if not (var > 0).all():
        return None
    scale = gamma / np.sqrt(var)
    return scale, beta - mean * scale


def scaled(op: str, attrs, w: np.ndarray, b, scale: np.ndarray, shift: np.ndarray,
           x_rank: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The weights and bias (float64) with which layer `op` (attributes `attrs`, weights w, bias b or 0, input
    of rank x_rank) computes its output times `scale` plus `shift` along its output channels: a Gemm's alpha
    joins the weights and its beta the bias (the layer drops both); a MatMul's becomes a Gemm's. None for
    another op, or where a value leaves float32's range (x * inf is no sum of products by inf)."""
    w, b = w.astype(np.float64), np.asarray(b, np.float64)
    if op == "Conv":  # W [M, C/group, k...]
        w = w * scale.reshape((-1,) + (1,) * (w.ndim - 1))
    elif op == "ConvTranspose":  # W [C, M/group, k...]: output channel g * M/group + j is W[g's C, j]
        group = attrs.get("group", 1)
        c, per_group = w.shape[:2]
        w = (w.reshape((group, c // group, per_group, -1)) * scale.reshape((group, 1, per_group, 1))).reshape(w.shape)
    elif op == "Gemm" and w.ndim == 2:  # alpha * A' B' + beta * C, B' [K, N]
        w = w * attrs.get("alpha", 1.0) * (scale[:, None] if attrs.get("transB", 0) else scale[None, :])
        b = b * attrs.get("beta", 1.0)
    elif op == "MatMul" and x_rank == 2 and w.ndim == 2:  # A [M, K] x W [K, N] becomes Gemm(A, W, bias)
        w = w * scale[None, :]
    else:
        return None
    b = b * scale + shift
    limit = np.finfo(F32).max
    return (w, b) if (np.abs(w) <= limit).all() and (np.abs(b) <= limit).all() else None


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
    folded = scaled(layer.op, layer.attrs, weights, 0.0 if bias is None else bias, scale, shift,
                    len(site.shape(layer.inputs[0])))
    if folded is None:
        return None
    taken: set[str] = set()
    consts = {site.fresh(f"{base}_weights", taken): folded[0].astype(F32),
              site.fresh(f"{base}_bias", taken): folded[1].astype(F32)}
    attrs = {k: v for k, v in layer.attrs.items() if k not in ("alpha", "beta")}
    op = "Gemm" if layer.op == "MatMul" else layer.op
    return replace(layer, op=op, inputs=(layer.inputs[0], *consts), attrs=attrs), consts
