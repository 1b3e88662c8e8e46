"""The compiler matrix (cglow.tools.matrix). The pattern gcc 12 -O2 miscompiled (a transposed copy of attention keys, a
kernel called twice with the same constant arena addresses), built as cglow writes kernels, under every host
setting; every zoo model but MobileNetV2 under every host setting and, where its weights fit, under
arm-none-eabi-gcc -O2 and -Os on the Cortex-M4 (QEMU), against onnxruntime within 1e-5 of each output's scale and
bit for bit against the first level of the same compiler."""
from __future__ import annotations

from functools import lru_cache
import re
import subprocess

import pytest

import cglow
from cglow import zoo
from cglow.tools import matrix
from cglow.tools.host import STRICT_FLAGS, build_cached, compiler_version
from cglow.options import Options
from cglow.tools.reference import rel_error
from cglow.runtime_files import RUNTIME_C
from cglow.tools.targets import TARGETS

from tests.util import need_tool, ort_run, random_feeds

# net_run's kernels as cglow writes them: q @ k^T's keys transposed by a copy (keys) between a kernel that writes
# them (fill) and one that reads the copy (use), twice with the same arena offsets, as two attention blocks of one
# shape are. gcc 12 -O2 specialized `keys` for those constant addresses and then dropped both calls.
PATTERN = """#include <stdint.h>
#include <stdio.h>

{kernel}

static union {{
    float f;
    int64_t i;
}} arena[8192];
#define AT(type, offset) ((type *)(void *)((unsigned char *)arena + (offset)))

CGLOW_KERNEL void fill(float *restrict y, const float *restrict x0)
{{
    for (int32_t i0 = 0; i0 < 3840; ++i0) {{
        y[i0] = x0[i0] * 2.0f;
    }}
}}

CGLOW_KERNEL void keys(float *restrict y, const float *restrict x0)
{{
    for (int32_t i0 = 0; i0 < 4; ++i0) {{
        for (int32_t i1 = 0; i1 < 80; ++i1) {{
            for (int32_t i2 = 0; i2 < 4; ++i2) {{
                y[i0 * 320 + i1 * 4 + i2] = x0[i0 * 960 + i1 + i2 * 240];
            }}
        }}
    }}
}}

CGLOW_KERNEL void use(float *restrict y, const float *restrict x0, const float *restrict x1)
{{
    for (int32_t i0 = 0; i0 < 1280; ++i0) {{
        y[i0] = x0[i0] + x1[i0];
    }}
}}

static int run(const float *input, float *output)
{{
    fill(AT(float, 320), input);
    keys(AT(float, 20480), AT(float, 320));
    use(output, AT(float, 20480), input);
    fill(AT(float, 320), input + 1);
    keys(AT(float, 20480), AT(float, 320));
    use(output + 1280, AT(float, 20480), input);
    return 0;
}}

int main(void)
{{
    static float input[3841], output[2560];
    int wrong = 0;
    for (int i = 0; i < 3841; ++i) {{
        input[i] = (float)i;
    }}
    run(input, output);
    for (int r = 0; r < 2; ++r) {{
        for (int i0 = 0; i0 < 4; ++i0) {{
            for (int i1 = 0; i1 < 80; ++i1) {{
                for (int i2 = 0; i2 < 4; ++i2) {{
                    float want = input[r + i0 * 960 + i1 + i2 * 240] * 2.0f + input[i0 * 320 + i1 * 4 + i2];
                    wrong += output[r * 1280 + i0 * 320 + i1 * 4 + i2] != want;
                }}
            }}
        }}
    }}
    printf("%d wrong\\n", wrong);
    return 0;
}}
"""
KERNEL = (RUNTIME_C / "kernel.c").read_text()


def wrong_elements(kernel: str, setting: matrix.Setting) -> int:
    program = build_cached({"pattern.c": PATTERN.format(kernel=kernel)}, need_tool(setting.cc),
                           (setting.opt, *STRICT_FLAGS), "pattern-{}", quiet=True)
    out = subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


@pytest.mark.parametrize("setting", matrix.HOST, ids=lambda s: s.label)
def test_the_pattern_gcc_12_miscompiled_runs_right(setting):
    assert wrong_elements(KERNEL, setting) == 0


def test_the_pattern_still_makes_gcc_12_drop_the_calls_without_noipa():
    """The test above can fail: without runtime_c/kernel.c's noipa, gcc 12 -O2 gets the pattern wrong."""
    version = compiler_version(need_tool("gcc"))
    major = re.search(r"\) (\d+)\.", version)
    if not major or major.group(1) != "12":
        pytest.skip(f"gcc {major and major.group(1)} is not gcc 12: its miscompilation is not expected here")
    assert wrong_elements("#define CGLOW_KERNEL static", matrix.Setting("gcc", "-O2")) == 2559


MODELS = sorted(set(zoo.MODELS) - {"mobilenetv2"})  # its 55 MB of C: in scripts/compiler_matrix.py


@lru_cache(maxsize=None)
def case(name: str, target: str = "generic"):
    model = zoo.build(name)
    feeds = random_feeds(model, seed=1)
    compiled = cglow.compile_model(model, options=Options(target=target))
    return compiled, [feeds[t.name] for t in compiled.inputs], ort_run(model, feeds)


@lru_cache(maxsize=None)
def outputs(name: str, setting: matrix.Setting):
    compiled, inputs, _ = case(name, TARGETS[setting.target].tiles if setting.target else "generic")
    for tool in (setting.cc, *(TARGETS[setting.target].tools if setting.target else ())):
        need_tool(tool)
    return matrix.outputs(compiled, inputs, setting)


@pytest.mark.parametrize("setting", matrix.HOST + matrix.CROSS, ids=lambda s: s.label.replace(" ", ""))
@pytest.mark.parametrize("name", MODELS)
def test_zoo_under_the_compiler_matrix(name, setting):
    if setting.target and case(name)[0].weights_bytes > TARGETS[setting.target].flash_bytes:
        pytest.skip(f"{name}'s weights do not fit the {setting.target}'s flash")
    got = outputs(name, setting)
    want = case(name)[2]
    errors = [rel_error(g, w) for g, w in zip(got, want)]
    assert max(errors) <= matrix.TOLERANCE, f"{setting.label}: {errors} of the outputs' scales"
    first = next(s for s in matrix.HOST + matrix.CROSS if matrix.bitwise_alike(s, setting))
    assert matrix.same_bits(got, outputs(name, first)), f"{setting.label} and {first.label} differ"
