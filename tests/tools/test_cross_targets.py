"""Models x cross targets (cglow.tools.targets): each model emitted with the target's `--target` preset, built with
the target's compiler under the strict warning flags (any message fails the build), run under QEMU, and its
outputs compared with the host build of the same C; float models' images on targets without double-precision
hardware link no software double routine. The run ends with the matrix, target x model: pass or fail and the
largest error (tests/conftest.py)."""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np
import pytest

import cglow
from cglow import zoo
from cglow.tools import cross
from cglow.options import Options
from cglow.tools.targets import TARGETS

from tests.util import need_target, random_feeds, rel_error

MODELS = ("kws", "vww", "resnet8", "autoencoder", "transformer", "mobilenetv2")
TOLERANCE = 1e-4  # of the output's scale, as in test_models
# Weights that do not fit the flash: the Cortex-M55's 512 KiB of ITCM holds kws and resnet8 only.
TOO_BIG = {("vww", "cortex-m55"), ("autoencoder", "cortex-m55"), ("transformer", "cortex-m55")}
# MobileNetV2 (13 MiB of weights, 57 MB of C) for CI time on two gcc-built Linux targets only: gcc takes half a
# minute over its C per target, clang (rv64gcv) several.
MOBILENET_ON = ("riscv64-linux", "aarch64-linux")
LEFT_OUT = TOO_BIG | {("mobilenetv2", name) for name in TARGETS if name not in MOBILENET_ON}
NOT_RUN = f"weights larger than the target's flash; MobileNetV2 on {' and '.join(MOBILENET_ON)} only, for CI time"
CASES = [(model, target) for model in MODELS for target in TARGETS if (model, target) not in LEFT_OUT]


@lru_cache(maxsize=None)
def compiled_for(model: str, tiles: str) -> tuple[cglow.CompiledModel, list[np.ndarray]]:
    """The model compiled with a `--target` preset, and its seeded inputs."""
    onnx_model = zoo.build(model)
    compiled = cglow.compile_model(onnx_model, options=Options(target=tiles))
    feeds = random_feeds(onnx_model, seed=1)
    return compiled, [feeds[t.name] for t in compiled.inputs]


@lru_cache(maxsize=None)
def host_outputs(model: str, tiles: str) -> list[np.ndarray]:
    compiled, inputs = compiled_for(model, tiles)
    return cglow.build(compiled)(*inputs)


def image_for(model: str, target_name: str):
    """The model's image for a target (cached by cglow.tools.cross), after checking the target's tools."""
    target = need_target(target_name)
    compiled, inputs = compiled_for(model, target.tiles)
    return target, compiled, cross.build_image(compiled, inputs, target)


@pytest.mark.parametrize("model, target_name", CASES)
def test_matches_the_host_build(model, target_name, record_property):
    target, compiled, image = image_for(model, target_name)
    run = cross.run_image(image, compiled, target, count=False)
    error = max(rel_error(got, want) for got, want in zip(run.outputs, host_outputs(model, target.tiles)))
    record_property("max_error", error)
    assert error <= TOLERANCE
    if target.soft_double:
        assert not cross.soft_double_helpers(image, target)


@pytest.mark.parametrize("model, target_name", sorted(TOO_BIG))
def test_what_is_left_out_does_not_fit(model, target_name):
    target = TARGETS[target_name]
    assert compiled_for(model, target.tiles)[0].weights_bytes > target.flash_bytes


def test_rv64gcv_image_runs_vector_code():
    """The rv64gcv preset's image executes RVV instructions: without the vector unit QEMU stops on one."""
    target, compiled, image = image_for("kws", "rv64gcv")
    scalar = replace(target, run=("qemu-riscv64", "-cpu", "rv64", "{image}"))
    with pytest.raises(RuntimeError, match="exited with -4"):  # SIGILL
        cross.run_image(image, compiled, scalar, count=False)
