"""Mutated model files: byte-level damage (bit flips, overwritten, deleted, inserted and duplicated bytes,
truncation) and structure-aware edits of a parsed model (op types, inputs, attributes, dims, element types,
initializer data, external data, opsets, names), each drawn from a seeded generator."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T

INTS = [-(1 << 63), -(1 << 31), -7, -2, -1, 0, 1, 2, 3, 5, 8, 1 << 20, 1 << 31, (1 << 62) + 1]
FLOATS = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1e-45, 3.4e38, -1.0]
OPS = ["Relu", "Add", "Conv", "MatMul", "Gemm", "Reshape", "Concat", "Slice", "Softmax", "MaxPool", "Transpose",
       "Resize", "Gather", "Split", "Pad", "Expand", "ConstantOfShape", "Range", "TopK", "LSTM", "Einsum", "If"]
ELEM_TYPES = [T.UNDEFINED, T.FLOAT, T.INT64, T.BOOL, T.STRING, T.FLOAT16, T.BFLOAT16, T.INT4, T.COMPLEX64, 40]


def byte_damage(data: bytes, rng: np.random.Generator) -> bytes:
    buf = bytearray(data)
    kind = int(rng.integers(6))
    at = int(rng.integers(len(buf))) if buf else 0
    if kind == 0:
        for _ in range(int(rng.integers(1, 8))):
            i = int(rng.integers(len(buf)))
            buf[i] ^= 1 << int(rng.integers(8))
    elif kind == 1:
        buf[at:at + 4] = bytes(rng.choice([0x00, 0xFF, 0x7F, 0x80, 0x01], 4).tolist())
    elif kind == 2:
        del buf[at:at + int(rng.integers(1, 16))]
    elif kind == 3:
        buf[at:at] = rng.integers(0, 256, int(rng.integers(1, 16)), dtype=np.uint8).tobytes()
    elif kind == 4:
        buf[at:at] = buf[at:at + int(rng.integers(1, 64))]
    else:
        del buf[at:]
    return bytes(buf)


def _attribute(attr: onnx.AttributeProto, rng: np.random.Generator) -> None:
    pick = int(rng.integers(4))
    if pick == 0:
        attr.type = int(rng.integers(0, 15))
    elif attr.type == onnx.AttributeProto.INT or pick == 1:
        attr.i = int(rng.choice(INTS))
    elif attr.type == onnx.AttributeProto.INTS:
        attr.ints[:] = [int(rng.choice(INTS)) if rng.random() < 0.5 else v for v in attr.ints][:int(rng.integers(5))]
    elif attr.type == onnx.AttributeProto.FLOAT:
        attr.f = float(rng.choice(FLOATS))
    else:
        attr.s = rng.choice([b"", b"nonsense", b"\xff\xfe", b"SAME_UPPER", b"linear"])


def _tensor(t: onnx.TensorProto, rng: np.random.Generator) -> None:
    pick = int(rng.integers(5))
    if pick == 0:
        t.dims[:] = [int(rng.choice(INTS)) if rng.random() < 0.5 else d for d in t.dims] + \
            [int(rng.choice(INTS))] * int(rng.integers(2))
    elif pick == 1:
        t.data_type = int(rng.choice(ELEM_TYPES))
    elif pick == 2:
        t.raw_data = t.raw_data[:int(rng.integers(len(t.raw_data) + 1))]
    elif pick == 3:
        t.data_location = T.EXTERNAL
        t.external_data.add(key="location", value=str(rng.choice(["../escape.bin", "/etc/hostname", "w.bin", ""])))
    else:
        t.ClearField("raw_data")
        t.float_data[:] = [float(rng.choice(FLOATS))] * int(rng.integers(4))


def _value(v: onnx.ValueInfoProto, rng: np.random.Generator) -> None:
    tt = v.type.tensor_type
    if rng.random() < 0.3:
        tt.elem_type = int(rng.choice(ELEM_TYPES))
    elif rng.random() < 0.5 and tt.shape.dim:
        dim = tt.shape.dim[int(rng.integers(len(tt.shape.dim)))]
        if rng.random() < 0.3:
            dim.dim_param = "n"
        else:
            dim.dim_value = int(rng.choice(INTS))
    else:
        tt.ClearField("shape") if rng.random() < 0.5 else tt.shape.dim.add(dim_value=int(rng.integers(1, 4)))


def _node(model: onnx.ModelProto, rng: np.random.Generator) -> None:
    g = model.graph
    node = g.node[int(rng.integers(len(g.node)))]
    names = [v.name for v in g.input] + [t.name for t in g.initializer] + [o for n in g.node for o in n.output]
    pick = int(rng.integers(7))
    if pick == 0:
        node.op_type = str(rng.choice(OPS))
    elif pick == 1 and node.input:
        node.input[int(rng.integers(len(node.input)))] = str(rng.choice(names + ["", "nowhere"]))
    elif pick == 2 and node.attribute:
        _attribute(node.attribute[int(rng.integers(len(node.attribute)))], rng)
    elif pick == 3:
        node.output[0] = str(rng.choice(names))
    elif pick == 4:
        g.node.insert(int(rng.integers(len(g.node) + 1)), onnx.NodeProto.FromString(node.SerializeToString()))
    elif pick == 5 and len(g.node) > 1:
        g.node.remove(node)
    else:
        node.input.append(str(rng.choice(names)))


def structure_damage(model: onnx.ModelProto, rng: np.random.Generator) -> onnx.ModelProto:
    m = onnx.ModelProto.FromString(model.SerializeToString())
    g = m.graph
    for _ in range(int(rng.integers(1, 4))):
        pick = int(rng.integers(6))
        if pick == 0 and g.node:
            _node(m, rng)
        elif pick == 1 and g.initializer:
            _tensor(g.initializer[int(rng.integers(len(g.initializer)))], rng)
        elif pick == 2:
            _value(rng.choice([*g.input, *g.output]), rng)
        elif pick == 3:
            m.opset_import[0].version = int(rng.choice([1, 6, 10, 11, 13, 18, 21, 28, 29, 1000]))
        elif pick == 4 and g.output:
            g.output[0].name = str(rng.choice(["", "nowhere", g.input[0].name]))
        else:
            g.node[int(rng.integers(len(g.node)))].domain = "com.example" if g.node else ""
    return m


def mutant(model: onnx.ModelProto, rng: np.random.Generator) -> bytes:
    """A damaged copy of the model's bytes: structure edits, byte damage, or both."""
    kind = int(rng.integers(3))
    data = structure_damage(model, rng).SerializeToString() if kind != 1 else model.SerializeToString()
    return byte_damage(data, rng) if kind != 0 else data
