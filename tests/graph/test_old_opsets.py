"""Models older than opset 11 (upgraded with onnx.version_converter) fold their constants under their own
rules, and an error about many nodes names ten of them."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import cglow
from cglow.errors import CglowError
from tests.util import cglow_run, ort_run


def unsqueeze_model(opset: int):
    """Unsqueeze with an `axes` attribute (before opset 13) on a constant, then on the input: the first is
    folded at compile time, as an opset-8 image model's constant shape arithmetic is."""
    c = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "c")
    nodes = [helper.make_node("Unsqueeze", ["c"], ["cu"], axes=[0]),
             helper.make_node("Add", ["x", "cu"], ["s"]),
             helper.make_node("Unsqueeze", ["s"], ["y"], axes=[3])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 1])], [c])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=7)


@pytest.mark.parametrize("opset", [7, 8, 9, 10])
def test_unsqueeze_with_axes_folds_under_old_opsets(opset):
    model = unsqueeze_model(opset)
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 2, 3)).astype(np.float32)}
    (got,) = cglow_run(model, feeds)
    np.testing.assert_array_equal(got, ort_run(model, feeds)[0])


def test_an_error_about_many_nodes_names_ten():
    """300 unsupported nodes: the message names ten and counts the rest (not one line of kilobytes)."""
    nodes = [helper.make_node("RandomUniformLike", ["x"], [f"d{i}"], name=f"det{i}") for i in range(300)]
    nodes.append(helper.make_node("Sum", [f"d{i}" for i in range(300)], ["y"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    with pytest.raises(CglowError) as error:
        cglow.compile_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    message = str(error.value)
    assert "RandomUniformLike ('det0', 'det1', 'det2', 'det3', 'det4', 'det5', 'det6', 'det7', 'det8', 'det9', and 290 " \
        "more)" in message and len(message) < 400


def test_a_message_of_many_problems_gives_ten():
    nodes = [helper.make_node("Relu", ["x"], [f"r{i}"], name=f"relu{i}", bogus=1) for i in range(30)]
    nodes.append(helper.make_node("Sum", [f"r{i}" for i in range(30)], ["y"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    with pytest.raises(CglowError) as error:
        cglow.compile_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert str(error.value).count("'bogus'") == 10 and str(error.value).endswith("; and 20 more")
    assert len(error.value.problems) == 30  # cglow info lists every one
