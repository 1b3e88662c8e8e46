"""The lowering context: graph values become views of buffers, nodes become primitives."""
from __future__ import annotations

import hashlib
import numpy as np

from ..c_text import C_TYPES
from ..errors import CglowError
from ..graph.ir import Graph, Node
from ..instr.expr import Expr, Input, cast, lit, substitute
from ..instr.ir import Buffer, Instr, Map, View

class Context:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.buffers: list[Buffer] = []
        self.instrs: list[Instr] = []
        self.views: dict[str, View] = {}
        self.named: dict[int, str] = {}  # a fresh buffer's id -> the value it was made for
        self.counts: dict[str, View] = {}  # a value of run-time length (TensorType.counted) -> its count, int64 []
        self.const_ids: dict[tuple, list[int]] = {}  # (dtype, size, digest) -> the const buffers of those bytes
        self.inputs = tuple(self._buffer("input", graph.types[n].size, n, self.dtype(n), i)
                            for i, n in enumerate(graph.inputs))
        for name, buf in zip(graph.inputs, self.inputs):
            self.views[name] = View.of(buf, graph.types[name].shape)
        for i, s in enumerate(graph.states):  # read like inputs; their buffers outlive the run
            initial = np.full(graph.types[s.value].size, s.initial, self.dtype(s.value))
            buf = self._buffer("state", initial.size, s.value, initial.dtype, i, initial)
            self.views[s.value] = View.of(buf, graph.types[s.value].shape)

    def _buffer(self, kind: str, size: int, label: str, dtype: np.dtype, index: int = 0, data=None) -> int:
        self.buffers.append(Buffer(len(self.buffers), kind, size, label, index, data, np.dtype(dtype)))
        return len(self.buffers) - 1

    def dtype(self, name: str) -> np.dtype:
        """The element type of a value, which must be one the generated C handles at run time."""
        dtype = self.graph.types[name].dtype
        if dtype not in C_TYPES:
            raise CglowError(f"tensor '{name}' is {dtype.name}; supported at run time: float32, bool and the "
                             f"8- to 64-bit integer types")
        return dtype

    # --- values -------------------------------------------------------------------------------
    def shape(self, name: str) -> tuple[int, ...]:
        return self.graph.types[name].shape

    def const(self, name: str) -> np.ndarray | None:
        return self.graph.consts.get(name)

    def view(self, name: str) -> View:
        """The view holding a value; a constant gets a const buffer the first time it is read."""
        if name not in self.views:
            data = self.const(name)
            if data is None:
                raise AssertionError(f"value '{name}' read before it is produced")
            self.dtype(name)
            self.views[name] = self.const_view(data, name)
        return self.views[name]

    def const_view(self, data: np.ndarray, label: str, dtype=None) -> View:
        """A const buffer holding data (as `dtype`, by default its own); the buffer of an earlier constant of the
        same type and bytes when there is one (an unrolled LSTM's steps read one copy of their weights' sums)."""
        data = np.ascontiguousarray(data, dtype=dtype)
        flat = data.reshape(-1)
        same = self.const_ids.setdefault((data.dtype.str, flat.size, hashlib.sha256(flat.tobytes()).digest()), [])
        buf = next((i for i in same if self.buffers[i].data.tobytes() == flat.tobytes()), None)
        if buf is None:
            buf = self._buffer("const", flat.size, label, data.dtype, data=flat)
            same.append(buf)
        return View.of(buf, data.shape)

    def new(self, name: str, order: tuple[int, ...] | None = None) -> View:
        """A fresh arena buffer for the value `name`, bound to it; its dims lie in memory in `order`
        (default row-major)."""
        view = self.temp(self.shape(name), name, self.dtype(name), order)
        self.views[name] = view
        self.named[view.buf] = name
        return view

    def new_like(self, name: str, views) -> View:
        """A fresh buffer for `name` laid out like the first of `views` with its shape that is a whole
        block of memory (so chains of elementwise ops keep a channels-last layout), else row-major."""
        shape = self.shape(name)
        orders = [v.order() for v in views if v.shape == shape]
        return self.new(name, next((o for o in orders if o is not None), None))

    def temp(self, shape: tuple[int, ...], label: str, dtype=np.float32, order=None) -> View:
        """A fresh arena buffer for an intermediate that no graph value names."""
        buf = self._buffer("arena", int(np.prod(shape, dtype=np.int64)), label, dtype)
        return View.laid_out(buf, shape, order) if order else View.of(buf, shape)

    def bind(self, name: str, view: View) -> None:
        self.views[name] = view

    def reshaped(self, name: str, shape: tuple[int, ...]) -> View:
        """The value under a new shape: a view, after a copy only when its strides cannot express the shape."""
        return self.view(name).reshape(shape) or self.contiguous(name).reshape(shape)

    def contiguous(self, name: str) -> View:
        """The value as a row-major view, copying it first if it is a strided view (a transpose)."""
        view = self.view(name)
        if view.is_contiguous():
            return view
        copy = self.new(name)
        self.emit(Map(copy, (view,), Input(0), f"copy of {name}"))
        return copy

    def emit(self, instr: Instr) -> None:
        self.instrs.append(instr)

    # --- elementwise helpers ------------------------------------------------------------------
    def operands(self, names, out_shape, first: int = 0) -> tuple[tuple[View, ...], list[Expr]]:
        """Views for the map inputs named, broadcast to out_shape; uniform constants become literals.

        Returns the views and, for the expression, what each input position stands for: a literal, or
        Input(k) for the k-th view counted from `first`."""
        views, values = [], []
        for name in names:
            data = self.const(name)
            if data is not None and data.size and np.all(data == data.reshape(-1)[0]):
                values.append(lit(data.reshape(-1)[0], data.dtype))
                continue
            values.append(Input(first + len(views)))
            views.append(self.view(name).broadcast_to(out_shape))
        return tuple(views), values

    def elementwise(self, node: Node, expr: Expr, names=None, compares: bool = False) -> None:
        """A Map computing expr (over Input(i), the i-th of the inputs named; default: the node's) into the
        node's output.

        An integer result is cast to the output's C type, so that it keeps its width and wraps when a later
        map fuses it (C computes narrow types in int). When the expression `compares` its inputs, their
        uniform integer constants stay in memory: as literals they could make a comparison constant for the
        other operand's type, which -Wtype-limits refuses (gcc sees through the widening cast of a fused Cast)."""
        names = node.inputs if names is None else names
        out = self.shape(node.outputs[0])
        dtype = self.dtype(node.outputs[0])
        if dtype.kind in "iu":
            expr = cast(dtype, expr)
        views, values = [], []
        for name in names:
            if compares and self.dtype(name).kind in "iu":
                values.append(Input(len(views)))
                views.append(self.view(name).broadcast_to(out))
            else:
                more, value = self.operands([name], out, first=len(views))
                views += more
                values += value
        self.emit(Map(self.new_like(node.outputs[0], views), tuple(views), substitute(expr, values), node.name))
