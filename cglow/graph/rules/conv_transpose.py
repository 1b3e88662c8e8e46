"""Shape rule of ConvTranspose, and the padding arithmetic its lowering shares."""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import CglowError
from ..ir import Node, TensorType
from ..registry import F32, Args, require_float
from .nn import volumetric


@dataclass(frozen=True)
class Transposed:
    """A transposed convolution's geometry per spatial dim; pads may be negative (an output_shape
    larger than the natural one)."""
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    output_padding: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    out: tuple[int, ...]


def transposed(node: Node, spatial: tuple[int, ...], kernel: tuple[int, ...]) -> Transposed:
    n = len(spatial)
    strides = tuple(node.attr("strides", (1,) * n))
    dilations = tuple(node.attr("dilations", (1,) * n))
    extra = tuple(node.attr("output_padding", (0,) * n))
    pads = tuple(node.attr("pads", (0,) * 2 * n))
    output_shape = node.attr("output_shape")
    auto_pad = node.attr("auto_pad", "NOTSET")
    if len(strides) != n or len(dilations) != n or len(extra) != n or len(pads) != 2 * n:
        raise CglowError(f"{node.describe()}: strides, dilations, output_padding and pads do not match "
                         f"{n} spatial dims")
    if min(strides + dilations + kernel) < 1 or min(extra) < 0:
        raise CglowError(f"{node.describe()}: kernel, strides and dilations must be positive, output_padding "
                         f"non-negative")
    natural = tuple(s * (i - 1) + e + (k - 1) * d + 1
                    for i, s, e, k, d in zip(spatial, strides, extra, kernel, dilations))
    if auto_pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise CglowError(f"{node.describe()}: unknown auto_pad '{auto_pad}'")
    if output_shape is not None or auto_pad.startswith("SAME"):
        # the spec's equations: the total padding split, the odd element at the end for SAME_UPPER
        out = tuple(output_shape[-n:]) if output_shape is not None else \
            tuple(i * s for i, s in zip(spatial, strides))
        total = tuple(a - o for a, o in zip(natural, out))
        small = tuple(t // 2 for t in total)
        big = tuple(t - t // 2 for t in total)
        begin, end = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    else:
        if min(pads) < 0:
            raise CglowError(f"{node.describe()}: pads must be non-negative")
        begin, end = (pads[:n], pads[n:]) if auto_pad == "NOTSET" else ((0,) * n, (0,) * n)
        out = tuple(a - b - e for a, b, e in zip(natural, begin, end))
    if min(out) < 1:
        raise CglowError(f"{node.describe()}: the output would be empty ({out})")
    return Transposed(kernel, strides, dilations, extra, tuple(begin), tuple(end), out)


def conv_transpose(args: Args) -> list[TensorType]:
    require_float(args, 0, 1, 2)
    x, w = args.shape(0), args.shape(1)
    group = args.node.attr("group", 1)
    volumetric(args)
    if not 3 <= len(x) <= 5:  # 3-D: decomposed before import (graph/volumetric.py)
        raise CglowError(f"{args.node.describe()}: input rank {len(x)} is not supported (1-D to 3-D spatial: NCW, "
                         f"NCHW or NCDHW)")
    kernel = tuple(args.node.attr("kernel_shape", w[2:]))
    if len(w) != len(x) or tuple(w[2:]) != kernel or w[0] != x[1] or x[1] % group:
        raise CglowError(f"{args.node.describe()}: weight shape {w} does not match input {x} with group={group}")
    if args.has(2) and args.shape(2) != (w[1] * group,):
        raise CglowError(f"{args.node.describe()}: bias shape {args.shape(2)} is not ({w[1] * group},)")
    return [TensorType(F32, (x[0], w[1] * group) + transposed(args.node, x[2:], kernel).out)]
