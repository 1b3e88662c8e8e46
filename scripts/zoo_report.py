"""Per zoo model: emit time, .c size, NET_ARENA_BYTES, NET_WEIGHTS_BYTES, max relative error vs onnxruntime
(the models named on the command line, or all).

Run with `make report` (needs the test extras for onnxruntime)."""
from __future__ import annotations

import sys
import time

import numpy as np
import onnxruntime as ort

import cglow
from cglow import zoo


def main() -> None:
    print(f"{'model':12} {'emit s':>7} {'.c KiB':>7} {'ARENA_BYTES':>12} {'WEIGHTS_BYTES':>14} {'kernels':>8} "
          f"{'max rel err':>12}")
    for name in sys.argv[1:] or sorted(zoo.MODELS):
        model = zoo.build(name)
        start = time.perf_counter()
        compiled = cglow.compile_model(model)
        emit_s = time.perf_counter() - start
        rng = np.random.default_rng(0)
        feeds = {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in compiled.inputs}
        got = cglow.build(compiled)(*feeds.values())
        want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        error = max(float(np.max(np.abs(g - w)) / np.max(np.abs(w))) for g, w in zip(got, want))
        print(f"{name:12} {emit_s:7.2f} {len(compiled.c_source.encode()) / 1024:7.0f} {compiled.arena_bytes:12} "
              f"{compiled.weights_bytes:14} {len(compiled.program.instrs):8} {error:12.2e}")


if __name__ == "__main__":
    main()
