"""The nodes that replace one node of a model before import (graph/decompose.py, graph/sampling.py), and what
reads that node's attributes and constant inputs."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper


class Builder:
    """The nodes of one decomposition, their values named after the node's."""

    def __init__(self, node: onnx.NodeProto, prefix: str, opset: int):
        self.node, self.prefix, self.opset, self.nodes = node, prefix, opset, []

    def add(self, op: str, inputs: list[str], output: str | None = None, **attrs) -> str:
        out = output or f"{self.prefix}{op}.{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [out], f"{self.prefix}{op}.{len(self.nodes)}", **attrs))
        return out

    def const(self, value: np.ndarray) -> str:
        out = f"{self.prefix}const.{len(self.nodes)}"
        self.nodes.append(helper.make_node("Constant", [], [out], out, value=numpy_helper.from_array(value)))
        return out


def given(node: onnx.NodeProto, i: int, consts: dict) -> np.ndarray | None:
    """The constant value of the node's input i; None where it leaves the input out or it is not a constant."""
    return consts.get(node.input[i]) if len(node.input) > i and node.input[i] else None


def named(node: onnx.NodeProto) -> str:
    return f"{node.op_type} node '{node.name}'" if node.name else f"a {node.op_type} node"


def attrs_of(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}
