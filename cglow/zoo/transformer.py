"""2-layer pre-LN transformer encoder: [1,64,128] (sequence 64, width 128, 4 heads) -> [1,64,128]."""

import numpy as np
import onnx

from ._helpers import Builder

SEQ, WIDTH, HEADS, FFN, LAYERS = 64, 128, 4, 512, 2
HEAD_DIM = WIDTH // HEADS


def _layernorm(b: Builder, x: str, name: str) -> str:
    scale = b.const(f"{name}/scale", b.rng.uniform(0.5, 1.5, WIDTH))
    bias = b.const(f"{name}/bias", b.rng.normal(0.0, 0.1, WIDTH))
    return b.node("LayerNormalization", [x, scale, bias], name, axis=-1, epsilon=1e-5)


def _attention(b: Builder, x: str, name: str) -> str:
    """Multi-head self-attention as PyTorch exports it (MatMul/Reshape/Transpose/Softmax)."""
    heads = {}
    for proj, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        y = b.dense(x, f"{name}/{proj}", WIDTH, WIDTH)
        y = b.node("Reshape", [y, "const/split_heads"], f"{name}/{proj}/reshape")
        heads[proj] = b.node("Transpose", [y], f"{name}/{proj}/transpose", perm=perm)
    scores = b.node("MatMul", [heads["q"], heads["k"]], f"{name}/scores")  # [1,4,64,64]
    scores = b.node("Mul", [scores, "const/attn_scale"], f"{name}/scale")
    probs = b.node("Softmax", [scores], f"{name}/softmax", axis=-1)
    ctx = b.node("MatMul", [probs, heads["v"]], f"{name}/context")  # [1,4,64,32]
    ctx = b.node("Transpose", [ctx], f"{name}/context/transpose", perm=[0, 2, 1, 3])
    ctx = b.node("Reshape", [ctx, "const/merge_heads"], f"{name}/context/reshape")
    return b.dense(ctx, f"{name}/out", WIDTH, WIDTH)


def _gelu(b: Builder, x: str, name: str) -> str:
    """Exact GELU, x * 0.5 * (1 + erf(x / sqrt(2))), spelled with Div/Erf/Add/Mul/Mul."""
    y = b.node("Div", [x, "const/sqrt2"], f"{name}/div")
    y = b.node("Erf", [y], f"{name}/erf")
    y = b.node("Add", [y, "const/one"], f"{name}/add")
    y = b.node("Mul", [x, y], f"{name}/mul")
    return b.node("Mul", [y, "const/half"], f"{name}/mul_half")


def build(seed: int = 0) -> onnx.ModelProto:
    b = Builder(seed)
    b.const("const/split_heads", [1, -1, HEADS, HEAD_DIM], np.int64)
    b.const("const/merge_heads", [0, 0, WIDTH], np.int64)
    b.const("const/attn_scale", 1.0 / np.sqrt(HEAD_DIM))
    b.const("const/sqrt2", np.sqrt(2.0))
    b.const("const/one", 1.0)
    b.const("const/half", 0.5)
    x = "input"
    for i in range(LAYERS):
        name = f"layer{i}"
        y = _attention(b, _layernorm(b, x, f"{name}/ln1"), f"{name}/attn")
        x = b.node("Add", [x, y], f"{name}/attn/residual")
        y = b.dense(_layernorm(b, x, f"{name}/ln2"), f"{name}/ffn/fc1", WIDTH, FFN)
        y = b.dense(_gelu(b, y, f"{name}/ffn/gelu"), f"{name}/ffn/fc2", FFN, WIDTH)
        x = b.node("Add", [x, y], f"{name}/ffn/residual")
    _layernorm(b, x, "final_ln")
    return b.model("transformer", [1, SEQ, WIDTH], [1, SEQ, WIDTH])
