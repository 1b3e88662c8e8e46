"""Loop and Scan beyond the unrolling bound, as a loop in C (graph/c_loop.py, lower/repeat.py, the Repeat
instruction): long ones against onnxruntime, small ones with the bound lowered to 0 against the same model unrolled
(bit for bit), scanned axes and directions, loop-carried values of several types, a loop nested in a loop, the C
under the strict flags with clang too, and the refusals by name."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T, helper as h
import pytest

import cglow
from cglow.errors import CglowError
from cglow.graph import subgraphs
from cglow.tools.host import STRICT_FLAGS, check_warnings, sources
from tests.util import graph_model as model, need_tool, ort_run, value_info as value

RNG = np.random.default_rng(11)


def feeds(m) -> dict[str, np.ndarray]:
    """Seeded values for the model's inputs (float32 normal, integers small)."""
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in m.graph.input}
    return {n: RNG.standard_normal(s).astype(np.float32) for n, s in shapes.items()}


def run(m, given: dict[str, np.ndarray]) -> list[np.ndarray]:
    compiled = cglow.compile_model(m)
    return cglow.build(compiled)(*(given[t.name] for t in compiled.inputs))


def looped(m) -> str:
    """The C of the model, which must hold a loop over iterations."""
    c = cglow.compile_model(m).c_source
    assert "for (int32_t it0 = 0;" in c
    return c


def rnn_scan(steps: int, in_axis: int = 0, backward: int = 0, out_axis: int = 0, out_backward: int = 0):
    """h' = tanh(x W + h U) over `steps` slices of x [.., 3] (scanned along in_axis); h' stacked as the scan output,
    and a running sum as a second state."""
    body = h.make_graph([h.make_node("MatMul", ["x_t", "W"], ["wx"]), h.make_node("MatMul", ["h", "U"], ["uh"]),
                         h.make_node("Add", ["wx", "uh"], ["pre"]), h.make_node("Tanh", ["pre"], ["h2"]),
                         h.make_node("Add", ["total", "h2"], ["total2"]), h.make_node("Identity", ["h2"], ["y"])],
                        "body", [value("h", [1, 4]), value("total", [1, 4]), value("x_t", [1, 3])],
                        [value("h2", [1, 4]), value("total2", [1, 4]), value("y", [1, 4])])
    shape = [1, 3]
    shape.insert(in_axis, steps)
    scan = h.make_node("Scan", ["h0", "t0", "x"], ["h", "total", "ys"], body=body, num_scan_inputs=1,
                       scan_input_axes=[in_axis], scan_input_directions=[backward], scan_output_axes=[out_axis],
                       scan_output_directions=[out_backward])
    inits = [("W", RNG.standard_normal((3, 4)).astype(np.float32)),
             ("U", (0.5 * RNG.standard_normal((4, 4))).astype(np.float32))]
    return model([scan], [value("h0", [1, 4]), value("t0", [1, 4]), value("x", shape)],
                 [value("h", None), value("total", None), value("ys", None)], inits)


def counting_loop(trips: int, condition: bool = True):
    """a = a * 0.999 + x[i % 3] and k += i for `trips` iterations (the iteration number i read), both stacked as
    scan outputs with i % 3 as a float."""
    body = h.make_graph([h.make_node("Mod", ["i", "three"], ["j"]), h.make_node("Gather", ["x", "j"], ["xj"]),
                         h.make_node("Mul", ["a", "decay"], ["ad"]), h.make_node("Add", ["ad", "xj"], ["a2"]),
                         h.make_node("Add", ["k", "i"], ["k2"]), h.make_node("Identity", ["c"], ["c2"]),
                         h.make_node("Cast", ["j"], ["jf"], to=T.FLOAT)],
                        "body", [value("i", [], T.INT64), value("c", [], T.BOOL), value("a", [2]),
                                 value("k", [], T.INT64)],
                        [value("c2", [], T.BOOL), value("a2", [2]), value("k2", [], T.INT64), value("a2", [2]),
                         value("jf", [])])
    inits = [("trips", np.array(trips, np.int64)), ("three", np.array(3, np.int64)),
             ("decay", np.array(0.999, np.float32)), ("k0", np.array(0, np.int64))]
    loop = h.make_node("Loop", ["trips", "cond" if condition else "", "a0", "k0"], ["a", "k", "as", "js"], body=body)
    return model([loop], [value("a0", [2]), value("x", [3, 2])],
                 [value("a", None), value("k", None, T.INT64), value("as", None), value("js", None)],
                 inits + ([("cond", np.array(True))] if condition else []))


def check_against_ort(m, rtol=1e-5, atol=1e-5):
    given = feeds(m)
    for got, want in zip(run(m, given), ort_run(m, given)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def test_a_long_scan_runs_as_a_loop_in_c():
    """5000 steps of a small recurrent cell: 30000 nodes unrolled, one body in C, the same answers at -O0 and -O3."""
    m = rnn_scan(5000)
    looped(m)
    check_against_ort(m, atol=1e-4)
    compiled, given = cglow.compile_model(m), feeds(m)
    args = [given[t.name] for t in compiled.inputs]
    low, high = (cglow.build(compiled, cflags=(level,) + STRICT_FLAGS)(*args) for level in ("-O0", "-O3"))
    assert all(a.tobytes() == b.tobytes() for a, b in zip(low, high))


def test_a_long_loop_runs_as_a_loop_in_c():
    """5000 iterations reading the iteration number, with float and int64 loop-carried values and scan outputs."""
    m = counting_loop(5000)
    looped(m)
    check_against_ort(m, rtol=1e-4)


@pytest.fixture
def no_unrolling(monkeypatch):
    """Every Loop and Scan compiled as a loop in C."""
    monkeypatch.setattr(subgraphs, "UNROLL_LIMIT", 0)


def unrolled_and_looped(m, monkeypatch) -> tuple[list[np.ndarray], list[np.ndarray]]:
    given = feeds(m)
    unrolled = run(m, given)
    monkeypatch.setattr(subgraphs, "UNROLL_LIMIT", 0)
    looped(m)
    return unrolled, run(m, given)


@pytest.mark.parametrize("in_axis, backward, out_axis, out_backward", [(0, 0, 0, 0), (1, 1, -1, 0), (2, 0, 1, 1),
                                                                       (0, 1, 2, 1)])
def test_looped_scans_equal_unrolled_ones_bit_for_bit(monkeypatch, in_axis, backward, out_axis, out_backward):
    m = rnn_scan(6, in_axis, backward, out_axis, out_backward)
    unrolled, looped_out = unrolled_and_looped(m, monkeypatch)
    for a, b in zip(unrolled, looped_out):
        assert a.shape == b.shape and a.tobytes() == b.tobytes()
    check_against_ort(m)


@pytest.mark.parametrize("condition", [True, False])
def test_looped_loops_equal_unrolled_ones_bit_for_bit(monkeypatch, condition):
    m = counting_loop(7, condition)
    unrolled, looped_out = unrolled_and_looped(m, monkeypatch)
    for a, b in zip(unrolled, looped_out):
        assert a.shape == b.shape and a.tobytes() == b.tobytes()


def test_a_loop_nested_in_a_scan_builds_under_the_strict_flags(no_unrolling):
    """A Scan whose body holds a Loop of constant trip count reading a value from around both: two nested loops
    in C, built by the host compiler and by clang with the strict flags."""
    inner = h.make_graph([h.make_node("Mul", ["acc", "scale"], ["scaled"]), h.make_node("Add", ["scaled", "x_t"],
                                                                                         ["acc_out"]),
                          h.make_node("Identity", ["cond"], ["cond_out"])],
                         "inner", [value("i", [], T.INT64), value("cond", [], T.BOOL), value("acc", [2])],
                         [value("cond_out", [], T.BOOL), value("acc_out", [2])])
    body = h.make_graph([h.make_node("Loop", ["three", "", "s"], ["s2"], body=inner),
                         h.make_node("Neg", ["s2"], ["y"])],
                        "body", [value("s", [2]), value("x_t", [2])], [value("s2", [2]), value("y", [2])])
    scan = h.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1)
    m = model([scan], [value("s0", [2]), value("x", [5, 2]), value("scale", [2])], [value("s", None), value("ys", None)],
              [("three", np.array(3, np.int64))])
    c = looped(m)
    assert "for (int32_t it1 = 0; it1 < 3; ++it1)" in c
    check_against_ort(m)
    check_warnings(sources(cglow.compile_model(m)), need_tool("clang"))


def test_a_condition_that_may_stop_the_loop_unrolls_it(no_unrolling):
    """A Loop whose body leaves a condition computed at run time: not a loop in C (it may stop early), so unrolled,
    and refused when that condition does not fold."""
    body = h.make_graph([h.make_node("Add", ["acc", "acc"], ["acc_out"]),
                         h.make_node("ReduceSum", ["acc_out"], ["t"], keepdims=0),
                         h.make_node("Less", ["t", "hundred"], ["cond_out"])],
                        "body", [value("i", [], T.INT64), value("cond", [], T.BOOL), value("acc", [2])],
                        [value("cond_out", [], T.BOOL), value("acc_out", [2])])
    m = model([h.make_node("Loop", ["ten", "yes", "acc0"], ["acc"], body=body)], [value("acc0", [2])],
              [value("acc", None)], [("ten", np.array(10, np.int64)), ("hundred", np.array(100, np.float32)),
                                     ("yes", np.array(True))])
    with pytest.raises(CglowError, match=r"Loop node .*: unrolled, iteration 0 of 3 nodes would take"):
        cglow.compile_model(m)


def test_a_condition_output_without_a_condition_input_is_ignored(no_unrolling):
    """Without a condition input, a Loop runs its trip count whatever its body's condition says."""
    body = h.make_graph([h.make_node("Add", ["acc", "x"], ["acc_out"]), h.make_node("Not", ["cond"], ["cond_out"])],
                        "body", [value("i", [], T.INT64), value("cond", [], T.BOOL), value("acc", [2])],
                        [value("cond_out", [], T.BOOL), value("acc_out", [2])])
    m = model([h.make_node("Loop", ["four", "", "acc0"], ["acc"], body=body)], [value("acc0", [2]), value("x", [2])],
              [value("acc", None)], [("four", np.array(4, np.int64))])
    looped(m)
    given = feeds(m)
    np.testing.assert_allclose(run(m, given)[0], given["acc0"] + 4 * given["x"], rtol=1e-6)


def test_a_loop_carried_value_that_grows_is_refused(no_unrolling):
    body = h.make_graph([h.make_node("Concat", ["acc", "x"], ["acc_out"], axis=0),
                         h.make_node("Identity", ["cond"], ["cond_out"])],
                        "body", [value("i", [], T.INT64), value("cond", [], T.BOOL), value("acc", None)],
                        [value("cond_out", [], T.BOOL), value("acc_out", None)])
    m = model([h.make_node("Loop", ["four", "", "acc0"], ["acc"], body=body)], [value("acc0", [2]), value("x", [2])],
              [value("acc", None)], [("four", np.array(4, np.int64))])
    with pytest.raises(CglowError, match=r"Loop node .*: its loop-carried value 0 \('acc0'\) enters as float32\[2\] and "
                                         r"leaves an iteration as float32\[4\]; a loop in C needs one type"):
        cglow.compile_model(m)


def test_a_shape_that_depends_on_the_iteration_is_refused(no_unrolling):
    """A slice as long as the iteration number: its body, compiled once, cannot fold it."""
    body = h.make_graph([h.make_node("Unsqueeze", ["i", "zero"], ["end"]),
                         h.make_node("Slice", ["x", "zero", "end"], ["part"]),
                         h.make_node("ReduceSum", ["part"], ["acc_out"], keepdims=1),
                         h.make_node("Identity", ["cond"], ["cond_out"])],
                        "body", [value("i", [], T.INT64), value("cond", [], T.BOOL), value("acc", [1])],
                        [value("cond_out", [], T.BOOL), value("acc_out", [1])])
    m = model([h.make_node("Loop", ["four", "", "acc0"], ["acc"], body=body)], [value("acc0", [1]), value("x", [4])],
              [value("acc", None)], [("four", np.array(4, np.int64)), ("zero", np.array([0], np.int64))])
    with pytest.raises(CglowError, match=r"Loop node .*: 4 iterations of 4 nodes, beyond the unrolling bound, its body "
                                         r"is compiled once as a loop in C: "):
        cglow.compile_model(m)


def test_a_scan_output_of_run_time_length_is_refused(no_unrolling):
    body = h.make_graph([h.make_node("NonZero", ["x_t"], ["where"]), h.make_node("Identity", ["s"], ["s2"])],
                        "body", [value("s", [2]), value("x_t", [2])], [value("s2", [2]), value("where", None, T.INT64)])
    m = model([h.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1)],
              [value("s0", [2]), value("x", [5, 2])], [value("s", None), value("ys", None, T.INT64)])
    with pytest.raises(CglowError, match=r"Scan node .*: 5 iterations of 2 nodes, beyond the unrolling bound: its "
                                         r"body's output 'where' has a run-time length; a loop in C stacks slices"):
        cglow.compile_model(m)
