"""Graph-level passes (Graph -> Graph), each exactly semantics-preserving, and the pipeline that runs them."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .edit import Site, rewrite_each
from .fold_batchnorm import fold_batchnorm
from .ir import Graph, Node
from .quant.fold import fold_dequantized_consts, fold_qdq
from .quant.weight_only import weight_only
from .registry import Args
from .rules.tensor import pad_widths


def eliminate_dead(graph: Graph) -> Graph:
    """Drop nodes none of whose outputs reach a graph output or a state's update."""
    needed = set(graph.results)
    kept = []
    for node in reversed(graph.nodes):
        if any(o in needed for o in node.outputs):
            kept.append(node)
            needed.update(n for n in node.inputs if n)
    return graph.with_nodes(reversed(kept))


def _perm(site: Site, node: Node) -> tuple[int, ...]:
    rank = len(site.shape(node.inputs[0]))
    return tuple(node.attr("perm", range(rank - 1, -1, -1)))


def _transpose(site: Site, node: Node) -> Graph | None:
    """A transpose of a transpose reads the first one's input with the composed permutation; an identity
    transpose goes, its readers reading its input (unless it is a graph output, whose name must stay)."""
    if node.op != "Transpose":
        return None
    inner = site.producer.get(node.inputs[0])
    if inner is not None and inner.op == "Transpose":
        first, then = _perm(site, inner), _perm(site, node)
        composed = replace(node, inputs=inner.inputs, attrs={**node.attrs, "perm": tuple(first[i] for i in then)})
        return site.rewritten([(node, composed)])
    source, out = node.inputs[0], node.outputs[0]
    if _perm(site, node) != tuple(range(len(site.shape(source)))) or out in site.graph.results:
        return None
    readers = {id(r): r for r in site.readers.get(out, [])}.values()
    return site.rewritten([(node, None)] + [(r, replace(r, inputs=tuple(source if n == out else n for n in r.inputs)))
                                            for r in readers])


def cancel_transposes(graph: Graph) -> Graph:
    return rewrite_each(graph, _transpose)


def _takes_pads(node: Node, name: str, value) -> bool:
    """Whether padding of the node's input `name` with `value` can be the node's own: zero padding by a Conv,
    or by an AveragePool that counts its padding in the divisor, without ceil_mode (then every window lies
    inside the pads, and divides by its full size whichever pads it covers); an IntConv's by its input's zero
    point (the real zero it pads with); a HybridConv's by zero (a zero changes neither the range its input is
    quantized by, which always takes 0 in, nor the sum: it quantizes to the zero point)."""
    if node.inputs[0] != name or node.inputs.count(name) != 1 or node.attr("auto_pad", "NOTSET") != "NOTSET":
        return False
    if node.op == "IntConv":
        return value == node.attr("x_zero")
    return value == 0 and node.op in ("Conv", "HybridConv") or value == 0 and \
        node.op == "AveragePool" and node.attr("count_include_pad", 0) == 1 and node.attr("ceil_mode", 0) == 0


def _pad(site: Site, pad: Node) -> Graph | None:
    """A constant Pad of the spatial axes, read only by nodes that pad their input themselves with its value,
    goes into their `pads`."""
    if pad.op != "Pad" or pad.attr("mode", "constant") != "constant":
        return None
    value_name = pad.inputs[2] if len(pad.inputs) > 2 else ""
    value = site.const(value_name) if value_name else np.zeros(1)
    out = pad.outputs[0]
    readers = site.readers.get(out, [])
    if value is None or value.size != 1 or out in site.graph.results or not readers or \
            not all(_takes_pads(r, out, value.reshape(-1)[0]) for r in readers):
        return None
    g = site.graph
    widths = pad_widths(Args(pad, tuple(g.types.get(n) for n in pad.inputs), tuple(site.const(n) for n in pad.inputs),
                             g.opset))
    if widths[0] != (0, 0) or widths[1] != (0, 0) or min(min(w) for w in widths) < 0:
        return None
    spatial = len(widths) - 2
    begin, end = tuple(b for b, _ in widths[2:]), tuple(e for _, e in widths[2:])
    changes: list[tuple[Node, Node | None]] = [(pad, None)]
    for r in readers:
        own = tuple(r.attr("pads", (0,) * 2 * spatial))
        pads = tuple(p + q for p, q in zip(own, begin + end))
        changes.append((r, replace(r, inputs=(pad.inputs[0],) + r.inputs[1:], attrs={**r.attrs, "pads": pads})))
    return site.rewritten(changes)


def fold_pads(graph: Graph) -> Graph:
    return rewrite_each(graph, _pad)


# a transpose pair that cancels leaves its first one dead, which would keep a Pad before it from folding
PIPELINE = (eliminate_dead, fold_qdq, eliminate_dead, weight_only, fold_dequantized_consts, cancel_transposes,
            eliminate_dead, fold_pads, fold_batchnorm, eliminate_dead)
