"""Float weights that float16 or bfloat16 holds exactly (a float16 model's, whose import widens them to float32;
instr/narrow_weights.py): stored as such, unpacked a chunk of output channels at a time, by the matrix product's
kernel or by maps before each of a convolution's chunks; against --unpacked-weights, bit for bit, on the host, under
the sanitizers and under QEMU."""
from __future__ import annotations

import ml_dtypes
import numpy as np
from onnx import TensorProto as T, helper as h, numpy_helper
import pytest

import cglow
from cglow.options import Options
from cglow.tools import cross

from tests.sanitized import run_sanitized
from tests.util import checked_model, need_target

NARROW = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
X_SHAPE = {"matmul": [3, 64], "gemm": [3, 64], "conv": [1, 16, 6, 6], "depthwise": [1, 24, 8, 8],
           "grouped": [1, 12, 7, 7]}


def _model(kind: str, narrow: str, seed: int = 1):
    """A float32 layer (a MatMul; a Gemm by transposed weights and a bias; two convolutions, the second of 40 input
    channels; a depthwise convolution; one of 3 groups) whose weights are values of the narrow type; and an
    input."""
    rng = np.random.default_rng(seed)

    def weights(name: str, *shape: int):
        values = rng.standard_normal(shape).astype(np.float32).astype(NARROW[narrow]).astype(np.float32)
        return numpy_helper.from_array(values, name)
    if kind == "matmul":
        inits, nodes = [weights("w", 64, 40)], [h.make_node("MatMul", ["x", "w"], ["y"])]
    elif kind == "gemm":
        inits = [weights("w", 40, 64), weights("b", 40)]
        nodes = [h.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)]
    elif kind == "conv":
        inits = [weights("w", 40, 16, 3, 3), weights("b", 40), weights("w2", 24, 40, 3, 3)]
        nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c"], ["r"]),
                 h.make_node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1])]
    elif kind == "depthwise":
        inits = [weights("w", 24, 1, 5, 5)]
        nodes = [h.make_node("Conv", ["x", "w"], ["y"], pads=[2, 2, 2, 2], group=24)]
    else:
        inits = [weights("w", 48, 4, 3, 3)]
        nodes = [h.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=3)]
    graph = h.make_graph(nodes, "half_weights", [h.make_tensor_value_info("x", T.FLOAT, X_SHAPE[kind])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    return checked_model(graph, 17), rng.standard_normal(X_SHAPE[kind]).astype(np.float32)


@pytest.mark.parametrize("target", ["generic", "x86-avx512-vnni", "cortex-m4", "aarch64"])
@pytest.mark.parametrize("narrow", sorted(NARROW))
@pytest.mark.parametrize("kind", sorted(X_SHAPE))
def test_half_weights_take_half_the_flash(kind, narrow, target):
    """Bit for bit the output of the weights stored as float32 (--unpacked-weights); their bytes about halved; a
    chunk's scratch of 4 KiB at most where a pair of channels fits in it (narrow_weights.CHUNK_BYTES)."""
    model, x = _model(kind, narrow)
    packed = cglow.compile_model(model, options=Options(target=target))
    wide = cglow.compile_model(model, options=Options(target=target, narrow_weights=False))
    assert np.array_equal(cglow.build(packed)(x)[0], cglow.build(wide)(x)[0])
    assert f"as {narrow}" in packed.c_source and f"as {narrow}" not in wide.c_source
    assert packed.weights_bytes < 0.75 * wide.weights_bytes
    assert packed.arena_bytes - wide.arena_bytes <= 4096 + 64  # narrow_weights.CHUNK_BYTES


def test_half_weights_of_a_float16_model():
    """A float16 model's weights, which import widens to float32 (graph/stored_types.py), are stored as float16
    again: two matrix products'."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float16), name)
             for name, shape in (("w1", (64, 48)), ("w2", (48, 32)))]
    nodes = [h.make_node("MatMul", ["x", "w1"], ["m"]), h.make_node("Relu", ["m"], ["r"]),
             h.make_node("MatMul", ["r", "w2"], ["y"])]
    graph = h.make_graph(nodes, "half", [h.make_tensor_value_info("x", T.FLOAT16, [4, 64])],
                         [h.make_tensor_value_info("y", T.FLOAT16, [4, 32])], inits)
    model, x = checked_model(graph, 17), rng.standard_normal((4, 64)).astype(np.float16)
    packed, wide = (cglow.compile_model(model, options=Options(narrow_weights=n)) for n in (True, False))
    assert "as float16" in packed.c_source and packed.weights_bytes < 0.6 * wide.weights_bytes
    assert np.array_equal(cglow.build(packed)(x)[0], cglow.build(wide)(x)[0])


def test_weights_beyond_float16_stay_float32():
    """One weight float16 does not hold (nor bfloat16), or an infinite one: the layer's weights stay float32."""
    model, x = _model("matmul", "float16")
    w = numpy_helper.to_array(model.graph.initializer[0]).copy()
    for value in (1 + 2.0 ** -20, np.inf):
        w[3, 5] = value
        model.graph.initializer[0].CopyFrom(numpy_helper.from_array(w, "w"))
        compiled = cglow.compile_model(model)
        assert "as float16" not in compiled.c_source and "as bfloat16" not in compiled.c_source


@pytest.mark.parametrize("kind", ["gemm", "conv"])
def test_half_weights_under_the_sanitizers(kind):
    model, x = _model(kind, "float16")
    compiled = cglow.compile_model(model)
    assert np.array_equal(run_sanitized(compiled, [x])[0], cglow.build(compiled)(x)[0])


@pytest.mark.parametrize("kind", ["matmul", "conv"])
def test_half_weights_on_cortex_m4(kind):
    """The image under QEMU gives the host build's floats (the same C)."""
    target = need_target("cortex-m4")
    model, x = _model(kind, "float16")
    compiled = cglow.compile_model(model, options=Options(target=target.tiles))
    run = cross.run_image(cross.build_image(compiled, [x], target), compiled, target, count=False)
    assert np.array_equal(run.outputs[0], cglow.build(compiled)(x)[0])
