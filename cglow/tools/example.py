"""The main job on the bundled example: the MLPerf Tiny keyword-spotting DS-CNN (seeded weights), emitted,
built with the host C compiler as a plain program, run, and checked against a reference runtime."""
from __future__ import annotations

from pathlib import Path
import subprocess

import numpy as np
import onnx

from .. import zoo
from ..compiler import compile_model
from ..errors import CglowError
from ..files import write_files
from .harness import harness_source, parse_outputs, parse_time_us, run_harness
from .host import STRICT_FLAGS, need_compiler
from .info import parameters
from .reference import TOLERANCE, reference_outputs, rel_error

KEYWORDS = ("silence", "unknown", "yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go")


def run_example(folder: Path, cc: str = "cc") -> None:
    need_compiler(cc)
    folder.mkdir(parents=True, exist_ok=True)
    model = zoo.build("kws")
    model_path = folder / "kws.onnx"
    onnx.save(model, str(model_path))
    print(f"1. built the example model {model_path}: keyword-spotting DS-CNN, {len(model.graph.node)} nodes, "
          f"{parameters(model)} parameters, input [1,1,49,10], 12 classes")

    compiled = compile_model(model_path, name="kws")
    write_files({folder / "kws.h": compiled.h_source, folder / "kws.c": compiled.c_source})
    print(f"2. cglow emit {model_path} -o {folder / 'kws.c'}: {len(compiled.program.instrs)} kernels, "
          f"KWS_ARENA_BYTES {compiled.arena_bytes}, KWS_WEIGHTS_BYTES {compiled.weights_bytes}, "
          f"kws.c {len(compiled.c_source) // 1024} KiB")

    x = np.random.default_rng(2026).standard_normal((1, 1, 49, 10)).astype(np.float32)
    write_files({folder / "main.c": harness_source(compiled, [x], repeat=200)})
    exe = folder / "kws_demo"
    command = [cc, "-O2", *STRICT_FLAGS, "-o", str(exe), str(folder / "kws.c"), str(folder / "main.c"), "-lm"]
    build = subprocess.run(command, capture_output=True, text=True)
    if build.returncode:
        raise CglowError(f"{cc} failed on the generated code: {build.stderr.strip().splitlines()[0]}")
    print(f"3. built it: {' '.join(command)}")

    stdout = run_harness(exe)
    (probs,) = parse_outputs(stdout, compiled)
    top = np.argsort(-probs[0])[:3]
    print(f"4. ran {exe} on a seeded random input: {parse_time_us(stdout):.1f} us per inference; top classes "
          + ", ".join(f"'{KEYWORDS[i]}' {probs[0, i]:.4f}" for i in top))

    name, (want,) = reference_outputs(model, {"input": x})
    error = rel_error(probs, want)
    verdict = "match" if error <= TOLERANCE else "MISMATCH"
    print(f"5. compared with {name}: max relative error {error:.2e} ({verdict})")
    if verdict != "match":
        raise SystemExit(1)
