"""A plain C `main` for a generated model: embedded inputs, printed outputs (exact hex floats).

Used by the example job and the tests on the host; cross targets reuse it under an emulator."""
from __future__ import annotations

import numpy as np

from ..compiler import CompiledModel
from ..lower.literals import c_array_lines, c_type
from .emit import ENV


def harness_source(compiled: CompiledModel, inputs: list[np.ndarray], repeat: int = 1) -> str:
    args = [f"input_{i}" for i in range(len(inputs))] + [f"output_{i}" for i in range(len(compiled.outputs))]
    return ENV.get_template("harness.c.j2").render(
        prefix=compiled.name, repeat=repeat, args=", ".join(args),
        inputs=[dict(size=max(x.size, 1), ctype=c_type(x.dtype), lines=c_array_lines(x)) for x in inputs],
        outputs=[dict(size=max(t.size, 1), ctype=t.ctype) for t in compiled.outputs])


def parse_outputs(stdout: str, compiled: CompiledModel) -> list[np.ndarray]:
    values = {}
    for line in stdout.splitlines():
        if line.startswith("output "):
            head, _, rest = line.partition(":")
            values[int(head.split()[1])] = rest.split()
    return [np.array([float.fromhex(v) if t.dtype == np.float32 else int(v) for v in values[i]],
                     t.dtype)[:t.size].reshape(t.shape) for i, t in enumerate(compiled.outputs)]


def parse_time_us(stdout: str) -> float:
    return float(stdout.rsplit("us per run:", 1)[1].split()[0])
