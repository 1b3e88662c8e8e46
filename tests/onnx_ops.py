"""What the ONNX op tests share: seeded arrays, models of one node (or a few) built with onnx.helper, and their
comparison with onnxruntime within TOL = 1e-5 (tests/ops/test_ops_nn.py says why)."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.util import assert_shapes_agree_with_onnx, cglow_run, checked_model, ort_run, random_feeds, rel_error

TOL = 1e-5


def rand(*shape, seed: int = 1, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def pos(*shape, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.5, 1.5, shape).astype(np.float32)


def i64(*values) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def f32(value) -> np.ndarray:
    return np.array(value, dtype=np.float32)


def make_model(nodes, inputs: dict, outputs, inits: dict | None = None, opset: int = 13) -> onnx.ModelProto:
    """inputs: graph input name -> static shape; outputs: names, or (name, shape) for an output whose shape
    ONNX shape inference does not find (all float32); inits: initializer name -> array (dtype kept)."""
    shapes = [(o, None) if isinstance(o, str) else o for o in outputs]
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in shapes],
        initializer=[numpy_helper.from_array(np.asarray(v), n) for n, v in (inits or {}).items()])
    return checked_model(graph, opset)


def node_model(op: str, ins, opset: int = 13, **attrs) -> onnx.ModelProto:
    """One node. ins: (name, spec) in input order; a tuple spec is a graph input of that shape, an
    ndarray an initializer, None an omitted optional input."""
    inputs = {n: s for n, s in ins if isinstance(s, tuple)}
    inits = {n: s for n, s in ins if isinstance(s, np.ndarray)}
    node = helper.make_node(op, [n if s is not None else "" for n, s in ins], ["y"], **attrs)
    return make_model([node], inputs, ["y"], inits, opset)


def check(model: onnx.ModelProto, tol: float = TOL, feeds=None, positive: bool = False, scale: float = 1.0):
    """cglow's outputs against onnxruntime's on seeded inputs (or `feeds`): the same shapes, within `tol`."""
    feeds = random_feeds(model, positive=positive, scale=scale) if feeds is None else feeds
    assert_shapes_agree_with_onnx(model)
    want = ort_run(model, feeds)
    got = cglow_run(model, feeds)
    names = [o.name for o in model.graph.output]
    assert len(got) == len(want) == len(names)
    for name, g, w in zip(names, got, want):
        assert g.shape == w.shape, f"output {name}: shape {g.shape}, onnxruntime {w.shape}"
        err = rel_error(g, w)
        assert err <= tol, f"output {name}: relative error {err:.3g} > {tol}"


def ids(cases) -> list[str]:
    """Test ids: the first field of each case."""
    return [c[0] for c in cases]


def transpose_node(x: str, out: str, perm) -> onnx.NodeProto:
    """A Transpose node x -> out with the permutation `perm`."""
    return helper.make_node("Transpose", [x], [out], perm=list(perm))
