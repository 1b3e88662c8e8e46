"""One ONNX node computed now on constant inputs, by onnx's reference evaluator, under a given opset.

The evaluator takes a lone NodeProto under the newest opset whatever it is told (onnx 1.23): an opset-11
Unsqueeze with an `axes` attribute then fails as Unsqueeze-13, which takes its axes as an input. A node
wrapped in a graph is evaluated under the opset given."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator


def outer_names(graphs) -> set[str]:
    """The values that subgraphs (an If's branches, a Loop's body) read from the scopes around them."""
    names: set[str] = set()
    for g in graphs:
        inner = {v.name for v in g.input} | {t.name for t in g.initializer} | {o for n in g.node for o in n.output}
        for n in g.node:
            names |= {i for i in n.input if i and i not in inner}
            names |= outer_names(helper.get_attribute_value(a) for a in n.attribute
                                 if a.type == onnx.AttributeProto.GRAPH) - inner
    return names


def evaluate_node(proto: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int) -> list[np.ndarray]:
    """The node's outputs for the inputs `feeds` (by name; every named input of the node, and every value its
    subgraphs read from around them)."""
    reads = list(dict.fromkeys([n for n in proto.input if n] + sorted(outer_names(
        helper.get_attribute_value(a) for a in proto.attribute if a.type == onnx.AttributeProto.GRAPH))))
    graph = helper.make_graph([proto], "node", [helper.make_empty_tensor_value_info(n) for n in reads],
                              [helper.make_empty_tensor_value_info(n) for n in proto.output if n])
    return [np.asarray(r) for r in ReferenceEvaluator(graph, opsets={"": opset}).run(None, feeds)]
