"""`cglow check --all-tensors`: every graph value that a kernel writes whole, read back from a traced run of the
model's C and compared with the reference runtime's value of the same name, in the order the kernels run. The
first one that departs names the node, and the kernel, to look at: an error that shrinks on its way to the
outputs, or outputs too small to show it, cannot hide there.

The traced C is the model's C with a call after each such kernel (cglow.emit_c.emit with trace=True) that hands
the value's buffer to the test harness, which prints its bytes (trace.c.j2); the view the instruction keeps
(instr.ir.Value) says where each element lies. The reference runs the model with every compared value as an
extra output. Values that cglow's graph passes made (not in the model) have no reference and are not listed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import onnx

from ..emit_c.emit import emit
from ..graph.ir import shape_text
from ..instr.ir import View
from .reference import float_difference

if TYPE_CHECKING:
    from ..compiler import CompiledModel


@dataclass(frozen=True)
class Traced:
    """A graph value as cglow's C left it after the kernel that wrote it."""
    kernel: int         # the instruction's index in net_run
    function: str       # the C function net_run calls for it
    name: str           # the graph value
    values: np.ndarray  # in the value's own shape


def traced_source(compiled: CompiledModel) -> tuple[str, tuple[str, ...]]:
    """The model's C with tracing, and the C function net_run calls for each instruction."""
    emitted = emit(compiled.program, compiled.plan, compiled.name, "cglow check --all-tensors", 0,
                   list(compiled.inputs), list(compiled.outputs), compiled.options, trace=True)
    return emitted.c_source, emitted.functions


def view_values(flat: np.ndarray, view: View) -> np.ndarray:
    """The elements of a view of a buffer whose elements are `flat`, in the view's shape."""
    at = np.full(view.shape, view.offset, np.int64)
    for axis, (n, stride) in enumerate(zip(view.shape, view.strides)):
        at += (np.arange(n, dtype=np.int64) * stride).reshape((-1,) + (1,) * (len(view.shape) - axis - 1))
    return flat[at]


def read_trace(stdout: str, compiled: CompiledModel, functions: tuple[str, ...]) -> list[Traced]:
    """The traced values a harness printed, in the order the kernels ran."""
    traced = []
    for line in stdout.splitlines():
        if not line.startswith("trace "):
            continue
        head, _, data = line.partition(": ")
        kernel = int(head.split()[1])
        value = compiled.program.instrs[kernel].value
        buf = compiled.program.buffer(value.view.buf)
        flat = np.frombuffer(bytes.fromhex(data), buf.dtype)
        traced.append(Traced(kernel, functions[kernel], value.name, view_values(flat, value.view)))
    return traced


def with_outputs(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    """A copy of the model whose graph also outputs these values (element type and shape left to the runtime)."""
    extended = onnx.ModelProto()
    extended.CopyFrom(model)
    known = {o.name for o in extended.graph.output}
    extended.graph.output.extend(onnx.helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None)
                                 for n in names if n not in known)
    return extended


def producers(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    """The node that computes each value of the model's graph."""
    return {out: node for node in model.graph.node for out in node.output if out}


@dataclass(frozen=True)
class Compared:
    traced: Traced
    node: onnx.NodeProto
    verdict: str        # "ok", "MISMATCH", or why the value was not compared
    text: str           # the difference, in words

    @property
    def departs(self) -> bool:
        return self.verdict == "MISMATCH"


def compare(traced: Traced, want: np.ndarray, node: onnx.NodeProto, tolerance: float, max_steps: float) -> Compared:
    """One traced value against the reference's: float values within `tolerance` of its scale; 8-bit integers
    (quantized values) within `max_steps`; other integers and booleans exactly."""
    got = traced.values
    if got.shape != want.shape or got.dtype.kind != want.dtype.kind:
        what = f"{want.dtype.name}{shape_text(want.shape)} in the reference"
        return Compared(traced, node, "not compared", what)
    if got.dtype.kind == "f":
        d = float_difference(got, want)
        return Compared(traced, node, "ok" if d.ok(tolerance) else "MISMATCH", d.text())
    steps = float(np.max(np.abs(got.astype(np.int64) - want.astype(np.int64)), initial=0))
    limit = max_steps if got.dtype.itemsize == 1 and got.dtype.kind in "iu" else 0
    unit = "quantization steps" if limit else "(exact)"
    return Compared(traced, node, "ok" if steps <= limit else "MISMATCH", f"max abs error {steps:g} {unit}")


def describe(c: Compared) -> str:
    t = c.traced
    return (f"{t.function} {c.node.op_type} '{c.node.name}' -> '{t.name}' {t.values.dtype.name}"
            f"{shape_text(t.values.shape)}: {c.text} ({c.verdict})")
