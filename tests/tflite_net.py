"""What the TFLite operator tests share: a small model under construction (Net: float32 tensors, or int8 ones
with random scales and zero points), its outputs from cglow's C on the host or under QEMU against LiteRT's, and
KINDS, the float32 and int8 variants as test parameters."""
from __future__ import annotations

import numpy as np
import pytest

import cglow
from cglow.options import Options
from cglow.tools import cross, host
from tests.tflite_file import TFLiteWriter, run_litert
from tests.util import need_target

KINDS = [pytest.param(False, id="float"), pytest.param(True, id="int8")]


class Net:
    """A small model under construction: float32 tensors, or int8 ones with random scales and zero points."""

    def __init__(self, int8: bool, seed: int = 0):
        self.w, self.int8 = TFLiteWriter(), int8
        self.rng = np.random.default_rng(seed)
        self.inputs: list[tuple[int, tuple]] = []
        self.scales: dict[int, float] = {}

    def value(self, name: str, shape, scale: float | None = None, zero: int | None = None, signature=None) -> int:
        if not self.int8:
            return self.w.tensor(name, shape, np.float32, signature=signature)
        scale = float(self.rng.uniform(0.02, 0.2)) if scale is None else scale
        zero = int(self.rng.integers(-20, 20)) if zero is None else zero
        t = self.w.tensor(name, shape, np.int8, scale=scale, zero_point=zero, signature=signature)
        self.scales[t] = scale
        return t

    def input(self, name: str, shape, **quant) -> int:
        t = self.value(name, shape, **quant)
        self.inputs.append((t, tuple(shape)))
        return t

    def weights(self, name: str, shape, axis: int | None = 0) -> tuple[int, np.ndarray]:
        """Weights (int8 symmetric, per channel along axis or per tensor) and their scales."""
        if not self.int8:
            return self.w.tensor(name, shape, np.float32, self.rng.standard_normal(shape).astype(np.float32)), None
        n = shape[axis] if axis is not None else 1
        scales = self.rng.uniform(0.002, 0.02, n)
        data = self.rng.integers(-127, 128, shape).astype(np.int8)
        quant = dict(scale=list(scales), zero_point=[0] * n, axis=axis) if axis is not None else \
            dict(scale=float(scales[0]), zero_point=0)
        return self.w.tensor(name, shape, np.int8, data, **quant), scales

    def bias(self, name: str, n: int, in_scale: float | None, w_scales) -> int:
        if not self.int8:
            return self.w.tensor(name, [n], np.float32, self.rng.standard_normal(n).astype(np.float32))
        scales = in_scale * np.broadcast_to(w_scales, (n,))
        return self.w.tensor(name, [n], np.int32, self.rng.integers(-3000, 3000, n).astype(np.int32),
                             scale=list(scales), zero_point=[0] * n)

    def scale(self, t: int) -> float | None:
        return self.scales.get(t)

    def data(self):
        for t, shape in self.inputs:
            if self.int8:
                yield self.rng.integers(-128, 128, shape).astype(np.int8)
            else:
                yield self.rng.standard_normal(shape).astype(np.float32)


def check(net: Net, outputs, tmp_path, target: str | None = None) -> None:
    """The model's outputs from cglow (on the host, or under QEMU for a cross target) equal LiteRT's."""
    model = net.w.build([t for t, _ in net.inputs], outputs)
    inputs = list(net.data())
    if target is None:
        expected, got = litert_and_host(model, inputs, tmp_path)
    else:
        path = tmp_path / "model.tflite"
        path.write_bytes(model)
        expected, got = run_litert(model, inputs), _on_target(path, inputs, need_target(target))
    assert_outputs_match(expected, got, exact=net.int8)


def litert_and_host(model: bytes, inputs, tmp_path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """LiteRT's outputs and those of the model's C built on the host."""
    path = tmp_path / "model.tflite"
    path.write_bytes(model)
    return run_litert(model, inputs), host.build(cglow.compile_model(path)).run(*inputs)


def assert_outputs_match(expected, got, exact: bool = True) -> None:
    """The same types and shapes as LiteRT's outputs, and the same values: to the bit, or within 1e-5."""
    for e, g in zip(expected, got, strict=True):
        assert g.dtype == e.dtype and g.shape == e.shape
        if exact:
            np.testing.assert_array_equal(g, e)
        else:
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def _on_target(path, inputs, target):
    compiled = cglow.compile_model(path, options=Options(target=target.tiles))
    return cross.run_image(cross.build_image(compiled, inputs, target), compiled, target, count=False).outputs
