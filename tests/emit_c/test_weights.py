"""Weights: exact literals in net.c (hex floats, decimal integers), and the weights file option."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest

import cglow
from cglow import zoo
from cglow.tools.host import STRICT_FLAGS, check_warnings, sources
from cglow.c_text import c_array_lines
from cglow.options import Options

from tests.util import need_tool, random_feeds

F32 = np.finfo(np.float32)
SPECIAL_FLOATS = np.array([0.0, -0.0, 1.0, -1.5, 0.1, F32.max, -F32.max, F32.tiny, -F32.tiny, F32.smallest_subnormal,
                           -F32.smallest_subnormal, F32.tiny - F32.smallest_subnormal, 3 * F32.smallest_subnormal,
                           np.inf, -np.inf, np.nan, 1e-30, -123456.789, 2.0 ** 100, np.pi], np.float32)
I64 = np.iinfo(np.int64)
SPECIAL_INTS = np.array([I64.min, I64.max, I64.min + 1, -1, 0, 1, 2 ** 31, -2 ** 31, 2 ** 32], np.int64)


def values_of(lines: list[str]) -> list[str]:
    return [v.strip() for line in lines for v in line.split(",") if v.strip()]


def test_float_literals_are_exact_hex_floats():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2 ** 32, 20000, dtype=np.uint64).astype(np.uint32)
    data = np.concatenate([SPECIAL_FLOATS, bits.view(np.float32)])
    data = data[np.isfinite(data)]
    back = np.array([float.fromhex(v.removesuffix("f")) for v in values_of(c_array_lines(data))], np.float32)
    np.testing.assert_array_equal(back.view(np.uint32), data.view(np.uint32))
    assert values_of(c_array_lines(SPECIAL_FLOATS[:6])) == [
        "0x0p+0f", "-0x0p+0f", "0x1p+0f", "-0x1.8p+0f", "0x1.99999ap-4f", "0x1.fffffep+127f"]
    assert values_of(c_array_lines(np.array([np.inf, -np.inf, np.nan], np.float32))) == ["INFINITY", "-INFINITY", "NAN"]


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64])
def test_integer_literals_are_exact(dtype):
    info = np.iinfo(dtype)
    data = np.array([info.min, info.max, 0, 1, info.min + 1, info.max - 1, info.max // 3], dtype)
    spelled = values_of(c_array_lines(data, per_line=3))
    macro = {f"INT{info.bits}_MIN": info.min}
    assert [macro.get(v) if v in macro else int(v.removesuffix("u")) for v in spelled] == data.tolist()
    assert all(v.endswith("u") == (info.kind == "u") for v in spelled)
    assert values_of(c_array_lines(np.array([True, False]))) == ["1", "0"]


def special_values_model():
    """y = x * W and z = i + K: with x ones and i zeros, the outputs are the weights W and K themselves."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [SPECIAL_FLOATS.size]),
              helper.make_tensor_value_info("i", TensorProto.INT64, [SPECIAL_INTS.size])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [SPECIAL_FLOATS.size]),
               helper.make_tensor_value_info("z", TensorProto.INT64, [SPECIAL_INTS.size])]
    nodes = [helper.make_node("Mul", ["x", "W"], ["y"]), helper.make_node("Add", ["i", "K"], ["z"])]
    weights = [numpy_helper.from_array(SPECIAL_FLOATS, "W"), numpy_helper.from_array(SPECIAL_INTS, "K")]
    graph = helper.make_graph(nodes, "special", inputs, outputs, weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("external", [False, True], ids=["embedded", "weights-file"])
def test_special_values_survive_a_compiled_model(external):
    compiled = cglow.compile_model(special_values_model(), options=Options(external_weights=external))
    assert ("-0x0p+0f" in compiled.c_source) != external
    y, z = cglow.build(compiled)(np.ones(SPECIAL_FLOATS.size, np.float32), np.zeros(SPECIAL_INTS.size, np.int64))
    finite = ~np.isnan(SPECIAL_FLOATS)
    np.testing.assert_array_equal(y[finite].view(np.uint32), SPECIAL_FLOATS[finite].view(np.uint32))
    assert np.isnan(y[~finite]).all()
    np.testing.assert_array_equal(z, SPECIAL_INTS)


@pytest.mark.parametrize("options", [Options(external_weights=True),
                                     Options(external_weights=True, caller_arena=True, io_in_arena=True, align=4)],
                         ids=["weights-file", "all-caller-memory"])
@pytest.mark.parametrize("name", ["vww", "gru_kws"])
def test_weights_file_matches_embedded_bit_for_bit(name, options):
    model = zoo.build(name)
    feeds = random_feeds(model, seed=5)
    default, compiled = cglow.compile_model(model), cglow.compile_model(model, options=options)
    x = [feeds[t.name] for t in default.inputs]
    for got, want in zip(cglow.build(compiled)(*x), cglow.build(default)(*x)):
        np.testing.assert_array_equal(got, want)
    assert compiled.weights_bytes == len(compiled.weights_blob) > default.weights_bytes
    assert "static const float" not in compiled.c_source
    for cc in ("gcc", "clang"):
        check_warnings(sources(compiled), need_tool(cc))


def test_output_is_deterministic():
    model = zoo.build("kws")
    first, second = (cglow.compile_model(model, options=Options(external_weights=True)) for _ in range(2))
    assert (first.c_source, first.h_source, first.weights_blob) == (second.c_source, second.h_source,
                                                                      second.weights_blob)


def test_a_c_program_loads_the_weights_file(tmp_path):
    """The file the CLI writes, read with fread: a run; a misaligned, NULL or foreign blob is refused."""
    need_tool("gcc")
    model_path = tmp_path / "kws.onnx"
    onnx.save(zoo.build("kws"), str(model_path))
    subprocess.run([sys.executable, "-m", "cglow", "emit", str(model_path), "-o", str(tmp_path / "net.c"),
                    "--weights-file", str(tmp_path / "net.bin")], check=True, capture_output=True)
    (tmp_path / "main.c").write_text("""#include <stdint.h>
#include <stdio.h>
#include "net.h"
static union { double d; int64_t i; unsigned char b[NET_WEIGHTS_BYTES + NET_WEIGHTS_ALIGN]; } memory;
static float x[NET_INPUT_0_SIZE], y[NET_OUTPUT_0_SIZE];
int main(int argc, char **argv)
{
    unsigned char *weights = memory.b + (NET_WEIGHTS_ALIGN - (uintptr_t)memory.b % NET_WEIGHTS_ALIGN)
                                        % NET_WEIGHTS_ALIGN;
    FILE *f = fopen(argv[argc - 1], "rb");
    int i, status;
    if (f == NULL || fread(weights, 1, NET_WEIGHTS_BYTES, f) != NET_WEIGHTS_BYTES) {
        return 100;
    }
    fclose(f);
    for (i = 0; i < NET_INPUT_0_SIZE; ++i) {
        x[i] = (float)(i % 7) - 3.0f;
    }
    status = net_run(weights, x, y);
    for (i = 0; i < NET_OUTPUT_0_SIZE; ++i) {
        printf("%a\\n", (double)y[i]);
    }
    status += 10 * net_run(weights + 1, x, y) + 20 * net_run(NULL, x, y);
    weights[NET_WEIGHTS_BYTES - 1] ^= 1;
    return status + 100 * net_run(weights, x, y);
}
""")
    subprocess.run(["gcc", "-O2", *STRICT_FLAGS, "-o", str(tmp_path / "main"), str(tmp_path / "net.c"),
                    str(tmp_path / "main.c"), "-lm"], check=True)
    run = subprocess.run([str(tmp_path / "main"), str(tmp_path / "net.bin")], capture_output=True, text=True)
    assert run.returncode == 10 * 1 + 20 * 1 + 100 * 2  # fine; misaligned and NULL refused; the wrong tag too
    got = np.array([float.fromhex(v) for v in run.stdout.split()], np.float32)
    inputs = (np.arange(490) % 7 - 3.0).astype(np.float32).reshape(1, 1, 49, 10)
    np.testing.assert_allclose(got, cglow.build(cglow.compile_model(zoo.build("kws")))(inputs)[0][0],
                               rtol=1e-6, atol=1e-7)
