"""A requantization that only moves the zero point (the same scale, no value clamped): the TFLite converter's
QUANTIZE between a model's uint8 input or output and its int8 layers, which tf2onnx writes as
DequantizeLinear -> QuantizeLinear. Folded away, exactly (q2 = q1 - z1 + z2): a DequantizeLinear of the
requantized values reads the values before (with their zero point; the data-movement ops between move
those), and a QuantizeLinear of the dequantized output of a QuantizeLinear takes that one's place (its
parameters on the values before it), so that the layers next to the input and output read and write the
8-bit type of the model's own."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..edit import Site
from ..ir import Graph, Node
from .movement import chain_before
from .params import QParams, dequantized, qparams


def _shift(a: QParams, b: QParams) -> int | None:
    """b's zero point less a's when both are per tensor with the same float32 scale, else None."""
    if not a.per_tensor or not b.per_tensor or np.float32(a.scale[0]) != np.float32(b.scale[0]):
        return None
    return int(b.zero[0]) - int(a.zero[0])


def _within(p: QParams, shift: int, q: QParams) -> bool:
    """Every value of p's type, moved by `shift`, is one of q's type."""
    return q.bounds[0] <= p.bounds[0] + shift and p.bounds[1] + shift <= q.bounds[1]


def _reads_before(site: Site, dq: Node) -> Graph | None:
    """DequantizeLinear(QuantizeLinear(DequantizeLinear(x))), the QuantizeLinear exact and data-movement ops
    allowed before the outer DequantizeLinear (tf2onnx's Transpose to NCHW): DequantizeLinear(x), the ops
    moving x."""
    q, chain = chain_before(site, dq.inputs[0])
    first = dequantized(site, q.inputs[0]) if q is not None and q.op == "QuantizeLinear" else None
    pq, pd = (qparams(site, q), qparams(site, dq)) if first else (None, None)
    shift = _shift(first.p, pq) if pq is not None and pd is not None and pq.same(pd) else None
    if shift is None or not _within(first.p, shift, pq) or \
            any(site.sole_reader(n.outputs[0]) is not after for n, after in zip(chain, chain[1:] + [dq])):
        return None
    source = dq.inputs[0] if chain else first.source
    changes = [(dq, replace(dq, inputs=(source,) + first.node.inputs[1:], attrs=first.node.attrs))]
    if chain:
        changes.append((chain[0], replace(chain[0], inputs=(first.source,) + chain[0].inputs[1:])))
    graph = site.rewritten(changes)
    types = {n.outputs[0]: replace(graph.types[n.outputs[0]], dtype=first.p.dtype) for n in chain}
    return replace(graph, types={**graph.types, **types})


def _writes_after(site: Site, q2: Node) -> Graph | None:
    """QuantizeLinear(DequantizeLinear(QuantizeLinear(v))), the outer one within the inner one's values: the
    outer one's parameters on v."""
    dq = site.producer.get(q2.inputs[0])
    q1 = site.producer.get(dq.inputs[0]) if dq is not None and dq.op == "DequantizeLinear" else None
    if q1 is None or q1.op != "QuantizeLinear" or site.sole_reader(q1.outputs[0]) is not dq or \
            site.sole_reader(dq.outputs[0]) is not q2:
        return None
    p1, pd, p2 = qparams(site, q1), qparams(site, dq), qparams(site, q2)
    shift = _shift(p2, p1) if p1 is not None and pd is not None and p2 is not None and p1.same(pd) else None
    if shift is None or not _within(p2, shift, p1):
        return None
    moved = replace(q1, inputs=(q1.inputs[0],) + q2.inputs[1:], outputs=q2.outputs, attrs=q2.attrs)
    return site.rewritten([(q1, moved), (dq, None), (q2, None)])


def unshifted(site: Site, node: Node) -> Graph | None:
    if node.op == "DequantizeLinear":
        return _reads_before(site, node)
    return _writes_after(site, node) if node.op == "QuantizeLinear" else None
