"""What the kernel tests share: programs built by hand (Builder: buffers, views as Operands beside the NumPy
arrays they show, one primitive, and the run through the real back end), seeded values, the tolerances, and
the NumPy reference of a convolution (tests/kernels/test_primitives.py, test_conv_nhwc.py)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import cglow
from cglow.compiler import compile_program
from cglow.emit_c.emit import TensorInfo
from cglow.graph.geometry import Window
from cglow.instr.ir import Buffer, Instr, Program, View


RTOL = 1e-5
MAP_ATOL = 1e-6
ACC_ATOL = 1e-6  # per accumulated term, times the largest term's magnitude


# --- programs by hand -------------------------------------------------------------------------

@dataclass(frozen=True)
class Operand:
    """A view of a buffer and, side by side, the NumPy array it shows."""
    view: View
    value: np.ndarray       # float64
    note: str

    def permute(self, perm) -> "Operand":
        perm = tuple(int(p) for p in perm)
        return Operand(self.view.permute(perm), self.value.transpose(perm), f"{self.note}.permute{perm}")

    def broadcast_to(self, shape) -> "Operand":
        shape = tuple(shape)
        return Operand(self.view.broadcast_to(shape), np.broadcast_to(self.value, shape),
                       f"{self.note}.broadcast_to{shape}")

    def slice(self, axis: int, start: int, length: int) -> "Operand":
        index = (slice(None),) * axis + (slice(start, start + length),)
        return Operand(self.view.slice(axis, start, length), self.value[index],
                       f"{self.note}.slice({axis},{start},{length})")

    def reshape(self, shape) -> "Operand":
        view = self.view.reshape(tuple(shape))
        assert view is not None
        return Operand(view, self.value.reshape(shape), f"{self.note}.reshape{tuple(shape)}")


class Builder:
    """Buffers of a hand-made program, the values fed to its inputs, and the run."""

    def __init__(self):
        self.buffers: list[Buffer] = []
        self.feeds: list[np.ndarray] = []
        self.out_shapes: list[tuple[int, ...]] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    def _buffer(self, kind: str, shape, index: int = 0, data=None) -> int:
        size = int(np.prod(shape, dtype=np.int64))
        self.buffers.append(Buffer(len(self.buffers), kind, size, f"{kind}{len(self.buffers)}", index, data))
        return len(self.buffers) - 1

    def input(self, array: np.ndarray) -> Operand:
        array = np.array(array, dtype=np.float32, order="C")  # keeps rank 0
        buf = self._buffer("input", array.shape, len(self.inputs))
        self.inputs.append(buf)
        self.feeds.append(array)
        return Operand(View.of(buf, array.shape), array.astype(np.float64), f"in{array.shape}")

    def const(self, array: np.ndarray) -> Operand:
        array = np.array(array, dtype=np.float32, order="C")  # keeps rank 0
        buf = self._buffer("const", array.shape, data=array.reshape(-1))
        return Operand(View.of(buf, array.shape), array.astype(np.float64), f"const{array.shape}")

    def output(self, shape) -> View:
        buf = self._buffer("output", shape, len(self.outputs))
        self.outputs.append(buf)
        self.out_shapes.append(tuple(shape))
        return View.of(buf, tuple(shape))

    def arena(self, shape) -> View:
        return View.of(self._buffer("arena", shape), tuple(shape))

    def run(self, instrs: list[Instr]) -> list[np.ndarray]:
        prog = Program("k", tuple(self.buffers), tuple(instrs), tuple(self.inputs), tuple(self.outputs))
        compiled = compile_program(prog, "k", inputs=[TensorInfo(f"x{i}", a.shape) for i, a in enumerate(self.feeds)],
                                   outputs=[TensorInfo(f"y{i}", s) for i, s in enumerate(self.out_shapes)])
        return cglow.build(compiled)(*self.feeds)


def rand(rng: np.random.Generator, shape) -> np.ndarray:
    return np.asarray(rng.standard_normal(tuple(int(d) for d in shape)), dtype=np.float32)


def acc_atol(length: int, *factors: np.ndarray) -> float:
    """The absolute tolerance of a sum of `length` products of elements of `factors`."""
    bound = np.prod([np.max(np.abs(f)) for f in factors])
    return ACC_ATOL * length * max(float(bound), 1.0)


def canvas(x: np.ndarray, win: Window, fill: float) -> np.ndarray:
    """x [..., H, W] placed after the begin pads on a canvas of `fill` that holds every window tap."""
    size = [max((o - 1) * s + (k - 1) * d + 1, p + n)
            for o, s, k, d, p, n in zip(win.out, win.strides, win.kernel, win.dilations, win.pads_begin, x.shape[-2:])]
    out = np.full(x.shape[:-2] + tuple(size), fill)
    (pt, pl), (h, w) = win.pads_begin, x.shape[-2:]
    out[..., pt:pt + h, pl:pl + w] = x
    return out


def taps(padded: np.ndarray, win: Window):
    """For each kernel tap, the canvas values it sees at every output position: [..., OH, OW]."""
    (kh_, kw_), (sh, sw), (dh, dw), (oh, ow) = win.kernel, win.strides, win.dilations, win.out
    for kh in range(kh_):
        for kw in range(kw_):
            yield kh, kw, padded[..., kh * dh:kh * dh + (oh - 1) * sh + 1:sh, kw * dw:kw * dw + (ow - 1) * sw + 1:sw]


def conv_ref(x: np.ndarray, w: np.ndarray, win: Window, group: int) -> np.ndarray:
    n, (m, cg) = x.shape[0], w.shape[:2]
    out = np.zeros((n, group, m // group) + win.out)
    for kh, kw, patch in taps(canvas(x, win, 0.0), win):
        out += np.einsum("ngchw,gmc->ngmhw", patch.reshape((n, group, cg) + win.out),
                         w[:, :, kh, kw].reshape(group, m // group, cg))
    return out.reshape((n, m) + win.out)
