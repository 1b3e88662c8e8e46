"""float16 and bfloat16 activations kept as such in the arena (instr/stored_floats.py): the kernels convert each value
as they load it, and the rounding of a convolution's or a matrix product's result is its epilogue's store."""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper
from onnx.reference import ReferenceEvaluator
import pytest

import cglow
from cglow.tools.host import STRICT_FLAGS
from cglow.zoo import build

from tests.util import checked_model, need_tool

TYPES = {T.FLOAT16: np.float16, T.BFLOAT16: ml_dtypes.bfloat16}
# of an output's scale: a float16 step or two; bfloat16's 8 bits, where onnx's reference evaluator also sums a
# convolution's products in bfloat16 (kws: 0.0039 of 0.205, the same bits as before the activations were stored)
TOLERANCE = {T.FLOAT16: 2 ** -6, T.BFLOAT16: 2 ** -4}


def as_stored(model: onnx.ModelProto, elem: int) -> onnx.ModelProto:
    """The float32 model with its weights, inputs and outputs of the float type `elem` (its ops then compute in
    that type, as a converter's output does)."""
    stored = onnx.ModelProto()
    stored.CopyFrom(model)
    g = stored.graph
    kept = {name for n in g.node if n.op_type == "Resize" for name in n.input[1:]}  # roi and scales: float32
    for i, t in enumerate(g.initializer):
        if t.data_type == T.FLOAT and t.name not in kept:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(TYPES[elem]), t.name))
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == T.FLOAT:
            v.type.tensor_type.elem_type = elem
    del g.value_info[:]
    return stored


def _reference(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """Each op in float32, its result rounded to the model's type: what cglow computes (graph/stored_types.py)."""
    return ReferenceEvaluator(model).run(None, {model.graph.input[0].name: x})[0].astype(np.float32)


@pytest.mark.parametrize("elem", [T.FLOAT16, T.BFLOAT16])
def test_a_float16_network_takes_half_the_float32_arena(elem):
    """The zoo's kws (convolutions in place, batch norms, ReLUs, a pool, a matrix product, a softmax): its float16
    and bfloat16 arenas are half the float32 one (38400 bytes; float16 took 60480 while its activations were
    float32), and it computes what each op rounded to the type gives."""
    model = build("kws")
    stored = as_stored(model, elem)
    wide, narrow = cglow.compile_model(model), cglow.compile_model(stored)
    assert narrow.arena_bytes * 2 <= wide.arena_bytes, (narrow.arena_bytes, wide.arena_bytes)
    x = np.random.default_rng(3).standard_normal((1, 1, 49, 10)).astype(TYPES[elem])
    got = cglow.build(narrow)(x)[0].astype(np.float32)
    want = _reference(stored, x)
    assert np.abs(got - want).max() <= TOLERANCE[elem] * np.abs(want).max()


def _conv_relu_pool(elem: int) -> onnx.ModelProto:
    """Conv -> Relu -> MaxPool -> Conv -> Clip -> GlobalAveragePool -> Flatten -> MatMul, all of type `elem`."""
    rng = np.random.default_rng(8)
    dtype = TYPES[elem]
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(dtype), n)
             for n, s in (("w1", (8, 3, 3, 3)), ("b1", (8,)), ("w2", (8, 8, 3, 3)), ("fc", (8, 5)))]
    inits += [numpy_helper.from_array(np.array(v, dtype), n) for n, v in (("lo", -0.5), ("hi", 1.5))]
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1]), h.make_node("Clip", ["c2", "lo", "hi"], ["r2"]),
             h.make_node("GlobalAveragePool", ["r2"], ["g"]), h.make_node("Flatten", ["g"], ["f"]),
             h.make_node("MatMul", ["f", "fc"], ["y"])]
    graph = h.make_graph(nodes, "stored", [h.make_tensor_value_info("x", elem, [1, 3, 16, 16])],
                         [h.make_tensor_value_info("y", elem, [1, 5])], inits)
    return checked_model(graph, 17)


@pytest.mark.parametrize("elem", [T.FLOAT16, T.BFLOAT16])
def test_kernels_read_and_write_the_stored_type(elem):
    """No float32 copy of an activation: each convolution reads its input as stored and stores its result, its ReLU
    or Clip in its epilogue (a rounding does not change what they give: graph/stored_types.py EXACT); the values
    are each op's rounded to the type, under gcc and clang at -O0 and -O2."""
    model = _conv_relu_pool(elem)
    compiled = cglow.compile_model(model)
    convert = {T.FLOAT16: "cglow_half_to_float", T.BFLOAT16: "cglow_bfloat_to_float"}[elem]
    c = compiled.c_source
    run = c[c.index("int net_run("):]
    assert "_map(" not in run.split("_pool(")[0], "a map between the input and the max pool: " + run
    assert re.search(r"_pool\(NET_AT\(\w+, \d+\), NET_AT\(uint16_t", run), "the max pool reads the stored values: " + run
    assert c.count(f"{convert}(x[") >= 2 and "uint16_t *restrict y" in c
    x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(TYPES[elem])
    want = _reference(model, x)
    for cc, level in (("gcc", "-O0"), ("gcc", "-O2"), (need_tool("clang"), "-O2")):
        got = cglow.build(compiled, cc, (level,) + STRICT_FLAGS)(x)[0].astype(np.float32)
        assert np.abs(got - want).max() <= TOLERANCE[elem] * np.abs(want).max(), (cc, level)
