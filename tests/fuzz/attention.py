"""Attention blocks as exporters write them, one to three of one shape in a row: projections (MatMul), heads split
by Reshape and Transpose, the keys transposed by a copy before q @ k^T, a scale, Softmax, the context merged back,
an output projection and a residual Add. Blocks of one shape make identical kernels that net_run calls with the same
arena offsets, chains of small kernels at constant addresses: what gcc 12 specialized and then dropped
(runtime_c/kernel.c)."""
from __future__ import annotations

import numpy as np

from .builder import Builder, Value
from .tensors import ints


def _heads(b: Builder, x: Value, heads: int, keys: bool) -> str:
    """x [..., S, D] projected and split into heads: [..., H, S, D/H], or the keys [..., H, D/H, S]."""
    *lead, tokens, width = x.shape
    y = b.node("MatMul", [x.name, b.weights(width, width, scale=width ** -0.5)])[0]
    y = b.node("Reshape", [y.name, b.const(ints([*lead, tokens, heads, width // heads]))])[0]
    n = len(lead)
    perm = list(range(n)) + ([n + 1, n + 2, n] if keys else [n + 1, n, n + 2])
    return b.node("Transpose", [y.name], perm=perm)[0].name


def _block(b: Builder, x: Value, heads: int) -> Value:
    *lead, tokens, width = x.shape
    q, k, v = _heads(b, x, heads, False), _heads(b, x, heads, True), _heads(b, x, heads, False)
    scores = b.node("MatMul", [q, k])[0]
    scores = b.node("Mul", [scores.name, b.const(np.float32((width // heads) ** -0.5))])[0]
    context = b.node("MatMul", [b.node("Softmax", [scores.name], axis=-1)[0].name, v])[0]
    n = len(lead)
    context = b.node("Transpose", [context.name], perm=list(range(n)) + [n + 1, n, n + 2])[0]
    context = b.node("Reshape", [context.name, b.const(ints([*lead, tokens, width]))])[0]
    out = b.node("MatMul", [context.name, b.weights(width, width, scale=width ** -0.5)])[0]
    return b.node("Add", [x.name, out.name])[0]


def attention(b: Builder) -> None:
    x = b.pick(lambda v: v.rank in (2, 3) and v.shape[-1] % 2 == 0 and v.shape[-2] > 1)
    heads = b.choice([h for h in (1, 2, 4) if x.shape[-1] % h == 0])
    for _ in range(b.choice([1, 2, 3, 3])):
        x = _block(b, x, heads)


GENERATORS = [(attention, 12)]
