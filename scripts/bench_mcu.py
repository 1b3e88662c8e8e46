"""Executed instructions and estimated cycles per inference on a microcontroller, per benchmark model (the
ones named on the command line, or those of scripts/bench.py): cglow's C built for a cross target (default
cortex-m4: arm-none-eabi-gcc -O2 for Cortex-M4F, hard float, and the strict warning flags, picolibc) and
run under QEMU's system emulator (mps2-an386), on the same seeded input as scripts/bench.py.

Method: the image (cglow.tools.cross) embeds the input, calls net_run once between marker calls, and writes the
outputs as hex bit patterns. A QEMU TCG plugin (cglow/tools/qemu/tb_profile.c) records the path executed
between the marks; the net_run call's instructions are those across the call less those of two
back-to-back marks. Emulation is deterministic, so the count is exact and the same on every run: it is
the measure, not time (QEMU's speed says nothing about the chip's). On the cortex-m4 target the same path
is charged the Cortex-M4 Technical Reference Manual's cycle costs, zero wait states (cglow.tools.m4_cycles: load
pipelining, taken branches, multiple registers; every choice documented there).

Columns: MMACs as in scripts/bench.py (Gemm and Conv of the compiled program); M insns, the instructions
of one inference in millions, and insn/MAC; M cycles, the estimated cycles, c/MAC, and the goal of issue
21 in cycles per MAC; ms, what the cycles take at 120 MHz (the MLPerf Tiny Cortex-M4 board, an
STM32L4R5); best ms, the fastest published MLPerf Tiny closed-division result on that board for the
model's task, and vs best, cglow's ms over it (below 1 is faster); err, the largest difference between the
emulated outputs and onnxruntime's over onnxruntime's largest magnitude (above 1e-4 the row says
MISMATCH); flash, the image's text + data (code, weights, the embedded input, the C library) and RAM,
its data + bss (the arena, the outputs, the C library's), in KiB, from the target's size (the stack is
not counted). A second table gives each model's cycles by instruction class, in percent. A model whose
weights, or whose whole image, exceed the target's flash is skipped with the reason. Images build and run
in parallel (--jobs) and are cached by hash (cglow.tools.host.build_cached). The script exits with status 1 when a
model mismatches or fails to compile, build or run.

With --int8 (or --int8 cglow), each model is first quantized by cglow itself (cglow.quantize: per-channel
int8 weights, minmax calibration on 8 seeded standard normal inputs) and compiled with int8 inputs and
outputs; with --int8 onnxruntime, by onnxruntime's quantizer (quant_pre_process, then quantize_static to
per-channel QDQ int8, cglow.tools.reference.ort_quantized) and compiled with float inputs and outputs
(--float-io). err is then the largest difference from onnxruntime running the same QDQ model, in output
quantization steps (above 2 the row says MISMATCH).

With --against TARGET (--target cortex-m4-clang --against cortex-m4: clang against gcc), every model is
measured on that target too, and a last table gives the two targets' estimated cycles per MAC, their ratio and
whether the two images' outputs have the same bits.

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
from cglow import zoo
from cglow.tools import cross, m4_cycles
from cglow.compiler import CompiledModel
from cglow.tools.macs import macs
from cglow.options import Options
from cglow.quantize import quantize_model
from cglow.tools.reference import MAX_STEPS, ort_quantized, ort_session, real_values, rel_error, seeded_inputs
from cglow.tools.targets import MIB, TARGETS, Target

CALIBRATION_SAMPLES = 8
MHZ = 120  # the MLPerf Tiny Cortex-M4 board's clock
# the fastest published MLPerf Tiny closed-division result on the Cortex-M4 board (STM32L4R5 at 120 MHz), per
# task: ms, and who made it
PUBLISHED = {"kws": (43.19, "X-CUBE-AI 9.0"), "vww": (88.93, "ST"), "resnet8": (165.1, "ST"),
             "autoencoder": (4.05, "Plumerai")}
# issue 21's goals in estimated cycles per MAC: int8 20% ahead of the published best, and float32
GOALS = {"int8": {"kws": 1.55, "vww": 1.14, "resnet8": 1.26, "autoencoder": 1.47},
         "float": {"kws": 2.8, "vww": 2.8, "resnet8": 2.8, "autoencoder": 3.5}}
CLASSES = (("load", ("load",)), ("store", ("store",)), ("ldrd/ldm", ("load-store-double", "load-store-multiple")),
           ("multiply", ("multiply",)), ("unpack", ("unpack",)), ("saturate", ("saturate",)),
           ("fp mac", ("fp-multiply-add",)), ("fp", ("fp", "fp-divide")), ("alu", ("alu", "divide")),
           ("compare", ("compare", "it")), ("branch", ("branch",)), ("other", ("system", "unclassified")))


@dataclass
class Row:
    name: str
    macs: int = 0
    instructions: int = 0
    estimate: m4_cycles.Estimate | None = None
    error: float = math.nan
    flash: int = 0
    ram: int = 0
    note: str = ""          # why the row has no measurement
    failed: bool = False    # the note is a failure, not a skip
    compiled: CompiledModel | None = None
    model: object = None
    inputs: list = field(default_factory=list)
    scales: list = field(default_factory=list)  # of the outputs, for an error in quantization steps
    int8: bool = False
    outputs: list = field(default_factory=list)  # the emulated ones

    @property
    def ok(self) -> bool:
        return not self.failed and (bool(self.note) or self.error <= (MAX_STEPS if self.int8 else TOLERANCE))

    @property
    def cycles(self) -> float:
        return self.estimate.cycles if self.estimate and not self.note else math.nan


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
        row.instructions, row.outputs = run.instructions, run.outputs
        if target.tiles == "cortex-m4":
            stage = "cycle estimate"
            row.estimate = m4_cycles.estimate(image, target, run.profile)
        stage = "onnxruntime"
        session = ort_session(row.model)
        want = session.run(None, {t.name: real_values(t, x) for t, x in zip(row.compiled.inputs, row.inputs)})
        names = [o.name for o in session.get_outputs()]
        want = [want[names.index(t.name)] for t in row.compiled.outputs]  # the graph's output order
        row.error = max((np.max(np.abs(real_values(t, g) - w)) / scale if scale else rel_error(g, w)
                         for t, scale, g, w in zip(row.compiled.outputs, row.scales, run.outputs, want)), default=0.0)
    except Exception as e:  # noqa: BLE001 - report the model, go on
        overflow = re.search(r"region `flash' overflowed by (\d+) bytes", str(e))
        if stage == "build" and overflow:  # the weights fit, the whole image does not
            row.note = f"skipped: the image overflows {target.flash_bytes / MIB:g} MiB of flash by {overflow[1]} bytes"
        else:
            row.note, row.failed = f"{stage} failed: {first_line(e)}", True


def compile_row(row: Row, target: Target, int8: str | None) -> None:
    """The row's model (quantized as asked) compiled for the target, with its inputs and output scales."""
    model = zoo.build(row.name)
    row.int8 = bool(int8)
    if int8 == "onnxruntime":
        row.model = ort_quantized(model, samples=CALIBRATION_SAMPLES, seed=SEED)
        row.compiled = cglow.compile_model(row.model, options=Options(target=target.tiles, float_io=True))
        row.scales = [t.scale for t in cglow.compile_model(row.model, options=Options(target=target.tiles)).outputs]
    else:
        row.model = int8_model(model) if int8 else model
        row.compiled = cglow.compile_model(row.model, options=Options(target=target.tiles))
        row.scales = [t.scale for t in row.compiled.outputs]
    row.inputs = [np.random.default_rng(SEED).integers(-128, 128, t.shape).astype(t.dtype)
                  if t.scale is not None else x for t, x in zip(row.compiled.inputs, seeded_inputs(row.compiled))]


def prepare(names, target: Target, args, pool: ThreadPoolExecutor) -> tuple[list[Row], list[Future]]:
    """Compile every model here; build and run each one that fits in the pool, while the next compiles."""
    rows, jobs = [], []
    for name in names:
        row = Row(name)
        rows.append(row)
        try:
            compile_row(row, target, args.int8)
        except Exception as e:  # noqa: BLE001 - report the model, go on with the others
            row.note, row.failed = f"compile failed: {type(e).__name__}: {first_line(e)}", True
            continue
        row.macs = macs(row.compiled.program)
        if target.flash_bytes is not None and row.compiled.weights_bytes > target.flash_bytes:
            row.note = (f"skipped: {row.compiled.weights_bytes / MIB:.1f} MiB of weights do not fit "
                        f"{target.flash_bytes / MIB:g} MiB of flash")
            continue
        log(f"bench-mcu: compiled {name}; building and running")
        jobs.append(pool.submit(measure, row, target, args.timeout))
    return rows, jobs


def table(rows: list[Row], kind: str) -> list[str]:
    lines = [f"{'model':12} {'MMACs':>7} {'M insns':>8} {'insn/MAC':>8} {'M cycles':>9} {'c/MAC':>6} {'goal':>5} "
             f"{'ms':>7} {'best ms':>8} {'vs best':>7} {'err':>8} {'flash KiB':>9} {'RAM KiB':>8}  check"]
    for r in rows:
        measured = not r.note
        per_mac = r.cycles / r.macs if r.macs else math.nan
        best = PUBLISHED.get(r.name, (math.nan, ""))[0]
        cells = (fmt(r.macs / 1e6 if r.compiled else math.nan, "7.2f"),
                 fmt(r.instructions / 1e6 if measured else math.nan, "8.2f"),
                 fmt(r.instructions / r.macs if measured and r.macs else math.nan, "8.2f"),
                 fmt(r.cycles / 1e6, "9.2f"), fmt(per_mac, "6.2f"), fmt(GOALS[kind].get(r.name, math.nan), "5.2f"),
                 fmt(r.cycles / (MHZ * 1e3), "7.2f"), fmt(best, "8.2f"), fmt(r.cycles / (MHZ * 1e3) / best, "7.2f"),
                 fmt(r.error, "8.1e"), fmt(r.flash / 1024 if r.flash else math.nan, "9.1f"),
                 fmt(r.ram / 1024 if r.ram else math.nan, "8.1f"))
        lines.append(f"{r.name:12} {' '.join(cells)}  {r.note or ('ok' if r.ok else 'MISMATCH')}")
    return lines


def class_table(rows: list[Row]) -> list[str]:
    """Each model's estimated cycles by instruction class, in percent, and any mnemonic the model left out."""
    lines = [f"{'cycles %':12} " + " ".join(f"{name:>8}" for name, _ in CLASSES)]
    unclassified: dict[str, int] = {}
    for r in rows:
        if r.note or r.estimate is None:
            continue
        share = [100 * sum(r.estimate.by_class[c] for c in group) / r.estimate.cycles for _, group in CLASSES]
        lines.append(f"{r.name:12} " + " ".join(f"{v:8.1f}" for v in share))
        for mnemonic, n in r.estimate.unclassified.items():
            unclassified[mnemonic] = unclassified.get(mnemonic, 0) + n
    if unclassified:
        lines.append("not in the cycle tables (charged 1 cycle): " +
                     ", ".join(f"{m} x{n}" for m, n in sorted(unclassified.items())))
    return lines


def versus_table(rows: list[Row], others: list[Row], target: Target, against: Target) -> list[str]:
    """Each model's estimated cycles per MAC on two targets (one compiler against another) and their ratio, and
    whether the two images' outputs have the same bits."""
    lines = [f"{'model':12} {'c/MAC ' + target.name:>22} {'c/MAC ' + against.name:>22} {'ratio':>6}  outputs"]
    for r, o in zip(rows, others):
        mine, theirs = r.cycles / r.macs if r.macs else math.nan, o.cycles / o.macs if o.macs else math.nan
        same = all(a.tobytes() == b.tobytes() for a, b in zip(r.outputs, o.outputs))
        outputs = r.note or o.note or ("same bits" if same else f"differ (err {r.error:.1e} and {o.error:.1e})")
        lines.append(f"{r.name:12} {fmt(mine, '22.3f')} {fmt(theirs, '22.3f')} {fmt(mine / theirs, '6.3f')}  {outputs}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help=f"zoo models (default: {' '.join(MODELS)})")
    parser.add_argument("--target", default="cortex-m4", choices=sorted(TARGETS), help="default cortex-m4")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel builds and runs "
                        "(default: cores)")
    parser.add_argument("--int8", nargs="?", const="cglow", choices=("cglow", "onnxruntime"),
                        help="quantize each model first, with cglow (the default) or with onnxruntime")
    parser.add_argument("--against", choices=sorted(TARGETS), help="also measure each model on this target and "
                        "print the cycles per MAC of both side by side (--target cortex-m4-clang --against cortex-m4)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds one emulation may take "
                        "before it counts as failed (default 1800)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.models if n not in zoo.MODELS]
    if unknown:
        parser.error(f"unknown models {', '.join(unknown)}; the zoo has {', '.join(zoo.MODELS)}")
    target = TARGETS[args.target]
    against = TARGETS[args.against] if args.against else None
    missing = [tool for t in (target, *([against] if against else ())) for tool in (*t.tools, f"{t.binutils}objdump")
               if shutil.which(tool) is None] + ([] if shutil.which("cc") else ["cc"])
    if missing:
        print(f"bench-mcu: error: {', '.join(missing)} not found (scripts/install-tools.sh installs them)",
              file=sys.stderr)
        return 2

    pool = ThreadPoolExecutor(max_workers=max(args.jobs, 1))
    rows, jobs = prepare(args.models or MODELS, target, args, pool)
    others, more = prepare(args.models or MODELS, against, args, pool) if against else ([], [])
    for job in jobs + more:
        job.result()
    pool.shutdown()
    version = re.search(r"version (\S+)", subprocess.run([target.run[0], "--version"], capture_output=True,
                                                         text=True, check=False).stdout)
    what = {None: "float32 models", "cglow": "int8 models quantized by cglow (int8 inputs and outputs)",
            "onnxruntime": "int8 models quantized by onnxruntime (QDQ, per-channel; --float-io)"}[args.int8]
    print(f"{what}; cglow: {' '.join((target.cc, *cross.OPT_FLAGS, *target.cflags))} and the strict flags; "
          f"{target.board}, QEMU {version[1] if version else '?'}; instructions counted by a TCG plugin"
          + ("; cycles estimated by cglow.tools.m4_cycles (Cortex-M4 TRM, zero wait states)"
             if target.tiles == "cortex-m4" else ""))
    print("\n".join(table(rows, "int8" if args.int8 else "float")))
    if args.int8:
        print("err in output quantization steps (relative for a float output)")
    print("best: " + "; ".join(f"{name} {ms:g} ms ({who})" for name, (ms, who) in PUBLISHED.items()))
    print("\n".join(class_table(rows)))
    if against:
        print("\n".join(versus_table(rows, others, target, against)))
    return 0 if all(r.ok for r in rows + others) else 1


if __name__ == "__main__":
    sys.exit(main())
