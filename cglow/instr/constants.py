"""Constant buffers laid out anew at compile time (weights packed for a kernel, biases with a correction folded in),
each stored once per layout and once per content, however many instructions read it."""
from __future__ import annotations

from typing import Callable

import numpy as np

from .ir import Buffer, View


def laid_out(buffers: list[Buffer], stored: dict, key: tuple, lay_out: Callable[[], tuple[np.ndarray, str]]) -> int:
    """The id of a constant buffer laid out anew from another's data (`lay_out`: the new data and label, run once
    per `key`), stored once per content, however many instructions read it: a 1x1 filter packed for Conv and for
    Gemm, the tiles of a patched span."""
    if key not in stored:
        data, label = lay_out()
        same = (data.dtype, data.tobytes())
        if same not in stored:
            stored[same] = len(buffers)
            buffers.append(Buffer(len(buffers), "const", data.size, label, data=data.reshape(-1), dtype=data.dtype))
        stored[key] = stored[same]
    return stored[key]


def values(buffer: Buffer, v: View) -> np.ndarray:
    """A constant view's values."""
    return np.lib.stride_tricks.as_strided(buffer.data[v.offset:], v.shape,
                                           [s * buffer.data.itemsize for s in v.strides])
