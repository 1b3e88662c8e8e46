"""TfIdfVectorizer built of other ops (a decomposition, graph/decompose.py): for each gram length and skip, the
sequence's items at each start and at every (skip + 1) after it (Gathers of constant positions) compared with
every gram of that length of the pool (Equal, And), the matches counted over the starts (ReduceSum) and over the
skips (Add); the counts spread to their output columns by a constant 0/1 matrix (MatMul), which also sums grams
that share a column, then weighted per column as the mode says. Integer items only: string pools are out of reach."""
from __future__ import annotations

import numpy as np
from onnx import helper

from ..errors import CglowError

MODES = ("TF", "IDF", "TFIDF")


def _axes_op(b, op: str, x: str, axes: list[int], **attrs) -> str:
    """Unsqueeze or ReduceSum over `axes`, as an input from opset 13 on, as an attribute before."""
    if b.opset >= 13:
        return b.add(op, [x, b.const(np.array(axes, np.int64))], **attrs)
    return b.add(op, [x], axes=axes, **attrs)


def _levels(node, attrs: dict) -> list[tuple[int, int, np.ndarray]]:
    """(gram length, number of the level's first gram in the pool, its grams [count, length]) per level of the pool
    that has grams."""
    if "pool_int64s" not in attrs:
        raise CglowError(f"TfIdfVectorizer node '{node.name}': a pool of strings is not supported (integer items "
                         f"only)")
    pool, starts = np.array(attrs["pool_int64s"], np.int64), list(attrs["ngram_counts"]) + [len(attrs["pool_int64s"])]
    levels, first = [], 0
    for n, (lo, hi) in enumerate(zip(starts, starts[1:]), start=1):
        if (hi - lo) % n:
            raise CglowError(f"TfIdfVectorizer node '{node.name}': {hi - lo} pool items do not make grams of {n}")
        if hi > lo:
            levels.append((n, first, pool[lo:hi].reshape(-1, n)))
        first += (hi - lo) // n
    return levels


def tfidf_vectorizer(b, shapes: dict, consts: dict) -> None:
    node = b.node
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    mode = attrs.get("mode", b"TF").decode()
    shape = shapes.get(node.input[0])
    if mode not in MODES or shape is None or len(shape) not in (1, 2):
        raise CglowError(f"TfIdfVectorizer node '{node.name}': needs mode TF, IDF or TFIDF and an input of rank 1 or "
                         f"2 with a known shape")
    indexes = np.array(attrs["ngram_indexes"], np.int64)
    weights = np.array(attrs.get("weights", []), np.float32)  # one per output column
    length, low, high, skips = shape[-1], attrs["min_gram_length"], attrs["max_gram_length"], attrs["max_skip_count"]
    counts, used = [], []
    sequence = b.add("Cast", [node.input[0]], to=7)  # int64, as the pool
    for n, first, grams in _levels(node, attrs):
        if not low <= n <= high:
            continue
        total = None
        for step in range(1, skips + 2) if n > 1 else [1]:
            starts = length - (n - 1) * step
            if starts <= 0:
                break
            match = None
            for k in range(n):
                items = b.add("Gather", [sequence, b.const(np.arange(starts, dtype=np.int64) + k * step)], axis=-1)
                same = b.add("Equal", [_axes_op(b, "Unsqueeze", items, [-1]), b.const(grams[:, k].copy())])
                match = same if match is None else b.add("And", [match, same])
            found = _axes_op(b, "ReduceSum", b.add("Cast", [match], to=1), [-2], keepdims=0)
            total = found if total is None else b.add("Add", [total, found])
        counts.append(total or b.const(np.zeros(tuple(shape[:-1]) + (len(grams),), np.float32)))
        used += range(first, first + len(grams))
    columns = int(indexes.max()) + 1 if len(indexes) else 0
    spread = np.zeros((len(used), columns), np.float32)
    spread[np.arange(len(used)), indexes[used]] = 1
    if not used:  # no gram of the lengths counted
        b.add("Identity", [b.const(np.zeros(tuple(shape[:-1]) + (columns,), np.float32))], node.output[0])
        return
    total = counts[0] if len(counts) == 1 else b.add("Concat", counts, axis=-1)
    if mode == "TF":
        b.add("MatMul", [total, b.const(spread)], node.output[0])
        return
    frequency = b.add("MatMul", [total, b.const(spread)])
    if mode == "IDF":
        frequency = b.add("Cast", [b.add("Greater", [frequency, b.const(np.array(0, np.float32))])], to=1)
    b.add("Mul", [frequency, b.const(weights[:columns] if len(weights) else np.ones(columns, np.float32))],
          node.output[0])
