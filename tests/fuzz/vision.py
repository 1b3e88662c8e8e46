"""Random vision and detection nodes: NonMaxSuppression (its selection of a length known at run time only),
MaxUnpool of MaxPool's indices, LpPool, Col2Im, DeformConv, AffineGrid (sampled by GridSample) and CenterCropPad.
RoiAlign apart (OLDER_GENERATORS): onnxruntime 1.32 has no kernel for it from opset 22 on, the fuzz's opset is 23
(test_fuzz_older_opsets.py fuzzes it at opset 21)."""
from __future__ import annotations

import numpy as np

from .builder import Builder, Rejected
from .layers import last_window_in_padding, window_attrs
from .tensors import factors, ints


def roi_align(b: Builder) -> None:
    """RoiAlign of constant boxes (some reaching a little outside the image) over a value [N, C, H, W], both
    modes and coordinate transformations, a positive sampling_ratio (0, a count per box known at run time only,
    cglow refuses)."""
    x = b.pick(lambda v: v.rank == 4)
    n, _, h, w = x.shape
    boxes = b.int(1, 4)
    scale = b.choice([1.0, 0.5, 2.0])
    corners = np.stack([b.rng.uniform(-1, w + 1, boxes), b.rng.uniform(-1, h + 1, boxes),
                        b.rng.uniform(-1, w + 1, boxes), b.rng.uniform(-1, h + 1, boxes)], axis=1) / scale
    b.node("RoiAlign", [x.name, b.const(corners.astype(np.float32)), b.const(ints(b.rng.integers(0, n, boxes)))],
           mode=b.choice(["avg", "max"]), coordinate_transformation_mode=b.choice(["half_pixel", "output_half_pixel"]),
           output_height=b.int(1, 3), output_width=b.int(1, 3), sampling_ratio=b.int(1, 3), spatial_scale=scale)


def non_max_suppression(b: Builder) -> None:
    """NonMaxSuppression of boxes (a constant, or a graph input: corners in any order, the center form too) by
    scores from a graph input (distinct: the order of equal scores is the implementation's), with or without an
    IoU and a score threshold: a selection of a length known at run time only."""
    batch, classes, count = b.int(1, 2), b.int(1, 3), b.int(1, 8)
    boxes = b.input((batch, count, 4)).name if b.chance(0.5) else b.weights(batch, count, 4)
    scores = b.input((batch, classes, count)).name
    inputs = [boxes, scores, b.const(ints([b.int(0, count + 1)]))]
    if b.chance(0.8):
        inputs.append(b.const(np.array([b.uniform(0, 0.9)], np.float32)))
        if b.chance(0.5):
            inputs.append(b.const(np.array([b.uniform(-1, 1)], np.float32)))
    b.node("NonMaxSuppression", inputs, exact=True, final=True, center_point_box=b.int(0, 1))


def max_unpool(b: Builder) -> None:
    """MaxUnpool of a MaxPool's values and indices (of an exact input: its maxima are the same ones in both), to
    the natural size, windows that tile the input so that it holds every index (ONNX shape inference infers no
    shape from an output_shape input, so the generator gives none)."""
    x = b.pick(lambda v: v.rank in (3, 4, 5), exact=True)
    strides = [b.int(1, 2) for _ in x.shape[2:]]
    kernel = [b.choice([k for k in range(1, min(3, d) + 1) if (d - k) % s == 0] or [d])
              for d, s in zip(x.shape[2:], strides)]
    attrs = dict(kernel_shape=kernel, strides=strides)
    pooled, indices = b.node("MaxPool", [x.name], outputs=2, exact=True, **attrs)
    b.node("MaxUnpool", [pooled.name, indices.name], exact=True, **attrs)


def lp_pool(b: Builder) -> None:
    x = b.pick(lambda v: v.rank in (3, 4))
    kernel = [b.int(1, min(3, d)) for d in x.shape[2:]]
    attrs = window_attrs(b, kernel, x.shape[2:])
    if b.chance(0.3) and "auto_pad" not in attrs and not last_window_in_padding(x.shape[2:], kernel, attrs) and \
            max(attrs.get("dilations", [1])) == 1:
        attrs["ceil_mode"] = 1  # not dilated: onnxruntime's last window of ceil_mode then reads the wrong taps
    b.node("LpPool", [x.name], kernel_shape=kernel, p=b.int(1, 3), **attrs)


def col2im(b: Builder) -> None:
    """Col2Im of a value [N, C kh kw, L]: the image's size chosen for L blocks (L split into blocks along height
    and width), with strides, dilations and pads."""
    x = b.pick(lambda v: v.rank == 3)
    n, ck, blocks = x.shape
    kh = b.choice([k for k in range(1, 4) if ck % k == 0])
    kw = b.choice([k for k in range(1, 4) if (ck // kh) % k == 0])
    along = factors(b, blocks, 2)
    strides, dilations = [b.int(1, 2) for _ in range(2)], [b.int(1, 2) for _ in range(2)]
    pads = [b.int(0, 1) for _ in range(4)]
    image = [(a - 1) * s + d * (k - 1) + 1 - p0 - p1
             for a, s, d, k, p0, p1 in zip(along, strides, dilations, (kh, kw), pads[:2], pads[2:])]
    if min(image) < 1:
        raise Rejected("the pads leave no image")
    b.node("Col2Im", [x.name, b.const(ints(image)), b.const(ints([kh, kw]))], strides=strides, dilations=dilations,
           pads=pads)


def deform_conv(b: Builder) -> None:
    """DeformConv of a value [N, C, H, W]: constant offsets (up to a pixel and a half, so that taps fall between
    pixels and outside), a mask now and then, groups and offset groups."""
    x = b.pick(lambda v: v.rank == 4)
    n, c, h, w = x.shape
    group = b.choice([g for g in range(1, c + 1) if c % g == 0])
    offset_group = b.choice([g for g in range(1, c + 1) if c % g == 0])
    out = group * b.int(1, 2)
    kernel = [b.int(1, min(3, d)) for d in (h, w)]
    strides, pads = [b.int(1, 2) for _ in range(2)], [b.int(0, 1) for _ in range(4)]
    rows, cols = ((d + p0 + p1 - k) // s + 1 for d, p0, p1, k, s in zip((h, w), pads[:2], pads[2:], kernel, strides))
    taps = kernel[0] * kernel[1]
    offsets = b.rng.uniform(-1.5, 1.5, (n, 2 * offset_group * taps, rows, cols)).astype(np.float32)
    inputs = [x.name, b.weights(out, c // group, *kernel, scale=0.5), b.const(offsets)]
    if b.chance(0.5):
        inputs.append(b.weights(out) if b.chance(0.7) else "")
        if b.chance(0.5):
            inputs.append(b.const(b.rng.uniform(0, 1, (n, offset_group * taps, rows, cols)).astype(np.float32)))
    b.node("DeformConv", inputs, group=group, offset_group=offset_group, kernel_shape=kernel, strides=strides,
           pads=pads)


def affine_grid(b: Builder) -> None:
    """AffineGrid of constant 2-D transforms (near the identity), the grid then sampled from a value [N, C, H, W]
    by GridSample. With align_corners, a side of one pixel has no defined coordinate (ONNX's body divides by 0,
    onnxruntime takes 0): not generated."""
    x = b.pick(lambda v: v.rank == 4)
    n, c = x.shape[:2]
    theta = (np.eye(2, 3) + b.rng.uniform(-0.3, 0.3, (n, 2, 3))).astype(np.float32)
    align = b.int(0, 1)
    size = [n, c, b.int(1 + align, 5), b.int(1 + align, 5)]
    (grid,) = b.node("AffineGrid", [b.const(theta), b.const(ints(size))], align_corners=align)
    b.node("GridSample", [x.name, grid.name], mode=b.choice(["linear", "nearest"]),
           padding_mode=b.choice(["zeros", "border"]), align_corners=b.int(0, 1))


def center_crop_pad(b: Builder) -> None:
    """CenterCropPad of a value to a shape that crops some dims and pads others, along all its axes or some."""
    x = b.pick(lambda v: v.rank >= 1)
    axes = sorted({b.int(0, x.rank - 1) for _ in range(b.int(1, x.rank))})
    shape = [max(1, x.shape[a] + b.int(-2, 2)) for a in axes]
    if len(axes) == x.rank and b.chance(0.5):
        b.node("CenterCropPad", [x.name, b.const(ints(shape))], exact=x.exact)
    else:
        b.node("CenterCropPad", [x.name, b.const(ints(shape))], exact=x.exact,
               axes=[a - x.rank if b.chance(0.3) else a for a in axes])


GENERATORS = [(non_max_suppression, 1), (max_unpool, 1), (lp_pool, 1), (col2im, 1),
              (deform_conv, 1), (affine_grid, 1), (center_crop_pad, 1)]
OLDER_GENERATORS = [(roi_align, 1)]
