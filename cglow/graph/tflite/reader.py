"""Reading a .tflite file: its flatbuffer, through the `tflite` package's generated schema, becomes plain
tensors and operators. Only the main subgraph is read (a microcontroller model has one); a file that is not
a TFLite model, or whose tables point outside it, raises one CglowError."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tflite

from ...errors import CglowError, reason

IDENTIFIER = b"TFL3"  # the schema's file_identifier, bytes 4 to 8 of the file
DTYPES = {"FLOAT32": np.float32, "FLOAT16": np.float16, "FLOAT64": np.float64, "INT8": np.int8,
          "UINT8": np.uint8, "INT16": np.int16, "UINT16": np.uint16, "INT32": np.int32, "UINT32": np.uint32,
          "INT64": np.int64, "UINT64": np.uint64, "BOOL": np.bool_}
_TYPE_NAMES = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
_OPERATOR_NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
_OPTION_NAMES = {v: k for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")}


@dataclass(frozen=True)
class Quant:
    """real = (q - zero) * scale, per tensor (axis None) or along `axis`."""
    scale: np.ndarray   # float32, 1-D
    zero: np.ndarray    # int64, 1-D, as long as scale
    axis: int | None


@dataclass(frozen=True)
class Tensor:
    index: int
    name: str
    shape: tuple[int, ...]
    signature: tuple[int, ...]     # the shape with -1 where a dimension is dynamic
    dtype: np.dtype
    data: np.ndarray | None        # a constant's values, shaped
    quant: Quant | None
    variable: bool = False         # a variable tensor: state that operators (SVDF, LSTM) keep between invocations


@dataclass(frozen=True)
class Operator:
    index: int
    op: str                        # the builtin's name, e.g. CONV_2D; CUSTOM:<code> for a custom op
    inputs: tuple[int, ...]        # tensor indices, -1 for an omitted optional input
    outputs: tuple[int, ...]
    options: Any                   # the generated options table (tflite.Conv2DOptions...), or None
    intermediates: tuple[int, ...] = ()  # tensors whose quantization an 8-bit LSTM takes its scales from

    def describe(self) -> str:
        return f"{self.op} operator {self.index}"


@dataclass(frozen=True)
class Model:
    description: str
    tensors: tuple[Tensor, ...]
    operators: tuple[Operator, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


def is_tflite(path: str | Path) -> bool:
    """Whether the file carries the TFLite identifier."""
    try:
        with open(path, "rb") as f:
            return f.read(8)[4:8] == IDENTIFIER
    except OSError:
        return False


def read(path: str | Path) -> Model:
    data = Path(path).read_bytes()
    if data[4:8] != IDENTIFIER:
        raise CglowError(f"{path}: not a TFLite model (no {IDENTIFIER.decode()} identifier)")
    try:
        return _model(tflite.Model.GetRootAs(data, 0))
    except CglowError:
        raise
    except Exception as exc:  # a table or vector pointing outside the file
        raise CglowError(f"{path}: a malformed TFLite file ({reason(exc)})") from None


def _model(m: tflite.Model) -> Model:
    if m.SubgraphsLength() < 1:
        raise CglowError("the TFLite file holds no subgraph")
    g = m.Subgraphs(0)
    buffers = [m.Buffers(i) for i in range(m.BuffersLength())]
    tensors = tuple(_tensor(g.Tensors(i), i, buffers) for i in range(g.TensorsLength()))
    codes = [m.OperatorCodes(i) for i in range(m.OperatorCodesLength())]
    operators = tuple(_operator(g.Operators(i), i, codes) for i in range(g.OperatorsLength()))
    description = m.Description().decode("utf-8", "replace") if m.Description() else ""
    return Model(description, tensors, operators, tuple(int(i) for i in g.InputsAsNumpy()),
                 tuple(int(i) for i in g.OutputsAsNumpy()))


def _text(raw: bytes | None) -> str:
    return raw.decode("utf-8", "replace") if raw else ""


def _tensor(t: tflite.Tensor, index: int, buffers) -> Tensor:
    name = _text(t.Name()) or f"tensor{index}"
    kind = _TYPE_NAMES.get(t.Type(), str(t.Type()))
    if kind not in DTYPES:
        raise CglowError(f"tensor {index} ('{name}') is {kind}; cglow reads "
                         f"{', '.join(k for k in DTYPES if k != 'FLOAT64')} tensors")
    dtype = np.dtype(DTYPES[kind]).newbyteorder("<")
    shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
    signature = tuple(int(d) for d in t.ShapeSignatureAsNumpy()) if t.ShapeSignatureLength() else shape
    data = None
    buf = buffers[t.Buffer()] if 0 < t.Buffer() < len(buffers) else None
    if buf is not None and buf.DataLength():
        raw = buf.DataAsNumpy().tobytes()
        count = int(np.prod(shape, dtype=np.int64))
        if len(raw) != count * dtype.itemsize:
            raise CglowError(f"tensor {index} ('{name}'): its buffer holds {len(raw)} bytes, its shape "
                             f"{list(shape)} of {kind} needs {count * dtype.itemsize}")
        data = np.frombuffer(raw, dtype).astype(dtype.newbyteorder("="), copy=True).reshape(shape)
    return Tensor(index, name, shape, signature, np.dtype(DTYPES[kind]), data, _quant(t.Quantization()),
                  bool(t.IsVariable()))


def _quant(q: tflite.QuantizationParameters | None) -> Quant | None:
    if q is None or not q.ScaleLength():
        return None
    scale = q.ScaleAsNumpy().astype(np.float32)
    zero = q.ZeroPointAsNumpy().astype(np.int64) if q.ZeroPointLength() else np.zeros(scale.size, np.int64)
    zero = np.broadcast_to(zero, scale.shape).copy()
    return Quant(scale, zero, None if scale.size == 1 else int(q.QuantizedDimension()))


def _operator(op: tflite.Operator, index: int, codes) -> Operator:
    code = codes[op.OpcodeIndex()]
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())  # older files fill only the deprecated field
    name = _OPERATOR_NAMES.get(builtin, f"BUILTIN_{builtin}")
    if name == "CUSTOM":
        name = f"CUSTOM:{_text(code.CustomCode())}"
    options = None
    kind = _OPTION_NAMES.get(op.BuiltinOptionsType(), "NONE")
    table = op.BuiltinOptions()
    if kind != "NONE" and table is not None:
        options = getattr(tflite, kind)()
        options.Init(table.Bytes, table.Pos)
    inputs = tuple(int(i) for i in op.InputsAsNumpy()) if op.InputsLength() else ()
    outputs = tuple(int(i) for i in op.OutputsAsNumpy()) if op.OutputsLength() else ()
    intermediates = tuple(int(i) for i in op.IntermediatesAsNumpy()) if op.IntermediatesLength() else ()
    return Operator(index, name, inputs, outputs, options, intermediates)
