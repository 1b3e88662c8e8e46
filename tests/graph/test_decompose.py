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


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (4, 3, 3), (2, 2, 3, 3)])
def test_det_as_numpy(shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    graph = h.make_graph([h.make_node("Det", ["x"], ["y"])], "det", [h.make_tensor_value_info("x", T.FLOAT, shape)],
                         [h.make_tensor_value_info("y", T.FLOAT, shape[:-2])])
    got = backend.prepare(h.make_model(graph, opset_imports=[h.make_opsetid("", 22)])).run([x])[0]
    np.testing.assert_allclose(got, np.linalg.det(x), rtol=1e-5, atol=1e-5)


def test_a_det_of_4_x_4_matrices_is_refused():
    graph = h.make_graph([h.make_node("Det", ["x"], ["y"])], "det", [h.make_tensor_value_info("x", T.FLOAT, [4, 4])],
                         [h.make_tensor_value_info("y", T.FLOAT, [])])
    with pytest.raises(CglowError, match="up to 3 x 3"):
        cglow.compile_model(h.make_model(graph, opset_imports=[h.make_opsetid("", 22)]))
