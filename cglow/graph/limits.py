"""Sizes against the memory limit (--max-memory), in exact integer arithmetic: a product of huge dims cannot
wrap around, and a tensor's size is checked before its data is allocated."""
from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import CglowError, reason
from .ir import TensorType


def check_bytes(what: str, nbytes: int, max_memory: int) -> None:
    if nbytes > max_memory:
        raise CglowError(f"{what} is {nbytes} bytes, above the --max-memory limit of {max_memory} bytes")


def checked_type(what: str, t: TensorType, max_memory: int) -> TensorType:
    """The type with Python-integer dims, refused when a dim is negative or the tensor is too large."""
    shape = tuple(int(d) for d in t.shape)
    if min(shape, default=0) < 0:
        raise CglowError(f"{what} would have the shape {list(shape)} (inconsistent attributes or input shapes)")
    t = TensorType(np.dtype(t.dtype), shape, t.counted)
    check_bytes(f"{what} ({t})", t.nbytes, max_memory)
    return t


def declared_bytes(tensor: onnx.TensorProto, what: str) -> int:
    """The bytes that the tensor's dims and element type call for."""
    if any(d < 0 for d in tensor.dims):
        raise CglowError(f"{what}: negative dimension in its shape {list(tensor.dims)}")
    try:
        itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
    except Exception:
        raise CglowError(f"{what}: unsupported element type {tensor.data_type}") from None
    return math.prod(tensor.dims) * itemsize


def read_tensor(tensor: onnx.TensorProto, what: str, max_memory: int) -> np.ndarray:
    """A TensorProto's data, its declared size checked first."""
    nbytes = declared_bytes(tensor, what)
    check_bytes(what, nbytes, max_memory)
    whole_bytes = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).kind in "biufc"  # not 4-bit, strings
    if tensor.HasField("raw_data") and whole_bytes and len(tensor.raw_data) != nbytes:
        raise CglowError(f"{what}: its data is {len(tensor.raw_data)} bytes, where its shape {list(tensor.dims)} "
                         f"needs {nbytes}")
    try:
        return numpy_helper.to_array(tensor)
    except Exception as exc:
        raise CglowError(f"{what}: unreadable tensor ({reason(exc)})") from None
