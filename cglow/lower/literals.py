"""C spellings of float constants: exact float32 round trip, always with the f suffix."""
from __future__ import annotations

import numpy as np


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
