"""Ops compiled as their ONNX function bodies (cglow/graph/functions.py): the same values as onnx's reference
evaluator, the node's attributes in the body, at the model's opset or converted to it."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h
from onnx.reference import ReferenceEvaluator
import pytest

import cglow
from cglow.errors import CglowError
from cglow.tools import backend

RNG = np.random.default_rng(5)


def model(nodes, inputs, output, opset, shape=()):
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                         [h.make_tensor_value_info(output, T.FLOAT, shape)])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def check(m, *arrays):
    names = [v.name for v in m.graph.input]
    want = ReferenceEvaluator(m).run(None, dict(zip(names, arrays)))[0]
    got = backend.prepare(m).run(list(arrays))[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset", [24, 28])  # Swish's body is written for opset 24: at 28 it is converted
def test_a_body_takes_the_nodes_attributes(opset):
    """Two unnamed Swish nodes of other alphas: each body's Constant takes its node's alpha, and their inner
    values do not clash."""
    x = RNG.standard_normal((2, 5)).astype(np.float32)
    m = model([h.make_node("Swish", ["x"], ["s"], alpha=2.5), h.make_node("Swish", ["s"], ["y"], alpha=0.5)],
              [("x", T.FLOAT, [2, 5])], "y", opset, [2, 5])
    check(m, x)


def test_a_context_dependent_body():
    """NegativeLogLikelihoodLoss's body depends on its inputs' types and on its attributes: mean over the targets
    not ignored, with class weights."""
    scores = RNG.standard_normal((3, 4, 2)).astype(np.float32)
    target = np.array([[0, 3], [2, 1], [1, 1]], np.int64)
    weight = np.array([0.5, 1.0, 2.0, 0.25], np.float32)
    m = model([h.make_node("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["y"], reduction="mean", ignore_index=1)],
              [("x", T.FLOAT, [3, 4, 2]), ("t", T.INT64, [3, 2]), ("w", T.FLOAT, [4])], "y", 22)
    check(m, scores, target, weight)


def test_a_preview_domain_body_with_a_subgraph():
    """FlexAttention (ai.onnx.preview) with grouped query heads and a score_mod subgraph (a causal mask)."""
    q, k, v = (RNG.standard_normal(s).astype(np.float32) for s in ((1, 4, 3, 8), (1, 2, 3, 8), (1, 2, 3, 5)))
    mask = np.triu(np.full((3, 3), -np.inf, np.float32), 1)
    score_mod = h.make_graph([h.make_node("Add", ["s", "mask"], ["masked"])], "score_mod",
                             [h.make_tensor_value_info("s", T.FLOAT, None)],
                             [h.make_tensor_value_info("masked", T.FLOAT, None)],
                             [onnx.numpy_helper.from_array(mask, "mask")])
    node = h.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain="ai.onnx.preview", scale=0.5,
                       score_mod=score_mod)
    graph = h.make_graph([node], "g", [h.make_tensor_value_info(n, T.FLOAT, a.shape) for n, a in
                                       (("q", q), ("k", k), ("v", v))],
                         [h.make_tensor_value_info("y", T.FLOAT, (1, 4, 3, 5))])
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 24), h.make_opsetid("ai.onnx.preview", 1)])
    check(m, q, k, v)


def test_an_op_without_a_body_stays_unsupported():
    m = model([h.make_node("RandomUniformLike", ["x"], ["y"])], [("x", T.FLOAT, [3, 3])], "y", 22)
    with pytest.raises(CglowError, match="unsupported operators: RandomUniformLike"):
        cglow.compile_model(m)


def test_a_model_without_such_ops_is_left_as_it_is():
    from cglow.graph.functions import expand_functions
    from cglow.graph.registry import OPS
    m = model([h.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, [3])], "y", 22, [3])
    assert expand_functions(m, set(OPS), 22) is m
    onnx.checker.check_model(m)
