"""Malformed models through `cglow emit` as a subprocess: exit status 2, one stderr line that names what and
where, no traceback and no output file. Odd but valid models compile and match onnxruntime. An internal
error (a compiler bug) is one line too, with exit status 3, and writes no file."""
from __future__ import annotations

from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest

import cglow
from cglow import cli

from tests.hostile_models import CASES, const, model, node, relu_model, saved, tensor
from tests.util import ort_run, random_feeds


def emit(model_path: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cglow", "emit", str(model_path), "-o", str(out / "net.c"), *extra],
                          capture_output=True, text=True)


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_model_is_one_clean_error(case, tmp_path):
    build, extra, phrases = CASES[case]
    (tmp_path / "in").mkdir()
    result = emit(build(tmp_path / "in"), tmp_path / "out", *extra)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cglow: error: "), result.stderr
    for phrase in phrases:
        assert phrase in lines[0], phrase
    assert result.stdout == ""
    assert not (tmp_path / "out").exists()


def zero_sized() -> object:
    return relu_model(shape=(0, 3))


def unsorted_nodes() -> object:
    nodes = [node("Neg", ["a"], ["y"], "second"), node("Relu", ["x"], ["a"], "first")]
    return model(nodes, [tensor("x", [2, 3])], [tensor("y", [2, 3])])


def no_nodes() -> object:
    return model([], [tensor("x", [2, 3])], [tensor("x", [2, 3])])


def constant_output() -> object:
    return model([node("Relu", ["x"], ["y"], "r")], [tensor("x", [2])], [tensor("y", [2]), tensor("c", [3])],
                 [const("c", [1, -2, 3], np.float32)])


def empty_slice_into_concat() -> object:
    nodes = [node("Slice", ["x", "b", "e"], ["s"], "empty"), node("Concat", ["x", "s"], ["y"], "cat", axis=0)]
    return model(nodes, [tensor("x", [4])], [tensor("y", [4])], [const("b", [2]), const("e", [2])])


@pytest.mark.parametrize("build", [zero_sized, unsorted_nodes, no_nodes, constant_output, empty_slice_into_concat],
                         ids=lambda f: f.__name__)
def test_odd_but_valid_models_compile_and_match_onnxruntime(build, tmp_path):
    proto = build()
    result = emit(saved(proto, tmp_path), tmp_path / "out")
    assert result.returncode == 0, result.stderr
    feeds = random_feeds(proto)
    got = cglow.build(cglow.compile_model(proto))(*feeds.values())
    for g, want in zip(got, ort_run(proto, feeds), strict=True):
        np.testing.assert_array_equal(g, want)


def test_internal_error_is_one_line_with_status_3_and_no_file(tmp_path, monkeypatch, capsys):
    """A bug (here: lowering raising) is not blamed on the model, and leaves nothing behind."""
    def broken(graph):
        raise KeyError("a compiler bug")
    monkeypatch.setattr("cglow.compiler.lower", broken)
    status = cli.main(["emit", str(saved(relu_model(), tmp_path)), "-o", str(tmp_path / "out" / "net.c")])
    err = capsys.readouterr().err
    assert status == 3 and len(err.splitlines()) == 1
    assert err.startswith("cglow: internal error: KeyError") and "bug in cglow" in err
    assert not (tmp_path / "out").exists()


def test_failed_write_leaves_no_file(tmp_path):
    """The files are renamed into place only when all are written: when the last cannot be (its folder is a
    file), neither the C file nor the header appears, nor a temporary file."""
    (tmp_path / "blocker").write_text("a file, not a folder")
    blocked = str(tmp_path / "blocker" / "w.bin")
    result = emit(saved(relu_model(), tmp_path), tmp_path / "out", "--weights-file", blocked)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("cglow: error: cannot write")
    assert list((tmp_path / "out").iterdir()) == []
