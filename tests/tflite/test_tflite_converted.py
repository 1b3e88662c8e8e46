"""The .tflite files TensorFlow's own converter writes (tests/data/tflite: scripts/make_tflite_fixtures.py built
them with TensorFlow 2.21 from Keras models of seeded weights, float32, full-integer with int8 or float inputs and
outputs, dynamic range and float16 weights): each compiled by cglow and run twice on seeded inputs against one
LiteRT interpreter's reference kernels (the LSTM keyword spotter keeps its state from one run to the next), int8
outputs to the bit and float ones within cglow check's tolerance, in an arena no larger than measured. An 8-bit
TILE (Keras 3's UpSampling2D) runs on the reference kernels as cglow check runs it (model_file.reference_model)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.util import DATA, need_module

need_module("ai_edge_litert")

import cglow
from cglow.model_file import reference_model
from cglow.tools.reference import TOLERANCE, rel_error, seeded_inputs
from tests.tflite_file import run_litert_sequence

FIXTURES = DATA / "tflite"
# each file's arena and weights in bytes, as cglow compiled it when the files were written (default options); the
# float16 files' since their weights are stored as float16 (instr/narrow_weights.py): autoencoder's and lstm_kws's
# arenas hold a chunk of them
MEASURED = {
    "autoencoder_dynamic": (736, 31648), "autoencoder_f16": (5184, 45920), "autoencoder_float": (160, 87840),
    "autoencoder_int8": (32, 27656), "autoencoder_int8_fio": (656, 27656),
    "kws_dynamic": (20048, 14000), "kws_f16": (19200, 25552), "kws_float": (19200, 28848),
    "kws_int8": (4800, 9612), "kws_int8_fio": (4800, 9612),
    "lstm_kws_dynamic": (2816, 13360), "lstm_kws_f16": (4608, 19808), "lstm_kws_float": (2816, 38960),
    "lstm_kws_int8": (1024, 10740), "lstm_kws_int8_fio": (1424, 10740),
    "mobilenet_dynamic": (55296, 11912), "mobilenet_f16": (55296, 12120), "mobilenet_float": (55296, 20360),
    "mobilenet_int8": (13824, 7026), "mobilenet_int8_fio": (13824, 7026),
    "ops_dynamic": (10240, 10248), "ops_f16": (10240, 13672), "ops_float": (10240, 25528),
    "ops_int8": (4096, 7594), "ops_int8_fio": (4096, 7594),
    "ops_tfkeras_dynamic": (10240, 10312), "ops_tfkeras_f16": (10240, 13736), "ops_tfkeras_float": (10240, 25592),
    "ops_tfkeras_int8": (4096, 7656), "ops_tfkeras_int8_fio": (4096, 7656),
    "resnet8_dynamic": (67584, 28072), "resnet8_f16": (67584, 59160), "resnet8_float": (67584, 79144),
    "resnet8_int8": (16896, 21210), "resnet8_int8_fio": (16896, 21210),
}


def test_every_file_is_measured():
    assert sorted(p.stem for p in FIXTURES.glob("*.tflite")) == sorted(MEASURED)


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_converted_file_agrees_with_litert(name):
    path = FIXTURES / f"{name}.tflite"
    compiled = cglow.compile_model(path)
    runs = [seeded_inputs(compiled, seed) for seed in (0, 1)]
    model = cglow.build(compiled)
    for inputs, want in zip(runs, run_litert_sequence(reference_model(path.read_bytes()), runs)):
        for g, w in zip(model(*inputs), want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            if w.dtype == np.int8:
                np.testing.assert_array_equal(g, w)
            else:
                assert rel_error(g, w) <= TOLERANCE
    arena, weights = MEASURED[name]
    assert compiled.arena_bytes <= arena and compiled.weights_bytes <= weights
