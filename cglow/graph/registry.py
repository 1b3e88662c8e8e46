"""Name-keyed registry of shape rules: an op is found by its ONNX name."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

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
SHAPE_RULES: dict[str, ShapeRule] = {}


COMPILE_TIME: set[str] = set()  # ops always folded at import: they have a shape rule but no lowering


def shape_rule(*ops: str, compile_time: bool = False):
    def register(fn: ShapeRule) -> ShapeRule:
        for op in ops:
            SHAPE_RULES[op] = fn
        if compile_time:
            COMPILE_TIME.update(ops)
        return fn
    return register


F32 = np.dtype(np.float32)
RUNTIME_DTYPES = {np.dtype(t) for t in (np.float32, np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                        np.uint32, np.int64, np.uint64)}  # what the generated C computes with


def same_as_input(args: Args) -> list[TensorType]:
    return [args.types[0]]


def require_float(args: Args, *indices: int) -> None:
    for i in indices:
        if args.has(i) and args.types[i].dtype != F32:
            raise CglowError(f"{args.node.describe()}: input '{args.node.inputs[i]}' is "
                             f"{args.types[i].dtype.name}; this op is supported for float32 only")
