"""Host latency of a model's generated C against onnxruntime on one thread, on the same seeded inputs: what
`cglow bench` prints for one model and scripts/bench.py for the zoo.

cglow: the generated C and the benchmark harness (cglow.tools.harness, samples > 0) built as a plain program
(default `-O3 -march=native` and the strict flags), run: warm-up (at least 3 runs and warmup_ms), then
`samples` samples of R runs each, R chosen so that a sample lasts about sample_ms, timed with
clock_gettime(CLOCK_MONOTONIC); the time is the median sample. Programs are cached in cglow.tools.host.cache_dir()
under a hash of the sources, the compiler's version, the flags and what -march=native means on this machine.

onnxruntime: one session with one thread, sequential execution and every graph optimization, run through
an I/O binding (inputs bound once, so the loop measures the session, not NumPy conversions), timed the same
way in this process. A quantized model's integer inputs reach it as the real values they stand for."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
import re
import statistics
import subprocess
import time
from typing import TYPE_CHECKING

import numpy as np

from ..compiler import CompiledModel, compile_model
from ..errors import CglowError
from ..model_file import TFLiteFile, litert_feeds, litert_real_outputs, open_model
from ..options import Options
from ..tiles import host_target
from .harness import harness_source, parse_outputs, parse_samples_us, parse_time_us, run_harness
from .host import STRICT_FLAGS, build_cached, need_compiler, sources
from .macs import macs
from .reference import MAX_STEPS, difference, ort_reason, ort_session, reference_feeds, seeded_inputs

if TYPE_CHECKING:
    import onnx

OPT_FLAGS = ("-O3", "-march=native")
CFLAGS = (*OPT_FLAGS, *STRICT_FLAGS)


@lru_cache(maxsize=None)
def native_target(cc: str) -> str:
    """What -march=native expands to (the cc1 command line), so a cache shared between machines stays right."""
    result = subprocess.run([cc, "-march=native", "-E", "-v", "-"], input="", capture_output=True, text=True,
                            check=False)
    return "\n".join(line for line in result.stderr.splitlines() if "cc1" in line)


def build_executable(files: dict[str, str], cc: str = "gcc", cflags=CFLAGS) -> Path:
    """Compile the .c files among `files` (name -> text) into a program, cached by a hash; return its path.
    Any compiler message fails the build: one line naming the compiler and its first error."""
    need_compiler(cc)
    native = native_target(cc) if "-march=native" in cflags else ""
    try:
        return build_cached(files, cc, cflags, "bench-{}", salt=native, quiet=True)
    except RuntimeError as exc:
        raise compiler_error(cc, cflags, exc) from None


def compiler_error(cc: str, cflags, exc: RuntimeError) -> CglowError:
    """A failed build (cglow.tools.host.build_cached's RuntimeError: a first line, then the compiler's messages) as
    one line: the command and the compiler's first error, without the temporary folder."""
    lines = [line.strip() for line in str(exc).splitlines()[1:] if line.strip()]
    first = next((line for line in lines if "error" in line), lines[0] if lines else "no message")
    first = re.sub(r"^/\S*/", "", first)
    return CglowError(f"{cc} {' '.join(cflags)} failed on the generated code: {first}")


def time_cglow(exe: Path, compiled: CompiledModel) -> tuple[float, list[float], list[np.ndarray]]:
    """Run the benchmark program: (median seconds per run, sample seconds, outputs)."""
    stdout = run_harness(exe)
    samples = [us * 1e-6 for us in parse_samples_us(stdout)]
    return parse_time_us(stdout) * 1e-6, samples, parse_outputs(stdout, compiled)


def _timed(run, samples: int, sample_s: float, warmup_s: float, warmup_runs: int = 3) -> tuple[float, list[float]]:
    """Time run() the way the C harness times cglow: (median seconds per run, sample seconds)."""
    clock = time.perf_counter
    start, n = clock(), 0
    while n < warmup_runs or clock() - start < warmup_s:
        run()
        n += 1
    runs = max(1, int(sample_s / ((clock() - start) / n)))
    times = []
    for _ in range(samples):
        start = clock()
        for _ in range(runs):
            run()
        times.append((clock() - start) / runs)
    return statistics.median(times), times


def time_onnxruntime(model: onnx.ModelProto, compiled: CompiledModel, inputs: list[np.ndarray], samples: int,
                     sample_s: float, warmup_s: float) -> tuple[float, list[float], list[np.ndarray]]:
    """Time onnxruntime: (median seconds per run, sample seconds, outputs in the graph's output order)."""
    session = ort_session(model)
    binding = session.io_binding()
    for name, x in reference_feeds(model, compiled, inputs).items():
        binding.bind_cpu_input(name, x)
    for out in session.get_outputs():
        binding.bind_output(out.name, "cpu")
    median, times = _timed(lambda: session.run_with_iobinding(binding), samples, sample_s, warmup_s)
    outputs = [np.array(o) for o in binding.copy_outputs_to_cpu()]
    names = [o.name for o in session.get_outputs()]
    order = [names.index(t.name) for t in compiled.outputs]
    return median, times, [outputs[i] for i in order]


def time_litert(model: TFLiteFile, inputs: list[np.ndarray], samples: int, sample_s: float,
                warmup_s: float) -> tuple[float, list[float], list[np.ndarray]]:
    """Time LiteRT's interpreter (its default, optimized kernels, one thread) on net_run's inputs (quantized
    as the file's where --float-io made them float): (median seconds per run, sample seconds, real outputs)."""
    from ai_edge_litert import interpreter as litert
    runner = litert.Interpreter(model_path=str(model.path), num_threads=1)
    runner.allocate_tensors()
    for detail, x in zip(runner.get_input_details(), litert_feeds(model, inputs)):
        runner.set_tensor(detail["index"], x)
    median, times = _timed(runner.invoke, samples, sample_s, warmup_s)
    outputs = [np.array(runner.get_tensor(d["index"])) for d in runner.get_output_details()]
    return median, times, litert_real_outputs(model, outputs)


def _runtime(model) -> str:
    """The runtime bench compares with, by name and version: LiteRT for a TFLite file, else onnxruntime."""
    from importlib.metadata import PackageNotFoundError, version
    package = "ai-edge-litert" if isinstance(model, TFLiteFile) else "onnxruntime"
    try:
        return f"{'LiteRT' if isinstance(model, TFLiteFile) else 'onnxruntime'} {version(package)}"
    except PackageNotFoundError:
        raise CglowError(f"cglow bench compares with {package}: pip install {package}") from None


def bench_model(path: str, shapes: dict[str, tuple[int, ...]], options: Options, cc: str, opt_flags: tuple[str, ...],
                samples: int, sample_ms: float, warmup_ms: float, tolerance: float) -> int:
    """`cglow bench`: time the model's C and onnxruntime (LiteRT for a .tflite file) on the same seeded inputs
    and print both, their ratio and how far the outputs are apart; 1 when they are further than `tolerance`
    (quantized outputs: 2 steps)."""
    if samples < 1 or sample_ms <= 0 or warmup_ms < 0:
        raise CglowError("--samples must be at least 1, --sample-ms above 0 and --warmup-ms at least 0")
    model = open_model(path, options.max_memory)
    runtime = _runtime(model)
    compiled = compile_model(model, "net", shapes, options)
    inputs = seeded_inputs(compiled)
    main = harness_source(compiled, inputs, samples=samples, sample_ms=sample_ms, warmup_ms=warmup_ms)
    flags = (*STRICT_FLAGS, *opt_flags)  # after the strict flags: -Wno-... can relax them
    exe = build_executable({**sources(compiled), f"{compiled.name}_main.c": main}, cc, flags)
    cglow_s, _, got = time_cglow(exe, compiled)
    timing = (samples, sample_ms / 1e3, warmup_ms / 1e3)
    try:
        if isinstance(model, TFLiteFile):
            ref_s, _, want = time_litert(model, inputs, *timing)
        else:
            ref_s, _, want = time_onnxruntime(model, compiled, inputs, *timing)
    except Exception as exc:  # noqa: BLE001 - the runtime's own errors, of many types
        raise CglowError(f"{runtime} cannot run the model: {ort_reason(exc)}") from None
    count = macs(compiled.program)
    target = f"host = {host_target()}" if options.target == "host" else options.target
    name = runtime.split()[0]
    print(f"cglow bench {path}: --target {target}, {cc} {' '.join(flags)}; {runtime}, "
          f"1 thread; median of {samples} samples of ~{sample_ms:g} ms, seeded random inputs")
    print(f"cglow C:     {cglow_s * 1e3:10.4f} ms per inference ({count / 1e6:.2f} M MACs, "
          f"{2 * count / cglow_s / 1e9:.2f} GFLOP/s)")
    print(f"{name + ':':12} {ref_s * 1e3:10.4f} ms per inference")
    print(f"cglow C / {name}: {cglow_s / ref_s:.3f} (below 1: cglow's C is faster)")
    differences = [difference(model, t, g, w) for t, g, w in zip(compiled.outputs, got, want)]
    ok = all(d.ok(tolerance, MAX_STEPS) for d in differences)
    print(f"outputs: max relative error {max((d.relative for d in differences), default=0.0):.2e} against "
          f"{name} ({'ok' if ok else 'MISMATCH'})")
    return 0 if ok else 1
