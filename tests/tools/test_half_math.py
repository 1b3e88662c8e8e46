"""float16 arithmetic in the target's half type (`--half-math native`, instr/half_math.py): float16 networks on
the Cortex-M55 and AArch64 (+fp16) under QEMU against onnx's reference evaluator, each op rounded (gcc and clang,
-O0 and -O2); the same C on the host (the half branch compiled out: float32) under gcc and clang's strict flags, the
default's results bit for bit; the half branch under the strict flags; the refusal on a target without half
arithmetic.

Instructions of one net_run under QEMU (gcc 12 -O2), float32 arithmetic -> half, Cortex-M55 / AArch64: the
elementwise network 316,299 -> 50,225 / 324,085 -> 46,864; tests/tools/test_cross_types.py's Conv -> Relu -> pool ->
MatMul 71,855 -> 31,522 / 58,788 -> 17,031 (its conv and matrix kernels keep float32, their conversions from and to
float16 in hardware); the Softmax and reductions network 50,644 -> 22,992 / 50,768 -> 21,612; a * b + c -> Relu
81,037 -> 9,780 / 83,987 -> 5,427. The same outputs each time."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, TensorProto as T, helper as h, numpy_helper
from onnx.backend.test.runner import Runner
from onnx.reference import ReferenceEvaluator
import pytest

import cglow
from cglow.errors import CglowError
from cglow.options import Options
from cglow.tools import backend, cross
from cglow.tools.coverage import as_array
from cglow.tools.host import check_warnings, sources
from cglow.tools.targets import PICOLIBC_ARM_INCLUDE, with_clang

from tests.conformance_cases import all_cases, expected_failures, run_cases
from tests.half_network import half_network
from tests.util import checked_model, cglow_cmd, need_target, need_tool, rel_error, save

RNG = np.random.default_rng(5)
XFAIL = expected_failures()


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


def _softmax_network():
    """Softmax over rows, a ReduceMax and a ReduceSum, all float16: reductions (float32 accumulators), a math
    function (float32), and arithmetic."""
    nodes = [h.make_node("Softmax", ["x"], ["s"], axis=1), h.make_node("ReduceMax", ["x"], ["m"], keepdims=1),
             h.make_node("Sub", ["x", "m"], ["d"]), h.make_node("ReduceSum", ["d", "axes"], ["r"], keepdims=1),
             h.make_node("Mul", ["s", "r"], ["y"])]
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    graph = h.make_graph(nodes, "softmax", [h.make_tensor_value_info("x", T.FLOAT16, [6, 40])],
                         [h.make_tensor_value_info("y", T.FLOAT16, [6, 40])], [axes])
    return checked_model(graph, 18), {"x": (RNG.standard_normal((6, 40)) * 3).astype(np.float16)}


def _multiply_add_network():
    """a * b + c -> Relu, three float16 inputs read once each: one map in half arithmetic, a multiply and an add
    rounded apart (two ops of the graph)."""
    nodes = [h.make_node("Mul", ["a", "b"], ["m"]), h.make_node("Add", ["m", "c"], ["s"]),
             h.make_node("Relu", ["s"], ["y"])]
    graph = h.make_graph(nodes, "multiply_add", [h.make_tensor_value_info(n, T.FLOAT16, [512]) for n in "abc"],
                         [h.make_tensor_value_info("y", T.FLOAT16, [512])])
    return checked_model(graph, 17), {n: (RNG.standard_normal(512) * 4).astype(np.float16) for n in "abc"}


NETWORKS = [_elementwise_network, half_network, _softmax_network, _multiply_add_network]
IDS = ["elementwise", "conv", "softmax", "multiply_add"]


@pytest.mark.parametrize("network", NETWORKS, ids=IDS)
@pytest.mark.parametrize("cross_target", ["cortex-m55", "aarch64-linux"])
def test_native_half_under_qemu(cross_target, network):
    target = need_target(cross_target)
    model, feeds = network()
    compiled = cglow.compile_model(model, options=Options(target=target.tiles, half_math="native"))
    assert "cglow_half_load" in compiled.c_source
    inputs = [feeds[t.name] for t in compiled.inputs]
    run = cross.run_image(cross.build_image(compiled, inputs, target), compiled, target, count=False)
    for got, want in zip(run.outputs, ReferenceEvaluator(model).run(None, feeds)):
        assert got.dtype == want.dtype == np.float16
        assert rel_error(got, want) <= 4e-3  # float16 tolerance: a step or two


@pytest.mark.parametrize("cc", ["gcc", "clang"])
@pytest.mark.parametrize("network", NETWORKS, ids=IDS)
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


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("clang", [False, True], ids=["gcc", "clang"])
def test_native_half_rounds_each_op(clang, opt):
    """A map of half arithmetic on the Cortex-M55 gives onnx's reference bit for bit (each op rounded to float16)
    under gcc and clang (which would fuse the multiply and the add: runtime_c/half_load.c), at -O0 and -O2."""
    target = need_target("cortex-m55")
    if clang:
        need_tool("clang")
        target = with_clang(target, "cortex-m55-clang")
    model, feeds = _multiply_add_network()
    compiled = cglow.compile_model(model, options=Options(target="cortex-m55", half_math="native"))
    assert "cglow_half_store(" in compiled.c_source and "* cglow_half_load(" in compiled.c_source
    inputs = [feeds[t.name] for t in compiled.inputs]
    run = cross.run_image(cross.build_image(compiled, inputs, target, opt=(opt,)), compiled, target, count=False)
    np.testing.assert_array_equal(run.outputs[0], ReferenceEvaluator(model).run(None, feeds)[0])


def _float16_cases() -> list[str]:
    cases = all_cases()
    return [name for name in run_cases() if name not in XFAIL and TensorProto.FLOAT16 in
            [v.type.tensor_type.elem_type for v in (*cases[name].model.graph.input, *cases[name].model.graph.output)]]


@pytest.mark.slow
@pytest.mark.parametrize("name", _float16_cases())
def test_float16_node_cases_on_cortex_m55(name):
    """The node conformance cases with float16 inputs or outputs, compiled with --half-math native for the
    Cortex-M55 and run under QEMU, compared as onnx's official runner compares them; the inputs that shapes depend
    on (Range's) pinned to each data set's values, as cglow.tools.backend pins them."""
    target = need_target("cortex-m55")
    case = all_cases()[name]
    for inputs, outputs in case.data_sets:
        feeds = dict(zip([v.name for v in case.model.graph.input], [as_array(x) for x in inputs]))
        pinned = {n: feeds[n] for n in backend.shape_inputs(case.model)}
        model = backend.specialize(case.model, pinned) if pinned else case.model
        compiled = cglow.compile_model(model, options=Options(target="cortex-m55", half_math="native"))
        run = cross.run_image(cross.build_image(compiled, [feeds[t.name] for t in compiled.inputs], target), compiled,
                              target, count=False)
        Runner.assert_similar_outputs([as_array(x) for x in outputs], run.outputs, rtol=case.rtol, atol=case.atol)


def test_native_half_refused_without_half_arithmetic(tmp_path):
    with pytest.raises(CglowError, match="--half-math native: --target cortex-m4 has no half-precision"):
        Options(target="cortex-m4", half_math="native")
    model, _ = _elementwise_network()
    result = cglow_cmd("emit", save(model, tmp_path / "m.onnx"), "-o", str(tmp_path / "net.c"), "--target", "generic",
                       "--half-math", "native")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "--half-math native: --target generic" in result.stderr
