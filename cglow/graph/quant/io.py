"""Quantized inputs and outputs, whose scale and zero point go to the header (NET_INPUT_0_SCALE...).

Two forms: a float graph input read only by QuantizeLinear nodes (with one set of parameters) takes their
integers directly, and a float graph output made by a DequantizeLinear gives its integers (quantized_io,
after the graph passes); an 8-bit graph input read only by DequantizeLinear nodes, or an 8-bit graph output
made by a QuantizeLinear (either through data-movement ops, as tf2onnx's Transpose to NCHW), is already
integer and takes their parameters (integer_io, before the passes, which fold those nodes into integer ops).
With float I/O (Options.float_io) the first form keeps its conversions, and the second gets them (float_io):
either way they run inside net_run."""
from __future__ import annotations

from dataclasses import replace
import math

import numpy as np

from ..edit import Site, rewrite_each
from ..ir import Graph, Node, TensorType
from .movement import chain_before, readers_past
from .params import QParams, qparams


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


def _eight_bit(p: QParams | None) -> bool:
    return p is not None and p.per_tensor and p.dtype.itemsize == 1 and p.dtype.kind in "iu"


def _scalar(site: Site, name: str) -> float | None:
    value = site.const(name)
    return float(value.reshape(-1)[0]) if value is not None and value.size == 1 else None


def _written_dequantize(site: Site, cast: Node) -> Graph | None:
    """Cast to float32 -> Sub of a constant zero point -> Mul by a constant scale, the Sub left out for a zero
    point of 0 (tf2onnx's --dequantize writes a TFLite DEQUANTIZE of an 8-bit input so): a DequantizeLinear,
    which computes the same float32 values."""
    x = cast.inputs[0]
    dtype = site.graph.types[x].dtype
    if dtype.itemsize != 1 or dtype.kind not in "iu" or cast.attr("to") != 1:  # TensorProto.FLOAT
        return None
    chain, zero, value = [cast], 0.0, cast.outputs[0]
    sub = site.sole_reader(value)
    if sub is not None and sub.op == "Sub" and sub.inputs[0] == value and _scalar(site, sub.inputs[1]) is not None:
        chain, zero, value = chain + [sub], _scalar(site, sub.inputs[1]), sub.outputs[0]
    mul = site.sole_reader(value)
    scale = _scalar(site, mul.inputs[mul.inputs.index(value) ^ 1]) if mul is not None and mul.op == "Mul" else None
    info = np.iinfo(dtype)
    if scale is None or not scale > 0 or not math.isfinite(scale) or zero != int(zero) or \
            not info.min <= zero <= info.max or site.graph.types[mul.outputs[0]].dtype != np.float32:
        return None
    taken: set[str] = set()
    consts = {site.fresh(f"{x}/scale", taken): np.array(scale, np.float32),
              site.fresh(f"{x}/zero_point", taken): np.array(int(zero), dtype)}
    node = Node("DequantizeLinear", cast.name, (x, *consts), mul.outputs, {})
    return site.rewritten([(cast, node)] + [(n, None) for n in chain[1:] + [mul]], consts)


def _input_dequantized(site: Site, node: Node) -> Graph | None:
    if node.op != "Cast" or node.inputs[0] not in site.graph.inputs:
        return None
    return _written_dequantize(site, node)


def integer_io(graph: Graph) -> Graph:
    """The parameters of 8-bit graph inputs read only by DequantizeLinear nodes (all with the same ones) and
    of 8-bit graph outputs written by a QuantizeLinear, in io_quant (tf2onnx writes a fully-integer TFLite
    model's inputs and outputs so), data-movement ops between them and the graph's input or output allowed.
    An input's dequantization written as Cast, Sub, Mul becomes a DequantizeLinear first."""
    graph = rewrite_each(graph, _input_dequantized)
    site = Site(graph)
    quant = dict(graph.io_quant)
    for name in graph.inputs:
        readers = readers_past(site, name)
        params = [qparams(site, r) if r.op == "DequantizeLinear" and r.inputs[0] == value else None
                  for r, value in readers]
        if readers and name not in graph.outputs and all(_eight_bit(p) and p.same(params[0]) for p in params):
            quant[name] = (float(params[0].scale[0]), int(params[0].zero[0]))
    for name in graph.outputs:
        q = chain_before(site, name)[0]
        p = qparams(site, q) if q is not None and q.op == "QuantizeLinear" else None
        if _eight_bit(p) and name not in graph.inputs:
            quant[name] = (float(p.scale[0]), int(p.zero[0]))
    return replace(graph, io_quant=quant)


def float_io(graph: Graph, quantize_attrs: dict | None = None) -> Graph:
    """The 8-bit inputs and outputs of io_quant as float32 ones, converted inside: each keeps its name, and
    its integers are renamed. `quantize_attrs`: the attributes of the QuantizeLinear of an input (how it
    rounds)."""
    nodes, types, consts = list(graph.nodes), dict(graph.types), dict(graph.consts)
    for name, (s, z) in graph.io_quant.items():
        inner = f"{name}/quantized"
        dtype = types[name].dtype
        scale, zero = f"{name}/scale", f"{name}/zero_point"
        consts[scale], consts[zero] = np.array(s, np.float32), np.array(z, dtype)
        types[scale], types[zero] = TensorType(np.dtype(np.float32), ()), TensorType(dtype, ())
        types[inner] = types[name]
        types[name] = TensorType(np.dtype(np.float32), types[name].shape)
        nodes = _renamed(nodes, name, inner)
        if name in graph.inputs:
            nodes.insert(0, Node("QuantizeLinear", f"{name}/quantize", (name, scale, zero), (inner,),
                                 dict(quantize_attrs or {})))
        else:
            nodes.append(Node("DequantizeLinear", f"{name}/dequantize", (inner, scale, zero), (name,), {}))
    return replace(graph, nodes=tuple(nodes), types=types, consts=consts, io_quant={})
