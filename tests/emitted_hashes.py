"""The SHA-256 of the C that cglow emits for every zoo model, float and int8 (cglow's own quantizer, seeded
calibration), for a plain host, a Cortex-M4, AVX-512 and AVX-512 VNNI (`--target`): the fixture that shows a refactoring
leaves the emitted C byte for byte as it was (tests/emit_c/test_emitted_identity.py). Where a change to the C is
meant, regenerate the fixture and say why in the commit:

    python3 -m tests.emitted_hashes        # rewrites tests/data/emitted_hashes.json
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

import cglow
from cglow import zoo
from cglow.options import Options
from cglow.quantize import quantize_model

FIXTURE = Path(__file__).parent / "data" / "emitted_hashes.json"
TARGETS = ("generic", "cortex-m4", "x86-avx512", "x86-avx512-vnni")


def int8(model):
    """The model quantized by cglow: per-channel weights, min/max of 4 seeded standard normal inputs."""
    rng = np.random.default_rng(0)
    calib = {i.name: rng.standard_normal((4, *[d.dim_value for d in i.type.tensor_type.shape.dim]))
             .astype(np.float32) for i in model.graph.input}
    return quantize_model(model, calib)


def hashes(name: str) -> dict[str, str]:
    """'dtype/target' -> the first 16 hex digits of the emitted C's SHA-256, for zoo model `name`."""
    float_model = zoo.build(name)
    out = {}
    for dtype, model in (("float", float_model), ("int8", int8(float_model))):
        for target in TARGETS:
            source = cglow.compile_model(model, name="net", options=Options(target=target)).c_source
            out[f"{dtype}/{target}"] = hashlib.sha256(source.encode()).hexdigest()[:16]
    return out


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps({name: hashes(name) for name in zoo.MODELS}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}")
