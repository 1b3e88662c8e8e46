"""A small float16 network that the stored-type tests on cross targets share (tests/tools/test_cross_types.py,
tests/tools/test_half_math.py)."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T, helper as h, numpy_helper

from tests.util import checked_model


def half_network():
    """Conv 3x3 -> Relu -> global average pool -> MatMul, all float16, and seeded inputs."""
    rng = np.random.default_rng(11)
    w = numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float16), "w")
    fc = numpy_helper.from_array((rng.standard_normal((8, 5)) * 0.3).astype(np.float16), "fc")
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c"], ["r"]),
             h.make_node("GlobalAveragePool", ["r"], ["p"]), h.make_node("Flatten", ["p"], ["f"]),
             h.make_node("MatMul", ["f", "fc"], ["y"])]
    graph = h.make_graph(nodes, "half", [h.make_tensor_value_info("x", T.FLOAT16, [1, 3, 8, 8])],
                         [h.make_tensor_value_info("y", T.FLOAT16, [1, 5])], [w, fc])
    return checked_model(graph, 17), {"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float16)}
