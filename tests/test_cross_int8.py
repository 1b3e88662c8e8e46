"""Quantized models on the cross targets: the image run under QEMU gives the same integers as the host
build of the same C (the integer kernels have no float and no implementation-defined arithmetic to differ
on)."""
from __future__ import annotations

import numpy as np
import pytest

import cglow
from cglow import cross
from cglow.options import Options
from cglow.targets import TARGETS

from .quantized import quantized
from .util import need_tool

pytest.importorskip("onnxruntime")

MODELS = ("kws", "resnet8")
CASES = [(model, target) for model in MODELS for target in ("cortex-m4", "cortex-m3", "cortex-m55", "riscv32",
                                                            "aarch64-linux", "rv64gcv")]


@pytest.mark.parametrize("model, target_name", CASES)
def test_same_integers_as_the_host(model, target_name):
    target = TARGETS[target_name]
    for tool in target.tools:
        need_tool(tool)
    compiled = cglow.compile_model(quantized(model, "qdq", True), options=Options(target=target.tiles))
    rng = np.random.default_rng(3)
    inputs = [rng.integers(-128, 128, t.shape).astype(t.dtype) for t in compiled.inputs]
    run = cross.run_image(cross.build_image(compiled, inputs, target), compiled, target, count=False)
    for got, want in zip(run.outputs, cglow.build(compiled)(*inputs)):
        assert got.dtype == want.dtype and np.array_equal(got, want)
