"""The command line: emit, the example job, and one-line errors with exit status 2 and no output file."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cglow
from cglow import zoo
from cglow.options import Options
from tests.util import cglow_cmd, save, unsupported_model


def test_emit_writes_c_and_header(tmp_path):
    model = save(zoo.build("autoencoder"), tmp_path / "ae.onnx")
    result = cglow_cmd("emit", model, "-o", str(tmp_path / "out" / "ae_net.c"))
    assert result.returncode == 0, result.stderr
    header = (tmp_path / "out" / "ae_net.h").read_text()
    assert "#define AE_NET_INPUT_0_SIZE 640" in header
    assert "int ae_net_run(const float *input_0, float *output_0);" in header
    assert "ae_net_run(" in (tmp_path / "out" / "ae_net.c").read_text()


def test_a_closed_pipe_ends_quietly(tmp_path):
    model = save(zoo.build("autoencoder"), tmp_path / "ae.onnx")
    errors = tmp_path / "stderr.txt"  # `true` reads nothing and exits: cglow's output meets a closed pipe
    subprocess.run(["sh", "-c", '"$0" -m cglow info "$1" 2>"$2" | true', sys.executable, model, str(errors)],
                   check=True)
    assert errors.read_text() == ""


def test_emitted_files_get_the_usual_mode(tmp_path):
    """0666 less the umask, as any tool writes files (not the 0600 of the temporary file behind them)."""
    model = save(zoo.build("autoencoder"), tmp_path / "ae.onnx")
    result = subprocess.run(["sh", "-c", 'umask 022 && exec "$0" -m cglow emit "$1" -o "$2" --report "$3"',
                             sys.executable, model, str(tmp_path / "ae.c"), str(tmp_path / "ae.html")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert {name: (tmp_path / name).stat().st_mode & 0o777 for name in ("ae.c", "ae.h", "ae.html")} == \
        dict.fromkeys(("ae.c", "ae.h", "ae.html"), 0o644)


def test_every_unsupported_op_is_listed_in_one_line(tmp_path):
    model = save(unsupported_model(), tmp_path / "bad.onnx")
    result = cglow_cmd("emit", model, "-o", str(tmp_path / "bad.c"))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "RandomUniformLike ('first det', 'second det')" in lines[0] and "RandomNormalLike ('uq')" in lines[0]
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == [tmp_path / "bad.onnx"]


def test_symbolic_batch_is_one_with_a_notice(tmp_path):
    """A symbolic first dimension (a batch) is taken as 1 with one notice line; any other needs --shape."""
    model = zoo.build("autoencoder")
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "unk__232"
    path = save(model, tmp_path / "sym.onnx")
    result = cglow_cmd("emit", path, "-o", str(tmp_path / "sym.c"))
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == ("cglow: notice: the symbolic first dimension of 'input' ('unk__232') is taken "
                                     "as 1; --shape input=1,640 sets it")
    assert "#define SYM_INPUT_0_SIZE 640 /* elements; float32 [1,640]" in (tmp_path / "sym.h").read_text()
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "features"
    path = save(model, tmp_path / "sym2.onnx")
    result = cglow_cmd("emit", path, "-o", str(tmp_path / "sym2.c"))
    assert result.returncode == 2
    assert "symbolic dimension 'features' at axis 1; pass --shape input=1,1" in result.stderr
    assert not (tmp_path / "sym2.c").exists()
    result = cglow_cmd("emit", path, "-o", str(tmp_path / "sym2.c"), "--shape", "input=1,640")
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_bad_files_are_one_line_errors(tmp_path):
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x07not a model at all" * 10)
    for args in (["emit", str(tmp_path / "junk.onnx"), "-o", str(tmp_path / "j.c")],
                 ["emit", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "m.c")]):
        result = cglow_cmd(*args)
        assert result.returncode == 2
        assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("cglow: error:")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junk.onnx"]


def test_example_job_runs_and_checks_itself(tmp_path):
    result = cglow_cmd("example", "--dir", str(tmp_path / "ex"))
    assert result.returncode == 0, result.stderr
    assert "(match)" in result.stdout
    assert np.isfinite(float(result.stdout.split("max relative error ")[1].split()[0]))


def test_all_problems_in_one_message(tmp_path):
    """Unsupported ops, symbolic dims on two inputs and an unsupported element type, reported together."""
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, "n"]),
              helper.make_tensor_value_info("b", TensorProto.FLOAT, [4, "m"]),
              helper.make_tensor_value_info("h", TensorProto.FLOAT6E2M3, [4])]
    nodes = [helper.make_node("RandomUniformLike", ["a"], ["d"], name="det"),
             helper.make_node("Abs", ["h"], ["e"], name="float6 abs")]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("e", TensorProto.FLOAT6E2M3, [4])])
    path = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "bad.onnx")
    result = cglow_cmd("emit", path, "-o", str(tmp_path / "bad.c"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    for part in ("RandomUniformLike ('det')", "--shape a=", "--shape b=", "float6_e2m3fn ('h')"):
        assert part in line, part
    assert not (tmp_path / "bad.c").exists()


def test_memory_options(tmp_path):
    model = save(zoo.build("kws"), tmp_path / "kws.onnx")
    result = cglow_cmd("emit", model, "-o", str(tmp_path / "net.c"), "--caller-arena", "--align", "4")
    assert result.returncode == 0, result.stderr
    header = (tmp_path / "net.h").read_text()
    assert "#define NET_ARENA_ALIGN 4" in header and "int net_run(void *arena, const float *input_0" in header
    bad = cglow_cmd("emit", model, "-o", str(tmp_path / "bad.c"), "--align", "3")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "power of two" in bad.stderr
    assert not (tmp_path / "bad.c").exists()
    info = json.loads(cglow_cmd("info", model, "--json", "--io-in-arena").stdout)
    assert info["ram_bytes"] == info["arena_bytes"] and info["io_bytes"] == 0


def test_unpacked_weights_option(tmp_path):
    """A MatMul by float16 weights: stored as float16 by default (instr/narrow_weights.py), as float32 with
    --unpacked-weights (`info` says so in its weights bytes)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float16), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "half",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 32])], [w])
    model = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "half.onnx")
    narrow, wide = (json.loads(cglow_cmd("info", model, "--json", *flags).stdout)["weights_bytes"]
                    for flags in ((), ("--unpacked-weights",)))
    assert narrow <= 64 * 32 * 2 + 64 and wide >= 64 * 32 * 4


def test_weights_file(tmp_path):
    model = save(zoo.build("kws"), tmp_path / "kws.onnx")
    result = cglow_cmd("emit", model, "-o", str(tmp_path / "out" / "net.c"), "--weights-file",
                       str(tmp_path / "flash" / "net.bin"))
    assert result.returncode == 0, result.stderr
    header = (tmp_path / "out" / "net.h").read_text()
    assert "#define NET_WEIGHTS_ALIGN 16" in header
    assert "int net_run(const void *weights, const float *input_0, float *output_0);" in header
    blob = (tmp_path / "flash" / "net.bin").read_bytes()
    compiled = cglow.compile_model(model, options=Options(external_weights=True))
    assert blob == compiled.weights_blob and f"#define NET_WEIGHTS_BYTES {len(blob)} " in header
    x = np.linspace(-1, 1, 490, dtype=np.float32).reshape(1, 1, 49, 10)
    np.testing.assert_array_equal(cglow.build(compiled, weights=blob)(x)[0],
                                  cglow.build(cglow.compile_model(model))(x)[0])
    with pytest.raises(ValueError, match="bytes"):
        cglow.build(compiled, weights=blob[:-1])
    for clash in ("net.c", "net.h", "plan.html"):
        bad = cglow_cmd("emit", model, "-o", str(tmp_path / "bad" / "net.c"), "--report",
                        str(tmp_path / "bad" / "plan.html"), "--weights-file", str(tmp_path / "bad" / clash))
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
        assert "--weights-file" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "bad").exists()


def test_help_documents_exit_statuses():
    from cglow import cli
    commands = cli.build_parser()._subparsers._group_actions[0].choices
    for name in ("info", "check"):
        text = " ".join(commands[name].format_help().split())
        assert "Exit status: 0 when" in text and "; 1 when" in text and "; 2 for bad options" in text, name
    assert "code_bytes_estimate = code_statements x code_bytes_per_statement" in " ".join(
        commands["info"].format_help().split())


def test_capacity_option(tmp_path):
    """--capacity NAME=N lowers an output of run-time length to N entries (the graph output or the NonZero output
    behind its Identity); a bad one is one error line, exit status 2 and no file."""
    nodes = [helper.make_node("NonZero", ["x"], ["idx"]), helper.make_node("Identity", ["idx"], ["coords"]),
             helper.make_node("Relu", ["x"], ["r"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
                              [helper.make_value_info(name, onnx.TypeProto()) for name in ("coords", "r")])
    model = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "m.onnx")
    for name in ("coords", "idx"):
        result = cglow_cmd("emit", model, "-o", str(tmp_path / name / "net.c"), "--capacity", f"{name}=3")
        assert result.returncode == 0, result.stderr
        assert "#define NET_OUTPUT_0_CAPACITY 3 " in (tmp_path / name / "net.h").read_text()
    info = json.loads(cglow_cmd("info", model, "--json", "--capacity", "coords=3").stdout)
    assert info["outputs"][0]["shape"] == [2, 3]
    for args, message in ((["nope=3"], "the model has no tensor 'nope'; its outputs of run-time length: "
                                       "'coords' (int64[2,<=16])"),
                          (["r=3"], "'r' (float32[4,4]) has a static length"),
                          (["coords=0"], "must be a positive number of entries"),
                          (["coords=17"], "above the capacity the model gives 'coords' (int64[2,<=16]), 16"),
                          (["coords"], "expected NAME=N"),
                          (["coords=3", "--capacity", "coords=4"], "--capacity coords: given more than once"),
                          (["coords=3", "--capacity", "idx=4"], "both are computed by NonZero node")):
        result = cglow_cmd("emit", model, "-o", str(tmp_path / "bad" / "net.c"), "--capacity", *args)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("cglow: error: --capacity") and message in line, line
    assert not (tmp_path / "bad").exists()
