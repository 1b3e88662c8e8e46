"""Executed instructions per inference on a microcontroller, per benchmark model (the ones named on the
command line, or those of scripts/bench.py): cglow's C built for a cross target (default cortex-m4:
arm-none-eabi-gcc -O2 for Cortex-M4F, hard float, and the strict warning flags, picolibc) and run under
QEMU's system emulator (mps2-an386), on the same seeded input as scripts/bench.py.

Method: the image (cglow.cross) embeds the input, calls net_run once between marker calls, and writes the
outputs as hex bit patterns. A QEMU TCG plugin (cglow/qemu/insn_count.c) counts the guest instructions
executed between the marks; the net_run call's count is that across the call minus that of two
back-to-back marks. Emulation is deterministic, so the count is exact and the same on every run: it is
the measure, not time (QEMU's speed says nothing about the chip's). It counts instructions, not cycles:
a load, a branch or a divide costs more than one cycle on the chip.

Columns: MMACs as in scripts/bench.py (Gemm and Conv of the compiled program); M insns, the instructions
of one inference in millions; insn/MAC, their ratio; err, the largest difference between the emulated
outputs and onnxruntime's over onnxruntime's largest magnitude (above 1e-4 the row says MISMATCH);
flash, the image's text + data (code, weights, the embedded input, the C library) and RAM, its data +
bss (the arena, the outputs, the C library's), in KiB, from the target's size (the stack is not
counted). A model whose weights exceed the target's flash is skipped with the reason. Images build and
run in parallel (--jobs) and are cached by hash (cglow.host.build_cached). The script exits with
status 1 when a model mismatches or fails to compile, build or run.

With --int8, each model is first quantized by cglow itself (cglow.quantize: per-channel int8 weights,
minmax calibration on 8 seeded standard normal inputs) and compiled with int8 inputs and outputs; err is
then the largest difference from onnxruntime running the same QDQ model, in output quantization steps
(above 2 the row says MISMATCH), and onnxruntime gets the dequantized input.

Run with `make bench-mcu`; `python scripts/bench_mcu.py kws resnet8` measures a subset."""
from __future__ import annotations

import argparse
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
import math
import os
import re
import shutil
import subprocess
import sys

import numpy as np

from bench import MODELS, SEED, TOLERANCE, fmt, log
import cglow
from cglow import cross, zoo
from cglow.compiler import CompiledModel
from cglow.instr.ir import Conv
from cglow.macs import macs
from cglow.options import Options
from cglow.quantize import quantize_model
from cglow.reference import MAX_STEPS, ort_session, real_values, rel_error, seeded_inputs
from cglow.targets import MIB, TARGETS, Target

INSN_PER_MAC_TARGET = 2.5  # on the convolutional models: reported, not checked (2.0 for int8)
CALIBRATION_SAMPLES = 8


@dataclass
class Row:
    name: str
    macs: int = 0
    conv: bool = False
    instructions: int = 0
    error: float = math.nan
    flash: int = 0
    ram: int = 0
    note: str = ""          # why the row has no measurement
    failed: bool = False    # the note is a failure, not a skip
    compiled: CompiledModel | None = None
    model: object = None
    inputs: list = field(default_factory=list)
    int8: bool = False

    @property
    def ok(self) -> bool:
        return not self.failed and (bool(self.note) or self.error <= (MAX_STEPS if self.int8 else TOLERANCE))


def first_line(error: Exception) -> str:
    """The line of a compiler's or emulator's message that says what went wrong."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower() or "overflow" in line.lower()]
    return (errors or lines or [type(error).__name__])[0][:160]


def int8_model(model):
    """The model quantized by cglow (per-channel weights, minmax) on seeded standard normal inputs."""
    rng = np.random.default_rng(SEED)
    calib = {i.name: rng.standard_normal((CALIBRATION_SAMPLES, *[d.dim_value for d in
                                                                 i.type.tensor_type.shape.dim])).astype(np.float32)
             for i in model.graph.input}
    return quantize_model(model, calib)


def measure(row: Row, target: Target, timeout: float) -> None:
    """Build the image, run it under the emulator and onnxruntime, fill in the row (in a worker thread)."""
    stage = "build"
    try:
        image = cross.build_image(row.compiled, row.inputs, target)
        text, data, bss = cross.image_size(image, target)
        row.flash, row.ram = text + data, data + bss
        stage = "run"
        run = cross.run_image(image, row.compiled, target, timeout=timeout)
        row.instructions = run.instructions
        stage = "onnxruntime"
        session = ort_session(row.model)
        want = session.run(None, {t.name: real_values(t, x) for t, x in zip(row.compiled.inputs, row.inputs)})
        names = [o.name for o in session.get_outputs()]
        want = [want[names.index(t.name)] for t in row.compiled.outputs]  # the graph's output order
        row.error = max((np.max(np.abs(real_values(t, g) - w)) / t.scale if t.scale else rel_error(g, w)
                         for t, g, w in zip(row.compiled.outputs, run.outputs, want)), default=0.0)
    except Exception as e:  # noqa: BLE001 - report the model, go on
        row.note, row.failed = f"{stage} failed: {first_line(e)}", True


def prepare(names, target: Target, args) -> tuple[list[Row], list[Future]]:
    """Compile every model here; build and run each one that fits in the pool, while the next compiles."""
    rows, jobs = [], []
    pool = ThreadPoolExecutor(max_workers=max(args.jobs, 1))
    for name in names:
        row = Row(name)
        rows.append(row)
        try:
            row.model = int8_model(zoo.build(name)) if args.int8 else zoo.build(name)
            row.int8 = args.int8
            row.compiled = compiled = cglow.compile_model(row.model, options=Options(target=target.tiles))
        except Exception as e:  # noqa: BLE001 - report the model, go on with the others
            row.note, row.failed = f"compile failed: {type(e).__name__}: {first_line(e)}", True
            continue
        row.macs = macs(compiled.program)
        row.conv = any(isinstance(i, Conv) for i in compiled.program.instrs)
        if target.flash_bytes is not None and compiled.weights_bytes > target.flash_bytes:
            row.note = (f"skipped: {compiled.weights_bytes / MIB:.1f} MiB of weights do not fit "
                        f"{target.flash_bytes / MIB:g} MiB of flash")
            continue
        row.inputs = [np.random.default_rng(SEED).integers(-128, 128, t.shape).astype(t.dtype)
                      if t.scale is not None else x for t, x in zip(compiled.inputs, seeded_inputs(compiled))]
        log(f"bench-mcu: compiled {name}; building and running")
        jobs.append(pool.submit(measure, row, target, args.timeout))
    pool.shutdown(wait=False)
    return rows, jobs


def table(rows: list[Row]) -> list[str]:
    lines = [f"{'model':12} {'MMACs':>9} {'M insns':>10} {'insn/MAC':>9} {'err':>9} {'flash KiB':>10} "
             f"{'RAM KiB':>9}  check"]
    for r in rows:
        measured = not r.note
        per_mac = r.instructions / r.macs if measured and r.macs else math.nan
        cells = (fmt(r.macs / 1e6 if r.compiled else math.nan, "9.2f"),
                 fmt(r.instructions / 1e6 if measured else math.nan, "10.2f"), fmt(per_mac, "9.2f"),
                 fmt(r.error, "9.1e"), fmt(r.flash / 1024 if r.flash else math.nan, "10.1f"),
                 fmt(r.ram / 1024 if r.ram else math.nan, "9.1f"))
        lines.append(f"{r.name:12} {' '.join(cells)}  {r.note or ('ok' if r.ok else 'MISMATCH')}")
    conv = [(r.instructions / r.macs, r.name) for r in rows if r.conv and not r.note and r.macs]
    if conv:
        worst, name = max(conv)
        lines.append(f"convolutional models: at most {worst:.2f} insn/MAC ({name}); "
                     f"the target is {2.0 if rows[0].int8 else INSN_PER_MAC_TARGET:g}")
    if rows and rows[0].int8:
        lines.append("int8 models quantized by cglow; err in output quantization steps (relative for a float output)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help=f"zoo models (default: {' '.join(MODELS)})")
    parser.add_argument("--target", default="cortex-m4", choices=sorted(TARGETS), help="default cortex-m4")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel builds and runs "
                        "(default: cores)")
    parser.add_argument("--int8", action="store_true", help="quantize each model with cglow first")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds one emulation may take "
                        "before it counts as failed (default 1800)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.models if n not in zoo.MODELS]
    if unknown:
        parser.error(f"unknown models {', '.join(unknown)}; the zoo has {', '.join(zoo.MODELS)}")
    target = TARGETS[args.target]
    missing = [tool for tool in (target.cc, target.run[0], f"{target.binutils}size", "cc")
               if shutil.which(tool) is None]
    if missing:
        print(f"bench-mcu: error: {', '.join(missing)} not found (scripts/install-tools.sh installs them)",
              file=sys.stderr)
        return 2

    rows, jobs = prepare(args.models or MODELS, target, args)
    for job in jobs:
        job.result()
    version = re.search(r"version (\S+)", subprocess.run([target.run[0], "--version"], capture_output=True,
                                                         text=True, check=False).stdout)
    print(f"cglow: {' '.join((target.cc, *cross.OPT_FLAGS, *target.cflags))} and the strict flags; {target.board}, "
          f"QEMU {version[1] if version else '?'}; instructions counted by a TCG plugin")
    print("\n".join(table(rows)))
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
