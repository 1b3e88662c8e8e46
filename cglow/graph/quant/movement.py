"""The ops that only move values (Reshape, Transpose, MaxPool...: int8 form "movement" in their OpSpec): 8-bit
values pass them unchanged, so the QDQ folds and the quantized inputs and outputs look through them."""
from __future__ import annotations

from ..edit import Site
from ..ir import Node
from ..registry import int8_form


def moves(node: Node | None) -> bool:
    """A data-movement op with one output (not Concat, which mixes its inputs' values)."""
    return node is not None and int8_form(node.op) == "movement" and node.op != "Concat" and \
        len([o for o in node.outputs if o]) == 1


def readers_past(site: Site, name: str) -> list[tuple[Node, str]]:
    """The nodes that read the value, each with the value it reads, past the data-movement ops that take it
    as their data (tf2onnx turns an NHWC input into NCHW by a Transpose or Reshape, then dequantizes)."""
    found = []
    for r in site.readers.get(name, []):
        if moves(r) and r.inputs[0] == name and name not in r.inputs[1:] and r.outputs[0] not in site.graph.outputs:
            found += readers_past(site, r.outputs[0])
        else:
            found.append((r, name))
    return found


def chain_before(site: Site, name: str) -> tuple[Node | None, list[Node]]:
    """The node that computes the value before the data-movement ops that only move it, and those ops in the
    order they run."""
    chain: list[Node] = []
    node = site.producer.get(name)
    while moves(node):
        chain.insert(0, node)
        node = site.producer.get(node.inputs[0])
    return node, chain
