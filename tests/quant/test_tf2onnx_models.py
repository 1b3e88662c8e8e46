"""The ONNX files tf2onnx 1.17 really writes (tests/data/tf2onnx/, made by scripts/make_tf2onnx_fixtures.py
from seeded Keras models), compiled and run against onnxruntime: the fully-integer ones integer end to end
(no float layer, one byte a weight, the arena of cglow's own int8 path), within a step; the dequantized and
float ones within float rounding. Each file's batch is symbolic (unk__N), taken as 1 with a notice."""
from __future__ import annotations


import numpy as np
import onnx
import pytest

import cglow
from cglow.errors import Notice
from cglow.tools.info import model_info
from tests.util import DATA, ort_run, rel_error

pytest.importorskip("onnxruntime")

FIXTURES = DATA / "tf2onnx"
# NET_WEIGHTS_BYTES and NET_ARENA_BYTES as measured. The arenas are those of the same float models quantized by
# cglow quantize (64 seeded normal samples); the weights are the int8 parameters, the int32 biases, a
# multiplier per output channel and, after a softmax, its 1 KiB table of exponentials.
INT8 = {"autoencoder": (26176, 32), "ds_cnn": (6688, 4800), "conv_net": (4232, 2560), "conv1d": (1816, 720)}
INTEGER = {**{f"{name}_int8": figures for name, figures in INT8.items()},
           "conv_net_uint8": INT8["conv_net"]}  # uint8 input and output: their requantization to int8 folded
INPUTS = 8


def compiled(name: str) -> tuple[onnx.ModelProto, cglow.CompiledModel]:
    model = onnx.load(FIXTURES / f"{name}.onnx")
    with pytest.warns(Notice, match="symbolic first dimension .*'unk__"):
        return model, cglow.compile_model(model)


def feeds(model: onnx.ModelProto, net: cglow.CompiledModel, seed: int) -> dict[str, np.ndarray]:
    (x,) = net.inputs
    rng = np.random.default_rng(seed)
    if x.dtype != np.float32:
        info = np.iinfo(x.dtype)
        return {model.graph.input[0].name: rng.integers(info.min, info.max + 1, x.shape).astype(x.dtype)}
    return {model.graph.input[0].name: rng.standard_normal(x.shape).astype(np.float32)}


def worst(model: onnx.ModelProto, net: cglow.CompiledModel) -> float:
    """The largest difference from onnxruntime over seeded inputs: in steps of an 8-bit output, else relative
    to the output's largest magnitude."""
    host = cglow.build(net)
    off = 0.0
    for seed in range(INPUTS):
        x = feeds(model, net, seed)
        (got,), (want,) = host(*x.values()), ort_run(model, x)
        off = max(off, float(np.abs(got.astype(np.int64) - want).max()) if got.dtype != np.float32 else
                  rel_error(got, want))
    return off


@pytest.mark.parametrize("name", sorted(INTEGER))
def test_fully_integer_model_is_integer_end_to_end(name):
    """No float layer, integer kernels only, the weights and arena measured, 8-bit input and output with their
    scales in the header, within a step of onnxruntime."""
    model, net = compiled(name)
    with pytest.warns(Notice):
        info = model_info(str(FIXTURES / f"{name}.onnx"), {})
    assert info["float_layers"] == []
    buffers = net.program.buffers
    assert [type(i).__name__ for i in net.program.instrs if buffers[i.out.buf].dtype == np.float32] == []
    weights, arena = INTEGER[name]
    assert net.weights_bytes <= weights and net.arena_bytes <= arena
    dtype = np.uint8 if name.endswith("uint8") else np.int8
    assert all(t.dtype == dtype and t.scale is not None for t in net.inputs + net.outputs)
    assert worst(model, net) <= 1


@pytest.mark.parametrize("name", sorted(INT8))
@pytest.mark.parametrize("form", ["int8_dequantized", "float"])
def test_dequantized_and_float_models_match(name, form):
    """--dequantize's float layers between the int8 input (its scale in the header) and output, and the float
    Keras model: within a step, or 1e-4 of the output's scale."""
    model, net = compiled(f"{name}_{form}")
    if form == "float":
        assert worst(model, net) <= 1e-4
    else:
        assert net.inputs[0].scale is not None and worst(model, net) <= 1
