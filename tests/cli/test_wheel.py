"""`pip install .` gives a working cglow: a wheel built from a copy of the source tree holds every file of the
package (templates included, and the repository's runtime_c/ as cglow/runtime_c), and installed without
dependencies into a new virtual environment (which sees the system's numpy, onnx and jinja2) its `cglow emit`
writes C that compiles, importing cglow from the environment, not from the source tree."""
from __future__ import annotations

import os
from pathlib import Path
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import onnx
import pytest

from cglow.tools.host import STRICT_FLAGS

from tests.small_cnn import calibration, small_cnn
from tests.util import ROOT, need_tool


def run(*command, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The command, without PYTHONPATH: a source tree on it would be imported instead of the environment's cglow."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([str(c) for c in command], check=False, cwd=cwd, capture_output=True, text=True, env=env)
    assert result.returncode == 0, f"{' '.join(map(str, command))} failed:\n{result.stdout}{result.stderr}"
    return result


def package_files(folder: Path, inside: str = "") -> set[str]:
    """The files under folder, named as the wheel places them (under `inside`, a folder of the package)."""
    return {str(Path(inside) / p.relative_to(folder.parent)) for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of a copy of the tree (a build in the tree itself would leave build/ there), built offline."""
    tmp = tmp_path_factory.mktemp("wheel")
    tree = tmp / "src"
    for folder in ("cglow", "runtime_c"):
        shutil.copytree(ROOT / folder, tree / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
        "--disable-pip-version-check", "-w", tmp / "dist", tree)
    (built,) = (tmp / "dist").glob("cglow-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A new virtual environment with the wheel installed (no dependencies: the system's are visible)."""
    env = tmp_path_factory.mktemp("venv") / "env"
    run(sys.executable, "-m", "venv", "--system-site-packages", env)
    run(env / "bin" / "python", "-m", "pip", "install", "--no-deps", "--no-index", "-q",
        "--disable-pip-version-check", wheel)
    return env


def test_wheel_holds_every_package_file(wheel):
    with zipfile.ZipFile(wheel) as archive:
        packed = {name for name in archive.namelist() if name.startswith("cglow/")}
    missing = (package_files(ROOT / "cglow") | package_files(ROOT / "runtime_c", "cglow")) - packed
    assert not missing, f"pyproject.toml's package-data leaves out {sorted(missing)}"
    assert {"cglow/kernels/macros.j2", "cglow/emit_c/net.h.j2", "cglow/runtime_c/fma.c"} <= packed


def test_installed_cglow_emits_c_that_compiles(venv, tmp_path):
    cc = need_tool("cc")
    onnx.save(small_cnn(), tmp_path / "model.onnx")
    np.savez(tmp_path / "calib.npz", **calibration())
    where = run(venv / "bin" / "python", "-c", "import cglow; print(cglow.__file__)", cwd=tmp_path).stdout.strip()
    assert Path(where).is_relative_to(venv), f"cglow imported from {where}, not from the environment {venv}"
    for out, options in (("out/net.c", []), ("int8/net.c", ["--int8", "--calib", "calib.npz"])):
        run(venv / "bin" / "cglow", "emit", "model.onnx", "-o", out, *options, cwd=tmp_path)
        c_file = tmp_path / out
        assert c_file.with_suffix(".h").is_file() and "int net_run(" in c_file.read_text()
        run(cc, "-O1", *STRICT_FLAGS, "-c", c_file, "-o", c_file.with_suffix(".o"), cwd=tmp_path)
