"""Shared graph-building helpers for the zoo models."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..names import fresh_name

OPSET = 17
IR_VERSION = 8


class Builder:
    """Accumulates named nodes and seeded float32 initializers for one ONNX graph.

    The graph input is the tensor "input"; the output of the last node added becomes "output".
    """

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._names: set[str] = {"input", "output"}

    def _unique(self, name: str) -> str:
        return fresh_name(name, self._names)

    def const(self, name: str, value, dtype=np.float32) -> str:
        """Add an initializer from an array-like value; returns its (unique) name."""
        name = self._unique(name)
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def normal(self, name: str, shape, std: float) -> str:
        return self.const(name, self.rng.normal(0.0, std, shape))

    def node(self, op: str, inputs: list[str], name: str, **attrs) -> str:
        """Add a single-output node; the node and its output tensor share the unique name."""
        name = self._unique(name)
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def nodes_out(self, op: str, inputs: list[str], name: str, outputs: list[str | None], **attrs) -> list[str]:
        """Add a multi-output node; `outputs` are suffixes of the node's name, None for an omitted optional
        output (written as ""). Returns the output tensor names ("" where omitted)."""
        name = self._unique(name)
        outs = [self._unique(f"{name}/{o}") if o else "" for o in outputs]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs

    def conv(self, x: str, name: str, cin: int, cout: int, kernel, stride: int = 1,
             pads: list[int] | None = None, group: int = 1, bias: bool = True) -> str:
        """Conv with He-normal weights (and a bias unless bias=False); default pads keep the size
        ("same" for odd kernels)."""
        kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
        inputs = [x, self.normal(f"{name}/W", (cout, cin // group, kh, kw), np.sqrt(2.0 / (cin // group * kh * kw)))]
        if bias:
            inputs.append(self.normal(f"{name}/B", (cout,), 0.1))
        pads = [kh // 2, kw // 2] * 2 if pads is None else pads
        return self.node("Conv", inputs, name, kernel_shape=[kh, kw], strides=[stride, stride],
                         pads=pads, group=group)

    def batchnorm(self, x: str, name: str, channels: int) -> str:
        r = self.rng
        scale = self.const(f"{name}/scale", r.uniform(0.5, 1.5, channels))
        bias = self.const(f"{name}/bias", r.normal(0.0, 0.1, channels))
        mean = self.const(f"{name}/mean", r.normal(0.0, 0.1, channels))
        var = self.const(f"{name}/var", r.uniform(0.5, 1.5, channels))
        return self.node("BatchNormalization", [x, scale, bias, mean, var], name, epsilon=1e-5)

    def act(self, x: str, name: str, kind: str) -> str:
        """Activation: "relu" is Relu, "relu6" is Clip(x, 0, 6) with shared scalar initializers."""
        if kind == "relu":
            return self.node("Relu", [x], f"{name}/relu")
        if "const/zero" not in self._names:
            self.const("const/zero", 0.0)
            self.const("const/six", 6.0)
        return self.node("Clip", [x, "const/zero", "const/six"], f"{name}/relu6")

    def conv_bn(self, x: str, name: str, cin: int, cout: int, kernel, stride: int = 1,
                pads: list[int] | None = None, group: int = 1, act: str | None = "relu", bias: bool = True) -> str:
        """Conv + BatchNormalization (+ activation unless act is None)."""
        x = self.conv(x, f"{name}/conv", cin, cout, kernel, stride, pads, group, bias)
        x = self.batchnorm(x, f"{name}/bn", cout)
        return x if act is None else self.act(x, name, act)

    def separable(self, x: str, name: str, cin: int, cout: int, stride: int = 1, act: str = "relu") -> str:
        """Depthwise 3x3 conv-BN-act followed by pointwise 1x1 conv-BN-act."""
        x = self.conv_bn(x, f"{name}/dw", cin, cin, 3, stride, group=cin, act=act)
        return self.conv_bn(x, f"{name}/pw", cin, cout, 1, act=act)

    def dense(self, x: str, name: str, fin: int, fout: int, gain: float = 1.0, form: str = "matmul") -> str:
        """Fully connected layer, std sqrt(gain/fin).

        form: "matmul" (MatMul [fin,fout] + Add), "gemm" (Gemm, B [fin,fout]) or
        "gemm_transb" (Gemm transB=1, B [fout,fin], as PyTorch exports nn.Linear).
        """
        std = np.sqrt(gain / fin)
        shape = (fout, fin) if form == "gemm_transb" else (fin, fout)
        w = self.normal(f"{name}/W", shape, std)
        b = self.normal(f"{name}/B", (fout,), 0.1)
        if form == "matmul":
            return self.node("Add", [self.node("MatMul", [x, w], f"{name}/matmul"), b], f"{name}/add")
        return self.node("Gemm", [x, w, b], f"{name}/gemm", transB=int(form == "gemm_transb"))

    def rnn_weights(self, name: str, gates: int, directions: int, fin: int, hidden: int) -> tuple[str, str, str]:
        """W [dirs, gates*hidden, fin], R [dirs, gates*hidden, hidden] (std 1/sqrt(fan-in)) and
        B [dirs, 2*gates*hidden] (Wb then Rb, std 0.1) for an ONNX RNN/GRU/LSTM node."""
        w = self.normal(f"{name}/W", (directions, gates * hidden, fin), 1.0 / np.sqrt(fin))
        r = self.normal(f"{name}/R", (directions, gates * hidden, hidden), 1.0 / np.sqrt(hidden))
        b = self.normal(f"{name}/B", (directions, 2 * gates * hidden), 0.1)
        return w, r, b

    def model(self, name: str, input_shape: list[int], output_shape: list[int]) -> onnx.ModelProto:
        self.nodes[-1].output[0] = "output"
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, input_shape)],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, output_shape)],
            self.initializers)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                 ir_version=IR_VERSION, producer_name="cglow.zoo")
