"""One random graph through cglow (its C built and run under the sanitizers, and with two settings of the compiler
matrix: one gcc level and one clang level) and through onnxruntime; what differs, if anything. A quantized output
may differ by its quantization steps (rounding ties, the order of the requantization's roundings)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx

import cglow
from cglow.compiler import CompiledModel, TensorInfo
from cglow.options import Options
from cglow.tools import matrix
from cglow.tools.reference import real_values

from ..sanitized import run_sanitized
from ..util import ort_run
from . import quantized, typed
from .builder import Rejected
from .graphs import random_graph

TOLERANCE = 1e-4  # of each output's scale (its largest finite magnitude, at least 1)
SLACK = 1.001  # of a quantized output's steps: the float32 rounding of its dequantized values


def difference(got: np.ndarray, want: np.ndarray, steps: float | None = None,
               tolerance: float = TOLERANCE) -> str | None:
    """What differs between cglow's output and onnxruntime's: a float one (bfloat16 too) by more than `tolerance`
    of its scale, an integer one at all, a quantized one (`steps`: the difference it may have, its quantization
    steps) by more than steps."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.dtype}{list(got.shape)} where onnxruntime gives {want.dtype}{list(want.shape)}"
    if steps is not None:
        gap = np.abs(got.astype(np.float64) - want.astype(np.float64)).reshape(-1)
        return None if not gap.size or gap.max() <= steps * SLACK else \
            f"{gap.max():.4g} off (the most at {np.argmax(gap)}) where {steps:.4g} is allowed, " \
            f"{np.sum(gap > steps * SLACK)} elements beyond"
    if want.dtype.kind != "f" and want.dtype != ml_dtypes.bfloat16:
        wrong = np.flatnonzero(got != want)
        return f"{wrong.size} elements differ, first at {wrong[0]}" if wrong.size else None
    got, want = got.astype(np.float64), want.astype(np.float64)
    finite = np.isfinite(want)  # where a mutated weight made infinities or NaNs, C and onnxruntime may differ
    scale = max(1.0, float(np.max(np.abs(want[finite]), initial=0)))
    error = float(np.max(np.abs(got[finite] - want[finite]), initial=0)) / scale
    return None if error <= tolerance else f"error {error:.2e} of the output's scale {scale:.3g}"


ATTEMPTS = 10


def reference_case(seed: int, index: int, graphs=random_graph, run=ort_run) -> tuple[
        onnx.ModelProto, dict[str, np.ndarray], list[np.ndarray]]:
    """Random graph `index` of `seed` (made by `graphs`) with its inputs and onnxruntime's outputs (as `run` gives
    them): the first attempt that `graphs` makes (it raises Rejected where it cannot) and onnxruntime runs (about 3
    in 100 it refuses: SAME padding narrower than the stride, or a kernel longer than its padded input, which ONNX
    shape inference, followed by the generator, lets through; of quantized graphs about 4 in 100: its rewrite of a
    MatMul of a 3-D or 4-D uint8 input and an Add after it into a Gemm between Reshapes types a QuantizeLinear
    int8)."""
    for attempt in range(ATTEMPTS):
        try:
            model, feeds = graphs(seed, index, attempt)
        except Rejected:
            continue
        try:
            return model, feeds, run(model, feeds)
        except Exception:  # onnxruntime raises its own exception types
            continue
    raise AssertionError(f"onnxruntime refused {ATTEMPTS} attempts at graph {index} of seed {seed}")


def settings(index: int) -> tuple[matrix.Setting, matrix.Setting]:
    """Graph `index`'s two compiler settings: one gcc and one clang level, so that a run covers every host setting."""
    gcc = [s for s in matrix.HOST if s.cc == "gcc"]
    clang = [s for s in matrix.HOST if s.cc == "clang"]
    return gcc[index % len(gcc)], clang[index % len(clang)]


def c_input(info: TensorInfo, x: np.ndarray) -> np.ndarray:
    """A feed for a C input: float values for a quantized one quantized at its scale and zero point (float32
    division, halves to even, saturated), others as they are."""
    if info.scale is None or x.dtype.kind != "f":
        return x
    limits = np.iinfo(info.dtype)
    return np.clip(np.rint(x / np.float32(info.scale)) + info.zero_point, limits.min, limits.max).astype(info.dtype)


def real_outputs(compiled: CompiledModel, got: list[np.ndarray], want: list[np.ndarray]) -> list[np.ndarray]:
    """The C's outputs, a quantized one in real values where onnxruntime's is float."""
    return [real_values(t, g) if w.dtype.kind == "f" else g for t, g, w in zip(compiled.outputs, got, want)]


def check_graph(model: onnx.ModelProto, feeds: dict[str, np.ndarray], want: list[np.ndarray],
                built: tuple[matrix.Setting, ...] = (), steps: tuple[float | None, ...] = (),
                options: Options = Options(), tolerance: float = TOLERANCE) -> str | None:
    """None when cglow's sanitized C (compiled with `options`) computes what onnxruntime does (the outputs that have
    `steps`, quantized ones, within them, the other float ones within `tolerance` of their scale), and the C `built`
    with each setting computes the same bits, else what went wrong. Where the C takes a quantized input for the
    model's float one (a QuantizeLinear's integers), it gets the feed quantized as QuantizeLinear does; where it
    gives a quantized output for a float one (a DequantizeLinear's integers), that output is compared in real
    values."""
    try:
        compiled = cglow.compile_model(model, options=options)
    except Exception as exc:
        return f"cglow refused it: {type(exc).__name__}: {exc}"
    inputs = [c_input(t, feeds[t.name]) for t in compiled.inputs]
    got = real_outputs(compiled, run_sanitized(compiled, inputs), want)
    steps = tuple(steps) + (None,) * (len(want) - len(steps))
    problems = [f"output {i}: {p}" for i, (g, w, s) in enumerate(zip(got, want, steps))
                if (p := difference(g, w, s, tolerance))]
    for setting in built:
        other = real_outputs(compiled, matrix.outputs(compiled, inputs, setting), want)
        if matrix.bitwise_alike(setting, matrix.Setting("gcc", "-O0")) and not matrix.same_bits(other, got):
            problems.append(f"{setting.label} and the sanitized gcc -O0 build differ")
        problems += [f"output {i} under {setting.label}: {p}" for i, (g, w, s) in enumerate(zip(other, want, steps))
                     if (p := difference(g, w, s, tolerance))]
    return "; ".join(problems) or None


def check_quantized(seed: int, index: int) -> str | None:
    """check_graph of quantized graph `index` of `seed` (quantized.py): with its options, its outputs within their
    quantization steps."""
    model, feeds, want = reference_case(seed, index, quantized.random_quantized_graph)
    return check_graph(model, feeds, want, settings(index), quantized.output_steps(model),
                       quantized.options(model, index))


def typed_reference_case(type_name: str, seed: int, index: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray],
                                                                         list[np.ndarray]]:
    """reference_case of random graph `index` of `seed` in a stored float type (typed.py: "float16", "bfloat16",
    "float64"), its reference typed.typed_reference, the two computations agreeing within the type's tolerance."""
    tolerance = typed_tolerance(type_name)

    def agree(outputs: list[np.ndarray], theirs: list[np.ndarray]) -> bool:
        return not any(difference(x, y, tolerance=tolerance) for x, y in zip(outputs, theirs))
    return reference_case(seed, index, typed.typed_case(type_name),
                          lambda model, feeds: typed.typed_reference(model, feeds, agree))


def typed_tolerance(type_name: str) -> float:
    """A stored float type's tolerance: typed.TOLERANCES; float64, computed in float32, float32's TOLERANCE."""
    return typed.TOLERANCES.get(type_name, TOLERANCE)


def check_typed(type_name: str, seed: int, index: int) -> str | None:
    """check_graph of typed_reference_case, within the type's tolerance."""
    return check_graph(*typed_reference_case(type_name, seed, index), settings(index),
                       tolerance=typed_tolerance(type_name))


def failed_graphs(chosen: int, indices, problem_of, model_of, tmp_path, prefix: str) -> list[str]:
    """A line for each graph of seed `chosen` at `indices` whose check finds a problem (problem_of(index): the
    problem or None), its model (model_of(index)) saved in tmp_path."""
    failures = []
    for index in indices:
        problem = problem_of(index)
        if problem:
            onnx.save(model_of(index), str(tmp_path / f"{prefix}-{chosen}-{index}.onnx"))
            failures.append(f"graph {index} of seed {chosen} (saved in {tmp_path}): {problem}")
    return failures
