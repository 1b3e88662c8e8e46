"""Run a compiled model's C under AddressSanitizer and UndefinedBehaviorSanitizer: the C and the test harness
built with gcc -fsanitize=address,undefined -fno-sanitize-recover=all (and the strict flags), cached by hash,
run once; any sanitizer report fails."""
from __future__ import annotations

import subprocess

import numpy as np

from cglow.compiler import CompiledModel
from cglow.tools.harness import harness_source, parse_outputs
from cglow.tools.host import STRICT_FLAGS, build_cached

# -O0: the sanitizers see every access as written, and gcc builds instrumented code several times faster
SANITIZER_FLAGS = ("-O0", *STRICT_FLAGS, "-fsanitize=address,undefined", "-fno-sanitize-recover=all")


def run_sanitized(compiled: CompiledModel, inputs: list[np.ndarray]) -> list[np.ndarray]:
    sources = {f"{compiled.name}.c": compiled.c_source, f"{compiled.name}.h": compiled.h_source,
               "main.c": harness_source(compiled, inputs)}
    program = build_cached(sources, "gcc", SANITIZER_FLAGS, "{}.sanitized", quiet=True)
    run = subprocess.run([str(program)], capture_output=True, text=True)
    if run.returncode or run.stderr:
        raise AssertionError(f"the sanitized build failed (status {run.returncode}):\n{run.stderr[:3000]}")
    return parse_outputs(run.stdout, compiled)
