"""The same model and options give byte-identical files across runs and Python hash seeds: `cglow emit` in
subprocesses with different PYTHONHASHSEED values, on models with branches and joins."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import onnx
import pytest

from cglow import zoo

HASH_SEEDS = ("0", "1", "4242")


@pytest.mark.parametrize("name", ["inception", "unet", "transformer"])
def test_emit_is_byte_identical_across_hash_seeds(name, tmp_path):
    onnx.save(zoo.build(name), str(tmp_path / "model.onnx"))
    outputs = []
    for seed in HASH_SEEDS:
        out = tmp_path / seed
        subprocess.run([sys.executable, "-m", "cglow", "emit", str(tmp_path / "model.onnx"), "-o", str(out / "net.c"),
                        "--weights-file", str(out / "net.bin"), "--report", str(out / "plan.html")],
                       env=dict(os.environ, PYTHONHASHSEED=seed), check=True, capture_output=True)
        outputs.append({f: hashlib.sha256((out / f).read_bytes()).hexdigest()
                        for f in ("net.c", "net.h", "net.bin", "plan.html")})
    assert outputs[1:] == outputs[:-1]
