"""A plain C `main` for a generated model: embedded inputs, printed outputs (exact hex floats).

Used by the example job and the tests on the host; cross targets reuse it under an emulator. With
`samples`, it is a host benchmark instead (POSIX clock_gettime; scripts/bench.py): warm-up, then samples
of R runs each, the median printed as "us per run"."""
from __future__ import annotations

import numpy as np

from ..compiler import CompiledModel
from ..lower.literals import c_array_lines, c_type
from .emit import ENV


def harness_source(compiled: CompiledModel, inputs: list[np.ndarray], repeat: int = 1, samples: int = 0,
                   sample_ms: float = 30.0, warmup_ms: float = 200.0, warmup_runs: int = 3) -> str:
    """The test harness (runs net_run `repeat` times, times them with clock()); or with `samples` > 0 the
    benchmark harness: at least `warmup_runs` runs and `warmup_ms` of warm-up, then `samples` samples of R
    runs each, R chosen from the warm-up so that a sample lasts about `sample_ms`."""
    args = [f"input_{i}" for i in range(len(inputs))] + [f"output_{i}" for i in range(len(compiled.outputs))]
    bench = dict(samples=samples, sample_ms=float(sample_ms), warmup_ms=float(warmup_ms),
                 warmup_runs=max(int(warmup_runs), 1)) if samples > 0 else None
    return ENV.get_template("harness.c.j2").render(
        prefix=compiled.name, repeat=repeat, args=", ".join(args), bench=bench,
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


def parse_samples_us(stdout: str) -> list[float]:
    """The benchmark harness's per-sample times (microseconds per run), in the order they were taken."""
    return [float(line.split(":", 1)[1]) for line in stdout.splitlines() if line.startswith("sample us per run:")]
