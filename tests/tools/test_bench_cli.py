"""`cglow bench`: the model's C and onnxruntime timed in one run on the same seeded inputs; both latencies, their
ratio and the outputs' agreement printed. Timings are read, never bounded."""
from __future__ import annotations

import re

from cglow import cli, zoo

from tests.util import need_tool, save

FAST = ("--samples", "1", "--sample-ms", "1", "--warmup-ms", "0")


def test_bench_prints_both_latencies_and_their_ratio(tmp_path, capsys):
    need_tool("cc")
    status = cli.main(["bench", save(zoo.build("autoencoder"), tmp_path / "ae.onnx"), *FAST])
    out, err = capsys.readouterr()
    assert status == 0 and not err, err
    lines = out.splitlines()
    assert len(lines) == 5 and "onnxruntime" in lines[0] and "median of 1 samples" in lines[0]
    cglow_ms = float(re.fullmatch(r"cglow C: +(\S+) ms per inference \(0\.26 M MACs, \S+ GFLOP/s\)", lines[1])[1])
    ort_ms = float(re.fullmatch(r"onnxruntime: +(\S+) ms per inference", lines[2])[1])
    ratio = float(re.match(r"cglow C / onnxruntime: (\S+) ", lines[3])[1])
    assert cglow_ms > 0 and ort_ms > 0 and abs(ratio - cglow_ms / ort_ms) <= 0.01 * ratio + 1e-3
    error = float(re.fullmatch(r"outputs: max relative error (\S+) against onnxruntime \(ok\)", lines[4])[1])
    assert error <= 1e-4


def test_bench_errors_are_one_line(tmp_path, capsys):
    path = save(zoo.build("autoencoder"), tmp_path / "ae.onnx")
    for args, message in ((["--cc", "no-such-cc"], "C compiler 'no-such-cc' not found"),
                          (["--samples", "0"], "--samples must be at least 1"),
                          (["--cflags=-O2 -fno-such-flag"], "failed on the generated code: ")):
        assert cli.main(["bench", path, *FAST, *args]) == 2
        out, err = capsys.readouterr()
        assert not out and len(err.splitlines()) == 1 and err.startswith("cglow: error: ") and message in err, err
