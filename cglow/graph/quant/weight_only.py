"""Float matrix products by integer weights: a MatMul or Gemm of float values (not dequantized ones) by a per-tensor
or per-column DequantizeLinear of an integer constant (a weight-only quantized model: int8, int4 or uint4 weights,
float activations) becomes a ScaledGemm, the weights less their zero points kept as int8 constants and each column's
scale (and Gemm's alpha) applied to the float sum in its epilogue: x @ ((q - z) * s) = (x @ (q - z)) * s. One byte
of flash a weight rather than four, and int4 weights then stay two per byte (instr/narrow_weights.py); the
sums differ from those of the float weights by float32 rounding. Weights quantized in blocks along k (block_size,
a scale per block of k and column) take a ScaledGemm per block, of that slice of k, each adding the sum of the
blocks before it in its epilogue (MAX_BLOCKS of them at most): the arena holds two partial sums at most. Other
weights (blocks along the columns, a zero point that leaves values beyond int8, a batch of matrices) are dequantized
at compile time (fold.py fold_dequantized_consts), or by maps for blocked ones."""
from __future__ import annotations

import numpy as np

from ..edit import Site, rewrite_each
from ..ir import Graph, Node, TensorType
from .params import dequantized

MAX_BLOCKS = 256  # blocks along k a product is split into at most: one matrix product each


def weight_only(graph: Graph) -> Graph:
    return rewrite_each(graph, _scaled)


def _float_product(site: Site, node: Node) -> bool:
    """Whether node is a MatMul or Gemm (its a not transposed) of float values, not dequantized ones (a QDQ layer that
    fold.py left in float stays as it is, for `cglow info` to say why)."""
    return node.op in ("MatMul", "Gemm") and not node.attr("transA", 0) and \
        site.graph.types[node.inputs[0]].dtype == np.float32 and not dequantized(site, node.inputs[0])


def _scaled(site: Site, node: Node) -> Graph | None:
    """A float product (_float_product) by integer weights (_integer_weights) as a chain of ScaledGemms, one per block
    of k (one where the scales are per tensor or per column): of a's slice of k (a Slice, which costs nothing) by the
    block's weights less their zero points in int8, its columns times the block's scales (and Gemm's alpha), plus
    the chain's sum so far (the first block: Gemm's bias). None where it is not one."""
    weights = _integer_weights(site, node) if _float_product(site, node) else None
    if weights is None:
        return None
    values, scale, size = weights
    k, blocks = values.shape[0], scale.shape[0]
    if blocks > MAX_BLOCKS or values.min() < -128 or values.max() > 127:
        return None
    scale = scale * node.attr("alpha", 1.0)
    b = _Blocks(site, node)
    total = None
    for i in range(blocks):
        total = b.block(i * size, min(k, (i + 1) * size), values, scale[i], blocks == 1, i == blocks - 1, total)
    at = next(i for i, n in enumerate(site.graph.nodes) if n is node)
    graph = site.rewritten([(node, None)], b.consts)
    return graph.with_nodes(graph.nodes[:at] + tuple(b.nodes) + graph.nodes[at:], types={**graph.types, **b.types})


def _integer_weights(site: Site, node: Node) -> tuple[np.ndarray, np.ndarray, int] | None:
    """The product's weights where they are a DequantizeLinear of a 2-D integer constant per tensor, per output
    column or in blocks along k (block_size): their values less their zero points [K, N], the scales [blocks, N]
    and the block size (K for one block); None otherwise."""
    trans_b = node.attr("transB", 0)
    d = dequantized(site, node.inputs[1])
    if d is not None:  # per tensor or per column: one block
        q = site.const(d.source)
        if q is None or q.ndim != 2 or d.p.axis not in (None, 1 - trans_b):
            return None
        q = q.T if trans_b else q
        n = q.shape[1]
        return (q.astype(np.int64) - np.broadcast_to(d.p.zero, (n,)), np.broadcast_to(d.p.scale, (1, n)),
                q.shape[0])
    dq = site.producer.get(node.inputs[1])
    size = dq.attr("block_size", 0) if dq is not None and dq.op == "DequantizeLinear" else 0
    q, scale = (site.const(dq.inputs[0]), site.const(dq.inputs[1])) if size else (None, None)
    zero = site.const(dq.inputs[2]) if size and len(dq.inputs) > 2 and dq.inputs[2] else None
    if q is None or scale is None or q.ndim != 2 or q.dtype.kind not in "iu" or dq.attr("axis", 1) % 2 != trans_b or \
            len(dq.inputs) > 2 and dq.inputs[2] and zero is None:
        return None
    q, scale = (q.T, scale.T) if trans_b else (q, scale)  # [K, N], [blocks, N]
    zero = np.zeros_like(scale, np.int64) if zero is None else (zero.T if trans_b else zero).astype(np.int64)
    return q.astype(np.int64) - np.repeat(zero, size, axis=0)[:q.shape[0]], scale, size


class _Blocks:
    """The nodes, constants and value types of a blocked product's rewrite (_blocked)."""

    def __init__(self, site: Site, node: Node):
        self.site, self.node, self.taken = site, node, set()
        self.nodes, self.consts, self.types = [], {}, {}
        self.out = site.graph.types[node.outputs[0]]

    def fresh(self, what: str) -> str:
        return self.site.fresh(f"{self.node.name}/{what}", self.taken)

    def block(self, lo: int, hi: int, values: np.ndarray, scale: np.ndarray, only: bool, last: bool,
              previous: str | None) -> str:
        """The ScaledGemm of a's values [lo, hi) of k (all of a for the `only` block) by the weights of those rows,
        plus the `previous` blocks' sum (its epilogue's bias; the first block's: the Gemm's bias, times beta); its
        output's name (the product's for the last block)."""
        x, name = self.node.inputs[0], self.node.name
        w, s = self.fresh(f"w_int{lo}"), self.fresh(f"w_scale{lo}")
        self.consts[w], self.consts[s] = values[lo:hi].astype(np.int8), scale.astype(np.float32)
        y = self.node.outputs[0] if last else self.fresh(f"y{lo}")
        self.types.setdefault(y, self.out)
        if only:
            part = x
        else:
            ends = [self.fresh("starts"), self.fresh("ends"), self.fresh("axes")]
            self.consts.update(zip(ends, (np.array([lo], np.int64), np.array([hi], np.int64),
                                          np.array([-1], np.int64))))
            part, name = self.fresh(f"a{lo}"), f"{name}/block{lo}"
            self.types[part] = TensorType(np.dtype(np.float32), self.site.graph.types[x].shape[:-1] + (hi - lo,))
            self.nodes.append(Node("Slice", f"{self.node.name}/slice{lo}", (x, *ends), (part,), {}))
        beta = self.node.attr("beta", 1.0)
        bias = (previous,) if previous else \
            tuple(n for n in self.node.inputs[2:3] if n) if self.node.op == "Gemm" and beta != 0 else ()
        self.nodes.append(Node("ScaledGemm", name, (part, w, s) + bias, (y,), {"beta": 1.0 if previous else beta}))
        return y
