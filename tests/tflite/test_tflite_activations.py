"""TFLite's activations and SOFTMAX, float32 and 8-bit, against LiteRT's reference kernels: 8-bit results to the
bit, float ones within 1e-5. An 8-bit model runs one operator per set of random scales and zero points, each on
an input of its own that holds every 8-bit value, so that one compilation checks every entry of many tables."""
from __future__ import annotations

import numpy as np
import pytest

from tests.util import need_module

need_module("ai_edge_litert")

import cglow
from cglow.errors import CglowError
from tests.tflite_file import TFLiteWriter
from tests.tflite_net import assert_outputs_match, litert_and_host

DTYPES = [pytest.param(np.int8, id="int8"), pytest.param(np.uint8, id="uint8")]
SETS = 6  # scale sets per model


def every_value(dtype, shape=(1, 256)) -> np.ndarray:
    """Every value of the 8-bit type, repeated to fill `shape` (its last dimension a multiple of 256)."""
    info = np.iinfo(dtype)
    return np.resize(np.arange(info.min, info.max + 1), shape).astype(dtype)


def check(model: bytes, inputs, tmp_path, exact: bool = True) -> None:
    assert_outputs_match(*litert_and_host(model, inputs, tmp_path), exact=exact)


def unary_model(op: str, dtype, sets, options=None, shape=(1, 256)) -> tuple[bytes, list[np.ndarray]]:
    """One operator per ((input scale, zero point), (output scale, zero point)) set, each on every value."""
    w = TFLiteWriter()
    inputs, outputs = [], []
    for k, ((sx, zx), (sy, zy)) in enumerate(sets):
        x = w.tensor(f"x{k}", shape, dtype, scale=sx, zero_point=zx)
        y = w.tensor(f"y{k}", shape, dtype, scale=sy, zero_point=zy)
        w.op(op, [x], [y], options)
        inputs.append(x)
        outputs.append(y)
    return w.build(inputs, outputs), [every_value(dtype, shape) for _ in sets]


def zero_point(rng, dtype, spread: int = 40) -> int:
    """A zero point near the middle of the type's range."""
    middle = 0 if dtype == np.int8 else 128
    return middle + int(rng.integers(-spread, spread + 1))


def input_params(rng, dtype, lo: float = 0.005, hi: float = 0.3) -> tuple[float, int]:
    return float(np.float32(rng.uniform(lo, hi))), zero_point(rng, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["LOGISTIC", "TANH"])
def test_logistic_tanh_8bit(op, dtype, tmp_path):
    """LOGISTIC's output scale is 1/256 (its zero point any: LiteRT's reference takes it as given); TANH's
    output any."""
    rng = np.random.default_rng(1)
    lowest = int(np.iinfo(dtype).min)
    sets = []
    for k in range(SETS):
        if op == "LOGISTIC":
            out = (1 / 256, lowest if k < 2 else lowest + int(rng.integers(0, 100)))
        else:
            out = (1 / 128, lowest + 128) if k < 2 else (float(np.float32(rng.uniform(0.003, 0.03))),
                                                         zero_point(rng, dtype, 20))
        sets.append((input_params(rng, dtype), out))
    check(*unary_model(op, dtype, sets), tmp_path)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.3, 1.7, -0.5])
def test_leaky_relu_8bit(alpha, dtype, tmp_path):
    rng = np.random.default_rng(2)
    sets = [(input_params(rng, dtype), input_params(rng, dtype)) for _ in range(SETS)]
    sets[0] = ((0.125, sets[0][0][1]), (0.125, sets[0][1][1]))  # ratios of powers of two: exact halves
    check(*unary_model("LEAKY_RELU", dtype, sets, {"alpha": alpha}), tmp_path)


@pytest.mark.parametrize("dtype", DTYPES)
def test_hard_swish_8bit(dtype, tmp_path):
    """Input scales from 1/1000 (the int16 "reluish" factor divides) to 0.5 (it shifts left), output scales
    on either side of the input's."""
    rng = np.random.default_rng(3)
    sets = [((float(np.float32(s)), zero_point(rng, dtype)),
             (float(np.float32(s * rng.uniform(0.3, 3))), zero_point(rng, dtype)))
            for s in np.geomspace(0.001, 0.5, 2 * SETS)]
    check(*unary_model("HARD_SWISH", dtype, sets), tmp_path)


def prelu_model(dtype, shape, alpha_shape, seed: int) -> tuple[bytes, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    w = TFLiteWriter()
    inputs, outputs, data = [], [], []
    for k in range(3):
        (sx, zx), (sa, za), (sy, zy) = (input_params(rng, dtype) for _ in range(3))
        x = w.tensor(f"x{k}", shape, dtype, scale=sx, zero_point=zx)
        alpha = rng.integers(info.min, info.max + 1, alpha_shape).astype(dtype)
        a = w.tensor(f"alpha{k}", alpha_shape, dtype, alpha, scale=sa, zero_point=za)
        y = w.tensor(f"y{k}", shape, dtype, scale=sy, zero_point=zy)
        w.op("PRELU", [x, a], [y])
        inputs.append(x)
        outputs.append(y)
        # every value in every channel: the values of each channel are a shuffle of the type's
        channels = shape[-1]
        values = np.stack([rng.permutation(every_value(dtype, (int(np.prod(shape[:-1])),)))
                           for _ in range(channels)], axis=-1)
        data.append(values.reshape(shape).astype(dtype))
    return w.build(inputs, outputs), data


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha_shape", [(1, 1, 8), (8,), (16, 16, 8)])
def test_prelu_8bit(alpha_shape, dtype, tmp_path):
    """A slope per channel (broadcast over the image), or one per element."""
    check(*prelu_model(dtype, (1, 16, 16, 8), alpha_shape, seed=4), tmp_path)


@pytest.mark.parametrize("op,options", [("LOGISTIC", None), ("TANH", None), ("LEAKY_RELU", {"alpha": 0.2}),
                                        ("HARD_SWISH", None)])
def test_float_unary(op, options, tmp_path):
    w = TFLiteWriter()
    x = w.tensor("x", [2, 3, 50], np.float32)
    y = w.tensor("y", [2, 3, 50], np.float32)
    w.op(op, [x], [y], options)
    data = (np.random.default_rng(5).standard_normal((2, 3, 50)) * 4).astype(np.float32)
    check(w.build([x], [y]), [data], tmp_path, exact=False)


def test_float_prelu(tmp_path):
    w = TFLiteWriter()
    x = w.tensor("x", [1, 5, 6, 4], np.float32)
    a = w.tensor("alpha", [1, 1, 4], np.float32, np.array([[[0.1, -0.5, 2.0, 0.0]]], np.float32))
    y = w.tensor("y", [1, 5, 6, 4], np.float32)
    w.op("PRELU", [x, a], [y])
    data = np.random.default_rng(6).standard_normal((1, 5, 6, 4)).astype(np.float32)
    check(w.build([x], [y]), [data], tmp_path, exact=False)


@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_float_softmax(beta, tmp_path):
    w = TFLiteWriter()
    x = w.tensor("x", [3, 12], np.float32)
    y = w.tensor("y", [3, 12], np.float32)
    w.op("SOFTMAX", [x], [y], {"beta": beta})
    check(w.build([x], [y]), [np.random.default_rng(7).standard_normal((3, 12)).astype(np.float32)], tmp_path,
          exact=False)


def softmax_rows(rng, dtype, rows: int, depth: int) -> np.ndarray:
    """Rows whose differences from their maximum reach every value from 0 to the type's whole range: the
    maximum at the top of the type in some rows, values spread or bunched near the maximum in others, and a
    row of equal values."""
    info = np.iinfo(dtype)
    out = np.empty((rows, depth), np.int64)
    for r in range(rows):
        top = int(info.max) if r % 3 == 0 else int(rng.integers(info.min, info.max + 1))
        reach = [255, 30, 6][r % 3]
        out[r] = np.clip(top - rng.integers(0, reach + 1, depth), info.min, top)
        out[r, rng.integers(depth)] = top
    out[0] = np.resize(np.arange(info.max, info.min - 1, -1), depth)
    out[-1] = out[-1, 0]
    return out.astype(dtype)


@pytest.mark.parametrize("dtype,out", [pytest.param(np.int8, np.int8, id="int8"),
                                       pytest.param(np.uint8, np.uint8, id="uint8"),
                                       pytest.param(np.int8, np.int16, id="int8-int16"),
                                       pytest.param(np.uint8, np.int16, id="uint8-int16")])
def test_softmax_8bit(dtype, out, tmp_path):
    """Betas and input scales from tiny ones (every difference counts) through ones where only the top
    differences count to ones whose factor reaches 2^30 (only the row's maximum counts); rows of one value
    to 300 values. An int16 output keeps 8 more bits of the kernel's fixed-point arithmetic."""
    rng = np.random.default_rng(8)
    w = TFLiteWriter()
    inputs, outputs, data = [], [], []
    cases = [(1.0, 0.1, (9, 40)), (0.5, 0.03, (2, 7, 300)), (2.0, 0.2, (4, 1)), (1.0, 1e-7, (6, 20)),
             (1.0, 0.004, (1, 6, 256)), (40.0, 0.5, (6, 10)), (0.3, 0.8, (6, 33)), (1.0, 0.06, (3, 2, 2, 17))]
    bits = 8 * np.dtype(out).itemsize
    for k, (beta, scale, shape) in enumerate(cases):
        x = w.tensor(f"x{k}", shape, dtype, scale=scale, zero_point=zero_point(rng, dtype))
        y = w.tensor(f"y{k}", shape, out, scale=1 / (1 << bits), zero_point=int(np.iinfo(out).min))
        w.op("SOFTMAX", [x], [y], {"beta": beta})
        inputs.append(x)
        outputs.append(y)
        rows = int(np.prod(shape[:-1]))
        data.append(softmax_rows(rng, dtype, rows, shape[-1]).reshape(shape))
    check(w.build(inputs, outputs), data, tmp_path)


def compile_problem(model: bytes, tmp_path) -> str:
    path = tmp_path / "model.tflite"
    path.write_bytes(model)
    with pytest.raises(CglowError) as info:
        cglow.compile_model(path)
    return str(info.value)


@pytest.mark.parametrize("op,out,options,words", [
    ("LOGISTIC", (1 / 128, -128), None, "takes 1/256"),
    ("HARD_SWISH", (0.001, 0), None, "smaller ratio"),
    ("SOFTMAX", (1 / 128, -128), {"beta": 1.0}, "1/256 and -128"),
    ("SOFTMAX", (1 / 256, -128), {"beta": 1e-8}, "beta times the input's scale")])
def test_8bit_parameters_tflite_refuses(op, out, options, words, tmp_path):
    """Output parameters and factors that LiteRT's Prepare refuses: one line that says why."""
    model, _ = unary_model(op, np.int8, [((0.2, 0), out)], options)
    problem = compile_problem(model, tmp_path)
    assert op in problem and words in problem and "\n" not in problem


def test_softmax_row_too_long(tmp_path):
    model, _ = unary_model("SOFTMAX", np.int8, [((0.1, 0), (1 / 256, -128))], {"beta": 1.0}, shape=(1, 4096))
    assert "at most 4095" in compile_problem(model, tmp_path)


@pytest.mark.parametrize("alpha_type,quant,words", [
    (np.float32, {}, "slope of the input's type"),
    (np.int8, dict(scale=[0.01, 0.02], zero_point=[0, 0], axis=0), "quantized per channel")])
def test_prelu_slope_tflite_refuses(alpha_type, quant, words, tmp_path):
    """An 8-bit PRELU's slope: of the input's type, with one scale (LiteRT's Prepare reads one)."""
    w = TFLiteWriter()
    x = w.tensor("x", [1, 4, 2], np.int8, scale=0.1, zero_point=0)
    a = w.tensor("alpha", [2], alpha_type, np.ones(2, alpha_type), **quant)
    y = w.tensor("y", [1, 4, 2], np.int8, scale=0.1, zero_point=0)
    w.op("PRELU", [x, a], [y])
    problem = compile_problem(w.build([x], [y]), tmp_path)
    assert "PRELU" in problem and words in problem and "\n" not in problem
