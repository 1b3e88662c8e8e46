"""Whole models (the MLPerf Tiny shapes and a transformer encoder) against onnxruntime, through the
cffi build and through a plain C main built with gcc and clang under the strict flags."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
import subprocess

import numpy as np
import pytest

import cglow
from cglow import zoo
from cglow.emit_c.harness import harness_source, parse_outputs
from cglow.host import STRICT_FLAGS

from .util import assert_shapes_agree_with_onnx, need_tool, ort_run, random_feeds, rel_error

MODELS = ["autoencoder", "kws", "resnet8", "transformer", "vww"]  # the spine's five; more in test_models_more
BUILT = sorted(set(zoo.MODELS) - {"mobilenetv2"})  # MobileNetV2's 55 MB of C takes gcc and clang 15 s each
TOLERANCE = 1e-4  # of the output's scale


@lru_cache(maxsize=None)
def compiled(name: str):
    model = zoo.build(name)
    feeds = random_feeds(model, seed=1)
    return model, feeds, cglow.compile_model(model)


@pytest.mark.parametrize("name", MODELS)
def test_matches_onnxruntime(name):
    model, feeds, c = compiled(name)
    assert_shapes_agree_with_onnx(model)
    got = cglow.build(c)(*(feeds[t.name] for t in c.inputs))
    want = ort_run(model, feeds)
    for g, w in zip(got, want):
        assert rel_error(g, w) <= TOLERANCE


@pytest.mark.parametrize("cc", ["gcc", "clang"])
@pytest.mark.parametrize("name", BUILT)
def test_plain_c_main_gets_the_same_numbers(name, cc, tmp_path: Path):
    need_tool(cc)
    model, feeds, c = compiled(name)
    inputs = [feeds[t.name] for t in c.inputs]
    (tmp_path / "net.c").write_text(c.c_source)
    (tmp_path / "net.h").write_text(c.h_source)
    (tmp_path / "main.c").write_text(harness_source(c, inputs))
    exe = tmp_path / "main"
    build = subprocess.run([cc, "-O2", *STRICT_FLAGS, "-o", str(exe), str(tmp_path / "net.c"),
                            str(tmp_path / "main.c"), "-lm"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    assert build.stderr == ""  # warning-free
    run = subprocess.run([str(exe)], capture_output=True, text=True, check=True)
    via_cffi = cglow.build(c)(*inputs)
    for got, want in zip(parse_outputs(run.stdout, c), via_cffi):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * float(np.max(np.abs(want))))


@pytest.mark.parametrize("name", MODELS)
def test_emission_is_deterministic(name):
    model, _, c = compiled(name)
    again = cglow.compile_model(zoo.build(name))
    assert (again.c_source, again.h_source) == (c.c_source, c.h_source)
