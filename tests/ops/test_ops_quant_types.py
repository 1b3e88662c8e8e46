"""QuantizeLinear and DequantizeLinear beyond the 8-bit integers of quantized models (lower/ops/quant.py): to and
from float8 and float4 (rounded and saturated as Cast rounds), blocked quantization (a scale per block along an
axis, the last block shorter), parameters given at run time, the output_dtype attribute; against onnx's reference
evaluator, bit for bit."""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
from onnx import TensorProto as T, helper as h, numpy_helper
from onnx.reference import ReferenceEvaluator
import pytest

import cglow
from cglow.tools import backend

FLOATS = {T.FLOAT8E4M3FN: ml_dtypes.float8_e4m3fn, T.FLOAT8E4M3FNUZ: ml_dtypes.float8_e4m3fnuz,
          T.FLOAT8E5M2: ml_dtypes.float8_e5m2, T.FLOAT8E5M2FNUZ: ml_dtypes.float8_e5m2fnuz,
          T.FLOAT4E2M1: ml_dtypes.float4_e2m1fn}


def _model(op: str, x: tuple[int, int], shape, inputs: dict, consts: dict, out: int, opset: int = 25, **attrs):
    """One QuantizeLinear or DequantizeLinear node: x (elem type, shape) and the parameters, each a graph input
    (`inputs`: name -> (elem type, shape)) or a constant (`consts`: name -> array)."""
    names = ["x", "scale"] + (["zero"] if "zero" in inputs or "zero" in consts else [])
    graph = h.make_graph([h.make_node(op, names, ["y"], **attrs)], "q",
                         [h.make_tensor_value_info("x", *x)] +
                         [h.make_tensor_value_info(n, *t) for n, t in inputs.items()],
                         [h.make_tensor_value_info("y", out, shape)],
                         [numpy_helper.from_array(v, n) for n, v in consts.items()])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _compare(model, feeds: dict) -> None:
    """cglow's outputs against the reference's, bit for bit."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = np.asarray(ReferenceEvaluator(model).run(None, feeds)[0])
    got = backend.prepare(model).run(list(feeds.values()))[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    bits = f"uint{8 * want.dtype.itemsize}"
    assert np.array_equal(got.view(bits), want.view(bits)), (got, want)


def _values(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 10 ** rng.uniform(-3, 3, n)).astype(np.float32)
    x[:8] = [0.0, 1e6, -1e6, np.inf, -np.inf, 0.25, -0.75, 3.0]
    return x


@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("elem", list(FLOATS), ids=[t.__name__ for t in FLOATS.values()])
def test_quantize_to_a_float_type_rounds_as_cast(elem, saturate):
    """x / scale per axis, rounded to the float type (saturating or not: float4 always saturates)."""
    x = _values(96, elem).reshape(4, 24)
    scale = np.array([0.5, 2.0, 1.0, 0.125], np.float32)
    model = _model("QuantizeLinear", (T.FLOAT, [4, 24]), [4, 24], {}, {"scale": scale}, elem, axis=0,
                   saturate=saturate, output_dtype=elem)
    _compare(model, {"x": x})


@pytest.mark.parametrize("elem", list(FLOATS), ids=[t.__name__ for t in FLOATS.values()])
def test_dequantize_every_value_of_a_float_type(elem):
    """Every code of the type times a scale given at run time; its zero point 0, a constant (NaN codes apart: the
    reference gives NaN, of whichever bits)."""
    codes = np.arange(16 if elem == T.FLOAT4E2M1 else 256, dtype=np.uint8).view(FLOATS[elem])
    zero = np.zeros(1, np.uint8).view(FLOATS[elem])
    model = _model("DequantizeLinear", (elem, [codes.size]), [codes.size], {"scale": (T.FLOAT, [])},
                   {"zero": zero}, T.FLOAT)
    scale = np.array(0.375, np.float32)
    got = backend.prepare(model).run([codes, scale])[0]
    want = codes.astype(np.float32) * scale
    nan = np.isnan(want)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32)) and np.isnan(got[nan]).all()


def test_a_float8_zero_point_given_at_run_time_is_converted():
    x = np.array([0.0, 1.5, -3.0, 448.0, -0.0625], np.float32)
    model = _model("QuantizeLinear", (T.FLOAT, [5]), [5], {"zero": (T.FLOAT8E4M3FN, [])},
                   {"scale": np.array(0.5, np.float32)}, T.FLOAT8E4M3FN)
    zero = np.array(0, np.uint8).view(ml_dtypes.float8_e4m3fn).reshape(())
    _compare(model, {"x": x, "zero": zero})


@pytest.mark.parametrize("given", ["constants", "inputs"])
@pytest.mark.parametrize("shape, axis, block", [((3, 8), 1, 4), ((3, 10), 1, 4), ((7, 2, 5), 0, 3),
                                                ((2, 5, 3), -2, 2), ((4, 3), 1, 8)])
def test_blocked_quantization_round_trips_as_onnx(shape, axis, block, given):
    """Blocked QuantizeLinear to int8 and DequantizeLinear back: a scale and zero point per block of `block`
    elements along `axis` (the last block shorter where the length is not a multiple), constants or graph
    inputs."""
    rng = np.random.default_rng(len(shape) * block)
    at = axis % len(shape)
    blocks = tuple(-(-n // block) if d == at else n for d, n in enumerate(shape))
    x = (rng.standard_normal(shape) * 20).astype(np.float32)
    params = {"scale": rng.uniform(0.05, 0.5, blocks).astype(np.float32),
              "zero": rng.integers(-20, 20, blocks).astype(np.int8)}
    inputs = {n: (T.FLOAT if n == "scale" else T.INT8, list(blocks)) for n in params} if given == "inputs" else {}
    consts = {} if inputs else params
    quantize = _model("QuantizeLinear", (T.FLOAT, list(shape)), list(shape), inputs, consts, T.INT8, opset=21,
                      axis=axis, block_size=block)
    _compare(quantize, {"x": x, **(params if inputs else {})})
    q = rng.integers(-128, 128, shape).astype(np.int8)
    dequantize = _model("DequantizeLinear", (T.INT8, list(shape)), list(shape), inputs, consts, T.FLOAT, opset=21,
                        axis=axis, block_size=block)
    _compare(dequantize, {"x": q, **(params if inputs else {})})


def test_blocked_float4_with_float8_e8m0_scales():
    """The microscaling form: float4 values, a power-of-two (E8M0) scale per block of 4, dequantized to float32."""
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 16, (2, 8)).astype(np.uint8).view(ml_dtypes.float4_e2m1fn)
    scale = (2.0 ** rng.integers(-3, 4, (2, 2))).astype(ml_dtypes.float8_e8m0fnu)
    model = _model("DequantizeLinear", (T.FLOAT4E2M1, [2, 8]), [2, 8], {"scale": (T.FLOAT8E8M0, [2, 2])}, {},
                   T.FLOAT, axis=1, block_size=4, output_dtype=T.FLOAT)
    _compare(model, {"x": codes, "scale": scale})


@pytest.mark.parametrize("elem, dtype", [(T.INT4, ml_dtypes.int4), (T.UINT2, ml_dtypes.uint2)])
def test_output_dtype_without_a_zero_point(elem, dtype):
    """output_dtype names the type where no zero point gives it: a 4- or 2-bit one saturates to its range. (The
    scale is an input: with a constant one, the C would take x quantized, its header giving the parameters.)"""
    x = np.linspace(-40, 40, 17, dtype=np.float32)
    model = _model("QuantizeLinear", (T.FLOAT, [17]), [17], {"scale": (T.FLOAT, [])}, {}, elem, output_dtype=elem)
    _compare(model, {"x": x, "scale": np.array(3.0, np.float32)})


def test_blocks_that_do_not_cover_the_axis_are_refused():
    model = _model("DequantizeLinear", (T.INT8, [2, 8]), [2, 8], {}, {"scale": np.ones((2, 3), np.float32)},
                   T.FLOAT, opset=21, axis=1, block_size=4)
    with pytest.raises(cglow.CglowError, match=r"scale of shape \(2, 3\) for blocks of 4 along axis 1"):
        cglow.compile_model(model)


@pytest.mark.parametrize("elem", [T.FLOAT8E4M3FN, T.FLOAT4E2M1], ids=["float8_e4m3fn", "float4_e2m1fn"])
def test_a_float_quantized_convolution_runs_in_float(elem):
    """QDQ in a float type around a Conv (its activations quantized and dequantized, its weights dequantized per
    channel): no integer kernel folds it; it runs as the maps and a float Conv, the reference's values."""
    rng = np.random.default_rng(7)
    w = rng.integers(0, 16 if elem == T.FLOAT4E2M1 else 256, (4, 3, 3, 3)).astype(np.uint8)
    w = w.view(FLOATS[elem])
    w[np.isnan(w.astype(np.float32))] = 0
    consts = [numpy_helper.from_array(v, n) for n, v in (
        ("w", w), ("w_scale", rng.uniform(0.01, 0.1, 4).astype(np.float32)),
        ("x_scale", np.array(0.05, np.float32)), ("zero", np.zeros((), np.uint8).view(FLOATS[elem])))]
    nodes = [h.make_node("QuantizeLinear", ["x", "x_scale", "zero"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "x_scale", "zero"], ["xd"]),
             h.make_node("DequantizeLinear", ["w", "w_scale"], ["wd"], axis=0),
             h.make_node("Conv", ["xd", "wd"], ["y"], pads=[1, 1, 1, 1])]
    graph = h.make_graph(nodes, "fq", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 6, 6])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 6, 6])], consts)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 23)])
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = backend.prepare(model).run([x])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("elem, shape, axis, block", [
    (T.INT4, (6, 8), 1, 4), (T.UINT4, (6, 8), 0, 4), (T.INT4, (5, 3, 6), 1, 2), (T.UINT4, (7, 10), 0, 3),
    (T.INT4, (6, 10), 1, 4), (T.INT4, (4, 9), 0, 2), (T.UINT4, (4, 9), 1, 3)])
def test_four_bit_weights_are_stored_two_per_byte(elem, shape, axis, block):
    """Constant int4 or uint4 weights of a blocked DequantizeLinear: two per byte in flash where pairs along the last
    dim stay whole in every block (its length even, blocks along it of an even size), unpacked by the maps; one
    per byte otherwise. The values are the reference's, bit for bit (y = x + the dequantized weights)."""
    dtype = {T.INT4: ml_dtypes.int4, T.UINT4: ml_dtypes.uint4}[elem]
    info = ml_dtypes.iinfo(dtype)
    rng = np.random.default_rng(sum(shape) + block)
    blocks = tuple(-(-n // block) if d == axis else n for d, n in enumerate(shape))
    consts = {"w": rng.integers(info.min, info.max + 1, shape).astype(dtype),
              "scale": rng.uniform(0.01, 0.1, blocks).astype(np.float32),
              "zero": rng.integers(info.min, info.max + 1, blocks).astype(dtype)}
    nodes = [h.make_node("DequantizeLinear", ["w", "scale", "zero"], ["wd"], axis=axis, block_size=block),
             h.make_node("Add", ["x", "wd"], ["y"])]
    graph = h.make_graph(nodes, "w4", [h.make_tensor_value_info("x", T.FLOAT, list(shape))],
                         [h.make_tensor_value_info("y", T.FLOAT, list(shape))],
                         [numpy_helper.from_array(v, n) for n, v in consts.items()])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)])
    _compare(model, {"x": rng.standard_normal(shape).astype(np.float32)})
    pairs = shape[-1] % 2 == 0 and not (axis == len(shape) - 1 and block % 2)
    parameters = 4 * int(np.prod(blocks)) + (int(np.prod(blocks)) if np.any(consts["zero"].astype(np.int8)) else 0)
    assert cglow.compile_model(model).weights_bytes - parameters == int(np.prod(shape)) // (2 if pairs else 1)


@pytest.mark.parametrize("precision", [T.FLOAT16, T.BFLOAT16], ids=["float16", "bfloat16"])
def test_quantize_divides_in_the_precision_given(precision):
    """precision float16 or bfloat16 (opset 23): x and the scale rounded to it, and their quotient, as the
    reference divides; many quotients near a half so that the rounding shows."""
    rng = np.random.default_rng(precision)
    scale = np.array([0.37, 1.13, 0.051], np.float32)
    x = ((rng.integers(-300, 300, (3, 64)) + 0.5 + rng.uniform(-1e-3, 1e-3, (3, 64))) * scale[:, None])
    model = _model("QuantizeLinear", (T.FLOAT, [3, 64]), [3, 64], {}, {"scale": scale, "zero": np.zeros(3, np.int16)},
                   T.INT16, opset=23, axis=0, precision=precision)
    _compare(model, {"x": x.astype(np.float32)})


def test_a_division_in_another_precision_is_refused():
    model = _model("QuantizeLinear", (T.FLOAT, [4]), [4], {}, {"scale": np.array(0.5, np.float32)}, T.UINT8,
                   opset=23, precision=T.DOUBLE)
    with pytest.raises(cglow.CglowError, match="a division in float64 precision is not supported"):
        cglow.compile_model(model)
