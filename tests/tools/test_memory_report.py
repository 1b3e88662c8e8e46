"""The memory report: the naive floor by hand, arena >= floor and <= the naive floor on the zoo, `cglow info`, and
`emit --report`."""
from __future__ import annotations

import html
import json
import re

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest

import cglow
from cglow import zoo
from cglow.instr.liveness import floor
from cglow.compiler import import_graph
from cglow.options import Options
from cglow.tools.memory import analyze_model, model_graph, naive_spans

from tests.hostile_models import HTML_NAME, html_names_model
from tests.util import cglow_cmd, save, unsupported_model


def chain_branch_model() -> onnx.ModelProto:
    """x -> Relu a -> {Tile b, Mul c (by a folded constant)} -> Concat d -> Cast y (int8), and a dead Tile."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.INT8, [2, 24])
    inits = [numpy_helper.from_array(np.array([1, 2], np.int64), "reps"),
             numpy_helper.from_array(np.array([1, 4], np.int64), "reps4"),
             numpy_helper.from_array(np.full(8, 0.5, np.float32), "w1"),
             numpy_helper.from_array(np.full(8, 1.5, np.float32), "w2")]
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Tile", ["a", "reps"], ["b"], name="tile"),
             helper.make_node("Tile", ["b", "reps4"], ["dead"], name="dead"),
             helper.make_node("Add", ["w1", "w2"], ["k"], name="folded"),
             helper.make_node("Mul", ["a", "k"], ["c"], name="mul"),
             helper.make_node("Concat", ["b", "c"], ["d"], name="concat", axis=1),
             helper.make_node("Cast", ["d"], ["y"], name="cast", to=TensorProto.INT8)]
    graph = helper.make_graph(nodes, "g", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_naive_floor_by_hand():
    # steps relu 0, tile 1, mul 2, concat 3, cast 4 (the constant Add folded, the dead Tile dropped):
    # x 64 B [0,0], a 64 B [0,2], b 128 B [1,3], c 64 B [2,3], d 192 B [3,4], y 48 B (int8) [4,4]
    # alive per step: 128, 192, 256, 384, 240
    graph = model_graph(import_graph(chain_branch_model()))
    assert floor(naive_spans(graph)) == 128 + 256
    _, report = analyze_model(chain_branch_model())
    assert report.naive_floor == 384 and report.io_bytes == 64 + 48


@pytest.mark.parametrize("name", [m for m in zoo.MODELS if m != "mobilenetv2"])
def test_arena_is_at_least_the_floor(name):
    compiled, report = analyze_model(zoo.build(name))
    arena_spans = [s for s in report.buffers if s.kind == "arena"]
    assert floor(arena_spans) <= report.arena_bytes == compiled.arena_bytes
    assert report.schedule_floor <= report.ram_bytes
    assert report.steps[report.peak].alive == report.schedule_floor == max(s.alive for s in report.steps)
    assert report.naive_floor > 0


@pytest.mark.parametrize("name", list(zoo.MODELS))
def test_arena_is_at_most_the_naive_floor(name):
    """No model needs more RAM than its ONNX node order with a buffer per node output: neither its arena nor,
    with its inputs and outputs in the arena, its RAM (googlenet's LRNs once took a third activation)."""
    model = zoo.build(name)
    _, report = analyze_model(model)
    _, io_in_arena = analyze_model(model, options=Options(io_in_arena=True))
    assert report.arena_bytes <= report.naive_floor
    assert io_in_arena.ram_bytes <= report.naive_floor


def test_info_json_has_the_facts(tmp_path):
    path = save(zoo.build("kws"), tmp_path / "kws.onnx")
    result = cglow_cmd("info", path, "--json")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert set(info) >= {"inputs", "outputs", "ops", "kernels", "weights_bytes", "arena_bytes", "io_bytes",
                         "ram_bytes", "schedule_floor", "naive_floor", "arena_over_naive_floor"}
    assert info["inputs"] == [{"name": "input", "dtype": "float32", "shape": [1, 1, 49, 10]}]
    assert info["ops"]["Conv"] == 9 and info["ram_bytes"] == info["arena_bytes"] + info["io_bytes"]
    text = cglow_cmd("info", path)
    assert text.returncode == 0 and f"naive floor (ONNX node order): {info['naive_floor']} bytes" in text.stdout


def test_report_draws_every_arena_buffer_and_escapes_names(tmp_path):
    compiled = cglow.compile_model(html_names_model())
    prog = compiled.program
    assert HTML_NAME in [prog.buffer(b).label for b in compiled.plan.offsets]
    path = save(html_names_model(), tmp_path / "h.onnx")
    result = cglow_cmd("emit", path, "-o", str(tmp_path / "h.c"), "--report", str(tmp_path / "r" / "plan.html"))
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "r" / "plan.html").read_text()
    assert HTML_NAME not in page and "<script" not in page and "<b>" not in page
    assert html.escape(HTML_NAME) in page and html.escape("<b>&amp;") in page
    (svg,) = re.findall(r"<svg id=\"arena-svg\".*?</svg>", page, re.DOTALL)
    assert svg.count("<rect") == len(compiled.plan.offsets)
    (graph,) = re.findall(r"<svg id=\"graph-svg\".*?</svg>", page, re.DOTALL)
    # tooltips: the first node's name and output, the second node's input (the boxes show 24 characters)
    assert graph.count('<g class="node">') == 2 and graph.count(html.escape(HTML_NAME)) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.c", "h.h", "h.onnx", "r"]


def test_failing_emit_writes_no_report(tmp_path):
    path = save(unsupported_model(), tmp_path / "bad.onnx")
    result = cglow_cmd("emit", path, "-o", str(tmp_path / "bad.c"), "--report", str(tmp_path / "plan.html"))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["bad.onnx"]
