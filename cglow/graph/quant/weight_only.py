"""Float matrix products by integer weights: a MatMul or Gemm of float values (not dequantized ones) by a per-tensor
or per-column DequantizeLinear of an integer constant (a weight-only quantized model: int8, int4 or uint4 weights,
float activations) becomes a ScaledGemm, the weights less their zero points kept as int8 constants and each column's
scale (and Gemm's alpha) applied to the float sum in its epilogue: x @ ((q - z) * s) = (x @ (q - z)) * s. One byte
of flash a weight rather than four, and int4 weights then stay two per byte (instr/narrow_weights.py); the
sums differ from those of the float weights by float32 rounding. Other weights (blocked, a zero point that leaves
values beyond int8, a batch of matrices) are dequantized at compile time (fold.py fold_dequantized_consts)."""
from __future__ import annotations

import numpy as np

from ..edit import Site, rewrite_each
from ..ir import Graph, Node
from .params import dequantized


def weight_only(graph: Graph) -> Graph:
    return rewrite_each(graph, _scaled)


def _scaled(site: Site, node: Node) -> Graph | None:
    """The ScaledGemm of a MatMul or Gemm of float values, not dequantized ones (a QDQ layer that fold.py left in
    float stays as it is, for `cglow info` to say why), by integer weights dequantized per tensor or per output
    column, their values less the zero points in int8; None where it is not one."""
    if node.op not in ("MatMul", "Gemm") or site.graph.types[node.inputs[0]].dtype != np.float32 or \
            dequantized(site, node.inputs[0]):
        return None
    d = dequantized(site, node.inputs[1])
    q = site.const(d.source) if d else None
    trans_b = node.attr("transB", 0)
    if q is None or q.ndim != 2 or d.p.axis not in (None, 1 - trans_b):
        return None
    n = q.shape[1 - trans_b]
    shape = (1, n) if trans_b == 0 else (n, 1)
    values = q.astype(np.int64) - np.broadcast_to(d.p.zero, (n,)).reshape(shape)
    if values.min() < -128 or values.max() > 127:
        return None
    weights = (values.T if trans_b else values).astype(np.int8)
    scale = (node.attr("alpha", 1.0) * np.broadcast_to(d.p.scale, (n,))).astype(np.float32)
    taken: set[str] = set()
    w, s = site.fresh(f"{node.name}/w_int", taken), site.fresh(f"{node.name}/w_scale", taken)
    bias = node.inputs[2:3] if node.op == "Gemm" and node.attr("beta", 1.0) != 0 else ()
    scaled = Node("ScaledGemm", node.name, (node.inputs[0], w, s) + tuple(b for b in bias if b), node.outputs,
                  {"transA": node.attr("transA", 0), "beta": node.attr("beta", 1.0)})
    return site.rewritten([(node, scaled)], {w: weights, s: scale})
