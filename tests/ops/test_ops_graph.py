"""Graph structure: outputs that are inputs, views or other outputs, unused inputs and outputs, dead
branches, constants and constant subgraphs, extra node outputs; tiny models compiled by cglow and run
as C, against onnxruntime.

Float32 inputs and weights, seeded; every output within TOL = 1e-5 (tests/ops/test_ops_nn.py says why).
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.onnx_ops import check, f32, i64, make_model, node_model, pos, rand, transpose_node
from tests.util import cglow_run, random_feeds as feeds_for


# --- graph structure ------------------------------------------------------------------------------

def test_output_is_transpose_of_input():
    check(make_model([transpose_node("x", "y", (0, 2, 3, 1))], {"x": (2, 3, 4, 5)}, ["y"]))


def test_output_is_reshape_of_input():
    node = helper.make_node("Reshape", ["x", "s"], ["y"])
    check(make_model([node], {"x": (2, 3, 4, 5)}, ["y"], {"s": i64(6, -1)}))


def test_output_is_identity_of_input():
    check(node_model("Identity", [("x", (2, 3, 4))]))


def test_identity_last_node():
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Identity", ["r"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 4)}, ["y"]))


def test_one_value_two_outputs():
    """One node's output is a graph output and, through Identity, a second one."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Identity", ["r"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 4)}, ["r", "y"]))


def test_same_value_listed_twice():
    """One node's output named twice among the graph outputs."""
    model = make_model([helper.make_node("Relu", ["x"], ["r"])], {"x": (2, 3, 4)}, [("r", [2, 3, 4])] * 2)
    check(model)


def test_two_views_as_outputs():
    """A transpose and a reshape of one value, both graph outputs."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), transpose_node("r", "y1", (1, 0)),
             helper.make_node("Reshape", ["r", "s"], ["y2"])]
    check(make_model(nodes, {"x": (2, 3)}, ["y1", "y2"], {"s": i64(-1)}))


def test_output_also_consumed():
    """A graph output that later nodes read too."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 4), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Sigmoid", ["r"], ["s"])]
    check(make_model(nodes, {"x": (1, 2, 5, 5)}, ["s", "c", "r"], {"w": rand(3, 2, 3, 3, seed=2)}))


def test_softmax_output_also_concatenated():
    """Softmax (written in place over several instructions) is a graph output and a concat input."""
    nodes = [helper.make_node("Softmax", ["x"], ["s"]), helper.make_node("Concat", ["s", "x"], ["y"], axis=0)]
    check(make_model(nodes, {"x": (2, 3)}, ["y", "s"]))


def test_input_is_output():
    """A graph input returned as it is, next to a computed output."""
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    check(make_model(nodes, {"x": (2, 3)}, ["y", ("x", [2, 3])]))


@pytest.mark.parametrize("order", ["unused-first", "unused-last"])
def test_unused_input(order):
    inputs = {"unused": (3, 2), "x": (2, 3, 4)} if order == "unused-first" else {"x": (2, 3, 4), "unused": (3, 2)}
    check(make_model([helper.make_node("Relu", ["x"], ["y"])], inputs, ["y"]))


def test_initializers_listed_as_inputs():
    """Weights also declared as graph inputs (keep_initializers_as_inputs=True exports)."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1] * 4)]
    model = make_model(nodes, {"x": (1, 2, 5, 5), "w": (3, 2, 3, 3), "b": (3,)}, ["y"],
                       {"w": rand(3, 2, 3, 3, seed=2), "b": rand(3, seed=3)})
    check(model)


def test_dead_branch():
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Exp", ["x"], ["dead"])]
    check(make_model(nodes, {"x": (2, 3, 4)}, ["y"]))


def test_constant_output():
    """An output computed from initializers only (folded at import), next to a computed one."""
    nodes = [helper.make_node("Add", ["p", "q"], ["c"]), helper.make_node("Mul", ["x", "c"], ["y"])]
    check(make_model(nodes, {"x": (2, 3)}, ["c", "y"], {"p": rand(2, 3, seed=2), "q": rand(3, seed=3)}))


def test_constant_nodes():
    """Constant nodes (as PyTorch exports them) for Clip bounds, a Pow exponent and a Reshape target."""
    def const(name, value):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value))
    nodes = [const("lo", f32(0.0)), const("hi", f32(6.0)), const("two", f32(2.0)), const("shape", i64(0, -1)),
             helper.make_node("Clip", ["x", "lo", "hi"], ["c"]), helper.make_node("Pow", ["c", "two"], ["p"]),
             helper.make_node("Reshape", ["p", "shape"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 4)}, ["y"]), scale=4.0)


def test_constant_subgraph_folded():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as PyTorch exports a flatten."""
    nodes = [helper.make_node("Shape", ["x"], ["shp"]), helper.make_node("Gather", ["shp", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 4)}, [("y", [2, 12])], {"zero": np.array(0, np.int64), "ax": i64(0),
                                                       "minus1": i64(-1)}))


def test_unused_extra_outputs_are_fine():
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "idx"], kernel_shape=[2, 2]),
             helper.make_node("LayerNormalization", ["p", "g"], ["y", "mean", "rstd"], axis=-1)]
    check(make_model(nodes, {"x": (1, 2, 4, 4)}, ["y"], {"g": pos(3)}, opset=17))


def test_used_extra_output_is_refused():
    from cglow import CglowError
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "running_mean"]),
             helper.make_node("Add", ["y", "running_mean"], ["z"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])],
                              initializer=[numpy_helper.from_array(pos(3), n) for n in "sbmv"])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(CglowError, match="output 1 \\('running_mean'\\) is not supported"):
        cglow_run(model, feeds_for(model))
