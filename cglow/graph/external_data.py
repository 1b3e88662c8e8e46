"""Tensors whose data lives in files beside the model (ONNX external data), read with every check: the
file must lie inside the model's folder (no absolute or ../ paths, no symbolic link out of it), exist, and
hold the tensor's bytes at the offset given, and the tensor must fit the memory limit."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import onnx

from ..errors import CglowError
from .limits import check_bytes, declared_bytes


def graph_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """The initializers and the tensor-valued attributes (Constant values) of the graph's nodes."""
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            yield from ([attr.t] if attr.HasField("t") else []) + list(attr.tensors)


def load_external_data(model: onnx.ModelProto, folder: Path, max_memory: int) -> None:
    """Read every external tensor of the main graph into its raw_data, in place."""
    root = folder.resolve()
    for tensor in graph_tensors(model.graph):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            tensor.raw_data = _read(tensor, root, max_memory)
            tensor.data_location = onnx.TensorProto.DEFAULT
            del tensor.external_data[:]


def _read(tensor: onnx.TensorProto, root: Path, max_memory: int) -> bytes:
    what = f"tensor '{tensor.name}'"
    entries = {e.key: e.value for e in tensor.external_data}
    location = entries.get("location", "")
    nbytes = declared_bytes(tensor, what)
    check_bytes(what, nbytes, max_memory)
    if not location or Path(location).is_absolute() or ".." in Path(location).parts:
        raise CglowError(f"{what}: external data location '{location}' is not a relative path inside the model's "
                         f"folder")
    path = (root / location).resolve()
    if not path.is_relative_to(root):
        raise CglowError(f"{what}: external data file '{location}' leads out of the model's folder")
    if not path.is_file():
        raise CglowError(f"{what}: external data file '{location}' does not exist beside the model")
    try:
        offset, length = int(entries.get("offset", 0)), int(entries.get("length", nbytes))
    except ValueError:
        raise CglowError(f"{what}: external data offset or length is not an integer") from None
    if length != nbytes:
        raise CglowError(f"{what}: external data length {length} differs from the {nbytes} bytes its shape and "
                         f"element type need")
    size = path.stat().st_size
    if offset < 0 or offset + length > size:
        raise CglowError(f"{what}: external data file '{location}' ({size} bytes) does not hold {nbytes} bytes at "
                         f"offset {offset}")
    with path.open("rb") as f:
        f.seek(offset)
        return f.read(length)
