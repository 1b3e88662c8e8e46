"""A plain C `main` for a generated model: embedded inputs, printed outputs (exact hex floats).

Used by the example job and the tests on the host. With `samples`, it is a host benchmark instead (POSIX
clock_gettime; `cglow bench`, scripts/bench.py): warm-up, then samples of R runs each, the median printed as
"us per run".
Cross targets (cglow.tools.cross) and `cglow check` use the bare-metal variant: no clock, no printf, outputs as hex
bit patterns, marker calls around net_run for an instruction counter, and a sequence of invocations for a
streaming model."""
from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
import subprocess

import jinja2
import numpy as np

from ..c_text import BITS, c_array_lines, c_type
from ..compiler import CompiledModel
from ..emit_c.emit import TensorInfo
from ..errors import CglowError
from .host import counted_outputs, cut_to_counts

ENV = jinja2.Environment(loader=jinja2.PackageLoader("cglow.tools", "templates"), trim_blocks=True,
                         lstrip_blocks=True, undefined=jinja2.StrictUndefined, autoescape=False,
                         keep_trailing_newline=True)


def harness_source(compiled: CompiledModel, inputs: list[np.ndarray], repeat: int = 1, samples: int = 0,
                   sample_ms: float = 30.0, warmup_ms: float = 200.0, warmup_runs: int = 3) -> str:
    """The test harness (runs net_run `repeat` times, times them with clock()); or with `samples` > 0 the
    benchmark harness: at least `warmup_runs` runs and `warmup_ms` of warm-up, then `samples` samples of R
    runs each, R chosen from the warm-up so that a sample lasts about `sample_ms`."""
    bench = dict(samples=samples, sample_ms=float(sample_ms), warmup_ms=float(warmup_ms),
                 warmup_runs=max(int(warmup_runs), 1)) if samples > 0 else None
    return ENV.get_template("harness.c.j2").render(repeat=repeat, bench=bench,
                                                   **template_io(compiled, [inputs]))


def _printed(compiled: CompiledModel) -> list[TensorInfo]:
    """What a harness passes net_run to write, and prints: the outputs, then the count of each output of run-time
    length (docs/c-api.md), printed as outputs after the model's."""
    return list(compiled.outputs) + [TensorInfo(f"{compiled.outputs[i].name} count", (), np.dtype(np.int64))
                                     for i in counted_outputs(compiled)]


def template_io(compiled: CompiledModel, runs: list[list[np.ndarray]], index: str = "") -> dict:
    """What both harness templates need: the prefix, net_run's arguments (each input array followed by
    `index`), the inputs' arrays (the initializer lines of each invocation's) and the outputs' (_printed)."""
    printed = _printed(compiled)
    args = [f"input_{i}{index}" for i in range(len(runs[0]))] + [f"output_{i}" for i in range(len(printed))]
    return dict(prefix=compiled.name, args=", ".join(args),
                inputs=[dict(size=max(x.size, 1), ctype=c_type(x.dtype), runs=[c_array_lines(run[i]) for run in runs])
                        for i, x in enumerate(runs[0])],
                outputs=[dict(size=max(t.size, 1), ctype=t.ctype, itemsize=t.dtype.itemsize) for t in printed])


def baremetal_source(compiled: CompiledModel, inputs: list[np.ndarray], trace: bool = False,
                     then: Sequence[list[np.ndarray]] = (), resets: Collection[int] = ()) -> str:
    """The bare-metal harness (baremetal.c.j2): net_run on `inputs`, then on each input set of `then` in turn
    (a streaming model keeps its state from one invocation to the next; net_reset before the invocations whose
    numbers are in `resets`, the first 0), each call between instruction-counter marks and each invocation's
    outputs printed. With `trace`, it defines <prefix>_trace for the model's C emitted with tracing
    (cglow.tools.trace, `cglow check --all-tensors`)."""
    if compiled.options.caller_arena or compiled.options.io_in_arena:
        raise CglowError("the bare-metal harness takes the default C API (no --caller-arena, no --io-in-arena)")
    if resets and not compiled.plan.state_bytes:
        raise CglowError("net_reset between invocations: the model keeps no state and has no net_reset")
    runs = [inputs, *then]
    if any(not 0 <= k < len(runs) for k in resets):
        raise ValueError(f"net_reset before invocations {sorted(resets)} of {len(runs)}")
    return ENV.get_template("baremetal.c.j2").render(
        trace=trace, runs=len(runs), resets=[int(k in resets) for k in range(len(runs))] if resets else [],
        **template_io(compiled, runs, "[r]"))


def _output_fields(stdout: str) -> dict[int, list[list[str]]]:
    """The elements of each "output I: ..." line that a harness printed, as text, by output index: one list
    per line, in the order printed (one line per invocation)."""
    values: dict[int, list[list[str]]] = {}
    for line in stdout.splitlines():
        if line.startswith("output "):
            head, _, rest = line.partition(":")
            values.setdefault(int(head.split()[1]), []).append(rest.split())
    return values


def parse_output_bits(stdout: str, compiled: CompiledModel) -> list[list[np.ndarray]]:
    """The outputs that the bare-metal harness wrote (each element's bits in hex), bit-exact: each
    invocation's, in order (an output of run-time length cut to its count)."""
    values = _output_fields(stdout)
    invocations = len(values.get(0, ()))
    arrays = []
    for i, t in enumerate(_printed(compiled)):
        lines = values.get(i, [])
        if not lines or len(lines) != invocations or any(len(v) != max(t.size, 1) for v in lines):
            raise ValueError(f"output {i} is missing or incomplete in the program's output")
        bits = np.array([[int(v, 16) for v in line] for line in lines], f"u{t.dtype.itemsize}")
        arrays.append([row.view(t.dtype)[:t.size].reshape(t.shape) for row in bits])
    outputs = len(compiled.outputs)
    return [cut_to_counts(compiled, run[:outputs], run[outputs:]) for run in zip(*arrays)]


def parse_outputs(stdout: str, compiled: CompiledModel) -> list[np.ndarray]:
    """The outputs the harness printed: floats in hex, integers and the types C holds as bits in decimal (an output
    of run-time length cut to its count)."""
    values = _output_fields(stdout)

    def array(fields: list[str], dtype: np.dtype) -> np.ndarray:
        if dtype in (np.float32, np.float64):
            return np.array([float.fromhex(v) for v in fields], dtype)
        if dtype in BITS:
            return np.array([int(v) for v in fields], f"u{dtype.itemsize}").view(dtype)
        return np.array([int(v) for v in fields], dtype)
    printed = [array(values[i][0], t.dtype)[:t.size].reshape(t.shape) for i, t in enumerate(_printed(compiled))]
    return cut_to_counts(compiled, printed[:len(compiled.outputs)], printed[len(compiled.outputs):])


def run_harness(exe: Path) -> str:
    """What a built harness program printed; RuntimeError (a bug: the model's C failed) when it fails."""
    run = subprocess.run([str(exe)], capture_output=True, text=True, check=False)
    if run.returncode:
        raise RuntimeError(f"{exe} exited with {run.returncode}: {(run.stdout + run.stderr)[-500:]}")
    return run.stdout


def parse_time_us(stdout: str) -> float:
    return float(stdout.rsplit("us per run:", 1)[1].split()[0])


def parse_samples_us(stdout: str) -> list[float]:
    """The benchmark harness's per-sample times (microseconds per run), in the order they were taken."""
    return [float(line.split(":", 1)[1]) for line in stdout.splitlines() if line.startswith("sample us per run:")]
