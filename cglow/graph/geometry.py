"""Shape arithmetic shared by shape inference and lowering: broadcasting, axes, windows."""
from __future__ import annotations

from dataclasses import dataclass
import math

from ..errors import CglowError
from .ir import Node


def broadcast(node: Node, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    rank = max(len(s) for s in shapes)
    out = []
    for d in range(rank):
        dims = {s[d - rank + len(s)] for s in shapes if d - rank + len(s) >= 0} - {1}
        if len(dims) > 1:
            raise CglowError(f"{node.describe()}: shapes {' and '.join(map(str, shapes))} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def axis(node: Node, value: int, rank: int) -> int:
    if not -rank <= value < rank:
        raise CglowError(f"{node.describe()}: axis {value} is out of range for rank {rank}")
    return value % rank


@dataclass(frozen=True)
class Window:
    """A sliding window over the spatial dims (conv and pooling): everything in elements."""
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    out: tuple[int, ...]

    @property
    def pointwise(self) -> bool:
        """A 1x1..., stride-1, unpadded window: each output element reads its own input element only."""
        return all(k == 1 for k in self.kernel + self.strides) and not any(self.pads_begin + self.pads_end)


def reduced_as_window(shape: tuple[int, ...], axes: list[int]) -> tuple[tuple[int, ...] | None, tuple[int, ...]]:
    """A reduction over `axes` (sorted) as a pooling window: the permutation that puts the kept axes first (None
    where they are), and the shape [1, the kept axes' elements, the reduced dims...] that the pool takes."""
    kept = [a for a in range(len(shape)) if a not in axes]
    perm = tuple(kept + axes) if kept + axes != list(range(len(shape))) else None
    return perm, (1, math.prod(shape[a] for a in kept)) + tuple(shape[a] for a in axes)


def window(node: Node, spatial: tuple[int, ...], kernel: tuple[int, ...], ceil_mode: bool = False) -> Window:
    n = len(spatial)
    strides = tuple(node.attr("strides", (1,) * n))
    dilations = tuple(node.attr("dilations", (1,) * n))
    pads = tuple(node.attr("pads", (0,) * 2 * n))
    auto_pad = node.attr("auto_pad", "NOTSET")
    if len(strides) != n or len(dilations) != n or len(pads) != 2 * n or len(kernel) != n:
        raise CglowError(f"{node.describe()}: kernel, strides, dilations and pads do not match {n} spatial dims")
    if min(strides + dilations + kernel) < 1 or min(pads) < 0:
        raise CglowError(f"{node.describe()}: kernel, strides and dilations must be positive, pads non-negative")
    span = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilations))
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = tuple(-(-i // s) for i, s in zip(spatial, strides))
        total = tuple(max(0, (o - 1) * s + k - i) for o, s, k, i in zip(out, strides, span, spatial))
        small = tuple(t // 2 for t in total)
        big = tuple(t - t // 2 for t in total)
        begin, end = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    elif auto_pad == "VALID":
        begin = end = (0,) * n
    elif auto_pad == "NOTSET":
        begin, end = pads[:n], pads[n:]
    else:
        raise CglowError(f"{node.describe()}: unknown auto_pad '{auto_pad}'")
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        rounding = math.ceil if ceil_mode else math.floor
        out = []
        for i, b, e, k, s in zip(spatial, begin, end, span, strides):
            o = rounding((i + b + e - k) / s) + 1
            if ceil_mode and (o - 1) * s >= i + b:  # the last window must start inside the input or left pad
                o -= 1
            out.append(o)
        out = tuple(out)
    if min(out) < 1:
        raise CglowError(f"{node.describe()}: the window {kernel} does not fit the input {spatial}")
    return Window(kernel, strides, dilations, tuple(begin), tuple(end), out)
