"""What the instruction passes achieve, checked on the program structure and on the numbers."""
from __future__ import annotations

import numpy as np
import pytest
import onnx
from onnx import TensorProto, helper, numpy_helper

import cglow
from cglow.instr.expr import ACC, Input, call, depth, helpers
from cglow.instr.ir import Conv, Epilogue, Gemm, Map, View
from cglow.instr.passes import FUSED_DEPTH

from tests.util import cglow_run, ort_run, random_feeds, rel_error


def model(nodes, inputs, output, inits) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(v, n) for n, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def compile_and_check(m: onnx.ModelProto):
    feeds = random_feeds(m)
    (got,), (want,) = cglow_run(m, feeds), ort_run(m, feeds)
    assert rel_error(got, want) <= 1e-5
    return cglow.compile_model(m).program


W = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32) / 4


def test_transposed_result_is_written_in_place_of_the_copy():
    """Attention's context: per-head products [1,4,8,4], transposed to [1,8,4,4], merged to [1,8,16]."""
    nodes = [helper.make_node("MatMul", ["p", "v"], ["c"]),
             helper.make_node("Transpose", ["c"], ["t"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["t", "s"], ["y"])]
    prog = compile_and_check(model(nodes, {"p": [1, 4, 8, 8], "v": [1, 4, 8, 4]}, "y",
                                   {"s": np.array([1, 8, 16], np.int64)}))
    assert [type(i) for i in prog.instrs] == [Gemm]
    assert prog.buffer(prog.instrs[0].out.buf).kind == "output"


def test_gelu_fuses_into_the_matmul_epilogue():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["h"]),
             helper.make_node("Div", ["h", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["p"]), helper.make_node("Mul", ["h", "p"], ["q"]),
             helper.make_node("Mul", ["q", "half"], ["y"])]
    prog = compile_and_check(model(nodes, {"x": [4, 16]}, "y", {
        "w": W, "b": W[0], "sqrt2": np.array(2 ** 0.5, np.float32), "one": np.array(1, np.float32),
        "half": np.array(0.5, np.float32)}))
    assert [type(i) for i in prog.instrs] == [Gemm]
    assert helpers(prog.instrs[0].epi.expr) == {"cglow_erf"}


def test_elementwise_result_overwrites_its_dying_input():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Exp", ["m"], ["e"]),
             helper.make_node("Tanh", ["e"], ["t"]),
             helper.make_node("MatMul", ["t", "w"], ["y"])]
    m = model(nodes, {"x": [4, 16]}, "y", {"w": W})
    prog = compile_and_check(m)
    arena = {v.buf for i in prog.instrs for v in (i.out,) if prog.buffer(v.buf).kind == "arena"}
    assert len(arena) == 1  # the matmul result, then exp(tanh(.)) over it, read by the second matmul
    assert cglow.compile_model(m).arena_bytes == 4 * 16 * 4


def test_a_long_chain_fuses_in_pieces_that_clang_takes():
    """300 Abs and Neg in turn, a chain as an unrolled Scan of scalar steps makes (the fuzzer's had Tanh): fused
    into one expression, 300 levels deep, which clang refuses (more than 256 brackets); in pieces FUSED_DEPTH deep
    at most."""
    names = ["x"] + [f"t{i}" for i in range(299)] + ["y"]
    m = model([helper.make_node(("Abs", "Neg")[i % 2], [a], [b]) for i, (a, b) in enumerate(zip(names, names[1:]))],
              {"x": [4]}, "y", {})
    prog = compile_and_check(m)
    assert max(depth(i.expr) for i in prog.instrs) <= FUSED_DEPTH
    x = random_feeds(m)["x"]
    assert rel_error(cglow.build(cglow.compile_model(m), cc="clang")(x)[0], ort_run(m, {"x": x})[0]) <= 1e-5


def test_softmax_finishes_in_the_output():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Softmax", ["m"], ["y"], axis=-1)]
    prog = compile_and_check(model(nodes, {"x": [4, 16]}, "y", {"w": W}))
    assert prog.buffer(prog.instrs[-1].out.buf).kind == "output"
    assert isinstance(prog.instrs[-1], Map)


def test_a_map_reading_a_buffer_renamed_earlier_in_the_same_pass():
    """exp overwrites the pooled result (no fusion into a pool); tanh + add, fused, then reads exp's
    renamed result and writes an arena buffer for the last pool."""
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2]), helper.make_node("Exp", ["p"], ["e"]),
             helper.make_node("Tanh", ["e"], ["t"]), helper.make_node("Add", ["t", "e"], ["a"]),
             helper.make_node("MaxPool", ["a"], ["y"], kernel_shape=[2, 2])]
    compile_and_check(model(nodes, {"x": [1, 2, 8, 8]}, "y", {}))


def test_an_epilogue_folds_its_initial_value_into_its_expression():
    """A kernel that starts its accumulators at zero adds Epilogue.init's input in the expression instead."""
    bias = View.of(3, (4,))
    epi = Epilogue(call("fmaxf", ACC, Input(0)), (bias,), init=0)
    assert epi.folded() == Epilogue(call("fmaxf", ACC + Input(0), Input(0)), (bias,))
    assert Epilogue(call("expf", ACC)).folded() == Epilogue(call("expf", ACC))


def test_fused_integer_result_keeps_its_wrap_around():
    """A uint8 sum wraps when stored; fused into the cast that reads it, it must wrap all the same."""
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.UINT8, [8]) for n in "ab"],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    feeds = {"a": np.arange(200, 208, dtype=np.uint8), "b": np.full(8, 100, np.uint8)}
    (got,), (want,) = cglow_run(m, feeds), ort_run(m, feeds)
    np.testing.assert_array_equal(got, want)
    assert [type(i) for i in cglow.compile_model(m).program.instrs] == [Map]


IN_PLACE = [  # id, channels, group, kernel, pads (t, l, b, r), dilations, batch
    ("pointwise", 6, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ("3x3", 4, 1, (3, 3), (1, 1, 1, 1), (1, 1), 1),
    ("depthwise", 5, 5, (3, 3), (1, 1, 1, 1), (1, 1), 2),
    ("5x3-dilated", 3, 1, (5, 3), (4, 2, 4, 2), (2, 2), 1),
    ("grouped-asymmetric", 4, 2, (3, 2), (2, 0, 0, 1), (1, 1), 1),
]


@pytest.mark.parametrize("case", IN_PLACE, ids=[c[0] for c in IN_PLACE])
def test_convolution_in_place(case):
    """conv -> relu -> conv of the same shape (relu's result, channels last, dies there) -> pool: the second
    conv overwrites its input."""
    _, c, group, kernel, pads, dilations, n = case
    rng = np.random.default_rng(5)
    weights = rng.standard_normal((c, c // group) + kernel).astype(np.float32) / 3
    nodes = [helper.make_node("Conv", ["x", "w0"], ["p"], kernel_shape=[1, 1]),
             helper.make_node("Relu", ["p"], ["r"]),
             helper.make_node("Conv", ["r", "w", "b"], ["c"], pads=list(pads), dilations=list(dilations), group=group),
             helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2])]
    prog = compile_and_check(model(nodes, {"x": [n, c, 9, 8]}, "y",
                                   {"w0": rng.standard_normal((c, c, 1, 1)).astype(np.float32), "w": weights,
                                    "b": rng.standard_normal(c).astype(np.float32)}))
    (conv,) = [i for i in prog.instrs if isinstance(i, Conv) and i.x.buf == i.out.buf]
    assert conv.ring is not None


def test_weights_read_by_many_gemms_are_packed_once():
    """Every step of a recurrent layer reads the transposed recurrent weights: one packed copy, not one per step."""
    from cglow import zoo
    compiled = cglow.compile_model(zoo.build("gru_kws"))
    params = sum(int(np.prod(t.dims)) * 4 for t in zoo.build("gru_kws").graph.initializer)
    assert compiled.weights_bytes <= 2 * params
