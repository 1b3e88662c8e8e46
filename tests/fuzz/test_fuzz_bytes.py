"""Mutated model bytes (tests/fuzz/mutate.py) through the command line's main, in process (as subprocesses
this many runs would take minutes): the only allowed outcomes are a clean error (exit status 2, one line,
no file) or a correct compile (the C builds under the strict flags and runs clean under the sanitizers, and
matches onnxruntime whenever onnxruntime runs the mutant too). MUTANTS of the fixed seed and of the rotating
one each run; CGLOW_FUZZ_SEED=N replays a rotating seed."""
from __future__ import annotations

from collections import Counter
import contextlib
import io
from pathlib import Path
import shutil

import numpy as np
import onnx
from onnx import TensorProto as T, numpy_helper
import pytest

import cglow
from cglow import cli
from cglow.options import Options

from tests.fuzz.differential import difference, reference_case
from tests.fuzz.mutate import mutant
from tests.fuzz.seeds import seed
from tests.sanitized import run_sanitized
from tests.util import ort_run

MUTANTS = 500
BASES = 6  # random graphs of the same seed, mutated in turn
LIMIT = ["--max-memory", "16M"]  # a mutated dim must not make a test allocate gigabytes


def emit(path: Path, out: Path) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = cli.main(["emit", str(path), "-o", str(out / "net.c"), *LIMIT])
    return status, err.getvalue()


def random_inputs(compiled, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {t.name: (rng.standard_normal(t.shape) * 3).astype(t.dtype) for t in compiled.inputs}


def non_finite(model: onnx.ModelProto) -> bool:
    """Whether a float constant of the model is infinite or NaN: how C and onnxruntime order or compare NaNs
    (TopK, Max, Relu) is theirs to choose, so such a mutant is only built and run, not compared."""
    tensors = list(model.graph.initializer) + [a.t for n in model.graph.node for a in n.attribute if a.HasField("t")]
    floats = [a.f for n in model.graph.node for a in n.attribute] + \
        [f for n in model.graph.node for a in n.attribute for f in a.floats]
    arrays = [numpy_helper.to_array(t) for t in tensors if t.data_type in (T.FLOAT, T.DOUBLE, T.FLOAT16)]
    return not (np.all(np.isfinite(floats)) and all(np.all(np.isfinite(a)) for a in arrays))


def compiled_correctly(data: bytes, rng: np.random.Generator) -> str | None:
    """What is wrong with the compile of a mutant that cglow accepted, or None."""
    model = onnx.ModelProto.FromString(data)
    compiled = cglow.compile_model(model, options=Options(max_memory=16 << 20))
    feeds = random_inputs(compiled, rng)
    got = run_sanitized(compiled, list(feeds.values()))
    if non_finite(model):
        return None
    try:
        want = ort_run(model, feeds)
    except Exception:  # onnxruntime refuses it (an opset it does not support yet, an untyped output...)
        return None
    return "; ".join(p for g, w in zip(got, want) if (p := difference(g, w))) or None


def outcome(status: int, stderr: str, out: Path) -> str | None:
    if status == 2:
        lines = stderr.splitlines()
        clean = len(lines) == 1 and lines[0].startswith("cglow: error: ") and not out.exists()
        return None if clean else f"an unclean error: {stderr[:500]!r}"
    return f"exit status {status}: {stderr[:500]}"


@pytest.mark.parametrize("kind", ["fixed", "rotating"])
def test_mutated_models_compile_correctly_or_fail_cleanly(kind, tmp_path):
    chosen = seed(kind)
    print(f"{kind} seed {chosen}: replay with CGLOW_FUZZ_SEED={chosen}")
    bases = [reference_case(chosen, i)[0] for i in range(BASES)]
    rng = np.random.default_rng(chosen)
    outcomes, failures = Counter(), []
    for k in range(MUTANTS):
        data = mutant(bases[k % BASES], rng)
        path = tmp_path / f"mutant-{k}.onnx"
        path.write_bytes(data)
        status, stderr = emit(path, tmp_path / "out")
        outcomes[status] += 1
        if status == 0:
            shutil.rmtree(tmp_path / "out")
            problem = compiled_correctly(data, rng)
        else:
            problem = outcome(status, stderr, tmp_path / "out")
        if problem:
            failures.append(f"mutant {k} of seed {chosen} ({path}): {problem}")
        else:
            path.unlink()
    print(f"outcomes (exit status: mutants): {dict(outcomes)}")
    assert not failures, "\n".join(failures)
