"""What the translation of a TFLite model builds: graph nodes (ONNX ops, and cglow's integer ops for the
quantized ones), constants and types, under fresh value names. Each operator's translation registers here
(`translator`); the ops live in activations.py, conv.py, elementwise.py, lstm.py, matmul.py, resize.py,
slicing.py, softmax.py, svdf.py, tensor.py and transpose_conv.py.

TFLite lays images out NHWC; cglow's Conv and pooling ops take NCHW. Their translations read the input
through a Transpose and give the result back through one: both are views when lowered (a convolution writes
its output channels innermost), and cancel_transposes removes the pairs between two of them, so a TFLite
model runs with the RAM and speed of the same network from ONNX."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np
import onnx
import tflite

from ...errors import CglowError
from ...names import fresh_name
from ...options import MAX_MEMORY
from ..evaluate_node import evaluate_node
from ..ir import Node, State, TensorType
from ..limits import checked_type
from ..registry import Args, shape_rule
from .arith import quantize
from .reader import Model, Operator, Quant, Tensor

OPSET = 17  # the ONNX semantics of the nodes built (Clip bounds, Pad, Split and Squeeze operands as inputs)
TO_NCHW, TO_NHWC = (0, 3, 1, 2), (0, 2, 3, 1)
Translator = Callable[["Build", Operator], None]
TRANSLATORS: dict[str, Translator] = {}
_ACTIVATIONS = {v: k for k, v in vars(tflite.ActivationFunctionType).items() if not k.startswith("_")}
_PADDINGS = {v: k for k, v in vars(tflite.Padding).items() if not k.startswith("_")}
# the real range of each clamping activation (fused, or the RELU-family operators): low, high (None: open)
RANGES = {"NONE": (None, None), "RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}


def translator(*ops: str):
    def register(fn: Translator) -> Translator:
        for op in ops:
            TRANSLATORS[op] = fn
        return fn
    return register


class Build:
    def __init__(self, model: Model, max_memory: int = MAX_MEMORY):
        self.model = model
        self.max_memory = max_memory
        self.nodes: list[Node] = []
        self.types: dict[str, TensorType] = {}
        self.consts: dict[str, np.ndarray] = {}
        self.taken: set[str] = set()
        self.names = [self._fresh(t.name) for t in model.tensors]
        self.op: Operator | None = None  # the operator being translated, for node names and messages
        # a variable tensor's index -> [the graph value holding it at the run's start, its current value]
        self.variables: dict[int, list[str]] = {}
        # a tensor's index -> its shape as computed, where the file's differs in a dimension that the tensor's
        # shape signature leaves free (-1): converters write a placeholder there (1, whatever the size)
        self.shapes: dict[int, tuple[int, ...]] = {}

    def _fresh(self, base: str) -> str:
        return fresh_name(base, self.taken)

    # --- the operator's tensors -------------------------------------------------------------------------
    def tensor(self, i: int) -> Tensor:
        """The operator's input i (or -1 - i: its output i)."""
        refs, k = (self.op.inputs, i) if i >= 0 else (self.op.outputs, -1 - i)
        if k >= len(refs) or not 0 <= refs[k] < len(self.model.tensors):
            raise CglowError(f"{self.op.describe()}: its {('input', 'output')[i < 0]} {k} is missing")
        t = self.model.tensors[refs[k]]
        return replace(t, shape=self.shapes[t.index]) if t.index in self.shapes else t

    def has(self, i: int) -> bool:
        return len(self.op.inputs) > i and self.op.inputs[i] >= 0

    def value(self, i: int) -> str:
        """The graph value of the operator's input i, a constant's read in; a variable tensor's as the operators
        before have left it (at first, what the last run left)."""
        t = self.tensor(i)
        if t.variable:
            return self._variable(t)[1]
        name = self.names[t.index]
        if name not in self.types:
            if t.data is None:
                raise CglowError(f"{self.op.describe()}: input {i} ('{t.name}') is read before any operator "
                                 f"writes it")
            self.consts[name] = t.data
            self.types[name] = TensorType(t.dtype, t.shape)
        return name

    def _variable(self, t: Tensor) -> list[str]:
        if t.index not in self.variables:
            if t.data is not None:
                raise CglowError(f"{self.op.describe()}: the variable tensor '{t.name}' has initial values; cglow "
                                 f"starts every variable as LiteRT does (at zero, an int8 one at its zero point)")
            self.types[self.names[t.index]] = TensorType(t.dtype, t.shape)
            self.variables[t.index] = [self.names[t.index]] * 2
        return self.variables[t.index]

    def state(self, i: int) -> str:
        """The value of the operator's variable input i, as value() gives it; refused if it is no variable."""
        t = self.tensor(i)
        if not t.variable:
            raise CglowError(f"{self.op.describe()}: its state input {i} ('{t.name}') is not a variable tensor")
        return self.value(i)

    def assign(self, i: int, value: str) -> None:
        """The operator leaves `value` in its variable input i (state() checked it is one): later operators, and
        the next run, read it."""
        t = self.tensor(i)
        if self.types[value] != TensorType(t.dtype, t.shape):
            raise CglowError(f"{self.op.describe()}: the variable tensor '{t.name}' is {TensorType(t.dtype, t.shape)}, "
                             f"the operator computes {self.types[value]}")
        self._variable(t)[1] = value

    def states(self) -> tuple[State, ...]:
        """The graph's states: each variable tensor that an operator assigns, with its value at the run's end and
        before the first run (LiteRT's ResetVariableTensor: an int8 one's zero point, else zero)."""
        return tuple(State(first, last, self._initial(index)) for index, (first, last) in self.variables.items()
                     if last != first)

    def _initial(self, index: int) -> int:
        t = self.model.tensors[index]
        return int(t.quant.zero[0]) if t.dtype == np.int8 and t.quant is not None else 0

    def out(self, i: int = 0) -> str:
        return self.names[self.op.outputs[i]]

    def weights(self, i: int) -> np.ndarray:
        return self.constant(i, ("filter", "weights")[i > 1])

    def known(self, i: int) -> np.ndarray | None:
        """The values of input i when they are known at compile time: the file's, or those an earlier operator's
        translation computed (a float16 constant widened by DEQUANTIZE, a shape the file computes)."""
        t = self.tensor(i)
        return t.data if t.data is not None else self.consts.get(self.names[t.index])

    def constant(self, i: int, what: str) -> np.ndarray:
        """The values of input i, which cglow needs at compile time (`what` names it in the error)."""
        data = self.known(i)
        if data is None:
            t = self.tensor(i)
            raise CglowError(f"{self.op.describe()}: cglow takes its {what} input '{t.name}' as a constant, and "
                             f"the file computes it")
        return data

    def quant(self, i: int) -> Quant:
        t = self.tensor(i)
        if t.quant is None:
            raise CglowError(f"{self.op.describe()}: the {t.dtype.name} tensor '{t.name}' has no scale and zero "
                             f"point")
        return t.quant

    def quantized(self) -> bool:
        """Whether the operator computes on 8-bit integers (its output is int8 or uint8)."""
        return self.tensor(-1).dtype.itemsize == 1 and self.tensor(-1).dtype.kind in "iu"

    def option(self, name: str):
        return getattr(self.op.options, name)() if self.op.options is not None else None

    # --- nodes ------------------------------------------------------------------------------------------
    def const(self, base: str, data: np.ndarray) -> str:
        name = self._fresh(f"{self.op.op.lower()}{self.op.index}/{base}")
        self.consts[name] = np.asarray(data)
        self.types[name] = TensorType(self.consts[name].dtype, self.consts[name].shape)
        return name

    def shape_const(self, *dims: int) -> str:
        """A constant int64 vector: a Reshape's shape, a Slice's bounds, a reduction's axes."""
        return self.const("shape", np.array(dims, np.int64))

    def add(self, op: str, inputs, attrs: dict | None = None, out: str | None = None,
            out_type: TensorType | None = None) -> str:
        """A node of one output (`out`, or a fresh name) whose type is `out_type` or its shape rule's."""
        return self.add_many(op, inputs, attrs, 1, out_type and [out_type], out and [out])[0]

    def add_many(self, op: str, inputs, attrs: dict | None, count: int, out_types=None,
                 outs: list[str] | None = None) -> list[str]:
        """A node of `count` outputs, named `outs` or fresh names, typed by `out_types` or its shape rule
        (SPLIT and UNPACK make several values in one node). An ONNX op whose inputs are all constants is computed
        now instead, its outputs constants: the SHAPE, STRIDED_SLICE, PACK ... chains that compute a RESHAPE's
        shape."""
        node_name = self._fresh(f"{self.op.op.lower()}{self.op.index}/{op}")
        names = outs or [self._fresh(node_name) for _ in range(count)]
        node = Node(op, node_name, tuple(inputs), tuple(names), dict(attrs or {}))
        if out_types is None:
            args = Args(node, tuple(self.types.get(n) for n in node.inputs),
                        tuple(self.consts.get(n) for n in node.inputs), OPSET)
            out_types = shape_rule(op)(args)
        if self._foldable(node):
            for name, t in zip(names, out_types):
                checked_type(f"{self.op.describe()}: '{name}'", t, self.max_memory)
            proto = onnx.helper.make_node(op, node.inputs, names, node_name, **node.attrs)
            values = evaluate_node(proto, {n: self.consts[n] for n in node.inputs if n}, OPSET)
            self.consts.update(zip(names, values))
            out_types = [TensorType(v.dtype, v.shape) for v in values]
        else:
            self.nodes.append(node)
        self.types.update(zip(names, out_types))
        return names

    def _foldable(self, node: Node) -> bool:
        """An ONNX op (none of cglow's integer ops, no attribute of cglow's) on constants only. A dequantization
        stays a node: graph/quant/fold.py keeps integer weights integers."""
        if node.op == "DequantizeLinear" or not onnx.defs.has(node.op, ""):
            return False
        known = onnx.defs.get_schema(node.op, OPSET, "").attributes
        return all(n in self.consts for n in node.inputs if n) and all(a in known for a in node.attrs)

    def transpose(self, value: str, perm: tuple[int, ...], out: str | None = None) -> str:
        return self.add("Transpose", [value], {"perm": perm}, out)

    def finish(self, value: str, i: int = 0) -> None:
        """The operator's output i is `value`: checked against the file's shape and type, and named."""
        got = self.check(value, i)
        last = self.nodes[-1] if self.nodes else None
        if last is not None and last.outputs == (value,) and value not in self.names:
            self.nodes[-1] = Node(last.op, last.name, last.inputs, (self.out(i),), last.attrs)
            self.types[self.out(i)] = self.types.pop(value)
        else:
            self.add("Identity", [value], out=self.out(i), out_type=got)

    def check(self, value: str, i: int = 0) -> TensorType:
        """The type of `value`, which must be the one the file declares for the operator's output i, but for
        the dimensions its shape signature leaves free: there the computed size is the tensor's from now on."""
        t = self.tensor(-1 - i)
        got = self.types[value]
        if got.dtype != t.dtype or not len(got.shape) == len(t.shape) == len(t.signature) or any(
                n != d and s != -1 for n, d, s in zip(got.shape, t.shape, t.signature)):
            raise CglowError(f"{self.op.describe()}: the file declares its output '{t.name}' "
                             f"{TensorType(t.dtype, t.shape)}, the operator computes {got}")
        if got.shape != t.shape:
            self.shapes[t.index] = got.shape
        return got

    # --- options shared by several operators --------------------------------------------------------------
    def activation(self) -> str:
        return _ACTIVATIONS.get(self.option("FusedActivationFunction") or 0, "NONE")

    def padding(self) -> str:
        return _PADDINGS.get(self.option("Padding"), "SAME")


def window_pads(sizes, kernel, strides, dilations, padding: str) -> tuple[int, ...]:
    """ONNX pads (begins, then ends) of TFLite's SAME padding: the total split with the odd one at the end."""
    if padding == "VALID":
        return (0,) * (2 * len(sizes))
    totals = [max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
              for n, k, s, d in zip(sizes, kernel, strides, dilations)]
    return tuple(t // 2 for t in totals) + tuple(t - t // 2 for t in totals)


def float_activation(b: Build, value: str, kind: str | None = None) -> str:
    """The fused activation of a float operator (or `kind`, an ActivationFunctionType name) applied to value."""
    kind = kind or b.activation()
    if kind == "NONE":
        return value
    if kind in ("RELU", "TANH", "SIGMOID"):
        return b.add(kind.capitalize(), [value])  # Relu, Tanh, Sigmoid
    if kind not in RANGES:
        raise CglowError(f"{b.op.describe()}: the fused activation {kind} is not supported")
    lo, hi = (b.const(n, np.array(v, np.float32)) for n, v in zip(("min", "max"), RANGES[kind]))
    return b.add("Clip", [value, lo, hi])


def activation_bounds(b: Build, q: Quant, dtype: np.dtype, kind: str | None = None) -> tuple[int, int]:
    """CalculateActivationRangeQuantized: the fused activation (or `kind`, a RELU-family operator) as the
    output's integer bounds."""
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    kind = kind or b.activation()
    s, z = float(q.scale[0]), int(q.zero[0])
    if kind not in RANGES:
        raise CglowError(f"{b.op.describe()}: the fused activation {kind} is not supported on 8-bit integers")
    low, high = RANGES[kind]
    if low is not None:
        lo = max(lo, quantize(low, s, z))
    if high is not None:
        hi = min(hi, quantize(high, s, z))
    return lo, hi
