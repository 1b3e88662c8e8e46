"""UNIDIRECTIONAL_SEQUENCE_LSTM against LiteRT's reference kernels over consecutive invocations, its output and cell
states carried from one to the next: float32 with each option (within 1e-5), int8 as TFLite's integer kernel
computes it (to the bit, with layer normalization, peepholes and a projection too; its gemmlowp int16 logistic and
tanh checked on every input against tests/gemmlowp16.py), hybrid (int8 weights, float activations; within
1e-5), and streaming keyword spotters of a dense layer, an LSTM and a softmax (on the host, and under QEMU with a
reset between two streams)."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from tests.util import need_module

need_module("ai_edge_litert")

import cglow
from cglow.emit_c.emit import runtime_helpers
from cglow.errors import CglowError
from cglow.tools.host import HOST_FLAGS, build_cached
from tests import gemmlowp16
from tests.tflite_net import KINDS
from tests.tflite_stream import LSTM_FRAMES, Stream, agree, agree_under_qemu, frames, lstm_spotter


@pytest.mark.parametrize("options", [
    dict(), dict(time_major=True), dict(peephole=True), dict(cifg=True, peephole=True), dict(projection=3),
    dict(projection=3, proj_clip=0.3, cell_clip=0.8), dict(layer_norm=True), dict(layer_norm=True, cifg=True),
    dict(act="RELU")], ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "plain")
def test_float_lstm(options, tmp_path):
    s = Stream(False, seed=4)
    shape = [5, 2, 3] if options.get("time_major") else [2, 5, 3]
    x = s.value("x", shape)
    agree(s.build(x, s.lstm(x, 4, **options)), frames(shape, False, runs=3), tmp_path)


def test_states_a_dequantize_writes_carry_over(tmp_path):
    """TensorFlow's converter writes a float16 file's LSTM states as DEQUANTIZE outputs of float16 zeros: LiteRT
    dequantizes them at the first run only, and the states carry over from run to run."""
    s = Stream(False, seed=9)
    x = s.value("x", [1, 4, 3])
    agree(s.build(x, s.lstm(x, 5, f16_states=True)), frames([1, 4, 3], False, runs=3), tmp_path)


@pytest.mark.parametrize("options", [
    dict(), dict(asymmetric=True), dict(asymmetric=True, cifg=True, layer_norm=True, cell_clip=0.6)],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "plain")
def test_hybrid_lstm(options, tmp_path):
    """Float activations, int8 input and recurrent weights (dynamic range quantization, as TensorFlow's converter
    writes a Keras LSTM): each product's input quantized per batch item at run time, as LiteRT's hybrid kernel."""
    s = Stream(False, seed=7)
    x = s.value("x", [2, 5, 6])
    agree(s.build(x, s.lstm(x, 8, hybrid=True, **options)), frames([2, 5, 6], False, runs=3), tmp_path)


def test_hybrid_lstm_with_a_projection_is_refused(tmp_path):
    s = Stream(False)
    x = s.value("x", [1, 3, 4])
    path = tmp_path / "model.tflite"
    path.write_bytes(s.build(x, s.lstm(x, 4, projection=2, hybrid=True)))
    with pytest.raises(CglowError, match="hybrid LSTM .* a projection is not supported"):
        cglow.compile_model(path)


@pytest.mark.parametrize("kind", ["int8", "hybrid"])
def test_steps_share_their_constants(kind, tmp_path):
    """The unrolled steps read one copy of the constants their kernels take (the weights' sums and scales): the
    flash does not grow with the sequence."""
    weights = []
    for steps in (1, 6):
        s = Stream(kind == "int8", seed=8)
        x = s.value("x", [1, steps, 6], scale=0.04, zero=7)
        path = tmp_path / f"{kind}{steps}.tflite"
        path.write_bytes(s.build(x, s.lstm8(x, 8) if kind == "int8" else s.lstm(x, 8, hybrid=True, asymmetric=True)))
        weights.append(cglow.compile_model(path).weights_bytes)
    assert weights[0] == weights[1]


@pytest.mark.parametrize("options", [
    dict(), dict(hidden_zero=0), dict(cifg=True), dict(cell_clip=0.4), dict(time_major=True)],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "plain")
@pytest.mark.parametrize("seed", [0, 1])
def test_int8_lstm(options, seed, tmp_path):
    """The output state starts at its zero point (LiteRT resets an int8 variable so), the cell state at zero."""
    s = Stream(True, seed=seed)
    shape = [4, 2, 6] if options.get("time_major") else [2, 4, 6]
    x = s.value("x", shape, scale=0.04, zero=7)
    agree(s.build(x, s.lstm8(x, 8, **options)), frames(shape, True, seed=seed, runs=3), tmp_path)


INT8_EXTRAS = [
    dict(layer_norm=True), dict(layer_norm=True, cifg=True), dict(layer_norm=True, sparse_forget=True),
    dict(peephole=True), dict(peephole=True, cifg=True, cell_clip=0.4), dict(projection=5),
    dict(projection=5, proj_clip=0.5), dict(projection=12, proj_clip=0.5, cifg=True, time_major=True),
    dict(layer_norm=True, peephole=True, projection=8, proj_clip=0.5, cell_clip=0.4),
    dict(layer_norm=True, peephole=True, projection=8, cifg=True, time_major=True)]


@pytest.mark.parametrize("options", INT8_EXTRAS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("seed", [0, 1])
def test_int8_lstm_extras(options, seed, tmp_path):
    """Layer normalization (TFLite's integer one: the inverse square root's fixed-point Newton steps, the variance
    guard: sparse_forget), peepholes and a projection (with its clip), alone and together, with and without CIFG,
    against LiteRT over 8 invocations."""
    s = Stream(True, seed=seed)
    shape = [4, 2, 6] if options.get("time_major") else [2, 4, 6]
    x = s.value("x", shape, scale=0.04, zero=7)
    agree(s.build(x, s.lstm8(x, 8, **options)), frames(shape, True, seed=seed, runs=8), tmp_path)


def test_int8_lstm_peephole_rounding(tmp_path):
    """LiteRT's peephole term is its Neon kernel's (on x86 too, through NEON_2_SSE): it requantizes whole blocks of
    16 cells rounding their ties up, the cells after them rounding ties away from zero. With 24 cells and
    peephole weights at a power-of-two scale (ties everywhere), either rounding alone misses LiteRT's outputs
    here."""
    s = Stream(True, seed=2)
    x = s.value("x", [2, 4, 6], scale=0.04, zero=7)
    agree(s.build(x, s.lstm8(x, 24, peephole=True, peephole_scale=2.0 ** -4)), frames([2, 4, 6], True, seed=2, runs=8),
          tmp_path)


def test_gemmlowp_int16_functions_on_every_input():
    """runtime_c's logistic16 and tanh16 (a value in Q(bits), bits 0 to 6) equal gemmlowp's, step by step in
    Python, on every int16 input."""
    driver = "\n".join(["#include <stdint.h>", "#include <stdio.h>"] +
                       runtime_helpers({"cglow_logistic16", "cglow_tanh16"}) + ["""
int main(void)
{
    int32_t a, bits;
    for (bits = 0; bits <= 6; ++bits) {
        for (a = -32768; a < 32768; ++a) {
            printf("%d %d\\n", (int)cglow_logistic16(a, bits), (int)cglow_tanh16(a, bits));
        }
    }
    return 0;
}"""])
    program = build_cached({"gemmlowp16.c": driver}, "cc", HOST_FLAGS, "gemmlowp16-{}")
    got = np.array(subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout.split(),
                   np.int64).reshape(7, 65536, 2)
    for bits in range(7):
        want = [(gemmlowp16.logistic(a, bits), gemmlowp16.tanh(a, bits)) for a in range(-32768, 32768)]
        np.testing.assert_array_equal(got[bits], np.array(want), err_msg=f"Q{bits}")


@pytest.mark.parametrize("int8", KINDS)
def test_lstm_keyword_spotter(int8, tmp_path):
    agree(lstm_spotter(int8), frames(LSTM_FRAMES, int8, runs=4), tmp_path)


@pytest.mark.parametrize("int8", KINDS)
def test_lstm_spotter_under_qemu(int8, tmp_path):
    """8 chunks on a Cortex-M4, net_reset before the fifth."""
    agree_under_qemu(lstm_spotter(int8), frames(LSTM_FRAMES, int8, runs=8), 4, tmp_path)


def test_int8_lstm_peepholes_with_a_projection_to_another_width_are_refused(tmp_path):
    """LiteRT's integer kernel applies the peepholes over the output width: another width than the cells' is
    refused (one error line)."""
    s = Stream(True)
    x = s.value("x", [1, 3, 4])
    path = tmp_path / "model.tflite"
    path.write_bytes(s.build(x, s.lstm8(x, 4, peephole=True, projection=3)))
    with pytest.raises(CglowError, match="8-bit LSTM with peepholes and a projection to another width than the "
                                         "cells' is not supported"):
        cglow.compile_model(path)
