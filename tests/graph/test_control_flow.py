"""Control flow (graph/control_flow.py, graph/unroll.py). If with a condition that folds to a constant: the branch it
takes is compiled in its place, its initializers, a nested If and the values it reads from around it included; with
a condition known only at run time, both branches and a Where."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T, helper as h, numpy_helper
from onnx.reference import ReferenceEvaluator
import pytest

import cglow
from cglow.errors import CglowError
from cglow.tools import backend


def branch(name: str, nodes, output: str, inits=()):
    return h.make_graph(nodes, name, [], [h.make_tensor_value_info(output, T.FLOAT, None)], list(inits))


def if_model(cond_nodes, cond: str):
    """y = x * 2 + bias (the then branch, which nests an If on the same condition) or x - 1 (the else branch)."""
    inner = h.make_node("If", [cond], ["twice"],
                        then_branch=branch("inner_then", [h.make_node("Add", ["x", "x"], ["t"])], "t"),
                        else_branch=branch("inner_else", [h.make_node("Identity", ["x"], ["e"])], "e"))
    bias = numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32), "bias")
    then = branch("then", [inner, h.make_node("Add", ["twice", "bias"], ["sum"])], "sum", [bias])
    other = branch("else", [h.make_node("Sub", ["x", "one"], ["less"])], "less")
    nodes = cond_nodes + [h.make_node("If", [cond], ["y"], then_branch=then, else_branch=other)]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2, 3])],
                         [numpy_helper.from_array(np.array(1.0, np.float32), "one"),
                          numpy_helper.from_array(np.array(2, np.int64), "two")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("rank_test", ["Equal", "Greater"])
def test_if_on_a_static_shape_takes_its_branch(rank_test):
    """The condition compares the input's rank (a static shape) with 2: Equal takes the then branch, Greater the
    else one."""
    cond = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Size", ["s"], ["rank"]),
            h.make_node(rank_test, ["rank", "two"], ["c"])]
    model = if_model(cond, "c")
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(backend.prepare(model).run([x])[0], want, rtol=1e-6)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_if_on_a_run_time_condition_computes_both_branches(sign):
    """The condition (sum(x) > 1) is known only at run time: both branches run, and the output is selected."""
    cond = [h.make_node("ReduceSum", ["x"], ["total"], keepdims=0), h.make_node("Greater", ["total", "one"], ["c"])]
    model = if_model(cond, "c")
    x = sign * np.abs(np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32))
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(backend.prepare(model).run([x])[0], want, rtol=1e-6)


def test_run_time_branches_of_different_shapes_are_refused():
    """Both branches run and a Where selects: an output whose shape depends on the branch taken is refused."""
    then = branch("then", [h.make_node("ReduceSum", ["x"], ["s"], keepdims=1)], "s")
    other = branch("else", [h.make_node("Neg", ["x"], ["n"])], "n")
    nodes = [h.make_node("ReduceSum", ["x"], ["total"], keepdims=0), h.make_node("Greater", ["total", "one"], ["c"]),
             h.make_node("If", ["c"], ["y"], "choice", then_branch=then, else_branch=other)]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)],
                         [numpy_helper.from_array(np.array(1.0, np.float32), "one")])
    with pytest.raises(CglowError, match=r"If node 'choice': its condition is known only at run time, and its "
                                         r"branches give output 0 \('y'\) as float32\[1,1\] and float32\[2,3\]"):
        cglow.compile_model(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]))


def half_scan_and_if():
    """A Scan whose body computes in float16 (s += 1.5 x_t), then an If on the sum's sign whose branches do too."""
    scan_body = h.make_graph(
        [h.make_node("Mul", ["x_t", "k"], ["m"]), h.make_node("Add", ["s", "m"], ["s2"]),
         h.make_node("Identity", ["s2"], ["y_t"])], "body",
        [h.make_tensor_value_info("s", T.FLOAT16, [3]), h.make_tensor_value_info("x_t", T.FLOAT16, [3])],
        [h.make_tensor_value_info("s2", T.FLOAT16, [3]), h.make_tensor_value_info("y_t", T.FLOAT16, [3])],
        [numpy_helper.from_array(np.array(1.5, np.float16), "k")])
    then = h.make_graph([h.make_node("Mul", ["s_end", "s_end"], ["t"])], "then", [],
                        [h.make_tensor_value_info("t", T.FLOAT16, [3])])
    other = h.make_graph([h.make_node("Neg", ["s_end"], ["e"])], "else", [],
                         [h.make_tensor_value_info("e", T.FLOAT16, [3])])
    nodes = [h.make_node("Scan", ["s0", "x"], ["s_end", "ys"], body=scan_body, num_scan_inputs=1),
             h.make_node("ReduceSum", ["s_end"], ["r"], keepdims=0), h.make_node("Greater", ["r", "zero"], ["c"]),
             h.make_node("If", ["c"], ["z"], then_branch=then, else_branch=other)]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("s0", T.FLOAT16, [3]),
                                      h.make_tensor_value_info("x", T.FLOAT16, [5, 3])],
                         [h.make_tensor_value_info(n, T.FLOAT16, s) for n, s in
                          (("s_end", [3]), ("ys", [5, 3]), ("z", [3]))],
                         [numpy_helper.from_array(np.array(0, np.float16), "zero")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("as_c_loop", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_stored_types_inside_bodies(monkeypatch, as_c_loop, seed):
    """float16 arithmetic inside a Scan's body and an If's branches (both computed, a run-time condition) computes
    in float32 and rounds each op's result, as the main graph does; unrolled or as a loop in C."""
    from cglow.graph import subgraphs
    if as_c_loop:
        monkeypatch.setattr(subgraphs, "UNROLL_LIMIT", 0)
    model = half_scan_and_if()
    rng = np.random.default_rng(seed)
    s0, x = rng.standard_normal(3).astype(np.float16), rng.standard_normal((5, 3)).astype(np.float16)
    want = ReferenceEvaluator(model).run(None, {"s0": s0, "x": x})
    for got, expected in zip(backend.prepare(model).run([s0, x]), want, strict=True):
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, expected)
