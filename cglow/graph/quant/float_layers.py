"""Why a quantized model still runs a layer in float: the ops that QDQ folding (fold.py) left between a
dequantize and a quantize, each with the likeliest reason, for `cglow info`. A float layer costs a float
tensor in the arena (4 bytes an element) and float arithmetic, which a user of an int8 model wants to know."""
from __future__ import annotations

import numpy as np

from ..edit import Site
from ..ir import Graph, Node
from ..registry import int8_form
from .fold import BIASED, biased
from .params import dequantized, qparams

CONVERSIONS = {"QuantizeLinear", "DequantizeLinear"}
FOLLOWERS = {"Add", "Relu", "Clip"}  # after a float layer, part of its group (its bias, its activation)
INTEGER_OPS = {"IntConv", "IntGemm", "IntAdd", "IntMul", "IntAvgPool", "IntTable", "IntAffine", "IntSoftmaxTable"}


def _quantized(graph: Graph) -> bool:
    return bool(graph.io_quant) or any(n.op in CONVERSIONS | INTEGER_OPS for n in graph.nodes)


def _reason(site: Site, node: Node) -> str:
    """The first of the usual obstacles to folding that the node shows."""
    if node.op == "ScaledGemm":  # graph/quant/weight_only.py
        return f"its input '{node.inputs[0]}' is not dequantized: only its weights are integers"
    if int8_form(node.op) == "float":
        return f"cglow has no integer {node.op}"
    readers = site.readers.get(node.outputs[0], [])
    if node.op in BIASED and len(readers) == 1 and readers[0].op == "Add":
        if biased(site, readers[0]) is None:
            return "its bias is not a constant per channel"
        readers = site.readers.get(readers[0].outputs[0], [])
    if len(readers) == 1 and readers[0].op in ("Relu", "Clip"):
        readers = site.readers.get(readers[0].outputs[0], [])
    if not readers or any(r.op != "QuantizeLinear" for r in readers) or node.outputs[0] in site.graph.outputs:
        return "its output is not quantized"
    for i, name in enumerate(node.inputs[:2]):
        if not name:
            continue
        if name in site.graph.consts:
            return f"its input {i} is a float constant, not dequantized integers"
        d = dequantized(site, name)
        if d is None:
            return f"its input '{name}' is not dequantized"
        if i == 0 and not d.p.per_tensor:
            return f"its input '{name}' is quantized per channel"
    out = qparams(site, readers[0])
    if out is None or not out.per_tensor:
        return "its output's quantization is per channel or not constant"
    return "its quantization parameters do not fit cglow's integer form"


def float_layers(graph: Graph) -> list[str]:
    """One line per op of a quantized graph (after the graph passes) that computes float values."""
    if not _quantized(graph):
        return []
    site = Site(graph)
    lines, made = [], set()  # made: the values of the float layers listed
    for node in graph.nodes:
        floats = any(o and graph.types[o].dtype == np.float32 for o in node.outputs)
        if node.op in CONVERSIONS or int8_form(node.op) == "movement" or not floats:
            continue
        if node.op not in FOLLOWERS or not made.intersection(node.inputs):
            lines.append(f"runs in float: {node.op} '{node.name}' ({_reason(site, node)})")
        made.update(node.outputs)
    return lines
