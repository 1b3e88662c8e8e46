"""C spellings: the C type of each supported element type, and exact literals of every type."""
from __future__ import annotations

import ml_dtypes
import numpy as np

# float16, bfloat16, the float8 types (E8M0 too, an exponent alone) and float4 (its bits in a byte's low bits, as
# ml_dtypes keeps them): stored as their bits, computed in float32 (graph/stored_types.py); STORED_FLOATS, float64 too
NARROW_FLOATS = tuple(np.dtype(t) for t in (
    np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2,
    ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e8m0fnu, ml_dtypes.float4_e2m1fn))
STORED_FLOATS = NARROW_FLOATS + (np.dtype(np.float64),)
# the 4- and 2-bit integers: stored one a byte, their bits in its low bits as ml_dtypes keeps them, computed in 8 bits
SUB_BYTE_INTS = tuple(np.dtype(t) for t in (ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2))
BITS = NARROW_FLOATS + SUB_BYTE_INTS  # the types C holds as their bits
C_TYPES = {
    np.dtype(np.float32): "float",
    np.dtype(np.int8): "int8_t", np.dtype(np.uint8): "uint8_t",
    np.dtype(np.int16): "int16_t", np.dtype(np.uint16): "uint16_t",
    np.dtype(np.int32): "int32_t", np.dtype(np.uint32): "uint32_t",
    np.dtype(np.int64): "int64_t", np.dtype(np.uint64): "uint64_t",
    np.dtype(np.bool_): "uint8_t",  # 0 or 1, one byte, as ONNX and NumPy store it
    **{t: f"uint{8 * t.itemsize}_t" for t in BITS},  # their bits
    np.dtype(np.float64): "double",  # stored, computed in float32 (graph/stored_types.py)
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
    if dtype in BITS:
        return str(int(np.asarray(value, dtype).view(f"uint{8 * dtype.itemsize}")))
    if dtype == np.float32:
        return c_float(value)
    if dtype == np.float64:
        return _c_double(float(value))
    if dtype == np.bool_:
        return "1" if value else "0"
    return c_int(value, dtype)


def c_array_lines(data: np.ndarray, per_line: int = 8) -> list[str]:
    """Initializer lines for a C array of data's element type, `per_line` values a line, each followed by a
    comma: floats as exact C99 hex floats (`-0x1.8p+3f`), integers in decimal. NumPy spells all values at
    once (a matrix of characters, one row per character position, and a mask of those kept): a large model
    has millions of values."""
    flat = np.asarray(data).reshape(-1)
    flat = flat.view(f"uint{8 * flat.dtype.itemsize}") if flat.dtype in BITS else flat
    if not flat.size:
        return ["0,"]
    separator = np.full(flat.size, ord(" "), np.uint8)
    separator[per_line - 1::per_line] = ord("\n")
    not_last = np.ones(flat.size, bool)
    not_last[-1] = False
    if flat.dtype == np.float64:
        return _lines([_c_double(float(v)) + "," for v in flat], per_line)
    rows = _hex_floats(flat) if flat.dtype == np.float32 else _decimal_ints(flat)
    chars, keep = _matrix(rows + [(ord(","), True), (separator, not_last)], flat.size)
    return chars.T[keep.T].tobytes().decode("ascii").split("\n")


def _c_double(v: float) -> str:
    """An exact C99 hex double (`0x1.8p+1`), or (double)INFINITY, (double)NAN."""
    if v != v:
        return "((double)NAN)"
    if v in (float("inf"), float("-inf")):
        return "((double)INFINITY)" if v > 0 else "(-(double)INFINITY)"
    return f"({v.hex()})" if v < 0 or str(v).startswith("-") else v.hex()


def _lines(values: list[str], per_line: int) -> list[str]:
    return [" ".join(values[i:i + per_line]) for i in range(0, len(values), per_line)]


def _matrix(rows: list[tuple], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Character positions (a character and whether it is kept, each one value or one per column) as a
    character matrix and its mask, n columns."""
    chars, keep = np.empty((len(rows), n), np.uint8), np.empty((len(rows), n), bool)
    for i, (char, kept) in enumerate(rows):
        chars[i], keep[i] = char, kept
    return chars, keep


HEX_DIGITS = np.frombuffer(b"0123456789abcdef", np.uint8)


def _hex_floats(flat: np.ndarray) -> list[tuple]:
    """The character positions of every float32 as its exact C99 hex float, sign included (`-0x1.8p+3f`,
    `0x0p+0f`, denormals as `0x0.8p-126f`), or as INFINITY, -INFINITY or NAN."""
    bits = np.ascontiguousarray(flat, np.float32).view(np.uint32)
    exponent = (bits >> 23) & 0xFF
    fraction = (bits & 0x7FFFFF) << 1  # 24 bits: six hex digits after the point
    nibbles = [(fraction >> shift) & 0xF for shift in range(20, -1, -4)]
    significant = _running_or(nibble != 0 for nibble in reversed(nibbles))[::-1]  # up to the last nonzero
    power = np.where((bits & 0x7FFFFFFF) == 0, 0, np.maximum(exponent, 1).astype(np.int16) - 127)
    rows = [(ord("-"), (bits >> 31) != 0), (ord("0"), True), (ord("x"), True),
            (np.where(exponent != 0, ord("1"), ord("0")), True), (ord("."), fraction != 0)]
    rows += [(HEX_DIGITS[nibble], kept) for nibble, kept in zip(nibbles, significant)]
    rows += [(ord("p"), True), (np.where(power < 0, ord("-"), ord("+")), True)]
    rows += _digits(np.abs(power).astype(np.uint8), 3) + [(ord("f"), True)]
    for selected, text in ((flat == np.inf, "INFINITY"), (flat == -np.inf, "-INFINITY"), (np.isnan(flat), "NAN")):
        _spell(rows, selected, text)
    return rows


def _decimal_ints(flat: np.ndarray) -> list[tuple]:
    """The character positions of every integer (or bool, as 0 and 1) as its C literal: decimal, `u` after
    unsigned values, INT32_MIN or INT64_MIN for the minimum of those types."""
    dtype = flat.dtype
    negative = flat < 0 if dtype.kind == "i" else False
    magnitude = np.where(negative, (~flat).astype(np.uint64) + np.uint64(1), flat.astype(np.uint64))
    rows = [(ord("-"), negative)] + _digits(magnitude, 1 if dtype == np.bool_ else len(str(np.iinfo(dtype).max)))
    rows.append((ord("u"), dtype.kind == "u"))
    if dtype.kind == "i" and dtype.itemsize >= 4:  # the minimum's magnitude is not a valid literal of the type
        _spell(rows, flat == np.iinfo(dtype).min, f"INT{8 * dtype.itemsize}_MIN")
    return rows


def _digits(values: np.ndarray, width: int) -> list[tuple]:
    """The character positions of unsigned integers below 10**width in decimal, without leading zeros."""
    digits, rest = [], values
    for _ in range(width):
        digits.insert(0, (rest % 10).astype(np.uint8))
        rest = rest // 10
    significant = _running_or(digit != 0 for digit in digits[:-1]) + [True]
    return [(digit + ord("0"), kept) for digit, kept in zip(digits, significant)]


def _running_or(masks) -> list[np.ndarray]:
    """Each mask or-ed with all masks before it."""
    out = []
    for mask in masks:
        out.append(mask | out[-1] if out else mask)
    return out


def _spell(rows: list[tuple], selected: np.ndarray, text: str) -> None:
    """Replace the characters of the selected values with `text` (no longer than the positions)."""
    if not selected.any():
        return
    for i, (char, kept) in enumerate(rows):
        spelled = i < len(text)
        rows[i] = (np.where(selected, ord(text[i]) if spelled else 0, char), np.where(selected, spelled, kept))


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
