"""Cross builds for the cortex-m4 target (cglow.tools.cross, cglow.tools.targets): the keyword-spotting model built with
arm-none-eabi-gcc and run under qemu-system-arm (mps2-an386) against onnxruntime, the instruction count of
the QEMU plugin, the image's symbols; the bare-metal harness itself, built for the host (one invocation, and
a streaming model's sequence with a reset); a small model on every other preset; the cortex-m4-clang preset's
image against the gcc one's."""
from __future__ import annotations

import dataclasses
from pathlib import Path
import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper
import pytest

import cglow
from cglow import zoo
from cglow.tools import cross
from cglow.tools.harness import baremetal_source, parse_output_bits
from cglow.tools.host import STRICT_FLAGS, build_cached
from cglow.instr.ir import Conv
from cglow.tools.matrix import same_bits
from cglow.options import Options
from cglow.tools.targets import TARGETS

from tests.tflite_stream import Stream, frames
from tests.util import need_target, need_tool, ort_run, random_feeds, rel_error

M4 = TARGETS["cortex-m4"]


@pytest.fixture(scope="module")
def kws():
    """The keyword spotter's compiled model, seeded input and cortex-m4 image."""
    for tool in (*M4.tools, "cc"):
        need_tool(tool)
    model = zoo.build("kws")
    feeds = random_feeds(model)
    compiled = cglow.compile_model(model, options=Options(target=M4.tiles))
    inputs = [feeds[t.name] for t in compiled.inputs]
    return model, feeds, compiled, cross.build_image(compiled, inputs, M4)


def test_kws_on_cortex_m4_matches_onnxruntime(kws):
    model, feeds, compiled, image = kws
    run = cross.run_image(image, compiled, M4, count=False)
    (want,) = ort_run(model, feeds)
    assert rel_error(run.outputs[0], want) <= 1e-4
    assert run.instructions is None


def test_instruction_count_is_exact_and_repeatable(kws):
    _, _, compiled, image = kws
    first, second = (cross.run_image(image, compiled, M4).instructions for _ in range(2))
    assert first == second
    macs = sum(int(np.prod(i.out.shape)) * int(np.prod(i.w.shape[1:])) for i in compiled.program.instrs
               if isinstance(i, Conv))
    assert first >= macs > 0  # no float SIMD on a Cortex-M4F: at least one instruction per multiply-add


@pytest.mark.parametrize("opt", [cross.OPT_FLAGS, ("-O0",), ("-Os",), ("-O3",), ("-O2", "-fno-omit-frame-pointer")])
def test_hand_scheduled_float_steps_give_the_c_bits(kws, opt):
    """The Cortex-M4 float kernels' assembly loops (kernels/arm_steps.py float_loop) give the bits of their C
    (runtime_c/mul_add.c), at every level: the image with them and the image without them agree exactly."""
    _, feeds, compiled, _ = kws
    assert compiled.c_source.count("vmul.f32") > 50
    inputs = [feeds[t.name] for t in compiled.inputs]
    without = dataclasses.replace(compiled, c_source=compiled.c_source.replace("#define CGLOW_FP_ASM 1",
                                                                               "#define CGLOW_FP_ASM 0"))
    runs = [cross.run_image(cross.build_image(c, inputs, M4, opt), c, M4, count=False) for c in (compiled, without)]
    assert same_bits(runs[0].outputs, runs[1].outputs)


def test_image_links_no_soft_double_and_fits(kws):
    _, _, compiled, image = kws
    names = cross.symbols(image, M4)
    assert "net_run" in names and "insn_mark" in names
    assert not cross.soft_double_helpers(image, M4)
    helper = cross.SOFT_DOUBLE.match
    assert helper("__aeabi_dadd") and helper("__aeabi_f2d") and helper("__adddf3") and helper("__extendsfdf2")
    assert helper("__truncdfsf2") and helper("__fixdfsi")
    assert not helper("__aeabi_fadd") and not helper("__aeabi_uldivmod")
    text, data, bss = cross.image_size(image, M4)
    assert compiled.weights_bytes < text + data <= M4.flash_bytes
    assert compiled.arena_bytes < data + bss <= M4.ram_bytes


def small_model() -> tuple[cglow.CompiledModel, list[np.ndarray]]:
    """Float, int64 and bool outputs (Exp, ArgMax, Greater) of a 3x5 input, and a seeded input."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])
    outputs = [helper.make_tensor_value_info("e", TensorProto.FLOAT, [3, 5]),
               helper.make_tensor_value_info("a", TensorProto.INT64, [3, 1]),
               helper.make_tensor_value_info("g", TensorProto.BOOL, [3, 5])]
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    nodes = [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("ArgMax", ["x"], ["a"], axis=1),
             helper.make_node("Greater", ["x", "zero"], ["g"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], outputs, [zero]),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return cglow.compile_model(model), [np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)]


def test_baremetal_harness_is_bit_exact_on_the_host():
    """The outputs through their hex bit patterns, the harness built for the host with the strict flags."""
    need_tool("cc")
    compiled, inputs = small_model()
    files = {"net.c": compiled.c_source, "net.h": compiled.h_source,
             "net_main.c": baremetal_source(compiled, inputs)}
    exe = build_cached(files, "cc", ("-O2", *STRICT_FLAGS), "baremetal-host-{}", quiet=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True, check=True)
    (got,) = parse_output_bits(run.stdout, compiled)
    for g, want in zip(got, cglow.build(compiled)(*inputs)):
        assert g.dtype == want.dtype and g.shape == want.shape
        assert g.tobytes() == want.tobytes()


def test_baremetal_harness_runs_a_sequence_on_the_host(tmp_path):
    """A streaming model's invocations in turn, the state kept and net_reset before the fourth: the outputs the
    model built as a host library gives over the same calls, to the bit."""
    need_tool("cc")
    s = Stream(True, seed=3)
    x = s.value("x", [1, 8], scale=0.1, zero=0)
    path = tmp_path / "svdf.tflite"
    path.write_bytes(s.build(x, s.svdf(x, 4, 1, 3)))
    compiled = cglow.compile_model(path)
    runs = [[frame] for frame in frames((1, 8), True)]
    files = {"net.c": compiled.c_source, "net.h": compiled.h_source,
             "net_main.c": baremetal_source(compiled, runs[0], then=runs[1:], resets=[3])}
    exe = build_cached(files, "cc", ("-O2", *STRICT_FLAGS), "baremetal-host-{}", quiet=True)
    got = parse_output_bits(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout, compiled)
    net = cglow.build(compiled)
    want = []
    for k, inputs in enumerate(runs):
        if k == 3:
            net.reset()
        want.append(net(*inputs))
    assert len(got) == len(runs) and same_bits(sum(got, []), sum(want, []))


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_preset_runs_and_counts(name):
    """Each preset (the ones after cortex-m4 are extras) builds, runs under QEMU and counts instructions."""
    target = TARGETS[name]
    for tool in (*target.tools, "cc"):
        need_tool(tool)
    compiled, inputs = small_model()
    run = cross.run_image(cross.build_image(compiled, inputs, target), compiled, target)
    (exp, argmax, greater), (x,) = run.outputs, inputs
    assert rel_error(exp, np.exp(x)) <= 1e-6  # each target's own C library's expf
    assert np.array_equal(argmax, np.argmax(x, axis=1, keepdims=True)) and np.array_equal(greater, x > 0)
    assert run.instructions > 0


PICOLIBC_INCLUDE = "/usr/lib/picolibc/arm-none-eabi/include"


@pytest.mark.parametrize("opt", ["-O0", "-O2", "-Os"])
def test_the_cortex_m4_c_builds_with_clang(tmp_path, opt):
    """The Cortex-M4 C of an int8 and a float model, with its hand-scheduled assembly (kernels/arm_steps.py),
    compiles under clang for armv7em with the strict flags (gcc builds it in every other test here)."""
    need_tool("clang")
    if not Path(PICOLIBC_INCLUDE).is_dir():
        need_tool("picolibc-headers")  # skips on a laptop, fails in CI
    from cglow.quantize import quantize_model
    model = zoo.build("kws")
    calib = {model.graph.input[0].name: np.random.default_rng(0).standard_normal((4, 1, 1, 49, 10)).astype(np.float32)}
    for name, source in (("int8", quantize_model(model, calib)), ("float", model)):
        compiled = cglow.compile_model(source, options=Options(target=M4.tiles))
        assert "__asm__" in compiled.c_source
        (tmp_path / "net.c").write_text(compiled.c_source)
        (tmp_path / "net.h").write_text(compiled.h_source)
        run = subprocess.run(["clang", "--target=armv7em-none-eabihf", "-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16",
                              "-mfloat-abi=hard", "-mthumb", opt, *STRICT_FLAGS, "-isystem", PICOLIBC_INCLUDE,
                              "-c", str(tmp_path / "net.c"), "-o", str(tmp_path / "net.o")],
                             capture_output=True, text=True)
        assert run.returncode == 0 and not run.stderr, (name, run.stderr[:2000])


@pytest.mark.parametrize("int8", [False, True], ids=["float", "int8"])
def test_the_clang_image_gives_the_gcc_images_outputs(int8):
    """kws, float and quantized by cglow, built by the cortex-m4-clang preset (clang compiles, gcc links picolibc)
    gives the outputs of the cortex-m4 image (gcc): an int8 model's to the bit."""
    targets = need_target("cortex-m4"), need_target("cortex-m4-clang")
    from cglow.quantize import quantize_model
    model = zoo.build("kws")
    if int8:
        rng = np.random.default_rng(0)
        model = quantize_model(model, {model.graph.input[0].name: rng.standard_normal((4, 1, 1, 49, 10),
                                                                                      dtype=np.float32)})
    compiled = cglow.compile_model(model, options=Options(target=M4.tiles))
    feeds = random_feeds(model)
    inputs = [np.random.default_rng(1).integers(-128, 128, t.shape).astype(t.dtype) if int8 else feeds[t.name]
              for t in compiled.inputs]
    gcc, clang = (cross.run_image(cross.build_image(compiled, inputs, t), compiled, t, count=False).outputs
                  for t in targets)
    if int8:
        assert same_bits(clang, gcc)
    else:
        assert max(rel_error(c, g) for c, g in zip(clang, gcc)) <= 1e-4
