"""Speed per benchmark model (the ones named on the command line, or the MLPerf Tiny four, MobileNetV2, the
transformer and the U-Net): cglow's C against onnxruntime on one thread, on the same seeded input.

cglow and onnxruntime are timed as cglow.tools.bench does for `cglow bench` (the generated C and a benchmark
`main` built with `gcc -O3 -march=native` and the strict flags, run as a plain program; onnxruntime on one
thread through an I/O binding, in this process; each the median of --samples samples of about --sample-ms
after --warmup-ms of warm-up). Executables are cached by a hash, so a second run only times. The models
build in parallel (--jobs); nothing is timed until every build is done.

Columns: MMACs are the multiply-accumulates of the compiled program's Gemm and Conv instructions, in
millions, as cglow.tools.macs counts them. GFLOP/s is 2 * MACs / cglow's time. err is the largest difference
between cglow's and onnxruntime's outputs over the largest magnitude of onnxruntime's; above 1e-4 the row
says MISMATCH, the model is left out of the geometric mean, and the script exits with status 1 (as it
does when a model fails to compile or build).

Run with `make bench`; `python scripts/bench.py kws resnet8` benches a subset. Timings are printed, never
checked."""
from __future__ import annotations

import argparse
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
import math
import os
from pathlib import Path
import statistics
import sys
import time

import cglow
from cglow import zoo
from cglow.tools.bench import CFLAGS, build_executable, time_cglow, time_onnxruntime
from cglow.compiler import CompiledModel
from cglow.tools.harness import harness_source
from cglow.tiles import TARGETS, host_target
from cglow.tools.macs import macs
from cglow.options import Options
from cglow.tools.reference import TOLERANCE, rel_error, seeded_inputs

MODELS = ("kws", "vww", "resnet8", "autoencoder", "mobilenetv2", "transformer", "unet")
SEED = 0


@dataclass
class Row:
    name: str
    macs: int = 0
    cglow_s: float = math.nan
    ort_s: float = math.nan
    error: float = math.nan
    note: str = ""
    compiled: CompiledModel | None = None
    inputs: list = field(default_factory=list)
    model: object = None

    @property
    def ok(self) -> bool:
        return not self.note and self.error <= TOLERANCE


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def prepare(names, args) -> tuple[list[Row], dict[str, Future]]:
    """Compile every model (here) and build its benchmark program (in the pool, while the next compiles)."""
    rows, builds = [], {}
    pool = ThreadPoolExecutor(max_workers=max(args.jobs, 1))
    for name in names:
        row = Row(name)
        rows.append(row)
        try:
            start = time.perf_counter()
            row.model = zoo.build(name)
            row.compiled = compiled = cglow.compile_model(row.model, options=Options(target=args.target))
            row.macs = macs(compiled.program)
            row.inputs = seeded_inputs(compiled)
            main = harness_source(compiled, row.inputs, samples=args.samples, sample_ms=args.sample_ms,
                                  warmup_ms=args.warmup_ms)
            files = {f"{compiled.name}.c": compiled.c_source, f"{compiled.name}.h": compiled.h_source,
                     f"{compiled.name}_main.c": main}
            log(f"bench: compiled {name} in {time.perf_counter() - start:.1f} s "
                f"({len(compiled.c_source.encode()) / 2**20:.1f} MiB of C); building")
            builds[name] = pool.submit(build_executable, files, args.cc)
        except Exception as e:  # noqa: BLE001 - the kernels change under us: report the model, go on
            row.note = f"compile failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:120]
    pool.shutdown(wait=False)
    return rows, builds


def measure(row: Row, exe: Path, args) -> None:
    log(f"bench: timing {row.name}")
    row.cglow_s, _, got = time_cglow(exe, row.compiled)
    row.ort_s, _, want = time_onnxruntime(row.model, row.compiled, row.inputs, args.samples, args.sample_ms / 1e3,
                                          args.warmup_ms / 1e3)
    row.error = max((rel_error(g, w) for g, w in zip(got, want)), default=0.0)


def fmt(value: float, spec: str) -> str:
    """format(value, spec), or a dash as wide when there is no value."""
    width = int(spec.split(".")[0] or 0)
    return f"{'-':>{width}}" if math.isnan(value) else format(value, spec)


def table(rows: list[Row]) -> list[str]:
    header = (f"{'model':12} {'MMACs':>9} {'cglow ms':>10} {'ort ms':>10} {'cglow/ort':>10} {'GFLOP/s':>8} "
              f"{'err':>9}  check")
    lines = [header]
    for r in rows:
        mmacs = r.macs / 1e6 if r.compiled else math.nan
        ratio = r.cglow_s / r.ort_s if r.ort_s > 0 else math.nan
        gflops = 2 * r.macs / r.cglow_s / 1e9 if r.cglow_s > 0 else math.nan
        check = r.note or ("ok" if r.ok else "MISMATCH")
        cells = (fmt(mmacs, "9.2f"), fmt(r.cglow_s * 1e3, "10.3f"), fmt(r.ort_s * 1e3, "10.3f"), fmt(ratio, "10.2f"),
                 fmt(gflops, "8.2f"), fmt(r.error, "9.1e"))
        lines.append(f"{r.name:12} {' '.join(cells)}  {check}")
    ratios = [r.cglow_s / r.ort_s for r in rows if r.ok]
    left_out = len(rows) - len(ratios)
    mean = math.exp(statistics.fmean(math.log(x) for x in ratios)) if ratios else math.nan
    note = f"   ({len(ratios)} of {len(rows)} models; failed or mismatched ones left out)" if left_out else ""
    lines.append(f"{'geomean':12} {'':9} {'':10} {'':10} {fmt(mean, '10.2f')}{note}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help=f"zoo models (default: {' '.join(MODELS)})")
    parser.add_argument("--samples", type=int, default=9, help="samples per model and runtime (default 9)")
    parser.add_argument("--sample-ms", type=float, default=30.0, help="target length of a sample (default 30)")
    parser.add_argument("--warmup-ms", type=float, default=200.0, help="least warm-up time (default 200)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel builds (default: cores)")
    parser.add_argument("--cc", default="gcc", help="C compiler (default gcc)")
    parser.add_argument("--target", default="host", choices=TARGETS,
                        help="cglow --target: register tiles (default host: the tiles for this machine)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.models if n not in zoo.MODELS]
    if unknown:
        parser.error(f"unknown models {', '.join(unknown)}; the zoo has {', '.join(zoo.MODELS)}")
    if args.samples < 1:
        parser.error("--samples must be at least 1")

    start = time.perf_counter()
    rows, builds = prepare(args.models or MODELS, args)
    for row in rows:  # builds finish before anything is timed: no gcc competes with a measurement
        if row.name in builds:
            try:
                builds[row.name] = builds[row.name].result()
            except Exception as e:  # noqa: BLE001
                row.note = f"build failed: {str(e).splitlines()[0]}"[:120]
    log(f"bench: built in {time.perf_counter() - start:.1f} s")
    for row in rows:
        if not row.note:
            try:
                measure(row, builds[row.name], args)
            except Exception as e:  # noqa: BLE001
                row.note = f"run failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:120]
    import onnxruntime
    target = f"host = {host_target()}" if args.target == "host" else args.target
    print(f"cglow --target {target}: {args.cc} {' '.join(CFLAGS)}; onnxruntime {onnxruntime.__version__}, 1 thread; "
          f"median of {args.samples} samples of ~{args.sample_ms:g} ms; MMACs: Gemm and Conv of the compiled program")
    print("\n".join(table(rows)))
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
