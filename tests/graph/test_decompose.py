"""Ops compiled as cglow's own decompositions (cglow/graph/decompose.py): DFT against NumPy's FFT, the signal cut
or padded to dft_length, real and complex, forward, inverse and one-sided; Det against NumPy's."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T, helper as h, numpy_helper
import pytest

import cglow
from cglow.errors import CglowError
from cglow.tools import backend

RNG = np.random.default_rng(7)


def dft_model(shape, out_shape, length=None, axis=1, **attrs):
    inits = [numpy_helper.from_array(np.array(axis, np.int64), "axis")]
    inputs = ["x", "", "axis"]
    if length is not None:
        inits.append(numpy_helper.from_array(np.array(length, np.int64), "length"))
        inputs[1] = "length"
    graph = h.make_graph([h.make_node("DFT", inputs, ["y"], **attrs)], "dft",
                         [h.make_tensor_value_info("x", T.FLOAT, shape)],
                         [h.make_tensor_value_info("y", T.FLOAT, out_shape)], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 20)])


@pytest.mark.parametrize("length, complex_in, inverse, onesided", [
    (None, False, 0, 0), (12, False, 0, 0), (5, True, 0, 0), (8, True, 1, 0), (9, False, 0, 1), (None, True, 0, 1),
    (None, True, 1, 1), (9, True, 1, 1), (6, True, 1, 1)])
def test_dft_as_numpy_fft(length, complex_in, inverse, onesided):
    n = 8
    x = RNG.standard_normal((2, n, 3, 2 if complex_in else 1)).astype(np.float32)
    signal = x[..., 0] + 1j * x[..., 1] if complex_in else x[..., 0]
    m = length or n
    if inverse and onesided:  # the inverse of half a spectrum: a real signal, 2 (n - 1) samples unless given
        want = np.fft.irfft(signal, n=length, axis=1)[..., None].astype(np.float32)
    else:
        want = (np.fft.ifft if inverse else np.fft.fft)(signal, n=m, axis=1)
        want = want[:, :m // 2 + 1] if onesided else want
        want = np.stack([want.real, want.imag], -1).astype(np.float32)
    model = dft_model(list(x.shape), list(want.shape), length, inverse=inverse, onesided=onesided)
    got = backend.prepare(model).run([x])[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_dft_along_the_complex_axis_is_refused():
    with pytest.raises(CglowError, match="axis 2 of a"):
        cglow.compile_model(dft_model([1, 4, 1], [1, 4, 2], axis=-1))


def _det_model(shape):
    graph = h.make_graph([h.make_node("Det", ["x"], ["y"])], "det", [h.make_tensor_value_info("x", T.FLOAT, shape)],
                         [h.make_tensor_value_info("y", T.FLOAT, shape[:-2])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 22)])


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (4, 3, 3), (2, 2, 3, 3), (5, 4, 4), (3, 7, 7), (16, 16)])
def test_det_as_numpy(shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    got = backend.prepare(_det_model(shape)).run([x])[0]
    want = np.linalg.det(x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_det_of_singular_and_permuted_matrices():
    """A zero column (the pivot 0: the determinant 0, not NaN), a repeated row, and a permutation matrix (every step
    swaps rows: the sign)."""
    zero_column = RNG.standard_normal((4, 4)).astype(np.float32)
    zero_column[:, 1] = 0
    repeated = RNG.standard_normal((4, 4)).astype(np.float32)
    repeated[3] = repeated[0]
    permutation = np.eye(4, dtype=np.float32)[[3, 0, 1, 2]]
    x = np.stack([zero_column, repeated, permutation])
    got = backend.prepare(_det_model((3, 4, 4))).run([x])[0]
    np.testing.assert_allclose(got, [0, 0, np.linalg.det(permutation)], atol=1e-5)


def test_a_det_beyond_16_x_16_is_refused():
    with pytest.raises(CglowError, match="up to 16 x 16"):
        cglow.compile_model(_det_model((17, 17)))


TFIDF = [  # id, input, attributes
    ("idf-weights-batch", np.array([[1, 4, 2, 4, 2, 2], [3, 3, 1, 2, 4, 1]], np.int64),
     dict(mode="IDF", min_gram_length=1, max_gram_length=2, max_skip_count=1, ngram_counts=[0, 3],
          ngram_indexes=[2, 0, 1, 3, 4], pool_int64s=[1, 2, 4, 4, 2, 2, 4], weights=[0.5, 2.0, 1.5, 3.0, 0.25])),
    ("tfidf-shared-column", np.array([5, 1, 5, 1, 5, 1, 5], np.int32),
     dict(mode="TFIDF", min_gram_length=1, max_gram_length=3, max_skip_count=2, ngram_counts=[0, 2, 2],
          ngram_indexes=[1, 1, 0], pool_int64s=[5, 1, 5, 5, 5], weights=[1.0, 2.0, 0.5])),
    ("trigrams-only", np.array([7, 8, 7, 8, 7, 8, 7], np.int64),
     dict(mode="TF", min_gram_length=3, max_gram_length=3, max_skip_count=3, ngram_counts=[0, 1, 3],
          ngram_indexes=[0, 1, 2, 3], pool_int64s=[7, 7, 8, 7, 8, 7], weights=[1.0, 1.0, 1.0, 1.0])),
]


@pytest.mark.parametrize("case", TFIDF, ids=[c[0] for c in TFIDF])
def test_tfidf_vectorizer(case):
    """Against onnx's reference: every mode, weights, grams of several lengths and skips, two grams on one column,
    the lengths outside [min, max] not counted."""
    from onnx.reference import ReferenceEvaluator
    _, x, attrs = case
    columns = max(attrs["ngram_indexes"]) + 1
    graph = h.make_graph([h.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)], "tfidf",
                         [h.make_tensor_value_info("x", h.np_dtype_to_tensor_dtype(x.dtype), x.shape)],
                         [h.make_tensor_value_info("y", T.FLOAT, x.shape[:-1] + (columns,))])
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    np.testing.assert_allclose(backend.prepare(m).run([x])[0], want, rtol=1e-6)


def test_tfidf_vectorizer_of_strings_is_refused():
    node = h.make_node("TfIdfVectorizer", ["x"], ["y"], mode="TF", min_gram_length=1, max_gram_length=1,
                       max_skip_count=0, ngram_counts=[0], ngram_indexes=[0], pool_strings=["a"])
    graph = h.make_graph([node], "tfidf", [h.make_tensor_value_info("x", T.INT64, [4])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1])])
    with pytest.raises(CglowError, match="pool of strings"):
        cglow.compile_model(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]))


@pytest.mark.parametrize("shape, outputs", [((2, 3, 4, 5), 3), ((4, 2, 6), 1)])
def test_batchnorm_in_training_mode(shape, outputs):
    """The batch's own statistics normalize it; the running ones move towards them by (1 - momentum)."""
    from onnx.reference import ReferenceEvaluator
    x = RNG.standard_normal(shape).astype(np.float32) * 3 + 1
    c = shape[1]
    params = {"s": RNG.uniform(0.5, 2, c), "b": RNG.standard_normal(c), "m": RNG.standard_normal(c),
              "v": RNG.uniform(0.5, 2, c)}
    names = ["y", "running_mean", "running_var"][:outputs]
    node = h.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], names, training_mode=1, momentum=0.8,
                       epsilon=1e-3)
    graph = h.make_graph([node], "bn", [h.make_tensor_value_info("x", T.FLOAT, shape)],
                         [h.make_tensor_value_info(n, T.FLOAT, shape if n == "y" else (c,)) for n in names],
                         [numpy_helper.from_array(v.astype(np.float32), n) for n, v in params.items()])
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 15)])
    want = ReferenceEvaluator(m).run(None, {"x": x})
    for got, expected in zip(backend.prepare(m).run([x]), want):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
