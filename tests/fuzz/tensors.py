"""Random data-movement nodes: transpose, the reshape family, concat and split, slice, pad, tile, expand,
gathers (from constant indices or an index input), scatters, what the importer folds, the tensors made from others
(OneHot, EyeLike, CastLike, Size), depth/space rearrangements, resize, trilu and einsum."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T, numpy_helper

from .builder import Builder, Rejected


def ints(values) -> np.ndarray:
    return np.array(values, np.int64)


def transpose(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 2, empty=True)
    attrs = {} if b.chance(0.2) else dict(perm=[int(p) for p in b.rng.permutation(x.rank)])
    b.node("Transpose", [x.name], exact=x.exact, **attrs)


def factors(b: Builder, n: int, parts: int) -> list[int]:
    """n as a product of `parts` random factors."""
    out = []
    for _ in range(parts - 1):
        f = b.choice([d for d in range(1, n + 1) if n % d == 0])
        out.append(f)
        n //= f
    return out + [n]


def reshape(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 1)
    op = b.choice(["Reshape", "Reshape", "Flatten", "Squeeze", "Unsqueeze"])
    if op == "Reshape":
        shape = factors(b, int(np.prod(x.shape)), b.int(1, 4))
        if b.chance(0.3):
            shape[b.int(0, len(shape) - 1)] = -1
        b.node(op, [x.name, b.const(ints(shape))], exact=x.exact)
    elif op == "Flatten":
        b.node(op, [x.name], axis=b.int(-x.rank, x.rank), exact=x.exact)
    elif op == "Squeeze":
        ones = [i for i, d in enumerate(x.shape) if d == 1]
        axes = [i - x.rank if b.chance(0.3) else i for i in ones if b.chance(0.7)] or ones[:1]
        b.node(op, [x.name] + ([b.const(ints(axes))] if axes and b.chance(0.8) else []), exact=x.exact)
    else:
        rank = x.rank + b.int(1, 2)
        axes = sorted(b.rng.choice(rank, rank - x.rank, replace=False))
        b.node(op, [x.name, b.const(ints(axes))], exact=x.exact)


def concat(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 1, empty=True)
    axis = b.int(0, x.rank - 1)
    fits = [v for v in b.values if v.elem == x.elem and v.rank == x.rank and
            all(d == e for i, (d, e) in enumerate(zip(v.shape, x.shape)) if i != axis)]
    parts = [b.choice(fits).name for _ in range(b.int(1, 2))]
    if b.chance(0.3):
        parts.append(b.weights(*x.shape[:axis], b.int(1, 3), *x.shape[axis + 1:]))
    b.node("Concat", [x.name] + parts, axis=axis - x.rank if b.chance(0.3) else axis,
           exact=all(v.exact for v in b.values if v.name in parts) and x.exact)


def split(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 1 and max(v.shape) >= 2)
    axis = b.choice([i for i, d in enumerate(x.shape) if d >= 2])
    n = b.int(2, min(3, x.shape[axis]))
    if b.chance(0.5) and x.shape[axis] % n == 0:
        b.node("Split", [x.name], outputs=n, axis=axis, num_outputs=n, exact=x.exact)
    else:
        cuts = sorted(b.rng.choice(np.arange(1, x.shape[axis]), n - 1, replace=False))
        sizes = np.diff([0, *cuts, x.shape[axis]])
        b.node("Split", [x.name, b.const(ints(sizes))], outputs=n, axis=axis, exact=x.exact)


def slice_(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 1)
    axes = sorted({b.int(0, x.rank - 1) for _ in range(b.int(1, x.rank))})
    starts, ends, steps = [], [], []
    for a in axes:
        d, step = x.shape[a], b.choice([1, 1, 2, -1, -2])
        first, last = sorted(b.rng.choice(np.arange(d + 1), 2, replace=False)) if d > 1 else (0, 1)
        if b.chance(0.1):  # an empty slice
            last = first
        start, end = (first, last) if step > 0 else (last - 1, first - 1)
        starts.append(start - d if b.chance(0.3) else start)
        ends.append(end + (100 if b.chance(0.2) else 0) if step > 0 else (-d - 5 if end < 0 else end))
        steps.append(step)
    inputs = [x.name, b.const(ints(starts)), b.const(ints(ends)), b.const(ints(axes)), b.const(ints(steps))]
    b.node("Slice", inputs, exact=x.exact)


def pad(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 1)
    mode = b.choice(["constant", "constant", "reflect", "edge"])
    most = [d - 1 if mode == "reflect" else 2 for d in x.shape] * 2
    pads = [b.int(-1 if mode == "constant" and d > 1 else 0, min(m, 2)) for m, d in zip(most, x.shape * 2)]
    inputs = [x.name, b.const(ints(pads))] + ([b.const(np.float32(b.uniform(-1, 1)))] if mode == "constant" else [])
    b.node("Pad", inputs, mode=mode, exact=x.exact)


def tile_expand(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 1)
    if b.chance(0.5):
        b.node("Tile", [x.name, b.const(ints([b.int(1, 2) for _ in x.shape]))], exact=x.exact)
    else:
        target = [b.int(2, 3) if d == 1 and b.chance(0.5) else d for d in x.shape]
        b.node("Expand", [x.name, b.const(ints(([b.int(1, 3)] if b.chance(0.3) else []) + target))], exact=x.exact)


def gather(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 1)
    axis = b.int(0, x.rank - 1)
    d = x.shape[axis]
    op = b.choice(["Gather", "Gather", "GatherElements", "GatherND"])
    if op == "Gather":
        indices = b.rng.integers(-d, d, b.choice([(), (b.int(1, 4),), (2, b.int(1, 3))]))
        b.node(op, [x.name, b.const(ints(indices))], axis=axis, exact=x.exact)
    elif op == "GatherElements":
        shape = [b.int(1, s) if i != axis else b.int(1, 4) for i, s in enumerate(x.shape)]
        b.node(op, [x.name, b.const(ints(b.rng.integers(-d, d, shape)))], axis=axis, exact=x.exact)
    else:
        k, count = b.int(1, x.rank), b.int(1, 3)
        indices = np.stack([b.rng.integers(-s, s, count) for s in x.shape[:k]], axis=-1)
        b.node(op, [x.name, b.const(ints(indices))], exact=x.exact)


def gather_indices_input(b: Builder) -> None:
    """Gather with indices from a graph input, as an embedding lookup (in range: out of range, the C reads
    element 0 and onnxruntime fails)."""
    x = b.pick(lambda v: v.rank >= 1)
    axis = b.int(0, x.rank - 1)
    indices = b.input(b.choice([(), (b.int(1, 4),), (2, b.int(1, 3))]), bound=x.shape[axis])
    b.node("Gather", [x.name, indices.name], axis=axis, exact=x.exact)


def scatter(b: Builder) -> None:
    """ScatterElements or ScatterND of constant updates into a value, at constant indices (distinct places where
    the updates are stored, so that no order decides; repeated ones where they are added, multiplied, or the most or
    least is kept)."""
    x = b.pick(lambda v: v.rank >= 1)
    reduction = b.choice(["none", "add", "mul", "max", "min"])
    if b.chance(0.5):
        axis = b.int(0, x.rank - 1)
        d = x.shape[axis]
        most = d if reduction == "none" else 4
        shape = [b.int(1, s) if i != axis else b.int(1, most) for i, s in enumerate(x.shape)]
        if reduction == "none":  # a prefix of a permutation of the axis along each line
            order = np.argsort(b.rng.random(shape[:axis] + [d] + shape[axis + 1:]), axis=axis)
            indices = np.take(order, range(shape[axis]), axis=axis) - b.int(0, 1) * d
        else:
            indices = b.rng.integers(-d, d, shape)
        b.node("ScatterElements", [x.name, b.const(ints(indices)), b.weights(*shape)], axis=axis, reduction=reduction)
        return
    k = b.int(1, x.rank)
    count = b.int(1, min(3, int(np.prod(x.shape[:k]))))
    flat = b.rng.permutation(int(np.prod(x.shape[:k])))[:count] if reduction == "none" else \
        b.rng.integers(0, int(np.prod(x.shape[:k])), count)
    indices = np.stack(np.unravel_index(flat, x.shape[:k]), axis=-1)
    b.node("ScatterND", [x.name, b.const(ints(indices)), b.weights(count, *x.shape[k:])], reduction=reduction)


def selection(b: Builder) -> None:
    """An output of a length known at run time only (the Compact kernel): NonZero of a comparison, Compress by a
    run-time condition along an axis or flattened, or Unique of values rounded so that some repeat."""
    x = b.pick(lambda v: v.rank >= 1, exact=True)
    op = b.choice(["NonZero", "Compress", "Unique"])
    (positive,) = b.node("Greater", [x.name, b.const(np.float32(b.uniform(-0.5, 0.5)))])
    if op == "NonZero":
        b.node("NonZero", [positive.name], exact=True, final=True)
    elif op == "Compress":
        axis = b.int(0, x.rank - 1) if b.chance(0.7) else None
        length = x.shape[axis] if axis is not None else int(np.prod(x.shape))
        (flat,) = b.node("Reshape", [positive.name, b.const(ints([-1]))])
        (cond,) = b.node("Slice", [flat.name, b.const(ints([0])), b.const(ints([min(length, flat.shape[0])]))])
        b.node("Compress", [x.name, cond.name], exact=True, final=True, **({} if axis is None else {"axis": axis}))
    else:
        (rounded,) = b.node("Floor", [x.name], exact=True)
        b.node("Unique", [rounded.name], outputs=4, exact=True, final=True, sorted=b.int(0, 1))


def folded_at_import(b: Builder) -> None:
    """The exporters' patterns that the importer folds: Shape, Slice and Concat making a Reshape's target
    shape; a Range or a ConstantOfShape added to a value."""
    x = b.pick(lambda v: v.rank >= 2)
    if b.chance(0.5):
        (shape,) = b.node("Shape", [x.name])
        (head,) = b.node("Slice", [shape.name, b.const(ints([0])), b.const(ints([b.int(1, x.rank - 1)]))])
        (target,) = b.node("Concat", [head.name, b.const(ints([-1]))], axis=0)
        b.node("Reshape", [x.name, target.name], exact=x.exact)
        return
    if b.chance(0.5):
        start, delta = b.int(-3, 3), b.choice([1, 2, -1])
        (r,) = b.node("Range", [b.const(ints(start)), b.const(ints(start + delta * x.shape[-1])), b.const(ints(delta))])
        (made,) = b.node("Cast", [r.name], to=T.FLOAT)
    else:
        fill = numpy_helper.from_array(np.array([b.uniform(-2, 2)], np.float32))
        (made,) = b.node("ConstantOfShape", [b.const(ints(b.broadcast_shape(x.shape)))], value=fill)
    b.node("Add", [x.name, made.name])


def made(b: Builder) -> None:
    """A tensor made from another: OneHot of indices cast from an exact value (in [-depth, depth): the others
    make no one, which onnxruntime refuses), EyeLike of a matrix (any diagonal, float or integer), a CastLike
    to an integer value and back, or a value divided by its Size."""
    x = b.pick(exact=True)
    op = b.choice(["OneHot", "EyeLike", "CastLike", "Size"])
    if op == "OneHot":
        depth = b.int(1, 5)
        (clipped,) = b.node("Clip", [x.name, b.const(np.float32(-depth)), b.const(np.float32(depth - 0.5))],
                            exact=True)
        (floor,) = b.node("Floor", [clipped.name], exact=True)
        (indices,) = b.node("Cast", [floor.name], to=b.choice([T.INT64, T.INT32]), exact=True)
        values = np.array([b.uniform(-1, 1), b.uniform(-2, 2)], np.float32)
        depth_of = b.choice([np.int64, np.int32, np.float32])
        b.node("OneHot", [indices.name, b.const(np.array(depth, depth_of)), b.const(values)],
               axis=b.int(-indices.rank - 1, indices.rank), exact=True)
    elif op == "EyeLike":
        x = b.pick(lambda v: v.rank == 2)
        elem = b.choice([T.FLOAT, T.INT32, T.INT64, T.UINT8, T.BOOL, None])
        (eye,) = b.node(op, [x.name], k=b.int(-3, 3), exact=True, **({} if elem is None else {"dtype": elem}))
        if eye.elem != T.FLOAT:
            b.node("Cast", [eye.name], to=T.FLOAT, exact=True)
    elif op == "CastLike":
        (clipped,) = b.node("Clip", [x.name, b.const(np.float32(-100)), b.const(np.float32(100))], exact=True)
        like = b.choice([np.int32, np.int64, np.int8, np.int16])
        (i,) = b.node(op, [clipped.name, b.const(np.zeros(b.int(1, 3), like))], exact=True)
        b.node(op, [i.name, x.name], exact=True)
    else:
        (size,) = b.node(op, [x.name], exact=True)
        (n,) = b.node("Cast", [size.name], to=T.FLOAT, exact=True)
        b.node("Div", [x.name, n.name])


def depth_space(b: Builder) -> None:
    x = b.pick(lambda v: v.rank == 4)
    n, c, h, w = x.shape
    if c % 4 == 0 and b.chance(0.5):
        b.node("DepthToSpace", [x.name], blocksize=2, mode=b.choice(["DCR", "CRD"]), exact=x.exact)
    elif h % 2 == 0 and w % 2 == 0:
        b.node("SpaceToDepth", [x.name], blocksize=2, exact=x.exact)
    else:
        raise Rejected("no blocks fit")


def resize(b: Builder) -> None:
    x = b.pick(lambda v: v.rank == 4)
    mode = b.choice(["nearest", "linear", "cubic"])
    attrs = dict(mode=mode, coordinate_transformation_mode=b.choice(
        ["half_pixel", "asymmetric", "pytorch_half_pixel", "align_corners"]))
    if mode == "nearest":
        attrs["nearest_mode"] = b.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
    if mode == "cubic":
        attrs.update(cubic_coeff_a=b.choice([-0.75, -0.5]), exclude_outside=b.int(0, 1))
    # align_corners divides by scale x length, which onnxruntime rounds down to the output's and ONNX does not:
    # the fuzz keeps to the scales where they agree
    whole = attrs["coordinate_transformation_mode"] == "align_corners"
    scales = [1.0, 1.0] + [b.choice([s for s in (0.5, 1.0, 1.5, 2.0, 3.0) if not whole or (s * d).is_integer()])
                           for d in x.shape[2:]]
    b.node("Resize", [x.name, "", b.const(np.array(scales, np.float32))], exact=x.exact and mode == "nearest",
           **attrs)


def grid_sample(b: Builder) -> None:
    """GridSample at a constant grid (points a little beyond the input too), every mode and padding."""
    x = b.pick(lambda v: v.rank == 4)
    grid = b.rng.uniform(-1.2, 1.2, (x.shape[0], b.int(1, 4), b.int(1, 4), 2)).astype(np.float32)
    b.node("GridSample", [x.name, b.const(grid)], mode=b.choice(["linear", "nearest", "cubic"]),
           padding_mode=b.choice(["zeros", "border", "reflection"]), align_corners=b.int(0, 1))


def trilu(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 2)
    b.node("Trilu", [x.name, b.const(np.array(b.int(-2, 2), np.int64))], upper=b.int(0, 1), exact=x.exact)


def einsum(b: Builder) -> None:
    x = b.pick(lambda v: v.rank in (2, 3))
    if x.rank == 2:
        equation, other = b.choice([("ij,jk->ik", (x.shape[1], 3)), ("ij,kj->ik", (2, x.shape[1])),
                                    ("ij,ij->i", x.shape), ("ij->ji", None), ("ij,i->j", x.shape[:1])])
    else:
        equation, other = b.choice([("bij,bjk->bik", (x.shape[0], x.shape[2], 2)), ("bij->bji", None),
                                    ("bij->b", None)])
    b.node("Einsum", [x.name] + ([b.weights(*other)] if other else []), equation=equation)


GENERATORS = [(transpose, 3), (reshape, 4), (concat, 3), (split, 2), (slice_, 3), (pad, 2), (tile_expand, 2),
              (gather, 2), (gather_indices_input, 1), (scatter, 1), (selection, 1), (folded_at_import, 1), (made, 1),
              (depth_space, 1), (resize, 2), (grid_sample, 1), (trilu, 1), (einsum, 1)]
