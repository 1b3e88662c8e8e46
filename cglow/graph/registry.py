"""Name-keyed registry of shape rules: an op is found by its ONNX name."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..c_text import STORED_FLOATS, SUB_BYTE_INTS
from ..errors import CglowError
from .ir import Node, TensorType


@dataclass(frozen=True)
class Args:
    """What a shape rule sees of a node: its input types, the constant inputs, and the opset."""
    node: Node
    types: tuple[TensorType | None, ...]
    consts: tuple[np.ndarray | None, ...]
    opset: int

    def shape(self, i: int) -> tuple[int, ...]:
        return self.types[i].shape

    def has(self, i: int) -> bool:
        return i < len(self.node.inputs) and bool(self.node.inputs[i])

    def const(self, i: int, what: str) -> np.ndarray:
        if not self.has(i):
            raise CglowError(f"{self.node.describe()}: missing input {i} ({what})")
        if self.consts[i] is None:
            raise CglowError(f"{self.node.describe()}: {what} (input '{self.node.inputs[i]}') must be a "
                             f"constant; cglow compiles static graphs")
        return self.consts[i]


ShapeRule = Callable[[Args], list[TensorType]]
INT8_FORMS = ("float", "table", "movement", "conv", "gemm", "binary", "batchnorm", "average", "mean", "softmax")


@dataclass(frozen=True)
class OpSpec:
    """What cglow knows of one op, declared once, beside its lowering (lower/ops/<family>.py, `declare`).

    shape: the ONNX op's output types from its inputs', refusing by name what cglow cannot compile (the shape
        rules are in graph/rules/); None for the ops that graph passes make (IntConv..., ScaledGemm), never
        imported.
    lower: its lowering onto the primitives (a function of the lowering context and the node); None for an op
        always folded at import (Shape, Size...).
    int8: what it becomes between DequantizeLinear and QuantizeLinear (graph/quant/fold.py's FORMS): "float"
        (it stays in float there), "table" (a 256-entry table), "movement" (it moves the 8-bit values), or an
        integer kernel: "conv", "gemm", "binary", "batchnorm" (each takes a Relu or Clip after it as its clamp),
        "average", "mean", "softmax".
    shape_inputs: the inputs that fix shapes or sizes (an axes list, a target shape...): graph inputs feeding them
        are pinned as constants by the ONNX backend (tools/backend.py).
    """
    shape: ShapeRule | None
    lower: Callable[..., None] | None
    int8: str = "float"
    shape_inputs: tuple[int, ...] = ()

    def __post_init__(self):
        assert self.int8 in INT8_FORMS, self.int8


OPS: dict[str, OpSpec] = {}  # filled when cglow.lower.ops is imported (cglow/__init__ imports it first)


def declare(specs: dict[str, OpSpec]) -> None:
    for op, spec in specs.items():
        assert op not in OPS, f"{op} declared twice"
        OPS[op] = spec


def shape_rule(op: str) -> ShapeRule | None:
    spec = OPS.get(op)
    return spec.shape if spec else None


def int8_form(op: str) -> str:
    spec = OPS.get(op)
    return spec.int8 if spec else "float"


def onnx_ops() -> list[str]:
    """The ONNX ops cglow imports (not its internal integer ops), sorted."""
    return sorted(op for op, spec in OPS.items() if spec.shape is not None)


F32 = np.dtype(np.float32)
RUNTIME_DTYPES = {np.dtype(t) for t in (np.float32, np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                        np.uint32, np.int64, np.uint64)} | set(STORED_FLOATS + SUB_BYTE_INTS)


def same_as_input(args: Args) -> list[TensorType]:
    return [args.types[0]]


def require_float(args: Args, *indices: int) -> None:
    for i in indices:
        if args.has(i) and args.types[i].dtype != F32:
            raise CglowError(f"{args.node.describe()}: input '{args.node.inputs[i]}' is "
                             f"{args.types[i].dtype.name}; this op is supported for float32 only")
