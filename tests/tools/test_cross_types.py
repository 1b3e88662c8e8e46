"""The stored element types on a Cortex-M55 (cglow.tools.targets "cortex-m55", under QEMU): a float16 network
(half inputs, weights and outputs, each op's float32 result rounded to half) and a weight-only int4 one (4-bit
weights with a scale per column), built with the target's compiler under the strict flags and compared with the
host build of the same C and with onnx's reference evaluator (onnxruntime 1.32 dequantizes these int4 weights
otherwise: 2% of the output's scale away from the reference, which cglow matches to 1e-7)."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T, helper as h, numpy_helper
from onnx.reference import ReferenceEvaluator
import pytest

import cglow
from cglow.options import Options
from cglow.tools import cross

from tests.util import checked_model, need_target, rel_error

RNG = np.random.default_rng(11)


def _half_network():
    """Conv 3x3 -> Relu -> global average pool -> Gemm, all float16."""
    w = numpy_helper.from_array((RNG.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float16), "w")
    fc = numpy_helper.from_array((RNG.standard_normal((8, 5)) * 0.3).astype(np.float16), "fc")
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c"], ["r"]),
             h.make_node("GlobalAveragePool", ["r"], ["p"]), h.make_node("Flatten", ["p"], ["f"]),
             h.make_node("MatMul", ["f", "fc"], ["y"])]
    graph = h.make_graph(nodes, "half", [h.make_tensor_value_info("x", T.FLOAT16, [1, 3, 8, 8])],
                         [h.make_tensor_value_info("y", T.FLOAT16, [1, 5])], [w, fc])
    return checked_model(graph, 17), {"x": RNG.standard_normal((1, 3, 8, 8)).astype(np.float16)}


def _int4_network():
    """MatMul by int4 weights with a per-column scale (weight-only quantization), then Relu."""
    w = h.make_tensor("w", T.INT4, [16, 6], RNG.integers(-8, 8, 96).tolist())
    scale = numpy_helper.from_array(RNG.uniform(0.01, 0.1, 6).astype(np.float32), "scale")
    nodes = [h.make_node("DequantizeLinear", ["w", "scale"], ["wf"], axis=1), h.make_node("MatMul", ["x", "wf"], ["m"]),
             h.make_node("Relu", ["m"], ["y"])]
    graph = h.make_graph(nodes, "int4", [h.make_tensor_value_info("x", T.FLOAT, [4, 16])],
                         [h.make_tensor_value_info("y", T.FLOAT, [4, 6])], [w, scale])
    return checked_model(graph, 21), {"x": RNG.standard_normal((4, 16)).astype(np.float32)}


@pytest.mark.parametrize("network", [_half_network, _int4_network], ids=["float16", "int4"])
def test_stored_types_on_cortex_m55(network):
    target = need_target("cortex-m55")
    model, feeds = network()
    compiled = cglow.compile_model(model, options=Options(target=target.tiles))
    inputs = [feeds[t.name] for t in compiled.inputs]
    run = cross.run_image(cross.build_image(compiled, inputs, target), compiled, target, count=False)
    host = cglow.build(compiled)(*inputs)
    for got, on_host, want in zip(run.outputs, host, ReferenceEvaluator(model).run(None, feeds)):
        assert got.dtype == want.dtype
        assert rel_error(got, on_host) <= 1e-3  # a float16 step at most: the host's sums run in another order
        assert rel_error(got, want) <= 2e-3
