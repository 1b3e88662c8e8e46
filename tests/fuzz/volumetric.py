"""Random 3-D layers: a value made rank 5 (N, C, D, H, W: its spatial dims split in three, or a depth of 1
unsqueezed), then Conv and ConvTranspose with 3-D kernels, and MaxPool, AveragePool and LpPool over three
spatial dims. The other generators then read the rank-5 values too."""
from __future__ import annotations

from .builder import Builder
from .layers import last_window_in_padding, transposed, window_attrs
from .tensors import factors, ints


def volume(b: Builder) -> None:
    x = b.pick(lambda v: v.rank in (3, 4))
    if b.chance(0.3):
        b.node("Unsqueeze", [x.name, b.const(ints([2]))], exact=x.exact)
        return
    spatial = 1
    for d in x.shape[2:]:
        spatial *= d
    b.node("Reshape", [x.name, b.const(ints([*x.shape[:2], *factors(b, spatial, 3)]))], exact=x.exact)


def conv_3d(b: Builder) -> None:
    x = b.pick(lambda v: v.rank == 5)
    c = x.shape[1]
    group = b.choice([g for g in range(1, c + 1) if c % g == 0])
    out = group * b.int(1, 2) if group > 1 else b.int(1, 4)
    kernel = [b.int(1, min(3, d)) for d in x.shape[2:]]
    inputs = [x.name, b.weights(out, c // group, *kernel, scale=0.5)] + ([b.weights(out)] if b.chance(0.7) else [])
    b.node("Conv", inputs, group=group, kernel_shape=kernel, **window_attrs(b, kernel, x.shape[2:]))


def conv_transpose_3d(b: Builder) -> None:
    transposed(b, 3, 2, dilate=True)


def pool_3d(b: Builder) -> None:
    x = b.pick(lambda v: v.rank == 5)
    op = b.choice(["MaxPool", "AveragePool", "LpPool"])
    kernel = [b.int(1, min(3, d)) for d in x.shape[2:]]
    attrs = window_attrs(b, kernel, x.shape[2:], dilate=op != "AveragePool")
    if b.chance(0.3) and "auto_pad" not in attrs and not last_window_in_padding(x.shape[2:], kernel, attrs) and \
            (op != "LpPool" or max(attrs.get("dilations", [1])) == 1):  # as vision.lp_pool
        attrs["ceil_mode"] = 1
    if op == "AveragePool":
        attrs["count_include_pad"] = b.int(0, 1)
    if op == "LpPool":
        attrs["p"] = b.int(1, 3)
    b.node(op, [x.name], kernel_shape=kernel, exact=x.exact and op == "MaxPool", **attrs)


GENERATORS = [(volume, 2), (conv_3d, 2), (conv_transpose_3d, 1), (pool_3d, 1)]
