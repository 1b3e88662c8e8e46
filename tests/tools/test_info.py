"""`cglow info`: the facts of a model that compiles (MACs counted independently from the shapes, parameters,
memory, the code size estimate against real compilers), and of one that does not: what the file says, then
every problem, exit status 1."""
from __future__ import annotations

import json
import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper
import pytest

import cglow
from cglow import cli, zoo
from cglow.tools.code_size import code_size
from cglow.options import Options

from tests.tf2onnx_style import dense_int8
from tests.util import need_tool, save, unsupported_model

KWS_MACS = 2_656_768  # as scripts/bench_mcu.py prints for kws


def info_of(capsys, *args: str) -> tuple[int, str]:
    status = cli.main(["info", *args])
    out, err = capsys.readouterr()
    assert not err, err
    return status, out


def conv_model(n=1, c=3, h=9, w=7, m=4, kh=3, kw=2, stride=2, pad=1) -> tuple[onnx.ModelProto, int]:
    """One Conv and its MACs from the shapes: every output element sums C * KH * KW products."""
    oh, ow = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, m, oh, ow])
    weights = onnx.numpy_helper.from_array(np.ones((m, c, kh, kw), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[stride, stride], pads=[pad] * 4)
    model = helper.make_model(helper.make_graph([node], "g", [x], [y], [weights]),
                              opset_imports=[helper.make_opsetid("", 17)])
    return model, n * m * oh * ow * c * kh * kw


def test_kws_json(tmp_path, capsys):
    status, out = info_of(capsys, save(zoo.build("kws"), tmp_path / "kws.onnx"), "--json")
    info = json.loads(out)
    assert status == 0 and info["supported"] is True and info["problems"] == []
    assert set(info) == {"supported", "problems", "inputs", "outputs", "ops", "parameters", "float_layers", "macs",
                         "kernels", "weights_bytes", "arena_bytes", "io_bytes", "ram_bytes", "code_statements",
                         "code_bytes_per_statement", "code_bytes_estimate", "schedule_floor", "naive_floor",
                         "arena_over_naive_floor", "patches"}
    assert info["macs"] == KWS_MACS and info["patches"] is None  # too few MACs to pay for tiles' kernel calls
    assert info["inputs"] == [{"name": "input", "dtype": "float32", "shape": [1, 1, 49, 10]}]
    assert info["outputs"] == [{"name": "output", "dtype": "float32", "shape": [1, 12]}]
    assert info["ops"] == {"AveragePool": 1, "BatchNormalization": 9, "Conv": 9, "Flatten": 1, "Gemm": 1, "Relu": 9,
                           "Softmax": 1}
    model = zoo.build("kws")
    assert info["parameters"] == sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    compiled = cglow.compile_model(model)
    assert (info["weights_bytes"], info["arena_bytes"]) == (compiled.weights_bytes, compiled.arena_bytes)
    assert info["code_bytes_estimate"] == info["code_statements"] * info["code_bytes_per_statement"] > 0
    assert info["code_bytes_per_statement"] == 17  # a vector target (generic)
    status, text = info_of(capsys, str(tmp_path / "kws.onnx"), "--target", "cortex-m4")
    assert status == 0 and "supported: yes" in text and f"MACs: {KWS_MACS} (2.66 M)" in text
    assert "code (flash), estimated: " in text and " x 9 bytes (--target cortex-m4)" in text


@pytest.mark.parametrize("shape", [dict(), dict(stride=1, kh=1, kw=1, pad=0), dict(n=2, m=6, h=5, w=5)])
def test_macs_of_one_conv(tmp_path, capsys, shape):
    model, expected = conv_model(**shape)
    status, out = info_of(capsys, save(model, tmp_path / "conv.onnx"), "--json")
    info = json.loads(out)
    assert status == 0 and info["macs"] == expected and info["ops"] == {"Conv": 1}
    assert info["parameters"] == int(np.prod(model.graph.initializer[0].dims))


def test_unsupported_model_lists_every_problem(tmp_path, capsys):
    path = save(unsupported_model(), tmp_path / "bad.onnx")
    status, text = info_of(capsys, path)
    assert status == 1
    lines = text.splitlines()
    assert lines[:4] == ["inputs:", "  x  float32[4,4]", "outputs:", "  y  float32[]"]
    assert "ops: RandomNormalLike 1, RandomUniformLike 2, Relu 1" in lines and "parameters: 0" in lines
    (problem,) = lines[lines.index("supported: no") + 1:]
    assert "RandomUniformLike ('first det', 'second det')" in problem and "RandomNormalLike ('uq')" in problem
    status, out = info_of(capsys, path, "--json")
    info = json.loads(out)
    assert status == 1 and info["supported"] is False and info["macs"] is None and info["ops"]["RandomUniformLike"] == 2


def test_problems_of_several_kinds_each_on_a_line(tmp_path, capsys):
    """Unsupported ops, inputs without static shapes and an unsupported element type, all listed."""
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, "n"]),
              helper.make_tensor_value_info("b", TensorProto.FLOAT, [4, "m"]),
              helper.make_tensor_value_info("h", TensorProto.FLOAT6E2M3, [4])]
    nodes = [helper.make_node("RandomUniformLike", ["a"], ["d"], name="det"),
             helper.make_node("Abs", ["h"], ["e"], name="abs")]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("e", TensorProto.FLOAT6E2M3, [4])])
    path = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "bad.onnx")
    status, out = info_of(capsys, path, "--json")
    info = json.loads(out)
    assert status == 1 and len(info["problems"]) >= 4
    for part in ("RandomUniformLike ('det')", "pass --shape a=", "pass --shape b=", "float6_e2m3fn ('h')"):
        assert sum(part in problem for problem in info["problems"]) == 1, part
    assert info["inputs"][0] == {"name": "a", "dtype": "float32", "shape": [4, "n"]}
    status, out = info_of(capsys, path, "--json", "--shape", "a=4,2")
    assert json.loads(out)["inputs"][0]["shape"] == [4, 2] and "--shape a=" not in out


def test_bad_options_and_files_exit_2(tmp_path, capsys):
    path = save(zoo.build("autoencoder"), tmp_path / "ae.onnx")
    for args, message in (([path, "--shape", "nothing=1,2"], "--shape names no graph input: nothing"),
                          ([str(tmp_path / "missing.onnx")], "missing.onnx: no such file")):
        assert cli.main(["info", *args]) == 2
        out, err = capsys.readouterr()
        assert not out and len(err.splitlines()) == 1 and err.startswith("cglow: error: ") and message in err


def test_quantized_io_has_scale(tmp_path, capsys):
    from cglow.quantize import quantize_model
    model = zoo.build("autoencoder")
    calib = {"input": np.random.default_rng(0).standard_normal((4, 1, 640)).astype(np.float32)}
    status, out = info_of(capsys, save(quantize_model(model, calib), tmp_path / "q.onnx"), "--json")
    (x,) = json.loads(out)["inputs"]
    assert status == 0 and x["dtype"] == "int8" and x["scale"] > 0 and -128 <= x["zero_point"] <= 127


def test_float_layers_of_an_int8_model_are_named_with_why(tmp_path, capsys):
    """An int8 model's layer that cglow runs in float gets one line (with its bias and activation, a group),
    saying why; an integer model and a float one get none."""
    model = dense_int8((64, 32, 16))
    status, out = info_of(capsys, save(model, tmp_path / "int8.onnx"))
    assert status == 0 and "runs in float" not in out
    add = next(n for n in model.graph.node if n.name == "dense_0/BiasAdd")
    add.input[1] = "runtime_bias"
    model.graph.input.append(helper.make_tensor_value_info("runtime_bias", TensorProto.FLOAT, [32]))
    status, out = info_of(capsys, save(model, tmp_path / "bias.onnx"))
    assert [line for line in out.splitlines() if "runs in float" in line] == [
        "  runs in float: MatMul 'dense_0' (its bias is not a constant per channel)"]
    status, out = info_of(capsys, save(model, tmp_path / "bias.onnx"), "--json")
    assert json.loads(out)["float_layers"] == [
        "runs in float: MatMul 'dense_0' (its bias is not a constant per channel)"]
    status, out = info_of(capsys, save(zoo.build("kws"), tmp_path / "kws.onnx"))
    assert status == 0 and "runs in float" not in out


def object_text_bytes(cc: str, size: str, c_source: str, h_source: str, flags, tmp_path) -> int:
    (tmp_path / "net.c").write_text(c_source)
    (tmp_path / "net.h").write_text(h_source)
    subprocess.run([cc, "-O2", "-std=c99", *flags, "-c", str(tmp_path / "net.c"), "-o", str(tmp_path / "net.o")],
                   check=True)
    out = subprocess.run([size, str(tmp_path / "net.o")], capture_output=True, text=True, check=True).stdout
    return int(out.splitlines()[1].split()[0])


@pytest.mark.parametrize("target, cc, size, flags", [
    ("generic", "gcc", "size", ()),
    ("cortex-m4", "arm-none-eabi-gcc", "arm-none-eabi-size",
     ("-mthumb", "-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"))])
def test_code_size_estimate_is_near_the_compiled_size(tmp_path, target, cc, size, flags):
    """The estimate against the text of the object a compiler makes (weights in a file of their own)."""
    need_tool(cc)
    need_tool(size)
    for name in ("kws", "resnet8"):
        compiled = cglow.compile_model(zoo.build(name), options=Options(target=target, external_weights=True))
        real = object_text_bytes(cc, size, compiled.c_source, compiled.h_source, flags, tmp_path)
        estimate = code_size(compiled.c_source, target).estimate
        assert 0.5 * real <= estimate <= 2 * real, (name, estimate, real)
