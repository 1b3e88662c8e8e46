"""Checks on the generated text: portable headers only, float math only, one exported symbol."""
from __future__ import annotations

import re
import subprocess

import pytest

import cglow
from cglow import zoo
from cglow.tools.host import STRICT_FLAGS

from tests.util import need_tool

STANDARD_HEADERS = {"<math.h>", "<stddef.h>", "<stdint.h>", "<string.h>"}


@pytest.fixture(scope="module")
def sources():
    return {name: cglow.compile_model(zoo.build(name)) for name in ("kws", "transformer")}


def test_only_standard_headers_and_no_malloc(sources):
    for c in sources.values():
        includes = set(re.findall(r"#include (\S+)", c.c_source))
        assert includes - {f'"{c.name}.h"'} <= STANDARD_HEADERS
        assert not re.search(r"\b(malloc|calloc|free|printf)\s*\(", c.c_source)


def test_float_math_only(sources):
    for c in sources.values():
        code = re.sub(r"/\*.*?\*/", "", c.c_source, flags=re.S)
        assert not re.search(r"\bdouble\b", code)
        assert not re.search(r"\b(exp|tanh|erf|sqrt|pow|fabs|log)\s*\(", code), "double-precision libm call"
        literals = re.findall(r"(?<![\w.])(\d+\.\d*(?:e[+-]?\d+)?|\d+e[+-]?\d+)(?![\w.])", code)
        assert not literals, f"float literal without f suffix: {literals[:5]}"


def test_only_the_run_function_is_exported(sources, tmp_path):
    need_tool("gcc")
    c = sources["kws"]
    (tmp_path / "net.c").write_text(c.c_source)
    (tmp_path / "net.h").write_text(c.h_source)
    subprocess.run(["gcc", "-c", "-O1", *STRICT_FLAGS, "-o", str(tmp_path / "net.o"), str(tmp_path / "net.c")],
                   check=True)
    listing = subprocess.run(["nm", "-g", "--defined-only", str(tmp_path / "net.o")], capture_output=True,
                             text=True, check=True).stdout
    assert [line.split()[-1] for line in listing.splitlines()] == ["net_run"]


def test_two_models_link_into_one_program(tmp_path):
    need_tool("gcc")
    files = []
    for name in ("kws", "autoencoder"):
        c = cglow.compile_model(zoo.build(name), name=name)
        (tmp_path / f"{name}.c").write_text(c.c_source)
        (tmp_path / f"{name}.h").write_text(c.h_source)
        files.append(str(tmp_path / f"{name}.c"))
    (tmp_path / "main.c").write_text(
        '#include "kws.h"\n#include "autoencoder.h"\n'
        "static float a[KWS_INPUT_0_SIZE], b[KWS_OUTPUT_0_SIZE], c[AUTOENCODER_INPUT_0_SIZE], "
        "d[AUTOENCODER_OUTPUT_0_SIZE];\nint main(void) { return kws_run(a, b) + autoencoder_run(c, d); }\n")
    subprocess.run(["gcc", *STRICT_FLAGS, "-o", str(tmp_path / "both"), *files, str(tmp_path / "main.c"), "-lm"],
                   check=True)
    assert subprocess.run([str(tmp_path / "both")]).returncode == 0


def test_identical_kernels_are_written_once(sources):
    """kws's four depthwise and four pointwise blocks are the same loops on other buffers: one function each,
    called four times, each call naming its node."""
    c = sources["kws"]
    defined = re.findall(r"^CGLOW_KERNEL void (\w+)\(", c.c_source, re.M)
    calls = re.findall(r"^    (net_\d+_\w+)\(.*\);(.*)$", c.c_source, re.M)
    assert len(defined) == len(set(defined)) == 9 and len(calls) == len(c.program.instrs) == 15
    assert [name for name, _ in calls].count("net_1_conv") == [name for name, _ in calls].count("net_2_conv") == 4
    assert {name for name, _ in calls} == set(defined)
    assert [note.strip() for name, note in calls if note] == [f"/* block{b}/{k}/conv */" for b in (2, 3, 4)
                                                              for k in ("dw", "pw")]
