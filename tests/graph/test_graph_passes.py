"""The graph passes: BatchNorm folded into the layer before it, Pad folded into Conv and AveragePool,
transposes composed and cancelled. Each case checks the optimized graph's ops and the compiled C against
onnxruntime; the cases a pass must leave alone check that the node stays."""
from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cglow
from cglow import zoo
from cglow.graph.ir import Graph
from cglow.graph.registry import OPS, Args
from cglow.instr.ir import Gemm
from cglow.graph.passes import PIPELINE
from cglow.compiler import import_graph
from cglow.tools.memory import model_graph

from tests.onnx_ops import rand
from tests.util import cglow_run, checked_model, random_feeds, rel_error

TOL = 1e-5


def bn_params(prefix: str, c: int, seed: int = 10) -> dict[str, np.ndarray]:
    r = np.random.default_rng(seed)
    return {f"{prefix}_scale": r.uniform(0.5, 1.5, c).astype(np.float32),
            f"{prefix}_bias": r.standard_normal(c).astype(np.float32),
            f"{prefix}_mean": r.standard_normal(c).astype(np.float32),
            f"{prefix}_var": r.uniform(0.5, 1.5, c).astype(np.float32)}


def bn(x: str, y: str, prefix: str = "bn", **attrs) -> onnx.NodeProto:
    return helper.make_node("BatchNormalization", [x] + [f"{prefix}_{p}" for p in ("scale", "bias", "mean", "var")],
                            [y], name=prefix, **attrs)


def make_model(nodes, inputs: dict, outputs, inits: dict, opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        initializer=[numpy_helper.from_array(np.asarray(v), n) for n, v in inits.items()])
    return checked_model(graph, opset)


def assert_valid(graph: Graph) -> None:
    """Every node reads values produced before it, and its shape rule gives the types the graph records."""
    known = set(graph.inputs) | set(graph.consts)
    for node in graph.nodes:
        assert all(n in known for n in node.inputs if n), node
        args = Args(node, tuple(graph.types.get(n) for n in node.inputs),
                    tuple(graph.consts.get(n) for n in node.inputs), graph.opset)
        for name, t in zip(node.outputs, OPS[node.op].shape(args)):
            assert graph.types[name] == t, (node, t)
            known.add(name)
    assert known >= set(graph.outputs)


def optimized(model: onnx.ModelProto):
    """The graph compile_model lowers: the model's own, through the graph PIPELINE."""
    graph = model_graph(import_graph(model))
    for rewrite in PIPELINE:
        graph = rewrite(graph)
    return graph


def optimized_ops(model: onnx.ModelProto) -> Counter:
    graph = optimized(model)
    assert_valid(graph)
    return Counter(node.op for node in graph.nodes)


def reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime on the model as written: its own graph optimizations off (its Pad fusion, for one, turns
    zero padding before a MaxPool into the pool's padding, which ignores it)."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def check(model: onnx.ModelProto) -> Counter:
    """The ops of the optimized graph, once the compiled C matched onnxruntime."""
    feeds = random_feeds(model)
    want, got = reference(model, feeds), cglow_run(model, feeds)
    for g, w in zip(got, want, strict=True):
        assert rel_error(g, w) <= TOL
    return optimized_ops(model)


# --- BatchNormalization ------------------------------------------------------------------------------

CONVS = [  # id, input shape, weight shape, attrs
    ("conv3x3", (1, 4, 9, 8), (6, 4, 3, 3), dict(pads=[1, 0, 1, 2], strides=[2, 1])),
    ("grouped", (2, 4, 7, 7), (6, 2, 3, 3), dict(group=2)),
    ("depthwise", (1, 5, 8, 8), (5, 1, 3, 3), dict(group=5, pads=[1, 1, 1, 1])),
    ("pointwise", (1, 8, 6, 6), (3, 8, 1, 1), {}),
    ("conv1d", (2, 3, 12), (4, 3, 5), dict(dilations=[2])),
]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("case", CONVS, ids=[c[0] for c in CONVS])
def test_batchnorm_folds_into_conv(case, bias):
    _, x_shape, w_shape, attrs = case
    inits = {"w": rand(*w_shape, seed=2), **bn_params("bn", w_shape[0])}
    if bias:
        inits["b"] = rand(w_shape[0], seed=3)
    nodes = [helper.make_node("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["c"], **attrs), bn("c", "y"),
             helper.make_node("Relu", ["y"], ["z"])]
    assert check(make_model(nodes, {"x": x_shape}, ["z"], inits)) == {"Conv": 1, "Relu": 1}


@pytest.mark.parametrize("group", [1, 2])
def test_batchnorm_folds_into_conv_transpose(group):
    inits = {"w": rand(4, 6 // group, 2, 3, seed=2), "b": rand(6, seed=3), **bn_params("bn", 6)}
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["c"], strides=[2, 1], group=group), bn("c", "y")]
    assert check(make_model(nodes, {"x": (1, 4, 5, 5)}, ["y"], inits)) == {"ConvTranspose": 1}


GEMMS = [  # id, attrs, C (None: absent)
    ("plain", {}, None),
    ("transB", dict(transB=1), rand(6, seed=4)),
    ("alpha-beta", dict(alpha=0.5, beta=2.0), rand(3, 1, seed=4)),
    ("alpha-beta-transB", dict(alpha=1.5, beta=-0.5, transB=1), rand(3, 6, seed=4)),
]


@pytest.mark.parametrize("case", GEMMS, ids=[g[0] for g in GEMMS])
def test_batchnorm_folds_into_gemm(case):
    _, attrs, c = case
    w = rand(6, 5, seed=2) if attrs.get("transB") else rand(5, 6, seed=2)
    inits = {"w": w, **bn_params("bn", 6)} | ({} if c is None else {"c": c})
    nodes = [helper.make_node("Gemm", ["x", "w"] + ([] if c is None else ["c"]), ["g"], **attrs), bn("g", "y")]
    assert check(make_model(nodes, {"x": (3, 5)}, ["y"], inits)) == {"Gemm": 1}


@pytest.mark.parametrize("bias_shape", [None, (6,), (1, 6)], ids=["matmul", "add-vector", "add-row"])
def test_batchnorm_folds_into_matmul_and_add(bias_shape):
    """MatMul (+ Add of a per-feature constant, either operand order) + BatchNorm becomes one Gemm."""
    inits = {"w": rand(5, 6, seed=2), **bn_params("bn", 6)}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"])]
    if bias_shape is None:
        nodes.append(bn("m", "y"))
    else:
        inits["b"] = rand(*bias_shape, seed=3)
        nodes += [helper.make_node("Add", ["b", "m"], ["a"]), bn("a", "y")]
    assert check(make_model(nodes, {"x": (4, 5)}, ["y"], inits)) == {"Gemm": 1}


def test_matmul_add_and_two_batchnorms_become_one_gemm():
    inits = {"w": rand(5, 6, seed=2), "b": rand(6, seed=3), **bn_params("bn", 6), **bn_params("bn2", 6, seed=11)}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]), bn("a", "t"),
             bn("t", "y", prefix="bn2")]
    assert check(make_model(nodes, {"x": (4, 5)}, ["y"], inits)) == {"Gemm": 1}


def test_matmul_add_needs_no_graph_pass():
    """Without a BatchNorm the graph keeps MatMul + Add: the Add already runs in the Gemm's epilogue."""
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
                       {"x": (4, 5)}, ["y"], {"w": rand(5, 6, seed=2), "b": rand(6, seed=3)})
    assert check(model) == {"MatMul": 1, "Add": 1}
    assert [type(i) for i in cglow.compile_model(model).program.instrs] == [Gemm]


def test_batchnorm_folds_into_conv_and_per_channel_add():
    inits = {"w": rand(6, 4, 3, 3, seed=2), "b": rand(1, 6, 1, 1, seed=3), **bn_params("bn", 6)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Add", ["c", "b"], ["a"]), bn("a", "y")]
    assert check(make_model(nodes, {"x": (1, 4, 6, 6)}, ["y"], inits)) == {"Conv": 1}


def test_chained_batchnorms_fold_into_one_conv():
    inits = {"w": rand(6, 4, 3, 3, seed=2), **bn_params("bn", 6), **bn_params("bn2", 6, seed=11)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), bn("c", "t"), bn("t", "y", prefix="bn2")]
    assert check(make_model(nodes, {"x": (1, 4, 6, 6)}, ["y"], inits)) == {"Conv": 1}


def test_batchnorm_with_second_reader_of_conv_output_stays():
    inits = {"w": rand(6, 4, 3, 3, seed=2), **bn_params("bn", 6)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), bn("c", "y"), helper.make_node("Relu", ["c"], ["r"])]
    assert check(make_model(nodes, {"x": (1, 4, 6, 6)}, ["y", "r"], inits)) == \
        {"Conv": 1, "BatchNormalization": 1, "Relu": 1}


def test_batchnorm_after_conv_graph_output_stays():
    inits = {"w": rand(6, 4, 3, 3, seed=2), **bn_params("bn", 6)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), bn("c", "y")]
    assert check(make_model(nodes, {"x": (1, 4, 6, 6)}, ["y", "c"], inits)) == {"Conv": 1, "BatchNormalization": 1}


def test_batchnorm_with_run_time_weights_or_spatial_add_stays():
    """A conv whose weights are an input, and an Add whose constant varies over the pixels, keep their BN."""
    inits = {"b": rand(1, 6, 4, 4, seed=3), **bn_params("bn", 6), **bn_params("bn2", 6, seed=11)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), bn("c", "y"),
             helper.make_node("Add", ["y", "b"], ["a"]), bn("a", "z", prefix="bn2")]
    model = make_model(nodes, {"x": (1, 4, 6, 6), "w": (6, 4, 3, 3)}, ["z"], inits)
    assert check(model) == {"Conv": 1, "BatchNormalization": 2, "Add": 1}


def test_batchnorms_after_convs_sharing_weights_stay():
    """Folding would give each conv its own copy of the weights."""
    inits = {"w": rand(4, 4, 3, 3, seed=2), **bn_params("bn", 4), **bn_params("bn2", 4, seed=11)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), bn("c", "t"),
             helper.make_node("Conv", ["t", "w"], ["d"]), bn("d", "y", prefix="bn2")]
    assert check(make_model(nodes, {"x": (1, 4, 6, 6)}, ["y"], inits)) == {"Conv": 2, "BatchNormalization": 2}


def test_lone_batchnorm_still_lowers():
    model = make_model([bn("x", "y")], {"x": (2, 6, 3, 3)}, ["y"], bn_params("bn", 6))
    assert check(model) == {"BatchNormalization": 1}


@pytest.mark.parametrize("name", ["kws", "vww", "resnet8", "mobilenetv2", "unet"])
def test_every_zoo_batchnorm_folds(name):
    assert "BatchNormalization" not in optimized_ops(zoo.build(name))


def test_autoencoder_layers_become_one_gemm_each():
    """Gemm + BN and MatMul + Add + BN alike."""
    assert optimized_ops(zoo.build("autoencoder")) == {"Gemm": 10, "Relu": 9}


# --- Pad ---------------------------------------------------------------------------------------------

def pad_model(pads, reader: onnx.NodeProto, value: float | None = None, second=None):
    inits = {"p": np.array(pads, np.int64), "w": rand(3, 4, 3, 3, seed=2), "w5": rand(3, 5, 3, 3, seed=2)}
    inputs = ["x", "p"]
    if value is not None:
        inits["v"] = np.array(value, np.float32)
        inputs.append("v")
    nodes = [helper.make_node("Pad", inputs, ["t"]), reader] + ([second] if second else [])
    outputs = ["y"] + ([second.output[0]] if second else [])
    return make_model(nodes, {"x": (1, 4, 7, 6)}, outputs, inits)


def conv(**attrs) -> onnx.NodeProto:
    return helper.make_node("Conv", ["t", "w"], ["y"], **attrs)


PAD_CASES = [  # id, pads, reader, explicit zero value
    ("asymmetric", [0, 0, 1, 2, 0, 0, 3, 0], conv(), False),
    ("plus-own-pads", [0, 0, 2, 0, 0, 0, 1, 1], conv(pads=[1, 0, 0, 2], strides=[2, 2]), True),
    ("wider-than-kernel", [0, 0, 4, 0, 0, 0, 0, 5], conv(), False),
    ("avgpool-counting-pads", [0, 0, 1, 1, 0, 0, 2, 1],
     helper.make_node("AveragePool", ["t"], ["y"], kernel_shape=[3, 2], count_include_pad=1, pads=[1, 0, 0, 1]), True),
]


@pytest.mark.parametrize("case", PAD_CASES, ids=[c[0] for c in PAD_CASES])
def test_pad_folds_into_reader(case):
    _, pads, reader, zero = case
    assert check(pad_model(pads, reader, 0.0 if zero else None)) == {reader.op_type: 1}


def test_pad_folds_into_every_conv_reading_it():
    second = helper.make_node("Conv", ["t", "w"], ["y2"], pads=[0, 1, 0, 1])
    assert check(pad_model([0, 0, 1, 0, 0, 0, 2, 1], conv(), second=second)) == {"Conv": 2}


def test_pad_with_axes_input_folds():
    model = make_model([helper.make_node("Pad", ["x", "p", "", "axes"], ["t"]), conv()], {"x": (1, 4, 7, 6)}, ["y"],
                       {"p": np.array([1, 2, 0, 1], np.int64), "axes": np.array([-1, 2], np.int64),
                        "w": rand(3, 4, 3, 3, seed=2)}, opset=18)
    assert check(model) == {"Conv": 1}


PAD_KEPT = [  # id, pads, reader, value, second reader
    ("nonzero-value", [0, 0, 1, 1, 0, 0, 1, 1], conv(), 0.5, None),
    ("channel-axis", [0, 1, 1, 1, 0, 0, 1, 1], helper.make_node("Conv", ["t", "w5"], ["y"]), None, None),
    ("negative", [0, 0, 1, -1, 0, 0, 1, 1], conv(), None, None),
    ("auto-pad", [0, 0, 1, 1, 0, 0, 1, 1], conv(auto_pad="SAME_UPPER"), None, None),
    ("avgpool-excluding-pads", [0, 0, 1, 1, 0, 0, 1, 1],
     helper.make_node("AveragePool", ["t"], ["y"], kernel_shape=[3, 3]), None, None),
    ("avgpool-ceil-mode", [0, 0, 1, 1, 0, 0, 1, 1],
     helper.make_node("AveragePool", ["t"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1,
                      count_include_pad=1), None, None),
    ("maxpool", [0, 0, 1, 1, 0, 0, 1, 1], helper.make_node("MaxPool", ["t"], ["y"], kernel_shape=[3, 3]), None, None),
    ("second-reader", [0, 0, 1, 1, 0, 0, 1, 1], conv(), None, helper.make_node("Relu", ["t"], ["r"])),
]


@pytest.mark.parametrize("case", PAD_KEPT, ids=[c[0] for c in PAD_KEPT])
def test_pad_stays(case):
    _, pads, reader, value, second = case
    assert check(pad_model(pads, reader, value, second=second))["Pad"] == 1


# --- Transpose ---------------------------------------------------------------------------------------

def test_transpose_pair_cancels():
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node("Transpose", ["t"], ["u"], perm=[0, 3, 1, 2]), helper.make_node("Neg", ["u"], ["y"])]
    assert check(make_model(nodes, {"x": (2, 3, 4, 5)}, ["y"], {})) == {"Relu": 1, "Neg": 1}


def test_transpose_chain_composes_into_one():
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 2, 0]),
             helper.make_node("Transpose", ["t"], ["u"], perm=[0, 2, 1]),
             helper.make_node("Transpose", ["u"], ["v"]),
             helper.make_node("Sigmoid", ["v"], ["y"]), helper.make_node("Relu", ["t"], ["r"])]
    model = make_model(nodes, {"x": (2, 3, 4)}, ["y", "r"], {})
    assert check(model) == {"Transpose": 2, "Sigmoid": 1, "Relu": 1}
    composed = [n for n in optimized(model).nodes if n.outputs == ("v",)]
    assert composed[0].inputs == ("x",) and composed[0].attrs["perm"] == (2, 0, 1)


def test_transpose_of_a_constant_is_folded_at_import():
    nodes = [helper.make_node("Transpose", ["w"], ["t"], perm=[1, 0]), helper.make_node("MatMul", ["x", "t"], ["y"])]
    assert check(make_model(nodes, {"x": (2, 5)}, ["y"], {"w": rand(6, 5, seed=2)})) == {"MatMul": 1}


def test_cancelling_transposes_that_are_the_graph_output_keep_its_name():
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]), helper.make_node("Transpose", ["t"], ["y"])]
    model = make_model(nodes, {"x": (3, 4)}, ["y"], {})
    assert check(model) == {"Transpose": 1}
