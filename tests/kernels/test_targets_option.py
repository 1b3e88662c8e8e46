"""--target: the register tile sizes per target, and a one-line refusal of unknown targets."""
import subprocess
import sys

import numpy as np
import pytest

import cglow
from cglow import zoo
from cglow.errors import CglowError
from cglow.tiles import TILES, host_target, tiles_for
from cglow.options import Options
from tests.util import ort_run, rel_error


def test_unknown_target_is_refused():
    with pytest.raises(CglowError, match="--target pdp11: unknown"):
        Options(target="pdp11")


def test_cli_refuses_an_unknown_target_in_one_line(tmp_path):
    model = tmp_path / "kws.onnx"
    model.write_bytes(zoo.build("kws").SerializeToString())
    run = subprocess.run([sys.executable, "-m", "cglow", "emit", str(model), "-o", str(tmp_path / "net.c"),
                          "--target", "pdp11"], capture_output=True, text=True)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "net.c").exists()


@pytest.mark.parametrize("target, tile", [("generic", "acc[4][16]"), ("cortex-m4", "acc[5][4]"), ("cortex-m7", "acc[6][4]"),
                                          ("x86-avx512", "acc[8][32]"), ("x86-avx2", "acc[6][16]")])
def test_target_sets_the_register_tiles_and_the_results_stay(target, tile):
    model = zoo.build("kws")
    compiled = cglow.compile_model(model, name="net", options=Options(target=target))
    assert tile in compiled.c_source
    x = np.random.default_rng(0).standard_normal((1, 1, 49, 10)).astype(np.float32)
    (got,) = cglow.build(compiled)(x)
    (want,) = ort_run(model, {model.graph.input[0].name: x})
    assert rel_error(got, want) < 1e-4


@pytest.mark.parametrize("machine, cpuinfo, target", [
    ("x86_64", "flags\t\t: fpu sse2 avx avx2 fma avx512f avx512dq\n", "x86-avx512"),
    ("x86_64", "flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw avx512_vnni\n", "x86-avx512-vnni"),
    ("x86_64", "flags\t\t: fpu sse2 avx avx2 fma\n", "x86-avx2"),
    ("x86_64", "flags\t\t: fpu sse2\n", "generic"),
    ("AMD64", "", "generic"),
    ("aarch64", "Features\t: fp asimd\n", "aarch64"),
    ("riscv64", "isa\t\t: rv64imafdcv_zicsr_zifencei\n", "rv64gcv"),
    ("riscv64", "isa\t\t: rv64imafdc_zicsr\n", "riscv64-linux"),
    ("ppc64le", "", "generic"),
])
def test_host_target_follows_the_machine(machine, cpuinfo, target):
    assert host_target(machine, cpuinfo) == target


def test_host_target_is_accepted_and_is_one_of_the_tables():
    assert Options(target="host").target == "host"
    assert tiles_for("host") in TILES.values()
