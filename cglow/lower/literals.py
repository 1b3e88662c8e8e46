"""C spellings: the C type of each supported element type, and exact literals of every type."""
from __future__ import annotations

import numpy as np

C_TYPES = {
    np.dtype(np.float32): "float",
    np.dtype(np.int8): "int8_t", np.dtype(np.uint8): "uint8_t",
    np.dtype(np.int16): "int16_t", np.dtype(np.uint16): "uint16_t",
    np.dtype(np.int32): "int32_t", np.dtype(np.uint32): "uint32_t",
    np.dtype(np.int64): "int64_t", np.dtype(np.uint64): "uint64_t",
    np.dtype(np.bool_): "uint8_t",  # 0 or 1, one byte, as ONNX and NumPy store it
}


def c_type(dtype: np.dtype) -> str:
    return C_TYPES[np.dtype(dtype)]


def c_float(value) -> str:
    v = np.float32(value)
    if np.isnan(v):
        return "NAN"
    if np.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    text = str(v)  # numpy prints the shortest string that reads back as the same float32
    if "e" not in text and "." not in text:
        text += ".0"
    text += "f"
    return f"({text})" if text.startswith("-") else text


def c_int(value, dtype: np.dtype) -> str:
    v = int(value)
    dtype = np.dtype(dtype)
    if dtype.kind == "i" and dtype.itemsize >= 4 and v == np.iinfo(dtype).min:
        return f"INT{8 * dtype.itemsize}_MIN"  # its magnitude is not a valid literal of the type
    text = str(v) + ("u" if dtype.kind == "u" else "")
    return f"({text})" if v < 0 else text


def c_literal(value, dtype: np.dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return c_float(value)
    if dtype == np.bool_:
        return "1" if value else "0"
    return c_int(value, dtype)


def c_array_lines(data: np.ndarray, per_line: int = 8) -> list[str]:
    """Initializer lines for a C array of data's element type."""
    flat = np.asarray(data).reshape(-1)
    values = [c_literal(v, flat.dtype) for v in flat] or ["0"]
    return [", ".join(values[i:i + per_line]) + "," for i in range(0, len(values), per_line)]


def c_lowest(dtype: np.dtype) -> str:
    """The identity of max: the smallest value of the type."""
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return "(-INFINITY)"
    return "0" if dtype.kind in "ub" else c_int(np.iinfo(dtype).min, dtype)


def c_highest(dtype: np.dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return "INFINITY"
    return "1" if dtype == np.bool_ else c_int(np.iinfo(dtype).max, dtype)
