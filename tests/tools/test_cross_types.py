"""The stored element types on a Cortex-M55 (cglow.tools.targets "cortex-m55", under QEMU): a float16 network
(half inputs, weights and outputs, each op's float32 result rounded to half) and a weight-only int4 one (4-bit
weights with a scale per column, two per byte), built with the target's compiler under the strict flags and compared with the
host build of the same C and with onnx's reference evaluator (onnxruntime 1.32 dequantizes these int4 weights
otherwise: 2% of the output's scale away from the reference, which cglow matches to 1e-7)."""
from __future__ import annotations

from dataclasses import replace
import subprocess

import numpy as np
from onnx import TensorProto as T, helper as h, numpy_helper
from onnx.reference import ReferenceEvaluator
import pytest

import cglow
from cglow.options import Options
from cglow.tools import cross

from tests.half_network import half_network
from tests.util import checked_model, need_target, rel_error

RNG = np.random.default_rng(11)


def _int4_network():
    """MatMul by int4 weights with a per-column scale (weight-only quantization), then Relu."""
    w = h.make_tensor("w", T.INT4, [32, 24], RNG.integers(-8, 8, 768).tolist())
    scale = numpy_helper.from_array(RNG.uniform(0.01, 0.1, 24).astype(np.float32), "scale")
    nodes = [h.make_node("DequantizeLinear", ["w", "scale"], ["wf"], axis=1), h.make_node("MatMul", ["x", "wf"], ["m"]),
             h.make_node("Relu", ["m"], ["y"])]
    graph = h.make_graph(nodes, "int4", [h.make_tensor_value_info("x", T.FLOAT, [4, 32])],
                         [h.make_tensor_value_info("y", T.FLOAT, [4, 24])], [w, scale])
    return checked_model(graph, 21), {"x": RNG.standard_normal((4, 32)).astype(np.float32)}


@pytest.mark.parametrize("network", [half_network, _int4_network], ids=["float16", "int4"])
def test_stored_types_on_cortex_m55(network):
    target = need_target("cortex-m55")
    model, feeds = network()
    compiled = cglow.compile_model(model, options=Options(target=target.tiles))
    if network is _int4_network:  # its weights two per byte, unpacked by the kernel (graph/quant/weight_only.py)
        assert "cglow_nibbles8(" in compiled.c_source
    inputs = [feeds[t.name] for t in compiled.inputs]
    run = cross.run_image(cross.build_image(compiled, inputs, target), compiled, target, count=False)
    host = cglow.build(compiled)(*inputs)
    for got, on_host, want in zip(run.outputs, host, ReferenceEvaluator(model).run(None, feeds)):
        assert got.dtype == want.dtype
        assert rel_error(got, on_host) <= 1e-3  # a float16 step at most: the host's sums run in another order
        assert rel_error(got, want) <= 2e-3


def test_float16_conversions_in_hardware_give_the_software_bits():
    """A float16 network on the Cortex-M4F built by gcc as is (runtime_c/half_to_float.c and float_to_half.c in
    software) and with -mfp16-format=ieee (__fp16: VCVTB, one instruction each): the same bits out, and the
    hardware's conversions in the image."""
    target = need_target("cortex-m4")
    model, feeds = half_network()
    compiled = cglow.compile_model(model, options=Options(target=target.tiles))
    inputs = [feeds[t.name] for t in compiled.inputs]
    outputs = []
    for flags in ((), ("-mfp16-format=ieee",)):
        built = replace(target, cflags=target.cflags + flags)
        image = cross.build_image(compiled, inputs, built)
        outputs.append(cross.run_image(image, compiled, built, count=False).outputs)
    code = subprocess.run([f"{built.binutils}objdump", "-d", str(image)], capture_output=True, text=True).stdout
    assert "vcvtb.f32.f16" in code and "vcvtb.f16.f32" in code
    for software, hardware in zip(*outputs):
        assert np.array_equal(software.view(np.uint16), hardware.view(np.uint16))
