"""The C API options: a caller-supplied arena, the arena's alignment, and inputs/outputs in the arena."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

import cglow
from cglow import zoo
from cglow.tools.host import STRICT_FLAGS, check_warnings, sources
from cglow.options import Options

from tests.util import need_tool, nonzero_model, random_feeds

VARIANTS = {
    "caller-arena": Options(caller_arena=True),
    "io-in-arena": Options(io_in_arena=True),
    "caller-io": Options(caller_arena=True, io_in_arena=True),
    "align-4": Options(align=4),
    "align-64": Options(align=64, caller_arena=True),
    "weights-file": Options(external_weights=True),
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", ["kws", pytest.param("transformer", marks=pytest.mark.slow),
                                  pytest.param("inception", marks=pytest.mark.slow)])
def test_variants_give_the_same_numbers(name, variant):
    """Every variant on kws in `make quick`; on the transformer and Inception (two builds of ~1 s each, cold, per
    variant) in `make test`."""
    model = zoo.build(name)
    feeds = random_feeds(model, seed=3)
    default = cglow.compile_model(model)
    compiled = cglow.compile_model(model, options=VARIANTS[variant])
    assert f"#define NET_ARENA_ALIGN {max(VARIANTS[variant].align, 4)}" in compiled.h_source
    assert compiled.plan.offsets and all(o % compiled.plan.align == 0 for o in compiled.plan.offsets.values())
    x = [feeds[t.name] for t in default.inputs]
    for got, want in zip(cglow.build(compiled)(*x), cglow.build(default)(*x)):
        np.testing.assert_array_equal(got, want)
    check_warnings(sources(compiled), need_tool("clang"))


def test_io_in_arena_holds_inputs_and_outputs():
    model = zoo.build("autoencoder")
    plain, io = cglow.compile_model(model), cglow.compile_model(model, options=Options(io_in_arena=True))
    inputs_outputs = sum(t.size * 4 for t in plain.inputs + plain.outputs)
    assert plain.arena_bytes < io.arena_bytes < plain.arena_bytes + inputs_outputs
    assert "int net_run(void);" in io.h_source and "float *net_input_0(void);" in io.h_source


def test_two_caller_arenas_run_one_model_twice(tmp_path):
    """One program, two instances of the model in two arenas, interleaved; a misaligned arena is refused."""
    need_tool("gcc")
    c = cglow.compile_model(zoo.build("kws"), options=Options(caller_arena=True))
    (tmp_path / "net.c").write_text(c.c_source)
    (tmp_path / "net.h").write_text(c.h_source)
    (tmp_path / "main.c").write_text("""#include <stdio.h>
#include "net.h"
static union { float f; long long l; unsigned char b[NET_ARENA_BYTES + NET_ARENA_ALIGN]; } a1, a2;
static float x1[NET_INPUT_0_SIZE], x2[NET_INPUT_0_SIZE], y1[NET_OUTPUT_0_SIZE], y2[NET_OUTPUT_0_SIZE];
int main(void)
{
    int i, status;
    for (i = 0; i < NET_INPUT_0_SIZE; ++i) {
        x1[i] = (float)(i % 7) - 3.0f;
        x2[i] = (float)(i % 5) * 0.5f;
    }
    status = net_run(a1.b, x1, y1) + net_run(a2.b, x2, y2);
    for (i = 0; i < NET_OUTPUT_0_SIZE; ++i) {
        printf("%a %a\\n", (double)y1[i], (double)y2[i]);
    }
    return status + 10 * net_run(a1.b + 1, x1, y1);
}
""")
    subprocess.run(["gcc", "-O2", *STRICT_FLAGS, "-o", str(tmp_path / "main"), str(tmp_path / "net.c"),
                    str(tmp_path / "main.c"), "-lm"], check=True)
    run = subprocess.run([str(tmp_path / "main")], capture_output=True, text=True)
    assert run.returncode == 10  # both runs fine, the misaligned one refused
    pairs = np.array([[float.fromhex(v) for v in line.split()] for line in run.stdout.splitlines()], np.float32)
    host = cglow.build(cglow.compile_model(zoo.build("kws")))
    for column, x in ((0, lambda i: float(i % 7) - 3.0), (1, lambda i: float(i % 5) * 0.5)):
        inputs = np.array([x(i) for i in range(490)], np.float32).reshape(1, 1, 49, 10)
        np.testing.assert_allclose(pairs[:, column], host(inputs)[0][0], rtol=1e-6, atol=1e-7)


def test_count_of_an_output_of_run_time_length_reaches_the_caller(tmp_path):
    """A plain main.c: net_run writes the count through its extra argument, the capacity is a macro, and the entries
    past the count are zero; with --io-in-arena the count is read through its accessor."""
    cc = need_tool("gcc")
    for options, call, count in ((Options(), "net_run(x, y, &count)", "count"),
                                 (Options(io_in_arena=True), "net_run()", "*net_output_0_count()")):
        c = cglow.compile_model(nonzero_model(), options=options)
        assert "#define NET_OUTPUT_0_COUNT_AXIS 1" in c.h_source and "#define NET_OUTPUT_0_CAPACITY 12" in c.h_source
        (tmp_path / "net.c").write_text(c.c_source)
        (tmp_path / "net.h").write_text(c.h_source)
        io = "float *x = net_input_0(); const int64_t *y = net_output_0();" if options.io_in_arena else \
            "static float x[NET_INPUT_0_SIZE]; static int64_t y[NET_OUTPUT_0_SIZE]; int64_t count = -1;"
        (tmp_path / "main.c").write_text(f"""#include <stdio.h>
#include "net.h"
int main(void)
{{
    {io}
    int i, status;
    for (i = 0; i < NET_INPUT_0_SIZE; ++i) {{
        x[i] = (float)(i % 3 == 1);
    }}
    x[5] = 0.0f;
    x[6] = 2.0f;
    status = {call};
    printf("%d %d\\n", (int){count}, NET_OUTPUT_0_CAPACITY);
    for (i = 0; i < NET_OUTPUT_0_SIZE; ++i) {{
        printf("%d\\n", (int)y[i]);
    }}
    return status;
}}
""")
        subprocess.run([cc, "-O2", *STRICT_FLAGS, "-o", str(tmp_path / "main"), str(tmp_path / "net.c"),
                        str(tmp_path / "main.c"), "-lm"], check=True)
        run = subprocess.run([str(tmp_path / "main")], capture_output=True, text=True, check=True)
        head, *values = run.stdout.split("\n")[:-1]
        x = (np.arange(12) % 3 == 1).astype(np.float32)
        x[5], x[6] = 0, 2
        want = np.array(np.nonzero(x.reshape(3, 4)))
        assert head == f"{want.shape[1]} 12"
        whole = np.zeros((2, 12), np.int64)
        whole[:, :want.shape[1]] = want
        np.testing.assert_array_equal(np.array(values, np.int64).reshape(2, 12), whole)
