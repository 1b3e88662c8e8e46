"""float16 arithmetic in the target's half type (`--half-math native`, instr/half_math.py): a float16 network on
the Cortex-M55 under QEMU (half arithmetic and conversions in hardware) against onnx's reference evaluator, the same
C on the host (the half branch compiled out: float32) under gcc and clang's strict flags, and the refusal on a
target without half arithmetic.

Instructions of one net_run on the Cortex-M55 (QEMU, gcc 12 -O2), float32 arithmetic -> half: the elementwise
network below 918,087 -> 175,480; tests/tools/test_cross_types.py's Conv -> Relu -> pool -> MatMul network 71,855 ->
31,522 (its float kernels keep float32; their conversions from and to float16 take one instruction each)."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T, helper as h, numpy_helper
from onnx.reference import ReferenceEvaluator
import pytest

import cglow
from cglow.errors import CglowError
from cglow.options import Options
from cglow.tools import cross
from cglow.tools.host import check_warnings, sources
from cglow.tools.targets import PICOLIBC_ARM_INCLUDE

from tests.tools.test_cross_types import _half_network
from tests.util import checked_model, cglow_cmd, need_target, need_tool, rel_error, save

RNG = np.random.default_rng(5)


def _elementwise_network():
    """x * x + b -> Relu -> - x -> Clip, all float16 (x read twice, a constant, literal bounds)."""
    n = 1024
    b = numpy_helper.from_array((RNG.standard_normal(n) * 0.5).astype(np.float16), "b")
    lo, hi = (numpy_helper.from_array(np.array(v, np.float16), name) for v, name in ((-1.5, "lo"), (2.25, "hi")))
    nodes = [h.make_node("Mul", ["x", "x"], ["m"]), h.make_node("Add", ["m", "b"], ["a"]),
             h.make_node("Relu", ["a"], ["r"]), h.make_node("Sub", ["r", "x"], ["s"]),
             h.make_node("Clip", ["s", "lo", "hi"], ["c"]), h.make_node("Mul", ["c", "c"], ["d"]),
             h.make_node("Neg", ["d"], ["y"])]
    graph = h.make_graph(nodes, "elementwise", [h.make_tensor_value_info("x", T.FLOAT16, [n])],
                         [h.make_tensor_value_info("y", T.FLOAT16, [n])], [b, lo, hi])
    return checked_model(graph, 17), {"x": (RNG.standard_normal(n) * 2).astype(np.float16)}


NETWORKS = [_elementwise_network, _half_network]


@pytest.mark.parametrize("network", NETWORKS, ids=["elementwise", "conv"])
def test_native_half_on_cortex_m55(network):
    target = need_target("cortex-m55")
    model, feeds = network()
    compiled = cglow.compile_model(model, options=Options(target="cortex-m55", half_math="native"))
    assert "cglow_half_load" in compiled.c_source
    inputs = [feeds[t.name] for t in compiled.inputs]
    run = cross.run_image(cross.build_image(compiled, inputs, target), compiled, target, count=False)
    for got, want in zip(run.outputs, ReferenceEvaluator(model).run(None, feeds)):
        assert got.dtype == want.dtype == np.float16
        assert rel_error(got, want) <= 2e-3  # float16 tolerance


@pytest.mark.parametrize("cc", ["gcc", "clang"])
@pytest.mark.parametrize("network", NETWORKS, ids=["elementwise", "conv"])
def test_native_half_on_host_computes_in_float(cc, network):
    """Without half arithmetic the same file computes in float32: the default's results, bit for bit."""
    need_tool(cc)
    model, feeds = network()
    compiled = cglow.compile_model(model, options=Options(target="cortex-m55", half_math="native"))
    check_warnings(sources(compiled), cc)
    default = cglow.compile_model(model, options=Options(target="cortex-m55"))
    inputs = [feeds[t.name] for t in compiled.inputs]
    for got, want in zip(cglow.build(compiled, cc)(*inputs), cglow.build(default, cc)(*inputs)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("cc", ["arm-none-eabi-gcc", "clang"])
def test_native_half_strict_flags_for_cortex_m55(cc):
    """The half branch compiled in (gcc and clang for the Cortex-M55): no warning under -pedantic."""
    need_tool(cc)
    model, _ = _elementwise_network()
    compiled = cglow.compile_model(model, options=Options(target="cortex-m55", half_math="native"))
    flags = ("-mthumb", "-mcpu=cortex-m55", "-mfloat-abi=hard", "-std=c99", "-pedantic", "-Wall", "-Wextra",
             "-Werror", "-Wdouble-promotion")
    flags = ("--target=arm-none-eabi", *flags, "-isystem", PICOLIBC_ARM_INCLUDE) if cc == "clang" else \
        ("--specs=picolibc.specs", *flags)
    check_warnings(sources(compiled), cc, flags)


def test_native_half_refused_without_half_arithmetic(tmp_path):
    with pytest.raises(CglowError, match="--half-math native: --target cortex-m4 has no half-precision"):
        Options(target="cortex-m4", half_math="native")
    model, _ = _elementwise_network()
    result = cglow_cmd("emit", save(model, tmp_path / "m.onnx"), "-o", str(tmp_path / "net.c"), "--target", "generic",
                       "--half-math", "native")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "--half-math native: --target generic" in result.stderr
