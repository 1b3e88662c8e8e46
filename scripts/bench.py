"""Speed per benchmark model (the ones named on the command line, or the MLPerf Tiny four, MobileNetV2, the
transformer, the U-Net, an EfficientNet-style network and three recurrent keyword spotters): cglow's C built
with each compiler (gcc and clang) against onnxruntime on one thread, on the same seeded input; and for the MLPerf
Tiny four, int8: the model as onnxruntime's quantizer makes it (QDQ, per-channel, after quant_pre_process),
cglow's C against onnxruntime's int8 kernels on that same file.

cglow and onnxruntime are timed as cglow.tools.bench does for `cglow bench` (the generated C and a benchmark
`main` built with `-O3 -march=native` and the strict flags, run as a plain program; onnxruntime on one thread
through an I/O binding, in this process; each the median of --samples samples of about --sample-ms after
--warmup-ms of warm-up). Executables are built one at a time, so that the build times (the generated C and the
harness, `build s`) are not inflated by other builds, and cached by a hash with their build time: a second run
only times. Nothing is timed until every build is done.

Columns: MMACs are the multiply-accumulates of the compiled program's Gemm and Conv instructions, in millions, as
cglow.tools.macs counts them; per compiler, its time, its ratio to onnxruntime's and its build time. err is the
largest difference between cglow's outputs (the first compiler's) and onnxruntime's over the largest magnitude of
onnxruntime's, and for int8 in the outputs' quantization steps. A row beyond the tolerance (1e-4 of the scale; 2
steps) says MISMATCH, is left out of the geometric means, and the script exits with status 1 (as it does when a
model fails to compile or build).

Run with `make bench`; `python scripts/bench.py kws resnet8 --cc gcc` benches a subset. Timings are printed, never
checked."""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
import math
import statistics
import sys
import time

import cglow
from cglow import zoo
from cglow.compiler import CompiledModel
from cglow.tiles import TARGETS, host_target
from cglow.tools.bench import CFLAGS, build_executable, time_cglow, time_onnxruntime
from cglow.tools.harness import harness_source
from cglow.tools.host import build_seconds
from cglow.tools.macs import macs
from cglow.options import Options
from cglow.tools.reference import MAX_STEPS, TOLERANCE, difference, ort_quantized, rel_error, seeded_inputs

MODELS = ("kws", "vww", "resnet8", "autoencoder", "mobilenetv2", "transformer", "unet", "efficientnet", "gru_kws",
          "bigru_kws", "lstm_kws")
INT8 = ("kws", "vww", "resnet8", "autoencoder")  # MLPerf Tiny's four, in int8 too
COMPILERS = ("gcc", "clang")
SEED = 0  # the seed of scripts/bench_mcu.py's inputs and calibration


@dataclass
class Build:
    """One case's C built by one compiler, and timed."""
    cc: str
    exe: object = None
    build_s: float = math.nan
    seconds: float = math.nan


@dataclass
class Case:
    """One model in one number format: compiled, its builds, onnxruntime's time and how far the outputs are."""
    name: str
    int8: bool
    builds: list[Build] = field(default_factory=list)
    compiled: CompiledModel | None = None
    model: object = None
    inputs: list = field(default_factory=list)
    macs: int = 0
    ort_s: float = math.nan
    error: float = math.nan  # float: relative to the scale; int8: in quantization steps
    note: str = ""

    @property
    def ok(self) -> bool:
        return not self.note and self.error <= (MAX_STEPS if self.int8 else TOLERANCE)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def failure(what: str, e: Exception) -> str:
    return f"{what} failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:120]


def prepare(case: Case, args) -> None:
    """Compile the case's model and build its benchmark program with each compiler, one build at a time."""
    try:
        start = time.perf_counter()
        float_model = zoo.build(case.name)
        case.model = ort_quantized(float_model) if case.int8 else float_model
        case.compiled = compiled = cglow.compile_model(case.model, options=Options(target=args.target))
        case.macs = macs(compiled.program)
        case.inputs = seeded_inputs(compiled)
        main = harness_source(compiled, case.inputs, samples=args.samples, sample_ms=args.sample_ms,
                              warmup_ms=args.warmup_ms)
        files = {f"{compiled.name}.c": compiled.c_source, f"{compiled.name}.h": compiled.h_source,
                 f"{compiled.name}_main.c": main}
        log(f"bench: compiled {label(case)} in {time.perf_counter() - start:.1f} s "
            f"({len(compiled.c_source.encode()) / 2**20:.1f} MiB of C)")
    except Exception as e:  # noqa: BLE001 - the kernels change under us: report the model, go on
        case.note = failure("compile", e)
        return
    for cc in args.cc:
        build = Build(cc)
        case.builds.append(build)
        try:
            build.exe = build_executable(files, cc)
            build.build_s = build_seconds(build.exe) or math.nan
            log(f"bench: built {label(case)} with {cc} in {build.build_s:.1f} s")
        except Exception as e:  # noqa: BLE001
            case.note = failure(f"{cc} build", e)


def measure(case: Case, args) -> None:
    log(f"bench: timing {label(case)}")
    case.ort_s, _, want = time_onnxruntime(case.model, case.compiled, case.inputs, args.samples,
                                           args.sample_ms / 1e3, args.warmup_ms / 1e3)
    for i, build in enumerate(case.builds):
        build.seconds, _, got = time_cglow(build.exe, case.compiled)
        if i == 0 and case.int8:
            steps = [difference(case.model, t, g, w).steps for t, g, w in zip(case.compiled.outputs, got, want)]
            case.error = max((math.inf if s is None else s for s in steps), default=0.0)
        elif i == 0:
            case.error = max((rel_error(g, w) for g, w in zip(got, want)), default=0.0)


def label(case: Case) -> str:
    return f"{case.name} int8" if case.int8 else case.name


def fmt(value: float, spec: str) -> str:
    """format(value, spec), or a dash as wide when there is no value."""
    width = int(spec.split(".")[0] or 0)
    return f"{'-':>{width}}" if math.isnan(value) else format(value, spec)


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in values)) if values else math.nan


def table(cases: list[Case], compilers: tuple[str, ...]) -> list[str]:
    """The cases as rows: per compiler its time, ratio to onnxruntime and build time; then the geometric means."""
    per_cc = "".join(f" {cc + ' ms':>10} {cc + '/ort':>10} {'build s':>8}" for cc in compilers)
    lines = [f"{'model':16} {'MMACs':>9} {'ort ms':>10}{per_cc} {'err':>9}  check"]
    for c in cases:
        cells = [fmt(c.macs / 1e6 if c.compiled else math.nan, "9.2f"), fmt(c.ort_s * 1e3, "10.3f")]
        for cc in compilers:
            b = next((b for b in c.builds if b.cc == cc), Build(cc))
            cells += [fmt(b.seconds * 1e3, "10.3f"), fmt(b.seconds / c.ort_s, "10.2f"), fmt(b.build_s, "8.1f")]
        error = fmt(c.error, "9.2f") if c.int8 else fmt(c.error, "9.1e")
        lines.append(f"{label(c):16} {' '.join(cells)} {error}  {c.note or ('ok' if c.ok else 'MISMATCH')}")
    means = ""
    for cc in compilers:
        ratios = [b.seconds / c.ort_s for c in cases if c.ok for b in c.builds if b.cc == cc]
        means += f" {'':10} {fmt(geomean(ratios), '10.2f')} {'':8}"
    left_out = sum(not c.ok for c in cases)
    note = f"   ({len(cases) - left_out} of {len(cases)}; failed or mismatched ones left out)" if left_out else ""
    lines.append(f"{'geomean':16} {'':9} {'':10}{means}{note}".rstrip())
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help=f"zoo models (default: {' '.join(MODELS)})")
    parser.add_argument("--samples", type=int, default=9, help="samples per model and runtime (default 9)")
    parser.add_argument("--sample-ms", type=float, default=30.0, help="target length of a sample (default 30)")
    parser.add_argument("--warmup-ms", type=float, default=200.0, help="least warm-up time (default 200)")
    parser.add_argument("--cc", nargs="+", default=list(COMPILERS), help="C compilers (default: gcc clang)")
    parser.add_argument("--no-int8", action="store_true", help="leave out the int8 models")
    parser.add_argument("--target", default="host", choices=TARGETS,
                        help="cglow --target: register tiles (default host: the tiles for this machine)")
    args = parser.parse_args(argv)
    args.cc = tuple(dict.fromkeys(args.cc))
    unknown = [n for n in args.models if n not in zoo.MODELS]
    if unknown:
        parser.error(f"unknown models {', '.join(unknown)}; the zoo has {', '.join(zoo.MODELS)}")
    if args.samples < 1:
        parser.error("--samples must be at least 1")

    names = args.models or MODELS
    cases = [Case(n, False) for n in names] + [Case(n, True) for n in names if n in INT8 and not args.no_int8]
    for case in cases:  # every build before any timing: no compiler competes with a measurement
        prepare(case, args)
    for case in cases:
        if not case.note:
            try:
                measure(case, args)
            except Exception as e:  # noqa: BLE001
                case.note = failure("run", e)
    import onnxruntime
    target = f"host = {host_target()}" if args.target == "host" else args.target
    print(f"cglow --target {target}: {' / '.join(args.cc)} {' '.join(CFLAGS)}; onnxruntime {onnxruntime.__version__}, "
          f"1 thread; median of {args.samples} samples of ~{args.sample_ms:g} ms; MMACs: Gemm and Conv of the "
          f"compiled program; int8: onnxruntime's QDQ quantization, err in quantization steps")
    print("\n".join(table([c for c in cases if not c.int8], args.cc)))
    if any(c.int8 for c in cases):
        print()
        print("\n".join(table([c for c in cases if c.int8], args.cc)))
    return 0 if all(c.ok for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())
