"""The ONNX backend over cglow (cglow/tools/backend.py): which graph inputs it pins as constants."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from cglow.tools import backend

from tests.util import checked_model


def _int_input(name: str, shape=()) -> object:
    return helper.make_tensor_value_info(name, TensorProto.INT64, shape)


def test_inputs_reaching_a_shape_through_other_nodes_are_pinned():
    """n reaches Range's limit through an Add and an If's branch that reads it; x reaches a Reshape's target only
    through its Shape, which depends on x's shape, not its values."""
    then = helper.make_graph([helper.make_node("Add", ["n", "one"], ["m"])], "then", [],
                             [_int_input("m")])
    other = helper.make_graph([helper.make_node("Identity", ["n"], ["k"])], "else", [], [_int_input("k")])
    nodes = [helper.make_node("Constant", [], ["one"], value_int=1),
             helper.make_node("Constant", [], ["yes"], value=helper.make_tensor("", TensorProto.BOOL, [], [True])),
             helper.make_node("If", ["yes"], ["limit"], then_branch=then, else_branch=other),
             helper.make_node("Range", ["one", "limit", "one"], ["r"]),
             helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Reshape", ["x", "s"], ["y"])]
    graph = helper.make_graph(nodes, "pins", [_int_input("n"), helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                               [2, 3])],
                              [helper.make_tensor_value_info("r", TensorProto.INT64, None),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = checked_model(graph, 17)
    assert backend.shape_inputs(model) == {"n"}
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    r, y = backend.prepare(model).run([np.array(4, np.int64), x])
    np.testing.assert_array_equal(r, np.arange(1, 5))
    np.testing.assert_array_equal(y, x)


def test_a_quantized_models_float_input_stays_float():
    """The backend keeps the model's element types: the float input of a QDQ model, which `cglow emit` makes 8-bit
    by default, is taken as float (and quantized in net_run), not its values cast to uint8."""
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]), helper.make_node("Relu", ["d"], ["y"])]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                              [numpy_helper.from_array(np.array(0.1, np.float32), "s"),
                               numpy_helper.from_array(np.array(3, np.uint8), "z")])
    x = np.array([-0.5, 0.26, 1.3, 7.0], np.float32)
    (y,) = backend.prepare(checked_model(graph, 19)).run([x])
    np.testing.assert_allclose(y, [0.0, 0.3, 1.3, 7.0], rtol=1e-6)
