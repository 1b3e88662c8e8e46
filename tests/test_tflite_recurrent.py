"""The streaming operators SVDF and UNIDIRECTIONAL_SEQUENCE_LSTM against LiteRT's reference kernels over several
consecutive invocations, the state carried from one to the next (8-bit results to the bit, float within 1e-5),
and small keyword spotters built of them."""
from __future__ import annotations

import os

import numpy as np
import pytest

if os.environ.get("CI") == "true":
    import ai_edge_litert  # noqa: F401  (in CI a missing LiteRT is a failure, not a skip)
else:
    pytest.importorskip("ai_edge_litert")

import cglow
from cglow import host
from cglow.options import Options
from tests.tflite_file import TFLiteWriter, run_litert_sequence

RUNS = 6  # invocations: more than an SVDF's memory, so that its oldest frames drop out
KINDS = [pytest.param(False, id="float"), pytest.param(True, id="int8")]


class Stream:
    """A streaming model under construction: float32 tensors, or int8 ones (int16 SVDF states)."""

    def __init__(self, int8: bool, seed: int = 0):
        self.w, self.int8 = TFLiteWriter(), int8
        self.rng = np.random.default_rng(seed)
        self.shapes: dict[int, tuple[int, ...]] = {}

    def value(self, name: str, shape, scale: float = 0.05, zero: int = -3) -> int:
        quant = dict(scale=scale, zero_point=zero) if self.int8 else {}
        t = self.w.tensor(name, shape, np.int8 if self.int8 else np.float32, **quant)
        self.shapes[t] = tuple(shape)
        return t

    def svdf(self, x: int, units: int, rank: int, memory: int, act: str = "RELU", bias: bool = True) -> int:
        """An SVDF layer reading x [batch, input]; returns its output [batch, units]."""
        (batch, size), filters, w, rng = self.shapes[x], units * rank, self.w, self.rng
        state_shape = [batch, filters * memory]
        if self.int8:
            wf = w.tensor("weights_feature", [filters, size], np.int8,
                          rng.integers(-127, 128, (filters, size)).astype(np.int8), scale=0.01)
            wt = w.tensor("weights_time", [filters, memory], np.int16,
                          rng.integers(-20000, 20000, (filters, memory)).astype(np.int16), scale=0.0004)
            b = w.tensor("bias", [units], np.int32, rng.integers(-30000, 30000, units).astype(np.int32),
                         scale=0.002 * 0.0004)
            state = w.tensor("state", state_shape, np.int16, scale=0.002, zero_point=0, variable=True)
        else:
            wf = w.tensor("weights_feature", [filters, size], np.float32,
                          (rng.standard_normal((filters, size)) / np.sqrt(size)).astype(np.float32))
            wt = w.tensor("weights_time", [filters, memory], np.float32,
                          rng.standard_normal((filters, memory)).astype(np.float32))
            b = w.tensor("bias", [units], np.float32, rng.standard_normal(units).astype(np.float32))
            state = w.tensor("state", state_shape, np.float32, variable=True)
        y = self.value("svdf", [batch, units])
        w.op("SVDF", [x, wf, wt, b if bias else -1, state], [y], {"rank": rank, "fused_activation_function": act})
        return y

    def build(self, x: int, y: int) -> bytes:
        return self.w.build([x], [y])


def frames(shape, int8: bool, seed: int = 1, runs: int = RUNS) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if int8:
        return [rng.integers(-128, 128, shape).astype(np.int8) for _ in range(runs)]
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(runs)]


def agree(model: bytes, inputs: list[np.ndarray], tmp_path, options: Options = Options()) -> host.HostModel:
    """cglow's outputs equal LiteRT's at every invocation of one interpreter; returns the built model."""
    path = tmp_path / "model.tflite"
    path.write_bytes(model)
    net = host.build(cglow.compile_model(path, options=options))
    for x, (want,) in zip(inputs, run_litert_sequence(model, [[x] for x in inputs])):
        (got,) = net(x)
        assert got.dtype == want.dtype and got.shape == want.shape
        if got.dtype == np.float32:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(got, want)
    return net


@pytest.mark.parametrize("int8", KINDS)
@pytest.mark.parametrize("batch,units,rank,memory,bias", [(1, 4, 1, 3, True), (2, 3, 2, 4, True),
                                                          (3, 5, 1, 1, False)])
def test_svdf(int8, batch, units, rank, memory, bias, tmp_path):
    s = Stream(int8)
    x = s.value("x", [batch, 7], scale=0.1, zero=5)
    y = s.svdf(x, units, rank, memory, bias=bias)
    agree(s.build(x, y), frames((batch, 7), int8), tmp_path)


@pytest.mark.parametrize("act", ["NONE", "TANH", "RELU6"])
def test_float_svdf_activations(act, tmp_path):
    s = Stream(False, seed=2)
    x = s.value("x", [1, 6])
    agree(s.build(x, s.svdf(x, 4, 2, 5, act=act)), frames((1, 6), False), tmp_path)


@pytest.mark.parametrize("caller_arena", [False, True])
def test_state_resets(caller_arena, tmp_path):
    """After net_reset the model computes as from its first run; with --caller-arena the state is the arena's."""
    s = Stream(True, seed=3)
    x = s.value("x", [1, 8], scale=0.1, zero=0)
    model = s.build(x, s.svdf(x, 4, 1, 3))
    inputs = frames((1, 8), True)
    net = agree(model, inputs, tmp_path, Options(caller_arena=caller_arena))
    assert "NET_STATE_BYTES" in net.compiled.h_source
    net.reset()
    for v, (want,) in zip(inputs, run_litert_sequence(model, [[v] for v in inputs])):
        np.testing.assert_array_equal(net(v)[0], want)
