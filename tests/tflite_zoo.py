"""The zoo's MLPerf Tiny networks (cglow/zoo: kws, vww, resnet8, autoencoder) written as .tflite files, float32
and int8, the way TensorFlow's converter writes such networks: NHWC, BatchNormalization folded into the weights,
Relu/Clip fused as the op's activation, int8 with per-channel symmetric weights, asymmetric activations
calibrated on random inputs (LiteRT's float run of the same file), int32 biases. The same network as the
ONNX model, so that the tests can hold cglow's arena for the .tflite file to the ONNX model's.

A PyTorch-style padding that TFLite's SAME does not express (stride 2, one pixel each side) becomes an explicit
PAD before a VALID convolution, as converters write it."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

from cglow import zoo
from tests.tflite_file import TFLiteWriter

TO_NHWC = (0, 2, 3, 1)


@dataclass
class Layer:
    op: str                  # a TFLite builtin
    inputs: list[str]        # activation names, then nothing: the weights are in `consts`
    output: str
    options: dict = field(default_factory=dict)
    consts: list[np.ndarray] = field(default_factory=list)  # filter/weights then bias (float)


class _Net:
    """The network as TFLite layers over NHWC activations (float), read off the ONNX graph."""

    def __init__(self, model: onnx.ModelProto):
        g = model.graph
        self.consts = {t.name: numpy_helper.to_array(t).astype(np.float32) for t in g.initializer}
        self.consts.update({n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in g.node
                            if n.op_type == "Constant"})
        self.shapes = {i.name: tuple(d.dim_value for d in i.type.tensor_type.shape.dim) for i in g.input}
        self.input = g.input[0].name
        if len(self.shapes[self.input]) == 4:
            self.shapes[self.input] = tuple(self.shapes[self.input][i] for i in TO_NHWC)
        self.output = g.output[0].name
        self.layers: list[Layer] = []
        self.alias: dict[str, str] = {}     # ONNX value -> the activation that holds it
        self.nodes = [n for n in g.node if n.op_type != "Constant"]
        for node in self.nodes:
            self._node(node)

    def _name(self, value: str) -> str:
        return self.alias.get(value, value)

    def _attr(self, node, name, default=None):
        for a in node.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    def _fold_bn(self, node, w: np.ndarray, b: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
        gamma, beta, mean, var = (self.consts[n] for n in node.input[1:5])
        s = gamma / np.sqrt(var + self._attr(node, "epsilon", 1e-5))
        shape = [1] * w.ndim
        shape[axis] = -1
        return (w * s.reshape(shape)).astype(np.float32), ((b - mean) * s + beta).astype(np.float32)

    def _node(self, node) -> None:
        op, x = node.op_type, self._name(node.input[0]) if node.input else ""
        last = self.layers[-1] if self.layers else None
        if op == "BatchNormalization":  # folded into the conv or dense layer before it
            axis = 3 if last.op == "DEPTHWISE_CONV_2D" else 0
            last.consts[0], last.consts[1] = self._fold_bn(node, last.consts[0], last.consts[1], axis)
            self.alias[node.output[0]] = last.output
        elif op in ("Relu", "Clip"):
            act = "RELU" if op == "Relu" else "RELU6"
            last.options["fused_activation_function"] = act
            self.alias[node.output[0]] = last.output
        elif op == "Conv":
            self._conv(node, x)
        elif op in ("Gemm", "MatMul"):
            w = self.consts[node.input[1]]
            w = w if op == "Gemm" and self._attr(node, "transB", 0) else w.T
            b = self.consts[node.input[2]] if len(node.input) > 2 else np.zeros(w.shape[0], np.float32)
            self._add(Layer("FULLY_CONNECTED", [x], node.output[0], {}, [w.copy(), b.copy()]),
                      (self.shapes[x][0], w.shape[0]))
        elif op == "Add" and node.input[1] in self.consts:  # a dense layer's bias
            last.consts[1] = last.consts[1] + self.consts[node.input[1]]
            self.alias[node.output[0]] = last.output
        elif op == "Add":
            self._add(Layer("ADD", [x, self._name(node.input[1])], node.output[0]), self.shapes[x])
        elif op in ("AveragePool", "GlobalAveragePool"):
            n, h, w, c = self.shapes[x]
            k = self._attr(node, "kernel_shape", [h, w])
            s = self._attr(node, "strides", k)
            self._add(Layer("AVERAGE_POOL_2D", [x], node.output[0],
                            dict(padding="VALID", filter_height=k[0], filter_width=k[1], stride_h=s[0],
                                 stride_w=s[1])), (n, (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1, c))
        elif op == "Flatten":
            shape = (self.shapes[x][0], int(np.prod(self.shapes[x][1:])))
            self._add(Layer("RESHAPE", [x], node.output[0], dict(new_shape=list(shape))), shape)
        elif op == "Softmax":
            self._add(Layer("SOFTMAX", [x], node.output[0], dict(beta=1.0)), self.shapes[x])
        else:
            raise NotImplementedError(op)

    def _add(self, layer: Layer, shape) -> None:
        self.layers.append(layer)
        self.shapes[layer.output] = tuple(int(d) for d in shape)

    def _conv(self, node, x: str) -> None:
        w = self.consts[node.input[1]]
        b = self.consts[node.input[2]] if len(node.input) > 2 else np.zeros(w.shape[0], np.float32)
        n, h, wd, c = self.shapes[x]
        kh, kw = w.shape[2:]
        s = self._attr(node, "strides", [1, 1])
        pads = self._attr(node, "pads", [0, 0, 0, 0])
        group = self._attr(node, "group", 1)
        same = [max((-(-d // st) - 1) * st + k - d, 0) for d, st, k in zip((h, wd), s, (kh, kw))]
        if list(pads) == [t // 2 for t in same] + [t - t // 2 for t in same]:
            padding = "SAME"
            oh, ow = -(-h // s[0]), -(-wd // s[1])
        else:
            if any(pads):
                padded = f"{node.output[0]}/pad"
                self._add(Layer("PAD", [x], padded, {}, [np.array([[0, 0], [pads[0], pads[2]], [pads[1], pads[3]],
                                                                   [0, 0]], np.int32)]),
                          (n, h + pads[0] + pads[2], wd + pads[1] + pads[3], c))
                x, h, wd = padded, h + pads[0] + pads[2], wd + pads[1] + pads[3]
            padding = "VALID"
            oh, ow = (h - kh) // s[0] + 1, (wd - kw) // s[1] + 1
        options = dict(padding=padding, stride_h=s[0], stride_w=s[1])
        if group == 1:
            layer = Layer("CONV_2D", [x], node.output[0], options, [w.transpose(0, 2, 3, 1).copy(), b.copy()])
        else:  # depthwise, multiplier 1: the filter as [1, KH, KW, C] (its channels on the last axis)
            layer = Layer("DEPTHWISE_CONV_2D", [x], node.output[0], {**options, "depth_multiplier": 1},
                          [w.transpose(1, 2, 3, 0).copy(), b.copy()])
        self._add(layer, (n, oh, ow, w.shape[0]))


def _qparams(lo: float, hi: float) -> tuple[float, int]:
    """An asymmetric int8 range covering [lo, hi] and 0, as TFLite's converter chooses it."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = max((hi - lo) / 255.0, 1e-8)
    return scale, int(np.clip(round(-128 - lo / scale), -128, 127))


def _write(net: _Net, ranges: dict[str, tuple[float, float]] | None) -> bytes:
    """The layers as a .tflite file: float32, or int8 with the activations' ranges (a SOFTMAX's output takes
    the parameters TFLite fixes for it, 1/256 and -128; the layers that only move values their input's)."""
    w = TFLiteWriter()
    tensors: dict[str, int] = {}
    quant: dict[str, tuple[float, int]] = {}

    def act(name: str) -> int:
        if name not in tensors:
            if ranges is None:
                tensors[name] = w.tensor(name, net.shapes[name], np.float32)
            else:
                quant[name] = (1 / 256, -128) if name in softmaxes else _qparams(*ranges[name])
                tensors[name] = w.tensor(name, net.shapes[name], np.int8, scale=quant[name][0],
                                         zero_point=quant[name][1])
        return tensors[name]

    layers = net.layers
    softmaxes = {la.output for la in layers if la.op == "SOFTMAX"}
    for layer in layers:
        if ranges is not None and layer.op in ("AVERAGE_POOL_2D", "RESHAPE", "PAD"):
            ranges[layer.output] = ranges[layer.inputs[0]]
        inputs = [act(x) for x in layer.inputs]
        out = act(layer.output)
        for i, data in enumerate(layer.consts):
            name = f"{layer.output}/c{i}"
            if layer.op == "PAD":
                inputs.append(w.tensor(name, data.shape, np.int32, data))
            elif ranges is None:
                inputs.append(w.tensor(name, data.shape, np.float32, data))
            elif i == 0:  # per-channel symmetric weights along the output channels
                axis = 3 if layer.op == "DEPTHWISE_CONV_2D" else 0
                amax = np.abs(np.moveaxis(data, axis, 0).reshape(data.shape[axis], -1)).max(axis=1)
                scales = np.maximum(amax, 1e-8) / 127
                shape = [1] * data.ndim
                shape[axis] = -1
                q = np.clip(np.round(data / scales.reshape(shape)), -127, 127).astype(np.int8)
                inputs.append(w.tensor(name, data.shape, np.int8, q, scale=list(scales),
                                       zero_point=[0] * scales.size, axis=axis))
                w_scales = scales
            else:
                acc = quant[layer.inputs[0]][0] * w_scales
                inputs.append(w.tensor(name, data.shape, np.int32, np.round(data / acc).astype(np.int32),
                                       scale=list(acc), zero_point=[0] * acc.size))
        w.op(layer.op, inputs, [out], layer.options)
    return w.build([tensors[net.input]], [tensors[layers[-1].output]])


def _ranges(net: _Net, model: bytes, samples: int = 4) -> dict[str, tuple[float, float]]:
    """Every activation's range over seeded random inputs, from LiteRT's float run of the file."""
    from ai_edge_litert import interpreter as litert
    runner = litert.Interpreter(model_content=model, experimental_preserve_all_tensors=True,
                                experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    runner.allocate_tensors()
    rng = np.random.default_rng(0)
    found: dict[str, list[float]] = {}
    for _ in range(samples):
        runner.set_tensor(runner.get_input_details()[0]["index"],
                          rng.standard_normal(net.shapes[net.input]).astype(np.float32))
        runner.invoke()
        for d in runner.get_tensor_details():
            if d["name"] in net.shapes:
                v = runner.get_tensor(d["index"])
                lo, hi = found.get(d["name"], (np.inf, -np.inf))
                found[d["name"]] = [min(lo, float(v.min())), max(hi, float(v.max()))]
    return {k: tuple(v) for k, v in found.items()}


def tflite_model(name: str, int8: bool) -> bytes:
    """The zoo network `name` as a .tflite file: float32, or int8."""
    net = _Net(zoo.build(name))
    model = _write(net, None)
    return _write(net, _ranges(net, model)) if int8 else model

