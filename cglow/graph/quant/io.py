"""Quantized inputs and outputs: a graph input read only by QuantizeLinear nodes (with one set of
parameters) takes their integers directly, and a graph output made by a DequantizeLinear gives its
integers; the scale and zero point of each go to the header (NET_INPUT_0_SCALE...). With float I/O
(Options.float_io) the graph keeps them, and the conversions run inside net_run."""
from __future__ import annotations

from dataclasses import replace

from ..edit import Site
from ..ir import Graph, Node
from .params import qparams


def _renamed(nodes, old: str, new: str) -> list[Node]:
    return [replace(n, inputs=tuple(new if i == old else i for i in n.inputs),
                    outputs=tuple(new if o == old else o for o in n.outputs)) for n in nodes]


def _input(graph: Graph, name: str) -> Graph:
    site = Site(graph)
    readers = site.readers.get(name, [])
    params = [qparams(site, r) if r.op == "QuantizeLinear" and r.inputs[0] == name else None for r in readers]
    if not readers or name in graph.outputs or any(p is None or not p.per_tensor or p.dtype.itemsize != 1 or
                                                   not p.same(params[0]) for p in params) or \
            any(r.outputs[0] in graph.outputs for r in readers):
        return graph
    nodes = [n for n in graph.nodes if not any(n is r for r in readers)]
    for r in readers:
        nodes = _renamed(nodes, r.outputs[0], name)
    types = {**graph.types, name: graph.types[readers[0].outputs[0]]}
    quant = {**graph.io_quant, name: (float(params[0].scale[0]), int(params[0].zero[0]))}
    return replace(graph.with_nodes(nodes), types=types, io_quant=quant)


def _output(graph: Graph, name: str) -> Graph:
    site = Site(graph)
    d = site.producer.get(name)
    p = qparams(site, d) if d is not None and d.op == "DequantizeLinear" else None
    source = d.inputs[0] if p else ""
    if p is None or not p.per_tensor or p.dtype.itemsize != 1 or source in graph.inputs or \
            source in graph.outputs or source in graph.consts:
        return graph
    nodes = _renamed([n for n in graph.nodes if n is not d], source, name)
    types = {**graph.types, name: graph.types[source]}
    quant = {**graph.io_quant, name: (float(p.scale[0]), int(p.zero[0]))}
    return replace(graph.with_nodes(nodes), types=types, io_quant=quant)


def quantized_io(graph: Graph) -> Graph:
    for name in graph.inputs:
        graph = _input(graph, name)
    for name in graph.outputs:
        graph = _output(graph, name)
    return graph
