"""Host latency of a model's generated C against onnxruntime on one thread, on the same seeded inputs: what
`cglow bench` prints for one model and scripts/bench.py for the zoo.

cglow: the generated C and the benchmark harness (cglow.emit_c.harness, samples > 0) built as a plain program
(default `-O3 -march=native` and the strict flags), run: warm-up (at least 3 runs and warmup_ms), then
`samples` samples of R runs each, R chosen so that a sample lasts about sample_ms, timed with
clock_gettime(CLOCK_MONOTONIC); the time is the median sample. Programs are cached in cglow.host.cache_dir()
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

from .compiler import CompiledModel, compile_model
from .emit_c.harness import harness_source, parse_outputs, parse_samples_us, parse_time_us, run_harness
from .errors import CglowError
from .graph.onnx_import import load
from .host import STRICT_FLAGS, build_cached, need_compiler, sources
from .kernels.tiles import host_target
from .macs import macs
from .options import Options
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
    """A failed build (cglow.host.build_cached's RuntimeError: a first line, then the compiler's messages) as
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


def time_onnxruntime(model: onnx.ModelProto, compiled: CompiledModel, inputs: list[np.ndarray], samples: int,
                     sample_s: float, warmup_s: float,
                     warmup_runs: int = 3) -> tuple[float, list[float], list[np.ndarray]]:
    """Time onnxruntime the way the C harness times cglow: (median seconds per run, sample seconds, outputs in
    the graph's output order)."""
    session = ort_session(model)
    binding = session.io_binding()
    for name, x in reference_feeds(model, compiled, inputs).items():
        binding.bind_cpu_input(name, x)
    for out in session.get_outputs():
        binding.bind_output(out.name, "cpu")
    run = session.run_with_iobinding
    clock = time.perf_counter
    start, n = clock(), 0
    while n < warmup_runs or clock() - start < warmup_s:
        run(binding)
        n += 1
    runs = max(1, int(sample_s / ((clock() - start) / n)))
    times = []
    for _ in range(samples):
        start = clock()
        for _ in range(runs):
            run(binding)
        times.append((clock() - start) / runs)
    outputs = [np.array(o) for o in binding.copy_outputs_to_cpu()]
    names = [o.name for o in session.get_outputs()]
    order = [names.index(t.name) for t in compiled.outputs]
    return statistics.median(times), times, [outputs[i] for i in order]


def bench_model(path: str, shapes: dict[str, tuple[int, ...]], options: Options, cc: str, opt_flags: tuple[str, ...],
                samples: int, sample_ms: float, warmup_ms: float, tolerance: float) -> int:
    """`cglow bench`: time the model's C and onnxruntime on the same seeded inputs and print both, their ratio
    and how far the outputs are apart; 1 when they are further than `tolerance` (quantized outputs: 2 steps)."""
    try:
        import onnxruntime
    except ImportError:
        raise CglowError("cglow bench compares with onnxruntime: pip install onnxruntime") from None
    if samples < 1 or sample_ms <= 0 or warmup_ms < 0:
        raise CglowError("--samples must be at least 1, --sample-ms above 0 and --warmup-ms at least 0")
    model = load(path, options.max_memory)
    compiled = compile_model(model, "net", shapes, options)
    inputs = seeded_inputs(compiled)
    main = harness_source(compiled, inputs, samples=samples, sample_ms=sample_ms, warmup_ms=warmup_ms)
    flags = (*STRICT_FLAGS, *opt_flags)  # after the strict flags: -Wno-... can relax them
    exe = build_executable({**sources(compiled), f"{compiled.name}_main.c": main}, cc, flags)
    cglow_s, _, got = time_cglow(exe, compiled)
    try:
        ort_s, _, want = time_onnxruntime(model, compiled, inputs, samples, sample_ms / 1e3, warmup_ms / 1e3)
    except Exception as exc:  # noqa: BLE001 - the runtime's own errors, of many types
        raise CglowError(f"onnxruntime {onnxruntime.__version__} cannot run the model: {ort_reason(exc)}") from None
    count = macs(compiled.program)
    target = f"host = {host_target()}" if options.target == "host" else options.target
    print(f"cglow bench {path}: --target {target}, {cc} {' '.join(flags)}; onnxruntime {onnxruntime.__version__}, "
          f"1 thread; median of {samples} samples of ~{sample_ms:g} ms, seeded random inputs")
    print(f"cglow C:     {cglow_s * 1e3:10.4f} ms per inference ({count / 1e6:.2f} M MACs, "
          f"{2 * count / cglow_s / 1e9:.2f} GFLOP/s)")
    print(f"onnxruntime: {ort_s * 1e3:10.4f} ms per inference")
    print(f"cglow C / onnxruntime: {cglow_s / ort_s:.3f} (below 1: cglow's C is faster)")
    differences = [difference(model, t, g, w) for t, g, w in zip(compiled.outputs, got, want)]
    ok = all(d.ok(tolerance, MAX_STEPS) for d in differences)
    print(f"outputs: max relative error {max((d.relative for d in differences), default=0.0):.2e} against "
          f"onnxruntime ({'ok' if ok else 'MISMATCH'})")
    return 0 if ok else 1
