"""Loop and Scan unrolled at import (graph/unroll.py), against onnxruntime (onnx's reference evaluator scans only
axis 0 forward, and stacks a Loop's scalar scan outputs as [n, 1]) or NumPy: scanned axes and directions, several states and scan outputs, a Loop whose condition folds each
iteration, control flow nested in a body, Scan-8's batch axis, and the refusals by name."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T, helper as h
import pytest

import cglow
from cglow.errors import CglowError
from cglow.graph.subgraphs import UNROLL_LIMIT
from tests.util import cglow_run, graph_model as model, ort_run, value_info as value

RNG = np.random.default_rng(7)


def run(m, *arrays) -> list[np.ndarray]:
    return cglow_run(m, dict(zip([v.name for v in m.graph.input], arrays)))


def check(m, *arrays):
    """cglow's outputs equal onnxruntime's, shapes included."""
    want = ort_run(m, dict(zip([v.name for v in m.graph.input], arrays)))
    for got, expected in zip(run(m, *arrays), want):
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def scan_model(in_axes, in_dirs, out_axes, out_dirs):
    """Two states (a running sum of the first input's slices, a running product of the second's) and two scan
    outputs (the sum so far, and the second slice times the product), over inputs a [3, 4, 2] and b [2, 4]
    scanned along axes of length 4."""
    body = h.make_graph([h.make_node("Add", ["s", "a_t"], ["s2"]), h.make_node("Mul", ["p", "b_t"], ["p2"]),
                         h.make_node("Identity", ["s2"], ["y"]), h.make_node("Mul", ["b_t", "p2"], ["z"])],
                        "body", [value("s", [3, 2]), value("p", [2]), value("a_t", [3, 2]), value("b_t", [2])],
                        [value("s2", [3, 2]), value("p2", [2]), value("y", None), value("z", None)])
    scan = h.make_node("Scan", ["s0", "p0", "a", "b"], ["s", "p", "ys", "zs"], body=body, num_scan_inputs=2,
                       scan_input_axes=in_axes, scan_input_directions=in_dirs, scan_output_axes=out_axes,
                       scan_output_directions=out_dirs)
    return model([scan], [value("s0", [3, 2]), value("p0", [2]), value("a", [3, 4, 2]), value("b", [2, 4])],
                 [value("s", None), value("p", None), value("ys", None), value("zs", None)])


@pytest.mark.parametrize("in_dirs, out_axes, out_dirs", [([0, 0], [0, 0], [0, 0]), ([1, 0], [-1, 1], [0, 1]),
                                                         ([0, 1], [2, 0], [1, 1])])
def test_scan_axes_and_directions(in_dirs, out_axes, out_dirs):
    m = scan_model([1, -1], in_dirs, out_axes, out_dirs)
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in ((3, 2), (2,), (3, 4, 2), (2, 4))]
    check(m, *arrays)


def loop_body(nodes, extra_outputs=()):
    """A Loop body (i, cond, acc) -> (cond_out, acc_out, ...): its nodes compute cond_out and acc_out."""
    return h.make_graph(nodes, "body", [value("i", [], T.INT64), value("cond", [], T.BOOL), value("acc", [2])],
                        [value("cond_out", [], T.BOOL), value("acc_out", [2])] + list(extra_outputs))


def test_loop_with_scan_outputs_and_a_condition_that_folds():
    """acc += x * i while i < 3 (a condition computed from the iteration number), at most 10 times; the scan output
    stacks each acc."""
    body = loop_body([h.make_node("Cast", ["i"], ["f"], to=T.FLOAT), h.make_node("Mul", ["x", "f"], ["step"]),
                      h.make_node("Add", ["acc", "step"], ["acc_out"]),
                      h.make_node("Less", ["i", "three"], ["cond_out"]),
                      h.make_node("Identity", ["acc_out"], ["seen"])], [value("seen", None)])
    loop = h.make_node("Loop", ["ten", "yes", "acc0"], ["acc", "seen_all"], body=body)
    m = model([loop], [value("acc0", [2]), value("x", [2])], [value("acc", None), value("seen_all", None)],
              [("ten", np.array(10, np.int64)), ("yes", np.array(True)), ("three", np.array(3, np.int64))])
    acc0, x = RNG.standard_normal(2).astype(np.float32), RNG.standard_normal(2).astype(np.float32)
    check(m, acc0, x)
    acc, seen = run(m, acc0, x)
    assert seen.shape == (4, 2)  # iterations 0 to 3: the condition is false after the fourth


def test_loop_with_a_trip_count_and_no_condition():
    """A for-loop (no condition input): the body's condition output is ignored."""
    body = loop_body([h.make_node("Add", ["acc", "x"], ["acc_out"]), h.make_node("Not", ["cond"], ["cond_out"])])
    loop = h.make_node("Loop", ["four", "", "acc0"], ["acc"], body=body)
    m = model([loop], [value("acc0", [2]), value("x", [2])], [value("acc", None)], [("four", np.array(4, np.int64))])
    acc0, x = RNG.standard_normal(2).astype(np.float32), RNG.standard_normal(2).astype(np.float32)
    np.testing.assert_allclose(run(m, acc0, x)[0], acc0 + 4 * x, rtol=1e-6)


def test_nested_control_flow():
    """A Scan whose body holds an If on a run-time condition (the slice's sum > 0) and a Loop of constant trip
    count."""
    twice = h.make_graph([h.make_node("Add", ["x_t", "x_t"], ["d"])], "then", [], [value("d", None)])
    neg = h.make_graph([h.make_node("Neg", ["x_t"], ["n"])], "else", [], [value("n", None)])
    inner = loop_body([h.make_node("Add", ["acc", "picked"], ["acc_out"]), h.make_node("Identity", ["cond"],
                                                                                        ["cond_out"])])
    body = h.make_graph([h.make_node("ReduceSum", ["x_t"], ["total"], keepdims=0),
                         h.make_node("Greater", ["total", "zero"], ["positive"]),
                         h.make_node("If", ["positive"], ["picked"], then_branch=twice, else_branch=neg),
                         h.make_node("Loop", ["two", "yes", "s"], ["s2"], body=inner),
                         h.make_node("Identity", ["s2"], ["y"])],
                        "body", [value("s", [2]), value("x_t", [2])], [value("s2", [2]), value("y", None)])
    scan = h.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1)
    m = model([scan], [value("s0", [2]), value("x", [5, 2])], [value("s", None), value("ys", None)],
              [("zero", np.array(0, np.float32)), ("two", np.array(2, np.int64)), ("yes", np.array(True))])
    check(m, RNG.standard_normal(2).astype(np.float32), RNG.standard_normal((5, 2)).astype(np.float32))


def test_scan8_with_a_batch_axis():
    """Scan-8: values with a batch axis first (here 2), the scanned axis second."""
    body = h.make_graph([h.make_node("Add", ["s", "x_t"], ["s2"]), h.make_node("Identity", ["s2"], ["y"])], "body",
                        [value("s", [3]), value("x_t", [3])], [value("s2", [3]), value("y", [3])])
    scan = h.make_node("Scan", ["", "s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1, directions=[1])
    m = model([scan], [value("s0", [2, 3]), value("x", [2, 4, 3])], [value("s", [2, 3]), value("ys", [2, 4, 3])],
              opset=8)
    s0, x = RNG.standard_normal((2, 3)).astype(np.float32), RNG.standard_normal((2, 4, 3)).astype(np.float32)
    s, ys = run(m, s0, x)
    want = s0[:, None, :] + np.cumsum(x[:, ::-1], axis=1)
    np.testing.assert_allclose(ys, want, rtol=1e-5)
    np.testing.assert_allclose(s, want[:, -1], rtol=1e-5)


def counting_loop(trips: str, cond: str, inits):
    """acc doubled each iteration; the trip count and condition named `trips` and `cond` ("": left out), graph inputs
    unless `inits` gives them."""
    body = loop_body([h.make_node("Add", ["acc", "acc"], ["acc_out"]), h.make_node("Identity", ["cond"],
                                                                                    ["cond_out"])])
    inputs = [value("acc0", [2])] + [value(n, [], t) for n, t in ((trips, T.INT64), (cond, T.BOOL))
                                     if n and n not in dict(inits)]
    return model([h.make_node("Loop", [trips, cond, "acc0"], ["acc"], body=body)], inputs, [value("acc", None)],
                 inits)


def test_a_run_time_trip_count_is_refused():
    m = counting_loop("m", "c", [("c", np.array(True))])
    with pytest.raises(CglowError, match=r"Loop node .*: its trip count \(input 'm'\) is known only at run time"):
        cglow.compile_model(m)


def test_a_condition_known_only_at_run_time_is_refused():
    body = loop_body([h.make_node("Add", ["acc", "acc"], ["acc_out"]), h.make_node("ReduceSum", ["acc_out"], ["t"],
                                                                                    keepdims=0),
                      h.make_node("Less", ["t", "hundred"], ["cond_out"])])
    m = model([h.make_node("Loop", ["ten", "yes", "acc0"], ["acc"], body=body)], [value("acc0", [2])],
              [value("acc", None)], [("ten", np.array(10, np.int64)), ("yes", np.array(True)),
                                     ("hundred", np.array(100, np.float32))])
    with pytest.raises(CglowError, match=r"the condition that iteration 1 leaves is known only at run time"):
        cglow.compile_model(m)


def test_unrolling_beyond_the_bound_is_refused():
    """A Loop without a trip count, whose condition stays true: unrolled until the bound (graph/c_loop.py runs a
    loop in C only of a constant trip count)."""
    m = counting_loop("", "c", [("c", np.array(True))])
    with pytest.raises(CglowError, match=rf"Loop node .*: unrolled, iteration {UNROLL_LIMIT // 2} of 2 nodes would "
                                         rf"take the model's copied loop bodies beyond {UNROLL_LIMIT} nodes; beyond "
                                         r"that bound a Loop runs as a loop in C only with a constant trip count"):
        cglow.compile_model(m)


def test_a_body_that_does_not_fit_its_node_is_refused():
    """A Scan of two inputs whose body takes three, named rather than copied."""
    m = scan_model([0, 0], [0, 0], [0, 0], [0, 0])
    m.graph.node[0].input[:] = ["s0", "a", "b"]
    m.graph.node[0].output[:] = ["s", "ys", "zs"]
    with pytest.raises(CglowError, match=r"Scan node .*: its body has 4 inputs and 4 outputs, where its inputs and "
                                         r"outputs call for 3 and 3"):
        cglow.compile_model(m)
