"""A model as the commands take it: an ONNX ModelProto, or a TFLite file, recognized by its identifier
(TFL3) whatever its name. Both compile the same way (compiler.compile_model); what differs is how `info`
describes the file and which runtime `check` and `bench` compare with (onnxruntime, or LiteRT)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from importlib.metadata import version
from pathlib import Path
import re
import struct

import numpy as np
import onnx
import tflite

from .errors import CglowError
from .graph.onnx_import import load
from .graph.tflite.arith import quantize
from .graph.tflite.reader import Model, is_tflite, read
from .options import MAX_MEMORY


@dataclass(frozen=True)
class TFLiteFile:
    path: Path

    @cached_property
    def model(self) -> Model:
        return read(self.path)

    def op_counts(self) -> dict[str, int]:
        return dict(sorted(Counter(op.op for op in self.model.operators).items()))

    def parameters(self) -> int:
        return sum(int(np.prod(t.shape)) for t in self.model.tensors if t.data is not None)

    def declared(self, indices) -> list[dict]:
        tensors = [self.model.tensors[i] for i in indices]
        return [dict(name=t.name, dtype=t.dtype.name, shape=[d if d >= 0 else "?" for d in t.signature])
                for t in tensors]


def open_model(path: str | Path, max_memory: int = MAX_MEMORY) -> onnx.ModelProto | TFLiteFile:
    """The model in the file: a TFLiteFile (read when first used) or the ONNX model (onnx_import.load)."""
    if is_tflite(path):
        return TFLiteFile(Path(path))
    return load(path, max_memory)


def as_model(model):
    """A path to a TFLite file as a TFLiteFile; anything else (an ONNX path or ModelProto) as it is."""
    return TFLiteFile(Path(model)) if isinstance(model, (str, Path)) and is_tflite(model) else model


def litert_feeds(model: TFLiteFile, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """net_run's inputs as the file takes them: float ones quantized where the file's are 8-bit (--float-io),
    as TFLite's QUANTIZE rounds (halves away from zero)."""
    feeds = []
    for index, x in zip(model.model.inputs, inputs):
        t = model.model.tensors[index]
        if t.quant is not None and x.dtype != t.dtype:
            info = np.iinfo(t.dtype)
            x = np.clip(quantize(x, t.quant.scale[0], int(t.quant.zero[0])), info.min, info.max)
        feeds.append(np.asarray(x).astype(t.dtype))
    return feeds


def litert_real_outputs(model: TFLiteFile, outputs: list[np.ndarray]) -> list[np.ndarray]:
    """The file's outputs as real values (8-bit ones dequantized), as check and bench compare them."""
    reals = []
    for index, y in zip(model.model.outputs, outputs):
        q = model.model.tensors[index].quant
        reals.append(y if q is None or y.dtype.kind == "f" else
                     ((y.astype(np.float64) - q.zero[0]) * q.scale[0]).astype(np.float32))
    return reals


def litert_reals(model: TFLiteFile, runs: list[list[np.ndarray]]) -> tuple[str, list[list[np.ndarray]]]:
    """litert_outputs of net_run's input sets, as real values."""
    runtime, outputs = litert_outputs(model, [litert_feeds(model, inputs) for inputs in runs])
    return runtime, [litert_real_outputs(model, o) for o in outputs]


# builtins whose one LiteRT kernel its reference resolver registers up to an older version than its default one:
# LiteRT 2.3's TILE, to version 2 of 3 (TensorFlow 2.21 writes an 8-bit TILE, Keras 3's UpSampling2D, as version 3)
REFERENCE_VERSIONS = {tflite.BuiltinOperator.TILE: 2}


def reference_model(data: bytes) -> bytes:
    """The file's bytes as LiteRT's reference resolver takes them: an operator of REFERENCE_VERSIONS newer than its
    entry there says that version (the same kernel computes both)."""
    model, patched = tflite.Model.GetRootAs(data, 0), bytearray(data)
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        newest = REFERENCE_VERSIONS.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()))
        if newest is not None and code.Version() > newest:  # a version above 1 is written out: overwrite it
            struct.pack_into("<i", patched, code._tab.Pos + code._tab.Offset(8), newest)  # field 2, the version
    return bytes(patched)


def litert_outputs(model: TFLiteFile, runs: list[list[np.ndarray]]) -> tuple[str, list[list[np.ndarray]]]:
    """LiteRT's name and the model's outputs, computed by its reference kernels (TFLite Micro's arithmetic): one
    interpreter invoked on each input set of `runs` in turn (the inputs in the file's order), so that a streaming
    model's variable tensors start at zero and carry over from one invocation to the next, as net_run's state.
    Where the reference kernels lack an operator's version (and REFERENCE_VERSIONS does not say it is one they
    have), by its default kernels, whose 8-bit results may be a step apart (its SOFTMAX and LOGISTIC take other
    tables)."""
    try:
        from ai_edge_litert import interpreter as litert
    except ImportError:
        raise CglowError("comparing a .tflite model runs LiteRT: pip install ai-edge-litert") from None
    kernels = "reference kernels"
    try:
        try:
            runner = _interpreter(litert, reference_model(model.path.read_bytes()), litert.OpResolverType.BUILTIN_REF)
        except ValueError as exc:
            missing = re.search(r"builtin opcode '(\w+)' version '(\d+)'", str(exc))
            if missing is None:
                raise
            runner = _interpreter(litert, model.path.read_bytes(), litert.OpResolverType.BUILTIN)
            kernels = f"default kernels: its reference kernels lack {missing[1]} version {missing[2]}"
        outputs = []
        for inputs in runs:
            for detail, x in zip(runner.get_input_details(), inputs):
                runner.set_tensor(detail["index"], x)
            runner.invoke()
            outputs.append([np.array(runner.get_tensor(d["index"])) for d in runner.get_output_details()])
    except Exception as exc:  # noqa: BLE001 - the interpreter's own errors, of many types
        raise CglowError(f"LiteRT cannot run the model ({str(exc).strip().splitlines()[0][:200]})") from None
    return f"LiteRT {version('ai-edge-litert')} ({kernels})", outputs


def _interpreter(litert, data: bytes, resolver):
    runner = litert.Interpreter(model_content=data, experimental_op_resolver_type=resolver)
    runner.allocate_tensors()
    return runner
