"""Shared test helpers: run a model through cglow's C, through onnxruntime and through the command line, compare;
build a checked ONNX model; skip (or fail in CI) without a tool or an optional package; the repository's paths."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

import cglow

ROOT = Path(__file__).resolve().parents[1]  # the repository
DATA = Path(__file__).resolve().parent / "data"  # the fixtures of tests/data


def ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def cglow_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray], **options) -> list[np.ndarray]:
    compiled = cglow.compile_model(model, **options)
    host = cglow.build(compiled)
    return host(*(np.asarray(feeds[t.name], dtype=t.dtype, order="C") for t in compiled.inputs))


def rel_error(got: np.ndarray, want: np.ndarray) -> float:
    """Max absolute difference relative to the reference's scale (its max magnitude, at least 1e-6)."""
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-6)
    return float(np.max(np.abs(got.astype(np.float64) - want))) / scale if want.size else 0.0


def random_feeds(model: onnx.ModelProto, seed: int = 0, positive: bool = False,
                 scale: float = 1.0) -> dict[str, np.ndarray]:
    """Seeded float32 values for every graph input: normal times `scale`, or uniform in [0.2, 2) if positive."""
    rng = np.random.default_rng(seed)
    init = {i.name for i in model.graph.initializer}
    feeds = {}
    for v in model.graph.input:
        if v.name not in init:
            shape = [d.dim_value for d in v.type.tensor_type.shape.dim]
            x = rng.uniform(0.2, 2.0, shape) if positive else rng.standard_normal(shape) * scale
            feeds[v.name] = np.asarray(x, dtype=np.float32)
    return feeds


def cglow_cmd(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m cglow ARGS` in a subprocess, its output captured."""
    return subprocess.run([sys.executable, "-m", "cglow", *args], capture_output=True, text=True, cwd=cwd)


def save(model: onnx.ModelProto, path: Path) -> str:
    onnx.save(model, str(path))
    return str(path)


def unsupported_model() -> onnx.ModelProto:
    """Four nodes, three of ops cglow does not support (two RandomUniformLike, a RandomNormalLike: random draws
    have no place in a compiled model)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="fine"),
             helper.make_node("RandomUniformLike", ["a"], ["b"], name="first det"),
             helper.make_node("RandomNormalLike", ["b"], ["c"], name="uq"),
             helper.make_node("RandomUniformLike", ["c"], ["y"], name="second det")]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])


def nonzero_model() -> onnx.ModelProto:
    """NonZero of a [3, 4] float input: an output of run-time length, int64 [2, <=12] and its count."""
    graph = helper.make_graph([helper.make_node("NonZero", ["x"], ["result"])], "nonzero",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("result", TensorProto.INT64, [2, None])])
    return checked_model(graph, 13)


def in_ci() -> bool:
    import os
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need_tool(name: str) -> str:
    """The tool's path; a test that needs a missing tool skips on a laptop but fails in CI."""
    import shutil

    import pytest
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (make test installs it)"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return path


def need_target(name: str):
    """The cross target of cglow.tools.targets of that name, once its tools are there (need_tool)."""
    from cglow.tools.targets import TARGETS
    target = TARGETS[name]
    for tool in target.tools:
        need_tool(tool)
    return target


def need_module(name: str) -> None:
    """At the top of a test module that needs an optional package (LiteRT): the module's tests skip on a laptop
    without it; in CI a missing package is a failure, not a skip."""
    import importlib

    import pytest
    if in_ci():
        importlib.import_module(name)
    else:
        pytest.importorskip(name)


def checked_model(graph: onnx.GraphProto, opset: int = 13, ir_version: int | None = None) -> onnx.ModelProto:
    """The graph as a model of the default domain at `opset` (the lowest IR version that allows it, unless
    given), its output shapes filled in by ONNX shape inference in strict mode, and checked."""
    opsets = [onnx.helper.make_opsetid("", opset)]
    model = onnx.helper.make_model(graph, opset_imports=opsets,
                                   ir_version=ir_version or onnx.helper.find_min_ir_version_for(opsets))
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model)
    return model


def value_info(name: str, shape, elem: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    """A graph's or a subgraph's input or output (shape None: unknown)."""
    return helper.make_tensor_value_info(name, elem, shape)


def graph_model(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:
    """The nodes as a model of the default domain at `opset`, unchecked (a subgraph's outputs may be untyped), the
    (name, array) pairs `inits` its initializers."""
    graph = helper.make_graph(nodes, "g", inputs, outputs, [onnx.numpy_helper.from_array(v, n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def assert_shapes_agree_with_onnx(model: onnx.ModelProto) -> None:
    """cglow's own shape rules against ONNX shape inference, for every value both know statically."""
    from cglow.graph.onnx_import import import_model
    graph = import_model(model)
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    values = list(inferred.graph.value_info) + list(inferred.graph.output)
    checked = 0
    for v in values:
        dims = v.type.tensor_type.shape.dim
        if v.name in graph.types and v.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            assert graph.types[v.name].shape == tuple(d.dim_value for d in dims), v.name
            checked += 1
    assert checked or not graph.nodes
