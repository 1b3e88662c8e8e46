"""TFLite import: a .tflite file becomes the typed graph an ONNX model becomes (graph/ir.py). Every
operator is translated by its builtin's translator (build.py registers them); the file's shapes and types are
checked against what the translation computes. 8-bit graph inputs and outputs keep their integers, and their
scale and zero point go to the header, as for an ONNX model with QuantizeLinear at its inputs."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...errors import CglowError, ModelProblems
from ...options import MAX_MEMORY
from ..ir import Graph, TensorType
from ..limits import checked_type
from ..quant.io import float_io as to_float_io
from . import activations, conv, elementwise, lstm, matmul, resize  # noqa: F401  (register their translators)
from . import slicing, softmax, svdf, tensor, transpose_conv  # noqa: F401  (as do these)
from .build import OPSET, TRANSLATORS, Build
from .reader import Model

MAX_LISTED = 10  # operators named per unsupported builtin


def unsupported(model: Model) -> str | None:
    """One line naming every builtin cglow cannot translate, with its operators' indices."""
    missing: dict[str, list[int]] = {}
    for op in model.operators:
        if op.op not in TRANSLATORS:
            missing.setdefault(op.op, []).append(op.index)
    if not missing:
        return None
    listed = "; ".join(f"{name} (operator{'s' if len(ix) > 1 else ''} {', '.join(map(str, ix[:MAX_LISTED]))}"
                       f"{f' and {len(ix) - MAX_LISTED} more' if len(ix) > MAX_LISTED else ''})"
                       for name, ix in sorted(missing.items()))
    return f"unsupported TFLite operators: {listed} (docs/ops.md lists the supported ones)"


def _input_type(model: Model, index: int, shapes: dict, max_memory: int) -> TensorType:
    t = model.tensors[index]
    shape = shapes.pop(t.name, None)
    if shape is None:
        if any(d < 0 for d in t.signature[1:]):
            raise CglowError(f"input '{t.name}' has the dynamic shape {list(t.signature)}; give it with "
                             f"--shape {t.name}=...")
        shape = tuple(max(d, 1) for d in t.shape)
    return checked_type(f"input '{t.name}'", TensorType(t.dtype, tuple(shape)), max_memory)


def import_tflite(model: Model, shapes: dict[str, tuple[int, ...]] | None = None, source: str = "",
                  max_memory: int = MAX_MEMORY, float_io: bool = False) -> Graph:
    """The typed graph of a .tflite file's model (reader.read). `float_io`: its 8-bit inputs and outputs
    become float32 ones, quantized (as TFLite's QUANTIZE rounds) and dequantized inside."""
    problem = unsupported(model)
    if problem:
        raise CglowError(problem)
    b = Build(model, max_memory)
    shapes = dict(shapes or {})
    for index in model.inputs:
        b.types[b.names[index]] = _input_type(model, index, shapes, max_memory)
        if b.types[b.names[index]].shape != model.tensors[index].shape:
            b.shapes[index] = b.types[b.names[index]].shape
    if shapes:
        raise CglowError(f"--shape names no graph input: {', '.join(sorted(shapes))} "
                         f"(inputs: {', '.join(b.names[i] for i in model.inputs)})")
    problems = []
    for op in model.operators:
        b.op = op
        try:
            TRANSLATORS[op.op](b, op)
        except CglowError as exc:
            problems.append(str(exc))
    if problems:
        raise ModelProblems(problems)
    io_quant = {}
    for index in model.inputs + model.outputs:
        t = model.tensors[index]
        if t.quant is not None and t.dtype.itemsize == 1 and t.dtype.kind in "iu" and t.quant.axis is None:
            io_quant[b.names[index]] = (float(t.quant.scale[0]), int(t.quant.zero[0]))
    for index in model.outputs:
        if b.names[index] not in b.types:
            raise CglowError(f"output '{model.tensors[index].name}' is written by no operator")
    consts = {k: np.ascontiguousarray(v) for k, v in b.consts.items()}
    graph = Graph(name=Path(source).stem or "model", opset=OPSET, inputs=tuple(b.names[i] for i in model.inputs),
                 outputs=tuple(b.names[i] for i in model.outputs), types=b.types, consts=consts,
                 nodes=tuple(b.nodes), source=source, io_quant=io_quant, states=b.states())
    return to_float_io(graph, {"rounding": "tflite"}) if float_io else graph
