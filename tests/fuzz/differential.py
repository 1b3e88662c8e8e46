"""One random graph through cglow (its C built and run under the sanitizers, and with two settings of the compiler
matrix: one gcc level and one clang level) and through onnxruntime; what differs, if anything."""
from __future__ import annotations

import numpy as np
import onnx

import cglow
from cglow.tools import matrix

from ..sanitized import run_sanitized
from ..util import ort_run
from .graphs import random_graph

TOLERANCE = 1e-4  # of each output's scale (its largest finite magnitude, at least 1)

def difference(got: np.ndarray, want: np.ndarray) -> str | None:
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.dtype}{list(got.shape)} where onnxruntime gives {want.dtype}{list(want.shape)}"
    if want.dtype.kind != "f":
        wrong = np.flatnonzero(got != want)
        return f"{wrong.size} elements differ, first at {wrong[0]}" if wrong.size else None
    finite = np.isfinite(want)  # where a mutated weight made infinities or NaNs, C and onnxruntime may differ
    scale = max(1.0, float(np.max(np.abs(want[finite]), initial=0)))
    error = float(np.max(np.abs(got[finite].astype(np.float64) - want[finite]), initial=0)) / scale
    return None if error <= TOLERANCE else f"error {error:.2e} of the output's scale {scale:.3g}"


ATTEMPTS = 10


def reference_case(seed: int, index: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray], list[np.ndarray]]:
    """Random graph `index` of `seed` with its inputs and onnxruntime's outputs: the first attempt that
    onnxruntime runs (about 3 in 100 it refuses: SAME padding narrower than the stride, or a kernel longer than
    its padded input, which ONNX shape inference, followed by the generator, lets through)."""
    for attempt in range(ATTEMPTS):
        model, feeds = random_graph(seed, index, attempt)
        try:
            return model, feeds, ort_run(model, feeds)
        except Exception:  # onnxruntime raises its own exception types
            continue
    raise AssertionError(f"onnxruntime refused {ATTEMPTS} attempts at graph {index} of seed {seed}")


def settings(index: int) -> tuple[matrix.Setting, matrix.Setting]:
    """Graph `index`'s two compiler settings: one gcc and one clang level, so that a run covers every host setting."""
    gcc = [s for s in matrix.HOST if s.cc == "gcc"]
    clang = [s for s in matrix.HOST if s.cc == "clang"]
    return gcc[index % len(gcc)], clang[index % len(clang)]


def check_graph(model: onnx.ModelProto, feeds: dict[str, np.ndarray], want: list[np.ndarray],
                built: tuple[matrix.Setting, ...] = ()) -> str | None:
    """None when cglow's sanitized C computes what onnxruntime does, and the C `built` with each setting computes
    the same bits, else what went wrong."""
    try:
        compiled = cglow.compile_model(model)
    except Exception as exc:
        return f"cglow refused it: {type(exc).__name__}: {exc}"
    inputs = [feeds[t.name] for t in compiled.inputs]
    got = run_sanitized(compiled, inputs)
    problems = [f"output {i}: {p}" for i, (g, w) in enumerate(zip(got, want)) if (p := difference(g, w))]
    for setting in built:
        other = matrix.outputs(compiled, inputs, setting)
        if matrix.bitwise_alike(setting, matrix.Setting("gcc", "-O0")) and not matrix.same_bits(other, got):
            problems.append(f"{setting.label} and the sanitized gcc -O0 build differ")
        problems += [f"output {i} under {setting.label}: {p}" for i, (g, w) in enumerate(zip(other, want))
                     if (p := difference(g, w))]
    return "; ".join(problems) or None
