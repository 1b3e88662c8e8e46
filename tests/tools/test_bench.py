"""scripts/bench.py on the small autoencoder: the MAC count, the benchmark harness under the strict flags, its
outputs against onnxruntime, the printed table's shape. Timings are printed by the script, never checked."""
from __future__ import annotations

import importlib.util
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

import cglow
from cglow import zoo

from tests.util import ROOT, need_tool

SCRIPT = ROOT / "scripts" / "bench.py"


def load_bench():
    """scripts/bench.py as a module (registered, as its dataclass needs)."""
    if "cglow_bench_script" not in sys.modules:
        spec = importlib.util.spec_from_file_location("cglow_bench_script", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return sys.modules["cglow_bench_script"]


def test_macs_count_gemm_and_conv():
    bench = load_bench()
    # the autoencoder: 640-128-128-128-128-8-128-128-128-128-640 dense layers
    widths = [640, 128, 128, 128, 128, 8, 128, 128, 128, 128, 640]
    assert bench.macs(cglow.compile_model(zoo.build("autoencoder")).program) == \
        sum(a * b for a, b in zip(widths, widths[1:]))
    # a grouped 3x3 convolution, 8 -> 6 channels in 2 groups, 5x5 -> 3x3 output
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 5, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 3, 3])
    w = onnx.numpy_helper.from_array(np.ones((6, 4, 3, 3), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=2)
    model = helper.make_model(helper.make_graph([node], "g", [x], [y], [w]),
                              opset_imports=[helper.make_opsetid("", 17)])
    assert bench.macs(cglow.compile_model(model).program) == 6 * 3 * 3 * 4 * 3 * 3


def test_bench_script_on_the_autoencoder(capsys):
    """float and int8 (onnxruntime's quantization), with gcc: a table each, a row and the geometric mean."""
    need_tool("gcc")
    bench = load_bench()
    status = bench.main(["autoencoder", "--samples", "3", "--sample-ms", "1", "--warmup-ms", "0", "--cc", "gcc"])
    lines = capsys.readouterr().out.splitlines()
    assert status == 0, "\n".join(lines)
    assert len(lines) == 8  # the flags line; header, model and geometric mean, float then int8 after a blank line
    header = ["model", "MMACs", "ort", "ms", "gcc", "ms", "gcc/ort", "build", "s", "err", "check"]
    assert lines[1].split() == header and lines[5].split() == header and not lines[4]
    row, int8 = lines[2].split(), lines[6].split()
    assert row[0] == "autoencoder" and row[-1] == "ok" and len(row) == 8
    assert float(row[1]) == 0.26 and float(row[6]) <= bench.TOLERANCE
    assert int8[:2] == ["autoencoder", "int8"] and int8[-1] == "ok" and float(int8[-2]) <= bench.MAX_STEPS
    assert lines[3].split()[0] == "geomean" and len(lines[3].split()) == 2
    assert lines[1].rindex("  check") == lines[2].rindex("  ok")  # aligned columns


def test_bench_harness_prints_samples_and_outputs():
    need_tool("gcc")
    bench = load_bench()
    from cglow.tools.harness import harness_source
    compiled = cglow.compile_model(zoo.build("autoencoder"))
    inputs = bench.seeded_inputs(compiled)
    main = harness_source(compiled, inputs, samples=4, sample_ms=0.5, warmup_ms=0, warmup_runs=1)
    assert "_POSIX_C_SOURCE" in main and "_POSIX_C_SOURCE" not in compiled.c_source
    exe = bench.build_executable({"net.c": compiled.c_source, "net.h": compiled.h_source, "net_main.c": main})
    median, samples, (got,) = bench.time_cglow(exe, compiled)
    assert len(samples) == 4 and min(samples) <= median <= max(samples)
    via_cffi = cglow.build(compiled)(*inputs)[0]
    np.testing.assert_allclose(got, via_cffi, rtol=1e-4, atol=1e-5 * float(np.max(np.abs(via_cffi))))
