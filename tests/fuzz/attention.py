"""Attention blocks as exporters write them, one to three of one shape in a row: projections (MatMul: q, k and v
apart, or packed and taken apart with Gather), heads split by Reshape and Transpose, the keys transposed by a copy
before q @ k^T, a scale, Softmax, the context merged back, an output projection and a residual Add. Blocks of one
shape make identical kernels that net_run calls with the same arena offsets, chains of small kernels at constant
addresses: what gcc 12 specialized and then dropped (runtime_c/kernel.c). And the ONNX ops of opset 23 for them:
Attention (3-D or 4-D, grouped-query, causal, masked) and RotaryEmbedding."""
from __future__ import annotations

import numpy as np

from .builder import Builder, Value
from .tensors import ints


def _heads(b: Builder, x: Value, width: int, heads: int, keys: bool) -> str:
    """x [..., S, D] projected to `width` and split into heads: [..., H, S, W/H], or the keys [..., H, W/H, S]."""
    *lead, tokens, d = x.shape
    y = b.node("MatMul", [x.name, b.weights(d, width, scale=d ** -0.5)])[0]
    y = b.node("Reshape", [y.name, b.const(ints([*lead, tokens, heads, width // heads]))])[0]
    n = len(lead)
    perm = list(range(n)) + ([n + 1, n + 2, n] if keys else [n + 1, n, n + 2])
    return b.node("Transpose", [y.name], perm=perm)[0].name


def _packed(b: Builder, x: Value, width: int, heads: int) -> tuple[str, str, str]:
    """q, k and v as PyTorch exports one packed projection: [..., S, 3W] reshaped to [..., S, 3, H, W/H], the 3
    moved first, each taken with Gather, and the keys transposed."""
    *lead, tokens, d = x.shape
    y = b.node("MatMul", [x.name, b.weights(d, 3 * width, scale=d ** -0.5)])[0]
    y = b.node("Reshape", [y.name, b.const(ints([*lead, tokens, 3, heads, width // heads]))])[0]
    n = len(lead)
    y = b.node("Transpose", [y.name], perm=[n + 1, *range(n), n + 2, n, n + 3])[0]
    q, k, v = (b.node("Gather", [y.name, b.const(np.int64(i))], axis=0)[0].name for i in range(3))
    k = b.node("Transpose", [k], perm=list(range(n)) + [n, n + 2, n + 1])[0].name
    return q, k, v


def _block(b: Builder, x: Value, width: int, heads: int, packed: bool) -> Value:
    *lead, tokens, d = x.shape
    q, k, v = _packed(b, x, width, heads) if packed else \
        (_heads(b, x, width, heads, keys) for keys in (False, True, False))
    scores = b.node("MatMul", [q, k])[0]
    scores = b.node("Mul", [scores.name, b.const(np.float32((width // heads) ** -0.5))])[0]
    context = b.node("MatMul", [b.node("Softmax", [scores.name], axis=-1)[0].name, v])[0]
    n = len(lead)
    context = b.node("Transpose", [context.name], perm=list(range(n)) + [n + 1, n, n + 2])[0]
    context = b.node("Reshape", [context.name, b.const(ints([*lead, tokens, width]))])[0]
    out = b.node("MatMul", [context.name, b.weights(width, d, scale=width ** -0.5)])[0]
    return b.node("Add", [x.name, out.name])[0]


def attention(b: Builder) -> None:
    """Attention over a value [..., S, D], S > 1, of width W (D, or up to 64: heads of 1 to 16 values)."""
    x = b.pick(lambda v: v.rank in (2, 3) and v.shape[-2] > 1)
    width = b.choice([x.shape[-1], 8, 16, 32, 64])
    heads = b.choice([h for h in (1, 2, 4, 8) if width % h == 0])
    packed = b.chance(0.5)
    for _ in range(b.choice([1, 2, 3, 3])):
        x = _block(b, x, width, heads, packed)


def attention_op(b: Builder) -> None:
    """The Attention op: queries from a value [B, Hq, S, d] (4-D) or projected from a value [B, S, D] (3-D, its
    heads in the last dim), keys and values constants of Hkv heads (Hkv divides Hq: grouped-query), a boolean
    mask (each query sees a key at least: else the row is 0/0) or a float one added to the scores, causal or
    not, a scale or the default, a softcap now and then; past keys and values (4-D constants) before the new ones
    now and then, the present ones then outputs too."""
    x = b.pick(lambda v: v.rank in (3, 4))
    if x.rank == 4:
        batch, heads, tokens, size = x.shape
        query = x.name
    else:
        batch, tokens, d = x.shape
        heads, size = b.choice([1, 2, 4]), b.int(1, 4)
        query = b.node("MatMul", [x.name, b.weights(d, heads * size, scale=d ** -0.5)])[0].name
    kv_heads = b.choice([h for h in range(1, heads + 1) if heads % h == 0])
    keys, value_size = b.int(1, 6), b.int(1, 4)
    k_shape, v_shape = ((batch, kv_heads, keys, size), (batch, kv_heads, keys, value_size)) if x.rank == 4 else \
        ((batch, keys, kv_heads * size), (batch, keys, kv_heads * value_size))
    inputs = [query, b.weights(*k_shape), b.weights(*v_shape)]
    attrs = {} if x.rank == 4 else dict(q_num_heads=heads, kv_num_heads=kv_heads)
    past = b.int(1, 3) if b.chance(0.3) else 0
    total = past + keys
    if b.chance(0.4):
        shape = b.choice([(tokens, total), (batch, 1, tokens, total), (1, heads, tokens, total)])
        if b.chance(0.5):
            mask = b.rng.random(shape) < 0.7
            mask[..., 0] = True
            inputs.append(b.const(mask))
        else:
            inputs.append(b.weights(*shape))
    elif b.chance(0.4) and not past:  # with past keys onnxruntime's causal mask is not ONNX's (upper left)
        attrs["is_causal"] = 1
    if b.chance(0.4):
        attrs["scale"] = b.uniform(0.1, 1)
    if b.chance(0.2):
        attrs["softcap"] = b.uniform(1, 5)
    if past:
        inputs += [""] * (4 - len(inputs)) + [b.weights(batch, kv_heads, past, size),
                                              b.weights(batch, kv_heads, past, value_size)]
    b.node("Attention", inputs, outputs=3 if past else 1, **attrs)


def rotary_embedding(b: Builder) -> None:
    """RotaryEmbedding of a value [B, H, S, D] or [B, S, H D] (num_heads), all of D rotated or the first
    rotary_embedding_dim, halves or interleaved pairs, cos and sin caches of random angles looked up by constant
    position_ids or given per position."""
    x = b.pick(lambda v: v.rank in (3, 4) and v.shape[-1] % 2 == 0)
    attrs = dict(interleaved=b.int(0, 1))
    if x.rank == 4:
        batch, _, tokens, size = x.shape
    else:
        batch, tokens, width = x.shape
        heads = b.choice([h for h in range(1, width + 1) if width % h == 0 and (width // h) % 2 == 0])
        size, attrs["num_heads"] = width // heads, heads
    rotated = b.choice([r for r in range(2, size + 1, 2)])
    if rotated < size or b.chance(0.3):
        attrs["rotary_embedding_dim"] = rotated
    positions = b.int(tokens, tokens + 3) if b.chance(0.6) else 0
    angles = b.rng.uniform(-np.pi, np.pi, (positions, rotated // 2) if positions else (batch, tokens, rotated // 2))
    inputs = [x.name, b.const(np.cos(angles).astype(np.float32)), b.const(np.sin(angles).astype(np.float32))]
    if positions:
        inputs.append(b.const(b.rng.integers(0, positions, (batch, tokens))))
    b.node("RotaryEmbedding", inputs, **attrs)


GENERATORS = [(attention, 12), (attention_op, 2), (rotary_embedding, 2)]
