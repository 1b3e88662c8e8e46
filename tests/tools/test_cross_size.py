"""scripts/size_mcu.py (`make size`): the Cortex-M4 image sizes of a model against the bare harness, a model
that does not fit, and a one-line refusal of an unknown model."""
from __future__ import annotations


import pytest


from tests.util import ROOT, need_target

SCRIPTS = ROOT / "scripts"


@pytest.fixture
def size_mcu(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))  # the script imports its neighbours bench and bench_mcu
    import size_mcu
    return size_mcu


def test_size_report_of_kws(size_mcu, capsys):
    need_target("cortex-m4")
    assert size_mcu.main(["kws", "mobilenetv2", "--jobs", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5  # the flags, the header, the harness, kws, mobilenetv2
    assert lines[1].split() == ["image", "text", "data", "bss", "NET_WEIGHTS_BYTES", "NET_ARENA_BYTES", "code"]
    harness, kws = lines[2].rsplit(None, 6), lines[3].split()
    assert harness[0] == "bare harness" and harness[4:] == ["-", "-", "-"]
    text, data, bss, weights, arena, code = (int(v) for v in kws[1:])
    assert kws[0] == "kws" and weights == 90416 and arena > 0
    assert text > weights + code and 0 < code < 16 * 1024  # the embedded input is in text too
    assert data + bss > arena + int(harness[3])  # the arena and the outputs, besides the harness's own
    assert lines[4].startswith("mobilenetv2") and "does not fit" in lines[4]


@pytest.mark.parametrize("argv", [["pdp11net"], ["--target", "riscv64-linux"], ["--jobs", "two"]])
def test_bad_input_is_refused_in_one_line(size_mcu, capsys, argv):
    with pytest.raises(SystemExit) as exit_:
        size_mcu.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("size-mcu: error: ") and len(err.strip().splitlines()) == 1
