"""Malformed models, one builder per case of the hostile-input table (tests/graph/test_hostile_input.py). A builder
writes its files into a folder and returns the model's path; CASES pairs it with the extra command-line
arguments and the phrases its one error line must hold (what and where). And one valid model whose names are
HTML (html_names_model), for the report and --dump-ir."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T, helper, numpy_helper


def tensor(name: str, shape, elem=T.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def const(name: str, values, dtype=np.int64) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype), name)


def model(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)  # onnxruntime reads 8


def node(op: str, inputs, outputs, name: str, **attrs) -> onnx.NodeProto:
    return helper.make_node(op, inputs, outputs, name=name, **attrs)


def relu_model(shape=(2, 3), elem=T.FLOAT, opset: int = 17) -> onnx.ModelProto:
    return model([node("Relu", ["x"], ["y"], "relu")], [tensor("x", shape, elem)], [tensor("y", shape, elem)],
                 opset=opset)


def saved(proto: onnx.ModelProto | bytes, folder: Path, name: str = "model.onnx") -> Path:
    path = folder / name
    path.write_bytes(proto if isinstance(proto, bytes) else proto.SerializeToString())
    return path


HTML_NAME = "</title><script>alert(1)</script>"


def html_names_model() -> onnx.ModelProto:
    """y = (x @ x) @ x where the intermediate tensor and the nodes have names that are HTML."""
    x = tensor("x", [4, 4])
    y = tensor("y", [4, 4])
    nodes = [helper.make_node("MatMul", ["x", "x"], [HTML_NAME], name=HTML_NAME),
             helper.make_node("MatMul", [HTML_NAME, "x"], ["y"], name="<b>&amp;")]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])


def with_external(folder: Path, location: str, data: bytes | None, length: int | None = None) -> Path:
    """A model adding x to a 2x3 float initializer 'w' whose data is external at `location`; `data` is written
    to folder/weights.bin (None: no file)."""
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = T.EXTERNAL
    entries = {"location": location, "offset": "0"} | ({"length": str(length)} if length is not None else {})
    for key, value in entries.items():
        w.external_data.add(key=key, value=value)
    if data is not None:
        (folder / "weights.bin").write_bytes(data)
    add = node("Add", ["x", "w"], ["y"], "add")
    return saved(model([add], [tensor("x", [2, 3])], [tensor("y", [2, 3])], [w]), folder)


def wrong_raw_size(folder: Path) -> Path:
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    w.raw_data = w.raw_data[:-4]
    add = node("Add", ["x", "w"], ["y"], "add")
    return saved(model([add], [tensor("x", [2, 3])], [tensor("y", [2, 3])], [w]), folder)


def wrong_value_count(folder: Path) -> Path:
    w = helper.make_tensor("w", T.FLOAT, [2, 3], [1.0] * 6)
    del w.float_data[-1]
    add = node("Add", ["x", "w"], ["y"], "add")
    return saved(model([add], [tensor("x", [2, 3])], [tensor("y", [2, 3])], [w]), folder)


def huge_declared_initializer(folder: Path) -> Path:
    w = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[1 << 20, 1 << 20])
    add = node("Add", ["x", "w"], ["y"], "add")
    return saved(model([add], [tensor("x", [1])], [tensor("y", [1])], [w]), folder)


def cycle(folder: Path) -> Path:
    nodes = [node("Relu", ["b"], ["a"], "first"), node("Add", ["a", "x"], ["b"], "second")]
    return saved(model(nodes, [tensor("x", [2])], [tensor("a", [2])]), folder)


def two_producers(folder: Path) -> Path:
    nodes = [node("Relu", ["x"], ["y"], "one"), node("Neg", ["x"], ["y"], "other")]
    return saved(model(nodes, [tensor("x", [2])], [tensor("y", [2])]), folder)


def folded_to(op: str, consts, out_shape=(1,), **attrs):
    """x plus the constant made by `op` from constant inputs c0, c1..."""
    def build(folder: Path) -> Path:
        names = [f"c{i}" for i in range(len(consts))]
        nodes = [node(op, names, ["c"], "maker", **attrs), node("Add", ["x", "c"], ["y"], "add")]
        inits = [const(n, v, np.asarray(v).dtype) for n, v in zip(names, consts)]
        return saved(model(nodes, [tensor("x", [1])], [tensor("y", list(out_shape))], inits), folder)
    return build


def with_node_domain(folder: Path) -> Path:
    proto = relu_model()
    proto.graph.node[0].domain = "com.example.evil"
    return saved(proto, folder)


def wrong_attribute_type(folder: Path) -> Path:
    softmax = node("Softmax", ["x"], ["y"], "soft", axis=1.5)
    return saved(model([softmax], [tensor("x", [2, 3])], [tensor("y", [2, 3])]), folder)


def simple(build):
    """A builder from a function of no arguments that returns the model."""
    return lambda folder: saved(build(), folder)


def non_utf8_op_type(folder: Path) -> Path:
    return saved(relu_model().SerializeToString().replace(b"Relu", b"R\xffl\xfe"), folder)


def old_opset_invalid_node(folder: Path) -> Path:
    """Opset 1 BatchNormalization needs consumed_inputs: the converter to opset 11 would not notice."""
    stats = [const(n, np.ones(3), np.float32) for n in ("s", "b", "m", "v")]
    bn = node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], "bn")
    return saved(model([bn], [tensor("x", [1, 3, 2, 2])], [tensor("y", [1, 3, 2, 2])], stats, opset=1), folder)


def multiline_name(folder: Path) -> Path:
    add = node("Add", ["x", "line one\nline two"], ["y"], "adder\r\n*/")
    return saved(model([add], [tensor("x", [2])], [tensor("y", [2])]), folder)


# case id -> (builder, extra arguments, phrases the one error line holds)
CASES = {
    "not-onnx": (lambda f: saved(b"GIF89a this is a picture, not a model\n" * 4, f), [], ["not a readable ONNX model"]),
    "truncated": (lambda f: saved(relu_model().SerializeToString()[:25], f), [], ["not a readable ONNX model"]),
    "empty-file": (lambda f: saved(b"", f), [], ["holds no graph"]),
    "no-file": (lambda f: f / "missing.onnx", [], ["no such file"]),
    "empty-graph": (simple(lambda: model([], [], [])), [], ["no outputs"]),
    "cycle": (cycle, [], ["cycle", "Relu node 'first'", "Add node 'second'"]),
    "two-producers": (two_producers, [], ["Neg node 'other'", "'y'", "Relu node 'one'"]),
    "dangling-input": (simple(lambda: model([node("Add", ["x", "ghost"], ["y"], "add")], [tensor("x", [2])],
                                            [tensor("y", [2])])), [], ["Add node 'add'", "'ghost'", "produced by no"]),
    "output-nobody-makes": (simple(lambda: model([node("Relu", ["x"], ["y"], "r")], [tensor("x", [2])],
                                                 [tensor("q", [2])])), [], ["graph output 'q'", "produced by no"]),
    "initializer-short-raw-data": (wrong_raw_size, [], ["initializer 'w'", "20 bytes", "needs 24"]),
    "initializer-value-count": (wrong_value_count, [], ["initializer 'w'", "unreadable"]),
    "initializer-huge-dims": (huge_declared_initializer, [], ["initializer 'w'", "--max-memory"]),
    "external-missing-file": (lambda f: with_external(f, "weights.bin", None), [],
                              ["tensor 'w'", "'weights.bin'", "does not exist"]),
    "external-parent-path": (lambda f: with_external(f, "../weights.bin", None), [],
                             ["tensor 'w'", "'../weights.bin'", "inside the model's folder"]),
    "external-absolute-path": (lambda f: with_external(f, "/etc/passwd", None), [],
                               ["tensor 'w'", "'/etc/passwd'", "inside the model's folder"]),
    "external-short-file": (lambda f: with_external(f, "weights.bin", bytes(20)), [],
                            ["tensor 'w'", "'weights.bin'", "20 bytes", "24 bytes"]),
    "external-wrong-length": (lambda f: with_external(f, "weights.bin", bytes(24), length=8), [],
                              ["tensor 'w'", "length 8"]),
    "dtype-float6": (simple(lambda: relu_model(elem=T.FLOAT6E2M3)), [], ["'x'", "float6_e2m3fn"]),
    "dtype-string": (simple(lambda: model([node("Identity", ["x"], ["y"], "id")], [tensor("x", [2], T.STRING)],
                                          [tensor("y", [2], T.STRING)])), [], ["'x'", "object"]),
    "dtype-unknown": (simple(lambda: relu_model(elem=99)), [], ["input 'x'", "element type 99"]),
    "broadcast-mismatch": (simple(lambda: model([node("Add", ["x", "z"], ["y"], "add")],
                                                [tensor("x", [3, 4]), tensor("z", [5])], [tensor("y", [3, 4])])),
                           [], ["Add node 'add'", "do not broadcast"]),
    "matmul-mismatch": (simple(lambda: model([node("MatMul", ["x", "z"], ["y"], "mm")],
                                             [tensor("x", [2, 3]), tensor("z", [4, 5])], [tensor("y", [2, 5])])),
                        [], ["MatMul node 'mm'", "(2, 3)", "(4, 5)"]),
    "conv-weight-rank": (simple(lambda: model([node("Conv", ["x", "w"], ["y"], "conv")], [tensor("x", [1, 2, 5, 5])],
                                              [tensor("y", [1, 4, 3, 3])],
                                              [const("w", np.ones((4, 2, 3)), np.float32)])),
                         [], ["Conv node 'conv'", "weight shape"]),
    "declared-output-shape": (simple(lambda: model([node("Relu", ["x"], ["y"], "r")], [tensor("x", [2, 3])],
                                                   [tensor("y", [3, 2])])), [], ["graph output 'y'", "[3,2]", "[2,3]"]),
    "declared-output-rank": (simple(lambda: model([node("Relu", ["x"], ["y"], "r")], [tensor("x", [2, 3])],
                                                  [tensor("y", [6])])), [], ["graph output 'y'", "[6]"]),
    "negative-dim": (simple(lambda: relu_model(shape=(-2, 3))), [], ["input 'x'", "negative dimension -2"]),
    "huge-input": (simple(lambda: relu_model(shape=(100000, 100000))), [], ["input 'x'", "--max-memory"]),
    "tensor-over-max-memory": (simple(lambda: relu_model(shape=(64, 64))), ["--max-memory", "8K"],
                               ["input 'x'", "16384 bytes", "8192 bytes"]),
    "model-over-max-memory": (simple(lambda: relu_model(shape=(64, 64))), ["--max-memory", "20K"],
                              ["the model's memory", "is 32768 bytes", "20480 bytes"]),
    "shape-product-overflow": (simple(lambda: relu_model(shape=(1 << 32, 1 << 32))), [],
                               ["input 'x'", "73786976294838206464 bytes"]),
    "reshape-overflow": (simple(lambda: model([node("Reshape", ["x", "s"], ["y"], "rs")], [tensor("x", [4])],
                                              [tensor("y", [4])], [const("s", [(1 << 62) + 1, 4])])),
                         [], ["Reshape node 'rs'", "cannot reshape"]),
    "constantofshape-huge": (folded_to("ConstantOfShape", [[1 << 40, 1 << 40]]), [],
                             ["ConstantOfShape node 'maker'", "output 'c'", "--max-memory"]),
    "range-huge": (folded_to("Range", [np.float32(0), np.float32(1e12), np.float32(1)]), [],
                   ["Range node 'maker'", "output 'c'", "--max-memory"]),
    "expand-huge": (simple(lambda: model([node("Expand", ["x", "s"], ["y"], "grow")], [tensor("x", [1])],
                                         [tensor("y", [1])], [const("s", [1 << 20, 1 << 20])])),
                    [], ["Expand node 'grow'", "output 'y'", "--max-memory"]),
    "opset-too-new": (simple(lambda: relu_model(opset=99)), [], ["opset 99", "not supported"]),
    "no-default-domain": (simple(lambda: helper.make_model(relu_model().graph, opset_imports=[
        helper.make_opsetid("com.example", 1)])), [], ["no version of the default ONNX domain"]),
    "unknown-domain": (with_node_domain, [], ["com.example.evil.Relu", "'relu'"]),
    "unknown-op": (simple(lambda: model([node("Frobnicate", ["x"], ["y"], "frob")], [tensor("x", [2])],
                                        [tensor("y", [2])])), [], ["unsupported operators", "Frobnicate ('frob')"]),
    "attribute-type": (wrong_attribute_type, [], ["Softmax node 'soft'", "attribute 'axis'", "FLOAT", "INT"]),
    "missing-attribute": (simple(lambda: model([node("Cast", ["x"], ["y"], "cast")], [tensor("x", [2])],
                                               [tensor("y", [2])])), [], ["Cast node 'cast'", "'to'"]),
    "too-many-inputs": (simple(lambda: model([node("Relu", ["x", "x"], ["y"], "r")], [tensor("x", [2])],
                                             [tensor("y", [2])])), [], ["Relu node 'r'", "2 inputs"]),
    "conv-zero-stride": (simple(lambda: model([node("Conv", ["x", "w"], ["y"], "conv", strides=[0, 0])],
                                              [tensor("x", [1, 1, 4, 4])], [tensor("y", [1, 1, 2, 2])],
                                              [const("w", np.ones((1, 1, 3, 3)), np.float32)])),
                         [], ["Conv node 'conv'", "positive"]),
    "sequence-input": (simple(lambda: model([node("Identity", ["x"], ["y"], "id")],
                                            [helper.make_tensor_sequence_value_info("x", T.FLOAT, [2])],
                                            [tensor("y", [2])])), [], ["input 'x'", "sequence"]),
    "text-not-utf8": (non_utf8_op_type, [], ["model.graph.node[0].op_type", "not UTF-8"]),
    "required-input-empty": (simple(lambda: model([node("Tanh", [""], ["y"], "tanh")], [], [tensor("y", [2])])), [],
                             ["Tanh node 'tanh'", "input 0", "required"]),
    "attribute-of-older-opset": (simple(lambda: model([node("ReduceMax", ["x"], ["y"], "max", axes=[0])],
                                                      [tensor("x", [2, 3])], [tensor("y", [1, 3])], opset=18)),
                                 [], ["ReduceMax node 'max'", "ReduceMax-18", "'axes'"]),
    "old-opset-invalid-node": (old_opset_invalid_node, [], ["BatchNormalization node 'bn'", "'consumed_inputs'"]),
    "input-types-differ": (simple(lambda: model([node("Add", ["x", "i"], ["y"], "add")], [tensor("x", [2])],
                                                [tensor("y", [2])], [const("i", [1, 2])])),
                           [], ["Add node 'add'", "'x' (tensor(float))", "'i' (tensor(int64))"]),
    "input-type-not-allowed": (simple(lambda: model([node("Pad", ["x", "p"], ["y"], "pad")], [tensor("x", [2])],
                                                    [tensor("y", [4])], [const("p", [1, 1], np.complex64)])),
                               [], ["Pad node 'pad'", "'p' is tensor(complex64)"]),
    "flag-not-0-or-1": (simple(lambda: model([node("ReduceMax", ["x"], ["y"], "max", keepdims=1 << 31)],
                                             [tensor("x", [2, 3])], [tensor("y", [3])])),
                        [], ["ReduceMax node 'max'", "'keepdims'", "2147483648"]),
    "split-uneven": (simple(lambda: model([node("Split", ["x"], ["a", "b"], "split")], [tensor("x", [5])],
                                          [tensor("a", [3]), tensor("b", [2])])), [], ["Split node 'split'", "evenly"]),
    "name-with-line-breaks": (multiline_name, [], ["Add node 'adder\\r\\n*/'", "'line one\\nline two'"]),
}
