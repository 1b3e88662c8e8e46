"""Random quantized layers in QDQ form, as quantizers write them: a MatMul, a Gemm or a Conv between the
DequantizeLinear of its 8-bit input and the QuantizeLinear of its output (a Relu or a Clip between them now and
then), its weights a DequantizeLinear of an int8, uint8, int4 or uint4 constant (per output channel or per tensor;
zero points 0, 8, 128 or random), its bias float or int32 through a DequantizeLinear (tf2onnx's; a MatMul's as an
Add after it). One or two layers in a row, from a float input quantized or an 8-bit input, to an output dequantized
or left 8-bit. cglow folds them into its integer kernels (IntGemm, IntConv); k and n odd, multiples of 8 and past
16, 32 and 64 columns, weights of 256 values and more (instr/nibbles.py MIN_WEIGHTS), so that 4-bit matrix
products stay two per byte and each target's kernel unpacks them (options: a target, --nibble-weights and float I/O
per graph). An output may differ from onnxruntime's by a quantization step per layer (output_steps). Graph `index`
of `seed` depends on nothing else."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto as T, helper, numpy_helper

from cglow.instr.nibbles import MIN_WEIGHTS
from cglow.options import Options

from ..util import checked_model
from .builder import Choices

OPSET = 21  # int4 and uint4
SIZES = (1, 2, 3, 5, 7, 8, 16, 17, 24, 31, 32, 33, 40, 48, 64, 65, 72, 96, 128, 255, 256, 384)  # of k and n
MAX_WEIGHTS = 16384
MAX_ELEMENTS = 4096  # of an activation
LAYERS = ("Conv", "MatMul", "Gemm")
WEIGHTS = {"int8": (T.INT8, -128, 127), "uint8": (T.UINT8, 0, 255), "int4": (T.INT4, -8, 7), "uint4": (T.UINT4, 0, 15)}
EIGHT_BITS = {T.INT8: np.int8, T.UINT8: np.uint8}
# each target's kernels lay integer weights out their own way (tiles.py): graph `index` takes TARGETS[index % 7]
TARGETS = ("generic", "x86-avx2", "x86-avx512", "x86-avx512-vnni", "aarch64", "cortex-m4", "cortex-m3")


@dataclass(frozen=True)
class QValue:
    """A quantized value: its name, shape, type and parameters, and the typical magnitude of its real values."""
    name: str
    shape: tuple[int, ...]
    elem: int
    scale: float
    zero: int
    spread: float

    @property
    def rank(self) -> int:
        return len(self.shape)


class Layers(Choices):
    """A quantized graph under construction: nodes, initializers, random choices."""

    def __init__(self, rng: np.random.Generator):
        super().__init__(rng)
        self.nodes, self.inits, self.count = [], [], 0

    def scales(self, low: float, high: float, count: int | None = None) -> np.ndarray:
        """Log-uniform float32 scales in [low, high]: one (a scalar), or `count`."""
        return np.exp(self.rng.uniform(np.log(low), np.log(high), count)).astype(np.float32)

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def const(self, array: np.ndarray) -> str:
        name = self.name("const")
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def ints(self, elem: int, values: np.ndarray) -> str:
        """A constant of an integer type, 4-bit ones included."""
        name = self.name("q")
        self.inits.append(helper.make_tensor(name, elem, values.shape, values.reshape(-1).tolist()))
        return name

    def node(self, op: str, inputs: list[str], **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=self.name(op), **attrs))
        return out

    def dq(self, x: QValue) -> str:
        return self.node("DequantizeLinear", [x.name, self.const(np.float32(x.scale)),
                                              self.ints(x.elem, np.array(x.zero))])

    def params(self, spread: float) -> tuple[int, float, int]:
        """A random 8-bit type, a scale that saturates the largest of values of this typical magnitude now and
        then (a positive one where the weights are all their zero point), and a zero point."""
        elem = self.choice([T.INT8, T.UINT8])
        scale = float(np.float32(max(spread, 1e-3) * self.rng.uniform(2.5, 6) / 127))
        zero = self.int(-20, 20) + (128 if elem == T.UINT8 else 0) if self.chance(0.8) else \
            self.int(*((-128, 127) if elem == T.INT8 else (0, 255)))
        return elem, scale, zero

    def q(self, real: str, shape: tuple[int, ...], spread: float) -> QValue:
        elem, scale, zero = self.params(spread)
        name = self.node("QuantizeLinear", [real, self.const(np.float32(scale)), self.ints(elem, np.array(zero))])
        return QValue(name, shape, elem, scale, zero, spread)


def weights(g: Layers, shape: tuple[int, ...], axis: int) -> tuple[str, np.ndarray, float]:
    """A DequantizeLinear of random integer weights of `shape` (output channels along `axis`): its output, its
    scale(s) (a float32 scalar, or one per channel) and the weights' root mean square real value."""
    kind = g.choice(["int8", "int8", "int4", "int4", "int4", "uint4", "uint4", "uint8"])
    elem, low, high = WEIGHTS[kind]
    channels = shape[axis]
    per_channel = g.chance(0.75)
    count = channels if per_channel else None
    scale = g.scales(0.002, 0.05, count)
    values = g.rng.integers(low, high + 1, shape)
    middle = {"uint4": 8, "uint8": 128}.get(kind, 0)
    if kind == "uint4" and g.chance(0.5) or g.chance(0.15):  # a zero point away from the middle
        zero = g.rng.integers(low, high + 1, count) if per_channel else np.array(g.int(low, high))
    else:
        zero = np.full(channels, middle) if per_channel else np.array(middle)
    inputs = [g.ints(elem, values), g.const(scale)]
    if middle or zero.any() or g.chance(0.5):
        inputs.append(g.ints(elem, zero))
    where = [1] * len(shape) if per_channel else []
    if per_channel:
        where[axis] = -1
    real = (values - zero.reshape(where)) * scale.reshape(where)
    out = g.node("DequantizeLinear", inputs, **({"axis": axis} if per_channel else {}))
    return out, scale, float(np.sqrt(np.mean(np.square(real))))


def bias(g: Layers, x: QValue, scale: np.ndarray, n: int, spread: float, shape=None) -> str:
    """A random bias of n channels: float (of `shape`, default (n,)), or int32 dequantized at x's scale times the
    weights' (as tf2onnx writes it)."""
    real = g.rng.standard_normal(n) * spread * 0.5
    if g.chance(0.6):
        return g.const(real.astype(np.float32).reshape(shape or (n,)))
    bias_scale = (np.float32(x.scale) * scale).astype(np.float32)
    q = np.clip(np.rint(real / bias_scale), -2 ** 31, 2 ** 31 - 1).astype(np.int32)
    return g.node("DequantizeLinear", [g.const(q), g.const(bias_scale)], **({"axis": 0} if bias_scale.ndim else {}))


def activation(g: Layers, real: str) -> str:
    """A Relu, a Clip or nothing after the layer (folded into the integer kernel's clamp)."""
    if g.chance(0.3):
        return g.node("Relu", [real])
    if g.chance(0.1):
        return g.node("Clip", [real, g.const(np.float32(0)), g.const(np.float32(g.rng.uniform(0.5, 6)))])
    return real


def columns(g: Layers, k: int) -> int:
    """n: one of SIZES that keeps k x n weights at most MAX_WEIGHTS, more often than not MIN_WEIGHTS at least; now
    and then 1 (a classifier's or a regression's head)."""
    if g.chance(0.1):
        return 1
    fit = [n for n in SIZES if k * n <= MAX_WEIGHTS] or [1]
    return g.choice([n for n in fit if k * n >= MIN_WEIGHTS] or fit if g.chance(0.6) else fit)


def matmul(g: Layers, x: QValue) -> QValue:
    """x [..., k] by weights [k, n] (now and then [b, k, n] for x [b, m, k]), its bias as an Add after it."""
    k = x.shape[-1]
    n = columns(g, k)
    batch = x.shape[:1] if x.rank == 3 and g.chance(0.15) else ()
    w, scale, rms = weights(g, (*batch, k, n), axis=len(batch) + 1)
    spread = x.spread * rms * np.sqrt(k)
    y = g.node("MatMul", [g.dq(x), w])
    if g.chance(0.5):
        y = g.node("Add", [y, bias(g, x, scale, n, spread)])
    shape = np.broadcast_shapes(x.shape[:-1], batch + (1,))
    return g.q(activation(g, y), (*shape, n), spread)


def gemm(g: Layers, x: QValue) -> QValue:
    """A Gemm of x (flattened to 2-D: its integers, as a quantized network's flatten before a dense layer) by
    weights [k, n] or [n, k] (transB), with a bias C most of the time; transA, alpha and beta now and then."""
    xf = g.dq(x)
    shape = x.shape if x.rank == 2 else (x.shape[0], int(np.prod(x.shape[1:])))
    if x.rank != 2:
        xf = g.node("Flatten", [xf])
    trans_a, trans_b = int(g.chance(0.15)), g.int(0, 1)
    m, k = shape[::-1] if trans_a else shape
    n = columns(g, k)
    w, scale, rms = weights(g, (n, k) if trans_b else (k, n), axis=0 if trans_b else 1)
    alpha = float(np.float32(g.rng.uniform(0.5, 1.5))) if g.chance(0.15) else 1.0
    beta = float(np.float32(g.rng.uniform(0.5, 1.5))) if g.chance(0.15) else 1.0
    spread = x.spread * rms * np.sqrt(k) * alpha
    inputs = [xf, w] + ([bias(g, x, scale, n, spread, g.choice([(n,), (1, n)]))] if g.chance(0.8) else [])
    y = g.node("Gemm", inputs, transA=trans_a, transB=trans_b, alpha=alpha, beta=beta)
    return g.q(activation(g, y), (m, n), spread)


def conv(g: Layers, x: QValue) -> QValue:
    """A 1-D or 2-D Conv of random kernel, strides, dilations and pads (explicit or SAME), of one group, or
    depthwise (a channel multiplier of 1 or 2), or of other groups."""
    c, spatial = x.shape[1], x.shape[2:]
    form = g.choice(["dense", "dense", "depthwise", "depthwise", "grouped"])
    group = {"dense": 1, "depthwise": c}.get(form) or g.choice([d for d in range(1, c + 1) if c % d == 0])
    m = c * g.choice([1, 1, 2]) if form == "depthwise" else \
        group * g.int(1, 3) if form == "grouped" else g.choice([n for n in SIZES if n <= 64])
    kernel = [min(g.choice([1, 2, 3, 3, 3, 5]), d) for d in spatial]
    attrs = dict(kernel_shape=kernel, strides=[g.int(1, 2) for _ in kernel], group=group)
    if g.chance(0.15):
        attrs["auto_pad"] = g.choice(["SAME_UPPER", "SAME_LOWER"])
    else:
        attrs["pads"] = [g.int(0, k - 1) for k in kernel * 2]
        if g.chance(0.2):  # a dilated window that fits the input (onnxruntime: not with SAME padding)
            attrs["dilations"] = [2 if 2 * k - 1 <= d else 1 for k, d in zip(kernel, spatial)]
    w, scale, rms = weights(g, (m, c // group, *kernel), axis=0)
    spread = x.spread * rms * np.sqrt(c // group * np.prod(kernel))
    inputs = [g.dq(x), w] + ([bias(g, x, scale, m, spread)] if g.chance(0.7) else [])
    y = g.node("Conv", inputs, **attrs)
    pads, dilations = attrs.get("pads"), attrs.get("dilations", [1] * len(kernel))
    out = [-(-d // s) if pads is None else (d + pads[i] + pads[i + len(kernel)] - dl * (k - 1) - 1) // s + 1
           for i, (d, k, s, dl) in enumerate(zip(spatial, kernel, attrs["strides"], dilations))]
    return g.q(activation(g, y), (x.shape[0], m, *out), spread)


def first_shape(g: Layers, kind) -> tuple[int, ...]:
    """The graph input's shape for a first layer of `kind`."""
    if kind is conv:
        c = g.choice([1, 2, 3, 4, 8, 16, 17, 32])
        spatial = (g.int(1, 12),) if g.chance(0.25) else (g.int(1, 12), g.int(1, 12))
        return (g.choice([1, 1, 2]), c, *spatial)
    k = g.choice(SIZES)
    m = g.choice([m for m in (1, 2, 3, 4, 5, 6, 16, 48) if m * k <= MAX_ELEMENTS])
    return (g.int(2, 3), m, k) if kind is matmul and g.chance(0.25) else (m, k)


def next_kind(g: Layers, x: QValue):
    """A layer that reads x: a matrix product of a 2-D value, mostly a Conv of a 3-D or 4-D one."""
    if x.rank == 2:
        return g.choice([matmul, gemm])
    flat = int(np.prod(x.shape[1:]))
    return g.choice([conv, conv, conv, matmul] + ([gemm] if flat <= 1024 else []))


def random_quantized_graph(seed: int, index: int, attempt: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One or two quantized layers in a row, and values for the graph input: normal float32 (quantized by the
    graph), or 8-bit integers across their whole range. The outputs: the last layer's, dequantized or its 8-bit
    values, and now and then the first's of two, dequantized. A Gemm comes last: onnxruntime rounds a QDQ Gemm's
    output a step away from cglow's now and then (in a fifth of them, most with 4-bit weights, alpha or beta), which a
    second layer may magnify beyond a step where its k is small; its Conv and MatMul agree with cglow's (a 4-bit MatMul
    a step off in 1 of 100)."""
    g = Layers(np.random.default_rng([seed, index, attempt]))
    kind = g.choice([conv, conv, matmul, gemm])
    shape = first_shape(g, kind)
    spread = float(g.rng.uniform(0.5, 3))
    if g.chance(0.8):
        x, elem = g.q("x", shape, spread), T.FLOAT
        feeds = {"x": (g.rng.standard_normal(shape) * spread).astype(np.float32)}
    else:
        x = QValue("x", shape, *g.params(spread), spread)
        elem = x.elem
        info = np.iinfo(EIGHT_BITS[x.elem])
        feeds = {"x": g.rng.integers(info.min, int(info.max) + 1, shape).astype(EIGHT_BITS[x.elem])}
    layers = [kind(g, x)]
    if kind is not gemm and g.chance(0.5) and np.prod(layers[0].shape) <= MAX_ELEMENTS:
        layers.append(next_kind(g, layers[0])(g, layers[0]))
    last = layers[-1]
    outputs = [(last.name, last.elem) if g.chance(0.2) else (g.dq(last), T.FLOAT)]
    if len(layers) == 2 and g.chance(0.25):
        outputs.append((g.dq(layers[0]), T.FLOAT))
    graph = helper.make_graph(g.nodes, "quantized", [helper.make_tensor_value_info("x", elem, shape)],
                              [helper.make_tensor_value_info(name, type_, None) for name, type_ in outputs], g.inits)
    return checked_model(graph, OPSET), feeds


def output_steps(model: onnx.ModelProto) -> list[float]:
    """How far each graph output may be from onnxruntime's: a quantization step (a dequantized output's scale, 1 for
    8-bit integers) per layer that computes it, since a layer's input a step off moves its output by about a step."""
    producers = {out: n for n in model.graph.node for out in n.output}
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}

    def layers(name: str) -> int:
        node = producers.get(name)
        return 0 if node is None else (node.op_type in LAYERS) + max(layers(i) for i in node.input)

    return [(float(consts[producers[o.name].input[1]]) if o.type.tensor_type.elem_type == T.FLOAT else 1.0) *
            layers(o.name) for o in model.graph.output]


def options(model: onnx.ModelProto, index: int) -> Options:
    """Graph `index`'s options: TARGETS in turn, rounds of them with and without --nibble-weights, and in every other
    pair of rounds, where the model's inputs and outputs are float, float I/O (the input quantized and the outputs
    dequantized in net_run, not by the caller)."""
    rounds = index // len(TARGETS)
    floats = all(v.type.tensor_type.elem_type == T.FLOAT for v in [*model.graph.input, *model.graph.output])
    return Options(target=TARGETS[index % len(TARGETS)], nibble_weights=rounds % 2 == 1,
                   float_io=floats and rounds // 2 % 2 == 1)
