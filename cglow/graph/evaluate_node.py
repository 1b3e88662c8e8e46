"""One ONNX node computed now on constant inputs, by onnx's reference evaluator, under a given opset.

The evaluator takes a lone NodeProto under the newest opset whatever it is told (onnx 1.23): an opset-11
Unsqueeze with an `axes` attribute then fails as Unsqueeze-13, which takes its axes as an input. A node
wrapped in a graph is evaluated under the opset given."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator


def evaluate_node(proto: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int) -> list[np.ndarray]:
    """The node's outputs for the inputs `feeds` (by name; every named input of the node)."""
    graph = helper.make_graph([proto], "node", [helper.make_empty_tensor_value_info(n) for n in proto.input if n],
                              [helper.make_empty_tensor_value_info(n) for n in proto.output if n])
    return [np.asarray(r) for r in ReferenceEvaluator(graph, opsets={"": opset}).run(None, feeds)]
