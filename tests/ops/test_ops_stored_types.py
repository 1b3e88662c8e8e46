"""float16, bfloat16 and float8 tensors (graph/stored_types.py): stored as their bits, converted to and from
float32 by runtime_c's helpers exactly as NumPy and ml_dtypes round (float8: as onnx's reference Cast, saturating
or not), computed in float32 between casts."""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
from onnx import TensorProto as T, helper as h, numpy_helper
from onnx.reference import ReferenceEvaluator
import onnxruntime as ort
import pytest

import cglow
from cglow.graph.rules.logic import bit_width
from cglow.tools import backend
from tests.util import need_tool

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
TYPES = {T.FLOAT16: np.dtype(np.float16), T.BFLOAT16: BFLOAT16}
FLOAT8 = {T.FLOAT8E4M3FN: ml_dtypes.float8_e4m3fn, T.FLOAT8E4M3FNUZ: ml_dtypes.float8_e4m3fnuz,
          T.FLOAT8E5M2: ml_dtypes.float8_e5m2, T.FLOAT8E5M2FNUZ: ml_dtypes.float8_e5m2fnuz}


def cast_model(source: int, target: int, n: int, opset: int = 21, **attrs):
    graph = h.make_graph([h.make_node("Cast", ["x"], ["y"], to=target, **attrs)], "cast",
                         [h.make_tensor_value_info("x", source, [n])], [h.make_tensor_value_info("y", target, [n])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def floats() -> np.ndarray:
    """Every rounding case: ties to even either way, the largest halves and beyond, subnormals down to and past
    the smallest, infinities, NaN, signed zeros; and a sweep of float bit patterns."""
    special = np.array([0.0, -0.0, 1.0, 65504.0, 65519.99, 65520.0, 1e6, np.inf, -np.inf, np.nan, 2.0 ** -14,
                        2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0001, 3 * 2.0 ** -26, 2.0 ** -26, 1e-45,
                        1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8,
                        3.3895314e38, 3.4028235e38], np.float32)
    sweep = np.arange(0, 2 ** 32, 65537, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([special, -special, sweep])


@pytest.mark.parametrize("target", list(TYPES), ids=["float16", "bfloat16"])
def test_float_to_half_rounds_as_numpy(target):
    x = floats()
    got = backend.prepare(cast_model(T.FLOAT, target, x.size)).run([x])[0]
    with np.errstate(all="ignore"):
        want = x.astype(TYPES[target])
    nan = np.isnan(x)
    assert got.dtype == TYPES[target]
    assert np.array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
    assert np.isnan(got[nan].astype(np.float32)).all()


@pytest.mark.parametrize("source", list(TYPES), ids=["float16", "bfloat16"])
def test_every_half_to_float_is_exact(source):
    x = np.arange(2 ** 16, dtype=np.uint16).view(TYPES[source])
    got = backend.prepare(cast_model(source, T.FLOAT, x.size)).run([x])[0]
    want = x.astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])
    assert np.isnan(got[nan]).all()


@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("target", list(FLOAT8), ids=[t.__name__ for t in FLOAT8.values()])
def test_float_to_float8_rounds_as_onnx(target, saturate):
    """Every float8 format, saturating and not: the bits of onnx's reference Cast (NaN for NaN)."""
    x = floats()
    model = cast_model(T.FLOAT, target, x.size, saturate=saturate)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = np.asarray(ReferenceEvaluator(model).run(None, {"x": x})[0]).view(np.uint8)
    got = backend.prepare(model).run([x])[0]
    assert got.dtype == np.dtype(FLOAT8[target])
    nan = np.isnan(want.view(FLOAT8[target]).astype(np.float32))
    assert np.array_equal(got.view(np.uint8)[~nan], want[~nan])
    assert np.isnan(got[nan].astype(np.float32)).all()


@pytest.mark.parametrize("source", list(FLOAT8), ids=[t.__name__ for t in FLOAT8.values()])
def test_every_float8_to_float_is_exact(source):
    x = np.arange(256, dtype=np.uint8).view(FLOAT8[source])
    got = backend.prepare(cast_model(source, T.FLOAT, x.size)).run([x])[0]
    want = x.astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan]) and np.isnan(got[nan]).all()


def _reference_cast(model, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(ReferenceEvaluator(model).run(None, {"x": x})[0])


def test_float_to_float4_rounds_as_onnx():
    """float4 E2M1: ties to even, always saturating to 6 (no infinity), NaN as ml_dtypes gives it (a zero of
    the other sign): the bits of onnx's reference Cast, saturate either way."""
    halves = [0.25, 0.25 * 1.0001, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.999, 7.0, 7.001]
    x = np.concatenate([floats(), np.arange(-16, 16, 0.125, dtype=np.float32), np.array(halves, np.float32)])
    for saturate in (0, 1):
        model = cast_model(T.FLOAT, T.FLOAT4E2M1, x.size, 23, saturate=saturate)
        got = backend.prepare(model).run([x])[0]
        assert got.dtype == np.dtype(ml_dtypes.float4_e2m1fn)
        assert np.array_equal(got.view(np.uint8), _reference_cast(model, x).view(np.uint8))


def test_every_float4_to_float_is_exact():
    x = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn)
    got = backend.prepare(cast_model(T.FLOAT4E2M1, T.FLOAT, x.size, 23)).run([x])[0]
    assert np.array_equal(got.view(np.uint32), x.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
def test_float_to_e8m0_rounds_as_onnx(round_mode, saturate):
    """float8 E8M0 (a power of two): each round_mode, saturating and not, the bits of onnx's reference Cast over
    the sweep, float subnormals, the powers of two and the halves between them."""
    powers = 2.0 ** np.arange(-149, 128, dtype=np.float64)
    x = np.concatenate([floats(), powers.astype(np.float32), (powers * 1.5).astype(np.float32),
                        (powers * 1.4999999).astype(np.float32), (powers * 1.5000001).astype(np.float32)])
    model = cast_model(T.FLOAT, T.FLOAT8E8M0, x.size, 25, saturate=saturate, round_mode=round_mode)
    got = backend.prepare(model).run([x])[0]
    assert got.dtype == np.dtype(ml_dtypes.float8_e8m0fnu)
    assert np.array_equal(got.view(np.uint8), _reference_cast(model, x).view(np.uint8))


def test_every_e8m0_to_float_is_exact():
    x = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu)
    model = cast_model(T.FLOAT8E8M0, T.FLOAT, x.size, 25)
    got = backend.prepare(model).run([x])[0]
    want = x.astype(np.float32)
    assert np.array_equal(got[:255].view(np.uint32), want[:255].view(np.uint32)) and np.isnan(got[255])


def test_an_unknown_round_mode_is_refused_by_name():
    model = cast_model(T.FLOAT, T.FLOAT8E8M0, 4, 25, round_mode="sideways")
    with pytest.raises(cglow.CglowError, match="round_mode 'sideways' is not one of up, down, nearest"):
        cglow.compile_model(model)


def test_a_float16_network_matches_onnxruntime():
    """A float16 MatMul, Add, Relu and Softmax, each rounded to float16 as onnxruntime's float16 kernels round:
    the same values within a float16 step; the C builds with clang under the strict flags too."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float16), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float16), "b")
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["m", "b"], ["a"]),
             h.make_node("Relu", ["a"], ["r"]), h.make_node("Softmax", ["r"], ["y"])]
    graph = h.make_graph(nodes, "half", [h.make_tensor_value_info("x", T.FLOAT16, [4, 16])],
                         [h.make_tensor_value_info("y", T.FLOAT16, [4, 8])], [w, b])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    x = rng.standard_normal((4, 16)).astype(np.float16)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = cglow.compile_model(model)
    assert "const uint16_t *input_0" in compiled.h_source
    got = cglow.build(compiled)(x)[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=1e-3)
    from cglow.tools.host import check_warnings, sources
    check_warnings(sources(compiled), need_tool("clang"))


def test_a_float64_model_is_stored_as_double_and_computed_in_float32():
    """float64 inputs, weights and outputs: the C takes and gives double, computes in float (no double arithmetic
    in a loop), and says so; the values are the float64 reference's within float32's precision."""
    rng = np.random.default_rng(4)
    w = numpy_helper.from_array(rng.standard_normal((6, 5)), "w")
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Tanh", ["m"], ["y"])]
    graph = h.make_graph(nodes, "double", [h.make_tensor_value_info("x", T.DOUBLE, [3, 6])],
                         [h.make_tensor_value_info("y", T.DOUBLE, [3, 5])], [w])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    x = rng.standard_normal((3, 6))
    with pytest.warns(UserWarning, match="float64 values are computed in float32"):
        compiled = cglow.compile_model(model)
    assert "const double *input_0" in compiled.h_source and "tanhf" in compiled.c_source
    got = cglow.build(compiled)(x)[0]
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.tanh(x @ numpy_helper.to_array(w)), rtol=1e-5, atol=1e-6)


def test_an_op_built_of_others_rounds_its_result_only():
    """A bfloat16 GridSample, which cglow builds of elementwise ops and a gather (graph/sampling.py), computes its
    coordinates in float32 and rounds its result only: x = (0.0708 + 1) / 2 * 14 = 7.4956 reads column 7, where
    rounding each step to bfloat16 made it 7.5 and read column 8 (found by the typed differential fuzzing)."""
    grid = numpy_helper.from_array(np.array([[[[0.0708008, -0.683594]]]], BFLOAT16), "grid")
    node = h.make_node("GridSample", ["x", "grid"], ["y"], mode="nearest", align_corners=1)
    graph = h.make_graph([node], "sample", [h.make_tensor_value_info("x", T.BFLOAT16, [1, 1, 11, 15])],
                         [h.make_tensor_value_info("y", T.BFLOAT16, [1, 1, 1, 1])], [grid])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 20)])
    x = np.arange(165).reshape(1, 1, 11, 15).astype(BFLOAT16)  # integers to 256 are exact in bfloat16
    assert cglow.build(cglow.compile_model(model))(x)[0].astype(np.float32).item() == 2 * 15 + 7


@pytest.mark.parametrize("elem, dtype", [(T.INT4, ml_dtypes.int4), (T.UINT4, ml_dtypes.uint4),
                                         (T.INT2, ml_dtypes.int2), (T.UINT2, ml_dtypes.uint2)])
def test_sub_byte_integers_read_wrap_and_saturate_as_onnx(elem, dtype):
    """A 4- or 2-bit input (its bits in each byte's low bits, as ml_dtypes keeps them) read sign-extended, tripled
    in float, quantized back to its type (saturating), and cast to it from float (wrapping): onnx's reference."""
    info = ml_dtypes.iinfo(dtype)
    x = np.arange(info.min, info.max + 1).astype(dtype)
    zero = numpy_helper.from_array(np.array(0, dtype), "zero")
    scale = numpy_helper.from_array(np.array(1.0, np.float32), "scale")
    three = numpy_helper.from_array(np.array(3.0, np.float32), "three")
    nodes = [h.make_node("Cast", ["x"], ["f"], to=T.FLOAT), h.make_node("Mul", ["f", "three"], ["t"]),
             h.make_node("QuantizeLinear", ["t", "scale", "zero"], ["q"]), h.make_node("Cast", ["t"], ["w"], to=elem)]
    graph = h.make_graph(nodes, "sub_byte", [h.make_tensor_value_info("x", elem, [x.size])],
                         [h.make_tensor_value_info("q", elem, [x.size]), h.make_tensor_value_info("w", elem, [x.size])],
                         [zero, scale, three])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21 if "4" in np.dtype(dtype).name else 25)])
    want = ReferenceEvaluator(model).run(None, {"x": x})
    got = backend.prepare(model).run([x])
    for g, w in zip(got, want):
        assert g.dtype == np.dtype(dtype) and np.array_equal(g.astype(np.int32), np.asarray(w).astype(np.int32))


BIT_CASTS = [(T.FLOAT16, T.INT16), (T.INT16, T.BFLOAT16), (T.FLOAT8E5M2, T.UINT8), (T.INT8, T.FLOAT8E4M3FN),
             (T.FLOAT8E8M0, T.INT8), (T.FLOAT4E2M1, T.INT4), (T.UINT4, T.FLOAT4E2M1), (T.INT2, T.UINT2),
             (T.DOUBLE, T.UINT64), (T.INT64, T.DOUBLE), (T.FLOAT, T.UINT32)]


@pytest.mark.parametrize("source, target", BIT_CASTS, ids=[f"{s}-{t}" for s, t in BIT_CASTS])
def test_bit_casts_of_stored_types_keep_the_bits(source, target):
    """BitCast takes a stored type's bits as they are (a 4- or 2-bit type's low bits; float64's as a double's):
    every bit pattern of the narrow types, a sweep of the wide ones, against onnx's reference."""
    dtype = np.dtype(h.tensor_dtype_to_np_dtype(source))
    width = bit_width(dtype)
    rng = np.random.default_rng(source)
    pattern = np.arange(1 << width, dtype=np.uint64) if width <= 16 else \
        rng.integers(0, 1 << 63, 4096, dtype=np.uint64) * 2 + rng.integers(0, 2, 4096, dtype=np.uint64)
    x = pattern.astype(f"uint{8 * dtype.itemsize}").view(dtype)
    graph = h.make_graph([h.make_node("BitCast", ["x"], ["y"], to=target)], "bits",
                         [h.make_tensor_value_info("x", source, [x.size])],
                         [h.make_tensor_value_info("y", target, [x.size])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 26)])
    want = _reference_cast(model, x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = backend.prepare(model).run([x])[0]
    unsigned = f"uint{8 * want.dtype.itemsize}"
    assert got.dtype == want.dtype and np.array_equal(got.view(unsigned), want.view(unsigned))
