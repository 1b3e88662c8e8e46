"""`cglow emit --dump-ir DIR`: one text file per compiler stage, in order, with the nodes, instructions and
buffers of each; nothing without the option; the same C with and without it (and --report)."""
from __future__ import annotations

import re

import cglow
from cglow import zoo

from tests.util import cglow_cmd, save
from tests.hostile_models import html_names_model

BROKEN = "a\nb\r\x85c"


def test_dump_ir_writes_every_stage_in_order(tmp_path):
    path = save(zoo.build("kws"), tmp_path / "kws.onnx")
    result = cglow_cmd("emit", path, "-o", str(tmp_path / "kws.c"), "--dump-ir", str(tmp_path / "ir"))
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in (tmp_path / "ir").iterdir())
    assert [int(n[:2]) for n in names] == list(range(len(names)))
    stages = [n[3:-4] for n in names]
    assert stages[0] == "import" and stages[-1] == "alloc" and f"wrote the IR after each of {len(names)} stages" \
        in result.stdout
    for stage in ("fold_batchnorm", "quantized_io", "lower", "instr-fuse_maps", "instr-schedule",
                  "instr-pack_weights"):
        assert stage in stages
    assert stages.index("fold_batchnorm") < stages.index("lower") < stages.index("instr-fuse_maps")
    text = {stage: (tmp_path / "ir" / name).read_text() for stage, name in zip(stages, names)}
    assert "input 'input' float32[1,1,49,10]" in text["import"]
    assert "BatchNormalization 'stem/bn': 'stem/conv' float32[1,64,25,5]" in text["import"]
    assert "BatchNormalization" not in text["fold_batchnorm"] and "Conv 'stem/conv'" in text["fold_batchnorm"]
    assert re.search(r"^  0 conv 'stem/conv': out=b\d+\+0\[1,64,25,5\]", text["lower"], re.M)
    assert re.search(r"^  b0 input 0 float32\[490\] 'input'$", text["lower"], re.M)
    assert text["lower"].count(" map 'stem/relu'") == 1 and " map 'stem/relu'" not in text["instr-fuse_epilogues"]
    arena = re.search(r"#define KWS_ARENA_BYTES (\d+)", (tmp_path / "kws.h").read_text()).group(1)
    assert text["alloc"].startswith(f"arena: {arena} bytes, align 16,")
    assert re.search(r"^ +0 +\d+ +0 +\d+  b\d+ arena float32\[\d+\] '", text["alloc"], re.M)


def test_same_c_with_and_without_dump_and_report(tmp_path):
    path = save(zoo.build("resnet8"), tmp_path / "m.onnx")
    plain = cglow_cmd("emit", path, "-o", str(tmp_path / "a" / "net.c"))
    traced = cglow_cmd("emit", path, "-o", str(tmp_path / "b" / "net.c"), "--dump-ir", str(tmp_path / "b" / "ir"),
                       "--report", str(tmp_path / "b" / "plan.html"))
    assert plain.returncode == traced.returncode == 0, plain.stderr + traced.stderr
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["net.c", "net.h"]
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["ir", "net.c", "net.h", "plan.html"]
    for name in ("net.c", "net.h"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert plain.stderr == traced.stderr == ""  # no progress line when stderr is not a terminal


def test_names_stay_one_line_each(tmp_path):
    model = html_names_model()
    model.graph.node[0].name = model.graph.node[0].output[0] = model.graph.node[1].input[0] = BROKEN
    path = save(model, tmp_path / "h.onnx")
    result = cglow_cmd("emit", path, "-o", str(tmp_path / "h.c"), "--dump-ir", str(tmp_path / "ir"))
    assert result.returncode == 0, result.stderr
    prog = cglow.compile_model(model).program
    last = sorted((tmp_path / "ir").glob("*-instr-*.txt"))[-1].read_text()
    assert len(last.splitlines()) == 3 + len(prog.buffers) + len(prog.instrs)
    # the buffer, the first gemm and the value it holds, escaped as Python writes them
    assert last.count("'a\\nb\\r\\x85c'") == 3
    imported = (tmp_path / "ir" / "00-import.txt").read_text()
    assert len(imported.splitlines()) == 5 + 2 and "'<b>&amp;'" in imported


def test_dump_ir_on_a_file_is_an_error(tmp_path):
    path = save(zoo.build("kws"), tmp_path / "kws.onnx")
    (tmp_path / "ir").write_text("not a folder")
    result = cglow_cmd("emit", path, "-o", str(tmp_path / "kws.c"), "--dump-ir", str(tmp_path / "ir"))
    assert result.returncode == 2 and result.stderr.startswith("cglow: error: --dump-ir ")
    assert len(result.stderr.splitlines()) == 1 and "not a folder" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ir", "kws.onnx"]
