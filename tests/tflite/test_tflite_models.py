"""Whole MLPerf Tiny networks from .tflite files (tests/tflite_zoo.py writes the zoo's as TensorFlow's converter
would): int8 to the bit with LiteRT, float within 1e-5 of its scale, on the host and under QEMU, and with the
arena of the same network from ONNX."""
from __future__ import annotations

from functools import lru_cache
import os

import numpy as np
import pytest

from tests.util import need_module, need_target

need_module("ai_edge_litert")

import cglow
from cglow import zoo
from cglow.tools import cross
from cglow.options import Options
from tests.quantized import quantized
from tests.tflite_file import run_litert
from tests.tflite_zoo import tflite_model

NETWORKS = ("kws", "vww", "resnet8", "autoencoder")


@lru_cache(maxsize=None)
def _file(name: str, int8: bool, folder: str) -> str:
    path = os.path.join(folder, f"{name}{'_int8' if int8 else ''}.tflite")
    with open(path, "wb") as f:
        f.write(tflite_model(name, int8))
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("tflite"))


def _inputs(compiled, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, t.shape).astype(t.dtype) if t.dtype == np.int8 else
            rng.standard_normal(t.shape).astype(np.float32) for t in compiled.inputs]


def _agree(got, want, int8: bool) -> None:
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if int8:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-5 * max(float(np.abs(w).max()), 1e-30))


@pytest.mark.parametrize("int8", [False, True], ids=["float", "int8"])
@pytest.mark.parametrize("name", NETWORKS)
def test_network_agrees_with_litert(name, int8, folder):
    path = _file(name, int8, folder)
    compiled = cglow.compile_model(path)
    inputs = _inputs(compiled)
    _agree(cglow.build(compiled)(*inputs), run_litert(open(path, "rb").read(), inputs), int8)
    onnx_model = quantized(name, "qdq", True) if int8 else zoo.build(name)
    assert compiled.arena_bytes <= cglow.compile_model(onnx_model).arena_bytes


@pytest.mark.parametrize("name", [n if n == "kws" else pytest.param(n, marks=pytest.mark.slow) for n in NETWORKS])
def test_int8_network_under_qemu(name, folder):
    """kws in `make quick`; the three larger networks (a Cortex-M4 build and a QEMU run each) in `make test`."""
    target = need_target("cortex-m4")
    path = _file(name, True, folder)
    compiled = cglow.compile_model(path, options=Options(target=target.tiles))
    inputs = _inputs(compiled, seed=2)
    run = cross.run_image(cross.build_image(compiled, inputs, target), compiled, target, count=False)
    _agree(run.outputs, run_litert(open(path, "rb").read(), inputs), True)
