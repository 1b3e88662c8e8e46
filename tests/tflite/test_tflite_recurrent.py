"""SVDF against LiteRT's reference kernels over several consecutive invocations, the state carried from one to the
next (8-bit results to the bit, float within 1e-5), the state's reset, a streaming keyword spotter of SVDF layers
(on the host, and under QEMU with a reset between two streams), and the refusals of streaming models cglow does
not take (tests/tflite/test_tflite_lstm.py: the LSTM's)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.util import need_module

need_module("ai_edge_litert")

import cglow
from cglow.errors import CglowError
from cglow.options import Options
from tests.tflite_file import TFLiteWriter, run_litert_sequence
from tests.tflite_net import KINDS
from tests.tflite_stream import SVDF_FRAMES, Stream, agree, agree_under_qemu, frames, svdf_spotter


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


@pytest.mark.parametrize("int8", KINDS)
def test_svdf_keyword_spotter(int8, tmp_path):
    agree(svdf_spotter(int8), frames(SVDF_FRAMES, int8, runs=12), tmp_path)


@pytest.mark.parametrize("int8", KINDS)
def test_svdf_spotter_under_qemu(int8, tmp_path):
    """12 frames on a Cortex-M4, net_reset before the tenth (the first stream outlasts the first SVDF's memory)."""
    agree_under_qemu(svdf_spotter(int8), frames(SVDF_FRAMES, int8, runs=12), 9, tmp_path)


def _svdf_state_not_variable() -> bytes:
    w = TFLiteWriter()
    x, y = w.tensor("x", [1, 4], np.float32), w.tensor("y", [1, 2], np.float32)
    weights = [w.tensor(n, [2, k], np.float32, np.ones((2, k), np.float32)) for n, k in (("wf", 4), ("wt", 3))]
    w.op("SVDF", [x, *weights, -1, w.tensor("state", [1, 6], np.float32)], [y], {"rank": 1})
    return w.build([x], [y])


def _int8_svdf_tanh() -> bytes:
    s = Stream(True)
    x = s.value("x", [1, 8])
    return s.build(x, s.svdf(x, 4, 1, 3, act="TANH"))


@pytest.mark.parametrize("model,words", [
    (_svdf_state_not_variable, "its state input 4 ('state') is not a variable tensor"),
    (_int8_svdf_tanh, "8-bit SVDF takes the fused activation RELU")])
def test_refused_in_one_line(model, words, tmp_path):
    path = tmp_path / "model.tflite"
    path.write_bytes(model())
    with pytest.raises(CglowError) as error:
        cglow.compile_model(path)
    assert words in str(error.value) and "\n" not in str(error.value)
